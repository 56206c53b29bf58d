/* test_gpu_train.c — the GPU training backend (gpu/nc_gpu_train.cu) against
 * the CPU backend (sim/nc_train_backend_cpu.c: the kernels of nc_cpu_ops.h
 * and nc_grad_ops.h), operation by operation through the vtable of
 * sim/nc_train_backend.h, llm.c style (the first mismatches, the max error
 * and the relative error printed):
 *   - memory: zero-filled alloc, upload/download, zero, copy (also
 *     overlapping), copy_rows, add, sub, mean_steps, broadcast_steps: exact;
 *   - conv2d forward and backward (groups 1/2/C, stride 2, asymmetric
 *     padding, dilation, 1×1, no bias, NULL din / dweight / dbias, gradients
 *     accumulated onto non-zero values), also with a 1 MiB workspace so that
 *     the samples go in several chunks: within 1e-5·max|ref| + 1e-4·|ref|
 *     (GEMMs sum in another order); in the bf16 mode within 1e-2 (and the
 *     output and input gradient of a plain conv are bf16 values, so that
 *     path ran), in the tf32 mode within 2e-3;
 *   - dense forward and backward: the same tolerance;
 *   - avg/max pools (ceil_mode, count_include_pad, padding, dilation, ties
 *     and −inf for the first-max rule) and global avgpool, forward and
 *     backward: exact (the same sums in the same order);
 *   - affine, relu, clip, qcfs (per-layer and per-channel λ) and their
 *     backward: values exact, parameter sums within 1e-4 relative;
 *   - IF forward for training (both resets, both comparisons, per-layer and
 *     per-channel θ, exact ties, T = 1/4/9, in place): spikes and m_t exact;
 *   - IF backward (all four surrogates, both resets and comparisons, θ per
 *     layer and per channel, with and without dθ, din aliasing dout): din
 *     exact except the sigmoid (CUDA's expf), dθ within 1e-4;
 *   - a conv → IF → mean chain and back: spike mismatch rate reported (a
 *     different GEMM summation order may flip a spike at an exact tie);
 *   - SGD and Adam steps with weight decay and the threshold clamp: exact;
 *   - the output loss on the device (plain cross-entropy and distillation,
 *     α 0 / 0.5 / 1, τ 1 / 4, a row with an out-of-range label, a
 *     data-parallel share ≠ 1, no dlogits): mean loss within 1e-12 relative
 *     (CUDA's exp/log), correct count exact, dlogits within 1e-6 relative;
 *   - the multi-tensor optimizer_step (Adam and SGD, tensors of 1, 7, 1000
 *     and 300 000 values, with and without weight decay and the clamp, the
 *     table reused and rebuilt): bit for bit the per-tensor steps;
 *   - out of memory: an impossible alloc returns NULL and sync() reports
 *     NC_ERR_MEMORY with advice, the error stays, a new backend works; a size
 *     overflow and a bad argument are reported too.
 * Without a GPU (or without CUDA in the build) every test is skipped. */
#include "test_gpu_common.h"

#include "../sim/nc_grad_ops.h"
#include "../sim/nc_train_backend.h"

#include <stdint.h>

/* ---- two backends side by side ------------------------------------------------
 * be[0] is the CPU backend (the reference), be[1] the GPU backend.  A buffer
 * has one allocation on each.  In the tests, FOR_SIDES runs a statement on
 * both: BE is the backend of this side and S(b) the buffer's pointer there. */

typedef struct pair {
    nc_train_backend *be[2];
} pair;

typedef struct buf {
    float *p[2];
    int64_t n;
} buf;

#define FOR_SIDES for (int side = 0; side < 2; side++)
#define BE (P.be[side])
#define S(b) ((b).p[side])
#define SN(b, use) ((use) ? (b).p[side] : NULL)

static const char *side_name(int side) { return side ? "gpu" : "cpu"; }

static int pair_new(pair *P)
{
    nc_error err = {0};
    memset(P, 0, sizeof *P);
    if (nc_train_backend_cpu_new(&P->be[0], &err) != NC_OK) {
        NC_CHECK(0, "cpu backend: %s", err.message);
        return 0;
    }
    if (nc_train_backend_new("gpu", &P->be[1], &err) != NC_OK) {
        NC_CHECK(0, "gpu backend: %s", err.message);
        nc_train_backend_free(P->be[0]);
        P->be[0] = NULL;
        return 0;
    }
    NC_CHECK(strcmp(P->be[0]->ops->name, "cpu") == 0 && strcmp(P->be[1]->ops->name, "gpu") == 0, "backend names");
    return 1;
}

/* Both backends report no error so far. */
static int pair_sync(pair *P, const char *what)
{
    int ok = 1;
    for (int side = 0; side < 2; side++) {
        nc_error err = {0};
        nc_status s = P->be[side]->ops->sync(P->be[side], &err);
        NC_CHECK(s == NC_OK, "%s: %s backend: %s", what, side_name(side), err.message);
        ok &= s == NC_OK;
    }
    return ok;
}

static void pair_free(pair *P)
{
    pair_sync(P, "at the end");
    nc_train_backend_free(P->be[0]);
    nc_train_backend_free(P->be[1]);
}

/* n floats on both backends: a copy of host (may be NULL: zeros). */
static buf buf_new(pair *P, int64_t n, const float *host)
{
    buf b = {{NULL, NULL}, n};
    for (int side = 0; side < 2; side++) {
        nc_train_backend *be = P->be[side];
        b.p[side] = be->ops->alloc(be, (size_t)n);
        NC_CHECK(b.p[side] != NULL, "alloc of %lld floats on %s", (long long)n, side_name(side));
        if (host && b.p[side])
            be->ops->upload(be, b.p[side], host, (size_t)n);
    }
    return b;
}

static float *host_rand(int64_t n, float lo, float hi)
{
    float *h = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        h[i] = rnd_range(lo, hi);
    return h;
}

static buf buf_rand(pair *P, int64_t n, float lo, float hi)
{
    float *h = host_rand(n, lo, hi);
    buf b = buf_new(P, n, h);
    free(h);
    return b;
}

static void buf_free(pair *P, buf *b)
{
    for (int side = 0; side < 2; side++)
        P->be[side]->ops->release(P->be[side], b->p[side]);
    b->p[0] = b->p[1] = NULL;
}

/* Frees the n buffers of list, on both sides. */
static void buf_free_all(pair *P, buf *const *list, int n)
{
    for (int k = 0; k < n; k++)
        buf_free(P, list[k]);
}

/* The buffer's values on one side (malloc'd). */
static float *buf_get(pair *P, const buf *b, int side)
{
    float *h = calloc((size_t)(b->n > 0 ? b->n : 1), sizeof(float));
    if (b->p[side])
        P->be[side]->ops->download(P->be[side], h, b->p[side], (size_t)b->n);
    return h;
}

static double max_abs(const float *x, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        m = fabs((double)x[i]) > m ? fabs((double)x[i]) : m;
    return m;
}

/* GPU against CPU: |gpu − cpu| ≤ atol_rel·max|cpu| + rtol·|cpu| (both 0:
 * exact); prints the first mismatches and the errors, and how many values
 * are not bit-identical.  Returns the mismatches (also a failed check). */
static int64_t check_buf(pair *P, const char *what, const buf *b, double atol_rel, double rtol)
{
    if (!pair_sync(P, what))
        return -1;
    float *ref = buf_get(P, b, 0), *got = buf_get(P, b, 1);
    for (int64_t i = 0; i < b->n; i++) /* equal infinities count as equal (inf − inf is NaN) */
        if (!isfinite(ref[i]) && memcmp(&got[i], &ref[i], sizeof(float)) == 0)
            got[i] = ref[i] = 0.0f;
    double atol = atol_rel * max_abs(ref, b->n);
    int64_t bad = compare_report(what, got, ref, b->n, atol, rtol), differ = 0;
    for (int64_t i = 0; i < b->n; i++)
        differ += memcmp(&got[i], &ref[i], sizeof(float)) != 0;
    if (atol_rel > 0 || rtol > 0)
        printf("#   %s: %lld of %lld values not bit-identical\n", what, (long long)differ, (long long)b->n);
    NC_CHECK(bad == 0, "%s: %lld values beyond the tolerance", what, (long long)bad);
    free(ref);
    free(got);
    return bad;
}

