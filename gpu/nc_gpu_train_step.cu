// nc_gpu_train_step.cu — the GPU trainer's step operations (see
// nc_gpu_train_step.h): the output loss and the optimisers.
//
//   - output_loss: the loss used to be computed on the host, which cost a
//     download and a sync in the middle of every step.  Here one thread per
//     row runs the CPU function's own row code (sim/nc_loss_rows.h: the same
//     first-maximum argmax, the same log-sum-exps in double, in the same
//     order, -fmad=false so nothing is contracted), and one thread then adds
//     the rows' losses in row order, as the CPU's loop does: the two backends
//     differ only by CUDA's double exp/log (1 ulp) against glibc's.
//   - the optimisers: the per-value arithmetic lives once (sgd_value,
//     adam_value) and serves the per-tensor kernels and the multi-tensor one,
//     so the two agree bit for bit; that arithmetic is the CPU's
//     (sim/nc_train_backend_cpu.c) with explicitly rounded intrinsics.
//     optimizer_step replaces a launch per tensor (hundreds per step on a
//     deep net, each a few microseconds of launch for a few thousand values)
//     by one launch over all values; each thread finds its tensor by binary
//     search over the tensors' start offsets in a small device table,
//     uploaded only when the tensor set changes.
#include "gpu/nc_gpu_internal.h"
#include "gpu/nc_gpu_train_step.h"
#include "sim/nc_loss_rows.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <new>

// ---- what the backend lends (nc_gt_lent) -------------------------------------------

// Set by every backend made, always to the same table (atomic: ranks make
// their backends in threads of their own).
static std::atomic<const nc_gt_lent *> lent_table{nullptr};

void nc_gts_lend(const nc_gt_lent *lent) { lent_table.store(lent); }

namespace {

cudaStream_t gt_stream(nc_train_backend *b) { return lent_table.load()->stream(b); }
bool gt_usable(nc_train_backend *b) { return lent_table.load()->usable(b); }
bool gt_cuda_failed(nc_train_backend *b, const char *op, const char *call, cudaError_t e)
{
    return lent_table.load()->cuda_failed(b, op, call, e);
}
double *gt_scratch(nc_train_backend *b, const char *op, size_t doubles)
{
    return lent_table.load()->scratch(b, op, doubles);
}
nc_opt_table **gt_opt_table(nc_train_backend *b) { return lent_table.load()->opt_table(b); }

// ---- the output loss (sim/nc_grad_ops.c, row by row) ------------------------------

struct loss_args {
    int64_t rows;
    int classes;
    const float *logits, *teacher; // teacher NULL: plain cross-entropy
    const int32_t *labels;
    double alpha, tau;
    float scale;    // the data-parallel share, applied to dlogits in float
    float *dlogits; // may be NULL
};

// mean_row_loss's body for one row: row_loss[r] and hit[r] (1: counted
// correct) for the sum that follows; a label outside [0, classes) gives no
// loss and a zero gradient.
__global__ void loss_rows_kernel(loss_args a, double *row_loss, double *hit)
{
    for (int64_t r = gtid(); r < a.rows; r += gstride()) {
        const float *z = a.logits + r * a.classes;
        float *dz = a.dlogits ? a.dlogits + r * a.classes : nullptr;
        int32_t label = a.labels[r];
        bool valid = label >= 0 && label < a.classes;
        int top = nc_argmax_first(a.classes, z);
        hit[r] = valid && top == label ? 1.0 : 0.0;
        row_loss[r] = 0.0;
        if (!valid) {
            for (int k = 0; dz && k < a.classes; k++)
                dz[k] = 0.0f;
            continue;
        }
        row_loss[r] = a.teacher ? nc_distill_row(a.rows, a.classes, z, a.teacher + r * a.classes, a.alpha, a.tau,
                                                 label, dz)
                                 : nc_xent_row(a.rows, a.classes, z, top, label, dz);
        for (int k = 0; dz && a.scale != 1.0f && k < a.classes; k++)
            dz[k] = __fmul_rn(dz[k], a.scale);
    }
}

// One thread, rows in order: the CPU's `total += row; total / rows`.  A
// batch has at most a few thousand rows, so this costs microseconds.
__global__ void loss_sum_kernel(int64_t rows, const double *row_loss, const double *hit, double *sums)
{
    double total = 0.0, right = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        total += row_loss[r];
        right += hit[r];
    }
    sums[0] = rows < 1 ? 0.0 : total / (double)rows;
    sums[1] = right;
}

