// nc_gpu_engine.h — the GPU engine's state and the functions its files
// share (C++, gpu/ only).  The engine is split by job:
//   nc_engine_gpu.cu     the engine's entry points: load, a forward pass and
//                        its observers, timing, the public C functions
//   nc_gpu_values.cu     the pool of device blocks, values and their layouts
//   nc_gpu_conv_dense.cu conv and dense layers in every precision (cuDNN or
//                        im2col + cuBLAS)
//   nc_gpu_nodes.cu      every other node: input, pools, element-wise, neurons
//   nc_gpu_graphs.cu     a forward pass captured once as a CUDA graph, then replayed
//   nc_gpu_faults.cu     fault injection for the tests
//   nc_gpu_test_hooks.cu single kernels on host data, for the tests
#ifndef NC_GPU_ENGINE_H
#define NC_GPU_ENGINE_H

#include <stdint.h>

#include <deque>
#include <string>
#include <vector>

#include "gpu/nc_gpu_cudnn.h"
#include "gpu/nc_gpu_internal.h"

namespace ncg {

// ---- state ---------------------------------------------------------------------------

// The bf16 copies of a conv/dense weight that a GEMM precision needs
// (weights_for), built on first use from the fp32 weight they belong to.
struct weight_copies {
    nc_bf16 *wa16 = nullptr;                      // bf16 weights, for an analog operand
    nc_bf16 *ws[3] = {nullptr, nullptr, nullptr}; // θ/D-scaled weights in parts hi, mid, lo
    int ws_parts = 0;
};

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
    weight_copies wc;                    // made from w
    float *opscale = nullptr;            // D/θ per input channel
    // A dense node that reads its flatten's channels-last value (flatten_keeps_nhwc):
    // the weight with its columns in that order, column c·H·W + p of w at p·C + c
    // (p = y·W + x), and the copies made from it (freed with the caches above)
    float *w_hwc = nullptr;
    weight_copies wc_hwc;
    int read_hwc = 0;                    // its last pass read the value so (the profile and bench say it)
    // cuDNN path of a conv node (freed with the caches above)
    float *w_krsc = nullptr;             // the weight as [Cout, KH, KW, Cin]
    nc_bf16 *wk16_analog = nullptr;      // its bf16 rounding, for an analog operand
    nc_bf16 *wk16_spike = nullptr;       // θ/D-scaled bf16, for spike counts
    float *k_opscale = nullptr;          // D/θ per input channel, for those counts
    float *wk_parts[3] = {nullptr, nullptr, nullptr}; // exact fp32 mode: θ/D-scaled weight, TF32 hi, mid, lo
    nc_bf16 *wk_exact = nullptr;         // exact fp32 mode on bf16 tensor cores: hi, then [mid, lo] per tap
    nc_bf16 *wk_pair = nullptr;          // bf16 mode, own spike conv: θ/D-scaled weight in 2 bf16 parts, hi then mid
    void *wk_fx16 = nullptr;             // the same in 16-bit fixed point: steps [Cout] fp32, a [Cout, K] int8, b uint8
    char own_desc[240] = "";             // what ran the last pass when it was an own kernel (not cuDNN)
    int exact_refused = 0;               // cuDNN's graph API could not plan that mode
    char exact_why[200] = "";            // why (shown with the plan that runs instead)
    const nc_conv_plan *plan = nullptr;  // the plan of its last cuDNN pass (in gpu_state::plans)
};

// The batch shape of a pass: its mode, steps and samples.  Each conv plans at
// the first pass of a shape, so a smaller batch of a shape already planned
// (the last batch of an evaluation) runs padded to it (padded_batch).
struct pass_shape {
    int mode, T;
    int64_t N;
};

// A shape whose exact conv on bf16 parts cuDNN's graph API refused (for any
// number of rows: the key's rows are 0), kept as the plans are so that a
// network loaded again does not ask again.
struct kept_refusal {
    nc_conv_shape shape;
    char why[200];
};

struct block {
    void *ptr;
    size_t bytes;
    int in_use, used_this_run;
    int held; // a captured pass writes it (pass_graph): in use until that graph is forgotten
};

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
    int pairs; // counts for the exact conv on bf16 tensor cores: data16 holds the counts [rows, numel], then
               // each again twice side by side [rows, H, W, 2, C] (NC_CONV_BF16_EXACT)
    // Or as uint8 counts (counts = 1, channels last) that only a fixed-point
    // spike conv reads (nc_gpu_spike_conv_fx16.cu).
    uint8_t *data8;
    int made; // made with the conv before it, in one kernel: its own node has nothing left to do
};