static int64_t check_exact(pair *P, const char *what, const buf *b) { return check_buf(P, what, b, 0, 0); }

/* GEMM-based results: a different summation order. */
#define GEMM_ATOL 1e-5
#define GEMM_RTOL 1e-4

/* ---- memory and step helpers -------------------------------------------------- */

static void test_memory_and_steps(void)
{
    pair P;
    if (!pair_new(&P))
        return;
    int64_t n = 1000;
    buf z = buf_new(&P, n, NULL);
    if (pair_sync(&P, "alloc")) { /* zero-filled */
        float *h = buf_get(&P, &z, 1);
        int64_t nonzero = 0;
        for (int64_t i = 0; i < n; i++)
            nonzero += h[i] != 0.0f;
        NC_CHECK(nonzero == 0, "alloc returns zeros: %lld non-zero values", (long long)nonzero);
        free(h);
    }
    float *h = host_rand(n, -3, 3);
    buf a = buf_new(&P, n, h);
    if (pair_sync(&P, "upload")) {
        float *back = buf_get(&P, &a, 1);
        NC_CHECK(memcmp(back, h, (size_t)n * sizeof(float)) == 0, "upload + download round trip");
        free(back);
    }
    free(h);
    buf b = buf_rand(&P, n, -2, 2), out = buf_new(&P, n, NULL);

    FOR_SIDES BE->ops->zero(BE, S(a) + 10, 50);
    check_exact(&P, "zero", &a);
    FOR_SIDES BE->ops->copy(BE, S(z), S(b), (size_t)n);
    check_exact(&P, "copy", &z);
    FOR_SIDES BE->ops->copy(BE, S(z) + 3, S(z), 500); /* overlapping, forwards (memmove) */
    check_exact(&P, "copy overlapping forwards", &z);
    FOR_SIDES BE->ops->copy(BE, S(z), S(z) + 7, 600); /* overlapping, backwards */
    check_exact(&P, "copy overlapping backwards", &z);
    FOR_SIDES BE->ops->copy_rows(BE, S(out), 11, S(b), 13, 7, 9);
    check_exact(&P, "copy_rows", &out);
    FOR_SIDES BE->ops->add(BE, n, S(a), S(b), S(out));
    check_exact(&P, "add", &out);
    FOR_SIDES BE->ops->sub(BE, n, S(a), S(b), S(out));
    check_exact(&P, "sub", &out);
    FOR_SIDES BE->ops->add(BE, n, S(out), S(b), S(out)); /* in place */
    check_exact(&P, "add in place", &out);
    buf mean = buf_new(&P, 200, NULL);
    FOR_SIDES BE->ops->mean_steps(BE, 5, 200, S(a), S(mean));
    check_exact(&P, "mean_steps T=5", &mean);
    FOR_SIDES BE->ops->mean_steps(BE, 1, 200, S(b), S(mean));
    check_exact(&P, "mean_steps T=1", &mean);
    FOR_SIDES BE->ops->broadcast_steps(BE, 4, 200, S(mean), 0.37f, S(out));
    check_exact(&P, "broadcast_steps", &out);
    buf_free_all(&P, (buf *[]){&z, &a, &b, &out, &mean}, 5);
    pair_free(&P);
}

/* ---- conv2d ---------------------------------------------------------------------- */

typedef struct conv_case {
    int c, h, w, cout, groups, kh, kw, sh, sw, pad[4], dh, dw, rows, bias;
} conv_case;

static const conv_case conv_cases[] = {
    {4, 9, 9, 6, 1, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 5, 1},   /* plain 3×3 same */
    {4, 11, 10, 6, 2, 3, 2, 2, 2, {1, 0, 2, 1}, 2, 1, 7, 1}, /* groups 2, stride 2, asymmetric pad, dilation */
    {6, 8, 8, 4, 2, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, 6, 0},   /* 1×1, groups 2, no bias */
    {3, 12, 12, 6, 3, 5, 5, 2, 2, {2, 2, 2, 2}, 1, 1, 4, 1}, /* groups = C (depthwise ×2) */
    {2, 7, 9, 5, 1, 3, 3, 1, 2, {0, 1, 0, 1}, 2, 2, 9, 1},   /* dilation 2, stride (1, 2) */
    {3, 28, 28, 8, 1, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 24, 1}, /* several chunks at 1 MiB */
};

static void conv_desc(const conv_case *k, char *buf, size_t size)
{
    snprintf(buf, size, "conv %dx%dx%d->%d g%d k%dx%d s%d,%d p%d,%d,%d,%d d%d,%d rows %d%s", k->c, k->h, k->w,
             k->cout, k->groups, k->kh, k->kw, k->sh, k->sw, k->pad[0], k->pad[1], k->pad[2], k->pad[3], k->dh, k->dw,
             k->rows, k->bias ? "" : " no-bias");
}

/* Forward, then backward with (din, dweight, dbias) = `which` bits 1, 2, 4,
 * each result within atol_rel·max|cpu| + rtol·|cpu| of the CPU's. */
static void conv_run_within(pair *Pp, const conv_case *k, int which, double atol_rel, double rtol)
{
    pair P = *Pp;
    nc_window g;
    int kernel[2] = {k->kh, k->kw}, stride[2] = {k->sh, k->sw}, dil[2] = {k->dh, k->dw};
    NC_CHECK(nc_window_init(&g, k->c, k->h, k->w, kernel, stride, k->pad, dil, 0) == 0, "window");
    char desc[200], what[260];
    conv_desc(k, desc, sizeof desc);
    int cg = k->c / k->groups;
    int64_t in_n = (int64_t)k->rows * k->c * k->h * k->w, out_n = (int64_t)k->rows * k->cout * g.oh * g.ow;
    int64_t w_n = (int64_t)k->cout * cg * k->kh * k->kw;
    float ws = 1.5f / sqrtf((float)(cg * k->kh * k->kw));
    buf in = buf_rand(&P, in_n, -1, 1), w = buf_rand(&P, w_n, -ws, ws), bias = buf_rand(&P, k->cout, -0.1f, 0.1f);
    buf out = buf_new(&P, out_n, NULL);
    FOR_SIDES BE->ops->conv2d(BE, &g, k->cout, k->groups, k->rows, S(in), S(w), SN(bias, k->bias), S(out));
    snprintf(what, sizeof what, "%s: forward", desc);
    check_buf(&P, what, &out, atol_rel, rtol);

    buf dout = buf_rand(&P, out_n, -1, 1), din = buf_rand(&P, in_n, -5, 5); /* din: overwritten */
    buf dw = buf_rand(&P, w_n, -1, 1), db = buf_rand(&P, k->cout, -1, 1);   /* accumulated onto */
    FOR_SIDES BE->ops->conv2d_backward(BE, &g, k->cout, k->groups, k->rows, S(in), S(w), S(dout), SN(din, which & 1),
                                       SN(dw, which & 2), SN(db, which & 4));
    if (which & 1) {
        snprintf(what, sizeof what, "%s: din", desc);
        check_buf(&P, what, &din, atol_rel, rtol);
    }
    snprintf(what, sizeof what, "%s: dweight%s", desc, which & 2 ? " +=" : " (NULL: unchanged)");
    check_buf(&P, what, &dw, atol_rel, rtol);
    snprintf(what, sizeof what, "%s: dbias%s", desc, which & 4 ? " +=" : " (NULL: unchanged)");
    check_buf(&P, what, &db, atol_rel, rtol);
    buf_free_all(&P, (buf *[]){&in, &w, &bias, &out, &dout, &din, &dw, &db}, 8);
}

