/* nc_train_backend_cpu.c — the trainer's CPU backend: host memory and the
 * kernels of nc_cpu_ops.h / nc_grad_ops.h (see nc_train_backend.h).  Conv
 * and dense layers, forward and backward, split their rows over the cores
 * (nc_workers.h), each slice a one-thread GEMM; the parameter gradients of
 * slice k > 0 go to a buffer of their own and are added in slice order, so a
 * machine gives the same result every run.  Also nc_train_backend_new, which
 * picks a backend. */
#include "nc_train_backend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "nc_config.h"
#include "nc_grad_ops.h"
#include "nc_engine_registry.h"
#include "nc_workers.h"

/* Below this many multiply-adds a conv or dense layer runs on one thread:
 * waking a worker costs microseconds. */
#define NC_TRAIN_PARALLEL_MIN_MACS (1 << 20)

typedef struct cpu_backend {
    int blas_threads;   /* OpenBLAS's thread count before, restored at the end */
    int threads;        /* slices of a conv or dense layer: the cores          */
    nc_workers *workers; /* NULL: one thread                                   */
    float *work;        /* conv workspace of every slice, grown on demand      */
    size_t work_floats;
    float *partial;     /* parameter gradients of slices 1 …, grown on demand  */
    size_t partial_floats;
    int failed;         /* first failure, kept for sync()  */
    char why[256];
} cpu_backend;

static cpu_backend *cpu_of(nc_train_backend *b) { return b->impl; }

static void cpu_fail(nc_train_backend *b, const char *what, size_t floats)
{
    cpu_backend *c = cpu_of(b);
    if (c->failed)
        return;
    c->failed = 1;
    snprintf(c->why, sizeof c->why, "%s: out of memory for %.1f MB", what, (double)floats * 4 / 1e6);
}

/* A buffer of at least `floats` (grown, never shrunk); NULL after a failure. */
static float *grown(nc_train_backend *b, float **buf, size_t *have, size_t floats, const char *what)
{
    if (floats > *have) {
        float *p = realloc(*buf, floats * sizeof(float));
        if (!p) {
            cpu_fail(b, what, floats);
            return NULL;
        }
        *buf = p;
        *have = floats;
    }
    return *buf;
}

static void cpu_destroy(nc_train_backend *b)
{
    openblas_set_num_threads(cpu_of(b)->blas_threads);
    nc_workers_free(cpu_of(b)->workers);
    free(cpu_of(b)->partial);
    free(cpu_of(b)->work);
    free(b->impl);
    free(b);
}

static float *cpu_alloc(nc_train_backend *b, size_t floats)
{
    float *p = calloc(floats > 0 ? floats : 1, sizeof(float));
    if (!p)
        cpu_fail(b, "training buffer", floats);
    return p;
}

static void cpu_release(nc_train_backend *b, float *p) { (void)b, free(p); }
static void cpu_zero(nc_train_backend *b, float *p, size_t n) { (void)b, memset(p, 0, n * sizeof(float)); }

static void cpu_copy(nc_train_backend *b, float *dst, const float *src, size_t n)
{
    (void)b;
    if (dst != src)
        memmove(dst, src, n * sizeof(float));
}

static void *cpu_alloc_bytes(nc_train_backend *b, size_t bytes)
{
    void *p = calloc(bytes > 0 ? bytes : 1, 1); /* malloc's alignment suits doubles */
    if (!p)
        cpu_fail(b, "training buffer", bytes / sizeof(float));
    return p;
}

static void cpu_release_bytes(nc_train_backend *b, void *p) { (void)b, free(p); }

static void cpu_copy_bytes(nc_train_backend *b, void *dst, const void *src, size_t bytes)
{
    (void)b;
    if (dst != src)
        memmove(dst, src, bytes);
}

static void cpu_copy_rows(nc_train_backend *b, float *dst, int64_t dst_stride, const float *src, int64_t src_stride,
                          int64_t rows, int64_t len)
{
    (void)b;
    for (int64_t r = 0; r < rows; r++)
        memcpy(dst + r * dst_stride, src + r * src_stride, (size_t)len * sizeof(float));
}

static void cpu_add(nc_train_backend *b, int64_t n, const float *x, const float *y, float *out)
{
    (void)b;
    nc_add(n, x, y, out);
}

static void cpu_sub(nc_train_backend *b, int64_t n, const float *x, const float *y, float *out)
{
    (void)b;
    for (int64_t k = 0; k < n; k++)
        out[k] = x[k] - y[k];
}

