#include "nc_status.h"

#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A message is one line: control characters (which names read from a
 * damaged file may hold) become '?'. */
static void one_line(char *text)
{
    for (unsigned char *p = (unsigned char *)text; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            *p = '?';
}

nc_status nc_failv(nc_error *err, nc_status code, const char *fmt, va_list ap)
{
    if (err) {
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        one_line(err->message);
        err->code = code;
    }
    return code;
}

nc_status nc_fail(nc_error *err, nc_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    nc_failv(err, code, fmt, ap);
    va_end(ap);
    return code;
}

void nc_append_linev(char *buf, size_t size, const char *fmt, va_list ap)
{
    size_t used = strlen(buf);
    if (used + 2 >= size)
        return;
    vsnprintf(buf + used, size - used - 1, fmt, ap);
    strcat(buf, "\n");
}

void nc_error_prefix(nc_error *err, const char *fmt, ...)
{
    if (!err)
        return;
    char prefix[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    char joined[NC_ERROR_MESSAGE_MAX];
    snprintf(joined, sizeof joined, "%s: %s", prefix, err->message);
    memcpy(err->message, joined, sizeof joined);
    one_line(err->message);
}

const char *nc_status_name(nc_status code)
{
    switch (code) {
    case NC_OK: return "ok";
    case NC_ERR_IO: return "io";
    case NC_ERR_FORMAT: return "format";
    case NC_ERR_UNSUPPORTED: return "unsupported";
    case NC_ERR_SHAPE: return "shape";
    case NC_ERR_MEMORY: return "memory";
    case NC_ERR_ARGUMENT: return "argument";
    case NC_ERR_CANCELLED: return "cancelled";
    case NC_ERR_DEVICE: return "device";
    case NC_ERR_INTERNAL: return "internal";
    }
    return "unknown";
}

int nc_mul_size(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > SIZE_MAX / a)
        return -1;
    *out = a * b;
    return 0;
}

void *nc_grow(void *items, int n, int *cap, int first, size_t size)
{
    if (n < *cap)
        return items;
    if (*cap > INT_MAX / 2) /* before doubling: an int overflow is undefined behaviour */
        return NULL;
    int grown_cap = *cap ? 2 * *cap : first;
    size_t bytes;
    if (nc_mul_size((size_t)grown_cap, size, &bytes) != 0)
        return NULL;
    void *grown = realloc(items, bytes);
    if (grown)
        *cap = grown_cap;
    return grown;
}

int nc_strings_add(char ***items, int *count, int *cap, const char *text)
{
    char **grown = nc_grow(*items, *count, cap, 16, sizeof *grown);
    if (!grown)
        return -1;
    *items = grown;
    if (!(grown[*count] = strdup(text)))
        return -1;
    (*count)++;
    return 0;
}

int nc_strings_addv(char ***items, int *count, int *cap, const char *fmt, va_list ap)
{
    char line[1024];
    vsnprintf(line, sizeof line, fmt, ap);
    return nc_strings_add(items, count, cap, line);
}

void nc_strings_free(char **items, int n)
{
    for (int i = 0; items && i < n; i++)
        free(items[i]);
    free(items);
}

int nc_add_size(size_t a, size_t b, size_t *out)
{
    if (b > SIZE_MAX - a)
        return -1;
    *out = a + b;
    return 0;
}

int nc_shape_bytes(int ndim, const int64_t *dims, size_t elem_size, size_t *out)
{
    size_t n = elem_size;
    if (ndim < 0)
        return -1;
    for (int d = 0; d < ndim; d++)
        if (dims[d] < 0 || (uint64_t)dims[d] > SIZE_MAX || nc_mul_size(n, (size_t)dims[d], &n) != 0)
            return -1;
    *out = n;
    return 0;
}

/* 0 = not set yet: the first call reads NC_MEMORY_BUDGET. */
static _Atomic size_t budget_bytes;

static size_t budget_from_env(void)
{
    const char *text = getenv("NC_MEMORY_BUDGET");
    if (!text || !*text)
        return NC_MEMORY_BUDGET_DEFAULT;
    char *end = NULL;
    unsigned long long v = strtoull(text, &end, 10);
    unsigned shift = 0;
    if (end && (*end == 'k' || *end == 'K'))
        shift = 10, end++;
    else if (end && (*end == 'm' || *end == 'M'))
        shift = 20, end++;
    else if (end && (*end == 'g' || *end == 'G'))
        shift = 30, end++;
    if (end == text || !end || *end || v == 0 || v > (SIZE_MAX >> shift))
        return NC_MEMORY_BUDGET_DEFAULT; /* unreadable: keep the default */
    return (size_t)v << shift;
}

size_t nc_memory_budget(void)
{
    size_t b = atomic_load(&budget_bytes);
    if (b == 0) {
        b = budget_from_env();
        atomic_store(&budget_bytes, b);
    }
    return b;
}

void nc_set_memory_budget(size_t bytes) { atomic_store(&budget_bytes, bytes); }

nc_status nc_budget_check(size_t bytes, const char *what, nc_error *err)
{
    size_t budget = nc_memory_budget();
    if (bytes <= budget)
        return NC_OK;
    return nc_fail(err, NC_ERR_MEMORY,
                   "%s needs %zu bytes, more than the memory budget (%zu bytes); if the file is really that "
                   "large, raise NC_MEMORY_BUDGET (e.g. NC_MEMORY_BUDGET=16G)",
                   what, bytes, budget);
}