static void conv_run(pair *Pp, const conv_case *k, int which) { conv_run_within(Pp, k, which, GEMM_ATOL, GEMM_RTOL); }

static void test_conv2d(void)
{
    pair P;
    if (!pair_new(&P))
        return;
    for (size_t i = 0; i < sizeof conv_cases / sizeof *conv_cases; i++)
        conv_run(&P, &conv_cases[i], 7);
    conv_run(&P, &conv_cases[1], 2); /* dweight only */
    conv_run(&P, &conv_cases[1], 1); /* din only */
    conv_run(&P, &conv_cases[3], 5); /* din and dbias */
    pair_free(&P);
}

/* The same with a 1 MiB workspace: the 28×28 case runs in 2 (forward) and 3
 * (backward) chunks of samples. */
static void test_conv2d_chunks(void)
{
    setenv("NC_GPU_TRAIN_CHUNK_MB", "1", 1);
    pair P;
    int ok = pair_new(&P);
    unsetenv("NC_GPU_TRAIN_CHUNK_MB");
    if (!ok)
        return;
    for (size_t i = 0; i < sizeof conv_cases / sizeof *conv_cases; i++)
        conv_run(&P, &conv_cases[i], 7);
    pair_free(&P);
}

/* The trainer in another precision (the engine option "precision", here
 * through its environment override): a backend made with it. */
static int pair_new_in(pair *P, const char *precision)
{
    setenv("NC_GPU_PRECISION", precision, 1);
    int ok = pair_new(P);
    unsetenv("NC_GPU_PRECISION");
    return ok;
}

/* 1 when every value of b on the GPU is a bf16 value (low 16 bits zero). */
static int all_bf16(pair *P, const buf *b)
{
    if (!pair_sync(P, "all_bf16"))
        return 0;
    float *h = buf_get(P, b, 1);
    int64_t wide = 0;
    for (int64_t i = 0; i < b->n; i++) {
        uint32_t u;
        memcpy(&u, &h[i], sizeof u);
        wide += (u & 0xffffu) != 0;
    }
    free(h);
    return wide == 0;
}

/* bf16 mode: cuDNN's convolutions on bf16 copies, fp32 accumulation; the
 * results are within bf16's rounding of the CPU's fp32 ones (a wrong layout
 * or transpose would be off by the size of the values), and the forward
 * output and the input gradient of a plain conv without bias are bf16
 * values widened: the bf16 path ran, not the fp32 one.  tf32 mode: the same
 * cases within TF32's rounding. */
static void test_conv2d_bf16_tf32(void)
{
    pair P;
    if (!pair_new_in(&P, "bf16"))
        return;
    /* the cases above have channel counts that keep them in fp32; these two run in bf16 */
    const conv_case bf16_cases[] = {
        {16, 11, 11, 8, 1, 3, 3, 2, 2, {1, 1, 1, 1}, 1, 1, 4, 1}, /* stride 2, odd size */
        {32, 14, 14, 64, 1, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 8, 1}, /* a VGG-style layer */
    };
    for (size_t i = 0; i < sizeof conv_cases / sizeof *conv_cases; i++)
        conv_run_within(&P, &conv_cases[i], 7, 1e-2, 1e-2);
    for (size_t i = 0; i < sizeof bf16_cases / sizeof *bf16_cases; i++)
        conv_run_within(&P, &bf16_cases[i], 7, 1e-2, 1e-2);
    conv_run_within(&P, &bf16_cases[1], 2, 1e-2, 1e-2); /* dweight only */
    const conv_case plain = {8, 10, 10, 16, 1, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 6, 0};
    nc_window g;
    int kernel[2] = {3, 3}, stride[2] = {1, 1}, dil[2] = {1, 1};
    NC_CHECK(nc_window_init(&g, plain.c, plain.h, plain.w, kernel, stride, plain.pad, dil, 0) == 0, "window");
    int64_t in_n = (int64_t)plain.rows * plain.c * 100, out_n = (int64_t)plain.rows * plain.cout * 100;
    buf in = buf_rand(&P, in_n, -1, 1), w = buf_rand(&P, (int64_t)plain.cout * plain.c * 9, -0.2f, 0.2f);
    buf out = buf_new(&P, out_n, NULL), dout = buf_rand(&P, out_n, -1, 1), din = buf_new(&P, in_n, NULL);
    FOR_SIDES BE->ops->conv2d(BE, &g, plain.cout, 1, plain.rows, S(in), S(w), NULL, S(out));
    FOR_SIDES BE->ops->conv2d_backward(BE, &g, plain.cout, 1, plain.rows, S(in), S(w), S(dout), S(din), NULL, NULL);
    /* with conv=im2col the trainer's convolutions are cuBLAS sgemm in every
     * precision (the option's help says so): fp32 values, not bf16 ones */
#if NC_HAVE_CUDA
    int on_im2col = strcmp(nc_gpu_options_get().conv, "im2col") == 0;
#else
    int on_im2col = 0; /* without CUDA the test skips before it gets here */
#endif
    NC_CHECK(all_bf16(&P, &out) != on_im2col, "bf16 mode: the forward output is bf16 values (fp32 on im2col)");
    NC_CHECK(all_bf16(&P, &din) != on_im2col, "bf16 mode: the input gradient is bf16 values (fp32 on im2col)");
    check_buf(&P, "bf16 mode: plain conv forward", &out, 1e-2, 1e-2);
    buf_free_all(&P, (buf *[]){&in, &w, &out, &dout, &din}, 5);
    pair_free(&P);

    if (!pair_new_in(&P, "tf32"))
        return;
    for (size_t i = 0; i < sizeof conv_cases / sizeof *conv_cases; i++)
        conv_run_within(&P, &conv_cases[i], 7, 2e-3, 2e-3);
    pair_free(&P);
}

/* ---- dense ----------------------------------------------------------------------- */

static void dense_run(pair *Pp, int64_t rows, int fin, int fout, int with_bias, int which)
{
    pair P = *Pp;
    char what[160];
    float ws = 1.5f / sqrtf((float)fin);
    buf in = buf_rand(&P, rows * fin, -1, 1), w = buf_rand(&P, (int64_t)fout * fin, -ws, ws);
    buf bias = buf_rand(&P, fout, -0.1f, 0.1f), out = buf_new(&P, rows * fout, NULL);
    FOR_SIDES BE->ops->dense(BE, rows, fin, fout, S(in), S(w), SN(bias, with_bias), S(out));
    snprintf(what, sizeof what, "dense rows %lld %d->%d%s: forward", (long long)rows, fin, fout,
             with_bias ? "" : " no-bias");
    check_buf(&P, what, &out, GEMM_ATOL, GEMM_RTOL);
    buf dout = buf_rand(&P, rows * fout, -1, 1), din = buf_rand(&P, rows * fin, -5, 5);
    buf dw = buf_rand(&P, (int64_t)fout * fin, -1, 1), db = buf_rand(&P, fout, -1, 1);
    FOR_SIDES BE->ops->dense_backward(BE, rows, fin, fout, S(in), S(w), S(dout), SN(din, which & 1), SN(dw, which & 2),
                                      SN(db, which & 4));
    if (which & 1) {
        snprintf(what, sizeof what, "dense rows %lld %d->%d: din", (long long)rows, fin, fout);
        check_buf(&P, what, &din, GEMM_ATOL, GEMM_RTOL);
    }
    snprintf(what, sizeof what, "dense rows %lld %d->%d: dweight", (long long)rows, fin, fout);
    check_buf(&P, what, &dw, GEMM_ATOL, GEMM_RTOL);
    snprintf(what, sizeof what, "dense rows %lld %d->%d: dbias", (long long)rows, fin, fout);
    check_buf(&P, what, &db, GEMM_ATOL, GEMM_RTOL);
    buf_free_all(&P, (buf *[]){&in, &w, &bias, &out, &dout, &din, &dw, &db}, 8);
}