// ---- optimisers (sim/nc_train_backend_cpu.c, in double per value) -----------------

__device__ __forceinline__ void sgd_value(int64_t j, float *value, const float *grad, float *m, double lr,
                                          double momentum, double wd, int clamp, float min_value)
{
    double g = __dadd_rn((double)grad[j], __dmul_rn(wd, (double)value[j]));
    float mj = __double2float_rn(__dadd_rn(__dmul_rn(momentum, (double)m[j]), g));
    m[j] = mj;
    float v = __fsub_rn(value[j], __double2float_rn(__dmul_rn(lr, (double)mj)));
    if (clamp && v < min_value)
        v = min_value;
    value[j] = v;
}

// one_b1 = 1 − β1 and one_b2 = 1 − β2, computed on the host in double as the
// CPU does.
__device__ __forceinline__ void adam_value(int64_t j, float *value, const float *grad, float *m, float *v,
                                           const nc_opt_step &st, double one_b1, double one_b2, double wd,
                                           int clamp)
{
    double g = __dadd_rn((double)grad[j], __dmul_rn(wd, (double)value[j]));
    float mj = __double2float_rn(__dadd_rn(__dmul_rn(st.beta1, (double)m[j]), __dmul_rn(one_b1, g)));
    float vj = __double2float_rn(__dadd_rn(__dmul_rn(st.beta2, (double)v[j]), __dmul_rn(__dmul_rn(one_b2, g), g)));
    m[j] = mj;
    v[j] = vj;
    double step = __ddiv_rn(__dmul_rn(st.lr, __ddiv_rn((double)mj, st.c1)),
                            __dadd_rn(__dsqrt_rn(__ddiv_rn((double)vj, st.c2)), st.epsilon));
    float val = __fsub_rn(value[j], __double2float_rn(step));
    if (clamp && val < st.min_value)
        val = st.min_value;
    value[j] = val;
}

__global__ void sgd_kernel(int64_t n, float *value, const float *grad, float *m, double lr, double momentum,
                           double wd, int clamp, float min_value)
{
    for (int64_t j = gtid(); j < n; j += gstride())
        sgd_value(j, value, grad, m, lr, momentum, wd, clamp, min_value);
}

__global__ void adam_kernel(int64_t n, float *value, const float *grad, float *m, float *v, nc_opt_step st,
                            double one_b1, double one_b2, double wd, int clamp)
{
    for (int64_t j = gtid(); j < n; j += gstride())
        adam_value(j, value, grad, m, v, st, one_b1, one_b2, wd, clamp);
}

// One tensor of the device table; start: its first value's index in the
// concatenation of all tensors.
struct dev_tensor {
    float *value;
    const float *grad;
    float *m, *v;
    int64_t start, count;
    int decay, clamp;
};

// The last tensor whose start ≤ j (so an empty tensor, whose start equals
// the next one's, is never chosen).
__device__ __forceinline__ int tensor_of(const dev_tensor *t, int n, int64_t j)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (t[mid].start <= j)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

