// nc_engine_gpu.cu — the GPU engine behind sim/nc_engine.h (see gpu/nc_gpu.h
// for what it does and the precision modes).  It walks the graph like the
// CPU engine (sim/engine_cpu.c): the same values, the same "constant" values
// in SNN mode (computed once with N rows, read with a step stride of 0), the
// same buffer hand-over to single-input element-wise nodes; the kernels are
// in nc_gpu_kernels.cu and the GEMMs go through nc_gpu_blas.cu.
//
// Memory: parameters are uploaded at load (plain cudaMalloc); values and
// work buffers come from a pool of cudaMalloc'd blocks that the next forward
// pass reuses (no cudaMalloc in steady state); after a failed pass every
// pooled block is freed, so a pass that ran out of memory leaves the engine
// as usable as before.
//
// Fine-tuning runs on the GPU trainer (nc_gpu_train.cu), which this engine's
// registry entry names (nc_gpu_register.c).
#include "gpu/nc_gpu_cudnn.h"
#include "gpu/nc_gpu_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <new>
#include <string>
#include <vector>

// ---- fault injection (NC_GPU_FAULT, see nc_gpu.h) -------------------------------

namespace {

struct fault_plan {
    long oom_at = 0, launch_at = 0; // 0 = never
    bool oom_after = false;         // "oom:N+": the N-th allocation and every later one
    long allocs = 0, launches = 0;
    std::string text;               // the NC_GPU_FAULT the counts belong to
};

// The plan of NC_GPU_FAULT ("oom:N", "launch:N" or both, comma-separated);
// counting starts again whenever the variable changes (tests set it per case).
fault_plan &faults()
{
    static fault_plan f;
    const char *env = nc_gpu_options_get().fault;
    std::string text = env ? env : "";
    if (text != f.text) {
        f = fault_plan();
        f.text = text;
        for (size_t at = 0; at < text.size();) {
            size_t end = text.find(',', at);
            std::string item = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
            if (item.compare(0, 4, "oom:") == 0) {
                char *end = nullptr;
                f.oom_at = strtol(item.c_str() + 4, &end, 10);
                f.oom_after = end && *end == '+';
            }
            else if (item.compare(0, 7, "launch:") == 0)
                f.launch_at = strtol(item.c_str() + 7, nullptr, 10);
            at = end == std::string::npos ? text.size() : end + 1;
        }
    }
    return f;
}

} // namespace

cudaError_t nc_gpu_fault_malloc(void **p, size_t bytes)
{
    fault_plan &f = faults();
    ++f.allocs;
    if (f.oom_at > 0 && (f.allocs == f.oom_at || (f.oom_after && f.allocs > f.oom_at))) {
        *p = nullptr;
        return cudaErrorMemoryAllocation;
    }
    return cudaMalloc(p, bytes);
}

cudaError_t nc_gpu_fault_launch(cudaError_t e)
{
    fault_plan &f = faults();
    if (e == cudaSuccess && f.launch_at > 0 && ++f.launches == f.launch_at)
        return cudaErrorLaunchFailure;
    return e;
}

namespace {

// ---- state ---------------------------------------------------------------------

struct gnode {
    nc_gwin win = {};
    int cout = 0, groups = 1;
    float *w = nullptr, *b = nullptr; // conv/dense weight and bias; affine scale and shift
    float *th = nullptr;              // neuron thresholds (qcfs λ, IF θ)
    int n_th = 0;
    int64_t numel = 0;
    int channels = 1;
    int64_t inner = 1;
    int last_use = 0, consumers = 0;
    // SNN: this node's output is spikes of IF node spike_src, value =
    // θ[ch]·q/spike_d with an integer q ≤ spike_d (see nc_gpu.h, bf16)
    int spike = 0, spike_src = -1, spike_c = 1;
    float spike_d = 1.0f;
    int64_t spike_inner = 1;
    // precision caches of a conv/dense node (freed on load and precision change)
    nc_bf16 *wa16 = nullptr;             // bf16 weights, for an analog operand
    nc_bf16 *ws[3] = {nullptr, nullptr, nullptr}; // θ/D-scaled weights in parts hi, mid, lo
    int ws_parts = 0;
    float *opscale = nullptr;            // D/θ per input channel
    // cuDNN path of a conv node (freed with the caches above)
    float *w_krsc = nullptr;             // the weight as [Cout, KH, KW, Cin]
    nc_bf16 *wk16_analog = nullptr;      // its bf16 rounding, for an analog operand
    nc_bf16 *wk16_spike = nullptr;       // θ/D-scaled bf16, for spike counts
    float *k_opscale = nullptr;          // D/θ per input channel, for those counts
    float *wk_parts[3] = {nullptr, nullptr, nullptr}; // exact fp32 mode: θ/D-scaled weight, TF32 hi, mid, lo
    std::vector<nc_conv_plan> plans;     // chosen algorithms, one per (rows, precision)
};

struct block {
    void *ptr;
    size_t bytes;
    int in_use, used_this_run;
};

// How convolutions run (NC_GPU_CONV): auto = cuDNN where it is faster than
// im2col + cuBLAS (tf32, bf16), cudnn = cuDNN in every precision it has,
// im2col = never cuDNN.
enum conv_impl { CONV_AUTO, CONV_CUDNN, CONV_IM2COL };

struct gpu_state {
    cudaStream_t stream = nullptr;
    cublasHandle_t blas = nullptr;
    void *cudnn = nullptr;              // cuDNN handle, NULL without cuDNN
    conv_impl conv = CONV_AUTO;
    cudaEvent_t ev0 = nullptr, ev1 = nullptr;
    nc_gpu_precision prec = NC_GPU_FP32;
    size_t chunk_bytes = 48u << 20;
    const nc_net *net = nullptr;
    std::vector<gnode> nodes;
    std::vector<void *> params;
    std::vector<block> pool;
    float *host = nullptr;
    size_t host_bytes = 0;
    int host_pinned = 0;
};

gpu_state *state_of(const nc_engine *e) { return (gpu_state *)e->impl; }

const char *kind_name(const nc_node *n) { return nc_node_kind_name(n->kind); }

void free_caches(gnode &g)
{
    cudaFree(g.wa16);
    for (int p = 0; p < 3; p++)
        cudaFree(g.ws[p]);
    cudaFree(g.opscale);
    g.wa16 = nullptr;
    g.ws[0] = g.ws[1] = g.ws[2] = nullptr;
    g.ws_parts = 0;
    g.opscale = nullptr;
    cudaFree(g.w_krsc);
    cudaFree(g.wk16_analog);
    cudaFree(g.wk16_spike);
    cudaFree(g.k_opscale);
    for (int p = 0; p < 3; p++) {
        cudaFree(g.wk_parts[p]);
        g.wk_parts[p] = nullptr;
    }
    g.w_krsc = nullptr;
    g.wk16_analog = g.wk16_spike = nullptr;
    g.k_opscale = nullptr;
    for (nc_conv_plan &p : g.plans)
        nc_cudnn_plan_free(&p);
    g.plans.clear();
}

void free_params(gpu_state *st)
{
    for (gnode &g : st->nodes)
        free_caches(g);
    for (void *p : st->params)
        cudaFree(p);
    st->params.clear();
    st->nodes.clear();
    st->net = nullptr;
}

// ---- the pool of device blocks ------------------------------------------------------

void pool_trim(gpu_state *st, int all)
{
    size_t kept = 0;
    for (size_t k = 0; k < st->pool.size(); k++) {
        block b = st->pool[k];
        if (all || (!b.in_use && !b.used_this_run)) {
            cudaFree(b.ptr);
            continue;
        }
        b.used_this_run = 0;
        st->pool[kept++] = b;
    }
    st->pool.resize(kept);
}

// The smallest free block of at least `bytes` (and not 4× larger), or a new
// one; on failure the unused blocks are freed and the allocation retried.
cudaError_t pool_get(gpu_state *st, size_t bytes, void **out)
{
    *out = nullptr;
    bytes = (bytes + 255) & ~(size_t)255;
    if (bytes == 0)
        bytes = 256;
    int best = -1;
    for (size_t k = 0; k < st->pool.size(); k++) {
        const block &b = st->pool[k];
        if (!b.in_use && b.bytes >= bytes && b.bytes / 4 <= bytes &&
            (best < 0 || b.bytes < st->pool[best].bytes))
            best = (int)k;
    }
    if (best < 0) {
        void *p = nullptr;
        cudaError_t e = nc_gpu_fault_malloc(&p, bytes);
        if (e == cudaErrorMemoryAllocation) {
            (void)cudaGetLastError();
            size_t kept = 0; // free what this pass does not hold, then retry
            for (size_t k = 0; k < st->pool.size(); k++) {
                if (!st->pool[k].in_use)
                    cudaFree(st->pool[k].ptr);
                else
                    st->pool[kept++] = st->pool[k];
            }
            st->pool.resize(kept);
            e = nc_gpu_fault_malloc(&p, bytes);
        }
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            return e;
        }
        st->pool.push_back(block{p, bytes, 0, 0});
        best = (int)st->pool.size() - 1;
    }
    st->pool[best].in_use = 1;
    st->pool[best].used_this_run = 1;
    *out = st->pool[best].ptr;
    return cudaSuccess;
}

void pool_put(gpu_state *st, const void *p)
{
    if (!p)
        return;
    for (block &b : st->pool)
        if (b.ptr == p)
            b.in_use = 0;
}

// ---- a forward pass -----------------------------------------------------------------

struct gval {
    float *data;
    int64_t rows;      // N, or T·N for a value that changes with the step
    int constant;      // SNN: one step of N rows that holds at every step
    int owned;         // 1: a pool block; 0: borrowed
    const float *pbias; // a conv/dense bias not yet added (per channel)
    int nhwc;          // channels last: each row is [H·W, C] (a cuDNN conv's output and what follows it)
    // In bf16 the value may be held as bf16 instead of in data (always owned,
    // always channels last): a conv's currents that only an IF reads, or an
    // IF's spikes as counts (counts = 1) that only a bf16 conv reads.
    nc_bf16 *data16;
    int counts;
};

struct grun {
    nc_engine *e;
    gpu_state *st;
    const nc_net *net;
    const nc_run_options *o;
    int snn, T;
    int64_t N;
    nc_error *err;
    std::vector<gval> val;
    int seq;          // the input is a sequence [T, N, ...] (SNN mode)
    int observe;      // an observer is set
    std::vector<void *> scratch; // work blocks of the current node
    cudaEvent_t *prof;           // NC_GPU_PROFILE: an event after each node (n_nodes + 1), or NULL
    char where[NC_NAME_MAX + 96];
};

void set_where(grun *r, int i)
{
    const nc_node *n = &r->net->nodes[i];
    snprintf(r->where, sizeof r->where, "gpu engine, node '%s' (%s)", n->name, kind_name(n));
}

int64_t numel_of(const grun *r, int i) { return r->st->nodes[i].numel; }

nc_status launch_check(grun *r, const char *what, cudaError_t e)
{
    e = nc_gpu_fault_launch(e);
    return e == cudaSuccess ? NC_OK : nc_gpu_fail_cuda(r->err, r->where, what, e);
}

std::string human_bytes(double b)
{
    char buf[64];
    const char *unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024 && u < 4) {
        b /= 1024;
        u++;
    }
    snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", b, unit[u]);
    return buf;
}