static void test_dense(void)
{
    pair P;
    if (!pair_new(&P))
        return;
    dense_run(&P, 37, 50, 13, 1, 7);
    dense_run(&P, 5, 3, 1, 0, 7);
    dense_run(&P, 1000, 300, 10, 1, 7);
    dense_run(&P, 37, 50, 13, 1, 2); /* dweight only */
    dense_run(&P, 37, 50, 13, 0, 5); /* din and dbias */
    pair_free(&P);
}

/* ---- pools ----------------------------------------------------------------------- */

typedef struct pool_case {
    int c, h, w, kh, kw, sh, sw, pad[4], dh, dw, ceil_mode;
} pool_case;

static const pool_case pool_cases[] = {
    {3, 8, 8, 2, 2, 2, 2, {0, 0, 0, 0}, 1, 1, 0},   /* 2×2 stride 2 */
    {3, 9, 7, 3, 3, 2, 2, {1, 1, 1, 1}, 1, 1, 1},   /* padding, ceil mode */
    {2, 10, 11, 3, 2, 2, 3, {1, 0, 1, 1}, 1, 1, 1}, /* asymmetric, ceil mode */
    {2, 9, 9, 3, 3, 1, 1, {2, 2, 2, 2}, 2, 2, 0},   /* dilation 2, overlapping windows */
    {4, 5, 6, 3, 3, 3, 3, {0, 0, 0, 0}, 1, 1, 1},   /* ceil-mode overhang, no padding */
    {2, 6, 6, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 0},   /* stride 1, every input in 9 windows */
};

static void test_pools(void)
{
    pair P;
    if (!pair_new(&P))
        return;
    int64_t rows = 5;
    for (size_t i = 0; i < sizeof pool_cases / sizeof *pool_cases; i++) {
        const pool_case *k = &pool_cases[i];
        nc_window g;
        int kernel[2] = {k->kh, k->kw}, stride[2] = {k->sh, k->sw}, dil[2] = {k->dh, k->dw};
        NC_CHECK(nc_window_init(&g, k->c, k->h, k->w, kernel, stride, k->pad, dil, k->ceil_mode) == 0, "window %zu",
                 i);
        char desc[160], what[220];
        snprintf(desc, sizeof desc, "pool %dx%dx%d k%dx%d s%d,%d p%d,%d,%d,%d d%d,%d%s -> %dx%d", k->c, k->h, k->w,
                 k->kh, k->kw, k->sh, k->sw, k->pad[0], k->pad[1], k->pad[2], k->pad[3], k->dh, k->dw,
                 k->ceil_mode ? " ceil" : "", g.oh, g.ow);
        int64_t in_n = rows * k->c * k->h * k->w, out_n = rows * k->c * g.oh * g.ow;
        /* few distinct values: many ties for the first-max rule; some −inf */
        float *h = malloc((size_t)in_n * sizeof(float));
        for (int64_t j = 0; j < in_n; j++) {
            h[j] = floorf(rnd_range(0, 4)) * 0.5f - 1.0f;
            if (j % 37 == 5)
                h[j] = -INFINITY;
        }
        buf in = buf_new(&P, in_n, h), out = buf_new(&P, out_n, NULL), dout = buf_rand(&P, out_n, -1, 1);
        buf din = buf_rand(&P, in_n, -5, 5);
        free(h);
        FOR_SIDES BE->ops->maxpool(BE, &g, rows, S(in), S(out));
        snprintf(what, sizeof what, "%s: maxpool", desc);
        check_exact(&P, what, &out);
        FOR_SIDES BE->ops->maxpool_backward(BE, &g, rows, S(in), S(dout), S(din));
        snprintf(what, sizeof what, "%s: maxpool_backward", desc);
        check_exact(&P, what, &din);
        buf_free(&P, &in);
        in = buf_rand(&P, in_n, -1, 1);
        for (int cip = 0; cip < 2; cip++) {
            FOR_SIDES BE->ops->avgpool(BE, &g, cip, rows, S(in), S(out));
            snprintf(what, sizeof what, "%s: avgpool count_include_pad=%d", desc, cip);
            check_exact(&P, what, &out);
            FOR_SIDES BE->ops->avgpool_backward(BE, &g, cip, rows, S(dout), S(din));
            snprintf(what, sizeof what, "%s: avgpool_backward count_include_pad=%d", desc, cip);
            check_exact(&P, what, &din);
        }
        buf_free_all(&P, (buf *[]){&in, &out, &dout, &din}, 4);
    }
    /* global average pool */
    int c = 5;
    int64_t hw = 49;
    buf in = buf_rand(&P, rows * c * hw, -1, 1), out = buf_new(&P, rows * c, NULL);
    buf dout = buf_rand(&P, rows * c, -1, 1), din = buf_new(&P, rows * c * hw, NULL);
    FOR_SIDES BE->ops->global_avgpool(BE, rows, c, hw, S(in), S(out));
    check_exact(&P, "global_avgpool", &out);
    FOR_SIDES BE->ops->global_avgpool_backward(BE, rows, c, hw, S(dout), S(din));
    check_exact(&P, "global_avgpool_backward", &din);
    buf_free_all(&P, (buf *[]){&in, &out, &dout, &din}, 4);
    pair_free(&P);
}

/* ---- element-wise: affine, relu, clip, qcfs ------------------------------------- */

#define SUM_ATOL 1e-5
#define SUM_RTOL 1e-4

static void test_affine(void)
{
    pair P;
    if (!pair_new(&P))
        return;
    int64_t rows = 6, inner = 21;
    int c = 4;
    int64_t n = rows * c * inner;
    buf in = buf_rand(&P, n, -2, 2), scale = buf_rand(&P, c, -1.5f, 1.5f), shift = buf_rand(&P, c, -1, 1);
    buf out = buf_new(&P, n, NULL), dout = buf_rand(&P, n, -1, 1), din = buf_new(&P, n, NULL);
    buf dscale = buf_rand(&P, c, -1, 1), dshift = buf_rand(&P, c, -1, 1);
    for (int v = 0; v < 4; v++) { /* scale, shift present or NULL */
        char what[120];
        FOR_SIDES BE->ops->affine(BE, rows, c, inner, SN(scale, v & 1), SN(shift, v & 2), S(in), S(out));
        snprintf(what, sizeof what, "affine%s%s", v & 1 ? " scale" : "", v & 2 ? " shift" : "");
        check_exact(&P, what, &out);
        FOR_SIDES BE->ops->affine_backward(BE, rows, c, inner, SN(scale, v & 1), S(in), S(dout), S(din),
                                           SN(dscale, v & 2), SN(dshift, v & 1));
        snprintf(what, sizeof what, "affine_backward din%s", v & 1 ? " (scale)" : " (scale NULL)");
        check_exact(&P, what, &din);
        check_buf(&P, "affine_backward dscale +=", &dscale, SUM_ATOL, SUM_RTOL);
        check_buf(&P, "affine_backward dshift +=", &dshift, SUM_ATOL, SUM_RTOL);
    }
    /* din aliasing dout (the sums must read dout first) */
    FOR_SIDES BE->ops->copy(BE, S(din), S(dout), (size_t)n);
    FOR_SIDES BE->ops->affine_backward(BE, rows, c, inner, S(scale), S(in), S(din), S(din), S(dscale), S(dshift));
    check_exact(&P, "affine_backward din aliasing dout", &din);
    check_buf(&P, "affine_backward dscale (din aliasing dout)", &dscale, SUM_ATOL, SUM_RTOL);
    check_buf(&P, "affine_backward dshift (din aliasing dout)", &dshift, SUM_ATOL, SUM_RTOL);
    buf_free_all(&P, (buf *[]){&in, &scale, &shift, &out, &dout, &din, &dscale, &dshift}, 8);
    pair_free(&P);
}

