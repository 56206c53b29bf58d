// nc_gpu_train_graph.cu — the GPU trainer's steps as recorded CUDA graphs
// (see nc_gpu_train_graph.h).
//
// The capture runs in relaxed mode: an allocation while recording (a bf16
// copy's first buffer, cuBLAS's workspace) is allowed and stays, since
// nothing is freed without the free count moving on.  A call that must wait
// for the stream (a buffer that grows frees the old one after a sync) cannot
// be captured: the capture ends in an error, the step runs again as queued,
// and its shape is not recorded again (until a free starts every shape over).
#include "gpu/nc_gpu_train_graph.h"

#include <new>
#include <stdio.h>
#include <string.h>
#include <vector>

#include "gpu/nc_gpu_internal.h"

extern "C" {
#include "sim/nc_train_backend.h"
}

namespace {

// A fine-tuning run has one trainer at a time, with two batch sizes (the
// full batch and an epoch's last); a few more trainers' graphs may wait.
constexpr size_t kMaxGraphs = 8;

struct step_graph {
    uintptr_t owner = 0;
    int64_t batch = 0;
    int steps = 0;                    // steps of this shape begun
    cudaGraphExec_t exec = nullptr;
    size_t nodes = 0;
    long long replays = 0;
    unsigned long long last_used = 0;
    char refused[200] = "";           // why this shape runs as queued
};

} // namespace

struct nc_step_graphs {
    std::vector<step_graph> graphs;
    int active = -1;                  // the shape being recorded or replayed
    int mode = NC_STEP_RUN;
    uint64_t frees = 0;               // buffers freed by the backend itself
    uint64_t table_frees = 0;         // the total count the shapes in `graphs` were seen under
    char spoiled[200] = "";           // the first failure while recording
    unsigned long long clock = 0;
};

nc_step_graphs *nc_step_graphs_new(void) { return new (std::nothrow) nc_step_graphs(); }

static void drop(step_graph &g)
{
    if (g.exec) // a launch still running finishes first (the driver frees it then)
        (void)cudaGraphExecDestroy(g.exec);
    g.exec = nullptr;
    g.nodes = 0;
}

void nc_step_graphs_free(nc_step_graphs *s)
{
    if (!s)
        return;
    for (step_graph &g : s->graphs)
        drop(g);
    delete s;
}

// After a free every shape is forgotten — a graph may hold freed addresses,
// and an owner may now be a new trainer at a freed one's address — and
// starts again from a step as queued.
static void forget_after_free(nc_step_graphs *s, uint64_t frees)
{
    if (frees == s->table_frees)
        return;
    for (step_graph &g : s->graphs)
        drop(g);
    s->graphs.clear();
    s->table_frees = frees;
}

// Beyond kMaxGraphs recorded, the least recently used other than `keep` goes.
static void evict_beyond_limit(nc_step_graphs *s, int keep)
{
    for (;;) {
        size_t recorded = 0;
        int old = -1;
        for (size_t k = 0; k < s->graphs.size(); k++) {
            const step_graph &g = s->graphs[k];
            recorded += g.exec != nullptr;
            if ((int)k != keep && g.exec && (old < 0 || g.last_used < s->graphs[old].last_used))
                old = (int)k;
        }
        if (recorded <= kMaxGraphs || old < 0)
            return;
        drop(s->graphs[old]);
        s->graphs[old].steps = 0; // recorded again should it come back
    }
}

static int find_or_add(nc_step_graphs *s, uintptr_t owner, int64_t batch)
{
    for (size_t k = 0; k < s->graphs.size(); k++)
        if (s->graphs[k].owner == owner && s->graphs[k].batch == batch)
            return (int)k;
    step_graph g;
    g.owner = owner;
    g.batch = batch;
    s->graphs.push_back(g);
    return (int)s->graphs.size() - 1;
}

// Graphs on (the engine option "graphs", NC_GPU_GRAPHS), and no fault
// injected other than "capture" (the fault tests count launches).
static int graphs_wanted(void)
{
    nc_gpu_options o = nc_gpu_options_get();
    int faults = o.fault && *o.fault && strcmp(o.fault, "capture") != 0;
    return o.graphs && !faults;
}

void nc_step_graphs_freed(nc_step_graphs *s)
{
    if (s)
        s->frees++;
}

