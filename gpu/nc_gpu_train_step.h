// nc_gpu_train_step.h — the GPU trainer's step operations (C++, gpu/ only):
// the output loss on the device (so a training step needs no host sync
// between its forward and its backward), the optimisers per tensor and over
// every tensor in one launch, and the plain-byte memory the loss works on.
// They are operations of sim/nc_train_backend.h, implemented in
// nc_gpu_train_step.cu and registered by nc_gpu_train.cu, which owns the
// backend's state and lends the step file what it needs (nc_gt_lent).
#ifndef NC_GPU_TRAIN_STEP_H
#define NC_GPU_TRAIN_STEP_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include "sim/nc_train_backend.h"
}

struct nc_opt_table; // the device copy of optimizer_step's tensor list

// ---- lent by nc_gpu_train.cu ----
// What the step operations need of the backend that owns them, lent as a
// table (nc_gts_lend, when a backend is made) rather than called by name, so
// that this file depends on nothing of nc_gpu_train.cu, which registers it.
struct nc_gt_lent {
    cudaStream_t (*stream)(nc_train_backend *b);
    bool (*usable)(nc_train_backend *b); // no failure recorded yet
    // Records a CUDA failure of `call` in operation `op` (the first one is
    // kept); true when e is one.
    bool (*cuda_failed)(nc_train_backend *b, const char *op, const char *call, cudaError_t e);
    // The backend's reduction scratch, at least `doubles` long (NULL after a failure).
    double *(*scratch)(nc_train_backend *b, const char *op, size_t doubles);
    nc_opt_table **(*opt_table)(nc_train_backend *b); // the backend's slot, freed with it
};
void nc_gts_lend(const nc_gt_lent *lent); // the same table for every backend
void nc_opt_table_free(nc_opt_table *t);             // NULL is a no-op

// ---- the operations (nc_train_backend.h) ----
void *gts_alloc_bytes(nc_train_backend *b, size_t bytes);
void gts_release_bytes(nc_train_backend *b, void *p);
void gts_upload_bytes(nc_train_backend *b, void *dst, const void *host, size_t bytes);
void gts_download_bytes(nc_train_backend *b, void *host, const void *src, size_t bytes);
void gts_output_loss(nc_train_backend *b, int64_t rows, int classes, const float *logits, const int32_t *labels,
                     const float *teacher, double alpha, double tau, float scale, float *dlogits, double *sums);
void gts_sgd_step(nc_train_backend *b, int64_t count, float *value, const float *grad, float *m, double lr,
                  double momentum, double weight_decay, int clamp, float min_value);
void gts_adam_step(nc_train_backend *b, int64_t count, float *value, const float *grad, float *m, float *v,
                   double lr, double beta1, double beta2, double epsilon, double c1, double c2, double weight_decay,
                   int clamp, float min_value);
void gts_optimizer_step(nc_train_backend *b, const nc_opt_tensor *tensors, int n, const nc_opt_step *step);

#endif
