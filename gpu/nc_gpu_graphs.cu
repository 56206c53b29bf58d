// nc_gpu_graphs.cu — a forward pass as one CUDA graph.
//
// A pass is tens of kernel launches and cuBLAS/cuDNN calls; replayed as a
// graph it is one launch, with no host work between the nodes.  The first
// plain pass of a batch shape plans its convolutions (cuDNN times its
// algorithms and compiles engines: that cannot be captured), the second is
// captured, and every later pass of that shape replays the graph.
//
// A graph bakes in every device address its pass used.  So the pool blocks
// of the captured pass are held out of the pool for the graph's life
// (block::held; pool_get logs them through gpu_state::graph_log while the
// capture runs), the input of a replayed pass is uploaded into the graph's
// own input block (begin_run asks graph_input), and the output is read from
// the graph's output block.  Graphs are forgotten — their blocks back to the
// pool — when the weights or the precision change (a load empties the pool:
// pool_trim), when the device runs out of memory (pool_get), and, least
// recently used first, beyond kMaxGraphs.
//
// A capture that fails (a call the driver cannot capture, a library that
// refuses) is not an error: the pass runs node by node, and the shape is
// never captured again (its reason shows in graphs_describe).
#include "gpu/nc_gpu_engine.h"

#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <vector>