static void test_relu_clip(void)
{
    pair P;
    if (!pair_new(&P))
        return;
    int64_t n = 3001;
    float lo = -0.5f, hi = 0.75f;
    float *h = host_rand(n, -2, 2);
    for (int64_t i = 0; i < n; i += 10) /* the boundaries themselves */
        h[i] = (i / 10) % 3 == 0 ? 0.0f : (i / 10) % 3 == 1 ? lo : hi;
    buf in = buf_new(&P, n, h), out = buf_new(&P, n, NULL), dout = buf_rand(&P, n, -1, 1), din = buf_new(&P, n, NULL);
    free(h);
    FOR_SIDES BE->ops->relu(BE, n, S(in), S(out));
    check_exact(&P, "relu", &out);
    FOR_SIDES BE->ops->relu_backward(BE, n, S(in), S(dout), S(din));
    check_exact(&P, "relu_backward", &din);
    FOR_SIDES BE->ops->clip(BE, n, lo, hi, S(in), S(out));
    check_exact(&P, "clip", &out);
    FOR_SIDES BE->ops->clip_backward(BE, n, lo, hi, S(in), S(dout), S(din));
    check_exact(&P, "clip_backward", &din);
    FOR_SIDES BE->ops->copy(BE, S(out), S(in), (size_t)n);
    FOR_SIDES BE->ops->relu(BE, n, S(out), S(out));
    check_exact(&P, "relu in place", &out);
    buf_free_all(&P, (buf *[]){&in, &out, &dout, &din}, 4);
    pair_free(&P);
}

static void test_qcfs(void)
{
    pair P;
    if (!pair_new(&P))
        return;
    int64_t rows = 7, inner = 33;
    int c = 5;
    int64_t n = rows * c * inner;
    for (int per_channel = 0; per_channel < 2; per_channel++)
        for (int v = 0; v < 2; v++) {
            int levels = v ? 8 : 4, n_lambda = per_channel ? c : 1;
            float shift = v ? 0.5f : 0.0f;
            float lam_h[8];
            for (int k = 0; k < n_lambda; k++)
                lam_h[k] = rnd_range(0.5f, 2.5f);
            float *h = malloc((size_t)n * sizeof(float));
            for (int64_t i = 0; i < n; i++) {
                float lam = lam_h[n_lambda == c ? (i / inner) % c : 0];
                h[i] = rnd_range(-0.5f, 1.5f) * lam;
                if (i % 17 == 0)
                    h[i] = (i / 17) % 2 ? lam : 0.0f; /* the clamp bounds */
            }
            buf in = buf_new(&P, n, h), lambda = buf_new(&P, n_lambda, lam_h), out = buf_new(&P, n, NULL);
            buf dout = buf_rand(&P, n, -1, 1), din = buf_new(&P, n, NULL), dlam = buf_rand(&P, n_lambda, -1, 1);
            free(h);
            char desc[120], what[180];
            snprintf(desc, sizeof desc, "qcfs L=%d shift=%g %s", levels, shift, per_channel ? "per-channel" : "per-layer");
            FOR_SIDES BE->ops->qcfs(BE, rows, c, inner, S(lambda), n_lambda, levels, shift, S(in), S(out));
            snprintf(what, sizeof what, "%s: forward", desc);
            check_exact(&P, what, &out);
            FOR_SIDES BE->ops->qcfs_backward(BE, rows, c, inner, S(lambda), n_lambda, levels, shift, S(in), S(dout),
                                             S(din), S(dlam));
            snprintf(what, sizeof what, "%s: din", desc);
            check_exact(&P, what, &din);
            snprintf(what, sizeof what, "%s: dlambda +=", desc);
            check_buf(&P, what, &dlam, SUM_ATOL, SUM_RTOL);
            /* din NULL: only dλ */
            FOR_SIDES BE->ops->qcfs_backward(BE, rows, c, inner, S(lambda), n_lambda, levels, shift, S(in), S(dout),
                                             NULL, S(dlam));
            snprintf(what, sizeof what, "%s: dlambda += (din NULL)", desc);
            check_buf(&P, what, &dlam, SUM_ATOL, SUM_RTOL);
            buf_free_all(&P, (buf *[]){&in, &lambda, &out, &dout, &din, &dlam}, 6);
        }
    pair_free(&P);
}

/* ---- integrate-and-fire ------------------------------------------------------------ */

/* Thresholds: θ[0] = 1 (with v0 = θ/2 and inputs of 0.5: exact ties), the
 * others random. */
static float *if_thresholds(int n_th)
{
    float *th = malloc((size_t)n_th * sizeof(float));
    for (int k = 0; k < n_th; k++)
        th[k] = k == 0 ? 1.0f : rnd_range(0.3f, 2.0f);
    return th;
}

static float *if_inputs(int64_t n)
{
    float *h = host_rand(n, -0.5f, 1.5f);
    for (int64_t i = 0; i < n; i += 7)
        h[i] = 0.5f;
    return h;
}

/* Spikes that differ between the backends' outputs (non-zero = spike). */
static int64_t spike_report(pair *P, const char *what, const buf *out, int64_t *spikes)
{
    float *ref = buf_get(P, out, 0), *got = buf_get(P, out, 1);
    int64_t bad = spike_mismatches(got, ref, out->n, spikes);
    printf("# %s: %lld of %lld neuron-steps differ (rate %.2e), %lld spikes\n", what, (long long)bad,
           (long long)out->n, out->n ? (double)bad / (double)out->n : 0.0, (long long)*spikes);
    free(ref);
    free(got);
    return bad;
}

static void test_if_forward(void)
{
    pair P;
    if (!pair_new(&P))
        return;
    int64_t n = 3, inner = 37;
    int c = 4;
    int64_t step = n * c * inner;
    static const int Ts[] = {1, 4, 9};
    int64_t total_bad = 0, total_spikes = 0;
    for (int ti = 0; ti < 3; ti++)
        for (int v = 0; v < 8; v++) {
            int T = Ts[ti], per_channel = v & 1;
            nc_reset reset = v & 2 ? NC_RESET_ZERO : NC_RESET_SUBTRACT;
            nc_compare cmp = v & 4 ? NC_FIRE_GT : NC_FIRE_GE;
            int n_th = per_channel ? c : 1;
            float *th_h = if_thresholds(n_th), *x = if_inputs(T * step);
            buf th = buf_new(&P, n_th, th_h), in = buf_new(&P, T * step, x), out = buf_new(&P, T * step, NULL);
            buf ms = buf_new(&P, T * step, NULL);
            free(th_h);
            free(x);
            char desc[160], what[200];
            snprintf(desc, sizeof desc, "IF forward T=%d %s %s %s", T, cmp == NC_FIRE_GE ? ">=" : ">",
                     reset == NC_RESET_SUBTRACT ? "subtract" : "zero", per_channel ? "per-channel" : "per-layer");
            FOR_SIDES {
                nc_if_params p = {S(th), n_th, 0.5f, reset, cmp};
                BE->ops->if_forward_train(BE, &p, T, n, c, inner, S(in), S(out), S(ms));
            }
            if (!pair_sync(&P, desc))
                goto next;
            int64_t spikes = 0;
            total_bad += spike_report(&P, desc, &out, &spikes);
            total_spikes += spikes;
            snprintf(what, sizeof what, "%s: spikes", desc);
            check_exact(&P, what, &out);
            snprintf(what, sizeof what, "%s: m_saved", desc);
            check_exact(&P, what, &ms);
            if (v == 0) { /* in place: in == out */
                FOR_SIDES {
                    nc_if_params p = {S(th), n_th, 0.5f, reset, cmp};
                    BE->ops->if_forward_train(BE, &p, T, n, c, inner, S(in), S(in), S(ms));
                }
                snprintf(what, sizeof what, "%s: in place", desc);
                check_exact(&P, what, &in);
            }
        next:
            buf_free_all(&P, (buf *[]){&th, &in, &out, &ms}, 4);
        }
    printf("# IF forward, all variants: %lld spike mismatches in all, %lld spikes\n", (long long)total_bad,
           (long long)total_spikes);
    NC_CHECK(total_bad == 0, "the IF forward must give the CPU's spikes bit for bit on equal inputs");
    pair_free(&P);
}