static void cpu_mean_steps(nc_train_backend *b, int T, int64_t per, const float *y, float *out)
{
    (void)b;
    for (int64_t k = 0; k < per; k++) {
        double sum = 0;
        for (int t = 0; t < T; t++)
            sum += y[t * per + k];
        out[k] = (float)(sum / T);
    }
}

static void cpu_broadcast_steps(nc_train_backend *b, int T, int64_t per, const float *in, float scale, float *out)
{
    (void)b;
    for (int t = 0; t < T; t++)
        for (int64_t k = 0; k < per; k++)
            out[t * per + k] = in[k] * scale;
}

/* ---- conv and dense, forward and backward, in row slices ---- */

/* One conv or dense layer, forward or backward, as slices of rows. */
typedef struct layer_job {
    int conv, backward;
    const nc_window *g;        /* conv */
    int cout, groups;          /* conv */
    int fin, fout;             /* dense */
    const float *in, *weight, *bias, *dout;
    float *out, *din, *dweight, *dbias;
    int64_t in_row, out_row, chunk;
    float *work;               /* conv: per_slot floats per thread slot */
    size_t per_slot;
    float *partial;            /* slice k > 0: its dweight, then its dbias */
    size_t n_weight, n_bias;
} layer_job;

static void layer_rows(void *ctx, int64_t r0, int64_t r1, int slot)
{
    const layer_job *j = ctx;
    int64_t n = r1 - r0, slice = r0 / j->chunk;
    const float *in = j->in + r0 * j->in_row;
    float *work = j->work ? j->work + (size_t)slot * j->per_slot : NULL;
    if (!j->backward) {
        float *out = j->out + r0 * j->out_row;
        if (j->conv)
            nc_conv2d(j->g, j->cout, j->groups, n, in, j->weight, j->bias, out, work, j->per_slot);
        else
            nc_dense(n, j->fin, j->fout, in, j->weight, j->bias, out);
        return;
    }
    float *own = slice == 0 ? NULL : j->partial + (size_t)(slice - 1) * (j->n_weight + j->n_bias);
    float *dweight = !j->dweight ? NULL : own ? own : j->dweight;
    float *dbias = !j->dbias ? NULL : own ? own + j->n_weight : j->dbias;
    const float *dout = j->dout + r0 * j->out_row;
    float *din = j->din ? j->din + r0 * j->in_row : NULL;
    if (j->conv)
        nc_conv2d_backward(j->g, j->cout, j->groups, n, in, j->weight, dout, din, dweight, dbias, work, j->per_slot);
    else
        nc_dense_backward(n, j->fin, j->fout, in, j->weight, dout, din, dweight, dbias);
}

/* Runs j over `rows` rows in slices: sizes the slices, the conv workspaces
 * (per_slot(rows of a slice)) and the parameter-gradient buffers, then adds
 * those buffers into dweight / dbias in slice order. */
static void run_layer(nc_train_backend *b, layer_job *j, int64_t rows, int64_t macs,
                      size_t (*per_slot)(const nc_window *, int, int, int64_t))
{
    cpu_backend *c = cpu_of(b);
    if (rows < 1 || c->failed)
        return;
    int slices = macs < NC_TRAIN_PARALLEL_MIN_MACS || !c->workers ? 1 : c->threads;
    if (slices > rows)
        slices = (int)rows;
    j->chunk = (rows + slices - 1) / slices;
    slices = (int)((rows + j->chunk - 1) / j->chunk);
    if (j->conv) {
        j->per_slot = per_slot(j->g, j->cout, j->groups, j->chunk);
        j->work = grown(b, &c->work, &c->work_floats, j->per_slot * (size_t)slices,
                        j->backward ? "conv backward workspace" : "conv workspace");
        if (!j->work)
            return;
    }
    size_t per_slice = (j->dweight ? j->n_weight : 0) + (j->dbias ? j->n_bias : 0);
    if (j->backward && slices > 1 && per_slice > 0) {
        j->partial = grown(b, &c->partial, &c->partial_floats, (j->n_weight + j->n_bias) * (size_t)(slices - 1),
                           "per-thread gradients");
        if (!j->partial)
            return;
        memset(j->partial, 0, (j->n_weight + j->n_bias) * (size_t)(slices - 1) * sizeof(float));
    }
    nc_workers_run(slices > 1 ? c->workers : NULL, slices, rows, j->chunk, layer_rows, j);
    for (int k = 1; j->backward && k < slices && per_slice > 0; k++) {
        const float *own = j->partial + (size_t)(k - 1) * (j->n_weight + j->n_bias);
        if (j->dweight)
            nc_add((int64_t)j->n_weight, j->dweight, own, j->dweight);
        if (j->dbias)
            nc_add((int64_t)j->n_bias, j->dbias, own + j->n_weight, j->dbias);
    }
}

