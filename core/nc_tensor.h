/* nc_tensor.h — a float32 array of up to NC_MAX_DIMS dimensions, row-major.
 *
 * Layout letters, used everywhere in the project:
 *   N = samples in a batch, T = time steps, C = channels, H = height, W = width,
 *   F = features of a dense layer.
 * A batch of images is [N, C, H, W]; a batch over time is [T, N, ...] (T is the
 * slowest axis, so "T folded into the rows" of a GEMM is a plain reshape).
 * Network nodes store shapes WITHOUT the batch axis (e.g. [C, H, W]). */
#ifndef NC_TENSOR_H
#define NC_TENSOR_H

#include "nc_status.h"

#define NC_MAX_DIMS 5

typedef struct nc_tensor {
    int ndim;
    int64_t shape[NC_MAX_DIMS];
    float *data; /* numel floats, owned by the tensor */
} nc_tensor;

/* A zero-filled tensor; NULL when the size overflows or memory runs out. */
nc_tensor *nc_tensor_new(int ndim, const int64_t *shape);
/* Convenience: nc_tensor_new with the dimensions as arguments. */
nc_tensor *nc_tensor_new1(int64_t d0);
nc_tensor *nc_tensor_new2(int64_t d0, int64_t d1);
nc_tensor *nc_tensor_new4(int64_t d0, int64_t d1, int64_t d2, int64_t d3);
nc_tensor *nc_tensor_copy(const nc_tensor *t);
void nc_tensor_free(nc_tensor *t); /* NULL is a no-op */

int64_t nc_tensor_numel(const nc_tensor *t);
/* Product of shape[0..ndim-1]; 0 for any negative dimension; -1 on overflow. */
int64_t nc_shape_numel(int ndim, const int64_t *shape);
/* Formats a shape as "[1, 28, 28]" into buf. */
const char *nc_shape_str(int ndim, const int64_t *shape, char *buf, size_t size);

#endif
