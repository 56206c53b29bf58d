/* nc_train_backend.h — where the trainer's arithmetic runs (CPU or GPU).
 *
 * The trainer (sim/nc_train.c) walks the network, keeps the activations and
 * calls these operations; a backend owns the memory they work on and the
 * kernels.  "cpu" (sim/nc_train_backend_cpu.c) wraps nc_cpu_ops.h and
 * nc_grad_ops.h; "gpu" (gpu/nc_gpu_train.cu) runs CUDA kernels and cuBLAS on
 * device memory.  So one trainer serves both and their results can be
 * compared operation by operation (tests/test_gpu_train.c).
 *
 * Every pointer given to an operation is one the backend allocated (device
 * memory for "gpu"), except the `host` side of upload/download and the
 * nc_window / nc_if_params / nc_opt_tensor / nc_opt_step structs themselves
 * (plain host structs; the threshold and tensors they point to are backend
 * memory).  Semantics, layouts and the
 * "din overwritten, parameter gradients accumulated" rule are exactly those of
 * nc_cpu_ops.h (forward) and nc_grad_ops.h (backward): a backend is correct
 * when it agrees with them within float rounding.
 *
 * Errors: operations return nothing; a backend records the FIRST failure
 * (an allocation, a CUDA launch, a cuBLAS call) with the call and the reason,
 * skips further work, and reports it at the next sync().  alloc returns NULL
 * on failure (also recorded). */
#ifndef NC_TRAIN_BACKEND_H
#define NC_TRAIN_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "../core/nc_status.h"
#include "nc_if_params.h"
#include "nc_window.h"
#include "nc_surrogate.h"

typedef struct nc_train_backend nc_train_backend;

/* One parameter tensor of optimizer_step: backend pointers of `count` values
 * each (v unused by SGD, may be NULL), weight decay on or off, and the clamp
 * of thresholds (value = max(value, min_value) after the step). */
typedef struct nc_opt_tensor {
    float *value;
    const float *grad;
    float *m, *v;
    int64_t count;
    int decay;
    int clamp;
} nc_opt_tensor;

/* The hyper-parameters of one optimiser step, for every tensor. */
typedef struct nc_opt_step {
    int adam;                            /* 1: Adam, 0: SGD (momentum)              */
    double lr, momentum;                 /* momentum: SGD only                      */
    double beta1, beta2, epsilon, c1, c2; /* Adam; c1 = 1−β1^t, c2 = 1−β2^t          */
    double weight_decay;                 /* for the tensors with decay set, else 0  */
    float min_value;                     /* the clamp's bound                       */
} nc_opt_step;

