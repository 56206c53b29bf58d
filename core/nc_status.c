#include "nc_status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

nc_status nc_fail(nc_error *err, nc_status code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
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

int nc_add_size(size_t a, size_t b, size_t *out)
{
    if (b > SIZE_MAX - a)
        return -1;
    *out = a + b;
    return 0;
}
