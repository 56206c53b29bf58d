/* test_gpu_kernels.c — every CUDA kernel of the GPU engine against its plain-C
 * reference in sim/nc_cpu_ops.h, llm.c style (first mismatches and the max
 * error printed):
 *   - the IF kernel (all 4 reset/compare variants, per-layer and per-channel
 *     θ, constant and per-step currents, a fused bias, exact threshold ties,
 *     T across the 8-step unroll): bit-identical to nc_ref_if_run;
 *   - Poisson encoding: bit-identical to nc_poisson_encode;
 *   - the GEMM in every precision, on analog and on spike operands (the
 *     spike path of bf16 / split-bf16): relative errors printed, fp32 and
 *     split-bf16 held to fp32 accuracy;
 *   - conv2d (padding, stride, dilation, groups, depthwise, 1×1), avg/max
 *     pools (padding, ceil mode, count_include_pad, dilation), global avgpool,
 *     the one-kernel pre-spike max pool (both layouts, a fused bias),
 *     affine, scale, add, concat, relu/clip/qcfs through one-node nets on the
 *     engine, against nc_ref_conv2d / nc_ref_*pool / the CPU engine.
 * Without a GPU every test is skipped (and passes). */
#include "test_gpu_common.h"

#if NC_HAVE_CUDA

/* ---- IF ------------------------------------------------------------------- */

/* x rounded to bf16, to nearest even (as __float2bfloat16_rn). */
static float round_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) != 0x7f800000u)
        u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* The IF's counts (1 or 0) times θ against the reference's spikes (θ or 0), n values of steps of `total`
 * neurons [.., c, inner]; returns how many differ. */
static int64_t counts_against(const char *what, float *counts, const float *ref, int64_t n, int64_t total, int c,
                              int64_t inner, const float *th, int n_th)
{
    for (int64_t i = 0; i < n; i++)
        counts[i] *= th[n_th == c ? (i % total / inner) % c : 0];
    int64_t bad = compare_report(what, counts, ref, n, 0.0, 0.0);
    NC_CHECK(bad == 0, "%s: %lld values differ from nc_ref_if_run", what, (long long)bad);
    return bad;
}

static void if_case(int T, int64_t n, int c, int64_t inner, int per_channel, int constant, int with_bias,
                    nc_reset reset, nc_compare cmp, int64_t *bad_total)
{
    int64_t total = n * c * inner;
    int n_th = per_channel ? c : 1;
    float th[64], bias[64];
    for (int k = 0; k < n_th; k++)
        th[k] = k == 0 ? 1.0f : rnd_range(0.3f, 2.0f); /* θ = 1: exact ties below */
    for (int k = 0; k < c; k++)
        bias[k] = rnd_range(-0.2f, 0.2f);
    int64_t in_step = constant ? 0 : total, in_n = constant ? total : T * total;
    float *in = malloc((size_t)in_n * sizeof(float)), *x = malloc((size_t)in_n * sizeof(float));
    float *out = malloc((size_t)(T * total) * sizeof(float)), *ref = malloc((size_t)(T * total) * sizeof(float));
    float *v = malloc((size_t)total * sizeof(float));
    for (int64_t i = 0; i < in_n; i++) {
        in[i] = rnd_range(-0.5f, 1.5f);
        if (i % 7 == 0)
            in[i] = 0.5f; /* with θ = 1 and v0 = θ/2: m = 1.0 exactly, a tie */
        x[i] = with_bias ? in[i] + bias[(i % total / inner) % c] : in[i];
    }
    nc_if_params p = {th, n_th, 0.5f, reset, cmp};
    nc_ref_if_run(&p, T, n, c, inner, x, in_step, ref, total, v);
    nc_error err = {0};
    nc_status s = nc_gpu_test_if(NC_GPU_TEST_IF_VALUES, T, n, c, inner, th, n_th, 0.5f, reset == NC_RESET_ZERO,
                                 cmp == NC_FIRE_GT, with_bias ? bias : NULL, in, in_step, out, total, &err);
    NC_CHECK(s == NC_OK, "nc_gpu_test_if: %s", err.message);
    if (s == NC_OK) {
        char what[160];
        snprintf(what, sizeof what, "IF T=%d %s %s %s %s %s", T, cmp == NC_FIRE_GE ? ">=" : ">",
                 reset == NC_RESET_SUBTRACT ? "subtract" : "zero", per_channel ? "per-channel" : "layer",
                 constant ? "constant" : "per-step", with_bias ? "bias" : "no-bias");
        int64_t bad = compare_report(what, out, ref, T * total, 0.0, 0.0);
        NC_CHECK(bad == 0, "%s: %lld values differ from nc_ref_if_run", what, (long long)bad);
        *bad_total += bad;
    }
    /* uint8 counts (the fixed-point spike conv's operand): ×θ = the reference's */
    s = nc_gpu_test_if(NC_GPU_TEST_IF_COUNTS8, T, n, c, inner, th, n_th, 0.5f, reset == NC_RESET_ZERO,
                       cmp == NC_FIRE_GT, with_bias ? bias : NULL, in, in_step, out, total, &err);
    NC_CHECK(s == NC_OK, "nc_gpu_test_if (uint8 counts): %s", err.message);
    if (s == NC_OK)
        *bad_total += counts_against("IF to uint8 counts", out, ref, T * total, total, c, inner, th, n_th);
    /* the bf16 form: currents read as bf16, spikes written as counts (×θ = the reference's) */
    for (int64_t i = 0; i < in_n; i++)
        x[i] = with_bias ? round_bf16(in[i]) + bias[(i % total / inner) % c] : round_bf16(in[i]);
    nc_ref_if_run(&p, T, n, c, inner, x, in_step, ref, total, v);
    s = nc_gpu_test_if(NC_GPU_TEST_IF_BF16, T, n, c, inner, th, n_th, 0.5f, reset == NC_RESET_ZERO,
                       cmp == NC_FIRE_GT, with_bias ? bias : NULL, in, in_step, out, total, &err);
    NC_CHECK(s == NC_OK, "nc_gpu_test_if (bf16): %s", err.message);
    if (s == NC_OK)
        *bad_total += counts_against("IF bf16 currents to counts", out, ref, T * total, total, c, inner, th, n_th);
    free(in);
    free(x);
    free(out);
    free(ref);
    free(v);
}

static void test_if_kernel(void)
{
    int64_t bad = 0;
    for (int variant = 0; variant < 32; variant++) {
        int T = variant % 2 ? 9 : 4;
        if_case(T, 3, 5, 13, variant & 1, variant & 2, variant & 4, variant & 8 ? NC_RESET_ZERO : NC_RESET_SUBTRACT,
                variant & 16 ? NC_FIRE_GT : NC_FIRE_GE, &bad);
    }
    /* channels last (inner 1): four channels a thread where C is a multiple of 4 (T = 6: a partial
     * group of steps), one where it is not */
    for (int variant = 0; variant < 16; variant++)
        if_case(variant & 1 ? 6 : 8, 7, variant & 8 ? 6 : 32, 1, variant & 2, variant & 4, 1,
                variant & 1 ? NC_RESET_ZERO : NC_RESET_SUBTRACT, variant & 2 ? NC_FIRE_GT : NC_FIRE_GE, &bad);
    /* a big layer: many blocks, grid-stride loop; and the VGG-style first layer, channels last, its
     * constant current */
    if_case(8, 64, 32, 28 * 28, 1, 0, 1, NC_RESET_SUBTRACT, NC_FIRE_GE, &bad);
    if_case(8, 64 * 28 * 28, 32, 1, 1, 1, 1, NC_RESET_SUBTRACT, NC_FIRE_GE, &bad);
    printf("# IF kernel: %lld mismatches over all cases\n", (long long)bad);
}