// A forward pass captured as a CUDA graph for one batch shape
// (nc_gpu_graphs.cu).  The graph holds the device address of every block
// its pass used, so those blocks stay out of the pool while it lives.
struct pass_graph {
    int mode = 0, T = 0, seq = 0, encoding = 0;
    int64_t N = 0;
    int passes = 0;                 // plain passes of this shape: the first plans, the second is captured
    cudaGraphExec_t exec = nullptr; // NULL until captured
    float *input = nullptr;         // the block the graph reads its input from
    size_t input_bytes = 0;
    gval output = {};               // the output value the graph writes (in a held block)
    std::vector<void *> blocks;     // the held blocks
    size_t held_bytes = 0;
    int nodes = 0;                  // kernels and copies in the graph
    uint64_t last_used = 0;
    char refused[240] = "";         // why this shape runs node by node (a capture that failed)
};

// How convolutions run (NC_GPU_CONV): auto = cuDNN where it is faster than
// im2col + cuBLAS (tf32, bf16), and bf16's spike convs on the own kernels
// (16-bit fixed point on int8 tensor cores where it fits, else two bf16
// parts, the IF after a fixed-point one in its epilogue); bf16x2 = auto with
// two bf16 parts for all of those; unfused = auto with the IF in a kernel of
// its own; fused = auto with the IF in the epilogue of every fixed-point conv
// that fits (auto fuses only those of 32 input channels); cudnn = cuDNN in
// every precision it has; im2col = never cuDNN.
enum conv_impl { CONV_AUTO, CONV_CUDNN, CONV_IM2COL, CONV_BF16X2, CONV_UNFUSED, CONV_FUSED };

struct gpu_state {
    int device = 0;                     // the GPU of the thread that created the engine (nc_gpu_thread_device)
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
    // Convolution plans are kept for the engine's whole life, keyed by shape and
    // arithmetic: a plan never depends on the weights, so a network loaded
    // again (fine-tuning loads new weights after every epoch; the recipe
    // evaluates after every stage) or another with the same shapes reuses it.
    // The exact mode's graph engines compile for seconds per shape: without
    // this, every evaluation of a fine-tuning run planned all over again.
    std::deque<nc_conv_plan> plans;     // a deque: gnode::plan points into it

    std::vector<kept_refusal> refusals; // shapes the graph API refused
    std::vector<pass_shape> passes;     // every batch shape a plain pass has run (padded_batch)
    std::vector<pass_graph> graphs;     // captured passes (nc_gpu_graphs.cu)
    std::vector<void *> *graph_log = nullptr; // while a pass is captured: the blocks pool_get hands out
    uint64_t graph_clock = 0;
    float *host = nullptr;
    size_t host_bytes = 0;
    int host_pinned = 0;
};

inline gpu_state *state_of(const nc_engine *e) { return (gpu_state *)e->impl; }

inline const char *kind_name(const nc_node *n) { return nc_node_kind_name(n->kind); }

// ---- a forward pass -----------------------------------------------------------------


struct grun {
    nc_engine *e;
    gpu_state *st;
    const nc_net *net;
    const nc_run_options *o;
    int snn, T;
    int64_t N;        // the samples the pass computes: the caller's, or more (padded_batch)
    int64_t N_given;  // the caller's samples: the output holds these
    nc_error *err;
    std::vector<gval> val;
    int seq;          // the input is a sequence [T, N, ...] (SNN mode)
    int observe;      // an observer is set
    int sums;         // the observer takes IF nodes as sums over the steps (observe_sums)
    int64_t step_n;   // samples whose every step observers see: N, or with sums the observer's step_samples
    float *sums_block; // with sums: an IF node's input sums, then its spike counts (2 · N · numel)
    std::vector<void *> scratch; // work blocks of the current node
    cudaEvent_t *prof;           // NC_GPU_PROFILE: an event after each node (n_nodes + 1), or NULL
    char where[NC_NAME_MAX + 96];
};

// Per-channel kernels see a value as rows of [channels, inner]: a
// channels-last value is rows·inner rows of [channels, 1].
struct channel_view {
    int64_t rows;
    int channels;
    int64_t inner;
};

struct gemm_mode {
    nc_gemm_kind kind;
    int parts;  // bf16 parts of the weights
    int spike;  // the operand is fed as spike counts with θ/D in the weights
};

// ---- nc_gpu_values.cu ----------------------------------------------------------------