__global__ void multi_step_kernel(const dev_tensor *t, int n, int64_t total, nc_opt_step st, double one_b1,
                                  double one_b2)
{
    for (int64_t j = gtid(); j < total; j += gstride()) {
        const dev_tensor &d = t[tensor_of(t, n, j)];
        int64_t i = j - d.start;
        double wd = d.decay ? st.weight_decay : 0.0;
        if (st.adam)
            adam_value(i, d.value, d.grad, d.m, d.v, st, one_b1, one_b2, wd, d.clamp);
        else
            sgd_value(i, d.value, d.grad, d.m, st.lr, st.momentum, wd, d.clamp, st.min_value);
    }
}

bool same_tensor(const nc_opt_tensor &a, const nc_opt_tensor &b)
{
    return a.value == b.value && a.grad == b.grad && a.m == b.m && a.v == b.v && a.count == b.count &&
           a.decay == b.decay && a.clamp == b.clamp;
}

} // namespace

// The last tensor set uploaded (host copy, to recognise it) and its device table.
struct nc_opt_table {
    nc_opt_tensor *host = nullptr;
    int n = 0;
    dev_tensor *dev = nullptr;
    int64_t total = 0;
};

void nc_opt_table_free(nc_opt_table *t)
{
    if (!t)
        return;
    cudaFree(t->dev);
    free(t->host);
    delete t;
}

namespace {

bool table_matches(const nc_opt_table *t, const nc_opt_tensor *x, int n)
{
    if (!t || t->n != n)
        return false;
    for (int k = 0; k < n; k++)
        if (!same_tensor(t->host[k], x[k]))
            return false;
    return true;
}

// Builds the device table of x in *slot (replacing the last one); false
// after a failure, recorded.  Rare (once per trainer), so it may wait: the
// old table may still be read by a queued step.
bool table_upload(nc_train_backend *b, nc_opt_table **slot, const nc_opt_tensor *x, int n)
{
    const char *op = "optimizer_step";
    if (gt_cuda_failed(b, op, "cudaStreamSynchronize", cudaStreamSynchronize(gt_stream(b))))
        return false;
    nc_opt_table_free(*slot);
    nc_opt_table *t = *slot = new (std::nothrow) nc_opt_table();
    dev_tensor *staged = (dev_tensor *)malloc((size_t)n * sizeof(dev_tensor));
    if (t)
        t->host = (nc_opt_tensor *)malloc((size_t)n * sizeof(nc_opt_tensor));
    if (!t || !t->host || !staged) {
        free(staged);
        gt_cuda_failed(b, op, "malloc of the tensor table", cudaErrorMemoryAllocation);
        return false;
    }
    for (int k = 0; k < n; k++) {
        staged[k] = dev_tensor{x[k].value, x[k].grad, x[k].m, x[k].v, t->total, x[k].count, x[k].decay, x[k].clamp};
        t->total += x[k].count;
    }
    size_t bytes = (size_t)n * sizeof(dev_tensor);
    bool ok = !gt_cuda_failed(b, op, "cudaMalloc of the tensor table", cudaMalloc((void **)&t->dev, bytes)) &&
              !gt_cuda_failed(b, op, "cudaMemcpy of the tensor table",
                                 cudaMemcpy(t->dev, staged, bytes, cudaMemcpyHostToDevice));
    free(staged);
    if (!ok)
        return false;
    memcpy(t->host, x, (size_t)n * sizeof(nc_opt_tensor)); // only now: a failed upload is retried
    t->n = n;
    return true;
}

} // namespace

// ---- the operations ------------------------------------------------------------

void *gts_alloc_bytes(nc_train_backend *b, size_t bytes)
{
    // floats are 4 bytes, cudaMalloc aligns to 256: the trainer's allocation serves
    size_t floats = (bytes + sizeof(float) - 1) / sizeof(float);
    return b->ops->alloc(b, floats ? floats : 1);
}

void gts_release_bytes(nc_train_backend *b, void *p) { b->ops->release(b, (float *)p); }