static void cpu_conv2d(nc_train_backend *b, const nc_window *g, int cout, int groups, int64_t rows, const float *in,
                       const float *weight, const float *bias, float *out)
{
    int64_t p = (int64_t)g->oh * g->ow, k = (int64_t)g->c / groups * g->kernel[0] * g->kernel[1];
    layer_job j = {.conv = 1, .g = g, .cout = cout, .groups = groups, .in = in, .weight = weight, .bias = bias,
                   .out = out, .in_row = (int64_t)g->c * g->h * g->w, .out_row = cout * p};
    run_layer(b, &j, rows, rows * cout * p * k, nc_conv2d_work_floats);
}

static void cpu_dense(nc_train_backend *b, int64_t rows, int fin, int fout, const float *in, const float *weight,
                      const float *bias, float *out)
{
    layer_job j = {.fin = fin, .fout = fout, .in = in, .weight = weight, .bias = bias, .out = out,
                   .in_row = fin, .out_row = fout};
    run_layer(b, &j, rows, rows * fin * fout, NULL);
}

static void cpu_avgpool(nc_train_backend *b, const nc_window *g, int cip, int64_t rows, const float *in, float *out)
{
    (void)b;
    nc_avgpool(g, cip, rows, in, out);
}

static void cpu_maxpool(nc_train_backend *b, const nc_window *g, int64_t rows, const float *in, float *out)
{
    (void)b;
    nc_maxpool(g, rows, in, out);
}

static void cpu_global_avgpool(nc_train_backend *b, int64_t rows, int c, int64_t hw, const float *in, float *out)
{
    (void)b;
    nc_global_avgpool(rows, c, hw, in, out);
}

static void cpu_affine(nc_train_backend *b, int64_t rows, int c, int64_t inner, const float *scale,
                       const float *shift, const float *in, float *out)
{
    (void)b;
    nc_affine(rows, c, inner, scale, shift, in, out);
}

static void cpu_relu(nc_train_backend *b, int64_t n, const float *in, float *out) { (void)b, nc_relu(n, in, out); }

static void cpu_clip(nc_train_backend *b, int64_t n, float lo, float hi, const float *in, float *out)
{
    (void)b;
    nc_clip(n, lo, hi, in, out);
}

static void cpu_qcfs(nc_train_backend *b, int64_t rows, int c, int64_t inner, const float *lambda, int n_lambda,
                     int levels, float shift, const float *in, float *out)
{
    (void)b;
    nc_qcfs(rows, c, inner, lambda, n_lambda, levels, shift, in, out);
}

static void cpu_if_forward_train(nc_train_backend *b, const nc_if_params *p, int T, int64_t n, int c, int64_t inner,
                                 const float *in, float *out, float *m_saved)
{
    (void)b;
    nc_if_forward_train(p, T, n, c, inner, in, out, m_saved);
}

/* ---- backward ---- */

static void cpu_conv2d_backward(nc_train_backend *b, const nc_window *g, int cout, int groups, int64_t rows,
                                const float *in, const float *weight, const float *dout, float *din, float *dweight,
                                float *dbias)
{
    int64_t p = (int64_t)g->oh * g->ow, k = (int64_t)g->c / groups * g->kernel[0] * g->kernel[1];
    layer_job j = {.conv = 1, .backward = 1, .g = g, .cout = cout, .groups = groups, .in = in, .weight = weight,
                   .dout = dout, .din = din, .dweight = dweight, .dbias = dbias,
                   .in_row = (int64_t)g->c * g->h * g->w, .out_row = cout * p,
                   .n_weight = (size_t)(cout * k), .n_bias = (size_t)cout};
    run_layer(b, &j, rows, 2 * rows * cout * p * k, nc_conv2d_backward_work_floats);
}

static void cpu_dense_backward(nc_train_backend *b, int64_t rows, int fin, int fout, const float *in,
                               const float *weight, const float *dout, float *din, float *dweight, float *dbias)
{
    layer_job j = {.backward = 1, .fin = fin, .fout = fout, .in = in, .weight = weight, .dout = dout, .din = din,
                   .dweight = dweight, .dbias = dbias, .in_row = fin, .out_row = fout,
                   .n_weight = (size_t)fin * (size_t)fout, .n_bias = (size_t)fout};
    run_layer(b, &j, rows, 2 * rows * fin * fout, NULL);
}