namespace ncg {

// Each graph holds its pass's working set: an evaluation needs one or two
// shapes (its batch, and the steps of another T), a benchmark one.
constexpr size_t kMaxGraphs = 4;

// May this pass run as a graph?  Not with an observer (it reads values
// between the nodes), not with Poisson encoding (a graph would replay the
// same random numbers), not under fault injection (the tests count launches
// and allocations; "capture" alone is the fault of the capture itself), not
// with graphs=off, not while profiling node by node.
static int graph_wanted(const grun *r)
{
    nc_gpu_options o = nc_gpu_options_get();
    int faults = o.fault && *o.fault && strcmp(o.fault, "capture") != 0;
    if (!o.graphs || faults || r->observe || r->prof)
        return 0;
    return !r->snn || r->seq || r->o->encoding == NC_ENCODING_DIRECT;
}

static int same_shape(const pass_graph &g, const grun *r)
{
    return g.mode == (int)r->o->mode && g.T == r->T && g.N == r->N && g.seq == r->seq &&
           g.encoding == (int)r->o->encoding;
}

static int find_graph(const gpu_state *st, const grun *r)
{
    for (size_t k = 0; k < st->graphs.size(); k++)
        if (same_shape(st->graphs[k], r))
            return (int)k;
    return -1;
}

float *graph_input(gpu_state *st, const grun *r)
{
    if (!graph_wanted(r))
        return nullptr;
    int k = find_graph(st, r);
    return k >= 0 && st->graphs[k].exec ? st->graphs[k].input : nullptr;
}

// Graph k's blocks back to the pool (free for the next pass), its graph destroyed.
static void release_graph(gpu_state *st, pass_graph &g)
{
    if (g.exec)
        cudaGraphExecDestroy(g.exec);
    g.exec = nullptr;
    for (void *p : g.blocks)
        for (block &b : st->pool)
            if (b.ptr == p) {
                b.held = 0;
                b.in_use = 0;
            }
    g.blocks.clear();
    g.held_bytes = 0;
}

void graphs_forget(gpu_state *st)
{
    if (st->graphs.empty())
        return;
    (void)cudaStreamSynchronize(st->stream); // a replay may still read its blocks
    for (pass_graph &g : st->graphs)
        release_graph(st, g);
    st->graphs.clear();
    (void)cudaGetLastError();
}

// Beyond kMaxGraphs captured, the least recently used other than `keep` goes.
static void evict_beyond_limit(gpu_state *st, int keep)
{
    size_t captured = 0;
    for (const pass_graph &g : st->graphs)
        captured += g.exec != nullptr;
    while (captured > kMaxGraphs) {
        int old = -1;
        for (size_t k = 0; k < st->graphs.size(); k++)
            if ((int)k != keep && st->graphs[k].exec &&
                (old < 0 || st->graphs[k].last_used < st->graphs[old].last_used))
                old = (int)k;
        if (old < 0)
            return;
        (void)cudaStreamSynchronize(st->stream);
        release_graph(st, st->graphs[old]);
        st->graphs[old].passes = 0; // captured again should it come back
        captured--;
    }
}

// The progress of a replayed pass: every node at once (Cancel still ends the
// run, one pass later than node by node could).
static nc_status report_whole_pass(grun *r)
{
    if (!r->o->progress)
        return NC_OK;
    nc_progress p = {"simulate", r->net->n_nodes, r->net->n_nodes, 0.0};
    if (r->o->progress(r->o->progress_user, &p) != 0)
        return nc_fail(r->err, NC_ERR_CANCELLED, "gpu engine: cancelled after a pass");
    return NC_OK;
}

static nc_status replay(grun *r, pass_graph &g, float *d_input)
{
    cudaStream_t s = r->st->stream;
    if (d_input != g.input) { // begin_run put the input elsewhere: copy it in
        cudaError_t e = cudaMemcpyAsync(g.input, d_input, g.input_bytes, cudaMemcpyDeviceToDevice, s);
        if (e != cudaSuccess)
            return nc_gpu_fail_cuda(r->err, "gpu engine", "cudaMemcpyAsync (input into the graph)", e);
    }
    cudaError_t e = cudaGraphLaunch(g.exec, s);
    if (e != cudaSuccess)
        return nc_gpu_fail_cuda(r->err, "gpu engine", "cudaGraphLaunch", e);
    gval out = g.output;
    out.owned = 0; // the graph's: never back to the pool
    out.data16 = nullptr;
    out.data8 = nullptr;
    r->val[r->net->output] = out;
    g.last_used = ++r->st->graph_clock;
    return report_whole_pass(r);
}

// The capture failed (status s, or CUDA error ce): the values the attempt
// made go back to the pool, its error is forgotten, the shape is marked
// never to be captured again, and the pass runs node by node.
static nc_status run_uncaptured(grun *r, pass_graph &g, float *d_input, nc_status s, cudaError_t ce)
{
    snprintf(g.refused, sizeof g.refused, "%.230s",
             s != NC_OK && r->err ? r->err->message : cudaGetErrorString(ce));
    (void)cudaGetLastError();
    for (gval &v : r->val)
        value_free(r, &v);
    if (r->err)
        *r->err = nc_error{};
    return run_nodes(r, d_input);
}

// Hands the blocks of the captured pass to graph g.
static void hold_blocks(gpu_state *st, pass_graph &g, const std::vector<void *> &log)
{
    g.blocks = log;
    for (void *p : log)
        for (block &b : st->pool)
            if (b.ptr == p) {
                b.held = 1;
                b.in_use = 1;
                g.held_bytes += b.bytes;
            }
}

static nc_status capture(grun *r, int k, float *d_input)
{
    gpu_state *st = r->st;
    std::vector<void *> log{d_input}; // allocated before the capture began
    cudaGraph_t graph = nullptr;
    nc_status s = NC_OK;
    cudaError_t ce = cudaStreamBeginCapture(st->stream, cudaStreamCaptureModeRelaxed);
    if (ce == cudaSuccess && nc_gpu_fault_capture()) // a call that cannot be captured: the capture is void
        (void)cudaStreamSynchronize(st->stream);
    if (ce == cudaSuccess) {
        st->graph_log = &log;
        s = run_nodes(r, d_input);
        st->graph_log = nullptr;
        ce = cudaStreamEndCapture(st->stream, &graph);
    }
    cudaGraphExec_t exec = nullptr;
    if (s == NC_OK && ce == cudaSuccess)
        ce = cudaGraphInstantiate(&exec, graph, 0);
    size_t nodes = 0;
    if (graph) {
        (void)cudaGraphGetNodes(graph, nullptr, &nodes);
        cudaGraphDestroy(graph);
    }
    pass_graph &g = st->graphs[k];
    if (s == NC_ERR_CANCELLED) { // the user's, not the capture's: the pass ends here
        for (gval &v : r->val)
            value_free(r, &v);
        (void)cudaGetLastError();
        return s;
    }
    if (s != NC_OK || ce != cudaSuccess)
        return run_uncaptured(r, g, d_input, s, ce);
    hold_blocks(st, g, log);
    g.exec = exec;
    g.input = d_input;
    g.input_bytes = (size_t)(r->seq ? (int64_t)r->T * r->N : r->N) * (size_t)numel_of(r, r->net->input) * sizeof(float);
    g.output = r->val[r->net->output];
    g.nodes = (int)nodes;
    r->val[r->net->output].owned = 0; // the graph's now
    r->val[r->net->output].data16 = nullptr;
    r->val[r->net->output].data8 = nullptr;
    evict_beyond_limit(st, k);
    return replay(r, st->graphs[k], d_input);
}

nc_status run_pass(grun *r, float *d_input)
{
    gpu_state *st = r->st;
    if (!graph_wanted(r))
        return run_nodes(r, d_input);
    int k = find_graph(st, r);
    if (k >= 0 && st->graphs[k].exec)
        return replay(r, st->graphs[k], d_input);
    if (k < 0) {
        pass_graph g;
        g.mode = (int)r->o->mode;
        g.T = r->T;
        g.N = r->N;
        g.seq = r->seq;
        g.encoding = (int)r->o->encoding;
        st->graphs.push_back(g);
        k = (int)st->graphs.size() - 1;
    }
    pass_graph &g = st->graphs[k];
    if (g.refused[0] || g.passes++ < 1)
        return run_nodes(r, d_input);
    return capture(r, k, d_input);
}

static const char *mode_name(int mode)
{
    return mode == NC_MODE_SNN ? "SNN" : mode == NC_MODE_QCFS ? "QCFS" : "ANN";
}

size_t graphs_describe(const gpu_state *st, char *buf, size_t size)
{
    size_t len = 0;
    auto put = [&](const char *fmt, auto... args) {
        if (len < size)
            len += (size_t)snprintf(buf + len, size - len, fmt, args...);
    };
    nc_gpu_options o = nc_gpu_options_get();
    put("forward passes (NC_GPU_GRAPHS=%d): %s\n", o.graphs,
        o.graphs ? "a batch shape seen twice replays as one CUDA graph" : "node by node");
    for (const pass_graph &g : st->graphs) {
        if (g.exec)
            put("  %s, T = %d, N = %lld: CUDA graph of %d nodes, %.1f MiB held\n", mode_name(g.mode), g.T,
                (long long)g.N, g.nodes, g.held_bytes / 1048576.0);
        else if (g.refused[0])
            put("  %s, T = %d, N = %lld: node by node, the capture failed: %.160s\n", mode_name(g.mode), g.T,
                (long long)g.N, g.refused);
    }
    return len < size ? len : size;
}

} // namespace ncg