/* One value of counts-and-pairs data ([pixels, c] then [pixels, 2, c]):
 * copy 0 is the count, copies 1 and 2 its pair. */
static float copy_of(const float *v, int64_t pixels, int c, int64_t pix, int ch, int copy)
{
    return copy == 0 ? v[pix * c + ch] : v[pixels * c + (pix * 2 + copy - 1) * c + ch];
}

/* The operands of the exact conv on bf16 tensor cores: counts followed by
 * their pairs, and the bf16 weight parts (hi, then mid and lo side by side),
 * whose sum is the fp32 weight·θ exactly (checked in double). */
static void test_exact_operands(void)
{
    enum { PIX = 1000, C = 24, COUT = 16, TAPS = 9 };
    static float th[C], cur[PIX * C], x[PIX * C], scale[C], w[COUT * TAPS * C], mul[C];
    static float counts[PIX * C * 3], xc[PIX * C * 3], parts[COUT * TAPS * C * 3];
    for (int k = 0; k < C; k++) {
        th[k] = rnd_range(0.3f, 2.0f);
        scale[k] = 4.0f / th[k];
        mul[k] = th[k] / 4.0f;
    }
    for (int i = 0; i < PIX * C; i++) {
        cur[i] = rnd_range(-0.5f, 2.0f);
        x[i] = (float)(rand() % 5) * th[i % C] / 4.0f; /* an avgpool of spikes: q·θ/4 */
    }
    for (int i = 0; i < COUT * TAPS * C; i++)
        w[i] = rnd_range(-1.0f, 1.0f) * (i % 5 == 0 ? 1e-3f : 1.0f);
    nc_error err = {0};
    nc_status s = nc_gpu_test_exact_operands(PIX, C, th, cur, counts, x, scale, xc, COUT, TAPS, w, mul, parts, &err);
    NC_CHECK(s == NC_OK, "nc_gpu_test_exact_operands: %s", err.message);
    if (s != NC_OK)
        return;
    int64_t bad_if = 0, bad_x = 0, bad_w = 0;
    for (int i = 0; i < PIX * C; i++) {
        int pix = i / C, ch = i % C;
        float spike = 0.5f * th[ch] + cur[i] >= th[ch] ? 1.0f : 0.0f, q = rintf(x[i] * scale[ch]);
        for (int copy = 0; copy < 3; copy++) {
            bad_if += copy_of(counts, PIX, C, pix, ch, copy) != spike;
            bad_x += copy_of(xc, PIX, C, pix, ch, copy) != q;
        }
    }
    for (int i = 0; i < COUT * TAPS * C; i++) {
        float v = w[i] * mul[i % C];
        double sum = 0.0;
        for (int copy = 0; copy < 3; copy++) {
            float part = copy_of(parts, COUT * TAPS, C, i / C, i % C, copy);
            sum += part;
            bad_w += round_bf16(part) != part; /* each part is a bf16 value */
        }
        bad_w += sum != (double)v;
    }
    printf("# exact operands: IF counts and pairs %lld, conversions %lld, weight parts %lld mismatches\n",
           (long long)bad_if, (long long)bad_x, (long long)bad_w);
    NC_CHECK(bad_if == 0, "IF counts and pairs: %lld differ from the reference", (long long)bad_if);
    NC_CHECK(bad_x == 0, "the conv's counts and pairs: %lld differ", (long long)bad_x);
    NC_CHECK(bad_w == 0, "bf16 weight parts: %lld do not add up to the fp32 weight exactly", (long long)bad_w);
}

/* ---- Poisson ----------------------------------------------------------------- */