void free_caches(gnode &g);
void free_params(gpu_state *st);
void pool_trim(gpu_state *st, int all);
void pool_put(gpu_state *st, const void *p);
void set_where(grun *r, int i);
int64_t numel_of(const grun *r, int i);
nc_status launch_check(grun *r, const char *what, cudaError_t e);
nc_status alloc_floats(grun *r, int64_t rows, int64_t per_row, size_t elt, const char *what, void **out);
nc_status scratch(grun *r, int64_t rows, int64_t per_row, size_t elt, const char *what, void **out);
nc_status value_alloc(grun *r, int i, int64_t rows, int constant, gval *v);
void value_free(grun *r, gval *v);
nc_status value_alloc16(grun *r, int i, int64_t rows, int constant, int counts, int pairs, gval *v);
nc_status value_alloc8(grun *r, int i, int64_t rows, gval *v);
nc_status widen(grun *r, int i);
channel_view view_of(const grun *r, int i, const gval *v);
nc_status add_pending_bias(grun *r, int i);
nc_status to_layout(grun *r, int i, int nhwc);
nc_status materialize(grun *r, int i);
int flatten_keeps_nhwc(const grun *r, int i);
nc_status observed_value(grun *r, int i, gval *v, float **copy);
const gval *input_value(const grun *r, int i, int k);
nc_status value_like_input(grun *r, int i, gval *out, const float **src, const float **pbias);
int bias_fusable(const grun *r, int i);
nc_status cuda_alloc(grun *r, size_t bytes, void **p, const char *what);

// ---- nc_gpu_conv_dense.cu ------------------------------------------------------------

gemm_mode mode_for(nc_gpu_precision p, int spike_operand);
int conv_math(const grun *r, int i, int spike_in, int constant_in);
// Is node i's value (IF spikes, or their average pool) read by one
// fixed-point spike conv, which takes it as uint8 counts (gval.data8)?
int reads_counts8(const grun *r, int i);
// What ran conv node i's last pass: a cuDNN plan's line, the own kernel's, or im2col.
const char *conv_desc(const gnode &g);
nc_status run_conv(grun *r, int i, gval *out);
nc_status dense_gemm(cublasHandle_t h, const gemm_mode &m, int64_t R, int fin, int fout, const void *op,
                     const void *const wp[3], float *out, const char *where, nc_error *err);
nc_status run_dense(grun *r, int i, gval *out);
// At load: node g's exact conv runs by TF32 parts if the graph API refused
// its shape before (gpu_state::refusals).
void recall_refusal(const gpu_state *st, gnode &g);

// ---- nc_gpu_nodes.cu -----------------------------------------------------------------

int counts_for_conv(const grun *r, int i, int out_nhwc);
// The 2×2 average pool that IF node i's spikes go to when the two run as one
// kernel (its only reader, on a channels-last current), else -1.
int fused_pool_of(const grun *r, int i, int in_nhwc);
nc_status run_node(grun *r, int i, float *d_input, gval *out);

// ---- nc_gpu_graphs.cu ----------------------------------------------------------------

// Runs the pass of r on d_input: by its shape's CUDA graph where there is one
// (r->val then holds the graph's output, borrowed), captured at the shape's
// second plain pass, else node by node (run_nodes).
nc_status run_pass(grun *r, float *d_input);
// The input block of the graph that will run r's pass, or NULL (begin_run
// uploads the input there instead of into a new block).
float *graph_input(gpu_state *st, const grun *r);
// Destroys every graph and returns its blocks to the pool (weights,
// precision or the pool changed).
void graphs_forget(gpu_state *st);
// Appends a line on the graphs to buf (neurocuda bench/engines).
size_t graphs_describe(const gpu_state *st, char *buf, size_t size);

// ---- nc_engine_gpu.cu ----------------------------------------------------------------

extern const nc_engine_ops gpu_ops;
nc_status deliver(grun *r, const gval *v, int node, int64_t per_row, void (*fn)(void *, int, const float *,
                  int64_t, int64_t), void *user);
nc_status sum_input_steps(grun *r, int i);
nc_status run_nodes(grun *r, float *d_input);
nc_status finish_run(grun *r, nc_status s);
nc_status begin_run(nc_engine *e, const nc_tensor *input, const nc_run_options *opts, grun *r,
                    float **d_input, int pad, nc_error *err);
int gpu_supports(nc_engine *e, const nc_net *net, int node, char *why, size_t why_size);
void gpu_destroy(nc_engine *e);

} // namespace ncg

#endif