typedef struct nc_train_backend_ops {
    const char *name; /* "cpu", "gpu" */
    void (*destroy)(nc_train_backend *b);

    /* ---- memory (floats; alloc returns zero-filled memory) ---- */
    float *(*alloc)(nc_train_backend *b, size_t floats);
    void (*release)(nc_train_backend *b, float *p); /* NULL is a no-op */
    void (*zero)(nc_train_backend *b, float *p, size_t floats);
    void (*copy)(nc_train_backend *b, float *dst, const float *src, size_t floats);
    void (*upload)(nc_train_backend *b, float *dst, const float *host, size_t floats);
    void (*download)(nc_train_backend *b, float *host, const float *src, size_t floats);
    /* Plain bytes (int32 labels, the loss's doubles): alloc_bytes returns
     * zero-filled memory aligned for doubles (NULL on failure, recorded),
     * release_bytes frees it (NULL is a no-op).  upload_bytes waits for the
     * copy as upload does; download_bytes is only QUEUED: host holds the
     * bytes after the next sync() (the trainer reads the step's loss at the
     * step's final sync, no sync of its own). */
    void *(*alloc_bytes)(nc_train_backend *b, size_t bytes);
    void (*release_bytes)(nc_train_backend *b, void *p);
    void (*upload_bytes)(nc_train_backend *b, void *dst, const void *host, size_t bytes);
    void (*download_bytes)(nc_train_backend *b, void *host, const void *src, size_t bytes);
    /* rows × len floats from src (row stride src_stride) to dst (dst_stride) */
    void (*copy_rows)(nc_train_backend *b, float *dst, int64_t dst_stride, const float *src,
                      int64_t src_stride, int64_t rows, int64_t len);

    /* ---- element-wise helpers ---- */
    void (*add)(nc_train_backend *b, int64_t n, const float *x, const float *y, float *out); /* x + y */
    void (*sub)(nc_train_backend *b, int64_t n, const float *x, const float *y, float *out); /* x − y */
    /* out[k] = (1/T)·Σ_t y[t·per + k], summed in double, k < per */
    void (*mean_steps)(nc_train_backend *b, int T, int64_t per, const float *y, float *out);
    /* out[t·per + k] = in[k]·scale for t < T (spreads dlogits over the steps) */
    void (*broadcast_steps)(nc_train_backend *b, int T, int64_t per, const float *in, float scale, float *out);

    /* ---- forward (nc_cpu_ops.h) ---- */
    void (*conv2d)(nc_train_backend *b, const nc_window *g, int cout, int groups, int64_t rows, const float *in,
                   const float *weight, const float *bias, float *out);
    void (*dense)(nc_train_backend *b, int64_t rows, int fin, int fout, const float *in, const float *weight,
                  const float *bias, float *out);
    void (*avgpool)(nc_train_backend *b, const nc_window *g, int count_include_pad, int64_t rows, const float *in,
                    float *out);
    void (*maxpool)(nc_train_backend *b, const nc_window *g, int64_t rows, const float *in, float *out);
    void (*global_avgpool)(nc_train_backend *b, int64_t rows, int c, int64_t hw, const float *in, float *out);
    void (*affine)(nc_train_backend *b, int64_t rows, int c, int64_t inner, const float *scale, const float *shift,
                   const float *in, float *out);
    void (*relu)(nc_train_backend *b, int64_t n, const float *in, float *out);
    void (*clip)(nc_train_backend *b, int64_t n, float lo, float hi, const float *in, float *out);
    void (*qcfs)(nc_train_backend *b, int64_t rows, int c, int64_t inner, const float *lambda, int n_lambda,
                 int levels, float shift, const float *in, float *out);
    void (*if_forward_train)(nc_train_backend *b, const nc_if_params *p, int T, int64_t n, int c, int64_t inner,
                             const float *in, float *out, float *m_saved);

    /* ---- backward (nc_grad_ops.h) ---- */
    void (*conv2d_backward)(nc_train_backend *b, const nc_window *g, int cout, int groups, int64_t rows,
                            const float *in, const float *weight, const float *dout, float *din, float *dweight,
                            float *dbias);
    void (*dense_backward)(nc_train_backend *b, int64_t rows, int fin, int fout, const float *in,
                           const float *weight, const float *dout, float *din, float *dweight, float *dbias);
    void (*avgpool_backward)(nc_train_backend *b, const nc_window *g, int count_include_pad, int64_t rows,
                             const float *dout, float *din);
    void (*maxpool_backward)(nc_train_backend *b, const nc_window *g, int64_t rows, const float *in,
                             const float *dout, float *din);
    void (*global_avgpool_backward)(nc_train_backend *b, int64_t rows, int c, int64_t hw, const float *dout,
                                    float *din);
    void (*affine_backward)(nc_train_backend *b, int64_t rows, int c, int64_t inner, const float *scale,
                            const float *in, const float *dout, float *din, float *dscale, float *dshift);
    void (*relu_backward)(nc_train_backend *b, int64_t n, const float *in, const float *dout, float *din);
    void (*clip_backward)(nc_train_backend *b, int64_t n, float lo, float hi, const float *in, const float *dout,
                          float *din);
    void (*qcfs_backward)(nc_train_backend *b, int64_t rows, int c, int64_t inner, const float *lambda,
                          int n_lambda, int levels, float shift, const float *in, const float *dout, float *din,
                          float *dlambda);
    void (*if_backward)(nc_train_backend *b, const nc_if_params *p, nc_surrogate surrogate, float alpha, int T,
                        int64_t n, int c, int64_t inner, const float *m_saved, const float *dout, float *din,
                        float *dthreshold);

    /* ---- the output loss (nc_grad_ops.h), on backend memory ----
     * nc_distill_xent(rows, classes, logits, teacher, labels, alpha, tau)
     * (nc_softmax_xent when teacher is NULL or α = 0), all four backend
     * memory (labels: rows int32 of alloc_bytes memory; teacher [rows,
     * classes] or NULL).  Writes sums[0] = the mean loss the function returns
     * and sums[1] = the rows it counts correct (from 0; sums: 2 doubles of
     * alloc_bytes memory, overwritten), and, when dlogits is set, the
     * function's dlogits times `scale` (in float: the data-parallel share; 1
     * leaves them unchanged).  Queued without a host sync, so a training step
     * runs from the forward into the backward and reads sums at its final
     * sync.  Per row in double in the CPU function's order, rows summed in row
     * order: the GPU differs only by its exp/log in the last bits. */
    void (*output_loss)(nc_train_backend *b, int64_t rows, int classes, const float *logits, const int32_t *labels,
                        const float *teacher, double alpha, double tau, float scale, float *dlogits, double *sums);

    /* ---- optimiser: one step over `count` values, in place ----
     * g = grad + weight_decay·value; then
     *   SGD:  m = momentum·m + g;  value −= lr·m
     *   Adam: m = β1·m + (1−β1)·g;  v = β2·v + (1−β2)·g²;
     *         value −= lr·(m/c1) / (sqrt(v/c2) + ε)     (c1 = 1−β1^t, c2 = 1−β2^t)
     * and finally value = max(value, min_value) when clamp is set (thresholds).
     * Arithmetic in double per value, stored as float (as sim/nc_train.c). */
    void (*sgd_step)(nc_train_backend *b, int64_t count, float *value, const float *grad, float *m, double lr,
                     double momentum, double weight_decay, int clamp, float min_value);
    void (*adam_step)(nc_train_backend *b, int64_t count, float *value, const float *grad, float *m, float *v,
                      double lr, double beta1, double beta2, double epsilon, double c1, double c2,
                      double weight_decay, int clamp, float min_value);
    /* The same step over n tensors at once (tensors: a host array of host
     * structs holding backend pointers): for each, sgd_step or adam_step
     * (step->adam) with weight_decay = decay ? step->weight_decay : 0 and its
     * clamp, the same arithmetic bit for bit.  The GPU runs ONE kernel over all
     * values, its table of tensors uploaded when the set changes (compared
     * with the last call's), so a trainer calling it each step with the same
     * array pays one launch; the CPU loops over its per-tensor functions. */
    void (*optimizer_step)(nc_train_backend *b, const nc_opt_tensor *tensors, int n, const nc_opt_step *step);

    /* Waits for queued work; returns NC_OK or the first error recorded since
     * the backend was made (naming the call and the reason), which stays. */
    nc_status (*sync)(nc_train_backend *b, nc_error *err);

    /* ---- a training step as one recorded graph (optional: NULL on the CPU) ----
     * The trainer brackets the work of a step — forward, loss, backward —
     * with step_begin and step_end when that work queues the same operations
     * on the same memory at every step of the same (owner, batch): no alloc,
     * release, upload, download or sync inside, and every argument the same
     * (the inputs are uploaded before step_begin, the loss read after
     * step_end).  step_begin says what to do with the work:
     *   NC_STEP_RUN     queue it as usual (the first step of a shape plans
     *                   the convolutions and sizes the buffers);
     *   NC_STEP_RECORD  queue it: it is recorded, not run, and step_end runs it;
     *   NC_STEP_REPLAY  queue nothing: step_end runs the recorded work.
     * step_end returns 1 when the recording failed (a call that cannot be
     * recorded): the trainer then queues the work again as usual, and that
     * shape is not recorded again while its memory stays; else 0 (a failure
     * to run is recorded as any other and reported at the next sync).  A
     * recording is forgotten when memory it used may have been freed.  describe writes one line per
     * recorded shape (NUL-terminated, truncated to size). */
    int (*step_begin)(nc_train_backend *b, uintptr_t owner, int64_t batch);
    int (*step_end)(nc_train_backend *b);
    void (*describe)(nc_train_backend *b, char *buf, size_t size);
} nc_train_backend_ops;

enum { NC_STEP_RUN = 0, NC_STEP_RECORD = 1, NC_STEP_REPLAY = 2 };

struct nc_train_backend {
    const nc_train_backend_ops *ops;
    void *impl;
};

/* "cpu" or "gpu"; fails with a clear message when the GPU backend is not
 * compiled in or no device is usable. */
nc_status nc_train_backend_new(const char *name, nc_train_backend **out, nc_error *err);
void nc_train_backend_free(nc_train_backend *b); /* NULL is a no-op */

nc_status nc_train_backend_cpu_new(nc_train_backend **out, nc_error *err);
/* Implemented in gpu/nc_gpu_train.cu; only present when NC_HAVE_CUDA. */
nc_status nc_train_backend_gpu_new(nc_train_backend **out, nc_error *err);

#endif