nc_status oom(grun *r, size_t bytes, int64_t rows, int64_t per_row, const char *what, cudaError_t e)
{
    size_t fr = 0, total = 0;
    cudaMemGetInfo(&fr, &total);
    (void)cudaGetLastError();
    return nc_fail(r->err, e == cudaErrorMemoryAllocation ? NC_ERR_MEMORY : NC_ERR_DEVICE,
                   "%s: out of device memory for %s (%s of %lld rows x %lld values; %s free of %s): cudaMalloc: "
                   "%s; use a smaller batch or fewer steps",
                   r->where, human_bytes((double)bytes).c_str(), what, (long long)rows, (long long)per_row,
                   human_bytes((double)fr).c_str(), human_bytes((double)total).c_str(), cudaGetErrorString(e));
}

nc_status alloc_floats(grun *r, int64_t rows, int64_t per_row, size_t elt, const char *what, void **out)
{
    size_t n, bytes;
    if (rows < 0 || per_row < 0 || nc_mul_size((size_t)rows, (size_t)per_row, &n) || nc_mul_size(n, elt, &bytes))
        return nc_fail(r->err, NC_ERR_MEMORY, "%s: the %s size overflows (%lld rows x %lld values); use a smaller batch",
                       r->where, what, (long long)rows, (long long)per_row);
    cudaError_t e = pool_get(r->st, bytes, out);
    return e == cudaSuccess ? NC_OK : oom(r, bytes, rows, per_row, what, e);
}

// A work buffer for the current node, returned to the pool after it.
nc_status scratch(grun *r, int64_t rows, int64_t per_row, size_t elt, const char *what, void **out)
{
    nc_status s = alloc_floats(r, rows, per_row, elt, what, out);
    if (s == NC_OK)
        r->scratch.push_back(*out);
    return s;
}

nc_status value_alloc(grun *r, int i, int64_t rows, int constant, gval *v)
{
    void *p = nullptr;
    nc_status s = alloc_floats(r, rows, numel_of(r, i), sizeof(float), "output", &p);
    if (s != NC_OK)
        return s;
    *v = gval{(float *)p, rows, constant, 1, nullptr};
    return NC_OK;
}

void value_free(grun *r, gval *v)
{
    if (v->owned && v->data)
        pool_put(r->st, v->data);
    pool_put(r->st, v->data16);
    *v = gval{nullptr, 0, 0, 0, nullptr};
}

// A value of node i held as bf16 (data16), `rows` rows, channels last.
nc_status value_alloc16(grun *r, int i, int64_t rows, int constant, int counts, gval *v)
{
    void *p = nullptr;
    nc_status s = alloc_floats(r, rows, numel_of(r, i), sizeof(nc_bf16), "bf16 output", &p);
    if (s != NC_OK)
        return s;
    *v = gval{nullptr, rows, constant, 1, nullptr};
    v->nhwc = 1;
    v->data16 = (nc_bf16 *)p;
    v->counts = counts;
    return NC_OK;
}

// The fp32 value of a value held as bf16 currents.  Spike counts are made
// only for the one conv that reads them (counts_for_conv), never widened.
nc_status widen(grun *r, int i)
{
    gval *v = &r->val[i];
    if (!v->data16 && !v->counts)
        return NC_OK;
    if (v->counts)
        return nc_fail(r->err, NC_ERR_DEVICE, "%s: spike counts of node '%s' read by another node than their conv",
                       r->where, r->net->nodes[i].name);
    void *p = nullptr;
    nc_status s = alloc_floats(r, v->rows, numel_of(r, i), sizeof(float), "output", &p);
    if (s == NC_OK)
        s = launch_check(r, "bf16_to_f32 kernel",
                         nc_launch_bf16_to_f32(r->st->stream, v->rows * numel_of(r, i), v->data16, (float *)p));
    if (s != NC_OK) {
        pool_put(r->st, p);
        return s;
    }
    pool_put(r->st, v->data16);
    v->data16 = nullptr;
    v->data = (float *)p;
    return NC_OK;
}

// Per-channel kernels see a value as rows of [channels, inner]: a
// channels-last value is rows·inner rows of [channels, 1].
struct channel_view {
    int64_t rows;
    int channels;
    int64_t inner;
};

channel_view view_of(const grun *r, int i, const gval *v)
{
    const gnode &g = r->st->nodes[i];
    if (v->nhwc)
        return {v->rows * g.inner, g.channels, 1};
    return {v->rows, g.channels, g.inner};
}

// Adds a pending bias into the value (in place), in its layout.
nc_status add_pending_bias(grun *r, int i)
{
    gval *v = &r->val[i];
    if (!v->pbias)
        return NC_OK;
    nc_status ws = widen(r, i);
    if (ws != NC_OK)
        return ws;
    channel_view cv = view_of(r, i, v);
    nc_status s = launch_check(r, "add_bias kernel", nc_launch_add_bias(r->st->stream, cv.rows, cv.channels, cv.inner,
                                                                         v->pbias, v->data, v->data));
    v->pbias = nullptr;
    return s;
}

// Puts value i in the layout asked for (nhwc 1: channels last), through a
// new block; a pending bias stays pending (it is per channel either way).
nc_status to_layout(grun *r, int i, int nhwc)
{
    gval *v = &r->val[i];
    if (v->nhwc == nhwc)
        return NC_OK;
    nc_status ws = widen(r, i);
    if (ws != NC_OK || !v->data)
        return ws;
    const gnode &g = r->st->nodes[i];
    void *p = nullptr;
    nc_status s = alloc_floats(r, v->rows, g.numel, sizeof(float), "channels-last copy", &p);
    if (s != NC_OK)
        return s;
    int64_t a = nhwc ? g.channels : g.inner, b = nhwc ? g.inner : g.channels;
    s = launch_check(r, "transpose kernel",
                     nc_launch_transpose_rows(r->st->stream, v->rows, a, b, v->data, (float *)p));
    if (s != NC_OK) {
        pool_put(r->st, p);
        return s;
    }
    if (v->owned)
        pool_put(r->st, v->data);
    v->data = (float *)p;
    v->owned = 1;
    v->nhwc = nhwc;
    return NC_OK;
}

// The plain value: fp32, the standard layout, and its pending bias added.
nc_status materialize(grun *r, int i)
{
    nc_status s = widen(r, i);
    if (s == NC_OK)
        s = to_layout(r, i, 0);
    return s == NC_OK ? add_pending_bias(r, i) : s;
}

const gval *input_value(const grun *r, int i, int k) { return &r->val[r->net->nodes[i].inputs[k]]; }

// Output of single-input node i with its input's rows: takes over the input's
// buffer (and its pending bias) when i is its last reader, else allocates.
nc_status value_like_input(grun *r, int i, gval *out, const float **src, const float **pbias)
{
    int from = r->net->nodes[i].inputs[0];
    gval *in = &r->val[from];
    *src = in->data;
    *pbias = in->pbias;
    if (in->owned && r->st->nodes[from].last_use == i && numel_of(r, from) == numel_of(r, i)) {
        *out = *in;
        out->pbias = nullptr;
        in->data = nullptr;
        in->owned = 0;
        in->pbias = nullptr;
        return NC_OK;
    }
    nc_status s = value_alloc(r, i, in->rows, in->constant, out);
    out->nhwc = in->nhwc;
    return s;
}

// A conv/dense bias is left for the only reader when that reader adds it for
// free (a neuron, or a plain max pool) and no observer wants the value.
int bias_fusable(const grun *r, int i)
{
    const nc_node *n = &r->net->nodes[i];
    if (!n->bias || r->observe || r->st->nodes[i].consumers != 1)
        return 0;
    int j = r->st->nodes[i].last_use;
    const nc_node *c = &r->net->nodes[j];
    if (c->kind == NC_NODE_NEURON)
        return 1;
    if (c->kind == NC_NODE_MAXPOOL) /* in SNN mode every strategy needs the plain values */
        return !r->snn;
    return 0;
}

// ---- precision -------------------------------------------------------------------------

struct gemm_mode {
    nc_gemm_kind kind;
    int parts;  // bf16 parts of the weights
    int spike;  // the operand is fed as spike counts with θ/D in the weights
};

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
int spike_operand(const grun *r, int i, const gval *in)
{
    if (!r->snn || in->constant)
        return 0;
    if (r->st->prec != NC_GPU_BF16 && r->st->prec != NC_GPU_SPLIT_BF16 && r->st->prec != NC_GPU_SPLIT_BF16X2)
        return 0;
    return r->st->nodes[r->net->nodes[i].inputs[0]].spike;
}

nc_status cuda_alloc(grun *r, size_t bytes, void **p, const char *what)
{
    cudaError_t e = nc_gpu_fault_malloc(p, bytes ? bytes : 1);
    if (e != cudaSuccess)
        return oom(r, bytes, 1, (int64_t)bytes, what, e);
    return NC_OK;
}

// The weights of conv/dense node i ([rows, k]) in the form `m` needs:
// fp32 as loaded, bf16, or θ/D-scaled bf16 parts.  Built on first use.
nc_status weights_for(grun *r, int i, const gemm_mode &m, const void *parts[3])
{
    gnode &g = r->st->nodes[i];
    const nc_node *n = &r->net->nodes[i];
    int64_t rows = n->weight->shape[0], k = nc_tensor_numel(n->weight) / rows;
    cudaStream_t s = r->st->stream;
    if (m.kind != NC_GEMM_BF16) {
        parts[0] = parts[1] = parts[2] = g.w;
        return NC_OK;
    }
    if (!m.spike) {
        if (!g.wa16) {
            nc_status st = cuda_alloc(r, (size_t)(rows * k) * sizeof(nc_bf16), (void **)&g.wa16, "bf16 weights");
            if (st != NC_OK)
                return st;
            nc_bf16 *outp[1] = {g.wa16};
            st = launch_check(r, "weight_parts kernel", nc_launch_weight_parts(s, rows, k, g.w, nullptr, 1, 1, 1, 1, outp));
            if (st != NC_OK)
                return st;
        }
        parts[0] = parts[1] = parts[2] = g.wa16;
        return NC_OK;
    }
    // spike operand: the input node's descriptor says which θ and D
    const gnode &src = r->st->nodes[n->inputs[0]];
    const gnode &neuron = r->st->nodes[src.spike_src];
    if (g.ws_parts != m.parts) {
        for (int p = 0; p < 3; p++)
            cudaFree(g.ws[p]);
        cudaFree(g.opscale);
        g.ws[0] = g.ws[1] = g.ws[2] = nullptr;
        g.opscale = nullptr;
        g.ws_parts = 0;
        nc_status st = NC_OK;
        for (int p = 0; p < m.parts && st == NC_OK; p++)
            st = cuda_alloc(r, (size_t)(rows * k) * sizeof(nc_bf16), (void **)&g.ws[p], "bf16 weight parts");
        if (st == NC_OK)
            st = cuda_alloc(r, (size_t)src.spike_c * sizeof(float), (void **)&g.opscale, "spike scales");
        float *mul = nullptr;
        if (st == NC_OK)
            st = scratch(r, 1, src.spike_c, sizeof(float), "spike scales", (void **)&mul);
        if (st == NC_OK)
            st = launch_check(r, "scale kernel",
                              nc_launch_inv_scale(s, src.spike_c, neuron.th, neuron.n_th, src.spike_d, g.opscale));
        if (st == NC_OK)
            st = launch_check(r, "scale kernel", nc_launch_scale(s, src.spike_c, neuron.th, neuron.n_th, src.spike_d, mul));
        if (st == NC_OK) {
            // channel of weight column j: conv (o / Mg)·Cg + (j / KH·KW) % Cg;
            // dense (j / spike_inner) % C
            int rpg, cpg;
            int64_t kin;
            if (n->kind == NC_NODE_CONV2D) {
                rpg = g.cout / g.groups;
                cpg = g.win.c / g.groups;
                kin = (int64_t)g.win.kh * g.win.kw;
            } else {
                rpg = (int)rows;
                cpg = src.spike_c;
                kin = src.spike_inner;
            }
            st = launch_check(r, "weight_parts kernel",
                              nc_launch_weight_parts(s, rows, k, g.w, mul, rpg, cpg, kin, m.parts, g.ws));
        }
        if (st != NC_OK)
            return st;
        g.ws_parts = m.parts;
    }
    // accumulate the smallest part first
    for (int p = 0; p < m.parts; p++)
        parts[p] = g.ws[m.parts - 1 - p];
    return NC_OK;
}

