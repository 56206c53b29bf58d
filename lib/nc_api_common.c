/* nc_api_common.c — version, status names, errors and the engine table of
 * libneurocuda (neurocuda.h). */
#include "nc_api_private.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "nc_config.h"

/* The public codes are the library's own, in the same order. */
_Static_assert(NEUROCUDA_ERR_INTERNAL == (int)NC_ERR_INTERNAL, "neurocuda_status follows nc_status");
_Static_assert(NEUROCUDA_MESSAGE_MAX == NC_ERROR_MESSAGE_MAX, "messages have one size");

const char *neurocuda_version(void) { return NC_VERSION; }

const char *neurocuda_status_name(int status)
{
    if (status < NEUROCUDA_OK || status > NEUROCUDA_ERR_INTERNAL)
        return "unknown";
    return nc_status_name((nc_status)status);
}

int nc_api_error(neurocuda_error *out, const nc_error *err, nc_status st)
{
    if (out) {
        out->status = st;
        if (st == NC_OK)
            out->message[0] = 0;
        else if (err && err->message[0])
            snprintf(out->message, sizeof out->message, "%s", err->message);
        else
            snprintf(out->message, sizeof out->message, "failed (%s)", nc_status_name(st));
    }
    return st;
}

int nc_api_fail(neurocuda_error *out, nc_status st, const char *fmt, ...)
{
    nc_error e = {0};
    va_list ap;
    va_start(ap, fmt);
    nc_failv(&e, st, fmt, ap);
    va_end(ap);
    return nc_api_error(out, &e, st);
}

int neurocuda_engine_count(void) { return nc_engine_count(); }

const char *neurocuda_engine_name(int i)
{
    const nc_engine_info *info = nc_engine_at(i);
    return info ? info->name : NULL;
}

const char *neurocuda_engine_description(int i)
{
    const nc_engine_info *info = nc_engine_at(i);
    return info ? info->description : NULL;
}

int neurocuda_engine_available(const char *name, char *why, size_t size)
{
    const nc_engine_info *info = name ? nc_engine_find(name) : NULL;
    if (!info) {
        if (why && size)
            snprintf(why, size, "no engine is called '%s'", name ? name : "(none)");
        return 0;
    }
    char reason[512] = "";
    int ok = info->available(reason, sizeof reason);
    if (why && size)
        snprintf(why, size, "%s", ok ? "" : reason);
    return ok;
}

void nc_api_append(char *buf, size_t size, size_t *used, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(*used < size ? buf + *used : NULL, *used < size ? size - *used : 0, fmt, ap);
    va_end(ap);
    if (n > 0)
        *used += (size_t)n;
}