static void test_if_backward(void)
{
    pair P;
    if (!pair_new(&P))
        return;
    int64_t n = 3, inner = 37;
    int c = 4, T = 6;
    int64_t step = n * c * inner, total = T * step;
    for (int sur = 0; sur < 4; sur++)
        for (int v = 0; v < 16; v++) {
            int per_channel = v & 1, with_dth = (v & 8) != 0;
            nc_reset reset = v & 2 ? NC_RESET_ZERO : NC_RESET_SUBTRACT;
            nc_compare cmp = v & 4 ? NC_FIRE_GT : NC_FIRE_GE;
            nc_surrogate kind = (nc_surrogate)sur;
            float alpha = v == 15 ? 0.7f : nc_surrogate_default_alpha(kind);
            int n_th = per_channel ? c : 1;
            float *th_h = if_thresholds(n_th), *x = if_inputs(total);
            buf th = buf_new(&P, n_th, th_h), in = buf_new(&P, total, x), out = buf_new(&P, total, NULL);
            buf ms = buf_new(&P, total, NULL), dout = buf_rand(&P, total, -1, 1), din = buf_new(&P, total, NULL);
            buf dth = buf_rand(&P, n_th, -1, 1);
            free(th_h);
            free(x);
            char desc[200], what[240];
            snprintf(desc, sizeof desc, "IF backward %s a=%g %s %s %s%s", nc_surrogate_name(kind), alpha,
                     cmp == NC_FIRE_GE ? ">=" : ">", reset == NC_RESET_SUBTRACT ? "subtract" : "zero",
                     per_channel ? "per-channel" : "per-layer", with_dth ? " +dθ" : "");
            /* the CPU's forward gives both sides the same m_t */
            nc_if_params p0 = {th.p[0], n_th, 0.5f, reset, cmp};
            P.be[0]->ops->if_forward_train(P.be[0], &p0, T, n, c, inner, in.p[0], out.p[0], ms.p[0]);
            if (!pair_sync(&P, desc))
                goto next;
            float *m_h = buf_get(&P, &ms, 0);
            P.be[1]->ops->upload(P.be[1], ms.p[1], m_h, (size_t)total);
            free(m_h);
            FOR_SIDES {
                nc_if_params p = {S(th), n_th, 0.5f, reset, cmp};
                BE->ops->if_backward(BE, &p, kind, alpha, T, n, c, inner, S(ms), S(dout), S(din), SN(dth, with_dth));
            }
            int exact = kind != NC_SURROGATE_SIGMOID;
            snprintf(what, sizeof what, "%s: din", desc);
            check_buf(&P, what, &din, exact ? 0 : SUM_ATOL, exact ? 0 : SUM_RTOL);
            snprintf(what, sizeof what, "%s: dthreshold%s", desc, with_dth ? " +=" : " (NULL: unchanged)");
            check_buf(&P, what, &dth, SUM_ATOL, SUM_RTOL);
            if (v == 9) { /* din aliasing dout */
                FOR_SIDES {
                    nc_if_params p = {S(th), n_th, 0.5f, reset, cmp};
                    BE->ops->if_backward(BE, &p, kind, alpha, T, n, c, inner, S(ms), S(dout), S(dout), S(dth));
                }
                snprintf(what, sizeof what, "%s: din aliasing dout", desc);
                check_buf(&P, what, &dout, exact ? 0 : SUM_ATOL, exact ? 0 : SUM_RTOL);
                snprintf(what, sizeof what, "%s: dthreshold (din aliasing dout)", desc);
                check_buf(&P, what, &dth, SUM_ATOL, SUM_RTOL);
            }
        next:
            buf_free_all(&P, (buf *[]){&th, &in, &out, &ms, &dout, &din, &dth}, 7);
        }
    pair_free(&P);
}

/* A spiking conv layer, as the trainer runs it: conv over T·N rows → IF →
 * mean over steps, then back: broadcast → IF BPTT → conv backward.  Each
 * backend runs on its own values, so a spike may flip where the two GEMMs'
 * sums differ at an exact tie: the rate is reported and must stay tiny. */
static void test_conv_if_chain(void)
{
    pair P;
    if (!pair_new(&P))
        return;
    int T = 4, N = 6, c = 3, h = 10, w = 10, cout = 8;
    int kernel[2] = {3, 3}, stride[2] = {1, 1}, pad[4] = {1, 1, 1, 1}, dil[2] = {1, 1};
    nc_window g;
    NC_CHECK(nc_window_init(&g, c, h, w, kernel, stride, pad, dil, 0) == 0, "window");
    int64_t rows = (int64_t)T * N, in_n = rows * c * h * w, inner = (int64_t)g.oh * g.ow;
    int64_t per = N * cout * inner, out_n = T * per, w_n = (int64_t)cout * c * 9;
    float ws = 2.0f / sqrtf(27.0f);
    buf in = buf_rand(&P, in_n, 0, 1), wt = buf_rand(&P, w_n, -ws, ws), bias = buf_rand(&P, cout, -0.1f, 0.3f);
    buf cur = buf_new(&P, out_n, NULL), spk = buf_new(&P, out_n, NULL), ms = buf_new(&P, out_n, NULL);
    buf mean = buf_new(&P, per, NULL), dmean = buf_rand(&P, per, -1, 1), dspk = buf_new(&P, out_n, NULL);
    buf dcur = buf_new(&P, out_n, NULL), din = buf_new(&P, in_n, NULL), dw = buf_new(&P, w_n, NULL);
    buf db = buf_new(&P, cout, NULL), th = buf_rand(&P, cout, 0.5f, 1.5f), dth = buf_new(&P, cout, NULL);
    FOR_SIDES {
        nc_if_params p = {S(th), cout, 0.5f, NC_RESET_SUBTRACT, NC_FIRE_GE};
        BE->ops->conv2d(BE, &g, cout, 1, rows, S(in), S(wt), S(bias), S(cur));
        BE->ops->if_forward_train(BE, &p, T, N, cout, inner, S(cur), S(spk), S(ms));
        BE->ops->mean_steps(BE, T, per, S(spk), S(mean));
        BE->ops->broadcast_steps(BE, T, per, S(dmean), 1.0f / (float)T, S(dspk));
        BE->ops->if_backward(BE, &p, NC_SURROGATE_ATAN, 2.0f, T, N, cout, inner, S(ms), S(dspk), S(dcur), S(dth));
        BE->ops->conv2d_backward(BE, &g, cout, 1, rows, S(in), S(wt), S(dcur), S(din), S(dw), S(db));
    }
    if (pair_sync(&P, "chain")) {
        int64_t spikes = 0, bad = spike_report(&P, "conv -> IF chain", &spk, &spikes);
        NC_CHECK(bad <= 2 && bad * 1000 <= spk.n, "%lld spike mismatches of %lld neuron-steps", (long long)bad,
                 (long long)spk.n);
        NC_CHECK(spikes > out_n / 50, "the chain fires (%lld spikes)", (long long)spikes);
        /* with no flipped spike, everything downstream agrees to float rounding */
        double tol = bad == 0 ? 1e-4 : 5e-2;
        const buf *outs[] = {&cur, &mean, &dcur, &din, &dw, &db, &dth};
        const char *names[] = {"conv output", "mean spikes", "IF din", "conv din", "conv dweight", "conv dbias",
                               "dthreshold"};
        for (int k = 0; k < 7; k++) {
            float *ref = buf_get(&P, outs[k], 0), *got = buf_get(&P, outs[k], 1);
            double e = rel_error(got, ref, outs[k]->n);
            printf("# chain %s: relative error %.3g\n", names[k], e);
            NC_CHECK(e <= tol, "chain %s: relative error %.3g > %.0e", names[k], e, tol);
            free(ref);
            free(got);
        }
    }
    buf *all[] = {&in, &wt, &bias, &cur, &spk, &ms, &mean, &dmean, &dspk, &dcur, &din, &dw, &db, &th, &dth};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++)
        buf_free(&P, all[k]);
    pair_free(&P);
}