static void test_poisson_kernel(void)
{
    int T = 5;
    int64_t n = 3001;
    float *in = malloc((size_t)n * sizeof(float)), *out = malloc((size_t)(T * n) * sizeof(float)),
          *ref = malloc((size_t)(T * n) * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        in[i] = rnd_range(-0.2f, 1.2f);
    nc_poisson_encode(77, 0, T, n, in, ref);
    nc_error err = {0};
    nc_status s = nc_gpu_test_poisson(77, T, n, in, out, &err);
    NC_CHECK(s == NC_OK, "%s", err.message);
    if (s == NC_OK)
        NC_CHECK(compare_report("poisson", out, ref, T * n, 0, 0) == 0, "bit-identical to nc_poisson_encode");
    free(in);
    free(out);
    free(ref);
}

/* ---- sums over the steps ------------------------------------------------------ */

/* Input sums and spike counts over T steps, bit for bit as the textbook
 * loop: spike-like values (zeros among them), currents, and a constant
 * value (step 0). */
static void test_step_sums_kernel(void)
{
    int T = 7;
    int64_t n = 5003, step = n + 13;
    size_t in_n = (size_t)((T - 1) * step + n);
    float *in = malloc(in_n * sizeof(float)), *out = malloc((size_t)n * sizeof(float)),
          *ref = malloc((size_t)n * sizeof(float));
    for (size_t i = 0; i < in_n; i++)
        in[i] = i % 3 == 0 ? 0.0f : rnd_range(-2.0f, 2.0f);
    const char *what[3] = {"input sums", "spike counts", "constant value"};
    for (int k = 0; k < 3; k++) {
        int nonzero = k == 1;
        int64_t s_step = k == 2 ? 0 : step;
        nc_ref_step_sums(T, n, s_step, in, nonzero, ref);
        nc_error err = {0};
        nc_status s = nc_gpu_test_step_sums(T, n, s_step, in, nonzero, out, &err);
        NC_CHECK(s == NC_OK, "%s: %s", what[k], err.message);
        if (s == NC_OK)
            NC_CHECK(compare_report(what[k], out, ref, n, 0, 0) == 0, "%s: bit-identical to nc_ref_step_sums",
                     what[k]);
    }
    free(in);
    free(out);
    free(ref);
}

/* ---- GEMM in every precision ----------------------------------------------------- */

static void test_gemm_precisions(void)
{
    const int64_t rows = 300;
    const int fin = 203, fout = 70; /* fin not a multiple of 8: unaligned tensor-core operands */
    float *in = malloc((size_t)(rows * fin) * sizeof(float)), *sp = malloc((size_t)(rows * fin) * sizeof(float));
    float *w = malloc((size_t)fin * fout * sizeof(float)), *th = malloc((size_t)fin * sizeof(float));
    float *ref = malloc((size_t)(rows * fout) * sizeof(float)), *ref_sp = malloc((size_t)(rows * fout) * sizeof(float));
    float *out = malloc((size_t)(rows * fout) * sizeof(float));
    for (int f = 0; f < fin; f++)
        th[f] = rnd_range(0.5f, 2.0f);
    for (int64_t i = 0; i < rows * fin; i++) {
        in[i] = rnd_float();
        sp[i] = rnd_float() > 0.4f ? th[i % fin] : 0.0f; /* spikes carry θ of their feature */
    }
    for (int64_t i = 0; i < (int64_t)fin * fout; i++)
        w[i] = rnd_float() / sqrtf((float)fin);
    nc_ref_dense(rows, fin, fout, in, w, NULL, ref);
    nc_ref_dense(rows, fin, fout, sp, w, NULL, ref_sp);
    /* relative-error bounds: fp32 and the split modes on spikes are fp32
     * accurate; tf32 keeps 10 bits, bf16 7 bits of the operands */
    static const double bound_analog[NC_GPU_PRECISION_COUNT] = {1e-5, 3e-3, 3e-2, 1e-5, 1e-5};
    static const double bound_spike[NC_GPU_PRECISION_COUNT] = {1e-5, 3e-3, 3e-2, 1e-5, 1e-4};
    for (int p = 0; p < NC_GPU_PRECISION_COUNT; p++) {
        for (int spike = 0; spike < 2; spike++) {
            nc_error err = {0};
            memset(out, 0, (size_t)(rows * fout) * sizeof(float));
            nc_status s = nc_gpu_test_gemm((nc_gpu_precision)p, rows, fin, fout, spike ? sp : in, w,
                                           spike ? th : NULL, out, &err);
            NC_CHECK(s == NC_OK, "%s: %s", nc_gpu_precision_name((nc_gpu_precision)p), err.message);
            if (s != NC_OK)
                continue;
            char what[96];
            snprintf(what, sizeof what, "GEMM %s, %s operand", nc_gpu_precision_name((nc_gpu_precision)p),
                     spike ? "spike" : "analog");
            const float *r = spike ? ref_sp : ref;
            double bound = spike ? bound_spike[p] : bound_analog[p];
            if (bound <= 1e-5)
                compare_report(what, out, r, rows * fout, 1e-5, 1e-4);
            double e = rel_error(out, r, rows * fout);
            printf("# %s: relative error %.3g (bound %.0e)\n", what, e, bound);
            NC_CHECK(e <= bound, "%s: relative error %.3g > %.0e", what, e, bound);
        }
    }
    free(in);
    free(sp);
    free(w);
    free(th);
    free(ref);
    free(ref_sp);
    free(out);
}

/* ---- one-node nets -------------------------------------------------------------- */

/* input [c, h, w] → node → output; returns the net (shapes inferred) and the
 * index of the node in *node. */
static nc_net *one_node_net(int c, int h, int w, nc_node_kind kind, int *node)
{
    nc_net *net = nc_net_new();
    int x = add_input(net, 3, (int64_t[]){c, h, w});
    *node = add1(net, kind, "op", x);
    return net;
}

static nc_net *finish_net(nc_net *net, int last)
{
    return with_output(net, "y", last);
}

typedef struct conv_case {
    const char *name;
    int cin, h, w, cout, kh, kw, groups;
    int stride[2], pad[4], dil[2];
} conv_case;

static void test_conv_kernels(void)
{
    static const conv_case cases[] = {
        {"3x3 pad 1", 3, 9, 9, 8, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}},
        {"3x3 stride 2 asym pad", 4, 10, 9, 6, 3, 3, 1, {2, 2}, {1, 0, 0, 1}, {1, 1}},
        {"3x3 dilation 2", 3, 12, 11, 5, 3, 3, 1, {1, 1}, {2, 2, 2, 2}, {2, 2}},
        {"5x3 stride (2,1)", 2, 11, 8, 7, 5, 3, 1, {2, 1}, {2, 1, 2, 1}, {1, 1}},
        {"groups 2", 4, 8, 8, 8, 3, 3, 2, {1, 1}, {1, 1, 1, 1}, {1, 1}},
        {"depthwise", 4, 8, 8, 4, 3, 3, 4, {1, 1}, {1, 1, 1, 1}, {1, 1}},
        {"depthwise x2", 4, 8, 8, 8, 3, 3, 4, {2, 2}, {1, 1, 1, 1}, {1, 1}},
        {"1x1 pointwise", 16, 7, 7, 8, 1, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}},
        {"1x1 stride 2", 6, 9, 9, 5, 1, 1, 1, {2, 2}, {0, 0, 0, 0}, {1, 1}},
        {"1x1 groups 2", 8, 5, 5, 8, 1, 1, 2, {1, 1}, {0, 0, 0, 0}, {1, 1}},
    };
    const int64_t N = 5;
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const conv_case *cc = &cases[k];
        nc_net *net = nc_net_new();
        int x = add_input(net, 3, (int64_t[]){cc->cin, cc->h, cc->w});
        int cv = add_conv_full(net, "conv", x, cc->cout, cc->cin / cc->groups, cc->kh, cc->kw, cc->stride, cc->pad,
                               cc->dil, cc->groups, 0.5f);
        if (!(net = finish_net(net, cv))) {
            NC_CHECK(0, "%s: shapes", cc->name);
            continue;
        }
        const nc_node *n = &net->nodes[cv];
        nc_window g;
        int kern[2] = {cc->kh, cc->kw};
        nc_window_init(&g, cc->cin, cc->h, cc->w, kern, cc->stride, cc->pad, cc->dil, 0);
        int64_t out_numel = nc_node_numel(n);
        int64_t bs[4] = {N, cc->cin, cc->h, cc->w};
        nc_tensor *in = rnd_tensor(4, bs, -1, 1);
        float *ref = malloc((size_t)(N * out_numel) * sizeof(float));
        nc_ref_conv2d(&g, cc->cout, cc->groups, N, in->data, n->weight->data, n->bias->data, ref);
        nc_engine *e = engine_with("gpu", net);
        for (int p = 0; e && p < NC_GPU_PRECISION_COUNT; p++) {
            nc_error err = {0};
            nc_tensor *out = NULL;
            nc_engine_gpu_set_precision(e, (nc_gpu_precision)p, &err);
            nc_status s = nc_engine_forward(e, in, NULL, &out, &err);
            NC_CHECK(s == NC_OK, "%s %s: %s", cc->name, nc_gpu_precision_name((nc_gpu_precision)p), err.message);
            if (s == NC_OK) {
                char what[128];
                snprintf(what, sizeof what, "conv %s, %s", cc->name, nc_gpu_precision_name((nc_gpu_precision)p));
                double rel = rel_error(out->data, ref, N * out_numel);
                if (p == NC_GPU_FP32 || p == NC_GPU_SPLIT_BF16 || p == NC_GPU_SPLIT_BF16X2) /* analog: fp32 */
                    NC_CHECK(compare_report(what, out->data, ref, N * out_numel, 1e-5, 1e-4) == 0, "%s", what);
                else
                    printf("# %s: relative error %.3g\n", what, rel);
                NC_CHECK(rel < (p == NC_GPU_BF16 ? 3e-2 : p == NC_GPU_TF32 ? 3e-3 : 1e-5), "%s: relative error %.3g",
                         what, rel);
                /* with cuDNN present, tf32 and bf16 convolutions with symmetric padding run through it */
                char convs[1024];
                nc_engine_gpu_describe_convs(e, convs, sizeof convs);
                int cudnn_case = cc->groups == 1 && cc->pad[0] == cc->pad[2] && cc->pad[1] == cc->pad[3] &&
                                 (p == NC_GPU_TF32 || p == NC_GPU_BF16) && !strstr(convs, "no cuDNN") &&
                                 !getenv("NC_GPU_CONV");
                if (cudnn_case)
                    NC_CHECK(strstr(convs, "conv: cuDNN") != NULL, "%s: cuDNN ran it:\n%s", what, convs);
                if (k == 0 && p == NC_GPU_BF16)
                    printf("# %s", convs);
            }
            nc_tensor_free(out);
        }
        NC_CHECK(e != NULL, "%s: gpu engine", cc->name);
        /* SNN mode, fp32: a constant input, so the conv runs once for all steps */
        if (e) {
            nc_error err = {0};
            nc_engine_gpu_set_precision(e, NC_GPU_FP32, &err);
            nc_run_options o = {.mode = NC_MODE_SNN, .T = 3};
            nc_tensor *out = NULL;
            NC_CHECK(nc_engine_forward(e, in, &o, &out, &err) == NC_OK, "%s snn: %s", cc->name, err.message);
            for (int t = 0; out && t < 3; t++)
                NC_CHECK(compare_report("conv snn step", out->data + t * N * out_numel, ref, N * out_numel, 1e-5, 1e-4) == 0,
                         "%s step %d", cc->name, t);
            nc_tensor_free(out);
        }
        nc_engine_free(e);
        free(ref);
        nc_tensor_free(in);
        nc_net_free(net);
    }
}