// ---- node kernels ------------------------------------------------------------------------

nc_status run_input(grun *r, int i, float *d_input, gval *out)
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

// ---- convolutions through cuDNN ----------------------------------------------------------

// Can conv node i read its input value `in` as spike counts (an IF's spikes,
// maybe average-pooled: x = q·θ/D with an integer q), θ/D going into its
// weights per input channel?
int counts_input(const grun *r, int i, const gval *in)
{
    if (in->counts)
        return 1;
    const gnode &sg = r->st->nodes[r->net->nodes[i].inputs[0]];
    return r->snn && !in->constant && sg.spike && sg.spike_c == r->st->nodes[i].win.c;
}

// How conv node i runs in this pass, given whether its input can be read as
// spike counts and whether it is constant over the steps: a cuDNN arithmetic
// (nc_conv_math), or -1 for im2col + cuBLAS.  In fp32, spike counts go to
// the exact tensor-core mode; an analog input of N rows (the first layer of
// a direct-encoded net) to cuDNN's fp32 FMA kernels, so that the values stay
// channels last; an analog input of T·N rows (after an add) to cuBLAS sgemm,
// which is faster than those kernels.  The split modes keep im2col (cuDNN's
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
    case NC_GPU_BF16: return NC_CONV_BF16;
    case NC_GPU_FP32:
        if (spike_in)
            return NC_CONV_TF32_EXACT;
        return constant_in || st->conv == CONV_CUDNN ? NC_CONV_FP32 : -1;
    default: return -1;
    }
}

// D/θ per input channel of conv node i (k_opscale: spikes to counts) and,
// in `mul` (scratch), θ/D (into the weights).  Built on first use.
nc_status spike_scales(grun *r, int i, float **mul)
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

// The weight of conv node i as cuDNN reads it ([Cout, KH, KW, Cin]) in
// arithmetic m: fp32; bf16 (rounded, or for spike counts scaled by θ/D
// first); or, exact mode, the θ/D-scaled weight in three TF32 parts.
// parts[0..n) in the order they are added (the smallest first).  Built on
// first use.
nc_status cudnn_weights(grun *r, int i, nc_conv_math m, int spike, const void *parts[3], int *n)
{
    gnode &g = r->st->nodes[i];
    cudaStream_t st = r->st->stream;
    int64_t khw = (int64_t)g.win.kh * g.win.kw, k = khw * g.win.c;
    nc_status s = NC_OK;
    *n = 1;
    if (!g.w_krsc) {
        if ((s = cuda_alloc(r, (size_t)(g.cout * k) * sizeof(float), (void **)&g.w_krsc, "channels-last weights")) != NC_OK)
            return s;
        if ((s = launch_check(r, "transpose kernel",
                              nc_launch_transpose_rows(st, g.cout, g.win.c, khw, g.w, g.w_krsc))) != NC_OK)
            return s;
    }
    if (m == NC_CONV_FP32 || m == NC_CONV_TF32) {
        parts[0] = g.w_krsc;
        return NC_OK;
    }
    float *mul = nullptr;
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

// The plan of conv node i for `rows` rows in precision m: chosen at the
// first pass of that shape (cuDNN times its algorithms on these buffers).
nc_status cudnn_plan_for(grun *r, int i, nc_conv_math m, int64_t rows, const void *x, const void *w, void *y,
                         const nc_conv_plan **out)
{
    gnode &g = r->st->nodes[i];
    for (const nc_conv_plan &p : g.plans)
        if (p.shape.rows == rows && p.math == m) {
            *out = &p;
            return NC_OK;
        }
    const nc_gwin &wn = g.win;
    nc_conv_shape shape = {rows, wn.c, wn.h, wn.w, g.cout, wn.oh, wn.ow, wn.kh, wn.kw, wn.sh, wn.sw, wn.dh, wn.dw,
                           wn.pt, wn.pl};
    // room for the algorithms to try: up to 256 MiB, less when memory is short
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    size_t ws_bytes = std::min<size_t>(256u << 20, free_bytes / 8);
    void *ws = nullptr;
    nc_status s = scratch(r, 1, (int64_t)ws_bytes, 1, "cuDNN workspace", &ws);
    if (s != NC_OK)
        return s;
    nc_conv_plan plan;
    if ((s = nc_cudnn_plan(r->st->cudnn, &shape, m, x, w, y, ws, ws_bytes, &plan, r->where, r->err)) != NC_OK)
        return s;
    g.plans.push_back(plan);
    *out = &g.plans.back();
    return NC_OK;
}

// Is node i's value read only by an IF neuron of this SNN pass (which can
// take bf16 currents, and adds a pending bias itself)?
int only_an_if_reads(const grun *r, int i)
{
    const gnode &g = r->st->nodes[i];
    if (!r->snn || r->observe || g.consumers != 1)
        return 0;
    const nc_node *c = &r->net->nodes[g.last_use];
    return c->kind == NC_NODE_NEURON && c->neuron.model == NC_NEURON_IF;
}

// Conv node i through cuDNN: channels-last input and output (T folded into
// the rows).  In bf16 the operand is converted first (spikes to their integer
// counts), unless an IF wrote it as counts already; the bf16 output goes to
// fp32, unless only an IF reads it (which widens it as it integrates).
// The operand of conv node i in arithmetic m: the input's own values, or its
// counts (as written by an IF, or converted here) in bf16 or fp32.
nc_status cudnn_operand(grun *r, int i, nc_conv_math m, int spike, const void **x)
{
    const gnode &g = r->st->nodes[i];
    const nc_gwin &w = g.win;
    gval *in = &r->val[r->net->nodes[i].inputs[0]];
    int64_t R = in->rows, in_numel = (int64_t)w.c * w.h * w.w;
    *x = in->counts && in->data16 ? (const void *)in->data16 : (const void *)in->data;
    if (in->counts || m == NC_CONV_FP32 || m == NC_CONV_TF32)
        return NC_OK;
    nc_status s = spike ? spike_scales(r, i, nullptr) : NC_OK;
    void *buf = nullptr;
    size_t elt = m == NC_CONV_BF16 ? sizeof(nc_bf16) : sizeof(float);
    if (s == NC_OK)
        s = scratch(r, R, in_numel, elt, m == NC_CONV_BF16 ? "bf16 operand" : "spike counts", &buf);
    if (s != NC_OK)
        return s;
    const float *scale = spike ? g.k_opscale : nullptr;
    cudaError_t e = m == NC_CONV_BF16
                        ? nc_launch_to_bf16(r->st->stream, R * w.h * w.w, w.c, in->data, scale, w.c, 1, (nc_bf16 *)buf)
                        : nc_launch_to_counts_f32(r->st->stream, R * w.h * w.w, w.c, in->data, scale, w.c, 1,
                                                  (float *)buf);
    *x = buf;
    return launch_check(r, "operand kernel", e);
}

// Conv node i through cuDNN: channels-last input and output (T folded into
// the rows).  In bf16 and in the exact fp32 mode the operand is spike counts
// (written so by the IF before, or converted here); a bf16 output goes to
// fp32 unless only an IF reads it (which widens it as it integrates).
nc_status run_conv_cudnn(grun *r, int i, nc_conv_math m, gval *out)
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
    int spike = (m == NC_CONV_BF16 || m == NC_CONV_TF32_EXACT) && counts_input(r, i, in);
    int keep16 = m == NC_CONV_BF16 && only_an_if_reads(r, i);
    s = keep16 ? value_alloc16(r, i, R, in->constant, 0, out) : value_alloc(r, i, R, in->constant, out);
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
    if ((s = cudnn_plan_for(r, i, m, R, x, wp[0], y, &plan)) != NC_OK)
        return s;
    void *ws = nullptr;
    if (plan->workspace && (s = scratch(r, 1, (int64_t)plan->workspace, 1, "cuDNN workspace", &ws)) != NC_OK)
        return s;
    for (int p = 0; p < n_parts && s == NC_OK; p++) /* the parts' sums added into y, the smallest first */
        s = nc_cudnn_conv(r->st->cudnn, plan, x, wp[p], y, ws, p ? 1.0f : 0.0f, r->where, r->err);
    if (s == NC_OK && m == NC_CONV_BF16 && !keep16)
        s = launch_check(r, "bf16_to_f32 kernel",
                         nc_launch_bf16_to_f32(st, R * g.cout * P, (const nc_bf16 *)y, out->data));
    if (s == NC_OK && n->bias) {
        if (bias_fusable(r, i))
            out->pbias = g.b;
        else
            s = launch_check(r, "add_bias kernel", nc_launch_add_bias(st, R * P, g.cout, 1, g.b, out->data, out->data));
    }
    return s;
}

