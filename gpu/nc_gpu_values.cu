// nc_gpu_values.cu — the GPU engine's device memory: the pool of blocks a
// pass reuses, values and scratch buffers, pending biases, bf16 values and
// the channels-last layout (see nc_gpu_engine.h).
#include "gpu/nc_gpu_engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <new>
#include <string>
#include <vector>

namespace ncg {

static void free_copies(weight_copies &c)
{
    cudaFree(c.wa16);
    for (int p = 0; p < 3; p++)
        cudaFree(c.ws[p]);
    c = weight_copies();
}

void free_caches(gnode &g)
{
    free_copies(g.wc);
    free_copies(g.wc_hwc);
    cudaFree(g.w_hwc);
    g.w_hwc = nullptr;
    g.read_hwc = 0;
    cudaFree(g.opscale);
    g.opscale = nullptr;
    cudaFree(g.w_krsc);
    cudaFree(g.wk16_analog);
    cudaFree(g.wk16_spike);
    cudaFree(g.k_opscale);
    for (int p = 0; p < 3; p++) {
        cudaFree(g.wk_parts[p]);
        g.wk_parts[p] = nullptr;
    }
    cudaFree(g.wk_exact);
    g.wk_exact = nullptr;
    cudaFree(g.wk_pair);
    g.wk_pair = nullptr;
    cudaFree(g.wk_fx16);
    g.wk_fx16 = nullptr;
    g.own_desc[0] = 0;
    g.exact_refused = 0;
    g.exact_why[0] = 0;
    g.w_krsc = nullptr;
    g.wk16_analog = g.wk16_spike = nullptr;
    g.k_opscale = nullptr;
    g.plan = nullptr; // the plan itself stays in gpu_state::plans
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
    if (all) // a graph's blocks are about to go: the graph with them
        graphs_forget(st);
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
static cudaError_t pool_get(gpu_state *st, size_t bytes, void **out)
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
            if (!st->graph_log && !st->graphs.empty()) { // memory before speed: the graphs' blocks too
                (void)cudaStreamSynchronize(st->stream);
                graphs_forget(st);
            }
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
    if (st->graph_log && std::find(st->graph_log->begin(), st->graph_log->end(), *out) == st->graph_log->end())
        st->graph_log->push_back(*out);
    return cudaSuccess;
}

void pool_put(gpu_state *st, const void *p)
{
    if (!p)
        return;
    for (block &b : st->pool)
        if (b.ptr == p && !b.held)
            b.in_use = 0;
}
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

static std::string human_bytes(double b)
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

static nc_status oom(grun *r, size_t bytes, int64_t rows, int64_t per_row, const char *what, cudaError_t e)
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
    pool_put(r->st, v->data8);
    *v = gval{nullptr, 0, 0, 0, nullptr};
}

// A value of node i held as bf16 (data16), `rows` rows, channels last;
// with pairs, room for the counts' pairs after it (gval.pairs).
nc_status value_alloc16(grun *r, int i, int64_t rows, int constant, int counts, int pairs, gval *v)
{
    void *p = nullptr;
    nc_status s = alloc_floats(r, rows, numel_of(r, i) * (pairs ? 3 : 1), sizeof(nc_bf16), "bf16 output", &p);
    if (s != NC_OK)
        return s;
    *v = gval{nullptr, rows, constant, 1, nullptr};
    v->nhwc = 1;
    v->data16 = (nc_bf16 *)p;
    v->counts = counts;
    v->pairs = pairs;
    return NC_OK;
}

// A value of node i held as uint8 spike counts (data8), `rows` rows,
// channels last, for the fixed-point spike conv that reads it.
nc_status value_alloc8(grun *r, int i, int64_t rows, gval *v)
{
    void *p = nullptr;
    nc_status s = alloc_floats(r, rows, numel_of(r, i), 1, "uint8 spike counts", &p);
    if (s != NC_OK)
        return s;
    *v = gval{nullptr, rows, 0, 1, nullptr};
    v->nhwc = 1;
    v->data8 = (uint8_t *)p;
    v->counts = 1;
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

// The channels and pixels of value i's rows, [C, H·W] or [H·W, C].  A
// flatten's value is channels last only as its input was (flatten_keeps_nhwc),
// so its rows have its input's channels and pixels, not its own [C·H·W].
static void layout_dims(const grun *r, int i, int64_t *c, int64_t *hw)
{
    const nc_node *n = &r->net->nodes[i];
    const gnode &g = r->st->nodes[n->kind == NC_NODE_FLATTEN ? n->inputs[0] : i];
    *c = g.channels;
    *hw = g.inner;
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
    int64_t c, hw;
    layout_dims(r, i, &c, &hw);
    int64_t a = nhwc ? c : hw, b = nhwc ? hw : c;
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

// Does flatten node i pass its input's value on in the layout it has?  Yes
// when its only reader is a dense node: that node reads a channels-last value
// as it is, with its weight's columns in the same order (run_dense), which
// saves transposing the value at every pass.  An observer of the flatten is
// handed a plain copy (observed_value).
int flatten_keeps_nhwc(const grun *r, int i)
{
    const gnode &g = r->st->nodes[i];
    return r->net->nodes[i].kind == NC_NODE_FLATTEN && g.consumers == 1 &&
           r->net->nodes[g.last_use].kind == NC_NODE_DENSE;
}

// Value i (fp32, its bias added) in the standard layout in a new block
// (*out, for the caller to give back with pool_put), leaving value i as it is.
static nc_status plain_copy(grun *r, int i, float **out)
{
    const gval *v = &r->val[i];
    *out = nullptr;
    if (!v->data || v->data16 || v->pbias || !v->nhwc)
        return nc_fail(r->err, NC_ERR_INTERNAL, "%s: a plain copy of a value that is not fp32 channels last",
                       r->where);
    void *p = nullptr;
    nc_status s = alloc_floats(r, v->rows, numel_of(r, i), sizeof(float), "plain copy", &p);
    if (s != NC_OK)
        return s;
    int64_t c, hw;
    layout_dims(r, i, &c, &hw);
    s = launch_check(r, "transpose kernel", nc_launch_transpose_rows(r->st->stream, v->rows, hw, c, v->data, (float *)p));
    if (s != NC_OK) {
        pool_put(r->st, p);
        return s;
    }
    *out = (float *)p;
    return NC_OK;
}

// Value i as an observer sees it (*v): fp32, its bias added, in the standard
// layout.  A channels-last value is copied (*copy, for the caller to give
// back with pool_put; NULL when v is value i itself), not transposed in
// place: observing changes no layout, so the nodes after it run as they do
// unobserved and give the same values bit for bit (a dense node after a
// flatten reads a channels-last value with permuted weights, whose sums
// are in another order than the plain value's).
nc_status observed_value(grun *r, int i, gval *v, float **copy)
{
    *copy = nullptr;
    nc_status s = widen(r, i);
    if (s == NC_OK)
        s = add_pending_bias(r, i);
    if (s != NC_OK)
        return s;
    *v = r->val[i];
    if (!v->nhwc)
        return NC_OK;
    if ((s = plain_copy(r, i, copy)) != NC_OK)
        return s;
    v->data = *copy;
    v->owned = 0;
    v->nhwc = 0;
    return NC_OK;
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
    if (c->kind == NC_NODE_MAXPOOL) /* ANN: added after the max; SNN pre-spike: by the one-pass kernel as it reads */
        return !r->snn || (c->maxpool_strategy == NC_MAXPOOL_PRE_SPIKE && nc_prespike_max_fits(&r->st->nodes[j].win));
    return 0;
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

} // namespace ncg