/* ---- optimisers --------------------------------------------------------------------- */

static void test_optimizers(void)
{
    pair P;
    if (!pair_new(&P))
        return;
    int64_t n = 2000;
    float min_value = 1e-4f;
    for (int clamp = 0; clamp < 2; clamp++) {
        /* values near the clamp so that it acts */
        buf value = buf_rand(&P, n, -0.01f, 0.05f), grad = buf_rand(&P, n, -1, 1), m = buf_rand(&P, n, -0.1f, 0.1f);
        buf v = buf_rand(&P, n, 0, 0.01f);
        char what[120];
        for (int step = 1; step <= 3; step++) {
            FOR_SIDES BE->ops->sgd_step(BE, n, S(value), S(grad), S(m), 0.01, 0.9, 1e-4, clamp, min_value);
            snprintf(what, sizeof what, "sgd step %d clamp=%d: value", step, clamp);
            check_exact(&P, what, &value);
            snprintf(what, sizeof what, "sgd step %d clamp=%d: momentum", step, clamp);
            check_exact(&P, what, &m);
        }
        double b1 = 0.9, b2 = 0.999;
        for (int step = 1; step <= 3; step++) {
            double c1 = 1.0 - pow(b1, step), c2 = 1.0 - pow(b2, step);
            FOR_SIDES BE->ops->adam_step(BE, n, S(value), S(grad), S(m), S(v), 1e-3, b1, b2, 1e-8, c1, c2, 5e-4, clamp,
                                         min_value);
            snprintf(what, sizeof what, "adam step %d clamp=%d: value", step, clamp);
            check_exact(&P, what, &value);
            snprintf(what, sizeof what, "adam step %d clamp=%d: m", step, clamp);
            check_exact(&P, what, &m);
            snprintf(what, sizeof what, "adam step %d clamp=%d: v", step, clamp);
            check_exact(&P, what, &v);
        }
        buf_free_all(&P, (buf *[]){&value, &grad, &m, &v}, 4);
    }
    pair_free(&P);
}

/* ---- the output loss ---------------------------------------------------------------- */

typedef struct loss_case {
    int teacher; /* 0: plain cross-entropy */
    double alpha, tau;
    float scale;
    int dlogits; /* 0: no gradient (the horizons' accuracy call) */
} loss_case;

/* Runs output_loss on both sides and compares; labels and sums are byte
 * buffers of each side. */
static void check_loss_case(pair *P_, const loss_case *c, int64_t rows, int classes, const buf *logits,
                            const buf *teacher, int32_t *const labels[2], buf *dl)
{
    pair P = *P_; /* FOR_SIDES and BE name a pair P */
    double *sums[2], host[2][2] = {{0}};
    FOR_SIDES sums[side] = BE->ops->alloc_bytes(BE, 2 * sizeof(double));
    FOR_SIDES BE->ops->output_loss(BE, rows, classes, S(*logits), labels[side], c->teacher ? S(*teacher) : NULL,
                                   c->alpha, c->tau, c->scale, c->dlogits ? S(*dl) : NULL, sums[side]);
    FOR_SIDES BE->ops->download_bytes(BE, host[side], sums[side], sizeof host[side]);
    char what[160];
    snprintf(what, sizeof what, "output_loss %lld×%d teacher=%d α=%g τ=%g scale=%g dlogits=%d", (long long)rows,
             classes, c->teacher, c->alpha, c->tau, (double)c->scale, c->dlogits);
    if (pair_sync(&P, what)) {
        NC_CHECK_CLOSE(host[1][0], host[0][0], 1e-13, 1e-12, "%s: mean loss", what);
        NC_CHECK(host[1][1] == host[0][1], "%s: correct %g, cpu %g", what, host[1][1], host[0][1]);
    }
    if (c->dlogits)
        check_buf(&P, what, dl, 1e-7, 1e-6);
    FOR_SIDES BE->ops->release_bytes(BE, sums[side]);
}

static void test_output_loss(void)
{
    pair P;
    if (!pair_new(&P))
        return;
    static const int64_t shapes[][2] = {{37, 10}, {5, 1000}, {1, 1}};
    for (int sh = 0; sh < 3; sh++) {
        int64_t rows = shapes[sh][0];
        int classes = (int)shapes[sh][1];
        buf logits = buf_rand(&P, rows * classes, -4, 4), teacher = buf_rand(&P, rows * classes, -6, 6);
        buf dl = buf_rand(&P, rows * classes, -1, 1); /* overwritten */
        int32_t *host = malloc((size_t)rows * sizeof(int32_t)), *labels[2];
        for (int64_t r = 0; r < rows; r++)
            host[r] = rnd_int(0, classes - 1);
        if (rows > 2)
            host[1] = classes, host[2] = -1; /* out of range: wrong, no loss, no gradient */
        FOR_SIDES {
            labels[side] = BE->ops->alloc_bytes(BE, (size_t)rows * sizeof(int32_t));
            BE->ops->upload_bytes(BE, labels[side], host, (size_t)rows * sizeof(int32_t));
        }
        check_loss_case(&P, &(loss_case){0, 0, 1, 1.0f, 1}, rows, classes, &logits, &teacher, labels, &dl);
        check_loss_case(&P, &(loss_case){0, 0, 1, 0.375f, 1}, rows, classes, &logits, &teacher, labels, &dl);
        check_loss_case(&P, &(loss_case){0, 0, 1, 1.0f, 0}, rows, classes, &logits, &teacher, labels, &dl);
        static const double alphas[] = {0, 0.5, 1}, taus[] = {1, 4};
        for (int a = 0; a < 3; a++)
            for (int t = 0; t < 2; t++)
                for (int k = 0; k < 2; k++)
                    check_loss_case(&P, &(loss_case){1, alphas[a], taus[t], k ? 0.25f : 1.0f, 1}, rows, classes,
                                    &logits, &teacher, labels, &dl);
        FOR_SIDES BE->ops->release_bytes(BE, labels[side]);
        free(host);
        buf_free_all(&P, (buf *[]){&logits, &teacher, &dl}, 3);
    }
    pair_free(&P);
}

/* ---- the multi-tensor optimiser step --------------------------------------------------- */

#define MT_TENSORS 4

/* Per-tensor steps on set a, optimizer_step on set b (same start values):
 * b on the GPU must equal a on the GPU bit for bit, and b on both sides too. */