// Waits, as upload does: the host buffer may change once it returns.
void gts_upload_bytes(nc_train_backend *b, void *dst, const void *host, size_t bytes)
{
    if (!gt_usable(b) || !bytes)
        return;
    cudaStream_t s = gt_stream(b);
    if (!gt_cuda_failed(b, "upload_bytes", "cudaMemcpyAsync",
                           cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, s)))
        gt_cuda_failed(b, "upload_bytes", "cudaStreamSynchronize", cudaStreamSynchronize(s));
}

// Queued: host holds the bytes after the next sync().
void gts_download_bytes(nc_train_backend *b, void *host, const void *src, size_t bytes)
{
    if (!gt_usable(b) || !bytes)
        return;
    gt_cuda_failed(b, "download_bytes", "cudaMemcpyAsync",
                      cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, gt_stream(b)));
}

void gts_output_loss(nc_train_backend *b, int64_t rows, int classes, const float *logits, const int32_t *labels,
                     const float *teacher, double alpha, double tau, float scale, float *dlogits, double *sums)
{
    const char *op = "output_loss";
    if (!gt_usable(b))
        return;
    cudaStream_t s = gt_stream(b);
    double *work = rows > 0 ? gt_scratch(b, op, 2 * (size_t)rows) : nullptr;
    if (rows > 0 && !work)
        return;
    if (rows > 0) {
        // as nc_distill_xent: α = 0 is the plain cross-entropy, bit for bit
        loss_args a = {rows, classes, logits, alpha == 0.0 ? nullptr : teacher, labels, alpha, tau, scale, dlogits};
        loss_rows_kernel<<<grid_for(rows), kThreads, 0, s>>>(a, work, work + rows);
        if (gt_cuda_failed(b, op, "loss_rows_kernel", cudaGetLastError()))
            return;
    }
    loss_sum_kernel<<<1, 1, 0, s>>>(rows, work, rows > 0 ? work + rows : nullptr, sums);
    gt_cuda_failed(b, op, "loss_sum_kernel", cudaGetLastError());
}

void gts_sgd_step(nc_train_backend *b, int64_t count, float *value, const float *grad, float *m, double lr,
                  double momentum, double weight_decay, int clamp, float min_value)
{
    if (!gt_usable(b) || count <= 0)
        return;
    sgd_kernel<<<grid_for(count), kThreads, 0, gt_stream(b)>>>(count, value, grad, m, lr, momentum, weight_decay,
                                                                  clamp, min_value);
    gt_cuda_failed(b, "sgd_step", "sgd_kernel", cudaGetLastError());
}

void gts_adam_step(nc_train_backend *b, int64_t count, float *value, const float *grad, float *m, float *v,
                   double lr, double beta1, double beta2, double epsilon, double c1, double c2, double weight_decay,
                   int clamp, float min_value)
{
    if (!gt_usable(b) || count <= 0)
        return;
    nc_opt_step st = {1, lr, 0.0, beta1, beta2, epsilon, c1, c2, weight_decay, min_value};
    adam_kernel<<<grid_for(count), kThreads, 0, gt_stream(b)>>>(count, value, grad, m, v, st, 1 - beta1,
                                                                   1 - beta2, weight_decay, clamp);
    gt_cuda_failed(b, "adam_step", "adam_kernel", cudaGetLastError());
}

void gts_optimizer_step(nc_train_backend *b, const nc_opt_tensor *tensors, int n, const nc_opt_step *step)
{
    nc_opt_table **slot = gt_opt_table(b);
    if (!gt_usable(b) || n <= 0)
        return;
    if (!table_matches(*slot, tensors, n) && !table_upload(b, slot, tensors, n))
        return;
    const nc_opt_table *t = *slot;
    if (t->total <= 0)
        return;
    multi_step_kernel<<<grid_for(t->total), kThreads, 0, gt_stream(b)>>>(t->dev, n, t->total, *step,
                                                                            1 - step->beta1, 1 - step->beta2);
    gt_cuda_failed(b, "optimizer_step", "multi_step_kernel", cudaGetLastError());
}
