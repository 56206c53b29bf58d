// nc_gpu_nodes.cu — the GPU engine's other nodes: the input, pools,
// flatten/output copies, affine, scale, add/concat, and the neurons (the IF
// over T steps, ReLU, clip, QCFS); run_node dispatches on the node kind.
#include "gpu/nc_gpu_engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <new>
#include <string>
#include <vector>

namespace ncg {

// ---- node kernels ------------------------------------------------------------------------

static nc_status run_input(grun *r, int i, float *d_input, gval *out)
{
    if (r->seq) { /* [T, N, ...] already is the time-major layout */
        *out = gval{d_input, (int64_t)r->T * r->N, 0, 0, nullptr};
        return NC_OK;
    }
    if (!r->snn || r->o->encoding == NC_ENCODING_DIRECT) {
        *out = gval{d_input, r->N, r->snn, 0, nullptr};
        return NC_OK;
    }
    nc_status s = value_alloc(r, i, (int64_t)r->T * r->N, 0, out);
    if (s != NC_OK)
        return s;
    return launch_check(r, "poisson kernel",
                        nc_launch_poisson(r->st->stream, r->o->seed, r->T, r->N * numel_of(r, i), d_input, out->data));
}
static nc_status run_gated(grun *r, int i, gval *out)
{
    const nc_node *n = &r->net->nodes[i];
    const gnode &g = r->st->nodes[i];
    const gval *in = input_value(r, i, 0);
    int64_t in_numel = numel_of(r, n->inputs[0]), out_numel = g.numel;
    nc_status s = value_alloc(r, i, (int64_t)r->T * r->N, 0, out);
    int *counts = nullptr;
    if (s == NC_OK)
        s = scratch(r, r->N, in_numel, sizeof(int), "spike counts", (void **)&counts);
    if (s == NC_OK)
        s = launch_check(r, "cudaMemsetAsync",
                         cudaMemsetAsync(counts, 0, (size_t)(r->N * in_numel) * sizeof(int), r->st->stream));
    for (int t = 0; t < r->T && s == NC_OK; t++) {
        const float *x = in->data + (in->constant ? 0 : (int64_t)t * r->N * in_numel);
        s = launch_check(r, "gated max pool kernels",
                         nc_launch_gated_step(r->st->stream, &g.win, r->N, x, counts, out->data + (int64_t)t * r->N * out_numel));
    }
    return s;
}

// PRE_SPIKE max pool on currents that change from step to step (the CPU
// engine's rule, sim/engine_cpu.c run_prespike_max): pool the running sums
// S(t) and pass on the increments max S(t) − max S(t−1), so that the pooled
// mean over T is exactly the max of the mean currents.  Windows of up to
// kPrespikeTaps taps in one kernel that adds the conv's pending bias as it
// reads; larger ones in three passes over a copy.
static nc_status run_prespike_max(grun *r, int i, const gval *in, gval *out)
{
    // in and out share a layout (channels last or not): the sums and the
    // differences are per neuron, only the pool reads the layout
    const gnode &g = r->st->nodes[i];
    cudaStream_t st = r->st->stream;
    int from = r->net->nodes[i].inputs[0];
    if (nc_prespike_max_fits(&g.win)) {
        nc_status s = launch_check(r, "pre-spike max pool kernel",
                                   nc_launch_prespike_max(st, &g.win, in->nhwc, r->T, r->N, in->pbias, in->data, out->data));
        r->val[from].pbias = nullptr; // added by the kernel
        return s;
    }
    nc_status s = add_pending_bias(r, from);
    int64_t in_step = r->N * numel_of(r, from), out_step = r->N * numel_of(r, i);
    float *sums = nullptr;
    size_t bytes = (size_t)(r->T * in_step) * sizeof(float);
    if (s == NC_OK)
        s = launch_check(r, "cudaMallocAsync (running sums)", cudaMallocAsync((void **)&sums, bytes, st));
    if (s != NC_OK)
        return s;
    s = launch_check(r, "copy of the pool input",
                     cudaMemcpyAsync(sums, in->data, bytes, cudaMemcpyDeviceToDevice, st));
    if (s == NC_OK)
        s = launch_check(r, "running-sum kernel", nc_launch_cumsum_steps(st, r->T, in_step, sums));
    if (s == NC_OK)
        s = launch_check(r, "maxpool kernel", in->nhwc ? nc_launch_maxpool_nhwc(st, &g.win, in->rows, sums, out->data)
                                                       : nc_launch_maxpool(st, &g.win, in->rows, nullptr, sums, out->data));
    if (s == NC_OK)
        s = launch_check(r, "step-difference kernel", nc_launch_diff_steps(st, r->T, out_step, out->data));
    cudaFreeAsync(sums, st);
    return s;
}

static nc_status run_pool(grun *r, int i, gval *out)
{
    const nc_node *n = &r->net->nodes[i];
    const gnode &g = r->st->nodes[i];
    int gated = n->kind == NC_NODE_MAXPOOL && r->snn && n->maxpool_strategy == NC_MAXPOOL_GATED;
    int as_avg = n->kind == NC_NODE_AVGPOOL || (n->kind == NC_NODE_MAXPOOL && r->snn && n->maxpool_strategy == NC_MAXPOOL_AVG);
    int as_max = n->kind == NC_NODE_MAXPOOL && !gated && !as_avg;
    const gval *in = input_value(r, i, 0);
    cudaStream_t st = r->st->stream;
    nc_status s;
    if (out->data || out->made) /* made with the IF before it, in one kernel (run_if_avgpool, or the conv's epilogue) */
        return NC_OK;
    if (as_avg && in->nhwc) { /* stays channels last, for the next cuDNN conv */
        if ((s = widen(r, n->inputs[0])) != NC_OK || (s = add_pending_bias(r, n->inputs[0])) != NC_OK ||
            (s = value_alloc(r, i, in->rows, in->constant, out)) != NC_OK)
            return s;
        out->nhwc = 1;
        return launch_check(r, "avgpool kernel",
                            nc_launch_avgpool_nhwc(st, &g.win, n->count_include_pad, in->rows, in->data, out->data));
    }
    if (as_max && in->nhwc) { /* stays channels last, so that the IF after it writes counts for the next conv */
        if ((s = widen(r, n->inputs[0])) != NC_OK || (s = value_alloc(r, i, in->rows, in->constant, out)) != NC_OK)
            return s;
        out->nhwc = 1;
        if (r->snn && !in->constant)
            return run_prespike_max(r, i, in, out); /* adds the pending bias itself */
        if ((s = add_pending_bias(r, n->inputs[0])) != NC_OK)
            return s;
        return launch_check(r, "maxpool kernel", nc_launch_maxpool_nhwc(st, &g.win, in->rows, in->data, out->data));
    }
    s = as_max && !r->snn ? to_layout(r, n->inputs[0], 0) : materialize(r, n->inputs[0]);
    if (s != NC_OK)
        return s;
    if (gated)
        return run_gated(r, i, out);
    if ((s = value_alloc(r, i, in->rows, in->constant, out)) != NC_OK)
        return s;
    if (n->kind == NC_NODE_GLOBAL_AVGPOOL) {
        int c = (int)n->shape[0];
        return launch_check(r, "global avgpool kernel",
                            nc_launch_gap(st, in->rows, c, numel_of(r, n->inputs[0]) / c, in->data, out->data));
    }
    if (as_avg)
        return launch_check(r, "avgpool kernel",
                            nc_launch_avgpool(st, &g.win, n->count_include_pad, in->rows, in->data, out->data));
    if (r->snn && !in->constant)
        return run_prespike_max(r, i, in, out);
    // ANN/QCFS, and a constant input in SNN: the max of this step's inputs
    // (as the CPU engine), with a pending conv bias added to the max
    return launch_check(r, "maxpool kernel", nc_launch_maxpool(st, &g.win, in->rows, in->pbias, in->data, out->data));
}

// Flatten and output: the input's values as they are (taking over its block
// where it can).  A flatten that a dense node reads keeps a channels-last
// layout (flatten_keeps_nhwc): no transpose, so it costs nothing.
static nc_status run_copy(grun *r, int i, gval *out)
{
    int from = r->net->nodes[i].inputs[0];
    nc_status s = flatten_keeps_nhwc(r, i) ? widen(r, from) : materialize(r, from);
    if (s == NC_OK)
        s = add_pending_bias(r, from);
    const float *src, *pb;
    if (s == NC_OK)
        s = value_like_input(r, i, out, &src, &pb);
    if (s == NC_OK && out->data != src)
        s = launch_check(r, "cudaMemcpyAsync",
                         cudaMemcpyAsync(out->data, src, (size_t)(out->rows * numel_of(r, i)) * sizeof(float),
                                         cudaMemcpyDeviceToDevice, r->st->stream));
    return s;
}

static nc_status run_affine(grun *r, int i, gval *out)
{
    const gnode &g = r->st->nodes[i];
    nc_status s = materialize(r, r->net->nodes[i].inputs[0]);
    const float *src, *pb;
    if (s == NC_OK)
        s = value_like_input(r, i, out, &src, &pb);
    if (s == NC_OK)
        s = launch_check(r, "affine kernel",
                         nc_launch_affine(r->st->stream, out->rows, g.channels, g.inner, g.w, g.b, src, out->data));
    return s;
}

// NIR's Scale: a weight per value, or one for all.
static nc_status run_scale(grun *r, int i, gval *out)
{
    const nc_node *n = &r->net->nodes[i];
    const gnode &g = r->st->nodes[i];
    nc_status s = materialize(r, n->inputs[0]);
    const float *src, *pb;
    if (s == NC_OK)
        s = value_like_input(r, i, out, &src, &pb);
    if (s == NC_OK)
        s = launch_check(r, "scale kernel",
                         nc_launch_scale_values(r->st->stream, out->rows, g.numel, g.w, nc_tensor_numel(n->weight), src,
                                                out->data));
    return s;
}

static nc_status run_merge(grun *r, int i, gval *out)
{
    const nc_node *n = &r->net->nodes[i];
    int constant = 1, all_nhwc = n->kind == NC_NODE_ADD;
    nc_status s = NC_OK;
    for (int k = 0; k < n->n_inputs; k++)
        all_nhwc &= input_value(r, i, k)->nhwc;
    for (int k = 0; k < n->n_inputs && s == NC_OK; k++) {
        // a sum is element-wise: inputs that are all channels last stay so
        s = all_nhwc ? widen(r, n->inputs[k]) : materialize(r, n->inputs[k]);
        if (s == NC_OK && all_nhwc)
            s = add_pending_bias(r, n->inputs[k]);
        constant &= input_value(r, i, k)->constant;
    }
    if (s != NC_OK)
        return s;
    int steps = r->snn && !constant ? r->T : 1;
    if ((s = value_alloc(r, i, (int64_t)steps * r->N, r->snn && constant, out)) != NC_OK)
        return s;
    out->nhwc = all_nhwc;
    int64_t rows = (int64_t)steps * r->N, out_numel = numel_of(r, i);
    cudaStream_t st = r->st->stream;
    if (n->kind == NC_NODE_CONCAT) {
        int64_t off = 0;
        for (int k = 0; k < n->n_inputs && s == NC_OK; k++) {
            const gval *v = input_value(r, i, k);
            int64_t per = numel_of(r, n->inputs[k]);
            s = launch_check(r, "concat kernel",
                             nc_launch_concat_part(st, rows, out_numel, off, v->data, v->rows, per, out->data));
            off += per;
        }
        return s;
    }
    int64_t total = rows * out_numel;
    const gval *a = input_value(r, i, 0);
    if (n->n_inputs == 1)
        return launch_check(r, "repeat kernel", nc_launch_repeat(st, total, a->data, a->rows * out_numel, out->data));
    const gval *b = input_value(r, i, 1);
    s = launch_check(r, "add kernel",
                     nc_launch_add(st, total, a->data, a->rows * out_numel, b->data, b->rows * out_numel, out->data));
    for (int k = 2; k < n->n_inputs && s == NC_OK; k++) {
        const gval *v = input_value(r, i, k);
        s = launch_check(r, "add kernel", nc_launch_add(st, total, out->data, total, v->data, v->rows * out_numel, out->data));
    }
    return s;
}
// ---- neurons -------------------------------------------------------------------------------

enum neuron_op { OP_RELU, OP_CLIP, OP_QCFS, OP_IF };

static neuron_op op_of(const grun *r, const nc_node *n)
{
    switch (n->neuron.model) {
    case NC_NEURON_RELU: return OP_RELU;
    case NC_NEURON_CLIP: return OP_CLIP;
    case NC_NEURON_QCFS: return r->o->mode == NC_MODE_QCFS ? OP_QCFS : OP_RELU;
    case NC_NEURON_IF: return r->snn ? OP_IF : r->o->mode == NC_MODE_QCFS ? OP_QCFS : OP_RELU;
    default: break; /* NIR models: refused by gpu_supports */
    }
    return OP_RELU;
}

// Does IF node i write its spikes as counts for the one conv that reads them
// (a cuDNN bf16 or exact fp32 conv over exactly these channels, with θ in
// its weights), instead of θ-valued fp32 spikes that the conv would convert?
// Returns that conv's arithmetic (nc_conv_math, never 0 = NC_CONV_FP32), or 0.
int counts_for_conv(const grun *r, int i, int out_nhwc)
{
    const gnode &g = r->st->nodes[i];
    if (!r->snn || r->observe || g.consumers != 1 || !g.spike || g.spike_d != 1.0f)
        return 0;
    int j = g.last_use;
    if (r->net->nodes[j].kind != NC_NODE_CONV2D || r->st->nodes[j].win.c != g.spike_c || !(out_nhwc || g.channels == 1))
        return 0;
    int m = conv_math(r, j, 1, 0);
    return m == NC_CONV_BF16 || m == NC_CONV_TF32_EXACT || m == NC_CONV_BF16_EXACT ? m : 0;
}

// The pool node that IF node i's spikes go to, when the two run as one
// kernel (nc_launch_if_avgpool2): its only reader, an average pool (or a max
// pool pooled as an average) over 2×2 windows with stride 2 and no padding,
// on a channels-last current (in_nhwc), with no observer; else -1.
int fused_pool_of(const grun *r, int i, int in_nhwc)
{
    const gnode &g = r->st->nodes[i];
    if (!r->snn || r->observe || g.consumers != 1 || !in_nhwc)
        return -1;
    int p = g.last_use;
    const nc_node *pn = &r->net->nodes[p];
    int avg = pn->kind == NC_NODE_AVGPOOL || (pn->kind == NC_NODE_MAXPOOL && pn->maxpool_strategy == NC_MAXPOOL_AVG);
    const nc_gwin &w = r->st->nodes[p].win;
    int two_by_two = w.kh == 2 && w.kw == 2 && w.sh == 2 && w.sw == 2 && w.dh == 1 && w.dw == 1 && !w.pt && !w.pl &&
                     !w.pb && !w.pr && w.oh == w.h / 2 && w.ow == w.w / 2 && w.c == g.channels;
    return avg && two_by_two ? p : -1;
}

// IF node i and the average pool p after it in one kernel: p's value is
// made here (channels last), i's is never held.
static nc_status run_if_avgpool(grun *r, int i, int p)
{
    const nc_node *n = &r->net->nodes[i];
    const gnode &g = r->st->nodes[i];
    const nc_gwin &w = r->st->nodes[p].win;
    const gval *in = &r->val[n->inputs[0]];
    gval *out = &r->val[p];
    int64_t rows = (int64_t)r->T * r->N;
    nc_status s = value_alloc(r, p, rows, 0, out);
    if (s != NC_OK)
        return s;
    out->nhwc = 1;
    const nc_neuron *nr = &n->neuron;
    return launch_check(r, "IF + avgpool kernel",
                        nc_launch_if_avgpool2(r->st->stream, r->T, r->N, w.c, w.h, w.w, g.th, g.n_th,
                                              nr->v0_fraction, nr->reset == NC_RESET_ZERO, nr->compare == NC_FIRE_GT,
                                              in->pbias, in->data16 ? nullptr : in->data, in->data16,
                                              in->constant ? 0 : r->N * g.numel, out->data));
}

// IF node i over T steps: the current in fp32 or bf16, the spikes out as θ
// (fp32) or as counts for the conv that reads them: uint8 (the fixed-point
// spike conv), bf16 (bf16 conv), fp32 (exact conv by TF32 parts), or bf16
// counts and pairs (exact conv on bf16 tensor cores).
static nc_status run_if(grun *r, int i, gval *out)
{
    const nc_node *n = &r->net->nodes[i];
    const gnode &g = r->st->nodes[i];
    int from = n->inputs[0];
    gval *in = &r->val[from];
    int64_t step = r->N * g.numel, rows = (int64_t)r->T * r->N;
    int64_t in_step = in->constant ? 0 : step;
    int pool = fused_pool_of(r, i, in->nhwc);
    if (pool >= 0)
        return run_if_avgpool(r, i, pool);
    int counts8 = in->nhwc && reads_counts8(r, i);
    int counts = counts8 ? 0 : counts_for_conv(r, i, in->nhwc);
    nc_status s;
    nc_if_io io = {};
    const float *pb = in->pbias;
    if (counts8) {
        s = value_alloc8(r, i, rows, out);
    } else if (counts == NC_CONV_BF16 || counts == NC_CONV_BF16_EXACT) {
        s = value_alloc16(r, i, rows, 0, 1, counts == NC_CONV_BF16_EXACT, out);
    } else if (counts) {
        s = value_alloc(r, i, rows, 0, out);
        out->counts = 1;
    } else if (in->data16 || in->constant) {
        s = value_alloc(r, i, rows, 0, out); /* a new T·N buffer (a constant current drives T different steps) */
    } else {
        const float *src;
        s = value_like_input(r, i, out, &src, &pb); /* may take over the input's buffer: in place is fine */
        io.in = src;
    }
    if (s != NC_OK)
        return s;
    if (!io.in) {
        io.in = in->data16 ? nullptr : in->data;
        io.in16 = in->data16;
    }
    io.out = counts || counts8 ? nullptr : out->data;
    io.out_counts8 = out->data8;
    io.out_counts = counts == NC_CONV_BF16 || counts == NC_CONV_BF16_EXACT ? out->data16 : nullptr;
    io.out_counts32 = counts == NC_CONV_TF32_EXACT ? out->data : nullptr;
    io.out_pairs = out->pairs ? out->data16 + rows * g.numel : nullptr;
    out->nhwc = in->nhwc;
    channel_view cv = view_of(r, i, out);
    const nc_neuron *nr = &n->neuron;
    return launch_check(r, "IF kernel",
                        nc_launch_if_io(r->st->stream, r->T, step, cv.channels, cv.inner, g.th, g.n_th,
                                        nr->v0_fraction, nr->reset == NC_RESET_ZERO, nr->compare == NC_FIRE_GT, pb,
                                        &io, in_step, step));
}

static nc_status run_neuron(grun *r, int i, gval *out)
{
    const nc_node *n = &r->net->nodes[i];
    const gnode &g = r->st->nodes[i];
    const nc_observer *ob = r->o->observer;
    nc_status s = NC_OK;
    if (out->made) /* by the conv before it, with this IF in its epilogue (nc_gpu_spike_conv_if.cu) */
        return NC_OK;
    if (r->snn && ob && ob->observe_input) {
        gval v;
        float *copy = nullptr;
        if ((s = observed_value(r, n->inputs[0], &v, &copy)) == NC_OK)
            s = deliver(r, &v, i, g.numel, ob->observe_input, ob->user);
        pool_put(r->st, copy);
        if (s != NC_OK)
            return s;
    }
    neuron_op op = op_of(r, n);
    if (op == OP_IF && r->sums && (s = sum_input_steps(r, i)) != NC_OK)
        return s;
    if (op == OP_IF)
        return run_if(r, i, out);
    if ((s = widen(r, n->inputs[0])) != NC_OK)
        return s;
    const gval *in = input_value(r, i, 0);
    const float *src, *pb;
    if ((s = value_like_input(r, i, out, &src, &pb)) != NC_OK)
        return s;
    out->nhwc = in->nhwc; /* element-wise: the layout carries over */
    channel_view cv = view_of(r, i, out);
    cudaStream_t st = r->st->stream;
    const nc_neuron *nr = &n->neuron;
    switch (op) {
    case OP_RELU:
        return launch_check(r, "relu kernel", nc_launch_relu(st, cv.rows, cv.channels, cv.inner, pb, src, out->data));
    case OP_CLIP:
        return launch_check(r, "clip kernel", nc_launch_clip(st, cv.rows, cv.channels, cv.inner, pb, nr->clip_min,
                                                             nr->clip_max, src, out->data));
    case OP_QCFS:
        return launch_check(r, "qcfs kernel", nc_launch_qcfs(st, cv.rows, cv.channels, cv.inner, pb, g.th, g.n_th,
                                                             nr->levels, nr->shift, src, out->data));
    case OP_IF:
        break;
    }
    return NC_OK;
}

nc_status run_node(grun *r, int i, float *d_input, gval *out)
{
    switch (r->net->nodes[i].kind) {
    case NC_NODE_INPUT: return run_input(r, i, d_input, out);
    case NC_NODE_CONV2D: return run_conv(r, i, out);
    case NC_NODE_DENSE: return run_dense(r, i, out);
    case NC_NODE_AVGPOOL:
    case NC_NODE_MAXPOOL:
    case NC_NODE_GLOBAL_AVGPOOL: return run_pool(r, i, out);
    case NC_NODE_FLATTEN:
    case NC_NODE_OUTPUT: return run_copy(r, i, out);
    case NC_NODE_ADD:
    case NC_NODE_CONCAT: return run_merge(r, i, out);
    case NC_NODE_AFFINE: return run_affine(r, i, out);
    case NC_NODE_NEURON: return run_neuron(r, i, out);
    case NC_NODE_SCALE: return run_scale(r, i, out);
    case NC_NODE_RECURRENT: /* refused by gpu_supports */
    case NC_NODE_KIND_COUNT: break;
    }
    return nc_fail(r->err, NC_ERR_UNSUPPORTED, "%s: not supported by the gpu engine", r->where);
}

} // namespace ncg
