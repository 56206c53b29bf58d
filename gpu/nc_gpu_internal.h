// nc_gpu_internal.h — shared by the .cu files of gpu/ (C++ only): error
// checking that turns CUDA and cuBLAS failures into nc_status, the kernel
// launchers (nc_gpu_kernels.cu) and the GEMM dispatcher (nc_gpu_blas.cu).
//
// Conventions: every launcher takes an explicit stream, checks its shapes,
// launches, and returns the launch's cudaError_t (cudaGetLastError) so that
// the caller can name the node.  No launcher allocates or synchronises.
#ifndef NC_GPU_INTERNAL_H
#define NC_GPU_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "gpu/nc_gpu.h"
#include "sim/nc_window.h"

typedef __nv_bfloat16 nc_bf16;

// ---- errors ---------------------------------------------------------------

// Fills err from a CUDA error: NC_ERR_MEMORY for out of memory, else
// NC_ERR_DEVICE; the message names `where` (engine and node), the call and
// CUDA's reason.  Clears a non-sticky error so that the engine stays usable.
nc_status nc_gpu_fail_cuda(nc_error *err, const char *where, const char *call, cudaError_t e);
nc_status nc_gpu_fail_cublas(nc_error *err, const char *where, const char *call, cublasStatus_t s);

// Fault injection, for tests only (nc_engine_gpu.cu; see nc_gpu.h): every
// device allocation of the engine goes through nc_gpu_fault_malloc and every
// checked kernel launch through nc_gpu_fault_launch.  Without NC_GPU_FAULT
// they are cudaMalloc and the identity.
cudaError_t nc_gpu_fault_malloc(void **p, size_t bytes);
cudaError_t nc_gpu_fault_launch(cudaError_t e);
// 1 when the fault "graph" is set: cuDNN's graph API is to refuse every plan.
int nc_gpu_fault_graph(void);
// NC_GPU_FAULT "capture": every capture of a pass as a CUDA graph fails
// (nc_gpu_graphs.cu makes a call that cannot be captured), so the tests see
// the pass fall back to running node by node.
int nc_gpu_fault_capture(void);

// Counts a sync of the GPU trainer; NC_GPU_PROFILE_SYNCS=A:B brackets syncs A
// to B in a profiler range (nc_gpu_profile_range.cu).
void nc_gpu_profile_range_tick(void);