static void test_multi_tensor_step(void)
{
    pair P;
    if (!pair_new(&P))
        return;
    static const int64_t counts[MT_TENSORS] = {1, 7, 1000, 300000};
    static const int decay[MT_TENSORS] = {1, 0, 1, 1}, clamp[MT_TENSORS] = {0, 1, 0, 1};
    for (int adam = 0; adam < 2; adam++) {
        buf a[MT_TENSORS][4], b[MT_TENSORS][4]; /* value, grad, m, v */
        for (int k = 0; k < MT_TENSORS; k++) {
            float lo = clamp[k] ? -0.01f : -1.0f, hi = clamp[k] ? 0.05f : 1.0f; /* the clamp acts */
            float *h[4] = {host_rand(counts[k], lo, hi), host_rand(counts[k], -1, 1), host_rand(counts[k], -0.1f, 0.1f),
                           host_rand(counts[k], 0, 0.01f)};
            for (int q = 0; q < 4; q++) {
                a[k][q] = buf_new(&P, counts[k], h[q]);
                b[k][q] = buf_new(&P, counts[k], h[q]);
                free(h[q]);
            }
        }
        for (int step = 1; step <= 3; step++) {
            nc_opt_step st = {.adam = adam, .lr = adam ? 1e-3 : 0.01, .momentum = 0.9, .beta1 = 0.9, .beta2 = 0.999,
                              .epsilon = 1e-8, .weight_decay = 5e-4, .min_value = 1e-4f};
            st.c1 = 1.0 - pow(st.beta1, step), st.c2 = 1.0 - pow(st.beta2, step);
            FOR_SIDES {
                nc_opt_tensor t[MT_TENSORS];
                for (int k = 0; k < MT_TENSORS; k++) {
                    double wd = decay[k] ? st.weight_decay : 0.0;
                    buf *x = a[k];
                    if (adam)
                        BE->ops->adam_step(BE, counts[k], S(x[0]), S(x[1]), S(x[2]), S(x[3]), st.lr, st.beta1,
                                           st.beta2, st.epsilon, st.c1, st.c2, wd, clamp[k], st.min_value);
                    else
                        BE->ops->sgd_step(BE, counts[k], S(x[0]), S(x[1]), S(x[2]), st.lr, st.momentum, wd, clamp[k],
                                          st.min_value);
                    /* step 3 lists the tensors backwards: a new set, so the GPU rebuilds its table */
                    int at = step == 3 ? MT_TENSORS - 1 - k : k;
                    t[at] = (nc_opt_tensor){S(b[k][0]), S(b[k][1]), S(b[k][2]), adam ? S(b[k][3]) : NULL, counts[k],
                                            decay[k], clamp[k]};
                }
                BE->ops->optimizer_step(BE, t, MT_TENSORS, &st);
            }
            for (int k = 0; k < MT_TENSORS; k++)
                for (int f = 0; f < (adam ? 3 : 2); f++) { /* value, m, and Adam's v */
                    int q = (int[]){0, 2, 3}[f];
                    char what[120];
                    snprintf(what, sizeof what, "%s multi-tensor step %d, tensor of %lld, %s", adam ? "adam" : "sgd",
                             step, (long long)counts[k], q == 0 ? "value" : q == 2 ? "m" : "v");
                    check_exact(&P, what, &b[k][q]);
                    float *ga = buf_get(&P, &a[k][q], 1), *gb = buf_get(&P, &b[k][q], 1);
                    NC_CHECK(memcmp(ga, gb, (size_t)counts[k] * sizeof(float)) == 0,
                             "%s: the gpu's per-tensor step, bit for bit", what);
                    free(ga);
                    free(gb);
                }
        }
        for (int k = 0; k < MT_TENSORS; k++)
            for (int q = 0; q < 4; q++)
                buf_free(&P, &a[k][q]), buf_free(&P, &b[k][q]);
    }
    pair_free(&P);
}

/* ---- failures ------------------------------------------------------------------------- */

static void test_out_of_memory(void)
{
    nc_error err = {0};
    nc_train_backend *b = NULL;
    NC_CHECK(nc_train_backend_new("gpu", &b, &err) == NC_OK, "%s", err.message);
    if (!b)
        return;
    float *huge = b->ops->alloc(b, (size_t)1 << 45); /* 128 TiB */
    NC_CHECK(huge == NULL, "an impossible allocation returns NULL");
    float *small = b->ops->alloc(b, 16);
    NC_CHECK(small == NULL, "after a failure every operation is skipped (alloc too)");
    memset(&err, 0, sizeof err);
    nc_status s = b->ops->sync(b, &err);
    printf("# out of memory: %s\n", err.message);
    NC_CHECK(s == NC_ERR_MEMORY, "sync returns NC_ERR_MEMORY, got %d", (int)s);
    NC_CHECK(strstr(err.message, "--batch") && strstr(err.message, "cudaMalloc") && strstr(err.message, "alloc"),
             "the message names the call and says what to do: %s", err.message);
    memset(&err, 0, sizeof err);
    NC_CHECK(b->ops->sync(b, &err) == NC_ERR_MEMORY, "the failure stays");
    b->ops->release(b, huge); /* NULL: a no-op */
    nc_train_backend_free(b);

    /* a size that overflows size_t in bytes */
    b = NULL;
    NC_CHECK(nc_train_backend_new("gpu", &b, &err) == NC_OK, "%s", err.message);
    if (b) {
        NC_CHECK(b->ops->alloc(b, SIZE_MAX / 2) == NULL, "an overflowing size returns NULL");
        memset(&err, 0, sizeof err);
        s = b->ops->sync(b, &err);
        printf("# overflow: %s\n", err.message);
        NC_CHECK(s == NC_ERR_MEMORY && strstr(err.message, "overflow"), "overflow reported: %s", err.message);
        nc_train_backend_free(b);
    }

    /* a bad argument (groups not dividing the channels) is reported, not run */
    b = NULL;
    NC_CHECK(nc_train_backend_new("gpu", &b, &err) == NC_OK, "%s", err.message);
    if (b) {
        nc_window g;
        int kernel[2] = {3, 3}, stride[2] = {1, 1}, pad[4] = {1, 1, 1, 1}, dil[2] = {1, 1};
        nc_window_init(&g, 4, 5, 5, kernel, stride, pad, dil, 0);
        float *x = b->ops->alloc(b, 100), *wt = b->ops->alloc(b, 36 * 4), *y = b->ops->alloc(b, 150);
        b->ops->conv2d(b, &g, 6, 3, 1, x, wt, NULL, y);
        memset(&err, 0, sizeof err);
        s = b->ops->sync(b, &err);
        printf("# bad argument: %s\n", err.message);
        NC_CHECK(s == NC_ERR_ARGUMENT && strstr(err.message, "conv2d"), "bad groups reported: %s", err.message);
        b->ops->release(b, x);
        b->ops->release(b, wt);
        b->ops->release(b, y);
        nc_train_backend_free(b);
    }

    /* a new backend works */
    b = NULL;
    NC_CHECK(nc_train_backend_new("gpu", &b, &err) == NC_OK, "a new backend after the failures: %s", err.message);
    if (b) {
        float h[64], back[64];
        for (int i = 0; i < 64; i++)
            h[i] = (float)i * 0.25f;
        float *d = b->ops->alloc(b, 64);
        NC_CHECK(d != NULL, "alloc on the new backend");
        if (d) {
            b->ops->upload(b, d, h, 64);
            b->ops->add(b, 64, d, d, d);
            b->ops->download(b, back, d, 64);
            memset(&err, 0, sizeof err);
            NC_CHECK(b->ops->sync(b, &err) == NC_OK, "%s", err.message);
            int ok = 1;
            for (int i = 0; i < 64; i++)
                ok &= back[i] == 2.0f * h[i];
            NC_CHECK(ok, "the new backend computes");
        }
        b->ops->release(b, d);
        nc_train_backend_free(b);
    }
}

/* ---- main ---------------------------------------------------------------------------- */

/* NULL when the GPU backend can be made; else "no CUDA device: <why>". */
static const char *train_skip_reason(void)
{
    static char buf[NC_ERROR_MESSAGE_MAX + 64];
    const char *skip = gpu_skip_reason();
    if (skip)
        return skip;
    nc_train_backend *b = NULL;
    nc_error err = {0};
    if (nc_train_backend_new("gpu", &b, &err) != NC_OK) {
        snprintf(buf, sizeof buf, "no CUDA device: %s", err.message);
        return buf;
    }
    nc_train_backend_free(b);
    return NULL;
}

int main(void)
{
    const char *skip = train_skip_reason();
    GPU_RUN(test_memory_and_steps, skip);
    GPU_RUN(test_conv2d, skip);
    GPU_RUN(test_conv2d_chunks, skip);
    GPU_RUN(test_conv2d_bf16_tf32, skip);
    GPU_RUN(test_dense, skip);
    GPU_RUN(test_pools, skip);
    GPU_RUN(test_affine, skip);
    GPU_RUN(test_relu_clip, skip);
    GPU_RUN(test_qcfs, skip);
    GPU_RUN(test_if_forward, skip);
    GPU_RUN(test_if_backward, skip);
    GPU_RUN(test_conv_if_chain, skip);
    GPU_RUN(test_optimizers, skip);
    GPU_RUN(test_output_loss, skip);
    GPU_RUN(test_multi_tensor_step, skip);
    GPU_RUN(test_out_of_memory, skip);
    return nc_test_done();
}