static void cpu_avgpool_backward(nc_train_backend *b, const nc_window *g, int cip, int64_t rows, const float *dout,
                                 float *din)
{
    (void)b;
    nc_avgpool_backward(g, cip, rows, dout, din);
}

static void cpu_maxpool_backward(nc_train_backend *b, const nc_window *g, int64_t rows, const float *in,
                                 const float *dout, float *din)
{
    (void)b;
    nc_maxpool_backward(g, rows, in, dout, din);
}

static void cpu_global_avgpool_backward(nc_train_backend *b, int64_t rows, int c, int64_t hw, const float *dout,
                                        float *din)
{
    (void)b;
    nc_global_avgpool_backward(rows, c, hw, dout, din);
}

static void cpu_affine_backward(nc_train_backend *b, int64_t rows, int c, int64_t inner, const float *scale,
                                const float *in, const float *dout, float *din, float *dscale, float *dshift)
{
    (void)b;
    nc_affine_backward(rows, c, inner, scale, in, dout, din, dscale, dshift);
}

static void cpu_relu_backward(nc_train_backend *b, int64_t n, const float *in, const float *dout, float *din)
{
    (void)b;
    nc_relu_backward(n, in, dout, din);
}

static void cpu_clip_backward(nc_train_backend *b, int64_t n, float lo, float hi, const float *in, const float *dout,
                              float *din)
{
    (void)b;
    nc_clip_backward(n, lo, hi, in, dout, din);
}

static void cpu_qcfs_backward(nc_train_backend *b, int64_t rows, int c, int64_t inner, const float *lambda,
                              int n_lambda, int levels, float shift, const float *in, const float *dout, float *din,
                              float *dlambda)
{
    (void)b;
    nc_qcfs_backward(rows, c, inner, lambda, n_lambda, levels, shift, in, dout, din, dlambda);
}

static void cpu_if_backward(nc_train_backend *b, const nc_if_params *p, nc_surrogate surrogate, float alpha, int T,
                            int64_t n, int c, int64_t inner, const float *m_saved, const float *dout, float *din,
                            float *dthreshold)
{
    (void)b;
    nc_if_backward(p, surrogate, alpha, T, n, c, inner, m_saved, dout, din, dthreshold);
}

/* ---- optimiser ---- */

static void cpu_sgd_step(nc_train_backend *b, int64_t count, float *value, const float *grad, float *m, double lr,
                         double momentum, double weight_decay, int clamp, float min_value)
{
    (void)b;
    for (int64_t j = 0; j < count; j++) {
        double g = (double)grad[j] + weight_decay * value[j];
        m[j] = (float)(momentum * m[j] + g);
        value[j] -= (float)(lr * m[j]);
        if (clamp && value[j] < min_value)
            value[j] = min_value;
    }
}

static void cpu_adam_step(nc_train_backend *b, int64_t count, float *value, const float *grad, float *m, float *v,
                          double lr, double beta1, double beta2, double epsilon, double c1, double c2,
                          double weight_decay, int clamp, float min_value)
{
    (void)b;
    for (int64_t j = 0; j < count; j++) {
        double g = (double)grad[j] + weight_decay * value[j];
        m[j] = (float)(beta1 * m[j] + (1 - beta1) * g);
        v[j] = (float)(beta2 * v[j] + (1 - beta2) * g * g);
        value[j] -= (float)(lr * (m[j] / c1) / (sqrt(v[j] / c2) + epsilon));
        if (clamp && value[j] < min_value)
            value[j] = min_value;
    }
}

/* The trainer's loss as it was computed on the host: the function of
 * nc_grad_ops.h, then the share applied in float. */
static void cpu_output_loss(nc_train_backend *b, int64_t rows, int classes, const float *logits,
                            const int32_t *labels, const float *teacher, double alpha, double tau, float scale,
                            float *dlogits, double *sums)
{
    (void)b;
    int64_t right = 0;
    double loss = nc_distill_xent(rows, classes, logits, teacher, labels, alpha, tau, dlogits, &right);
    if (dlogits && scale != 1.0f)
        for (int64_t k = 0; k < rows * classes; k++)
            dlogits[k] *= scale;
    sums[0] = loss;
    sums[1] = (double)right;
}

static void cpu_optimizer_step(nc_train_backend *b, const nc_opt_tensor *t, int n, const nc_opt_step *st)
{
    for (int k = 0; k < n; k++) {
        double wd = t[k].decay ? st->weight_decay : 0.0;
        if (st->adam)
            cpu_adam_step(b, t[k].count, t[k].value, t[k].grad, t[k].m, t[k].v, st->lr, st->beta1, st->beta2,
                          st->epsilon, st->c1, st->c2, wd, t[k].clamp, st->min_value);
        else
            cpu_sgd_step(b, t[k].count, t[k].value, t[k].grad, t[k].m, st->lr, st->momentum, wd, t[k].clamp,
                         st->min_value);
    }
}

