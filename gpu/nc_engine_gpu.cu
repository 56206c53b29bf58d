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
#include "gpu/nc_gpu_engine.h"
#include "gpu/nc_gpu_nccl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <new>
#include <string>
#include <vector>

namespace ncg {

// ---- observers -----------------------------------------------------------------------------

static nc_status host_buffer(grun *r, size_t bytes, float **out)
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
// ANN/QCFS mode; in SNN mode T·n rows (n = r->step_n, the first samples of
// each step: all N, or with sums the observer's few) delivered in chunks of
// whole steps (a constant value once per step), each copied to the host
// just before.
nc_status deliver(grun *r, const gval *v, int node, int64_t per_row,
                  void (*fn)(void *, int, const float *, int64_t, int64_t), void *user)
{
    const int64_t budget = 64ll << 20;
    int64_t n = r->snn ? r->step_n : r->N;
    if (n == 0)
        return NC_OK;
    int64_t step_floats = r->N * per_row, shown = n * per_row;
    int steps = r->snn ? r->T : 1;
    int64_t k = v->constant || !r->snn ? 1 : std::max<int64_t>(1, budget / std::max<int64_t>(1, shown * 4));
    k = std::min<int64_t>(k, steps);
    float *h = nullptr;
    nc_status s = host_buffer(r, (size_t)(k * shown) * sizeof(float), &h);
    if (s != NC_OK)
        return s;
    cudaStream_t st = r->st->stream;
    if (v->constant || !r->snn) {
        NC_CUDA_TRY(r->err, r->where, cudaMemcpyAsync(h, v->data, (size_t)shown * sizeof(float),
                                                      cudaMemcpyDeviceToHost, st));
        NC_CUDA_TRY(r->err, r->where, cudaStreamSynchronize(st));
        for (int t = 0; t < steps; t++)
            fn(user, node, h, n, per_row);
        return NC_OK;
    }
    for (int64_t t0 = 0; t0 < steps; t0 += k) {
        int64_t cnt = std::min<int64_t>(k, steps - t0);
        // the first n samples of each step: rows of `shown` floats, step_floats apart
        NC_CUDA_TRY(r->err, r->where, cudaMemcpy2DAsync(h, (size_t)shown * sizeof(float), v->data + t0 * step_floats,
                                                        (size_t)step_floats * sizeof(float),
                                                        (size_t)shown * sizeof(float), (size_t)cnt,
                                                        cudaMemcpyDeviceToHost, st));
        NC_CUDA_TRY(r->err, r->where, cudaStreamSynchronize(st));
        fn(user, node, h, cnt * n, per_row);
    }
    return NC_OK;
}

// With sums: IF node i's input current summed over the steps into the first
// half of a block that waits for its spike counts (deliver_sums).
nc_status sum_input_steps(grun *r, int i)
{
    int from = r->net->nodes[i].inputs[0];
    gval in;
    float *copy = nullptr;
    nc_status s = observed_value(r, from, &in, &copy);
    int64_t n = r->N * numel_of(r, i);
    void *p = nullptr;
    if (s == NC_OK && (s = alloc_floats(r, 2, n, sizeof(float), "sums over the steps", &p)) == NC_OK) {
        r->sums_block = (float *)p;
        s = launch_check(r, "step sums kernel", nc_launch_step_sums(r->st->stream, r->T, n, in.constant ? 0 : n,
                                                                    in.data, 0, r->sums_block));
    }
    pool_put(r->st, copy); /* the stream's later work that takes the block runs after the sums */
    return s;
}

// With sums: IF node i's spike counts beside its input sums, both copied to
// the host at once and handed to the observer's observe_sums.
static nc_status deliver_sums(grun *r, int i)
{
    const nc_observer *ob = r->o->observer;
    gval v;
    float *copy = nullptr;
    nc_status s = observed_value(r, i, &v, &copy);
    int64_t per_row = numel_of(r, i), n = r->N * per_row;
    if (s == NC_OK)
        s = launch_check(r, "step sums kernel", nc_launch_step_sums(r->st->stream, r->T, n, v.constant ? 0 : n, v.data,
                                                                    1, r->sums_block + n));
    pool_put(r->st, copy);
    float *h = nullptr;
    if (s == NC_OK)
        s = host_buffer(r, (size_t)(2 * n) * sizeof(float), &h);
    if (s != NC_OK)
        return s;
    NC_CUDA_TRY(r->err, r->where, cudaMemcpyAsync(h, r->sums_block, (size_t)(2 * n) * sizeof(float),
                                                  cudaMemcpyDeviceToHost, r->st->stream));
    NC_CUDA_TRY(r->err, r->where, cudaStreamSynchronize(r->st->stream));
    pool_put(r->st, r->sums_block);
    r->sums_block = nullptr;
    ob->observe_sums(ob->user, i, h + n, h, r->N, per_row);
    return NC_OK;
}

static void release_after(grun *r, int i)
{
    const nc_node *n = &r->net->nodes[i];
    for (int k = 0; k < n->n_inputs; k++)
        if (r->st->nodes[n->inputs[k]].last_use == i)
            value_free(r, &r->val[n->inputs[k]]);
    if (r->st->nodes[i].last_use == i && i != r->net->output)
        value_free(r, &r->val[i]);
}

static nc_status observe_and_report(grun *r, int i)
{
    const nc_observer *ob = r->o->observer;
    nc_status s = NC_OK;
    if (ob && ob->observe) {
        gval v;
        float *copy = nullptr;
        if ((s = observed_value(r, i, &v, &copy)) == NC_OK)
            s = deliver(r, &v, i, numel_of(r, i), ob->observe, ob->user);
        pool_put(r->st, copy);
        if (s != NC_OK)
            return s;
    }
    if (r->sums_block && (s = deliver_sums(r, i)) != NC_OK) /* set only by the IF node just run */
        return s;
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
    pool_put(r->st, r->sums_block); /* a pass that failed between an IF node's two sums */
    r->sums_block = nullptr;
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

// The samples a pass of r->N_given samples computes.  A batch smaller than
// one of the same mode and steps that ran before runs padded to the smallest
// such batch, so that its convs reuse that batch's plans instead of planning
// for a new shape (seconds per conv in the exact mode; an evaluation's last
// batch is smaller than the others).  Only a pass whose padded samples change
// nothing that is seen: no observer (which sees every sample), direct
// encoding (Poisson's random numbers follow the sample count), a batch of
// images rather than a sequence.
static int64_t padded_batch(gpu_state *st, const grun *r, const nc_run_options *o)
{
    int mode = (int)o->mode;
    int64_t best = -1;
    for (const pass_shape &p : st->passes) {
        if (p.mode != mode || p.T != r->T)
            continue;
        if (p.N == r->N_given)
            return r->N_given;
        if (p.N > r->N_given && (best < 0 || p.N < best))
            best = p.N;
    }
    int paddable = !r->observe && !r->seq && (!r->snn || o->encoding == NC_ENCODING_DIRECT);
    if (paddable && best > 0)
        return best;
    st->passes.push_back(pass_shape{mode, r->T, r->N_given});
    return r->N_given;
}

// Sets up a run and uploads the input into a pool block (*d_input); pad: the
// batch may run padded (padded_batch).
nc_status begin_run(nc_engine *e, const nc_tensor *input, const nc_run_options *opts, grun *r, float **d_input,
                    int pad, nc_error *err)
{
    gpu_state *st = state_of(e);
    if (!st || !st->net || !e->net)
        return nc_fail(err, NC_ERR_ARGUMENT, "gpu engine: no network loaded");
    int seq = 0;
    nc_status s = nc_engine_check_options("gpu", opts, err);
    if (s == NC_OK)
        s = nc_engine_check_input("gpu", st->net, input, opts->mode == NC_MODE_SNN, opts->T, &seq, err);
    if (s != NC_OK)
        return s;
    NC_CUDA_TRY(err, "gpu engine", cudaSetDevice(st->device));
    r->e = e;
    r->st = st;
    r->net = st->net;
    r->o = opts;
    r->snn = opts->mode == NC_MODE_SNN;
    r->T = r->snn ? opts->T : 1;
    r->seq = seq;
    r->N = r->N_given = input->shape[seq];
    r->err = err;
    r->val.assign((size_t)st->net->n_nodes, gval{nullptr, 0, 0, 0, nullptr});
    const nc_observer *ob = opts->observer;
    r->sums = r->snn && ob && ob->observe_sums;
    r->observe = ob && (ob->observe || ob->observe_input || r->sums);
    r->step_n = r->sums ? std::min<int64_t>(std::max<int64_t>(ob->step_samples, 0), r->N) : r->N;
    if (pad)
        r->N = padded_batch(st, r, opts);
    snprintf(r->where, sizeof r->where, "gpu engine, input '%s'", st->net->nodes[st->net->input].name);
    int64_t numel = st->nodes[st->net->input].numel, rows = seq ? (int64_t)r->T * r->N : r->N;
    int64_t given = seq ? rows : r->N_given; // a sequence is never padded
    void *p = graph_input(st, r); // the pass replays a graph: its input block
    if (!p && (s = alloc_floats(r, rows, numel, sizeof(float), "input", &p)) != NC_OK)
        return s;
    *d_input = (float *)p;
    NC_CUDA_TRY(err, r->where, cudaMemcpyAsync(p, input->data, (size_t)(given * numel) * sizeof(float),
                                               cudaMemcpyHostToDevice, st->stream));
    if (rows > given) // the padding: zero images, whose results nobody reads
        NC_CUDA_TRY(err, r->where, cudaMemsetAsync((float *)p + given * numel, 0,
                                                   (size_t)((rows - given) * numel) * sizeof(float), st->stream));
    return NC_OK;
}

static nc_status copy_device_output(void *run, float *dst, int64_t n)
{
    grun *r = (grun *)run;
    // n = steps · N_given · F; a padded pass holds N rows per step, of which the first N_given are the caller's
    int64_t given = r->N_given * numel_of(r, r->net->output), steps = given ? n / given : 0;
    int64_t held = r->N * numel_of(r, r->net->output);
    cudaError_t e = cudaMemcpy2DAsync(dst, (size_t)given * sizeof(float), r->val[r->net->output].data,
                                      (size_t)held * sizeof(float), (size_t)given * sizeof(float), (size_t)steps,
                                      cudaMemcpyDeviceToHost, r->st->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(r->st->stream);
    if (e != cudaSuccess)
        return nc_gpu_fail_cuda(r->err, "gpu engine, output", "cudaMemcpyAsync (device to host)", e);
    return NC_OK;
}

// Copies the output node's value to a new [N, F] or [T, N, F] tensor.
static nc_status make_output(grun *r, nc_tensor **out)
{
    nc_output_value o = {"gpu", r->snn, r->T, r->val[r->net->output].constant, r->N_given,
                         numel_of(r, r->net->output)};
    return nc_engine_make_output(&o, copy_device_output, r, out, r->err);
}

static nc_status gpu_forward(nc_engine *e, const nc_tensor *input, const nc_run_options *opts, nc_tensor **out,
                      nc_error *err)
{
    nc_run_options defaults = {};
    defaults.mode = NC_MODE_ANN;
    defaults.T = 1;
    if (!opts)
        opts = &defaults;
    grun r = {};
    float *d_input = nullptr;
    nc_status s = begin_run(e, input, opts, &r, &d_input, 1, err);
    if (s == NC_OK)
        s = run_pass(&r, d_input);
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

static nc_status load_fail(const nc_node *n, nc_error *err, const char *what)
{
    return nc_fail(err, NC_ERR_SHAPE, "gpu engine, node '%s' (%s): %s", n->name, kind_name(n), what);
}

static nc_status load_window(const nc_net *net, int i, nc_gwin *g, nc_error *err)
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
    g->oh = nc_window_out_size(g->h, g->kh, g->sh, g->pt, g->pb, g->dh, n->ceil_mode);
    g->ow = nc_window_out_size(g->w, g->kw, g->sw, g->pl, g->pr, g->dw, n->ceil_mode);
    if (g->c < 1 || g->h < 1 || g->w < 1 || g->oh < 1 || g->ow < 1)
        return load_fail(n, err, "kernel, stride, padding or dilation do not fit the input");
    const char *misfit = nc_engine_window_misfit(n, in, g->oh, g->ow);
    return misfit ? load_fail(n, err, misfit) : NC_OK;
}

static nc_status load_check_node(const nc_net *net, int i, nc_error *err)
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
static int avgpool_const_count(const nc_gwin &g, int cip)
{
    int count = -1;
    for (int oy = 0; oy < g.oh; oy++) {
        nc_axis_taps ty = nc_taps_of(oy, g.kh, g.sh, g.pt, g.pb, g.dh, g.h);
        for (int ox = 0; ox < g.ow; ox++) {
            nc_axis_taps tx = nc_taps_of(ox, g.kw, g.sw, g.pl, g.pr, g.dw, g.w);
            int c = cip ? ty.n_padded * tx.n_padded : (ty.hi - ty.lo) * (tx.hi - tx.lo);
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
static void spike_analysis(const nc_net *net, std::vector<gnode> &g)
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

static nc_status upload(std::vector<void *> &params, const float *host, size_t n, float **out, const nc_node *node,
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

static nc_status gpu_load(nc_engine *e, const nc_net *net, nc_error *err)
{
    gpu_state *st = state_of(e);
    if (!net || net->n_nodes < 2 || net->input != 0 || net->output != net->n_nodes - 1)
        return nc_fail(err, NC_ERR_ARGUMENT,
                       "gpu engine: the network must start with its input node and end with its output node");
    NC_CUDA_TRY(err, "gpu engine", cudaSetDevice(st->device));
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
    for (gnode &g : nodes)
        recall_refusal(st, g);
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
    cudaSetDevice(st->device);
    if (st->stream)
        cudaStreamSynchronize(st->stream);
    free_params(st);
    pool_trim(st, 1);
    for (nc_conv_plan &p : st->plans)
        nc_cudnn_plan_free(&p);
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
    NC_CAP_SNN | NC_CAP_TRAINING | NC_CAP_DEVICE_MEMORY | NC_CAP_STEP_SUMS,
    gpu_supports,
    gpu_load,
    gpu_forward,
    gpu_destroy,
};

} // namespace ncg

using namespace ncg;

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
        cudaSetDevice(st->device);
        cudaStreamSynchronize(st->stream);
        graphs_forget(st); // they use the old precision's weight copies
        for (gnode &g : st->nodes)
            free_caches(g);
        st->prec = p;
    }
    return NC_OK;
}

// What ran node n (g) in the last pass, for the profile and bench: a conv's
// plan or kernel; a dense node that read its flatten's channels-last value.
static const char *node_desc(const nc_node *n, const gnode &g)
{
    if (n->kind == NC_NODE_CONV2D)
        return conv_desc(g);
    if (n->kind == NC_NODE_DENSE && g.read_hwc)
        return "cuBLAS GEMM on the flatten's channels-last value (weight columns permuted, no transpose)";
    return "";
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
    size_t len = (size_t)snprintf(buf, size, "convolutions (NC_GPU_CONV=%s; %s%s; %zu cuDNN plans kept)\n",
                                  st->conv == CONV_CUDNN    ? "cudnn"
                                  : st->conv == CONV_IM2COL ? "im2col"
                                  : st->conv == CONV_BF16X2 ? "bf16x2"
                                  : st->conv == CONV_UNFUSED ? "unfused"
                                  : st->conv == CONV_FUSED   ? "fused"
                                                            : "auto",
                                  have ? "" : "no cuDNN: ", why, st->plans.size());
    for (int i = 0; i < st->net->n_nodes && len < size; i++) {
        const nc_node *n = &st->net->nodes[i];
        const char *desc = node_desc(n, st->nodes[i]);
        if (!*desc)
            continue;
        len += (size_t)snprintf(buf + len, size - len, "  %s: %s\n", n->name, desc);
    }
    if (len < size)
        graphs_describe(st, buf + len, size - len);
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
        else if (strcmp(conv, "bf16x2") == 0)
            st->conv = CONV_BF16X2;
        else if (strcmp(conv, "unfused") == 0)
            st->conv = CONV_UNFUSED;
        else if (strcmp(conv, "fused") == 0)
            st->conv = CONV_FUSED;
        else if (strcmp(conv, "auto") != 0) {
            delete st;
            free(e);
            return nc_fail(err, NC_ERR_ARGUMENT,
                           "the gpu engine's conv='%s' (NC_GPU_CONV) is not a convolution path (auto, cudnn, im2col, bf16x2, unfused, fused)",
                           conv);
        }
    }
    nc_status s = NC_OK;
    const char *where = "gpu engine";
    st->device = nc_gpu_thread_device(); // one GPU per rank thread (gpu/nc_gpu_nccl.h); 0 with one GPU
    auto init = [&]() -> nc_status {
        NC_CUDA_TRY(err, where, cudaSetDevice(st->device));
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
        r.N = r.N_given = r0->N;
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
                        total > 0 ? 100.0 * t / total : 0.0, node_desc(nd, g));
            }
        } else
            fprintf(stderr, "# gpu profile failed: %s\n", err.message);
    }
    for (cudaEvent_t x : ev)
        if (x)
            cudaEventDestroy(x);
    (void)cudaGetLastError();
}


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
    nc_status s = begin_run(e, input, &o, &r0, &d_input, 0, err);
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
        r.N = r.N_given = r0.N;
        r.err = err;
        r.val.assign((size_t)st->net->n_nodes, gval{nullptr, 0, 0, 0, nullptr});
        cudaError_t ce = cudaEventRecord(st->ev0, st->stream);
        if (ce != cudaSuccess)
            s = nc_gpu_fail_cuda(err, "gpu engine timing", "cudaEventRecord", ce);
        if (s == NC_OK)
            s = run_pass(&r, d_input);
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