bool nc_step_graphs_spoil(nc_step_graphs *s, const char *message)
{
    if (!s || s->mode != NC_STEP_RECORD)
        return false;
    if (!s->spoiled[0])
        snprintf(s->spoiled, sizeof s->spoiled, "%s", message);
    return true;
}

int nc_step_graphs_begin(nc_step_graphs *s, cudaStream_t stream, uintptr_t owner, int64_t batch,
                         uint64_t other_frees)
{
    s->active = -1;
    s->mode = NC_STEP_RUN;
    if (!graphs_wanted())
        return NC_STEP_RUN;
    forget_after_free(s, s->frees + other_frees);
    int k = find_or_add(s, owner, batch);
    step_graph &g = s->graphs[k];
    g.last_used = ++s->clock;
    if (g.refused[0])
        return NC_STEP_RUN;
    if (g.exec) {
        s->active = k;
        s->mode = NC_STEP_REPLAY;
        return NC_STEP_REPLAY;
    }
    if (g.steps++ < 1) // the first step plans and sizes: as queued
        return NC_STEP_RUN;
    cudaError_t e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed);
    if (e != cudaSuccess) {
        snprintf(g.refused, sizeof g.refused, "cudaStreamBeginCapture failed: %s", cudaGetErrorString(e));
        (void)cudaGetLastError();
        return NC_STEP_RUN;
    }
    if (nc_gpu_fault_capture()) // a call that cannot be captured: the capture is void
        (void)cudaStreamSynchronize(stream);
    s->active = k;
    s->mode = NC_STEP_RECORD;
    s->spoiled[0] = 0;
    return NC_STEP_RECORD;
}

// Ends the capture of shape g; the executable graph, or NULL with g.refused set.
static cudaGraphExec_t end_recording(step_graph &g, cudaStream_t stream, const char *spoiled)
{
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaError_t e = cudaStreamEndCapture(stream, &graph);
    if (e == cudaSuccess && !spoiled)
        e = cudaGraphInstantiate(&exec, graph, 0);
    if (graph) {
        (void)cudaGraphGetNodes(graph, nullptr, &g.nodes);
        cudaGraphDestroy(graph);
    }
    if (spoiled || e != cudaSuccess) {
        snprintf(g.refused, sizeof g.refused, "%.190s", spoiled ? spoiled : cudaGetErrorString(e));
        if (exec)
            cudaGraphExecDestroy(exec);
        (void)cudaGetLastError();
        return nullptr;
    }
    return exec;
}

int nc_step_graphs_end(nc_step_graphs *s, cudaStream_t stream, cudaError_t *launch)
{
    *launch = cudaSuccess;
    int k = s->active, mode = s->mode;
    s->active = -1;
    s->mode = NC_STEP_RUN;
    if (k < 0 || mode == NC_STEP_RUN)
        return 0;
    step_graph &g = s->graphs[k];
    if (mode == NC_STEP_RECORD) {
        g.exec = end_recording(g, stream, s->spoiled[0] ? s->spoiled : nullptr);
        if (!g.exec)
            return 1;
        evict_beyond_limit(s, k);
    }
    *launch = cudaGraphLaunch(g.exec, stream);
    if (*launch == cudaSuccess)
        g.replays++;
    return 0;
}

void nc_step_graphs_describe(const nc_step_graphs *s, char *buf, size_t size)
{
    size_t len = 0;
    auto put = [&](const char *fmt, auto... args) {
        if (len < size)
            len += (size_t)snprintf(buf + len, size - len, fmt, args...);
    };
    if (size)
        buf[0] = 0;
    if (!s)
        return;
    put("training steps (NC_GPU_GRAPHS=%d): %s\n", graphs_wanted(),
        graphs_wanted() ? "from the second step of a batch size, one CUDA graph per step" : "queued call by call");
    if (graphs_wanted() && s->graphs.empty())
        put("  no step recorded (a data-parallel run queues its steps call by call)\n");
    for (const step_graph &g : s->graphs) {
        if (g.exec)
            put("  batch %lld: CUDA graph of %zu nodes, run %lld times\n", (long long)g.batch, g.nodes, g.replays);
        else if (g.refused[0])
            put("  batch %lld: queued call by call, the capture failed: %.160s\n", (long long)g.batch, g.refused);
    }
}