static nc_status cpu_sync(nc_train_backend *b, nc_error *err)
{
    cpu_backend *c = cpu_of(b);
    return c->failed ? nc_fail(err, NC_ERR_MEMORY, "CPU trainer: %s; use a smaller --batch", c->why) : NC_OK;
}

static const nc_train_backend_ops cpu_ops = {
    .name = "cpu",
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .zero = cpu_zero,
    .copy = cpu_copy,
    .upload = cpu_copy,
    .download = cpu_copy,
    .alloc_bytes = cpu_alloc_bytes,
    .release_bytes = cpu_release_bytes,
    .upload_bytes = cpu_copy_bytes,
    .download_bytes = cpu_copy_bytes,
    .copy_rows = cpu_copy_rows,
    .add = cpu_add,
    .sub = cpu_sub,
    .mean_steps = cpu_mean_steps,
    .broadcast_steps = cpu_broadcast_steps,
    .conv2d = cpu_conv2d,
    .dense = cpu_dense,
    .avgpool = cpu_avgpool,
    .maxpool = cpu_maxpool,
    .global_avgpool = cpu_global_avgpool,
    .affine = cpu_affine,
    .relu = cpu_relu,
    .clip = cpu_clip,
    .qcfs = cpu_qcfs,
    .if_forward_train = cpu_if_forward_train,
    .conv2d_backward = cpu_conv2d_backward,
    .dense_backward = cpu_dense_backward,
    .avgpool_backward = cpu_avgpool_backward,
    .maxpool_backward = cpu_maxpool_backward,
    .global_avgpool_backward = cpu_global_avgpool_backward,
    .affine_backward = cpu_affine_backward,
    .relu_backward = cpu_relu_backward,
    .clip_backward = cpu_clip_backward,
    .qcfs_backward = cpu_qcfs_backward,
    .if_backward = cpu_if_backward,
    .sgd_step = cpu_sgd_step,
    .adam_step = cpu_adam_step,
    .output_loss = cpu_output_loss,
    .optimizer_step = cpu_optimizer_step,
    .sync = cpu_sync,
};

nc_status nc_train_backend_cpu_new(nc_train_backend **out, nc_error *err)
{
    nc_train_backend *b = calloc(1, sizeof *b);
    cpu_backend *c = calloc(1, sizeof *c);
    if (!b || !c) {
        free(b);
        free(c);
        return nc_fail(err, NC_ERR_MEMORY, "out of memory");
    }
    b->ops = &cpu_ops;
    b->impl = c;
    /* The trainer's GEMMs run on one OpenBLAS thread: with two, a step took
     * 10–15 % less on an idle 2-core machine but 20× longer (580 ms against
     * 25 ms, QCFS step of the CNN) when other processes kept the cores busy,
     * as OpenBLAS's waiting threads yield the CPU and lose it. */
    c->blas_threads = openblas_get_num_threads();
    openblas_set_num_threads(1);
    /* our own threads instead, which wait on a condition variable, not in
     * sched_yield (nc_workers.h) */
    c->threads = nc_workers_count(0);
    c->workers = c->threads > 1 ? nc_workers_new() : NULL;
    *out = b;
    return NC_OK;
}

/* The backend of the engine `name` (the registry's entry says where its
 * arithmetic runs); engines without one fine-tune on the CPU. */
nc_status nc_train_backend_new(const char *name, nc_train_backend **out, nc_error *err)
{
    *out = NULL;
    if (!name || strcmp(name, "cpu") == 0)
        return nc_train_backend_cpu_new(out, err);
    const nc_engine_info *info = nc_engine_find(name);
    if (!info)
        return nc_fail(err, NC_ERR_ARGUMENT, "unknown training engine '%s' (cpu or gpu)", name);
    char why[512];
    if (!info->available(why, sizeof why))
        return nc_fail(err, NC_ERR_UNSUPPORTED, "the %s engine cannot fine-tune here: %s; fine-tune with "
                                                "--train-engine cpu", name, why);
    if (!info->train_backend_new)
        return nc_train_backend_cpu_new(out, err);
    return info->train_backend_new(out, err);
}

void nc_train_backend_free(nc_train_backend *b)
{
    if (b)
        b->ops->destroy(b);
}
