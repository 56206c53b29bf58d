#include "nc_tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int64_t nc_shape_numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return 0;
        if (shape[i] != 0 && n > INT64_MAX / shape[i])
            return -1;
        n *= shape[i];
    }
    return n;
}

nc_tensor *nc_tensor_new(int ndim, const int64_t *shape)
{
    if (ndim < 0 || ndim > NC_MAX_DIMS)
        return NULL;
    int64_t n = nc_shape_numel(ndim, shape);
    if (n < 0 || (uint64_t)n > SIZE_MAX / sizeof(float))
        return NULL;
    nc_tensor *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        t->shape[i] = shape[i];
    t->data = calloc(n > 0 ? (size_t)n : 1, sizeof(float));
    if (!t->data) {
        free(t);
        return NULL;
    }
    return t;
}

nc_tensor *nc_tensor_new1(int64_t d0) { return nc_tensor_new(1, &d0); }

nc_tensor *nc_tensor_new2(int64_t d0, int64_t d1)
{
    int64_t s[2] = {d0, d1};
    return nc_tensor_new(2, s);
}

nc_tensor *nc_tensor_new4(int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    int64_t s[4] = {d0, d1, d2, d3};
    return nc_tensor_new(4, s);
}

nc_tensor *nc_tensor_copy(const nc_tensor *t)
{
    if (!t)
        return NULL;
    nc_tensor *c = nc_tensor_new(t->ndim, t->shape);
    if (c)
        memcpy(c->data, t->data, (size_t)nc_tensor_numel(t) * sizeof(float));
    return c;
}

void nc_tensor_free(nc_tensor *t)
{
    if (!t)
        return;
    free(t->data);
    free(t);
}

int64_t nc_tensor_numel(const nc_tensor *t) { return nc_shape_numel(t->ndim, t->shape); }

const char *nc_shape_str(int ndim, const int64_t *shape, char *buf, size_t size)
{
    size_t used = 0;
    used += (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}