/* ---- the 3×3 spike conv with 16-bit currents ------------------------------ */

/* One shape of the own kernel against a double-precision loop over the same
 * operands: counts 0..4 (spikes, and average-pooled spikes), the weight in
 * its two bf16 parts.  The kernel adds the products in fp32 on tensor cores:
 * each output within 4e-5 of the sum of its products' magnitudes (an fp32
 * sum of up to 576 terms), while a wrong tap, channel or pixel is off by the
 * order of that sum.  The two parts together hold the fp32 weight to 2^-16. */
static void spike_conv_case(const char *name, int64_t images, int c, int h, int w, int cout)
{
    int64_t xn = images * h * w * c, wn = (int64_t)cout * 9 * c, yn = images * h * w * cout;
    float *q = malloc((size_t)xn * sizeof(float)), *wt = malloc((size_t)wn * sizeof(float));
    float *hi = malloc((size_t)wn * sizeof(float)), *mid = malloc((size_t)wn * sizeof(float));
    float *out = malloc((size_t)yn * sizeof(float));
    for (int64_t i = 0; i < xn; i++)
        q[i] = rnd_int(0, 9) < 6 ? 0.0f : (float)rnd_int(1, 4);
    for (int64_t i = 0; i < wn; i++) {
        wt[i] = rnd_float() * 0.37f;
        hi[i] = round_bf16(wt[i]);
        mid[i] = round_bf16(wt[i] - hi[i]);
    }
    nc_error err = {0};
    nc_status s = nc_gpu_test_spike_conv(images, c, h, w, cout, q, hi, mid, out, &err);
    NC_CHECK(s == NC_OK, "%s: %s", name, err.message);
    int64_t bad = 0;
    double worst = 0, worst_weight = 0;
    for (int64_t n = 0; s == NC_OK && n < images; n++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                for (int o = 0; o < cout; o++) {
                    double sum = 0, mag = 0, exact = 0;
                    for (int tap = 0; tap < 9; tap++) {
                        int iy = y + tap / 3 - 1, ix = x + tap % 3 - 1;
                        if (iy < 0 || iy >= h || ix < 0 || ix >= w)
                            continue;
                        const float *qp = q + ((n * h + iy) * w + ix) * c;
                        const int64_t wo = ((int64_t)o * 9 + tap) * c;
                        for (int k = 0; k < c; k++) {
                            double part = (double)qp[k] * ((double)hi[wo + k] + (double)mid[wo + k]);
                            sum += part;
                            mag += fabs(part);
                            exact += (double)qp[k] * (double)wt[wo + k];
                        }
                    }
                    double got = out[((n * h + y) * w + x) * cout + o];
                    double err_rel = mag > 0 ? fabs(got - sum) / mag : fabs(got - sum);
                    double w_rel = mag > 0 ? fabs(sum - exact) / mag : 0;
                    worst = err_rel > worst ? err_rel : worst;
                    worst_weight = w_rel > worst_weight ? w_rel : worst_weight;
                    if (!(err_rel <= 4e-5) && bad++ < 3)
                        printf("# %s: image %lld pixel (%d, %d) channel %d: gpu %.9g, reference %.9g\n", name,
                               (long long)n, y, x, o, got, sum);
                }
    printf("# spike conv %s: worst error %.2e of the products' magnitude; the two parts hold the weight to %.2e\n",
           name, worst, worst_weight);
    NC_CHECK(bad == 0, "%s: %lld outputs differ from the reference", name, (long long)bad);
    NC_CHECK(worst_weight < 1.0 / 65536, "%s: two bf16 parts hold the weight to %.2e", name, worst_weight);
    free(q);
    free(wt);
    free(hi);
    free(mid);
    free(out);
}

static void test_spike_conv_kernel(void)
{
    spike_conv_case("28x28, 32 to 32, 3 images", 3, 32, 28, 28, 32);          /* one image per block */
    spike_conv_case("14x14, 32 to 64, 7 images", 7, 32, 14, 14, 64);          /* 4 per block, the last 3; 2 channel blocks */
    spike_conv_case("14x14, 64 to 64, 3 images", 3, 64, 14, 14, 64);
    spike_conv_case("5x7, 16 to 32, 37 images", 37, 16, 5, 7, 32);            /* tiles across images, two groups */
    spike_conv_case("1x1 image, 32 to 96, 2 images", 2, 32, 1, 1, 96);        /* every tap but the centre outside */
    float one = 1;
    nc_error err = {0};
    NC_CHECK(nc_gpu_test_spike_conv(1, 48, 4, 4, 32, &one, &one, &one, &one, &err) == NC_ERR_UNSUPPORTED &&
                 strstr(err.message, "input channels"),
             "48 input channels refused, saying why: %s", err.message);
    NC_CHECK(nc_gpu_test_spike_conv(1, 32, 4, 4, 40, &one, &one, &one, &one, &err) == NC_ERR_UNSUPPORTED &&
                 strstr(err.message, "multiple of 32"),
             "40 outputs refused, saying why: %s", err.message);
}

/* The fixed-point form: the same counts against the CPU's own split of the
 * weight (step = max|w|/32767 per output channel, v = rint(w/step), a =
 * floor(v/256), b = v − 256a) and exact integer sums, so every output must
 * equal step·float(256·Σqa + Σqb) bit for bit; and the fixed point itself
 * within step/2 of each weight. */
/* The CPU's split of weights [cout, k] into 16-bit fixed point: step =
 * max|w|/32767 per output channel, v = rint(w/step), a = floor(v/256), b =
 * v − 256a. */
static void fx16_split(const float *wt, int cout, int64_t k, int32_t *a, int32_t *b, float *ref_step)
{
    for (int o = 0; o < cout; o++) {
        float most = 0;
        for (int64_t j = 0; j < k; j++)
            most = fmaxf(most, fabsf(wt[o * k + j]));
        ref_step[o] = most > 0 ? most / 32767.0f : 1.0f;
        for (int64_t j = 0; j < k; j++) {
            int v = (int)rintf(wt[o * k + j] / ref_step[o]);
            v = v > 32767 ? 32767 : v < -32767 ? -32767 : v;
            a[o * k + j] = (int32_t)floor(v / 256.0);
            b[o * k + j] = v - 256 * a[o * k + j];
        }
    }
}

/* The exact fixed-point current of output (y, x, o) of image n: step·(256·Σqa + Σqb). */
static float fx16_current_ref(const float *q, const int32_t *a, const int32_t *b, const float *ref_step, int64_t n,
                              int c, int h, int w, int y, int x, int o)
{
    int64_t k = 9 * c, sa = 0, sb = 0;
    for (int tap = 0; tap < 9; tap++) {
        int iy = y + tap / 3 - 1, ix = x + tap % 3 - 1;
        if (iy < 0 || iy >= h || ix < 0 || ix >= w)
            continue;
        const float *qp = q + ((n * h + iy) * w + ix) * c;
        for (int ch = 0; ch < c; ch++) {
            sa += (int64_t)qp[ch] * a[o * k + tap * c + ch];
            sb += (int64_t)qp[ch] * b[o * k + tap * c + ch];
        }
    }
    return (float)(256 * sa + sb) * ref_step[o];
}

static void fx16_conv_case(const char *name, int64_t images, int c, int h, int w, int cout)
{
    int64_t xn = images * h * w * c, k = 9 * c, wn = cout * k, yn = images * h * w * cout;
    float *q = malloc((size_t)xn * sizeof(float)), *wt = malloc((size_t)wn * sizeof(float));
    float *out = malloc((size_t)yn * sizeof(float)), *step = malloc((size_t)cout * sizeof(float));
    int32_t *a = malloc((size_t)wn * sizeof(int32_t)), *b = malloc((size_t)wn * sizeof(int32_t));
    float *ref_step = malloc((size_t)cout * sizeof(float));
    for (int64_t i = 0; i < xn; i++)
        q[i] = rnd_int(0, 9) < 6 ? 0.0f : (float)rnd_int(1, 4);
    for (int64_t i = 0; i < wn; i++)
        wt[i] = rnd_float() * (0.05f + 0.5f * (float)(i / k % 3)); /* rows of three different sizes */
    fx16_split(wt, cout, k, a, b, ref_step);
    nc_error err = {0};
    nc_status s = nc_gpu_test_spike_conv_fx16(images, c, h, w, cout, q, wt, step, out, &err);
    NC_CHECK(s == NC_OK, "%s: %s", name, err.message);
    int64_t bad = 0, bad_steps = 0;
    double worst_fixed = 0;
    for (int o = 0; s == NC_OK && o < cout; o++) {
        bad_steps += step[o] != ref_step[o];
        for (int64_t j = 0; j < k; j++) {
            double d = fabs((256.0 * a[o * k + j] + b[o * k + j]) * ref_step[o] - wt[o * k + j]) / ref_step[o];
            worst_fixed = d > worst_fixed ? d : worst_fixed;
        }
    }
    for (int64_t n = 0; s == NC_OK && n < images; n++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                for (int o = 0; o < cout; o++) {
                    float ref = fx16_current_ref(q, a, b, ref_step, n, c, h, w, y, x, o);
                    float got = out[((n * h + y) * w + x) * cout + o];
                    if (got != ref && bad++ < 3)
                        printf("# %s: image %lld pixel (%d, %d) channel %d: gpu %.9g, reference %.9g\n", name,
                               (long long)n, y, x, o, got, ref);
                }
    printf("# fx16 conv %s: %lld outputs differ; weights within %.4f steps of their fixed point\n", name,
           (long long)bad, worst_fixed);
    NC_CHECK(bad_steps == 0, "%s: %lld steps differ from the CPU's", name, (long long)bad_steps);
    NC_CHECK(bad == 0, "%s: %lld outputs differ from the exact sums", name, (long long)bad);
    /* rint(w/step) of an fp32 quotient: half a step, plus that quotient's rounding (≤ 32767·2^-24) */
    NC_CHECK(worst_fixed <= 0.5 + 1.0 / 256, "%s: a weight %.4f steps from its fixed point", name, worst_fixed);
    free(q);
    free(wt);
    free(out);
    free(step);
    free(a);
    free(b);
    free(ref_step);
}

static void test_spike_conv_fx16_kernel(void)
{
    fx16_conv_case("28x28, 32 to 32, 3 images", 3, 32, 28, 28, 32);
    fx16_conv_case("14x14, 32 to 64, 9 images", 9, 32, 14, 14, 64); /* several images per block, the last group short */
    fx16_conv_case("14x14, 64 to 64, 3 images", 3, 64, 14, 14, 64);
    fx16_conv_case("5x7, 64 to 96, 11 images", 11, 64, 5, 7, 96);  /* tiles across images; 3 channel blocks */
    float one = 1, step = 0;
    nc_error err = {0};
    NC_CHECK(nc_gpu_test_spike_conv_fx16(1, 16, 4, 4, 32, &one, &one, &step, &one, &err) == NC_ERR_UNSUPPORTED,
             "16 input channels refused: %s", err.message);
}

/* The conv with the IF (and 2×2 average pool) in its epilogue, against the
 * CPU: the exact fixed-point currents, the conv's bias added and the IF
 * updated in fp32 as the IF kernel does, the pool summed (0 + s00 + s01 +
 * s10 + s11) / 4 in that order — every output bit for bit. */
typedef struct if_conv_case {
    const char *name;
    int T, n, c, h, w, cout;
    int per_channel_th, bias, reset_zero, fire_gt, pool, as_counts;
} if_conv_case;

/* The spikes (θ or 1 per spike, as_counts) of one output over the T steps
 * of sample s, into spikes[t] (stride apart). */
static void if_reference(const if_conv_case *k, const float *q, const int32_t *a, const int32_t *b,
                         const float *ref_step, const float *bias, const float *th, float v0f, int s, int y, int x,
                         int o, float *spikes)
{
    float theta = th[k->per_channel_th ? o : 0];
    float v = v0f * theta;
    for (int t = 0; t < k->T; t++) {
        float cur = fx16_current_ref(q, a, b, ref_step, (int64_t)t * k->n + s, k->c, k->h, k->w, y, x, o);
        float xb = bias ? cur + bias[o] : cur;
        float m = v + xb;
        int fire = k->fire_gt ? m > theta : m >= theta;
        v = fire ? (k->reset_zero ? 0.0f : m - theta) : m;
        spikes[t] = fire ? (k->as_counts ? 1.0f : theta) : 0.0f;
    }
}

static void run_if_conv_case(const if_conv_case *k)
{
    int64_t rows = (int64_t)k->T * k->n, xn = rows * k->h * k->w * k->c, kk = 9 * k->c, wn = k->cout * kk;
    int oh = k->pool ? k->h / 2 : k->h, ow = k->pool ? k->w / 2 : k->w;
    int64_t yn = rows * oh * ow * k->cout;
    float *q = malloc((size_t)xn * sizeof(float)), *wt = malloc((size_t)wn * sizeof(float));
    float *out = malloc((size_t)yn * sizeof(float)), *step = malloc((size_t)k->cout * sizeof(float));
    float *ref_step = malloc((size_t)k->cout * sizeof(float)), *bias = malloc((size_t)k->cout * sizeof(float));
    float *th = malloc((size_t)k->cout * sizeof(float)), *sp = malloc((size_t)4 * k->T * sizeof(float));
    int32_t *a = malloc((size_t)wn * sizeof(int32_t)), *b = malloc((size_t)wn * sizeof(int32_t));
    for (int64_t i = 0; i < xn; i++)
        q[i] = rnd_int(0, 9) < 7 ? 0.0f : (float)rnd_int(1, 4);
    for (int64_t i = 0; i < wn; i++)
        wt[i] = rnd_float() * 0.3f;
    for (int o = 0; o < k->cout; o++) {
        bias[o] = rnd_float() * 0.2f;
        th[o] = 0.5f + 0.75f * (float)rnd_int(0, 4);
    }
    fx16_split(wt, k->cout, kk, a, b, ref_step);
    const float v0f = 0.5f;
    nc_error err = {0};
    nc_status s = nc_gpu_test_spike_conv_if(k->T, k->n, k->c, k->h, k->w, k->cout, q, wt, k->bias ? bias : NULL, th,
                                            k->per_channel_th ? k->cout : 1, v0f, k->reset_zero, k->fire_gt, k->pool,
                                            k->as_counts, step, out, &err);
    NC_CHECK(s == NC_OK, "%s: %s", k->name, err.message);
    int64_t bad = 0, fired = 0;
    for (int n = 0; s == NC_OK && n < k->n; n++)
        for (int y = 0; y < oh; y++)
            for (int x = 0; x < ow; x++)
                for (int o = 0; o < k->cout; o++) {
                    int win = k->pool ? 4 : 1;
                    for (int p = 0; p < win; p++)
                        if_reference(k, q, a, b, ref_step, k->bias ? bias : NULL, th, v0f, n,
                                     k->pool ? 2 * y + p / 2 : y, k->pool ? 2 * x + p % 2 : x, o, sp + p * k->T);
                    for (int t = 0; t < k->T; t++) {
                        float ref = sp[t];
                        if (k->pool && k->as_counts)
                            ref = sp[t] + sp[k->T + t] + sp[2 * k->T + t] + sp[3 * k->T + t];
                        else if (k->pool) {
                            float sum = 0.0f;
                            for (int p = 0; p < 4; p++)
                                sum = sum + sp[p * k->T + t];
                            ref = sum / 4.0f;
                        }
                        fired += ref != 0;
                        float got = out[((((int64_t)t * k->n + n) * oh + y) * ow + x) * k->cout + o];
                        if (got != ref && bad++ < 3)
                            printf("# %s: step %d sample %d (%d, %d) channel %d: gpu %.9g, reference %.9g\n", k->name,
                                   t, n, y, x, o, got, ref);
                    }
                }
    printf("# conv + IF %s: %lld of %lld outputs differ, %lld non-zero\n", k->name, (long long)bad, (long long)yn,
           (long long)fired);
    NC_CHECK(bad == 0, "%s: %lld outputs differ from the CPU's", k->name, (long long)bad);
    NC_CHECK(s != NC_OK || (fired > yn / 50 && fired < yn), "%s: %lld of %lld outputs fire: the case tests nothing",
             k->name, (long long)fired, (long long)yn);
    free(q);
    free(wt);
    free(out);
    free(step);
    free(ref_step);
    free(bias);
    free(th);
    free(sp);
    free(a);
    free(b);
}

static void test_spike_conv_if_kernel(void)
{
    static const if_conv_case cases[] = {
        /* name, T, n, c, h, w, cout, per-channel θ, bias, reset to 0, fire on >, pool, counts */
        {"28x28, 32 to 32, pooled, fp32", 4, 3, 32, 28, 28, 32, 1, 1, 0, 0, 1, 0},
        {"28x28, 32 to 32, pooled counts", 3, 2, 32, 28, 28, 32, 1, 1, 0, 0, 1, 1},
        {"14x14, 32 to 64, counts", 5, 3, 32, 14, 14, 64, 1, 0, 0, 0, 0, 1},
        {"14x14, 64 to 64, fp32, reset to 0, fire on >", 3, 4, 64, 14, 14, 64, 0, 1, 1, 1, 0, 0},
        {"7x9, 64 to 96, pooled (odd width), one θ", 2, 5, 64, 7, 9, 96, 0, 1, 0, 0, 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        run_if_conv_case(&cases[i]);
    float one = 1, step = 0;
    nc_error err = {0};
    NC_CHECK(nc_gpu_test_spike_conv_if(1, 1, 16, 4, 4, 32, &one, &one, NULL, &one, 1, 0, 0, 0, 0, 0, &step, &one,
                                       &err) == NC_ERR_UNSUPPORTED,
             "16 input channels refused: %s", err.message);
}

typedef struct pool_case {
    const char *name;
    nc_node_kind kind;
    nc_node w; /* its window */
} pool_case;

#define POOL_WINDOW(k, s, p, d, ceil, cip)                                                                   \
    {.kernel = {k, k}, .stride = {s, s}, .pad = {p, p, p, p}, .dilation = {d, d}, .ceil_mode = ceil,         \
     .count_include_pad = cip}

static void test_pool_kernels(void)
{
    static const pool_case cases[] = {
        {"avg 2x2", NC_NODE_AVGPOOL, POOL_WINDOW(2, 2, 0, 1, 0, 0)},
        {"avg 3x3 s2 pad 1", NC_NODE_AVGPOOL, POOL_WINDOW(3, 2, 1, 1, 0, 0)},
        {"avg 3x3 s2 pad 1 cip", NC_NODE_AVGPOOL, POOL_WINDOW(3, 2, 1, 1, 0, 1)},
        {"avg 3x3 s2 ceil", NC_NODE_AVGPOOL,
         {.kernel = {3, 3}, .stride = {2, 2}, .pad = {0, 1, 1, 0}, .dilation = {1, 1}, .ceil_mode = 1,
          .count_include_pad = 1}},
        {"avg 2x3 s(1,2) ceil", NC_NODE_AVGPOOL,
         {.kernel = {2, 3}, .stride = {1, 2}, .dilation = {1, 1}, .ceil_mode = 1}},
        {"max 2x2", NC_NODE_MAXPOOL, POOL_WINDOW(2, 2, 0, 1, 0, 0)},
        {"max 3x3 s2 pad 1 ceil", NC_NODE_MAXPOOL, POOL_WINDOW(3, 2, 1, 1, 1, 0)},
        {"max 3x3 dilation 2", NC_NODE_MAXPOOL, POOL_WINDOW(3, 1, 2, 2, 0, 0)},
    };
    const int C = 3, H = 11, W = 10;
    const int64_t N = 4;
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const pool_case *pc = &cases[k];
        int node;
        nc_net *net = one_node_net(C, H, W, pc->kind, &node);
        nc_node *n = &net->nodes[node];
        nc_node_copy_window(n, &pc->w);
        if (!(net = finish_net(net, node))) {
            NC_CHECK(0, "%s: shapes", pc->name);
            continue;
        }
        nc_window g;
        nc_window_init(&g, C, H, W, pc->w.kernel, pc->w.stride, pc->w.pad, pc->w.dilation, pc->w.ceil_mode);
        int64_t out_numel = nc_node_numel(&net->nodes[node]);
        int64_t bs[4] = {N, C, H, W};
        nc_tensor *in = rnd_tensor(4, bs, -1, 1);
        float *ref = malloc((size_t)(N * out_numel) * sizeof(float));
        if (pc->kind == NC_NODE_AVGPOOL)
            nc_ref_avgpool(&g, pc->w.count_include_pad, N, in->data, ref);
        else
            nc_ref_maxpool(&g, N, in->data, ref);
        nc_tensor *out = run_on("gpu", net, in, NULL), *cpu = run_on("cpu", net, in, NULL);
        NC_CHECK(out != NULL, "%s: gpu forward", pc->name);
        if (out) {
            char what[96];
            snprintf(what, sizeof what, "%s vs reference", pc->name);
            NC_CHECK(compare_report(what, out->data, ref, N * out_numel, 1e-6, 1e-6) == 0, "%s", what);
            snprintf(what, sizeof what, "%s vs cpu engine (bit-identical)", pc->name);
            if (cpu)
                NC_CHECK(compare_report(what, out->data, cpu->data, N * out_numel, 0, 0) == 0, "%s", what);
        }
        if (cpu) { /* the channels-last kernels: the same sums and maxima, bit for bit */
            float *got = malloc((size_t)(N * out_numel) * sizeof(float));
            nc_error err = {0};
            nc_status s = nc_gpu_test_pool_nhwc(pc->kind == NC_NODE_MAXPOOL, N, C, H, W, pc->w.kernel, pc->w.stride, pc->w.pad,
                                                pc->w.dilation, pc->w.ceil_mode, pc->w.count_include_pad, in->data, got, &err);
            NC_CHECK(s == NC_OK, "%s channels last: %s", pc->name, err.message);
            char what[96];
            snprintf(what, sizeof what, "%s channels last vs cpu engine (bit-identical)", pc->name);
            if (s == NC_OK)
                NC_CHECK(compare_report(what, got, cpu->data, N * out_numel, 0, 0) == 0, "%s", what);
            free(got);
        }
        nc_tensor_free(out);
        nc_tensor_free(cpu);
        free(ref);
        nc_tensor_free(in);
        nc_net_free(net);
    }
    /* global avgpool */
    int node;
    nc_net *net = one_node_net(C, H, W, NC_NODE_GLOBAL_AVGPOOL, &node);
    if ((net = finish_net(net, node))) {
        int64_t bs[4] = {N, C, H, W};
        nc_tensor *in = rnd_tensor(4, bs, -1, 1);
        float ref[64];
        nc_global_avgpool(N, C, H * W, in->data, ref);
        nc_tensor *out = run_on("gpu", net, in, NULL);
        NC_CHECK(out && compare_report("global avgpool", out->data, ref, N * C, 0, 0) == 0, "global avgpool");
        nc_tensor_free(out);
        nc_tensor_free(in);
        nc_net_free(net);
    }
}

/* The pre-spike max pool in one kernel, both layouts, with and without a
 * bias, against the plain-C rule: running sums of (x + b) over the steps,
 * nc_ref_maxpool on each step's sums, and the step differences — bit for bit.
 * A window over the kernel's tap limit is refused with a message. */
static void prespike_case(const pool_case *pc, int nhwc, int with_bias)
{
    const int T = 5, C = 3, H = 9, W = 8;
    const int64_t n = 3;
    nc_window g;
    const nc_node *w = &pc->w;
    nc_window_init(&g, C, H, W, w->kernel, w->stride, w->pad, w->dilation, w->ceil_mode);
    int64_t in_step = n * C * H * W, out_step = n * C * g.oh * g.ow;
    float bias[3] = {0.25f, -0.125f, 0.1f};
    float *in = malloc((size_t)(T * in_step) * sizeof(float)), *sums = malloc((size_t)(T * in_step) * sizeof(float));
    float *ref = malloc((size_t)(T * out_step) * sizeof(float)), *got = malloc((size_t)(T * out_step) * sizeof(float));
    for (int64_t i = 0; i < T * in_step; i++) {
        in[i] = rnd_range(-1.0f, 1.0f);
        float x = with_bias ? in[i] + bias[(i / (H * W)) % C] : in[i];
        sums[i] = i < in_step ? 0.0f + x : sums[i - in_step] + x;
    }
    for (int t = 0; t < T; t++)
        nc_ref_maxpool(&g, n, sums + t * in_step, ref + t * out_step);
    for (int64_t i = T * out_step - 1; i >= out_step; i--)
        ref[i] -= ref[i - out_step];
    nc_error err = {0};
    nc_status s = nc_gpu_test_prespike_max(nhwc, T, n, C, H, W, w->kernel, w->stride, w->pad, w->dilation,
                                           w->ceil_mode, with_bias ? bias : NULL, in, got, &err);
    char what[128];
    snprintf(what, sizeof what, "pre-spike %s, %s, %s", pc->name, nhwc ? "channels last" : "NCHW",
             with_bias ? "bias" : "no bias");
    NC_CHECK(s == NC_OK, "%s: %s", what, err.message);
    if (s == NC_OK)
        NC_CHECK(compare_report(what, got, ref, T * out_step, 0, 0) == 0, "%s: bit-identical to the C rule", what);
    free(in);
    free(sums);
    free(ref);
    free(got);
}

static void test_prespike_max_kernel(void)
{
    static const pool_case cases[] = {
        {"max 2x2", NC_NODE_MAXPOOL, POOL_WINDOW(2, 2, 0, 1, 0, 0)},
        {"max 3x3 s2 pad 1 ceil", NC_NODE_MAXPOOL, POOL_WINDOW(3, 2, 1, 1, 1, 0)},
        {"max 3x3 dilation 2", NC_NODE_MAXPOOL, POOL_WINDOW(3, 1, 2, 2, 0, 0)},
        {"max 1x3 s(1,2)", NC_NODE_MAXPOOL, {.kernel = {1, 3}, .stride = {1, 2}, .dilation = {1, 1}}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
        for (int nhwc = 0; nhwc < 2; nhwc++)
            for (int with_bias = 0; with_bias < 2; with_bias++)
                prespike_case(&cases[k], nhwc, with_bias);
    /* 4×4 = 16 taps: over the limit, refused (the engine pools those in three passes) */
    int k4[2] = {4, 4}, s1[2] = {1, 1}, p0[4] = {0, 0, 0, 0}, d1[2] = {1, 1};
    float in[64] = {0}, out[64];
    nc_error err = {0};
    NC_CHECK(nc_gpu_test_prespike_max(1, 1, 1, 1, 4, 4, k4, s1, p0, d1, 0, NULL, in, out, &err) == NC_ERR_ARGUMENT &&
                 strstr(err.message, "taps"),
             "a 4x4 window is refused: %s", err.message);
}

/* The trainer's bf16 copies (NCHW fp32 → NHWC bf16 and back, added): bit for
 * bit the plain-C rounding and transposes, on shapes that are not multiples
 * of the 32×32 tile, with exact rounding ties and an infinity. */
static void test_bf16_transposes(void)
{
    static const int64_t shapes[][3] = {{3, 5, 7}, {2, 32, 64}, {4, 33, 50}, {1, 1, 1}, {5, 70, 9}};
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        int64_t rows = shapes[k][0], a = shapes[k][1], b = shapes[k][2], n = rows * a * b;
        float *in = malloc((size_t)n * sizeof *in), *base = malloc((size_t)n * sizeof *base);
        float *narrowed = malloc((size_t)n * sizeof *narrowed), *widened = malloc((size_t)n * sizeof *widened);
        float *want16 = malloc((size_t)n * sizeof *want16), *want = malloc((size_t)n * sizeof *want);
        for (int64_t i = 0; i < n; i++) {
            in[i] = rnd_range(-3.0f, 3.0f);
            base[i] = rnd_range(-1.0f, 1.0f);
        }
        in[0] = 1.0f + 1.0f / 256.0f; /* halfway between two bf16 values: rounds to even (1.0) */
        if (n > 2) {
            in[1] = 1.0f + 3.0f / 256.0f; /* halfway: rounds to even (1 + 4/256) */
            in[2] = INFINITY;
        }
        for (int64_t r = 0; r < rows; r++)
            for (int64_t i = 0; i < a; i++)
                for (int64_t j = 0; j < b; j++) {
                    int64_t src = (r * a + i) * b + j, dst = (r * b + j) * a + i;
                    want16[dst] = round_bf16(in[src]);
                    want[src] = base[src] + want16[dst];
                }
        nc_error err = {0};
        nc_status s = nc_gpu_test_transpose_bf16(rows, a, b, in, base, narrowed, widened, &err);
        NC_CHECK(s == NC_OK, "bf16 transposes %lldx%lldx%lld: %s", (long long)rows, (long long)a, (long long)b,
                 err.message);
        if (s == NC_OK) {
            NC_CHECK(memcmp(narrowed, want16, (size_t)n * sizeof *want16) == 0,
                     "%lldx%lldx%lld: fp32 -> bf16 channels last, bit for bit", (long long)rows, (long long)a,
                     (long long)b);
            NC_CHECK(memcmp(widened, want, (size_t)n * sizeof *want) == 0,
                     "%lldx%lldx%lld: bf16 -> fp32 back, added, bit for bit", (long long)rows, (long long)a,
                     (long long)b);
        }
        free(in), free(base), free(narrowed), free(widened), free(want16), free(want);
    }
}

/* affine, scale (per value and scalar), relu, clip, qcfs, add of 3, concat:
 * the CPU engine's results, bit for bit. */
static void test_elementwise_kernels(void)
{
    const int C = 4, H = 5, W = 6;
    const int64_t N = 3;
    nc_net *net = nc_net_new();
    int x = add_input(net, 3, (int64_t[]){C, H, W});
    int af = add1(net, NC_NODE_AFFINE, "affine", x);
    int64_t cs[1] = {C}, vs[1] = {C * H * W}, one[1] = {1};
    net->nodes[af].weight = rnd_tensor(1, cs, 0.5f, 1.5f);
    net->nodes[af].bias = rnd_tensor(1, cs, -0.3f, 0.3f);
    int sc = add1(net, NC_NODE_SCALE, "scale", af);
    net->nodes[sc].weight = rnd_tensor(1, vs, -2.0f, 2.0f);
    int sc1 = add1(net, NC_NODE_SCALE, "scale1", x);
    net->nodes[sc1].weight = rnd_tensor(1, one, 0.7f, 0.7f);
    int ad_in[3] = {x, sc, sc1};
    int ad = nc_net_add_node(net, NC_NODE_ADD, "add3", 3, ad_in);
    int re = add_neuron(net, "relu", ad, NC_NEURON_RELU);
    int cl = add_neuron(net, "clip", ad, NC_NEURON_CLIP);
    net->nodes[cl].neuron.clip_min = -0.25f;
    net->nodes[cl].neuron.clip_max = 0.6f;
    int qc = add_neuron(net, "qcfs", ad, NC_NEURON_QCFS);
    float lam[4] = {0.9f, 1.3f, 2.0f, 0.45f};
    nc_neuron_set_threshold(&net->nodes[qc].neuron, C, lam, NULL);
    net->nodes[qc].neuron.levels = 4;
    int cc_in[3] = {re, cl, qc};
    int cc = nc_net_add_node(net, NC_NODE_CONCAT, "cat", 3, cc_in);
    if (!(net = finish_net(net, cc))) {
        NC_CHECK(0, "shapes");
        return;
    }
    int64_t bs[4] = {N, C, H, W};
    nc_tensor *in = rnd_tensor(4, bs, -2, 2);
    for (int mode = NC_MODE_ANN; mode <= NC_MODE_SNN; mode++) {
        nc_run_options o = {.mode = (nc_mode)mode, .T = 2};
        keep_obs kg = {0}, kc = {0};
        nc_observer og = {keep_out, keep_in, &kg}, oc = {keep_out, keep_in, &kc};
        o.observer = &og;
        nc_tensor *out = run_on("gpu", net, in, &o);
        o.observer = &oc;
        nc_tensor *cpu = run_on("cpu", net, in, &o);
        NC_CHECK(out && cpu, "forward mode %d", mode);
        for (int i = 1; out && cpu && i < net->n_nodes; i++) {
            char what[96];
            snprintf(what, sizeof what, "%s (mode %d)", net->nodes[i].name, mode);
            NC_CHECK(kg.out_rows[i] == kc.out_rows[i] && kg.out_rows[i] > 0, "%s: observed rows %lld vs %lld", what,
                     (long long)kg.out_rows[i], (long long)kc.out_rows[i]);
            if (kg.out_rows[i] == kc.out_rows[i] && kg.out[i] && kc.out[i])
                NC_CHECK(compare_report(what, kg.out[i], kc.out[i], kg.out_rows[i] * kg.per_row[i], 0, 0) == 0,
                         "%s: bit-identical to the cpu engine", what);
        }
        keep_free(&kg);
        keep_free(&kc);
        nc_tensor_free(out);
        nc_tensor_free(cpu);
    }
    nc_tensor_free(in);
    nc_net_free(net);
}

/* The gated max pool (per-step kernels with running counts) against the CPU
 * engine: x → IF → gated max pool, per-step currents from Poisson input. */
static void test_gated_kernel(void)
{
    nc_net *net = nc_net_new();
    int x = add_input(net, 3, (int64_t[]){3, 9, 8});
    int sp = add_if(net, "if", x, 3, 0.3f, 0.9f, NC_RESET_SUBTRACT, NC_FIRE_GE);
    int mp = add_pool(net, NC_NODE_MAXPOOL, "gated", sp, 3, 2);
    net->nodes[mp].pad[0] = net->nodes[mp].pad[1] = net->nodes[mp].pad[2] = net->nodes[mp].pad[3] = 1;
    net->nodes[mp].ceil_mode = 1;
    net->nodes[mp].maxpool_strategy = NC_MAXPOOL_GATED;
    if (!(net = finish_net(net, mp))) {
        NC_CHECK(0, "shapes");
        return;
    }
    int64_t bs[4] = {4, 3, 9, 8};
    nc_tensor *in = rnd_tensor(4, bs, 0, 1);
    for (int enc = 0; enc < 2; enc++) {
        nc_run_options o = {.mode = NC_MODE_SNN, .T = 11, .encoding = enc ? NC_ENCODING_POISSON : NC_ENCODING_DIRECT,
                            .seed = 5};
        nc_tensor *out = run_on("gpu", net, in, &o), *cpu = run_on("cpu", net, in, &o);
        NC_CHECK(out && cpu, "forward");
        if (out && cpu)
            NC_CHECK(compare_report(enc ? "gated max pool (poisson)" : "gated max pool (direct)", out->data, cpu->data,
                                    nc_tensor_numel(cpu), 0, 0) == 0,
                     "bit-identical to the cpu engine");
        nc_tensor_free(out);
        nc_tensor_free(cpu);
    }
    nc_tensor_free(in);
    nc_net_free(net);
}

#endif /* NC_HAVE_CUDA */

int main(void)
{
    const char *skip = gpu_skip_reason();
#if NC_HAVE_CUDA
    GPU_RUN(test_if_kernel, skip);
    GPU_RUN(test_exact_operands, skip);
    GPU_RUN(test_poisson_kernel, skip);
    GPU_RUN(test_step_sums_kernel, skip);
    GPU_RUN(test_gemm_precisions, skip);
    GPU_RUN(test_conv_kernels, skip);
    GPU_RUN(test_spike_conv_kernel, skip);
    GPU_RUN(test_spike_conv_fx16_kernel, skip);
    GPU_RUN(test_spike_conv_if_kernel, skip);
    GPU_RUN(test_pool_kernels, skip);
    GPU_RUN(test_prespike_max_kernel, skip);
    GPU_RUN(test_bf16_transposes, skip);
    GPU_RUN(test_elementwise_kernels, skip);
    GPU_RUN(test_gated_kernel, skip);
#else
    static const char *names[] = {"test_if_kernel", "test_exact_operands", "test_poisson_kernel", "test_step_sums_kernel", "test_gemm_precisions",
                                  "test_conv_kernels", "test_spike_conv_kernel", "test_spike_conv_fx16_kernel", "test_spike_conv_if_kernel", "test_pool_kernels", "test_prespike_max_kernel", "test_bf16_transposes", "test_elementwise_kernels",
                                  "test_gated_kernel"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        nc_test_report(names[i], 0, skip);
#endif
    return nc_test_done();
}