#define NC_CUDA_TRY(err, where, call)                                                         \
    do {                                                                                      \
        cudaError_t nc_e_ = (call);                                                           \
        if (nc_e_ != cudaSuccess)                                                             \
            return nc_gpu_fail_cuda((err), (where), #call, nc_e_);                            \
    } while (0)

#define NC_CUBLAS_TRY(err, where, call)                                                       \
    do {                                                                                      \
        cublasStatus_t nc_s_ = (call);                                                        \
        if (nc_s_ != CUBLAS_STATUS_SUCCESS)                                                   \
            return nc_gpu_fail_cublas((err), (where), #call, nc_s_);                          \
    } while (0)

// ---- launch grids ------------------------------------------------------------

constexpr int kThreads = 256;

// Blocks for n items at kThreads per block, for grid-stride loops (at most
// 2^20 blocks: many times what the GPU holds at once).
inline unsigned grid_for(int64_t n)
{
    int64_t b = (n + kThreads - 1) / kThreads;
    if (b < 1)
        b = 1;
    if (b > (1 << 20))
        b = 1 << 20;
    return (unsigned)b;
}

#ifdef __CUDACC__
__device__ __forceinline__ int64_t gtid() { return (int64_t)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t gstride() { return (int64_t)gridDim.x * blockDim.x; }
#endif

// ---- geometry of a window (conv, pools): the fields of nc_window (sim/nc_window.h,
// whose tap arithmetic the kernels share), flattened for kernel arguments -----

struct nc_gwin {
    int c, h, w;     // input channels and size per sample
    int oh, ow;      // output size
    int kh, kw, sh, sw, dh, dw;
    int pt, pl, pb, pr; // pad top, left, bottom, right
};

// ---- kernel launchers (nc_gpu_kernels.cu) ---------------------------------

// The IF recurrence (see nc_gpu_test_if): total = n·c·inner neurons.
cudaError_t nc_launch_if(cudaStream_t s, int T, int64_t total, int c, int64_t inner, const float *th,
                         int n_th, float v0f, int reset_zero, int fire_gt, const float *bias,
                         const float *in, int64_t in_step, float *out, int64_t out_step);
// The same with the current as fp32 (in) or bf16 (in16: a bf16 convolution's
// output), and the spikes as θ or 0 (out) or as counts 1 or 0 for a
// convolution whose weights carry θ: bf16 (out_counts) or fp32
// (out_counts32, the exact fp32 mode).  Exactly one input and one output.
struct nc_if_io {
    const float *in;
    const nc_bf16 *in16;
    float *out;
    nc_bf16 *out_counts;
    float *out_counts32;
    nc_bf16 *out_pairs; // with out_counts, channels last only: each count also written twice side by side,
                        // [.., 2, C] (the exact conv's second operand; NULL: none)
    uint8_t *out_counts8; // the counts 1 or 0 as bytes (the fixed-point spike conv's operand)
};
// IF neurons over [n, h, w, c] (channels last; the current as fp32 in or
// bf16 in16, in_step apart per step, 0 for a constant one), each step's
// spikes (θ or 0) averaged over 2×2 windows with stride 2 into out
// [T, n, h/2, w/2, c]: the IF kernel then avgpool_2x2 in one pass, bit for
// bit.
cudaError_t nc_launch_if_avgpool2(cudaStream_t s, int T, int64_t n, int c, int h, int w, const float *th, int n_th,
                                  float v0f, int reset_zero, int fire_gt, const float *bias, const float *in,
                                  const nc_bf16 *in16, int64_t in_step, float *out);
cudaError_t nc_launch_if_io(cudaStream_t s, int T, int64_t total, int c, int64_t inner, const float *th, int n_th,
                            float v0f, int reset_zero, int fire_gt, const float *bias, const nc_if_io *io,
                            int64_t in_step, int64_t out_step);

// Element-wise neurons over `rows` rows of [c, inner]; bias per channel
// added first (may be NULL).  In place is fine.
cudaError_t nc_launch_relu(cudaStream_t s, int64_t rows, int c, int64_t inner, const float *bias,
                           const float *in, float *out);
cudaError_t nc_launch_clip(cudaStream_t s, int64_t rows, int c, int64_t inner, const float *bias,
                           float lo, float hi, const float *in, float *out);
cudaError_t nc_launch_qcfs(cudaStream_t s, int64_t rows, int c, int64_t inner, const float *bias,
                           const float *lambda, int n_lambda, int levels, float shift, const float *in,
                           float *out);
// out[r, ch, i] = in[...] + bias[ch] (in place is fine).
cudaError_t nc_launch_add_bias(cudaStream_t s, int64_t rows, int c, int64_t inner, const float *bias,
                               const float *in, float *out);
cudaError_t nc_launch_affine(cudaStream_t s, int64_t rows, int c, int64_t inner, const float *scale,
                             const float *shift, const float *in, float *out);
// NIR's Scale over [rows, numel]: out = in·w[k], or in·w[0] when n_w == 1.
cudaError_t nc_launch_scale_values(cudaStream_t s, int64_t rows, int64_t numel, const float *w, int64_t n_w,
                                   const float *in, float *out);
// out = a + b over n floats; a (b) is read at index i % a_n (i % b_n), so a
// value that is the same at every step repeats.
cudaError_t nc_launch_add(cudaStream_t s, int64_t n, const float *a, int64_t a_n, const float *b,
                          int64_t b_n, float *out);
// Concat: out row r, columns [off, off + per_row) = in row (r % in_rows).
cudaError_t nc_launch_concat_part(cudaStream_t s, int64_t rows, int64_t out_row, int64_t off,
                                  const float *in, int64_t in_rows, int64_t per_row, float *out);
// out[i] = in[i % in_n] for n values (expands a constant value over steps).
// In-place running sums over T steps of a time-major [T, step] array, and
// their inverse (x(t) − x(t−1)): the pre-spike max pool on spiking inputs.
cudaError_t nc_launch_cumsum_steps(cudaStream_t s, int T, int64_t step, float *x);
cudaError_t nc_launch_diff_steps(cudaStream_t s, int T, int64_t step, float *x);
cudaError_t nc_launch_repeat(cudaStream_t s, int64_t n, const float *in, int64_t in_n, float *out);
// The same pre-spike max pool in one pass (see prespike_max_kernel): T steps
// of rows_per_step rows each, channels last (nhwc 1) or not; bias (may be
// NULL) is the conv's pending per-channel bias.  Only for windows of at most
// kPrespikeTaps taps (nc_prespike_max_fits); the three-pass path takes the rest.
constexpr int kPrespikeTaps = 9;
bool nc_prespike_max_fits(const nc_gwin *g);
cudaError_t nc_launch_prespike_max(cudaStream_t s, const nc_gwin *g, int nhwc, int T, int64_t rows_per_step,
                                   const float *bias, const float *in, float *out);


// Pools over [rows, C, H, W] → [rows, C, OH, OW]; bias (may be NULL, max
// only) is a pending conv bias per channel, added to the max.
cudaError_t nc_launch_avgpool(cudaStream_t s, const nc_gwin *g, int count_include_pad, int64_t rows,
                              const float *in, float *out);
cudaError_t nc_launch_maxpool(cudaStream_t s, const nc_gwin *g, int64_t rows, const float *bias,
                              const float *in, float *out);
cudaError_t nc_launch_gap(cudaStream_t s, int64_t rows, int c, int64_t hw, const float *in, float *out);
// One step of the gated max pool over n samples: counts[n, C, H, W] += in > 0,
// then each window passes the input of its first tap with the highest count.
cudaError_t nc_launch_gated_step(cudaStream_t s, const nc_gwin *g, int64_t n, const float *in, int *counts,
                                 float *out);

// im2col of group `grp` for samples [0, nb) of in ([nb, C, H, W]) into
// col[nb][Kg][ld] (Kg = C/groups·KH·KW, ld ≥ OH·OW).  scale (may be NULL):
// per input channel; each value becomes rint(x·scale[ch]) (a spike count).
cudaError_t nc_launch_im2col_f32(cudaStream_t s, const nc_gwin *g, int groups, int grp, int64_t nb,
                                 const float *in, int64_t ld, float *col);
cudaError_t nc_launch_im2col_bf16(cudaStream_t s, const nc_gwin *g, int groups, int grp, int64_t nb,
                                  const float *in, const float *scale, int64_t ld, nc_bf16 *col);
// Direct convolution (grouped/depthwise): out [rows, cout, OH, OW].
cudaError_t nc_launch_conv_direct(cudaStream_t s, const nc_gwin *g, int cout, int groups, int64_t rows,
                                  const float *in, const float *w, float *out);
// [rows, f] fp32 → bf16; scale (may be NULL): per channel ch = (j / inner) % c
// of feature j, each value becomes rint(x·scale[ch]).
cudaError_t nc_launch_to_bf16(cudaStream_t s, int64_t rows, int64_t f, const float *in, const float *scale,
                              int c, int64_t inner, nc_bf16 *out);
// Weights [rows, k] (rows = outputs): w'[o, j] = w[o, j]·mul[ch]; ch of
// column j = (o / rows_per_group)·ch_per_group + (j / k_inner) % ch_per_group;
// mul may be NULL (1).  The result is split into `parts` bf16 parts
// (hi, mid, lo): out[p] = bf16(residual after parts < p).
cudaError_t nc_launch_weight_parts(cudaStream_t s, int64_t rows, int64_t k, const float *w, const float *mul,
                                   int rows_per_group, int ch_per_group, int64_t k_inner, int parts,
                                   nc_bf16 *const *out);
// As nc_launch_to_bf16 with a scale, into fp32: the integer spike counts
// rint(x·scale[ch]) (the operand of the exact fp32 conv).
// The exact conv's operand (nc_gpu_cudnn.h, NC_CONV_BF16_EXACT) from n
// channels-last rows of c values: the counts rint(x·scale[ch]) in bf16
// ([n, c]), and in pairs the same counts twice side by side ([n, 2, c]).
cudaError_t nc_launch_to_counts_exact(cudaStream_t s, int64_t n, int c, const float *in, const float *scale,
                                      nc_bf16 *counts, nc_bf16 *pairs);
// The exact conv's filter from KRSC weights [rows, k] (k = taps·c) times
// mul[ch] (may be NULL): hi [rows, k], the top bf16 part, and rest
// [rows, taps, 2, c], the mid and lo parts side by side.
cudaError_t nc_launch_weight_parts_exact(cudaStream_t s, int64_t rows, int64_t k, const float *w, const float *mul,
                                         int c, nc_bf16 *hi, nc_bf16 *rest);
cudaError_t nc_launch_to_counts_f32(cudaStream_t s, int64_t rows, int64_t f, const float *in, const float *scale,
                                    int c, int64_t inner, float *out);
// The same counts as uint8 (at most 255: a window of at most 255 spikes).
cudaError_t nc_launch_to_counts8(cudaStream_t s, int64_t rows, int64_t f, const float *in, const float *scale, int c,
                                 int64_t inner, uint8_t *out);
// Weights [rows, k] times mul[j % ch_per_row] (may be NULL) in three TF32
// parts, out[0] = hi, out[1] = mid, out[2] = lo, whose sum is exactly the
// fp32 product: counts times each part are exact on TF32 tensor cores.
cudaError_t nc_launch_weight_parts_tf32(cudaStream_t s, int64_t rows, int64_t k, const float *w, const float *mul,
                                        int ch_per_row, float *const *out);
// D/θ per channel: out[ch] = d / th[n_th == c ? ch : 0] for ch < c.
cudaError_t nc_launch_inv_scale(cudaStream_t s, int c, const float *th, int n_th, float d, float *out);
// θ/D per channel: out[ch] = th[n_th == c ? ch : 0] / d.
cudaError_t nc_launch_scale(cudaStream_t s, int c, const float *th, int n_th, float d, float *out);
// Sums over T steps (as nc_ref_step_sums): out[j] = Σ_t in[t·step + j] in
// step order, or with nonzero the steps where that value was ≠ 0, j < n.
cudaError_t nc_launch_step_sums(cudaStream_t s, int T, int64_t n, int64_t step, const float *in, int nonzero,
                                float *out);
// Poisson encoding (as nc_poisson_encode): out[t, i] for t < T, i < n.
cudaError_t nc_launch_poisson(cudaStream_t s, uint64_t seed, int T, int64_t n, const float *in, float *out);
// Deterministic pseudo-random fill in [lo, hi) (benchmarks: never time zeros).
cudaError_t nc_launch_fill_random_f32(cudaStream_t s, int64_t n, uint64_t seed, float lo, float hi, float *out);
cudaError_t nc_launch_fill_random_bf16(cudaStream_t s, int64_t n, uint64_t seed, float lo, float hi,
                                       nc_bf16 *out);

// ---- channels-last values (the layout of cuDNN's convolutions) -------------
// out[r, b, a] = in[r, a, b] for r < rows (not in place): a sample [C, HW]
// becomes [HW, C] with (a, b) = (C, HW), and back with (HW, C).
cudaError_t nc_launch_transpose_rows(cudaStream_t s, int64_t rows, int64_t a, int64_t b, const float *in,
                                     float *out);
// The same, rounded to bf16 (to nearest even) on the way: the trainer's bf16
// convolutions read their fp32 NCHW values as bf16 NHWC.
cudaError_t nc_launch_transpose_rows_to_bf16(cudaStream_t s, int64_t rows, int64_t a, int64_t b, const float *in,
                                             nc_bf16 *out);
// And back: out[r, b, a] = float(in[r, a, b]), added to out's value when add
// is 1 (a weight gradient accumulates), else written.
cudaError_t nc_launch_transpose_rows_add_bf16(cudaStream_t s, int64_t rows, int64_t a, int64_t b,
                                              const nc_bf16 *in, int add, float *out);
// nc_launch_avgpool over [rows, H, W, C] → [rows, OH, OW, C]; the same sums
// in the same order, so the two layouts give the same values bit for bit.
cudaError_t nc_launch_avgpool_nhwc(cudaStream_t s, const nc_gwin *g, int count_include_pad, int64_t rows,
                                   const float *in, float *out);
// nc_launch_maxpool over [rows, H, W, C] → [rows, OH, OW, C] (no bias).
cudaError_t nc_launch_maxpool_nhwc(cudaStream_t s, const nc_gwin *g, int64_t rows, const float *in, float *out);
// out[i] = in[i] as fp32, for n values.
cudaError_t nc_launch_bf16_to_f32(cudaStream_t s, int64_t n, const nc_bf16 *in, float *out);

// ---- the 3×3 spike convolution with 16-bit currents (nc_gpu_spike_conv.cu) ----
// 1 if that kernel takes conv window w with cout outputs: 3×3, stride 1,
// padding 1, no dilation or groups, 16, 32 or 64 input channels, outputs a
// multiple of 32, one image's tile in shared memory; else 0 and why.
int nc_spike_conv_fits(const nc_gwin *w, int cout, int groups, char *why, size_t why_size);
// What runs, for `neurocuda bench`'s conv list (a shape that fits).
void nc_spike_conv_describe(const nc_gwin *w, int cout, char *out, size_t size);
// y [images, H, W, cout] fp32 = conv(x, hi + mid): x [images, H, W, C] bf16
// spike counts, hi and mid [cout, 3, 3, C] the weight's two bf16 parts
// (nc_launch_weight_parts, parts = 2), both multiplied into one fp32
// accumulator.  cudaErrorInvalidValue for a shape that does not fit.
cudaError_t nc_launch_spike_conv3x3(cudaStream_t s, int64_t images, const nc_gwin *w, int cout, const nc_bf16 *x,
                                    const nc_bf16 *hi, const nc_bf16 *mid, float *y);

// The same convolution on int8 tensor cores (nc_gpu_spike_conv_fx16.cu): the
// weight in 16-bit fixed point per output channel, w ≈ step[o]·(256·a + b).
// Fits where nc_spike_conv_fits does with 32 or 64 input channels.
int nc_spike_conv_fx16_fits(const nc_gwin *w, int cout, int groups);
void nc_spike_conv_fx16_describe(const nc_gwin *w, int cout, char *out, size_t size);
// The parts of weights [rows, k] (KRSC, k = taps·c) times mul[j % c] (may be
// NULL): step[o] = max|w[o, ·]| / 32767 (1 for a zero row), v = rint(w/step)
// in [-32767, 32767], a = floor(v/256), b = v − 256·a.
cudaError_t nc_launch_fx16_parts(cudaStream_t s, int rows, int64_t k, const float *w, const float *mul, int c,
                                 int8_t *a, uint8_t *b, float *step);
// y [images, H, W, cout] fp32 = step[o]·(256·conv(q, a) + conv(q, b)), the
// sums exact in int32: x uint8 counts [images, H, W, C], a and b
// [cout, 3, 3, C].  cudaErrorInvalidValue for a shape that does not fit.
cudaError_t nc_launch_spike_conv3x3_fx16(cudaStream_t s, int64_t images, const nc_gwin *w, int cout,
                                         const uint8_t *x, const int8_t *a, const uint8_t *b, const float *step,
                                         float *y);

// The same convolution with the IF neurons that read its current in its
// epilogue (nc_gpu_spike_conv_if.cu), over T steps of N samples (rows t·N +
// n, channels last): each output's current step[o]·(256·Σqa + Σqb), plus
// bias[o], drives an IF neuron (the IF kernel's update, bit for bit); its
// spikes go out as uint8 counts (counts = 1) or θ / 0 in fp32 [T·N, H, W,
// cout], or with pool = 1 as their 2×2, stride-2 averages [T·N, H/2, W/2,
// cout]: counts 0..4, or if_avgpool2's fp32 values.
struct nc_conv_if {
    int T;
    int64_t N;
    const float *th; // θ per output channel (n_th = cout) or one (n_th = 1)
    int n_th;
    float v0f;
    int reset_zero, fire_gt;
    const float *bias; // per output channel, or NULL
    int pool, counts;
    void *out;
};
int nc_spike_conv_if_fits(const nc_gwin *w, int cout, int pool);
void nc_spike_conv_if_describe(const nc_gwin *w, int cout, int pool, char *out, size_t size);
cudaError_t nc_launch_spike_conv3x3_fx16_if(cudaStream_t s, const nc_gwin *w, int cout, const nc_conv_if *p,
                                            const uint8_t *x, const int8_t *a, const uint8_t *b, const float *step);

// ---- GEMM (nc_gpu_blas.cu) -------------------------------------------------

// How one product of the engine is computed.
enum nc_gemm_kind {
    NC_GEMM_F32,  // fp32 operands, CUBLAS_COMPUTE_32F (no TF32)
    NC_GEMM_TF32, // fp32 operands, CUBLAS_COMPUTE_32F_FAST_TF32
    NC_GEMM_BF16  // bf16 operands, fp32 accumulation and output
};

// Column-major (cuBLAS) C[m, n] = Σ_p op(A_p)·op(B_p) (+ beta·C): `parts`
// products accumulated in order (the first with beta, the others with 1),
// each a strided batched GEMM of `batch` matrices (batch = 1: one GEMM).  The
// parts of one operand are the bf16 parts of split weights; the other
// operand repeats (a[p] == a[0]).  Parts share ld and stride.
struct nc_gemm {
    nc_gemm_kind kind;
    cublasOperation_t ta, tb;
    int m, n, k;
    const void *a[3];
    int lda;
    long long stride_a;
    const void *b[3];
    int ldb;
    long long stride_b;
    int parts;
    float *c;
    int ldc;
    long long stride_c;
    int batch;
    float beta;
};

nc_status nc_gpu_gemm(cublasHandle_t h, const nc_gemm *g, const char *where, nc_error *err);

#endif
