// nc_gpu_conv_dense.cu — the GPU engine's weighted layers: convolutions
// through cuDNN (channels last, T folded into the rows) or im2col + cuBLAS,
// and dense layers through cuBLAS, in every precision (see nc_gpu.h).
#include "gpu/nc_gpu_engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <new>
#include <string>
#include <vector>

namespace ncg {

// ---- precision -------------------------------------------------------------------------

gemm_mode mode_for(nc_gpu_precision p, int spike_operand)
{
    switch (p) {
    case NC_GPU_TF32: return {NC_GEMM_TF32, 1, 0};
    case NC_GPU_BF16: return {NC_GEMM_BF16, 1, spike_operand};
    case NC_GPU_SPLIT_BF16: return spike_operand ? gemm_mode{NC_GEMM_BF16, 3, 1} : gemm_mode{NC_GEMM_F32, 1, 0};
    case NC_GPU_SPLIT_BF16X2: return spike_operand ? gemm_mode{NC_GEMM_BF16, 2, 1} : gemm_mode{NC_GEMM_F32, 1, 0};
    default: return {NC_GEMM_F32, 1, 0};
    }
}

// Is the input of weighted node i (its value `in`) a spike operand here?
static int spike_operand(const grun *r, int i, const gval *in)
{
    if (!r->snn || in->constant)
        return 0;
    if (r->st->prec != NC_GPU_BF16 && r->st->prec != NC_GPU_SPLIT_BF16 && r->st->prec != NC_GPU_SPLIT_BF16X2)
        return 0;
    return r->st->nodes[r->net->nodes[i].inputs[0]].spike;
}
// The weight of dense node i with its columns in the order of the
// channels-last value its flatten passes on (flatten_keeps_nhwc): column
// c·H·W + p (NCHW, as loaded) goes to p·C + c, a transpose of each row's
// [C, H·W].  Built on first use.
static nc_status hwc_weights(grun *r, int i)
{
    gnode &g = r->st->nodes[i];
    if (g.w_hwc)
        return NC_OK;
    const nc_node *n = &r->net->nodes[i];
    const gnode &pre = r->st->nodes[r->net->nodes[n->inputs[0]].inputs[0]]; /* what the flatten flattens */
    int64_t rows = n->weight->shape[0], k = nc_tensor_numel(n->weight) / rows;
    if (pre.channels * pre.inner != k)
        return nc_fail(r->err, NC_ERR_INTERNAL, "%s: %lld weight columns for a channels-last input of %d x %lld",
                       r->where, (long long)k, pre.channels, (long long)pre.inner);
    nc_status s = cuda_alloc(r, (size_t)(rows * k) * sizeof(float), (void **)&g.w_hwc, "channels-last dense weights");
    if (s == NC_OK)
        s = launch_check(r, "transpose kernel",
                         nc_launch_transpose_rows(r->st->stream, rows, pre.channels, pre.inner, g.w, g.w_hwc));
    if (s != NC_OK) { /* built again at the next pass */
        cudaFree(g.w_hwc);
        g.w_hwc = nullptr;
    }
    return s;
}

// The weights of conv/dense node i ([rows, k]) in the form `m` needs: fp32
// as loaded, bf16, or θ/D-scaled bf16 parts; hwc (dense only): made from
// the weight with its columns in channels-last order (hwc_weights).  Built
// on first use; each layout keeps its own copies, since an engine can run
// passes of both (an ANN pass in fp32 reads NCHW, an SNN pass channels last).
static nc_status weights_for(grun *r, int i, const gemm_mode &m, int hwc, const void *parts[3])
{
    gnode &g = r->st->nodes[i];
    const nc_node *n = &r->net->nodes[i];
    int64_t rows = n->weight->shape[0], k = nc_tensor_numel(n->weight) / rows;
    cudaStream_t s = r->st->stream;
    nc_status st = hwc ? hwc_weights(r, i) : NC_OK;
    if (st != NC_OK)
        return st;
    const float *w = hwc ? g.w_hwc : g.w;
    weight_copies &c = hwc ? g.wc_hwc : g.wc;
    if (m.kind != NC_GEMM_BF16) {
        parts[0] = parts[1] = parts[2] = w;
        return NC_OK;
    }
    if (!m.spike) {
        if (!c.wa16) {
            st = cuda_alloc(r, (size_t)(rows * k) * sizeof(nc_bf16), (void **)&c.wa16, "bf16 weights");
            if (st != NC_OK)
                return st;
            nc_bf16 *outp[1] = {c.wa16};
            st = launch_check(r, "weight_parts kernel", nc_launch_weight_parts(s, rows, k, w, nullptr, 1, 1, 1, 1, outp));
            if (st != NC_OK)
                return st;
        }
        parts[0] = parts[1] = parts[2] = c.wa16;
        return NC_OK;
    }
    // spike operand: the input node's descriptor says which θ and D
    const gnode &src = r->st->nodes[n->inputs[0]];
    const gnode &neuron = r->st->nodes[src.spike_src];
    if (c.ws_parts != m.parts) {
        for (int p = 0; p < 3; p++)
            cudaFree(c.ws[p]);
        c.ws[0] = c.ws[1] = c.ws[2] = nullptr;
        c.ws_parts = 0;
        for (int p = 0; p < m.parts && st == NC_OK; p++)
            st = cuda_alloc(r, (size_t)(rows * k) * sizeof(nc_bf16), (void **)&c.ws[p], "bf16 weight parts");
        if (st == NC_OK && !g.opscale) { /* per channel: the same for both layouts */
            st = cuda_alloc(r, (size_t)src.spike_c * sizeof(float), (void **)&g.opscale, "spike scales");
            if (st == NC_OK)
                st = launch_check(r, "scale kernel",
                                  nc_launch_inv_scale(s, src.spike_c, neuron.th, neuron.n_th, src.spike_d, g.opscale));
        }
        float *mul = nullptr;
        if (st == NC_OK)
            st = scratch(r, 1, src.spike_c, sizeof(float), "spike scales", (void **)&mul);
        if (st == NC_OK)
            st = launch_check(r, "scale kernel", nc_launch_scale(s, src.spike_c, neuron.th, neuron.n_th, src.spike_d, mul));
        if (st == NC_OK) {
            // channel of weight column j: conv (o / Mg)·Cg + (j / KH·KW) % Cg;
            // dense (j / spike_inner) % C, or channels last j % C
            int rpg, cpg;
            int64_t kin;
            if (n->kind == NC_NODE_CONV2D) {
                rpg = g.cout / g.groups;
                cpg = g.win.c / g.groups;
                kin = (int64_t)g.win.kh * g.win.kw;
            } else {
                rpg = (int)rows;
                cpg = src.spike_c;
                kin = hwc ? 1 : src.spike_inner;
            }
            st = launch_check(r, "weight_parts kernel",
                              nc_launch_weight_parts(s, rows, k, w, mul, rpg, cpg, kin, m.parts, c.ws));
        }
        if (st != NC_OK)
            return st;
        c.ws_parts = m.parts;
    }
    // accumulate the smallest part first
    for (int p = 0; p < m.parts; p++)
        parts[p] = c.ws[m.parts - 1 - p];
    return NC_OK;
}
// ---- convolutions through cuDNN ----------------------------------------------------------

// Can conv node i read its input value `in` as spike counts (an IF's spikes,
// maybe average-pooled: x = q·θ/D with an integer q), θ/D going into its
// weights per input channel?
static int counts_input(const grun *r, int i, const gval *in)
{
    if (in->counts)
        return 1;
    const gnode &sg = r->st->nodes[r->net->nodes[i].inputs[0]];
    return r->snn && !in->constant && sg.spike && sg.spike_c == r->st->nodes[i].win.c;
}

// The shape of conv node i over `rows` rows, as cuDNN takes it.
static nc_conv_shape shape_of(const gnode &g, int64_t rows)
{
    const nc_gwin &wn = g.win;
    return nc_conv_shape{rows, wn.c, wn.h, wn.w, g.cout, wn.oh, wn.ow, wn.kh, wn.kw, wn.sh, wn.sw, wn.dh, wn.dw,
                         wn.pt, wn.pl, 1, 0};
}

// How conv node i runs in this pass, given whether its input can be read as
// spike counts and whether it is constant over the steps: a cuDNN arithmetic
// (nc_conv_math), or -1 for im2col + cuBLAS.  In fp32, spike counts go to
// the exact tensor-core mode (on bf16 tensor cores through cuDNN's graph API
// where it takes the shape, else one TF32 pass per weight part); an analog
// input of N rows (the first layer of a direct-encoded net) to cuDNN's fp32
// FMA kernels, so that the values stay channels last; an analog input of T·N
// rows (after an add) to cuBLAS sgemm,
// which is faster than those kernels.  In bf16 too, the analog input of N
// rows goes to the fp32 FMA kernels: computed once for all steps, it costs
// less in fp32 than in bf16 (no operand conversion), and an error in the first
// layer's currents is the same at every step, so it shifts the spike counts of
// every later layer.  The split modes keep im2col (cuDNN's
// bf16 convolutions write bf16, losing the low parts).
int conv_math(const grun *r, int i, int spike_in, int constant_in)
{
    const gpu_state *st = r->st;
    const gnode &g = st->nodes[i];
    const nc_gwin &w = g.win;
    if (!st->cudnn || st->conv == CONV_IM2COL)
        return -1;
    if (g.groups != 1 || w.pt != w.pb || w.pl != w.pr)
        return -1; /* cuDNN's legacy API: symmetric padding only; grouped convs keep their kernels */
    switch (st->prec) {
    case NC_GPU_TF32: return NC_CONV_TF32;
    case NC_GPU_BF16: return constant_in && !spike_in ? NC_CONV_FP32 : NC_CONV_BF16;
    case NC_GPU_FP32:
        if (spike_in) {
            nc_conv_shape one_row = shape_of(g, 1);
            return !g.exact_refused && nc_cudnn_exact_ok(&one_row) ? NC_CONV_BF16_EXACT : NC_CONV_TF32_EXACT;
        }
        return constant_in || st->conv == CONV_CUDNN ? NC_CONV_FP32 : -1;
    default: return -1;
    }
}

// D/θ per input channel of conv node i (k_opscale: spikes to counts) and,
// in `mul` (scratch), θ/D (into the weights).  Built on first use.
static nc_status spike_scales(grun *r, int i, float **mul)
{
    gnode &g = r->st->nodes[i];
    const gnode &src = r->st->nodes[r->net->nodes[i].inputs[0]];
    const gnode &neuron = r->st->nodes[src.spike_src];
    cudaStream_t st = r->st->stream;
    nc_status s = NC_OK;
    if (!g.k_opscale) {
        if ((s = cuda_alloc(r, (size_t)g.win.c * sizeof(float), (void **)&g.k_opscale, "spike scales")) != NC_OK)
            return s;
        s = launch_check(r, "scale kernel",
                         nc_launch_inv_scale(st, g.win.c, neuron.th, neuron.n_th, src.spike_d, g.k_opscale));
    }
    if (s == NC_OK && mul && (s = scratch(r, 1, g.win.c, sizeof(float), "spike scales", (void **)mul)) == NC_OK)
        s = launch_check(r, "scale kernel", nc_launch_scale(st, g.win.c, neuron.th, neuron.n_th, src.spike_d, *mul));
    return s;
}

// The weight of conv node i channels last ([Cout, KH, KW, Cin], fp32).
// Built on first use.
static nc_status krsc_weights(grun *r, int i)
{
    gnode &g = r->st->nodes[i];
    int64_t khw = (int64_t)g.win.kh * g.win.kw;
    if (g.w_krsc)
        return NC_OK;
    nc_status s = cuda_alloc(r, (size_t)(g.cout * khw * g.win.c) * sizeof(float), (void **)&g.w_krsc,
                             "channels-last weights");
    if (s == NC_OK)
        s = launch_check(r, "transpose kernel",
                         nc_launch_transpose_rows(r->st->stream, g.cout, g.win.c, khw, g.w, g.w_krsc));
    return s;
}

// The weight of conv node i as cuDNN reads it ([Cout, KH, KW, Cin]) in
// arithmetic m: fp32; bf16 (rounded, or for spike counts scaled by θ/D
// first); or, exact mode, the θ/D-scaled weight in three TF32 parts, or in
// three bf16 parts (hi, then mid and lo side by side: NC_CONV_BF16_EXACT).
// parts[0..n) in the order they are added (the smallest first).  Built on
// first use.
static nc_status cudnn_weights(grun *r, int i, nc_conv_math m, int spike, const void *parts[3], int *n)
{
    gnode &g = r->st->nodes[i];
    cudaStream_t st = r->st->stream;
    int64_t khw = (int64_t)g.win.kh * g.win.kw, k = khw * g.win.c;
    nc_status s = NC_OK;
    *n = 1;
    if ((s = krsc_weights(r, i)) != NC_OK)
        return s;
    if (m == NC_CONV_FP32 || m == NC_CONV_TF32) {
        parts[0] = g.w_krsc;
        return NC_OK;
    }
    float *mul = nullptr;
    if (m == NC_CONV_BF16_EXACT) {
        if (!g.wk_exact) {
            s = cuda_alloc(r, (size_t)(g.cout * k * 3) * sizeof(nc_bf16), (void **)&g.wk_exact, "bf16 weight parts");
            if (s == NC_OK)
                s = spike_scales(r, i, &mul);
            if (s == NC_OK)
                s = launch_check(r, "weight_parts_exact kernel",
                                 nc_launch_weight_parts_exact(st, g.cout, k, g.w_krsc, mul, g.win.c, g.wk_exact,
                                                              g.wk_exact + g.cout * k));
            if (s != NC_OK)
                return s;
        }
        parts[0] = g.wk_exact;
        return NC_OK;
    }
    if (m == NC_CONV_TF32_EXACT) {
        if (!g.wk_parts[0]) {
            for (int p = 0; p < 3 && s == NC_OK; p++)
                s = cuda_alloc(r, (size_t)(g.cout * k) * sizeof(float), (void **)&g.wk_parts[p], "TF32 weight parts");
            if (s == NC_OK)
                s = spike_scales(r, i, &mul);
            if (s == NC_OK) /* column j of a KRSC row reads input channel j % Cin */
                s = launch_check(r, "weight_parts_tf32 kernel",
                                 nc_launch_weight_parts_tf32(st, g.cout, k, g.w_krsc, mul, g.win.c, g.wk_parts));
            if (s != NC_OK)
                return s;
        }
        parts[0] = g.wk_parts[2];
        parts[1] = g.wk_parts[1];
        parts[2] = g.wk_parts[0];
        *n = 3;
        return NC_OK;
    }
    nc_bf16 **dst = spike ? &g.wk16_spike : &g.wk16_analog;
    if (!*dst) {
        if ((s = cuda_alloc(r, (size_t)(g.cout * k) * sizeof(nc_bf16), (void **)dst, "bf16 weights")) != NC_OK)
            return s;
        if (spike && (s = spike_scales(r, i, &mul)) != NC_OK)
            return s;
        nc_bf16 *one[1] = {*dst};
        if ((s = launch_check(r, "weight_parts kernel",
                              nc_launch_weight_parts(st, g.cout, k, g.w_krsc, mul, g.cout, g.win.c, 1, 1, one))) != NC_OK)
            return s;
    }
    parts[0] = *dst;
    return NC_OK;
}

// The plan of conv node i for `rows` rows in precision m: one kept from an
// earlier pass of that shape (of this or an earlier load), else chosen now
// (cuDNN times its algorithms on these buffers) and kept.
static nc_status cudnn_plan_for(grun *r, int i, nc_conv_math m, int64_t rows, const void *x, const void *w, void *y,
                         const nc_conv_plan **out)
{
    gnode &g = r->st->nodes[i];
    nc_conv_shape shape = shape_of(g, rows);
    for (const nc_conv_plan &p : r->st->plans)
        if (p.math == m && memcmp(&p.shape, &shape, sizeof shape) == 0) {
            *out = g.plan = &p;
            return NC_OK;
        }
    // room for the algorithms to try: up to 256 MiB, less when memory is short
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    size_t ws_bytes = std::min<size_t>(256u << 20, free_bytes / 8);
    void *ws = nullptr;
    nc_status s = scratch(r, 1, (int64_t)ws_bytes, 1, "cuDNN workspace", &ws);
    if (s != NC_OK)
        return s;
    nc_conv_plan plan;
    if ((s = nc_cudnn_plan(r->st->cudnn, r->st->stream, &shape, m, x, w, y, ws, ws_bytes, &plan, r->where, r->err)) !=
        NC_OK)
        return s;
    if (g.exact_why[0]) /* this plan runs instead of the exact conv on bf16 parts: say why */
        snprintf(plan.desc + strlen(plan.desc), sizeof plan.desc - strlen(plan.desc), "; %s", g.exact_why);
    r->st->plans.push_back(plan);
    *out = g.plan = &r->st->plans.back();
    return NC_OK;
}

// The key of a refusal: node g's shape for any number of rows.
static nc_conv_shape refusal_key(const gnode &g) { return shape_of(g, 0); }

// The graph API refused node i's exact conv on bf16 parts: it runs by TF32
// parts from now on, in this load and in every later one (gpu_load).
static void refuse_exact(grun *r, int i)
{
    gnode &g = r->st->nodes[i];
    g.exact_refused = 1;
    snprintf(g.exact_why, sizeof g.exact_why, "instead of bf16 parts: %.170s", r->err ? r->err->message : "refused");
    kept_refusal k;
    k.shape = refusal_key(g);
    snprintf(k.why, sizeof k.why, "%s", g.exact_why);
    r->st->refusals.push_back(k);
}

void recall_refusal(const gpu_state *st, gnode &g)
{
    nc_conv_shape key = refusal_key(g);
    for (const kept_refusal &k : st->refusals)
        if (memcmp(&k.shape, &key, sizeof key) == 0) {
            g.exact_refused = 1;
            snprintf(g.exact_why, sizeof g.exact_why, "%s", k.why);
        }
}

// Is node i's value read only by an IF neuron of this SNN pass (which can
// take bf16 currents, and adds a pending bias itself)?
static int only_an_if_reads(const grun *r, int i)
{
    const gnode &g = r->st->nodes[i];
    if (!r->snn || r->observe || g.consumers != 1)
        return 0;
    const nc_node *c = &r->net->nodes[g.last_use];
    return c->kind == NC_NODE_NEURON && c->neuron.model == NC_NEURON_IF;
}

// fp32 counts from bf16 counts (and pairs, which are not needed here).
static nc_status counts_to_f32(grun *r, const gval *in, const nc_gwin &w, const void **x)
{
    void *buf = nullptr;
    int64_t n = in->rows * w.h * w.w * w.c;
    nc_status s = scratch(r, n, 1, sizeof(float), "spike counts", &buf);
    if (s == NC_OK)
        s = launch_check(r, "bf16_to_f32 kernel", nc_launch_bf16_to_f32(r->st->stream, n, in->data16, (float *)buf));
    *x = buf;
    return s;
}

// The operand of conv node i in arithmetic m: the input's own values, or its
// counts (as written by an IF, or converted here) in bf16 or fp32, or in
// bf16 with their pairs (NC_CONV_BF16_EXACT).
static nc_status cudnn_operand(grun *r, int i, nc_conv_math m, int spike, const void **x)
{
    const gnode &g = r->st->nodes[i];
    const nc_gwin &w = g.win;
    gval *in = &r->val[r->net->nodes[i].inputs[0]];
    int64_t R = in->rows, in_numel = (int64_t)w.c * w.h * w.w;
    *x = in->counts && in->data16 ? (const void *)in->data16 : (const void *)in->data;
    if (in->pairs && m == NC_CONV_TF32_EXACT) /* written for the bf16 exact conv, which refused this shape */
        return counts_to_f32(r, in, w, x);
    if (in->counts || m == NC_CONV_FP32 || m == NC_CONV_TF32)
        return NC_OK;
    nc_status s = spike ? spike_scales(r, i, nullptr) : NC_OK;
    void *buf = nullptr;
    int copies = m == NC_CONV_BF16_EXACT ? 3 : 1; /* the counts and their pairs */
    size_t elt = m == NC_CONV_TF32_EXACT ? sizeof(float) : sizeof(nc_bf16);
    if (s == NC_OK)
        s = scratch(r, R, in_numel * copies, elt, m == NC_CONV_BF16 ? "bf16 operand" : "spike counts", &buf);
    if (s != NC_OK)
        return s;
    const float *scale = spike ? g.k_opscale : nullptr;
    int64_t pixels = R * w.h * w.w;
    cudaError_t e;
    if (m == NC_CONV_BF16)
        e = nc_launch_to_bf16(r->st->stream, pixels, w.c, in->data, scale, w.c, 1, (nc_bf16 *)buf);
    else if (m == NC_CONV_BF16_EXACT)
        e = nc_launch_to_counts_exact(r->st->stream, pixels, w.c, in->data, scale, (nc_bf16 *)buf,
                                      (nc_bf16 *)buf + pixels * w.c);
    else
        e = nc_launch_to_counts_f32(r->st->stream, pixels, w.c, in->data, scale, w.c, 1, (float *)buf);
    *x = buf;
    return launch_check(r, "operand kernel", e);
}

// Node i's bias on its output out ([rows, c, inner]): left to the one reader
// that adds it for free (bias_fusable), else added now.
static nc_status add_bias_unless_fused(grun *r, int i, int64_t rows, int c, int64_t inner, gval *out)
{
    const gnode &g = r->st->nodes[i];
    if (!r->net->nodes[i].bias)
        return NC_OK;
    if (bias_fusable(r, i)) {
        out->pbias = g.b;
        return NC_OK;
    }
    return launch_check(r, "add_bias kernel",
                        nc_launch_add_bias(r->st->stream, rows, c, inner, g.b, out->data, out->data));
}

// ---- the bf16 spike convolution with 16-bit currents (nc_gpu_spike_conv.cu) ------------

// Which own kernel runs bf16 conv node i, whose input is spike counts: both
// keep the currents to 16 bits and write them in fp32, where cuDNN's bf16
// convolutions round the weight and the output to 8 bits.
enum own_conv { OWN_NONE, OWN_BF16X2, OWN_FX16 };

// Under conv=auto: 16-bit fixed point on int8 tensor cores where it fits (half
// the tensor work; its counts are uint8, so at most 255 spikes per window of
// the pool before), else two bf16 parts where that fits; bf16x2 only the
// latter; conv=cudnn none.
static own_conv own_spike_conv(const grun *r, int i)
{
    const gnode &g = r->st->nodes[i];
    const gnode &src = r->st->nodes[r->net->nodes[i].inputs[0]];
    conv_impl c = r->st->conv;
    int fx16 = c == CONV_AUTO || c == CONV_UNFUSED || c == CONV_FUSED;
    if (fx16 && src.spike_d <= 255.0f && nc_spike_conv_fx16_fits(&g.win, g.cout, g.groups))
        return OWN_FX16;
    if ((fx16 || c == CONV_BF16X2) && nc_spike_conv_fits(&g.win, g.cout, g.groups, nullptr, 0))
        return OWN_BF16X2;
    return OWN_NONE;
}

int reads_counts8(const grun *r, int i)
{
    const gnode &g = r->st->nodes[i];
    if (!r->snn || r->observe || g.consumers != 1 || !g.spike || g.spike_d > 255.0f)
        return 0;
    int k = g.last_use;
    if (r->net->nodes[k].kind != NC_NODE_CONV2D || r->st->nodes[k].win.c != g.spike_c)
        return 0;
    return conv_math(r, k, 1, 0) == NC_CONV_BF16 && own_spike_conv(r, k) == OWN_FX16;
}

// The operand of fixed-point conv node i: uint8 counts as the IF before
// wrote them, or converted here from the spike values (x·D/θ).
static nc_status counts8_operand(grun *r, int i, const uint8_t **x)
{
    const gnode &g = r->st->nodes[i];
    int src = r->net->nodes[i].inputs[0];
    const gval *in = &r->val[src];
    if (in->data8) {
        *x = in->data8;
        return NC_OK;
    }
    if (in->counts) /* reads_counts8 and own_spike_conv disagree: a bug, not the user's input */
        return nc_fail(r->err, NC_ERR_DEVICE, "%s: node '%s' holds bf16 counts for a fixed-point conv", r->where,
                       r->net->nodes[src].name);
    void *buf = nullptr;
    int64_t pixels = in->rows * g.win.h * g.win.w;
    nc_status s = spike_scales(r, i, nullptr);
    if (s == NC_OK)
        s = scratch(r, pixels, g.win.c, 1, "uint8 spike counts", &buf);
    if (s == NC_OK)
        s = launch_check(r, "to_counts8 kernel",
                         nc_launch_to_counts8(r->st->stream, pixels, g.win.c, in->data, g.k_opscale, g.win.c, 1,
                                              (uint8_t *)buf));
    *x = (const uint8_t *)buf;
    return s;
}

// The θ/D-scaled weight of conv node i in 16-bit fixed point: its steps
// [Cout] and parts a and b [Cout, 3, 3, C] (nc_launch_fx16_parts), in one
// block.  Built on first use.
static nc_status fx16_weights(grun *r, int i, const float **step, const int8_t **a, const uint8_t **b)
{
    gnode &g = r->st->nodes[i];
    int64_t k = (int64_t)g.win.kh * g.win.kw * g.win.c, n = g.cout * k;
    size_t steps = ((size_t)g.cout * sizeof(float) + 15) & ~(size_t)15; /* the parts 16-byte aligned */
    nc_status s = NC_OK;
    if (!g.wk_fx16) {
        float *mul = nullptr;
        if ((s = krsc_weights(r, i)) == NC_OK)
            s = cuda_alloc(r, steps + 2 * (size_t)n, &g.wk_fx16, "fixed-point weight parts");
        if (s == NC_OK)
            s = spike_scales(r, i, &mul);
        unsigned char *base = (unsigned char *)g.wk_fx16;
        if (s == NC_OK)
            s = launch_check(r, "fx16_parts kernel",
                             nc_launch_fx16_parts(r->st->stream, g.cout, k, g.w_krsc, mul, g.win.c,
                                                  (int8_t *)(base + steps), (uint8_t *)(base + steps + n),
                                                  (float *)base));
        if (s != NC_OK)
            return s;
    }
    unsigned char *base = (unsigned char *)g.wk_fx16;
    *step = (const float *)base;
    *a = (const int8_t *)(base + steps);
    *b = (const uint8_t *)(base + steps + n);
    return NC_OK;
}

// The θ/D-scaled weight of conv node i in two bf16 parts, [Cout, 3, 3, C]
// each, hi then mid.  Built on first use.
static nc_status pair_weights(grun *r, int i, const nc_bf16 **hi, const nc_bf16 **mid)
{
    gnode &g = r->st->nodes[i];
    int64_t n = (int64_t)g.cout * g.win.kh * g.win.kw * g.win.c;
    nc_status s = NC_OK;
    if (!g.wk_pair) {
        float *mul = nullptr;
        if ((s = krsc_weights(r, i)) == NC_OK)
            s = cuda_alloc(r, (size_t)(2 * n) * sizeof(nc_bf16), (void **)&g.wk_pair, "bf16 weight parts");
        if (s == NC_OK)
            s = spike_scales(r, i, &mul);
        nc_bf16 *parts[2] = {g.wk_pair, g.wk_pair + n};
        if (s == NC_OK) /* column j of a KRSC row reads input channel j % Cin */
            s = launch_check(r, "weight_parts kernel",
                             nc_launch_weight_parts(r->st->stream, g.cout, n / g.cout, g.w_krsc, mul, g.cout, g.win.c,
                                                    1, 2, parts));
        if (s != NC_OK)
            return s;
    }
    *hi = g.wk_pair;
    *mid = g.wk_pair + n;
    return NC_OK;
}

// The IF node (and the 2×2 average pool after it) that fixed-point conv
// node i runs in its epilogue this pass, and what it writes: uint8 counts
// for a fixed-point conv after it, else θ values in fp32.  Only where no
// one else sees the current or the spikes (no observer, no sums), and not
// where the next conv wants its counts in bf16.
struct if_fusion {
    int neuron = -1, pool = -1, counts = 0;
};

static if_fusion fusion_of(const grun *r, int i)
{
    if_fusion f;
    const gnode &g = r->st->nodes[i];
    if (r->sums || r->st->conv == CONV_UNFUSED || !only_an_if_reads(r, i))
        return f;
    int j = g.last_use, pool = fused_pool_of(r, j, 1);
    int last = pool >= 0 ? pool : j; /* the node whose value the kernel writes */
    int counts = reads_counts8(r, last);
    if (!counts && pool < 0 && counts_for_conv(r, j, 1)) /* a conv that reads bf16 counts */
        return f;
    // auto: 32 input channels only: with 64, each step's 18 k steps between
    // two barriers leave the SM's warps waiting on one another, and the fused
    // conv took longer than conv + IF apart (H100, 2026-12-07: VGG-style conv8
    // + relu9 + pool10 0.98 against 0.46 + 0.18 ms; conv6 + relu7, 32
    // channels: 0.52 against 0.58 + 0.18 ms); conv=fused: every one that fits
    if ((g.win.c != 32 && r->st->conv != CONV_FUSED) || !nc_spike_conv_if_fits(&g.win, g.cout, pool >= 0))
        return f;
    f.neuron = j;
    f.pool = pool;
    f.counts = counts;
    return f;
}

// Conv node i with IF node f.neuron (and pool f.pool) in one kernel: the
// last of them gets the value, each is marked as made.
static nc_status run_spike_conv_if(grun *r, int i, const if_fusion &f, const uint8_t *x, const float *step,
                                   const int8_t *a, const uint8_t *b)
{
    gnode &g = r->st->nodes[i];
    const gnode &neuron = r->st->nodes[f.neuron];
    const nc_neuron *nr = &r->net->nodes[f.neuron].neuron;
    int last = f.pool >= 0 ? f.pool : f.neuron;
    gval *out = &r->val[last];
    int64_t rows = (int64_t)r->T * r->N;
    nc_status s = f.counts ? value_alloc8(r, last, rows, out) : value_alloc(r, last, rows, 0, out);
    if (s != NC_OK)
        return s;
    out->nhwc = 1;
    r->val[f.neuron].made = 1;
    out->made = 1;
    nc_conv_if p = {};
    p.T = r->T;
    p.N = r->N;
    p.th = neuron.th;
    p.n_th = neuron.n_th;
    p.v0f = nr->v0_fraction;
    p.reset_zero = nr->reset == NC_RESET_ZERO;
    p.fire_gt = nr->compare == NC_FIRE_GT;
    p.bias = r->net->nodes[i].bias ? g.b : nullptr;
    p.pool = f.pool >= 0;
    p.counts = f.counts;
    p.out = f.counts ? (void *)out->data8 : (void *)out->data;
    nc_spike_conv_if_describe(&g.win, g.cout, p.pool, g.own_desc, sizeof g.own_desc);
    return launch_check(r, "spike_conv3x3_fx16_if kernel",
                        nc_launch_spike_conv3x3_fx16_if(r->st->stream, &g.win, g.cout, &p, x, a, b, step));
}

// Conv node i on the fixed-point kernel: uint8 counts in, fp32 currents out
// (or the IF after it in the kernel's epilogue, fusion_of).
static nc_status run_fx16_conv(grun *r, int i, gval *out)
{
    gnode &g = r->st->nodes[i];
    const gval *in = &r->val[r->net->nodes[i].inputs[0]];
    int64_t R = in->rows, P = (int64_t)g.win.oh * g.win.ow;
    const uint8_t *x = nullptr, *b = nullptr;
    const int8_t *a = nullptr;
    const float *step = nullptr;
    nc_status s = counts8_operand(r, i, &x);
    if (s == NC_OK)
        s = fx16_weights(r, i, &step, &a, &b);
    if (s != NC_OK)
        return s;
    g.plan = nullptr;
    if_fusion f = in->constant ? if_fusion{} : fusion_of(r, i);
    if (f.neuron >= 0)
        return run_spike_conv_if(r, i, f, x, step, a, b);
    if ((s = value_alloc(r, i, R, in->constant, out)) != NC_OK)
        return s;
    out->nhwc = 1;
    nc_spike_conv_fx16_describe(&g.win, g.cout, g.own_desc, sizeof g.own_desc);
    s = launch_check(r, "spike_conv3x3_fx16 kernel",
                     nc_launch_spike_conv3x3_fx16(r->st->stream, R, &g.win, g.cout, x, a, b, step, out->data));
    if (s == NC_OK)
        s = add_bias_unless_fused(r, i, R * P, g.cout, 1, out);
    return s;
}

// Conv node i on the two-bf16-part kernel: bf16 counts in (as the IF before
// wrote them, or converted here), fp32 currents out, channels last.
static nc_status run_bf16x2_conv(grun *r, int i, gval *out)
{
    gnode &g = r->st->nodes[i];
    const gval *in = &r->val[r->net->nodes[i].inputs[0]];
    int64_t R = in->rows, P = (int64_t)g.win.oh * g.win.ow;
    const void *x = nullptr;
    nc_status s = value_alloc(r, i, R, in->constant, out);
    if (s != NC_OK)
        return s;
    out->nhwc = 1;
    if ((s = cudnn_operand(r, i, NC_CONV_BF16, 1, &x)) != NC_OK)
        return s;
    g.plan = nullptr;
    const nc_bf16 *hi = nullptr, *mid = nullptr;
    if ((s = pair_weights(r, i, &hi, &mid)) != NC_OK)
        return s;
    nc_spike_conv_describe(&g.win, g.cout, g.own_desc, sizeof g.own_desc);
    s = launch_check(r, "spike_conv3x3 kernel",
                     nc_launch_spike_conv3x3(r->st->stream, R, &g.win, g.cout, (const nc_bf16 *)x, hi, mid,
                                             out->data));
    if (s == NC_OK)
        s = add_bias_unless_fused(r, i, R * P, g.cout, 1, out);
    return s;
}

const char *conv_desc(const gnode &g)
{
    return g.own_desc[0] ? g.own_desc : g.plan ? g.plan->desc : "im2col + cuBLAS GEMM";
}

// Conv node i through cuDNN: channels-last input and output (T folded into
// the rows).  In bf16 and in the exact fp32 mode the operand is spike counts
// (written so by the IF before, or converted here); a bf16 output goes to
// fp32 unless only an IF reads it (which widens it as it integrates).
static nc_status run_conv_cudnn(grun *r, int i, nc_conv_math m, gval *out)
{
    const nc_node *n = &r->net->nodes[i];
    gnode &g = r->st->nodes[i];
    const nc_gwin &w = g.win;
    int src = n->inputs[0];
    gval *in = &r->val[src];
    nc_status s = NC_OK;
    if (!in->counts) {
        s = add_pending_bias(r, src);
        if (s == NC_OK && w.c > 1) /* with one channel both layouts are the same bytes */
            s = to_layout(r, src, 1);
        if (s == NC_OK)
            s = widen(r, src);
    }
    if (s != NC_OK)
        return s;
    int64_t R = in->rows, P = (int64_t)w.oh * w.ow;
    int spike = m != NC_CONV_FP32 && m != NC_CONV_TF32 && counts_input(r, i, in);
    own_conv own = m == NC_CONV_BF16 && spike ? own_spike_conv(r, i) : OWN_NONE;
    if (own == OWN_FX16)
        return run_fx16_conv(r, i, out);
    if (own == OWN_BF16X2)
        return run_bf16x2_conv(r, i, out);
    g.own_desc[0] = 0;
    int keep16 = m == NC_CONV_BF16 && only_an_if_reads(r, i);
    s = keep16 ? value_alloc16(r, i, R, in->constant, 0, 0, out) : value_alloc(r, i, R, in->constant, out);
    if (s != NC_OK)
        return s;
    out->nhwc = 1;
    const void *wp[3] = {}, *x = nullptr;
    int n_parts = 1;
    if ((s = cudnn_weights(r, i, m, spike, wp, &n_parts)) != NC_OK || (s = cudnn_operand(r, i, m, spike, &x)) != NC_OK)
        return s;
    cudaStream_t st = r->st->stream;
    void *y = keep16 ? (void *)out->data16 : (void *)out->data;
    if (m == NC_CONV_BF16 && !keep16 &&
        (s = scratch(r, R, g.cout * P, sizeof(nc_bf16), "bf16 conv output", &y)) != NC_OK)
        return s;
    const nc_conv_plan *plan = nullptr;
    s = cudnn_plan_for(r, i, m, R, x, wp[0], y, &plan);
    if (s == NC_ERR_UNSUPPORTED && m == NC_CONV_BF16_EXACT) {
        // the graph API refused this shape: one TF32 pass per weight part, now and in later passes
        refuse_exact(r, i);
        m = NC_CONV_TF32_EXACT;
        if ((s = cudnn_weights(r, i, m, spike, wp, &n_parts)) != NC_OK || (s = cudnn_operand(r, i, m, spike, &x)) != NC_OK)
            return s;
        s = cudnn_plan_for(r, i, m, R, x, wp[0], y, &plan);
    }
    if (s != NC_OK)
        return s;
    void *ws = nullptr;
    if (plan->workspace && (s = scratch(r, 1, (int64_t)plan->workspace, 1, "cuDNN workspace", &ws)) != NC_OK)
        return s;
    for (int p = 0; p < n_parts && s == NC_OK; p++) /* the parts' sums added into y, the smallest first */
        s = nc_cudnn_conv(r->st->cudnn, plan, x, wp[p], y, ws, p ? 1.0f : 0.0f, r->where, r->err);
    if (s == NC_OK && m == NC_CONV_BF16 && !keep16)
        s = launch_check(r, "bf16_to_f32 kernel",
                         nc_launch_bf16_to_f32(st, R * g.cout * P, (const nc_bf16 *)y, out->data));
    if (s == NC_OK)
        s = add_bias_unless_fused(r, i, R * P, g.cout, 1, out);
    return s;
}

// The im2col and dense paths: node i's input as plain values (fp32, NCHW,
// bias added) and a new output value of the same rows.
static nc_status plain_in_new_out(grun *r, int i, const gval **in, gval *out)
{
    nc_status s = materialize(r, r->net->nodes[i].inputs[0]);
    if (s != NC_OK)
        return s;
    *in = input_value(r, i, 0);
    return value_alloc(r, i, (*in)->rows, (*in)->constant, out);
}

// The GEMM mode for node i's input in (a spike operand where the precision
// allows it) and node i's weights prepared for that mode (hwc: for a
// channels-last input, weights_for).
static nc_status gemm_mode_and_weights(grun *r, int i, const gval *in, int hwc, gemm_mode *m, const void *wp[3])
{
    *m = mode_for(r->st->prec, spike_operand(r, i, in));
    return weights_for(r, i, *m, hwc, wp);
}
nc_status run_conv(grun *r, int i, gval *out)
{
    const gval *cin = input_value(r, i, 0);
    int m = conv_math(r, i, counts_input(r, i, cin), cin->constant);
    if (m >= 0)
        return run_conv_cudnn(r, i, (nc_conv_math)m, out);
    gnode &g = r->st->nodes[i];
    const gval *in = nullptr;
    nc_status s = plain_in_new_out(r, i, &in, out);
    if (s != NC_OK)
        return s;
    const nc_gwin &w = g.win;
    int groups = g.groups, cout = g.cout, cg = w.c / groups, mg = cout / groups;
    int64_t P = (int64_t)w.oh * w.ow, kg = (int64_t)cg * w.kh * w.kw, R = in->rows;
    int64_t in_row = (int64_t)w.c * w.h * w.w, out_row = (int64_t)cout * P;
    cudaStream_t st = r->st->stream;
    if (groups > 1 && mg < 4) {
        s = launch_check(r, "conv_direct kernel", nc_launch_conv_direct(st, &w, cout, groups, R, in->data, g.w, out->data));
    } else {
        gemm_mode m;
        const void *wp[3];
        if ((s = gemm_mode_and_weights(r, i, in, 0, &m, wp)) != NC_OK)
            return s;
        if (P > 0x7fffffff || kg > 0x7fffffff)
            return nc_fail(r->err, NC_ERR_UNSUPPORTED, "%s: a GEMM dimension exceeds 2^31", r->where);
        int pointwise = w.kh == 1 && w.kw == 1 && w.sh == 1 && w.sw == 1 && !w.pt && !w.pl && !w.pb && !w.pr;
        nc_gemm gm = {};
        gm.kind = m.kind;
        gm.ta = gm.tb = CUBLAS_OP_N;
        gm.m = (int)P;
        gm.n = mg;
        gm.k = (int)kg;
        gm.ldb = (int)kg;
        gm.stride_b = 0;
        gm.parts = m.parts;
        gm.ldc = (int)P;
        gm.stride_c = out_row;
        gm.beta = 0.0f;
        if (pointwise && m.kind != NC_GEMM_BF16) {
            // the input plane of a sample already is the [Cg, P] matrix
            gm.lda = (int)P;
            gm.stride_a = in_row;
            for (int grp = 0; grp < groups && s == NC_OK; grp++)
                for (int64_t r0 = 0; r0 < R && s == NC_OK; r0 += 65535) {
                    gm.batch = (int)std::min<int64_t>(R - r0, 65535);
                    for (int p = 0; p < 3; p++) {
                        gm.a[p] = in->data + r0 * in_row + (int64_t)grp * cg * P;
                        gm.b[p] = (const float *)wp[p] + (int64_t)grp * mg * kg;
                    }
                    gm.c = out->data + r0 * out_row + (int64_t)grp * mg * P;
                    s = nc_gpu_gemm(r->st->blas, &gm, r->where, r->err);
                }
        } else {
            size_t elt = m.kind == NC_GEMM_BF16 ? sizeof(nc_bf16) : sizeof(float);
            int64_t ld = (P + 7) / 8 * 8; // 16-byte aligned columns for the tensor cores
            int64_t per_sample = kg * ld * (int64_t)elt;
            int64_t nb = (int64_t)r->st->chunk_bytes / (per_sample > 0 ? per_sample : 1);
            nb = std::max<int64_t>(1, std::min<int64_t>(nb, R));
            nb = std::min<int64_t>(nb, 65535);
            void *col = nullptr;
            if ((s = scratch(r, nb, kg * ld, elt, "im2col chunk", &col)) != NC_OK)
                return s;
            const float *scale = m.spike ? r->st->nodes[i].opscale : nullptr;
            gm.lda = (int)ld;
            gm.stride_a = kg * ld;
            for (int64_t r0 = 0; r0 < R && s == NC_OK; r0 += nb) {
                int64_t cnt = std::min(nb, R - r0);
                for (int grp = 0; grp < groups && s == NC_OK; grp++) {
                    cudaError_t e = m.kind == NC_GEMM_BF16
                                        ? nc_launch_im2col_bf16(st, &w, groups, grp, cnt, in->data + r0 * in_row, scale, ld,
                                                                (nc_bf16 *)col)
                                        : nc_launch_im2col_f32(st, &w, groups, grp, cnt, in->data + r0 * in_row, ld,
                                                               (float *)col);
                    if ((s = launch_check(r, "im2col kernel", e)) != NC_OK)
                        break;
                    for (int p = 0; p < 3; p++) {
                        gm.a[p] = col;
                        gm.b[p] = (const char *)wp[p] + (int64_t)grp * mg * kg * (int64_t)elt;
                    }
                    gm.c = out->data + r0 * out_row + (int64_t)grp * mg * P;
                    gm.batch = (int)cnt;
                    s = nc_gpu_gemm(r->st->blas, &gm, r->where, r->err);
                }
            }
        }
    }
    if (s == NC_OK)
        s = add_bias_unless_fused(r, i, R, cout, P, out);
    return s;
}

// out[R, fout] = in[R, fin]·Wᵀ in mode m; wp: the weight parts; op: the
// operand (fp32 input, or its bf16 conversion).
nc_status dense_gemm(cublasHandle_t h, const gemm_mode &m, int64_t R, int fin, int fout, const void *op,
                     const void *const wp[3], float *out, const char *where, nc_error *err)
{
    nc_gemm gm = {};
    gm.kind = m.kind;
    gm.ta = CUBLAS_OP_T;
    gm.tb = CUBLAS_OP_N;
    gm.m = fout;
    gm.k = fin;
    gm.lda = fin;
    gm.ldb = fin;
    gm.ldc = fout;
    gm.parts = m.parts;
    gm.batch = 1;
    gm.beta = 0.0f;
    size_t elt = m.kind == NC_GEMM_BF16 ? sizeof(nc_bf16) : sizeof(float);
    nc_status s = NC_OK;
    for (int64_t r0 = 0; r0 < R && s == NC_OK; r0 += 0x40000000) {
        gm.n = (int)std::min<int64_t>(R - r0, 0x40000000);
        for (int p = 0; p < 3; p++) {
            gm.a[p] = wp[p];
            gm.b[p] = (const char *)op + r0 * fin * (int64_t)elt;
        }
        gm.c = out + r0 * fout;
        s = nc_gpu_gemm(h, &gm, where, err);
    }
    return s;
}

// Dense node i: out = in·Wᵀ (+ bias).  The value of a flatten that kept a
// channels-last layout (flatten_keeps_nhwc) is read as it is, by the weight
// with its columns in that order: the same products, summed in cuBLAS's
// order over the permuted columns, so within fp32 rounding of the plain path.
nc_status run_dense(grun *r, int i, gval *out)
{
    const nc_node *n = &r->net->nodes[i];
    gnode &g = r->st->nodes[i];
    const gval *in = input_value(r, i, 0);
    int hwc = in->nhwc && in->data && !in->data16 && !in->pbias && flatten_keeps_nhwc(r, n->inputs[0]);
    nc_status s = hwc ? value_alloc(r, i, in->rows, in->constant, out) : plain_in_new_out(r, i, &in, out);
    if (s != NC_OK)
        return s;
    g.read_hwc = hwc;
    int fout = (int)n->weight->shape[0], fin = (int)n->weight->shape[1];
    int64_t R = in->rows;
    gemm_mode m;
    const void *wp[3];
    if ((s = gemm_mode_and_weights(r, i, in, hwc, &m, wp)) != NC_OK)
        return s;
    const void *op = in->data;
    if (m.kind == NC_GEMM_BF16) {
        void *conv = nullptr;
        if ((s = scratch(r, R, fin, sizeof(nc_bf16), "bf16 operand", &conv)) != NC_OK)
            return s;
        // spike scales per channel: of column j (j / inner) % C, channels last j % C
        const gnode &src = r->st->nodes[n->inputs[0]];
        cudaError_t e = nc_launch_to_bf16(r->st->stream, R, fin, in->data, m.spike ? g.opscale : nullptr,
                                          src.spike_c, hwc ? 1 : src.spike_inner, (nc_bf16 *)conv);
        if ((s = launch_check(r, "to_bf16 kernel", e)) != NC_OK)
            return s;
        op = conv;
    }
    s = dense_gemm(r->st->blas, m, R, fin, fout, op, wp, out->data, r->where, r->err);
    if (s == NC_OK)
        s = add_bias_unless_fused(r, i, R, fout, 1, out);
    return s;
}

} // namespace ncg