nc_status run_conv(grun *r, int i, gval *out)
{
    const gval *cin = input_value(r, i, 0);
    int m = conv_math(r, i, counts_input(r, i, cin), cin->constant);
    if (m >= 0)
        return run_conv_cudnn(r, i, (nc_conv_math)m, out);
    const nc_node *n = &r->net->nodes[i];
    gnode &g = r->st->nodes[i];
    nc_status s = materialize(r, n->inputs[0]);
    if (s != NC_OK)
        return s;
    const gval *in = input_value(r, i, 0);
    if ((s = value_alloc(r, i, in->rows, in->constant, out)) != NC_OK)
        return s;
    const nc_gwin &w = g.win;
    int groups = g.groups, cout = g.cout, cg = w.c / groups, mg = cout / groups;
    int64_t P = (int64_t)w.oh * w.ow, kg = (int64_t)cg * w.kh * w.kw, R = in->rows;
    int64_t in_row = (int64_t)w.c * w.h * w.w, out_row = (int64_t)cout * P;
    cudaStream_t st = r->st->stream;
    if (groups > 1 && mg < 4) {
        s = launch_check(r, "conv_direct kernel", nc_launch_conv_direct(st, &w, cout, groups, R, in->data, g.w, out->data));
    } else {
        gemm_mode m = mode_for(r->st->prec, spike_operand(r, i, in));
        const void *wp[3];
        if ((s = weights_for(r, i, m, wp)) != NC_OK)
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
    if (s == NC_OK && n->bias) {
        if (bias_fusable(r, i))
            out->pbias = g.b;
        else
            s = launch_check(r, "add_bias kernel", nc_launch_add_bias(st, R, cout, P, g.b, out->data, out->data));
    }
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

nc_status run_dense(grun *r, int i, gval *out)
{
    const nc_node *n = &r->net->nodes[i];
    gnode &g = r->st->nodes[i];
    nc_status s = materialize(r, n->inputs[0]);
    if (s != NC_OK)
        return s;
    const gval *in = input_value(r, i, 0);
    if ((s = value_alloc(r, i, in->rows, in->constant, out)) != NC_OK)
        return s;
    int fout = (int)n->weight->shape[0], fin = (int)n->weight->shape[1];
    int64_t R = in->rows;
    gemm_mode m = mode_for(r->st->prec, spike_operand(r, i, in));
    const void *wp[3];
    if ((s = weights_for(r, i, m, wp)) != NC_OK)
        return s;
    const void *op = in->data;
    if (m.kind == NC_GEMM_BF16) {
        void *conv = nullptr;
        if ((s = scratch(r, R, fin, sizeof(nc_bf16), "bf16 operand", &conv)) != NC_OK)
            return s;
        const gnode &src = r->st->nodes[n->inputs[0]];
        cudaError_t e = nc_launch_to_bf16(r->st->stream, R, fin, in->data, m.spike ? g.opscale : nullptr,
                                          src.spike_c, src.spike_inner, (nc_bf16 *)conv);
        if ((s = launch_check(r, "to_bf16 kernel", e)) != NC_OK)
            return s;
        op = conv;
    }
    s = dense_gemm(r->st->blas, m, R, fin, fout, op, wp, out->data, r->where, r->err);
    if (s == NC_OK && n->bias) {
        if (bias_fusable(r, i))
            out->pbias = g.b;
        else
            s = launch_check(r, "add_bias kernel",
                             nc_launch_add_bias(r->st->stream, R, fout, 1, g.b, out->data, out->data));
    }
    return s;
}

nc_status run_gated(grun *r, int i, gval *out)
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
// mean over T is exactly the max of the mean currents.
nc_status run_prespike_max(grun *r, int i, const gval *in, gval *out)
{
    const gnode &g = r->st->nodes[i];
    cudaStream_t st = r->st->stream;
    int64_t in_step = r->N * numel_of(r, r->net->nodes[i].inputs[0]), out_step = r->N * numel_of(r, i);
    float *sums = nullptr;
    size_t bytes = (size_t)(r->T * in_step) * sizeof(float);
    nc_status s = launch_check(r, "cudaMallocAsync (running sums)", cudaMallocAsync((void **)&sums, bytes, st));
    if (s != NC_OK)
        return s;
    s = launch_check(r, "copy of the pool input",
                     cudaMemcpyAsync(sums, in->data, bytes, cudaMemcpyDeviceToDevice, st));
    if (s == NC_OK)
        s = launch_check(r, "running-sum kernel", nc_launch_cumsum_steps(st, r->T, in_step, sums));
    if (s == NC_OK)
        s = launch_check(r, "maxpool kernel", nc_launch_maxpool(st, &g.win, in->rows, nullptr, sums, out->data));
    if (s == NC_OK)
        s = launch_check(r, "step-difference kernel", nc_launch_diff_steps(st, r->T, out_step, out->data));
    cudaFreeAsync(sums, st);
    return s;
}

nc_status run_pool(grun *r, int i, gval *out)
{
    const nc_node *n = &r->net->nodes[i];
    const gnode &g = r->st->nodes[i];
    int gated = n->kind == NC_NODE_MAXPOOL && r->snn && n->maxpool_strategy == NC_MAXPOOL_GATED;
    int as_avg = n->kind == NC_NODE_AVGPOOL || (n->kind == NC_NODE_MAXPOOL && r->snn && n->maxpool_strategy == NC_MAXPOOL_AVG);
    int as_max = n->kind == NC_NODE_MAXPOOL && !gated && !as_avg;
    const gval *in = input_value(r, i, 0);
    cudaStream_t st = r->st->stream;
    nc_status s;
    if (as_avg && in->nhwc) { /* stays channels last, for the next cuDNN conv */
        if ((s = widen(r, n->inputs[0])) != NC_OK || (s = add_pending_bias(r, n->inputs[0])) != NC_OK ||
            (s = value_alloc(r, i, in->rows, in->constant, out)) != NC_OK)
            return s;
        out->nhwc = 1;
        return launch_check(r, "avgpool kernel",
                            nc_launch_avgpool_nhwc(st, &g.win, n->count_include_pad, in->rows, in->data, out->data));
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

nc_status run_copy(grun *r, int i, gval *out)
{
    nc_status s = materialize(r, r->net->nodes[i].inputs[0]);
    const float *src, *pb;
    if (s == NC_OK)
        s = value_like_input(r, i, out, &src, &pb);
    if (s == NC_OK && out->data != src)
        s = launch_check(r, "cudaMemcpyAsync",
                         cudaMemcpyAsync(out->data, src, (size_t)(out->rows * numel_of(r, i)) * sizeof(float),
                                         cudaMemcpyDeviceToDevice, r->st->stream));
    return s;
}

nc_status run_affine(grun *r, int i, gval *out)
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
nc_status run_scale(grun *r, int i, gval *out)
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

nc_status run_merge(grun *r, int i, gval *out)
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

// ---- observers -----------------------------------------------------------------------------

nc_status host_buffer(grun *r, size_t bytes, float **out)
{
    gpu_state *st = r->st;
    if (st->host_bytes < bytes) {
        if (st->host_pinned)
            cudaFreeHost(st->host);
        else
            free(st->host);
        st->host = nullptr;
        st->host_bytes = 0;
        st->host_pinned = cudaMallocHost((void **)&st->host, bytes) == cudaSuccess;
        if (!st->host_pinned) {
            (void)cudaGetLastError();
            st->host = (float *)malloc(bytes);
        }
        if (!st->host)
            return nc_fail(r->err, NC_ERR_MEMORY, "%s: out of host memory for %zu bytes of observed values", r->where,
                           bytes);
        st->host_bytes = bytes;
    }
    *out = st->host;
    return NC_OK;
}

// Hands value v of node `node` (per_row floats a row) to fn: N rows in
// ANN/QCFS mode; in SNN mode T·N rows delivered in chunks of whole steps
// (a constant value once per step), each copied to the host just before.
nc_status deliver(grun *r, const gval *v, int node, int64_t per_row,
                  void (*fn)(void *, int, const float *, int64_t, int64_t), void *user)
{
    const int64_t budget = 64ll << 20;
    int64_t step_floats = r->N * per_row;
    int steps = r->snn ? r->T : 1;
    int64_t k = v->constant || !r->snn ? 1 : std::max<int64_t>(1, budget / std::max<int64_t>(1, step_floats * 4));
    k = std::min<int64_t>(k, steps);
    float *h = nullptr;
    nc_status s = host_buffer(r, (size_t)(k * step_floats) * sizeof(float), &h);
    if (s != NC_OK)
        return s;
    cudaStream_t st = r->st->stream;
    if (v->constant || !r->snn) {
        NC_CUDA_TRY(r->err, r->where, cudaMemcpyAsync(h, v->data, (size_t)step_floats * sizeof(float),
                                                      cudaMemcpyDeviceToHost, st));
        NC_CUDA_TRY(r->err, r->where, cudaStreamSynchronize(st));
        for (int t = 0; t < steps; t++)
            fn(user, node, h, r->N, per_row);
        return NC_OK;
    }
    for (int64_t t0 = 0; t0 < steps; t0 += k) {
        int64_t cnt = std::min<int64_t>(k, steps - t0);
        NC_CUDA_TRY(r->err, r->where, cudaMemcpyAsync(h, v->data + t0 * step_floats, (size_t)(cnt * step_floats) * sizeof(float),
                                                      cudaMemcpyDeviceToHost, st));
        NC_CUDA_TRY(r->err, r->where, cudaStreamSynchronize(st));
        fn(user, node, h, cnt * r->N, per_row);
    }
    return NC_OK;
}

// ---- neurons -------------------------------------------------------------------------------

enum neuron_op { OP_RELU, OP_CLIP, OP_QCFS, OP_IF };

neuron_op op_of(const grun *r, const nc_node *n)
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
    return m == NC_CONV_BF16 || m == NC_CONV_TF32_EXACT ? m : 0;
}

// IF node i over T steps: the current in fp32 or bf16, the spikes out as θ
// (fp32) or as counts for a bf16 conv.
nc_status run_if(grun *r, int i, gval *out)
{
    const nc_node *n = &r->net->nodes[i];
    const gnode &g = r->st->nodes[i];
    int from = n->inputs[0];
    gval *in = &r->val[from];
    int64_t step = r->N * g.numel, rows = (int64_t)r->T * r->N;
    int64_t in_step = in->constant ? 0 : step;
    int counts = counts_for_conv(r, i, in->nhwc);
    nc_status s;
    nc_if_io io = {};
    const float *pb = in->pbias;
    if (counts == NC_CONV_BF16) {
        s = value_alloc16(r, i, rows, 0, 1, out);
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
    io.out = counts ? nullptr : out->data;
    io.out_counts = counts == NC_CONV_BF16 ? out->data16 : nullptr;
    io.out_counts32 = counts == NC_CONV_TF32_EXACT ? out->data : nullptr;
    out->nhwc = in->nhwc;
    channel_view cv = view_of(r, i, out);
    const nc_neuron *nr = &n->neuron;
    return launch_check(r, "IF kernel",
                        nc_launch_if_io(r->st->stream, r->T, step, cv.channels, cv.inner, g.th, g.n_th,
                                        nr->v0_fraction, nr->reset == NC_RESET_ZERO, nr->compare == NC_FIRE_GT, pb,
                                        &io, in_step, step));
}

nc_status run_neuron(grun *r, int i, gval *out)
{
    const nc_node *n = &r->net->nodes[i];
    const gnode &g = r->st->nodes[i];
    const nc_observer *ob = r->o->observer;
    nc_status s = NC_OK;
    if (r->snn && ob && ob->observe_input) {
        if ((s = materialize(r, n->inputs[0])) != NC_OK)
            return s;
        if ((s = deliver(r, input_value(r, i, 0), i, g.numel, ob->observe_input, ob->user)) != NC_OK)
            return s;
    }
    neuron_op op = op_of(r, n);
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

void release_after(grun *r, int i)
{
    const nc_node *n = &r->net->nodes[i];
    for (int k = 0; k < n->n_inputs; k++)
        if (r->st->nodes[n->inputs[k]].last_use == i)
            value_free(r, &r->val[n->inputs[k]]);
    if (r->st->nodes[i].last_use == i && i != r->net->output)
        value_free(r, &r->val[i]);
}

nc_status observe_and_report(grun *r, int i)
{
    const nc_observer *ob = r->o->observer;
    nc_status s = NC_OK;
    if (ob && ob->observe) {
        if ((s = materialize(r, i)) != NC_OK)
            return s;
        if ((s = deliver(r, &r->val[i], i, numel_of(r, i), ob->observe, ob->user)) != NC_OK)
            return s;
    }
    if (r->o->progress) {
        nc_progress p = {"simulate", i + 1, r->net->n_nodes, 0.0};
        if (r->o->progress(r->o->progress_user, &p) != 0)
            return nc_fail(r->err, NC_ERR_CANCELLED, "gpu engine: cancelled after node '%s'", r->net->nodes[i].name);
    }
    return NC_OK;
}

// Runs every node on the device; the output node's value stays in r->val.
nc_status run_nodes(grun *r, float *d_input)
{
    nc_status s = NC_OK;
    if (r->prof)
        cudaEventRecord(r->prof[0], r->st->stream);
    for (int i = 0; i < r->net->n_nodes && s == NC_OK; i++) {
        set_where(r, i);
        s = run_node(r, i, d_input, &r->val[i]);
        for (void *p : r->scratch)
            pool_put(r->st, p);
        r->scratch.clear();
        if (r->prof)
            cudaEventRecord(r->prof[i + 1], r->st->stream);
        if (s == NC_OK)
            s = observe_and_report(r, i);
        if (s == NC_OK)
            release_after(r, i);
    }
    if (s == NC_OK) {
        set_where(r, r->net->output);
        s = materialize(r, r->net->output);
    }
    return s;
}

// After a pass: values back to the pool; on failure every pooled block is
// freed (and the stream drained first), so the engine is as before.
nc_status finish_run(grun *r, nc_status s)
{
    for (gval &v : r->val)
        value_free(r, &v);
    if (s != NC_OK) {
        (void)cudaStreamSynchronize(r->st->stream);
        (void)cudaGetLastError();
        pool_trim(r->st, 1);
        // a sticky error (the context is lost) cannot be undone: say so
        cudaError_t e = cudaDeviceSynchronize();
        if (e != cudaSuccess && r->err && strlen(r->err->message) + 120 < sizeof r->err->message) {
            size_t len = strlen(r->err->message);
            snprintf(r->err->message + len, sizeof r->err->message - len,
                     " (the CUDA context is now unusable: %s; restart the program)", cudaGetErrorName(e));
        }
    } else
        pool_trim(r->st, 0);
    return s;
}

nc_status check_options(const nc_run_options *o, nc_error *err)
{
    if (o->mode != NC_MODE_ANN && o->mode != NC_MODE_QCFS && o->mode != NC_MODE_SNN)
        return nc_fail(err, NC_ERR_ARGUMENT, "gpu engine: unknown mode %d", (int)o->mode);
    if (o->mode == NC_MODE_SNN && o->T < 1)
        return nc_fail(err, NC_ERR_ARGUMENT, "gpu engine: SNN mode needs T >= 1 steps, got %d", o->T);
    if (o->mode == NC_MODE_SNN && o->encoding != NC_ENCODING_DIRECT && o->encoding != NC_ENCODING_POISSON)
        return nc_fail(err, NC_ERR_ARGUMENT, "gpu engine: unknown input encoding %d", (int)o->encoding);
    return NC_OK;
}

// [N, shape] always; [T, N, shape] (a sequence, no encoding) in SNN mode.
nc_status check_input(const nc_net *net, const nc_tensor *input, const nc_run_options *o, int *seq, nc_error *err)
{
    const nc_node *in = &net->nodes[net->input];
    int snn = o->mode == NC_MODE_SNN;
    *seq = snn && input && input->ndim == in->ndim + 2 && input->shape[0] == o->T;
    int fits = input && input->ndim == in->ndim + 1 + *seq && input->shape[*seq] >= 1;
    for (int d = 0; fits && d < in->ndim; d++)
        fits = input->shape[d + 1 + *seq] == in->shape[d];
    if (fits)
        return NC_OK;
    char a[128], b[128] = "no tensor";
    nc_shape_str(in->ndim, in->shape, a, sizeof a);
    if (input)
        nc_shape_str(input->ndim, input->shape, b, sizeof b);
    return nc_fail(err, NC_ERR_SHAPE, "gpu engine: input '%s' expects a batch of shape [N, %s%s, got %s", in->name,
                   a + 1, snn ? " (or a sequence [T, N, ...])" : "", b);
}

// Sets up a run and uploads the input into a pool block (*d_input).
nc_status begin_run(nc_engine *e, const nc_tensor *input, const nc_run_options *opts, grun *r, float **d_input,
                    nc_error *err)
{
    gpu_state *st = state_of(e);
    if (!st || !st->net || !e->net)
        return nc_fail(err, NC_ERR_ARGUMENT, "gpu engine: no network loaded");
    int seq = 0;
    nc_status s = check_options(opts, err);
    if (s == NC_OK)
        s = check_input(st->net, input, opts, &seq, err);
    if (s != NC_OK)
        return s;
    NC_CUDA_TRY(err, "gpu engine", cudaSetDevice(0));
    r->e = e;
    r->st = st;
    r->net = st->net;
    r->o = opts;
    r->snn = opts->mode == NC_MODE_SNN;
    r->T = r->snn ? opts->T : 1;
    r->seq = seq;
    r->N = input->shape[seq];
    r->err = err;
    r->val.assign((size_t)st->net->n_nodes, gval{nullptr, 0, 0, 0, nullptr});
    r->observe = opts->observer && (opts->observer->observe || opts->observer->observe_input);
    snprintf(r->where, sizeof r->where, "gpu engine, input '%s'", st->net->nodes[st->net->input].name);
    int64_t numel = st->nodes[st->net->input].numel, rows = seq ? (int64_t)r->T * r->N : r->N;
    void *p = nullptr;
    if ((s = alloc_floats(r, rows, numel, sizeof(float), "input", &p)) != NC_OK)
        return s;
    *d_input = (float *)p;
    NC_CUDA_TRY(err, r->where, cudaMemcpyAsync(p, input->data, (size_t)(rows * numel) * sizeof(float),
                                               cudaMemcpyHostToDevice, st->stream));
    return NC_OK;
}

// Copies the output node's value to a new [N, F] or [T, N, F] tensor.
nc_status make_output(grun *r, nc_tensor **out)
{
    const gval *v = &r->val[r->net->output];
    int64_t f = numel_of(r, r->net->output), step = r->N * f;
    int64_t shape[3] = {r->T, r->N, f};
    nc_tensor *t = r->snn ? nc_tensor_new(3, shape) : nc_tensor_new2(r->N, f);
    if (!t)
        return nc_fail(r->err, NC_ERR_MEMORY, "gpu engine: out of memory for the output (%lld values)",
                       (long long)(r->snn ? r->T * step : step));
    int steps = r->snn ? r->T : 1;
    size_t copy = (size_t)((v->constant ? 1 : steps) * step) * sizeof(float);
    cudaError_t e = cudaMemcpyAsync(t->data, v->data, copy, cudaMemcpyDeviceToHost, r->st->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(r->st->stream);
    if (e != cudaSuccess) {
        nc_tensor_free(t);
        return nc_gpu_fail_cuda(r->err, "gpu engine, output", "cudaMemcpyAsync (device to host)", e);
    }
    for (int s = 1; v->constant && s < steps; s++)
        memcpy(t->data + s * step, t->data, (size_t)step * sizeof(float));
    *out = t;
    return NC_OK;
}

nc_status gpu_forward(nc_engine *e, const nc_tensor *input, const nc_run_options *opts, nc_tensor **out,
                      nc_error *err)
{
    nc_run_options defaults = {};
    defaults.mode = NC_MODE_ANN;
    defaults.T = 1;
    if (!opts)
        opts = &defaults;
    grun r = {};
    float *d_input = nullptr;
    nc_status s = begin_run(e, input, opts, &r, &d_input, err);
    if (s == NC_OK)
        s = run_nodes(&r, d_input);
    if (s == NC_OK)
        s = make_output(&r, out); /* synchronises: asynchronous kernel errors show here */
    if (s == NC_OK) {
        cudaError_t ce = cudaGetLastError();
        if (ce != cudaSuccess)
            s = nc_gpu_fail_cuda(err, "gpu engine", "forward pass", ce);
    }
    if (r.st) {
        pool_put(r.st, d_input);
        s = finish_run(&r, s);
    }
    if (s != NC_OK && out && *out) {
        nc_tensor_free(*out);
        *out = nullptr;
    }
    return s;
}

// ---- load -----------------------------------------------------------------------------------

nc_status load_fail(const nc_node *n, nc_error *err, const char *what)
{
    return nc_fail(err, NC_ERR_SHAPE, "gpu engine, node '%s' (%s): %s", n->name, kind_name(n), what);
}

int window_out_size(int in, int k, int stride, int pad0, int pad1, int dil, int ceil_mode)
{
    int span = in + pad0 + pad1 - dil * (k - 1) - 1;
    if (span < 0)
        return 0;
    int out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
    if (ceil_mode && (out - 1) * stride >= in + pad0)
        out--;
    return out;
}

nc_status load_window(const nc_net *net, int i, nc_gwin *g, nc_error *err)
{
    const nc_node *n = &net->nodes[i], *in = &net->nodes[n->inputs[0]];
    if (in->ndim != 3)
        return load_fail(n, err, "needs a [C, H, W] input; run shape inference first");
    for (int k = 0; k < 2; k++)
        if (n->kernel[k] < 1 || n->stride[k] < 1 || n->dilation[k] < 1)
            return load_fail(n, err, "kernel, stride and dilation must be >= 1");
    for (int k = 0; k < 4; k++)
        if (n->pad[k] < 0)
            return load_fail(n, err, "padding must be >= 0");
    if (in->shape[0] > 0x7fffffff || in->shape[1] > 0x7fffffff || in->shape[2] > 0x7fffffff)
        return load_fail(n, err, "input too large");
    memset(g, 0, sizeof *g);
    g->c = (int)in->shape[0];
    g->h = (int)in->shape[1];
    g->w = (int)in->shape[2];
    g->kh = n->kernel[0];
    g->kw = n->kernel[1];
    g->sh = n->stride[0];
    g->sw = n->stride[1];
    g->dh = n->dilation[0];
    g->dw = n->dilation[1];
    g->pt = n->pad[0];
    g->pl = n->pad[1];
    g->pb = n->pad[2];
    g->pr = n->pad[3];
    g->oh = window_out_size(g->h, g->kh, g->sh, g->pt, g->pb, g->dh, n->ceil_mode);
    g->ow = window_out_size(g->w, g->kw, g->sw, g->pl, g->pr, g->dw, n->ceil_mode);
    if (g->c < 1 || g->h < 1 || g->w < 1 || g->oh < 1 || g->ow < 1)
        return load_fail(n, err, "kernel, stride, padding or dilation do not fit the input");
    int64_t cout = n->kind == NC_NODE_CONV2D ? (n->weight ? n->weight->shape[0] : -1) : in->shape[0];
    if (n->ndim != 3 || n->shape[0] != cout || n->shape[1] != g->oh || n->shape[2] != g->ow)
        return load_fail(n, err, "stored output shape differs from the computed one; run shape inference");
    if (n->kind == NC_NODE_CONV2D) {
        const nc_tensor *w = n->weight;
        if (n->groups < 1 || w->ndim != 4 || in->shape[0] % n->groups || w->shape[0] % n->groups ||
            w->shape[1] * n->groups != in->shape[0] || w->shape[2] != n->kernel[0] || w->shape[3] != n->kernel[1] ||
            (n->bias && nc_tensor_numel(n->bias) != w->shape[0]))
            return load_fail(n, err, "weight shape does not fit the input and groups");
    }
    return NC_OK;
}

nc_status load_check_node(const nc_net *net, int i, nc_error *err)
{
    const nc_node *n = &net->nodes[i];
    const char *wrong = nc_node_check(net, i);
    if (wrong)
        return load_fail(n, err, wrong);
    /* what cuBLAS adds: GEMM dimensions are ints */
    if (n->kind == NC_NODE_DENSE &&
        (nc_node_numel(&net->nodes[n->inputs[0]]) > 0x7fffffff || n->shape[0] > 0x7fffffff))
        return load_fail(n, err, "too many features for a GEMM");
    return NC_OK;
}

// The constant window count of an avgpool (every window counts the same
// number of positions), or 0.
int avgpool_const_count(const nc_gwin &g, int cip)
{
    int count = -1;
    for (int oy = 0; oy < g.oh; oy++) {
        int sy = oy * g.sh - g.pt;
        int lo_y = sy >= 0 ? 0 : (-sy + g.dh - 1) / g.dh;
        int hi_y = g.h - sy > 0 ? std::min(g.kh, (g.h - sy + g.dh - 1) / g.dh) : 0;
        int np_y = g.h + g.pb - sy > 0 ? std::min(g.kh, (g.h + g.pb - sy + g.dh - 1) / g.dh) : 0;
        lo_y = std::min(lo_y, hi_y);
        for (int ox = 0; ox < g.ow; ox++) {
            int sx = ox * g.sw - g.pl;
            int lo_x = sx >= 0 ? 0 : (-sx + g.dw - 1) / g.dw;
            int hi_x = g.w - sx > 0 ? std::min(g.kw, (g.w - sx + g.dw - 1) / g.dw) : 0;
            int np_x = g.w + g.pr - sx > 0 ? std::min(g.kw, (g.w + g.pr - sx + g.dw - 1) / g.dw) : 0;
            lo_x = std::min(lo_x, hi_x);
            int c = cip ? np_y * np_x : (hi_y - lo_y) * (hi_x - lo_x);
            // a window that also reaches into padding is not all spikes: with
            // count_include_pad it still divides by c, which is fine; without,
            // c counts real positions only, also fine — the count is what matters
            if (count < 0)
                count = c;
            else if (c != count)
                return 0;
        }
    }
    return count > 0 ? count : 0;
}

// SNN spike descriptors (gnode.spike*) of every node, in topological order.
void spike_analysis(const nc_net *net, std::vector<gnode> &g)
{
    for (int i = 0; i < net->n_nodes; i++) {
        const nc_node *n = &net->nodes[i];
        gnode &d = g[i];
        d.spike = 0;
        if (n->kind == NC_NODE_NEURON && n->neuron.model == NC_NEURON_IF) {
            int ok = 1;
            for (int k = 0; k < n->neuron.n_threshold; k++) {
                float t = n->neuron.threshold[k];
                ok &= t > 0.0f && t < 3.0e38f;
            }
            if (ok) {
                d.spike = 1;
                d.spike_src = i;
                d.spike_d = 1.0f;
                d.spike_c = d.channels;
                d.spike_inner = d.inner;
            }
            continue;
        }
        if (n->n_inputs != 1)
            continue;
        const gnode &s = g[n->inputs[0]];
        if (!s.spike)
            continue;
        switch (n->kind) {
        case NC_NODE_FLATTEN:
            d.spike = 1;
            d.spike_src = s.spike_src;
            d.spike_d = s.spike_d;
            d.spike_c = s.spike_c;
            d.spike_inner = s.spike_inner;
            break;
        case NC_NODE_MAXPOOL:
            if (n->maxpool_strategy == NC_MAXPOOL_AVG) {
                int cnt = avgpool_const_count(d.win, n->count_include_pad);
                if (cnt > 0 && s.spike_d * cnt <= 256.0f) {
                    d.spike = 1;
                    d.spike_d = s.spike_d * cnt;
                }
            } else { // gated or pre-spike: passes spike values as they are
                d.spike = 1;
                d.spike_d = s.spike_d;
            }
            d.spike_src = s.spike_src;
            d.spike_c = s.spike_c;
            d.spike_inner = (int64_t)d.win.oh * d.win.ow;
            break;
        case NC_NODE_AVGPOOL: {
            int cnt = avgpool_const_count(d.win, n->count_include_pad);
            if (cnt > 0 && s.spike_d * cnt <= 256.0f) {
                d.spike = 1;
                d.spike_src = s.spike_src;
                d.spike_d = s.spike_d * cnt;
                d.spike_c = s.spike_c;
                d.spike_inner = (int64_t)d.win.oh * d.win.ow;
            }
            break;
        }
        default:
            break;
        }
        if (d.spike && (n->kind == NC_NODE_MAXPOOL || n->kind == NC_NODE_AVGPOOL) && s.spike_c != d.win.c)
            d.spike = 0;
    }
}

nc_status upload(std::vector<void *> &params, const float *host, size_t n, float **out, const nc_node *node,
                 nc_error *err)
{
    *out = nullptr;
    void *p = nullptr;
    char where[NC_NAME_MAX + 64];
    snprintf(where, sizeof where, "gpu engine, loading node '%s'", node->name);
    cudaError_t e = nc_gpu_fault_malloc(&p, (n ? n : 1) * sizeof(float));
    if (e != cudaSuccess)
        return nc_gpu_fail_cuda(err, where, "cudaMalloc (parameters)", e);
    params.push_back(p);
    NC_CUDA_TRY(err, where, cudaMemcpy(p, host, n * sizeof(float), cudaMemcpyHostToDevice));
    *out = (float *)p;
    return NC_OK;
}

nc_status gpu_load(nc_engine *e, const nc_net *net, nc_error *err)
{
    gpu_state *st = state_of(e);
    if (!net || net->n_nodes < 2 || net->input != 0 || net->output != net->n_nodes - 1)
        return nc_fail(err, NC_ERR_ARGUMENT,
                       "gpu engine: the network must start with its input node and end with its output node");
    NC_CUDA_TRY(err, "gpu engine", cudaSetDevice(0));
    std::vector<gnode> nodes((size_t)net->n_nodes);
    std::vector<void *> params;
    nc_status s = NC_OK;
    for (int i = 0; i < net->n_nodes && s == NC_OK; i++) {
        const nc_node *n = &net->nodes[i];
        gnode &g = nodes[i];
        g.last_use = i;
        s = load_check_node(net, i, err);
        if (s == NC_OK && (n->kind == NC_NODE_CONV2D || n->kind == NC_NODE_AVGPOOL || n->kind == NC_NODE_MAXPOOL))
            s = load_window(net, i, &g.win, err);
        if (s != NC_OK)
            break;
        g.numel = nc_node_numel(n);
        g.channels = nc_node_channels(n) > 0 ? nc_node_channels(n) : 1;
        g.inner = g.numel / g.channels;
        for (int k = 0; k < n->n_inputs; k++) {
            nodes[n->inputs[k]].last_use = i;
            nodes[n->inputs[k]].consumers++;
        }
        if (n->kind == NC_NODE_CONV2D) {
            g.cout = (int)n->weight->shape[0];
            g.groups = n->groups;
        }
        if (n->kind == NC_NODE_CONV2D || n->kind == NC_NODE_DENSE || n->kind == NC_NODE_AFFINE ||
            n->kind == NC_NODE_SCALE) {
            s = upload(params, n->weight->data, (size_t)nc_tensor_numel(n->weight), &g.w, n, err);
            if (s == NC_OK && n->bias)
                s = upload(params, n->bias->data, (size_t)nc_tensor_numel(n->bias), &g.b, n, err);
        }
        if (s == NC_OK && n->kind == NC_NODE_NEURON && n->neuron.threshold && n->neuron.n_threshold > 0) {
            g.n_th = n->neuron.n_threshold;
            s = upload(params, n->neuron.threshold, (size_t)g.n_th, &g.th, n, err);
        }
    }
    if (s != NC_OK) {
        for (void *p : params)
            cudaFree(p);
        (void)cudaGetLastError();
        return s;
    }
    // the output node is read by the caller: keep it to the end
    nodes[net->output].consumers++;
    spike_analysis(net, nodes);
    (void)cudaStreamSynchronize(st->stream);
    free_params(st);
    pool_trim(st, 1);
    st->nodes.swap(nodes);
    st->params.swap(params);
    st->net = net;
    e->net = net;
    return NC_OK;
}

int gpu_supports(nc_engine *e, const nc_net *net, int node, char *why, size_t why_size)
{
    (void)e;
    const char *reason = nullptr;
    if (node < 0 || node >= net->n_nodes || (unsigned)net->nodes[node].kind >= NC_NODE_KIND_COUNT)
        reason = "unknown node kind";
    else if (net->nodes[node].kind == NC_NODE_RECURRENT)
        reason = "a recurrent edge needs step-by-step simulation, which the gpu engine does not do yet; "
                 "use --engine cpu";
    else if (net->nodes[node].kind == NC_NODE_NEURON) {
        nc_neuron_model m = net->nodes[node].neuron.model;
        if (m != NC_NEURON_RELU && m != NC_NEURON_CLIP && m != NC_NEURON_QCFS && m != NC_NEURON_IF)
            reason = "the NIR neuron models (LIF, CubaLIF, LI, CubaLI, I, NIR-IF, Threshold, Delay) are not on "
                     "the gpu engine yet; use --engine cpu";
    }
    if (reason && why && why_size)
        snprintf(why, why_size, "%s", reason);
    /* else: every other node kind of the IR, in every mode, as the CPU engine */
    return reason == nullptr;
}

void gpu_destroy(nc_engine *e)
{
    gpu_state *st = state_of(e);
    if (!st)
        return;
    cudaSetDevice(0);
    if (st->stream)
        cudaStreamSynchronize(st->stream);
    free_params(st);
    pool_trim(st, 1);
    if (st->host_pinned)
        cudaFreeHost(st->host);
    else
        free(st->host);
    if (st->ev0)
        cudaEventDestroy(st->ev0);
    if (st->ev1)
        cudaEventDestroy(st->ev1);
    if (st->blas)
        cublasDestroy(st->blas);
    nc_cudnn_destroy(st->cudnn);
    if (st->stream)
        cudaStreamDestroy(st->stream);
    (void)cudaGetLastError();
    delete st;
    e->impl = nullptr;
}

const nc_engine_ops gpu_ops = {
    "gpu",
    NC_CAP_SNN | NC_CAP_TRAINING | NC_CAP_DEVICE_MEMORY,
    gpu_supports,
    gpu_load,
    gpu_forward,
    gpu_destroy,
};

} // namespace

// ---- public --------------------------------------------------------------------------------

static const char *const precision_names[NC_GPU_PRECISION_COUNT] = {"fp32", "tf32", "bf16", "split-bf16",
                                                                     "split-bf16x2"};

extern "C" const char *nc_gpu_precision_name(nc_gpu_precision p)
{
    return (unsigned)p < NC_GPU_PRECISION_COUNT ? precision_names[p] : "unknown";
}

extern "C" int nc_gpu_precision_parse(const char *text, nc_gpu_precision *out)
{
    if (!text)
        return -1;
    for (int p = 0; p < NC_GPU_PRECISION_COUNT; p++)
        if (strcmp(text, precision_names[p]) == 0) {
            *out = (nc_gpu_precision)p;
            return 0;
        }
    if (strcmp(text, "split-bf16x3") == 0) {
        *out = NC_GPU_SPLIT_BF16;
        return 0;
    }
    return -1;
}

extern "C" int nc_engine_is_gpu(const nc_engine *e) { return e && e->ops == &gpu_ops; }

extern "C" nc_status nc_engine_gpu_set_precision(nc_engine *e, nc_gpu_precision p, nc_error *err)
{
    if (!nc_engine_is_gpu(e))
        return nc_fail(err, NC_ERR_ARGUMENT, "the %s engine has no GPU precision setting (only --engine gpu)",
                       e && e->ops ? e->ops->name : "(none)");
    if ((unsigned)p >= NC_GPU_PRECISION_COUNT)
        return nc_fail(err, NC_ERR_ARGUMENT, "gpu engine: unknown precision %d", (int)p);
    gpu_state *st = state_of(e);
    if (st->prec != p) {
        cudaSetDevice(0);
        cudaStreamSynchronize(st->stream);
        for (gnode &g : st->nodes)
            free_caches(g);
        st->prec = p;
    }
    return NC_OK;
}

extern "C" void nc_engine_gpu_describe_convs(const nc_engine *e, char *buf, size_t size)
{
    if (!size)
        return;
    buf[0] = 0;
    if (!nc_engine_is_gpu(e) || !state_of(e)->net)
        return;
    const gpu_state *st = state_of(e);
    char why[400];
    int have = nc_cudnn_status(why, sizeof why);
    size_t len = (size_t)snprintf(buf, size, "convolutions (NC_GPU_CONV=%s; %s%s)\n",
                                  st->conv == CONV_CUDNN ? "cudnn" : st->conv == CONV_IM2COL ? "im2col" : "auto",
                                  have ? "" : "no cuDNN: ", why);
    for (int i = 0; i < st->net->n_nodes && len < size; i++) {
        const nc_node *n = &st->net->nodes[i];
        if (n->kind != NC_NODE_CONV2D)
            continue;
        const gnode &g = st->nodes[i];
        len += (size_t)snprintf(buf + len, size - len, "  %s: %s\n", n->name,
                                g.plans.empty() ? "im2col + cuBLAS GEMM" : g.plans.back().desc);
    }
}

extern "C" nc_gpu_precision nc_engine_gpu_get_precision(const nc_engine *e)
{
    return nc_engine_is_gpu(e) ? state_of(e)->prec : NC_GPU_FP32;
}

extern "C" nc_status nc_engine_gpu_new(nc_engine **out, nc_error *err)
{
    *out = nullptr;
    nc_gpu_info info;
    nc_gpu_query(&info);
    if (!info.available)
        return nc_fail(err, NC_ERR_UNSUPPORTED, "the gpu engine cannot run here: %s", info.reason);
    nc_gpu_precision prec = NC_GPU_FP32;
    const char *env = nc_gpu_options_get().precision;
    if (env && *env && nc_gpu_precision_parse(env, &prec) != 0)
        return nc_fail(err, NC_ERR_ARGUMENT,
                       "NC_GPU_PRECISION='%s' is not a precision (fp32, tf32, bf16, split-bf16, split-bf16x2)", env);
    nc_engine *e = (nc_engine *)calloc(1, sizeof *e);
    gpu_state *st = new (std::nothrow) gpu_state();
    if (!e || !st) {
        free(e);
        delete st;
        return nc_fail(err, NC_ERR_MEMORY, "out of memory creating the gpu engine");
    }
    e->ops = &gpu_ops;
    e->impl = st;
    st->prec = prec;
    const char *conv = nc_gpu_options_get().conv;
    if (conv && *conv) {
        if (strcmp(conv, "cudnn") == 0)
            st->conv = CONV_CUDNN;
        else if (strcmp(conv, "im2col") == 0)
            st->conv = CONV_IM2COL;
        else if (strcmp(conv, "auto") != 0) {
            delete st;
            free(e);
            return nc_fail(err, NC_ERR_ARGUMENT,
                           "the gpu engine's conv='%s' (NC_GPU_CONV) is not a convolution path (auto, cudnn, im2col)",
                           conv);
        }
    }
    nc_status s = NC_OK;
    const char *where = "gpu engine";
    auto init = [&]() -> nc_status {
        NC_CUDA_TRY(err, where, cudaSetDevice(0));
        NC_CUDA_TRY(err, where, cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking));
        NC_CUBLAS_TRY(err, where, cublasCreate(&st->blas));
        NC_CUBLAS_TRY(err, where, cublasSetStream(st->blas, st->stream));
        NC_CUBLAS_TRY(err, where, cublasSetMathMode(st->blas, CUBLAS_DEFAULT_MATH));
        NC_CUDA_TRY(err, where, cudaEventCreate(&st->ev0));
        NC_CUDA_TRY(err, where, cudaEventCreate(&st->ev1));
        int l2 = 0;
        if (cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0) == cudaSuccess && l2 > 0)
            st->chunk_bytes = std::min<size_t>(std::max<size_t>((size_t)l2 * 3 / 4, 8u << 20), 96u << 20);
        (void)cudaGetLastError();
        long mb = nc_gpu_options_get().chunk_mb;
        if (mb >= 1 && mb <= 65536)
            st->chunk_bytes = (size_t)mb << 20;
        return nc_cudnn_create(st->stream, &st->cudnn, err);
    };
    s = init();
    if (s != NC_OK) {
        gpu_destroy(e);
        free(e);
        return s;
    }
    *out = e;
    return NC_OK;
}

namespace {

// One more pass with an event after every node; prints the time of each node
// on stderr (NC_GPU_PROFILE=1: where the time of a forward pass goes).
void profile_pass(nc_engine *e, const grun *r0, float *d_input)
{
    gpu_state *st = state_of(e);
    int n = st->net->n_nodes;
    std::vector<cudaEvent_t> ev((size_t)n + 1, nullptr);
    for (cudaEvent_t &x : ev)
        if (cudaEventCreate(&x) != cudaSuccess)
            x = nullptr;
    int ok = 1;
    for (cudaEvent_t x : ev)
        ok &= x != nullptr;
    nc_error err = {};
    if (ok) {
        grun r = {};
        r.e = e;
        r.st = st;
        r.net = st->net;
        r.o = r0->o;
        r.snn = r0->snn;
        r.seq = r0->seq;
        r.T = r0->T;
        r.N = r0->N;
        r.err = &err;
        r.prof = ev.data();
        r.val.assign((size_t)n, gval{nullptr, 0, 0, 0, nullptr});
        nc_status s = run_nodes(&r, d_input);
        for (gval &v : r.val)
            value_free(&r, &v);
        if (s == NC_OK && cudaEventSynchronize(ev[n]) == cudaSuccess) {
            float total = 0;
            cudaEventElapsedTime(&total, ev[0], ev[n]);
            fprintf(stderr, "# gpu profile: %s mode, N = %lld, T = %d, precision %s, im2col chunk %.0f MiB, total %.3f ms\n",
                    r.o->mode == NC_MODE_SNN ? "SNN" : r.o->mode == NC_MODE_QCFS ? "QCFS" : "ANN", (long long)r.N, r.T,
                    nc_gpu_precision_name(st->prec), st->chunk_bytes / 1048576.0, total);
            for (int i = 0; i < n; i++) {
                float t = 0;
                cudaEventElapsedTime(&t, ev[i], ev[i + 1]);
                const nc_node *nd = &st->net->nodes[i];
                const gnode &g = st->nodes[i];
                fprintf(stderr, "#   %-24.24s %-14s %9.3f ms %5.1f%%  %s\n", nd->name,
                        nd->kind == NC_NODE_NEURON ? nc_neuron_model_name(nd->neuron.model) : kind_name(nd), t,
                        total > 0 ? 100.0 * t / total : 0.0, g.plans.empty() ? "" : g.plans.back().desc);
            }
        } else
            fprintf(stderr, "# gpu profile failed: %s\n", err.message);
    }
    for (cudaEvent_t x : ev)
        if (x)
            cudaEventDestroy(x);
    (void)cudaGetLastError();
}

} // namespace

extern "C" nc_status nc_engine_gpu_time_forward(nc_engine *e, const nc_tensor *input, const nc_run_options *opts,
                                                int warmup, int repeats, double *times_ms, double *median_ms,
                                                nc_error *err)
{
    if (!nc_engine_is_gpu(e))
        return nc_fail(err, NC_ERR_ARGUMENT, "nc_engine_gpu_time_forward: not a gpu engine");
    if (repeats < 1 || warmup < 0 || !opts)
        return nc_fail(err, NC_ERR_ARGUMENT, "nc_engine_gpu_time_forward: bad repeats, warm-up or options");
    nc_run_options o = *opts;
    o.observer = nullptr;
    o.progress = nullptr;
    gpu_state *st = state_of(e);
    grun r0 = {};
    float *d_input = nullptr;
    nc_status s = begin_run(e, input, &o, &r0, &d_input, err);
    if (s != NC_OK) {
        if (r0.st) {
            pool_put(st, d_input);
            finish_run(&r0, s);
        }
        return s;
    }
    std::vector<double> ms;
    for (int k = 0; k < warmup + repeats && s == NC_OK; k++) {
        grun r = {};
        r.e = e;
        r.st = st;
        r.net = st->net;
        r.o = &o;
        r.snn = r0.snn;
        r.seq = r0.seq;
        r.T = r0.T;
        r.N = r0.N;
        r.err = err;
        r.val.assign((size_t)st->net->n_nodes, gval{nullptr, 0, 0, 0, nullptr});
        cudaError_t ce = cudaEventRecord(st->ev0, st->stream);
        if (ce != cudaSuccess)
            s = nc_gpu_fail_cuda(err, "gpu engine timing", "cudaEventRecord", ce);
        if (s == NC_OK)
            s = run_nodes(&r, d_input);
        // the output stays on the device: free the values (the pool keeps
        // their blocks for the next pass) before the stop event
        for (gval &v : r.val)
            value_free(&r, &v);
        if (s == NC_OK && (ce = cudaEventRecord(st->ev1, st->stream)) != cudaSuccess)
            s = nc_gpu_fail_cuda(err, "gpu engine timing", "cudaEventRecord", ce);
        if (s == NC_OK && (ce = cudaEventSynchronize(st->ev1)) != cudaSuccess)
            s = nc_gpu_fail_cuda(err, "gpu engine timing", "cudaEventSynchronize", ce);
        float t = 0;
        if (s == NC_OK && (ce = cudaEventElapsedTime(&t, st->ev0, st->ev1)) != cudaSuccess)
            s = nc_gpu_fail_cuda(err, "gpu engine timing", "cudaEventElapsedTime", ce);
        if (s == NC_OK && k >= warmup)
            ms.push_back(t);
    }
    int prof = nc_gpu_options_get().profile;
    if (s == NC_OK && prof)
        profile_pass(e, &r0, d_input);
    pool_put(st, d_input);
    s = finish_run(&r0, s);
    if (s != NC_OK)
        return s;
    for (int k = 0; k < repeats; k++)
        if (times_ms)
            times_ms[k] = ms[k];
    std::sort(ms.begin(), ms.end());
    *median_ms = 0.5 * (ms[(repeats - 1) / 2] + ms[repeats / 2]);
    return NC_OK;
}

// ---- test hooks -------------------------------------------------------------------------------

namespace {

struct dev_buffers {
    std::vector<void *> p;
    ~dev_buffers()
    {
        for (void *q : p)
            cudaFree(q);
    }
    cudaError_t get(size_t bytes, void **out)
    {
        *out = nullptr;
        cudaError_t e = cudaMalloc(out, bytes ? bytes : 1);
        if (e == cudaSuccess)
            p.push_back(*out);
        return e;
    }
};

} // namespace

extern "C" nc_status nc_gpu_test_if(int T, long long n, int c, long long inner, const float *threshold,
                                    int n_threshold, float v0_fraction, int reset_zero, int fire_gt,
                                    const float *bias, const float *in, long long in_step, float *out,
                                    long long out_step, nc_error *err)
{
    const char *where = "gpu IF test";
    long long total = n * c * inner;
    size_t in_floats = (size_t)((T - 1) * in_step + total), out_floats = (size_t)((T - 1) * out_step + total);
    dev_buffers d;
    float *dth, *db = nullptr, *din, *dout;
    NC_CUDA_TRY(err, where, cudaSetDevice(0));
    NC_CUDA_TRY(err, where, d.get((size_t)n_threshold * 4, (void **)&dth));
    NC_CUDA_TRY(err, where, d.get(in_floats * 4, (void **)&din));
    NC_CUDA_TRY(err, where, d.get(out_floats * 4, (void **)&dout));
    NC_CUDA_TRY(err, where, cudaMemcpy(dth, threshold, (size_t)n_threshold * 4, cudaMemcpyHostToDevice));
    NC_CUDA_TRY(err, where, cudaMemcpy(din, in, in_floats * 4, cudaMemcpyHostToDevice));
    NC_CUDA_TRY(err, where, cudaMemset(dout, 0xff, out_floats * 4)); /* poison: every output must be written */
    if (bias) {
        NC_CUDA_TRY(err, where, d.get((size_t)c * 4, (void **)&db));
        NC_CUDA_TRY(err, where, cudaMemcpy(db, bias, (size_t)c * 4, cudaMemcpyHostToDevice));
    }
    NC_CUDA_TRY(err, where, nc_launch_if(0, T, total, c, inner, dth, n_threshold, v0_fraction, reset_zero, fire_gt, db,
                                         din, in_step, dout, out_step));
    NC_CUDA_TRY(err, where, cudaDeviceSynchronize());
    NC_CUDA_TRY(err, where, cudaMemcpy(out, dout, out_floats * 4, cudaMemcpyDeviceToHost));
    return NC_OK;
}

extern "C" nc_status nc_gpu_test_if_bf16(int T, long long n, int c, long long inner, const float *threshold,
                                         int n_threshold, float v0_fraction, int reset_zero, int fire_gt,
                                         const float *bias, const float *in, long long in_step, float *counts,
                                         long long out_step, nc_error *err)
{
    const char *where = "gpu bf16 IF test";
    long long total = n * c * inner;
    size_t in_n = (size_t)((T - 1) * in_step + total), out_n = (size_t)((T - 1) * out_step + total);
    dev_buffers d;
    float *dth, *db = nullptr, *din, *dout;
    nc_bf16 *din16, *dcounts;
    NC_CUDA_TRY(err, where, cudaSetDevice(0));
    NC_CUDA_TRY(err, where, d.get((size_t)n_threshold * 4, (void **)&dth));
    NC_CUDA_TRY(err, where, d.get(in_n * 4, (void **)&din));
    NC_CUDA_TRY(err, where, d.get(in_n * 2, (void **)&din16));
    NC_CUDA_TRY(err, where, d.get(out_n * 2, (void **)&dcounts));
    NC_CUDA_TRY(err, where, d.get(out_n * 4, (void **)&dout));
    NC_CUDA_TRY(err, where, cudaMemcpy(dth, threshold, (size_t)n_threshold * 4, cudaMemcpyHostToDevice));
    NC_CUDA_TRY(err, where, cudaMemcpy(din, in, in_n * 4, cudaMemcpyHostToDevice));
    NC_CUDA_TRY(err, where, cudaMemset(dcounts, 0xff, out_n * 2)); /* poison: every output must be written */
    if (bias) {
        NC_CUDA_TRY(err, where, d.get((size_t)c * 4, (void **)&db));
        NC_CUDA_TRY(err, where, cudaMemcpy(db, bias, (size_t)c * 4, cudaMemcpyHostToDevice));
    }
    NC_CUDA_TRY(err, where, nc_launch_to_bf16(0, 1, (int64_t)in_n, din, nullptr, 1, 1, din16));
    nc_if_io io = {nullptr, din16, nullptr, dcounts};
    NC_CUDA_TRY(err, where, nc_launch_if_io(0, T, total, c, inner, dth, n_threshold, v0_fraction, reset_zero, fire_gt,
                                            db, &io, in_step, out_step));
    NC_CUDA_TRY(err, where, nc_launch_bf16_to_f32(0, (int64_t)out_n, dcounts, dout));
    NC_CUDA_TRY(err, where, cudaDeviceSynchronize());
    NC_CUDA_TRY(err, where, cudaMemcpy(counts, dout, out_n * 4, cudaMemcpyDeviceToHost));
    return NC_OK;
}

extern "C" nc_status nc_gpu_test_avgpool_nhwc(long long rows, int c, int h, int w, const int kernel[2],
                                              const int stride[2], const int pad[4], const int dilation[2],
                                              int ceil_mode, int count_include_pad, const float *in, float *out,
                                              nc_error *err)
{
    const char *where = "gpu channels-last avgpool test";
    nc_gwin g = {c, h, w, 0, 0, kernel[0], kernel[1], stride[0], stride[1], dilation[0], dilation[1],
                 pad[0], pad[1], pad[2], pad[3]};
    g.oh = window_out_size(h, g.kh, g.sh, g.pt, g.pb, g.dh, ceil_mode);
    g.ow = window_out_size(w, g.kw, g.sw, g.pl, g.pr, g.dw, ceil_mode);
    if (rows < 1 || g.oh < 1 || g.ow < 1)
        return nc_fail(err, NC_ERR_ARGUMENT, "%s: no window fits", where);
    size_t in_n = (size_t)(rows * c * h * w), out_n = (size_t)(rows * c * g.oh * g.ow);
    dev_buffers d;
    float *din, *dnhwc, *dpool, *dout;
    NC_CUDA_TRY(err, where, cudaSetDevice(0));
    NC_CUDA_TRY(err, where, d.get(in_n * 4, (void **)&din));
    NC_CUDA_TRY(err, where, d.get(in_n * 4, (void **)&dnhwc));
    NC_CUDA_TRY(err, where, d.get(out_n * 4, (void **)&dpool));
    NC_CUDA_TRY(err, where, d.get(out_n * 4, (void **)&dout));
    NC_CUDA_TRY(err, where, cudaMemcpy(din, in, in_n * 4, cudaMemcpyHostToDevice));
    NC_CUDA_TRY(err, where, cudaMemset(dpool, 0xff, out_n * 4)); /* poison: every output must be written */
    NC_CUDA_TRY(err, where, nc_launch_transpose_rows(0, rows, c, (int64_t)h * w, din, dnhwc));
    NC_CUDA_TRY(err, where, nc_launch_avgpool_nhwc(0, &g, count_include_pad, rows, dnhwc, dpool));
    NC_CUDA_TRY(err, where, nc_launch_transpose_rows(0, rows, (int64_t)g.oh * g.ow, c, dpool, dout));
    NC_CUDA_TRY(err, where, cudaDeviceSynchronize());
    NC_CUDA_TRY(err, where, cudaMemcpy(out, dout, out_n * 4, cudaMemcpyDeviceToHost));
    return NC_OK;
}

extern "C" nc_status nc_gpu_test_gemm(nc_gpu_precision p, long long rows, int fin, int fout, const float *in,
                                      const float *weight, const float *spike_scale, float *out, nc_error *err)
{
    const char *where = "gpu GEMM test";
    if ((unsigned)p >= NC_GPU_PRECISION_COUNT)
        return nc_fail(err, NC_ERR_ARGUMENT, "%s: unknown precision", where);
    dev_buffers d;
    float *din, *dw, *dout, *dmul = nullptr, *dop = nullptr, *dth = nullptr;
    nc_bf16 *parts[3] = {}, *conv = nullptr;
    size_t nin = (size_t)(rows * fin), nw = (size_t)fin * fout, nout = (size_t)(rows * fout);
    NC_CUDA_TRY(err, where, cudaSetDevice(0));
    NC_CUDA_TRY(err, where, d.get(nin * 4, (void **)&din));
    NC_CUDA_TRY(err, where, d.get(nw * 4, (void **)&dw));
    NC_CUDA_TRY(err, where, d.get(nout * 4, (void **)&dout));
    NC_CUDA_TRY(err, where, cudaMemcpy(din, in, nin * 4, cudaMemcpyHostToDevice));
    NC_CUDA_TRY(err, where, cudaMemcpy(dw, weight, nw * 4, cudaMemcpyHostToDevice));
    NC_CUDA_TRY(err, where, cudaMemset(dout, 0xff, nout * 4));
    gemm_mode m = mode_for(p, spike_scale != nullptr);
    const void *wp[3] = {dw, dw, dw};
    const void *op = din;
    if (m.kind == NC_GEMM_BF16) {
        for (int k = 0; k < m.parts; k++)
            NC_CUDA_TRY(err, where, d.get(nw * 2, (void **)&parts[k]));
        NC_CUDA_TRY(err, where, d.get(nin * 2, (void **)&conv));
        if (m.spike) {
            NC_CUDA_TRY(err, where, d.get((size_t)fin * 4, (void **)&dth));
            NC_CUDA_TRY(err, where, d.get((size_t)fin * 4, (void **)&dmul));
            NC_CUDA_TRY(err, where, d.get((size_t)fin * 4, (void **)&dop));
            NC_CUDA_TRY(err, where, cudaMemcpy(dth, spike_scale, (size_t)fin * 4, cudaMemcpyHostToDevice));
            NC_CUDA_TRY(err, where, nc_launch_scale(0, fin, dth, fin, 1.0f, dmul));
            NC_CUDA_TRY(err, where, nc_launch_inv_scale(0, fin, dth, fin, 1.0f, dop));
        }
        NC_CUDA_TRY(err, where, nc_launch_weight_parts(0, fout, fin, dw, dmul, fout, fin, 1, m.parts, parts));
        NC_CUDA_TRY(err, where, nc_launch_to_bf16(0, rows, fin, din, dop, fin, 1, conv));
        for (int k = 0; k < m.parts; k++)
            wp[k] = parts[m.parts - 1 - k];
        op = conv;
    }
    cublasHandle_t h = nullptr;
    NC_CUBLAS_TRY(err, where, cublasCreate(&h));
    nc_status s = NC_OK;
    cublasStatus_t bs = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
    if (bs != CUBLAS_STATUS_SUCCESS)
        s = nc_gpu_fail_cublas(err, where, "cublasSetMathMode", bs);
    if (s == NC_OK)
        s = dense_gemm(h, m, rows, fin, fout, op, wp, dout, where, err);
    cublasDestroy(h);
    if (s != NC_OK)
        return s;
    NC_CUDA_TRY(err, where, cudaDeviceSynchronize());
    NC_CUDA_TRY(err, where, cudaMemcpy(out, dout, nout * 4, cudaMemcpyDeviceToHost));
    return NC_OK;
}

extern "C" nc_status nc_gpu_test_poisson(unsigned long long seed, int T, long long n, const float *in, float *out,
                                         nc_error *err)
{
    const char *where = "gpu Poisson test";
    dev_buffers d;
    float *din, *dout;
    NC_CUDA_TRY(err, where, cudaSetDevice(0));
    NC_CUDA_TRY(err, where, d.get((size_t)n * 4, (void **)&din));
    NC_CUDA_TRY(err, where, d.get((size_t)(T * n) * 4, (void **)&dout));
    NC_CUDA_TRY(err, where, cudaMemcpy(din, in, (size_t)n * 4, cudaMemcpyHostToDevice));
    NC_CUDA_TRY(err, where, nc_launch_poisson(0, seed, T, n, din, dout));
    NC_CUDA_TRY(err, where, cudaDeviceSynchronize());
    NC_CUDA_TRY(err, where, cudaMemcpy(out, dout, (size_t)(T * n) * 4, cudaMemcpyDeviceToHost));
    return NC_OK;
}
