// nc_gpu_train.cu — the trainer's GPU backend ("gpu") behind the vtable of
// sim/nc_train_backend.h.  Every operation has exactly the semantics of its
// CPU kernel in sim/nc_cpu_ops.h (forward) or sim/nc_grad_ops.h (backward);
// tests/test_gpu_train.c runs both backends on the same data and compares.
//
// How the operations map onto the device:
//   - memory: plain cudaMalloc (zero-filled on the stream), one stream, one
//     cuBLAS handle (CUBLAS_DEFAULT_MATH: fp32, no TF32; atomics not allowed,
//     so every GEMM is deterministic);
//   - conv2d forward and backward: cuDNN (nc_gpu_train_conv.cu) where it takes
//     the shape; else im2col of a chunk of samples and one group into
//     col[Kg, nb·P] (the CPU's layout) and strided-batched cublasSgemm, and
//     dW_g += dy·colᵀ, din = col2im(W_gᵀ·dy) as a gather (no atomics); the
//     bias is added afterwards (as the CPU: convolution result + bias);
//   - dense forward / backward: cublasGemmEx on fp32 operands (row-major read as
//     column-major transposes); bf16 tensor-core products in the bf16 mode;
//   - parameter-gradient sums (biases, affine scale/shift, QCFS λ, IF θ) are
//     deterministic two-pass reductions in double: a grid of (channel, slice)
//     blocks writes partial sums, then one thread per channel adds them in
//     order and does grad[ch] += (float)sum;
//   - pools: the forward kernels of nc_gpu_kernels.cu (bit-identical to the
//     CPU); the backward kernels are gathers over the windows that contain
//     each input, in the CPU's (row-major output) order: bit-identical too;
//   - IF forward (training): one thread per neuron looping over T, [T, N·numel]
//     time-major (coalesced), keeping m_t; IF backward: one thread per neuron
//     looping t = T..1, its θ-gradient summed per block (per channel or per
//     layer) and the blocks' partials added in order (the reduction above);
//   - the output loss, the optimisers (also one launch over all tensors) and
//     the byte buffers the loss works on: nc_gpu_train_step.cu;
//   - element-wise ops and the optimisers: one thread per value, the CPU's
//     operation order with explicitly rounded intrinsics (gpu/ is built with
//     -fmad=false too), so they match the CPU bit for bit (the sigmoid
//     surrogate uses CUDA's expf, within 2 ulp of glibc's).
//
// Errors: the first failure (an allocation, a launch, a cuBLAS call, a
// synchronisation) is recorded with the operation, the call and CUDA's or
// cuBLAS's reason; every later operation is skipped (alloc returns NULL) and
// sync() returns the failure: NC_ERR_MEMORY for out-of-memory (with "use a
// smaller --batch"), NC_ERR_DEVICE otherwise.  The failure stays; a new
// backend starts clean.
#include "gpu/nc_gpu_internal.h"
#include "gpu/nc_gpu_nccl.h"
#include "gpu/nc_gpu_train_conv.h"
#include "gpu/nc_gpu_train_graph.h"
#include "gpu/nc_gpu_train_step.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <new>

extern "C" {
#include "sim/nc_train_backend.h"
}

namespace {

// Sum of v over the block (blockDim.x == kThreads), in a fixed order: every
// thread of the block must call it.  The result is valid in thread 0.
__device__ double block_sum(double v)
{
    __shared__ double sh[kThreads];
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int w = kThreads / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w)
            sh[threadIdx.x] = __dadd_rn(sh[threadIdx.x], sh[threadIdx.x + w]);
        __syncthreads();
    }
    return sh[0];
}

// ---- memory helpers and element-wise -----------------------------------------

__global__ void copy_rows_kernel(int64_t rows, int64_t len, float *dst, int64_t dst_stride, const float *src,
                                 int64_t src_stride)
{
    for (int64_t i = gtid(); i < rows * len; i += gstride()) {
        int64_t r = i / len, j = i % len;
        dst[r * dst_stride + j] = src[r * src_stride + j];
    }
}

template <bool SUB>
__global__ void add_sub_kernel(int64_t n, const float *x, const float *y, float *out)
{
    for (int64_t i = gtid(); i < n; i += gstride())
        out[i] = SUB ? __fsub_rn(x[i], y[i]) : __fadd_rn(x[i], y[i]);
}

// out[k] = (float)((Σ_t y[t·per + k]) / T), the sum in double, t ascending.
__global__ void mean_steps_kernel(int T, int64_t per, const float *y, float *out)
{
    for (int64_t k = gtid(); k < per; k += gstride()) {
        double sum = 0.0;
        for (int t = 0; t < T; t++)
            sum = __dadd_rn(sum, (double)y[(int64_t)t * per + k]);
        out[k] = __double2float_rn(__ddiv_rn(sum, (double)T));
    }
}

// out[t·per + k] = in[k]·scale; one thread per k (reads in[k] once).
__global__ void broadcast_steps_kernel(int T, int64_t per, const float *in, float scale, float *out)
{
    for (int64_t k = gtid(); k < per; k += gstride()) {
        float v = __fmul_rn(in[k], scale);
        for (int t = 0; t < T; t++)
            out[(int64_t)t * per + k] = v;
    }
}

// ---- conv2d: im2col / col2im -----------------------------------------------------

// col[k, s·P + p] (row length ld = nb·P) = tap k = (ci, ki, kj) of input
// channel ch0 + ci of sample s at output position p; 0 where the tap is in
// the padding.  The row order (ci, ki, kj) is the weight's [Cin/g, KH, KW].
__global__ void im2col_kernel(nc_gwin w, int cg, int ch0, int64_t nb, const float *in, float *col)
{
    int64_t P = (int64_t)w.oh * w.ow, ld = nb * P, hw = (int64_t)w.h * w.w;
    int64_t total = (int64_t)cg * w.kh * w.kw * ld;
    for (int64_t i = gtid(); i < total; i += gstride()) {
        int64_t k = i / ld, j = i % ld;
        int64_t s = j / P;
        int p = (int)(j % P);
        int oy = p / w.ow, ox = p % w.ow;
        int kj = (int)(k % w.kw), ki = (int)((k / w.kw) % w.kh), ci = (int)(k / ((int64_t)w.kw * w.kh));
        int iy = oy * w.sh - w.pt + ki * w.dh, ix = ox * w.sw - w.pl + kj * w.dw;
        float v = 0.0f;
        if (iy >= 0 && iy < w.h && ix >= 0 && ix < w.w)
            v = in[(s * w.c + ch0 + ci) * hw + (int64_t)iy * w.w + ix];
        col[i] = v;
    }
}

// The transpose of im2col as a gather: din (channels ch0 .. ch0 + cg of nb
// samples) = for each input element, the sum of the column values that were
// read from it, taps in (ki, kj) order from 0 (the CPU's col2im adds them in
// that order onto a zeroed din).  din is overwritten.
__global__ void col2im_kernel(nc_gwin w, int cg, int ch0, int64_t nb, const float *col, float *din)
{
    int64_t P = (int64_t)w.oh * w.ow, ld = nb * P, hw = (int64_t)w.h * w.w;
    int64_t total = nb * cg * hw;
    for (int64_t i = gtid(); i < total; i += gstride()) {
        int ix = (int)(i % w.w), iy = (int)((i / w.w) % w.h);
        int64_t sc = i / hw;
        int ci = (int)(sc % cg);
        int64_t s = sc / cg;
        float acc = 0.0f;
        for (int ki = 0; ki < w.kh; ki++) {
            int ty = iy + w.pt - ki * w.dh;
            if (ty < 0 || ty % w.sh != 0 || ty / w.sh >= w.oh)
                continue;
            int oy = ty / w.sh;
            for (int kj = 0; kj < w.kw; kj++) {
                int tx = ix + w.pl - kj * w.dw;
                if (tx < 0 || tx % w.sw != 0 || tx / w.sw >= w.ow)
                    continue;
                int ox = tx / w.sw;
                int64_t k = ((int64_t)ci * w.kh + ki) * w.kw + kj;
                acc = __fadd_rn(acc, col[k * ld + s * P + (int64_t)oy * w.ow + ox]);
            }
        }
        din[(s * w.c + ch0 + ci) * hw + (int64_t)iy * w.w + ix] = acc;
    }
}

// dy[m, s·P + p] = dout[s, m0 + m, p] for m < mg, s < nb (the group's output
// gradient in the layout of col).
__global__ void gather_dy_kernel(int64_t nb, int cout, int m0, int mg, int64_t P, const float *dout, float *dy)
{
    int64_t ld = nb * P, total = (int64_t)mg * ld;
    for (int64_t i = gtid(); i < total; i += gstride()) {
        int64_t m = i / ld, j = i % ld;
        int64_t s = j / P, p = j % P;
        dy[i] = dout[(s * cout + m0 + m) * P + p];
    }
}

// ---- pools, backward ---------------------------------------------------------------

// The plane index of the value nc_maxpool picks in a window: row-major taps,
// `v > best` from −inf (first maximum wins), −1 when nothing beats −inf.
__device__ int64_t max_pick(const nc_gwin &w, const float *x, nc_axis_taps ty, nc_axis_taps tx)
{
    float best = -INFINITY;
    int64_t pick = -1;
    for (int ki = ty.lo; ki < ty.hi; ki++) {
        int64_t row = (int64_t)(ty.start + ki * w.dh) * w.w + tx.start;
        for (int kj = tx.lo; kj < tx.hi; kj++) {
            float v = x[row + (int64_t)kj * w.dw];
            if (v > best) {
                best = v;
                pick = row + (int64_t)kj * w.dw;
            }
        }
    }
    return pick;
}

// One thread per input element (plane pl, iy, ix): the outputs whose window
// holds it are visited in row-major output order (ki and kj descending give
// oy and ox ascending), which is the order in which the CPU kernel adds their
// shares onto its zeroed din, so the sums are bit-identical.
// MAX: adds dout of the windows that picked this element.
// AVG: adds dout / count of every window (count as the forward's divisor).
template <bool MAX>
__global__ void pool_backward_kernel(nc_gwin w, int cip, int64_t total, const float *in, const float *dout,
                                     float *din)
{
    int64_t hw = (int64_t)w.h * w.w, ohw = (int64_t)w.oh * w.ow;
    for (int64_t i = gtid(); i < total; i += gstride()) {
        int ix = (int)(i % w.w), iy = (int)((i / w.w) % w.h);
        int64_t pl = i / hw;
        const float *dy = dout + pl * ohw;
        const float *x = MAX ? in + pl * hw : nullptr;
        int64_t self = (int64_t)iy * w.w + ix;
        float acc = 0.0f;
        for (int ki = w.kh - 1; ki >= 0; ki--) {
            int ty = iy + w.pt - ki * w.dh;
            if (ty < 0 || ty % w.sh != 0 || ty / w.sh >= w.oh)
                continue;
            int oy = ty / w.sh;
            nc_axis_taps tr = nc_taps_of(oy, w.kh, w.sh, w.pt, w.pb, w.dh, w.h);
            for (int kj = w.kw - 1; kj >= 0; kj--) {
                int tx = ix + w.pl - kj * w.dw;
                if (tx < 0 || tx % w.sw != 0 || tx / w.sw >= w.ow)
                    continue;
                int ox = tx / w.sw;
                nc_axis_taps tc = nc_taps_of(ox, w.kw, w.sw, w.pl, w.pr, w.dw, w.w);
                float g = dy[(int64_t)oy * w.ow + ox];
                if (MAX) {
                    if (max_pick(w, x, tr, tc) == self)
                        acc = __fadd_rn(acc, g);
                } else {
                    int count = cip ? tr.n_padded * tc.n_padded : (tr.hi - tr.lo) * (tc.hi - tc.lo);
                    if (count > 0)
                        acc = __fadd_rn(acc, __fdiv_rn(g, (float)count));
                }
            }
        }
        din[i] = acc;
    }
}

// The common average pool, 2×2 stride 2 without padding over an even H and W
// (every input in exactly one window of 4), without the general kernel's
// window arithmetic per element: one thread per window writes its four
// inputs' 0 + dout/4, the general kernel's sum for a single window, bit for bit.
__global__ void avgpool2_backward_kernel(int64_t windows, int ow, int64_t ohw, const float *dout, float *din)
{
    for (int64_t e = gtid(); e < windows; e += gstride()) {
        int64_t pl = e / ohw;
        int rest = (int)(e - pl * ohw), oy = rest / ow, ox = rest - oy * ow;
        float v = __fadd_rn(0.0f, __fdiv_rn(dout[e], 4.0f));
        float2 pair = make_float2(v, v);
        float2 *row = (float2 *)(din + pl * 4 * ohw + (int64_t)(2 * oy) * (2 * ow)) + ox;
        row[0] = pair;
        row[ow] = pair; // the next input row: 2·ow floats on
    }
}

__global__ void gap_backward_kernel(int64_t planes, int64_t hw, float inv, const float *dout, float *din)
{
    for (int64_t i = gtid(); i < planes * hw; i += gstride())
        din[i] = __fmul_rn(dout[i / hw], inv);
}

// ---- element-wise backward ---------------------------------------------------------

__global__ void relu_backward_kernel(int64_t n, const float *in, const float *dout, float *din)
{
    for (int64_t i = gtid(); i < n; i += gstride())
        din[i] = in[i] > 0.0f ? dout[i] : 0.0f;
}

__global__ void clip_backward_kernel(int64_t n, float lo, float hi, const float *in, const float *dout, float *din)
{
    for (int64_t i = gtid(); i < n; i += gstride())
        din[i] = in[i] > lo && in[i] < hi ? dout[i] : 0.0f;
}

// din = scale[ch]·dout (scale NULL: 1).
__global__ void affine_backward_kernel(int64_t n, int c, int64_t inner, const float *scale, const float *dout,
                                       float *din)
{
    for (int64_t i = gtid(); i < n; i += gstride()) {
        float a = scale ? scale[(i / inner) % c] : 1.0f;
        din[i] = __fmul_rn(a, dout[i]);
    }
}

// nc_qcfs1: floorf(x / λ · L + φ), clamped to [0, L], / L · λ.
__device__ __forceinline__ float qcfs1(float x, float lambda, int levels, float shift)
{
    float q = floorf(__fadd_rn(__fmul_rn(__fdiv_rn(x, lambda), (float)levels), shift));
    q = q < 0.0f ? 0.0f : (q > (float)levels ? (float)levels : q);
    return __fmul_rn(__fdiv_rn(q, (float)levels), lambda);
}

// The QCFS straight-through derivatives (qcfs_grad1 in nc_grad_ops.c).
__device__ __forceinline__ void qcfs_grad1(float z, float lam, int levels, float shift, float *dz, float *dlam)
{
    float u = __fdiv_rn(z, lam);
    if (u < 0.0f) {
        *dz = 0.0f;
        *dlam = 0.0f;
    } else if (u > 1.0f) {
        *dz = 0.0f;
        *dlam = 1.0f;
    } else {
        *dz = 1.0f;
        *dlam = __fdiv_rn(__fsub_rn(qcfs1(z, lam, levels, shift), z), lam);
    }
}

__global__ void qcfs_backward_kernel(int64_t n, int c, int64_t inner, const float *lambda, int n_lambda, int levels,
                                     float shift, const float *in, const float *dout, float *din)
{
    for (int64_t i = gtid(); i < n; i += gstride()) {
        int ch = (int)((i / inner) % c);
        float dz, dl;
        qcfs_grad1(in[i], lambda[n_lambda == c ? ch : 0], levels, shift, &dz, &dl);
        din[i] = __fmul_rn(dout[i], dz);
    }
}

// ---- per-channel sums (parameter gradients) -------------------------------------

enum red_kind { RED_SUM, RED_DOT, RED_QCFS };

// What is summed for element e: a[e] (SUM), a[e]·b[e] (DOT: dout·in), or
// dout·∂y/∂λ of QCFS (b = in; λ of e's channel (e / inner) % c).
struct red_args {
    int kind;
    const float *a, *b;
    const float *lambda;
    int n_lambda, c, levels;
    int64_t inner;
    float shift;
};

__device__ __forceinline__ double red_value(const red_args &r, int64_t e)
{
    double d = (double)r.a[e];
    if (r.kind == RED_SUM)
        return d;
    if (r.kind == RED_DOT)
        return __dmul_rn(d, (double)r.b[e]);
    int ch = (int)((e / r.inner) % r.c);
    float dz, dl;
    qcfs_grad1(r.b[e], r.lambda[r.n_lambda == r.c ? ch : 0], r.levels, r.shift, &dz, &dl);
    return __dmul_rn(d, (double)dl);
}

// Values as [R, C, I]: block (ch, s) sums slice s of S of channel ch's R·I
// values (in double) into partial[ch·S + s].
__global__ void reduce_kernel(int64_t R, int C, int64_t I, int S, red_args r, double *partial)
{
    int ch = blockIdx.x, s = blockIdx.y;
    int64_t per = R * I, j0 = per * s / S, j1 = per * (s + 1) / S;
    double acc = 0.0;
    for (int64_t j = j0 + threadIdx.x; j < j1; j += blockDim.x)
        acc = __dadd_rn(acc, red_value(r, (j / I * C + ch) * I + j % I));
    double sum = block_sum(acc);
    if (threadIdx.x == 0)
        partial[(int64_t)ch * S + s] = sum;
}

// target[ch] += (float)(Σ_s partial[ch·S + s]), s ascending.
__global__ void finish_kernel(int C, int S, const double *partial, float *target)
{
    for (int64_t ch = gtid(); ch < C; ch += gstride()) {
        double sum = 0.0;
        for (int s = 0; s < S; s++)
            sum = __dadd_rn(sum, partial[ch * S + s]);
        target[ch] = __fadd_rn(target[ch], __double2float_rn(sum));
    }
}

// ---- integrate-and-fire --------------------------------------------------------------

struct if_args {
    const float *th;
    int n_th, c;
    int64_t inner;
    float v0f;
    int ge, sub;
    int T;
    int64_t step; // neurons per step: n·c·inner
    int surrogate;
    float alpha;
};

__device__ __forceinline__ float if_theta(const if_args &a, int64_t e)
{
    return a.th[a.n_th == a.c ? (int)((e / a.inner) % a.c) : 0];
}

// nc_if_forward_train: one thread per neuron, the membrane in a register,
// m_t kept for every step; in == out is fine (step t is read before written).
__global__ void if_forward_kernel(if_args a, const float *in, float *out, float *m_saved)
{
    for (int64_t e = gtid(); e < a.step; e += gstride()) {
        float th = if_theta(a, e);
        float v = __fmul_rn(a.v0f, th);
        for (int t = 0; t < a.T; t++) {
            int64_t at = (int64_t)t * a.step + e;
            float m = __fadd_rn(v, in[at]), d = __fsub_rn(m, th);
            bool fire = a.ge ? d >= 0.0f : d > 0.0f;
            m_saved[at] = m;
            out[at] = fire ? th : 0.0f;
            v = fire ? (a.sub ? d : 0.0f) : m;
        }
    }
}

// nc_surrogate_grad, the same operations (the sigmoid's expf is CUDA's).
__device__ __forceinline__ float surrogate_grad(int kind, float alpha, float x)
{
    switch (kind) {
    case NC_SURROGATE_TRIANGLE: {
        float a = __fsub_rn(alpha, fabsf(x));
        return a > 0.0f ? __fdiv_rn(a, __fmul_rn(alpha, alpha)) : 0.0f;
    }
    case NC_SURROGATE_SIGMOID: {
        if (isnan(x))
            return 0.0f;
        float s = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(__fmul_rn(-alpha, x))));
        return __fmul_rn(__fmul_rn(alpha, s), __fsub_rn(1.0f, s));
    }
    case NC_SURROGATE_ATAN: {
        if (isnan(x))
            return 0.0f;
        float u = __fmul_rn(__fmul_rn(1.57079632679f, alpha), x);
        return __fdiv_rn(alpha, __fmul_rn(2.0f, __fadd_rn(1.0f, __fmul_rn(u, u))));
    }
    case NC_SURROGATE_RECT: return fabsf(x) < __fdiv_rn(alpha, 2.0f) ? __fdiv_rn(1.0f, alpha) : 0.0f;
    default: return 0.0f;
    }
}

// nc_if_backward: neurons as [R, C, I] (C = the channels θ is summed over, or
// 1); block (ch, s) runs slice s of S of channel ch's neurons, one thread per
// neuron looping t = T..1.  din (may be NULL, may alias dout) gets dm_t; with
// partial != NULL each neuron's dθ (in double, the CPU's formula) is summed
// over the block into partial[ch·S + s].  A thread loads kBackSteps steps
// before it computes them: as din may alias dout, no load could pass the last
// step's store, and it ran at 40 % of the bandwidth (H100, 2026-12-08).
constexpr int kBackSteps = 8;

__global__ void if_backward_kernel(if_args a, int64_t R, int C, int64_t I, int S, const float *m_saved,
                                   const float *dout, float *din, double *partial)
{
    int ch = blockIdx.x, s = blockIdx.y;
    int64_t per = R * I, j0 = per * s / S, j1 = per * (s + 1) / S;
    double block_acc = 0.0;
    for (int64_t j = j0 + threadIdx.x; j < j1; j += blockDim.x) {
        int64_t e = (j / I * C + ch) * I + j % I;
        float th = if_theta(a, e);
        float dv = 0.0f; // dL/dv_t, from step t + 1
        double acc = 0.0;
        for (int t1 = a.T; t1 > 0; t1 -= kBackSteps) { // steps t1 - 1 down to t1 - kBackSteps
            float ms[kBackSteps], gs[kBackSteps];
#pragma unroll
            for (int k = 0; k < kBackSteps && k < t1; k++) { // read before din is written: din may alias dout
                ms[k] = m_saved[(int64_t)(t1 - 1 - k) * a.step + e];
                gs[k] = dout[(int64_t)(t1 - 1 - k) * a.step + e];
            }
#pragma unroll
            for (int k = 0; k < kBackSteps && k < t1; k++) {
                float m = ms[k], g = gs[k], d = __fsub_rn(m, th);
                float sp = (a.ge ? d >= 0.0f : d > 0.0f) ? 1.0f : 0.0f; // the forward's test
                float sg = surrogate_grad(a.surrogate, a.alpha, d);
                float ds = __fsub_rn(__fmul_rn(g, th), __fmul_rn(dv, a.sub ? th : m));
                float dm = __fadd_rn(__fmul_rn(dv, a.sub ? 1.0f : __fsub_rn(1.0f, sp)), __fmul_rn(ds, sg));
                if (partial) {
                    double term = __dsub_rn(__dmul_rn((double)g, (double)sp), __dmul_rn((double)ds, (double)sg));
                    term = __dsub_rn(term, a.sub ? __dmul_rn((double)dv, (double)sp) : 0.0);
                    acc = __dadd_rn(acc, term);
                }
                if (din)
                    din[(int64_t)(t1 - 1 - k) * a.step + e] = dm;
                dv = dm;
            }
        }
        if (partial)
            block_acc = __dadd_rn(block_acc, __dadd_rn(acc, __dmul_rn((double)dv, (double)a.v0f)));
    }
    if (partial) { // uniform over the block: every thread reaches block_sum
        double sum = block_sum(block_acc);
        if (threadIdx.x == 0)
            partial[(int64_t)ch * S + s] = sum;
    }
}

// ---- the backend -------------------------------------------------------------------

struct gtrain {
    cudaStream_t stream = nullptr;
    cublasHandle_t blas = nullptr;
    int sms = 0;
    size_t chunk_floats = 0; // conv workspace budget (im2col columns + gathered dout)
    float *work = nullptr;   // conv / overlapping-copy workspace, grown on demand
    size_t work_floats = 0;
    double *red = nullptr; // partial sums of the reductions, grown on demand
    size_t red_doubles = 0;
    nc_train_convs *convs = nullptr; // convolutions through cuDNN (NULL: all on im2col + cuBLAS)
    nc_opt_table *opt = nullptr;     // optimizer_step's device table (nc_gpu_train_step.cu)
    nc_step_graphs *graphs = nullptr; // the steps recorded as CUDA graphs (NULL: none)
    cublasComputeType_t dense_compute = CUBLAS_COMPUTE_32F; // the bf16 mode: bf16 tensor cores
    nc_status status = NC_OK; // the first failure, kept
    char msg[NC_ERROR_MESSAGE_MAX] = {};
};

gtrain *gt(nc_train_backend *b) { return (gtrain *)b->impl; }

bool usable(const gtrain *g) { return g->status == NC_OK; }

const char *const kOomAdvice = "the GPU is out of memory: use a smaller --batch (or fewer time steps)";
const char *const kDeviceAdvice =
    "the GPU failed; fine-tune on the CPU (--train-engine cpu) or restart the program and try again";

__attribute__((format(printf, 3, 4))) void record(gtrain *g, nc_status code, const char *fmt, ...)
{
    char msg[sizeof g->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (nc_step_graphs_spoil(g->graphs, msg) || g->status != NC_OK)
        return; // nothing ran while recording; and the first failure is the one reported
    g->status = code;
    memcpy(g->msg, msg, sizeof msg);
}

// Records a CUDA failure of `call` in operation `op`; true when e is one.
bool cuda_failed(gtrain *g, const char *op, const char *call, cudaError_t e)
{
    if (e == cudaSuccess)
        return false;
    (void)cudaGetLastError(); // clears a non-sticky error; a sticky one stays
    bool oom = e == cudaErrorMemoryAllocation;
    record(g, oom ? NC_ERR_MEMORY : NC_ERR_DEVICE, "gpu trainer: %s: %s failed: %s (%s); %s", op, call,
           cudaGetErrorName(e), cudaGetErrorString(e), oom ? kOomAdvice : kDeviceAdvice);
    return true;
}

bool blas_failed(gtrain *g, const char *op, const char *call, cublasStatus_t s)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return false;
    (void)cudaGetLastError();
    bool oom = s == CUBLAS_STATUS_ALLOC_FAILED;
    record(g, oom ? NC_ERR_MEMORY : NC_ERR_DEVICE, "gpu trainer: %s: %s failed: %s (%s); %s", op, call,
           cublasGetStatusName(s), cublasGetStatusString(s), oom ? kOomAdvice : kDeviceAdvice);
    return true;
}

// After a kernel launch: true when it launched.
bool launched(gtrain *g, const char *op, const char *kernel) { return !cuda_failed(g, op, kernel, cudaGetLastError()); }

void bad_argument(gtrain *g, const char *op, const char *what)
{
    record(g, NC_ERR_ARGUMENT, "gpu trainer: %s: %s (a bug in the caller)", op, what);
}

void human_bytes(double b, char *buf, size_t size)
{
    const char *unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    while (b >= 1024 && u < 6) {
        b /= 1024;
        u++;
    }
    snprintf(buf, size, u ? "%.1f %s" : "%.0f %s", b, unit[u]);
}

// cudaMalloc of `floats` floats for `what` (op); records a failure with the
// size and the free memory, and returns NULL.
float *device_alloc(gtrain *g, const char *op, const char *what, size_t floats)
{
    size_t bytes;
    if (nc_mul_size(floats ? floats : 1, sizeof(float), &bytes)) {
        record(g, NC_ERR_MEMORY, "gpu trainer: %s: %s of %zu floats: the size overflows; use a smaller --batch", op,
               what, floats);
        return nullptr;
    }
    void *p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        (void)cudaMemGetInfo(&free_b, &total_b);
        (void)cudaGetLastError();
        char want[32], fr[32], tot[32];
        human_bytes((double)bytes, want, sizeof want);
        human_bytes((double)free_b, fr, sizeof fr);
        human_bytes((double)total_b, tot, sizeof tot);
        bool oom = e == cudaErrorMemoryAllocation;
        record(g, oom ? NC_ERR_MEMORY : NC_ERR_DEVICE,
               "gpu trainer: %s: cudaMalloc of %s for %s (%zu floats) failed: %s (%s), %s free of %s; %s", op, want,
               what, floats, cudaGetErrorName(e), cudaGetErrorString(e), fr, tot,
               oom ? kOomAdvice : kDeviceAdvice);
        return nullptr;
    }
    return (float *)p;
}

// The conv workspace, at least `floats` long (NULL after a failure).
float *work_get(gtrain *g, const char *op, size_t floats)
{
    if (floats <= g->work_floats)
        return g->work;
    if (g->work) { // queued kernels may still read it
        if (cuda_failed(g, op, "cudaStreamSynchronize", cudaStreamSynchronize(g->stream)))
            return nullptr;
        cudaFree(g->work);
        nc_step_graphs_freed(g->graphs);
        g->work = nullptr;
        g->work_floats = 0;
    }
    g->work = device_alloc(g, op, "the workspace", floats);
    if (g->work)
        g->work_floats = floats;
    return g->work;
}

double *red_get(gtrain *g, const char *op, size_t doubles)
{
    if (doubles <= g->red_doubles)
        return g->red;
    if (g->red) {
        if (cuda_failed(g, op, "cudaStreamSynchronize", cudaStreamSynchronize(g->stream)))
            return nullptr;
        cudaFree(g->red);
        nc_step_graphs_freed(g->graphs);
        g->red = nullptr;
        g->red_doubles = 0;
    }
    size_t n = doubles < 4096 ? 4096 : doubles;
    g->red = (double *)device_alloc(g, op, "the reduction buffer", 2 * n); // 2 floats per double
    if (g->red)
        g->red_doubles = n;
    return g->red;
}

nc_gwin to_gwin(const nc_window *w)
{
    nc_gwin g;
    g.c = w->c;
    g.h = w->h;
    g.w = w->w;
    g.oh = w->oh;
    g.ow = w->ow;
    g.kh = w->kernel[0];
    g.kw = w->kernel[1];
    g.sh = w->stride[0];
    g.sw = w->stride[1];
    g.dh = w->dilation[0];
    g.dw = w->dilation[1];
    g.pt = w->pad[0];
    g.pl = w->pad[1];
    g.pb = w->pad[2];
    g.pr = w->pad[3];
    return g;
}

bool window_ok(gtrain *g, const char *op, const nc_window *w)
{
    if (w->c < 1 || w->h < 1 || w->w < 1 || w->oh < 1 || w->ow < 1 || w->kernel[0] < 1 || w->kernel[1] < 1 ||
        w->stride[0] < 1 || w->stride[1] < 1 || w->dilation[0] < 1 || w->dilation[1] < 1 || w->pad[0] < 0 ||
        w->pad[1] < 0 || w->pad[2] < 0 || w->pad[3] < 0) {
        bad_argument(g, op, "the window is not initialised (nc_window_init)");
        return false;
    }
    return true;
}

bool conv_ok(gtrain *g, const char *op, const nc_window *w, int cout, int groups)
{
    if (!window_ok(g, op, w))
        return false;
    if (groups < 1 || cout < 1 || w->c % groups != 0 || cout % groups != 0) {
        bad_argument(g, op, "groups must divide the input and output channels");
        return false;
    }
    return true;
}

// Blocks per channel for a reduction of `per` values per channel over C
// channels: about 8 blocks per SM in all, at least kThreads values per block.
int reduce_splits(const gtrain *g, int64_t C, int64_t per)
{
    int64_t target = (int64_t)(g->sms > 0 ? g->sms : 132) * 8;
    int64_t s = (target + C - 1) / C;
    int64_t by_work = (per + kThreads - 1) / kThreads;
    if (s > by_work)
        s = by_work;
    if (s > 65535)
        s = 65535;
    if (s < 1)
        s = 1;
    return (int)s;
}

// target[ch] += Σ over [R, C, I] of the values of r in channel ch.
void channel_sums(gtrain *g, const char *op, int64_t R, int64_t C, int64_t I, const red_args &r, float *target)
{
    if (!usable(g) || !target || R <= 0 || C <= 0 || I <= 0)
        return;
    if (C > INT_MAX) {
        bad_argument(g, op, "too many channels");
        return;
    }
    int S = reduce_splits(g, C, R * I);
    double *part = red_get(g, op, (size_t)C * (size_t)S);
    if (!part)
        return;
    reduce_kernel<<<dim3((unsigned)C, (unsigned)S), kThreads, 0, g->stream>>>(R, (int)C, I, S, r, part);
    if (!launched(g, op, "reduce_kernel"))
        return;
    finish_kernel<<<grid_for(C), kThreads, 0, g->stream>>>((int)C, S, part, target);
    (void)launched(g, op, "finish_kernel");
}

// cuBLAS GEMMs, column-major, alpha = 1.
bool sgemm(gtrain *g, const char *op, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k,
           const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX || ldb > INT_MAX || ldc > INT_MAX) {
        bad_argument(g, op, "a GEMM dimension exceeds INT_MAX");
        return false;
    }
    const float one = 1.0f;
    return !blas_failed(g, op, "cublasGemmEx",
                        cublasGemmEx(g->blas, ta, tb, (int)m, (int)n, (int)k, &one, a, CUDA_R_32F, (int)lda, b,
                                     CUDA_R_32F, (int)ldb, &beta, c, CUDA_R_32F, (int)ldc, g->dense_compute,
                                     CUBLAS_GEMM_DEFAULT));
}

// ---- the operations ------------------------------------------------------------

void gt_destroy(nc_train_backend *b)
{
    if (!b)
        return;
    gtrain *g = gt(b);
    if (g) {
        if (g->stream)
            (void)cudaStreamSynchronize(g->stream);
        if (g->work)
            cudaFree(g->work);
        if (g->red)
            cudaFree(g->red);
        nc_train_convs_free(g->convs);
        nc_opt_table_free(g->opt);
        nc_step_graphs_free(g->graphs);
        if (g->blas)
            cublasDestroy(g->blas);
        if (g->stream)
            cudaStreamDestroy(g->stream);
        (void)cudaGetLastError();
        delete g;
    }
    free(b);
}

float *gt_alloc(nc_train_backend *b, size_t floats)
{
    gtrain *g = gt(b);
    if (!usable(g))
        return nullptr;
    float *p = device_alloc(g, "alloc", "a training buffer", floats);
    if (!p)
        return nullptr;
    size_t n = floats ? floats : 1;
    if (cuda_failed(g, "alloc", "cudaMemsetAsync", cudaMemsetAsync(p, 0, n * sizeof(float), g->stream))) {
        cudaFree(p);
        return nullptr;
    }
    return p;
}

void gt_release(nc_train_backend *b, float *p)
{
    if (!p)
        return;
    gtrain *g = gt(b);
    // queued kernels may still use p: wait for them (a failure is recorded,
    // the memory freed all the same)
    cudaError_t e = cudaStreamSynchronize(g->stream);
    if (usable(g))
        cuda_failed(g, "release", "cudaStreamSynchronize", e);
    e = cudaFree(p);
    nc_step_graphs_freed(g->graphs);
    if (usable(g))
        cuda_failed(g, "release", "cudaFree", e);
    (void)cudaGetLastError();
}

void gt_zero(nc_train_backend *b, float *p, size_t floats)
{
    gtrain *g = gt(b);
    if (!usable(g) || !floats)
        return;
    cuda_failed(g, "zero", "cudaMemsetAsync", cudaMemsetAsync(p, 0, floats * sizeof(float), g->stream));
}

void gt_copy(nc_train_backend *b, float *dst, const float *src, size_t floats)
{
    gtrain *g = gt(b);
    if (!usable(g) || !floats || dst == src)
        return;
    size_t bytes = floats * sizeof(float);
    bool overlap = dst < src + floats && src < dst + floats;
    if (!overlap) {
        cuda_failed(g, "copy", "cudaMemcpyAsync",
                    cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, g->stream));
        return;
    }
    // overlapping ranges (memmove on the CPU): through the workspace
    float *tmp = work_get(g, "copy", floats);
    if (!tmp)
        return;
    if (cuda_failed(g, "copy", "cudaMemcpyAsync", cudaMemcpyAsync(tmp, src, bytes, cudaMemcpyDeviceToDevice, g->stream)))
        return;
    cuda_failed(g, "copy", "cudaMemcpyAsync", cudaMemcpyAsync(dst, tmp, bytes, cudaMemcpyDeviceToDevice, g->stream));
}

// upload / download wait for the copy: the host buffer may be reused (or
// read) as soon as they return.
static void copy_and_wait(nc_train_backend *b, void *dst, const void *src, size_t floats, cudaMemcpyKind kind,
                          const char *what)
{
    gtrain *g = gt(b);
    if (!usable(g) || !floats)
        return;
    if (cuda_failed(g, what, "cudaMemcpyAsync", cudaMemcpyAsync(dst, src, floats * sizeof(float), kind, g->stream)))
        return;
    cuda_failed(g, what, "cudaStreamSynchronize (an earlier operation may have failed)",
                cudaStreamSynchronize(g->stream));
}

void gt_upload(nc_train_backend *b, float *dst, const float *host, size_t floats)
{
    copy_and_wait(b, dst, host, floats, cudaMemcpyHostToDevice, "upload");
}

void gt_download(nc_train_backend *b, float *host, const float *src, size_t floats)
{
    copy_and_wait(b, host, src, floats, cudaMemcpyDeviceToHost, "download");
}

void gt_copy_rows(nc_train_backend *b, float *dst, int64_t dst_stride, const float *src, int64_t src_stride,
                  int64_t rows, int64_t len)
{
    gtrain *g = gt(b);
    if (!usable(g) || rows <= 0 || len <= 0)
        return;
    copy_rows_kernel<<<grid_for(rows * len), kThreads, 0, g->stream>>>(rows, len, dst, dst_stride, src, src_stride);
    launched(g, "copy_rows", "copy_rows_kernel");
}

// out = x + y, or x − y (sub).
void add_or_sub(nc_train_backend *b, int64_t n, const float *x, const float *y, float *out, bool sub)
{
    gtrain *g = gt(b);
    if (!usable(g) || n <= 0)
        return;
    if (sub)
        add_sub_kernel<true><<<grid_for(n), kThreads, 0, g->stream>>>(n, x, y, out);
    else
        add_sub_kernel<false><<<grid_for(n), kThreads, 0, g->stream>>>(n, x, y, out);
    launched(g, sub ? "sub" : "add", "add_sub_kernel");
}

void gt_add(nc_train_backend *b, int64_t n, const float *x, const float *y, float *o) { add_or_sub(b, n, x, y, o, 0); }
void gt_sub(nc_train_backend *b, int64_t n, const float *x, const float *y, float *o) { add_or_sub(b, n, x, y, o, 1); }

void gt_mean_steps(nc_train_backend *b, int T, int64_t per, const float *y, float *out)
{
    gtrain *g = gt(b);
    if (!usable(g) || T <= 0 || per <= 0)
        return;
    mean_steps_kernel<<<grid_for(per), kThreads, 0, g->stream>>>(T, per, y, out);
    launched(g, "mean_steps", "mean_steps_kernel");
}

void gt_broadcast_steps(nc_train_backend *b, int T, int64_t per, const float *in, float scale, float *out)
{
    gtrain *g = gt(b);
    if (!usable(g) || T <= 0 || per <= 0)
        return;
    broadcast_steps_kernel<<<grid_for(per), kThreads, 0, g->stream>>>(T, per, in, scale, out);
    launched(g, "broadcast_steps", "broadcast_steps_kernel");
}

// Samples per conv chunk: `per_sample` workspace floats each within the
// budget (at least 1), with nb·P ≤ INT_MAX (a cuBLAS leading dimension) and
// nb ≤ 63·1024 (the batch count of the forward's strided-batched GEMM: some
// cuBLAS versions map it onto a grid dimension limited to 65535).
int64_t conv_chunk(const gtrain *g, int64_t per_sample, int64_t P, int64_t rows)
{
    int64_t nb = (int64_t)(g->chunk_floats / (size_t)(per_sample > 0 ? per_sample : 1));
    if (nb > INT_MAX / P)
        nb = INT_MAX / P;
    if (nb > 63 * 1024)
        nb = 63 * 1024;
    if (nb > rows)
        nb = rows;
    return nb < 1 ? 1 : nb;
}

bool conv2d_im2col(gtrain *g, const nc_window *w, int cout, int groups, int64_t rows, const float *in,
                   const float *weight, float *out);
bool conv2d_backward_im2col(gtrain *g, const nc_window *w, int cout, int groups, int64_t rows, const float *in,
                            const float *weight, const float *dout, float *din, float *dweight);

void gt_conv2d(nc_train_backend *b, const nc_window *w, int cout, int groups, int64_t rows, const float *in,
               const float *weight, const float *bias, float *out)
{
    gtrain *g = gt(b);
    const char *op = "conv2d";
    if (!usable(g) || rows <= 0 || !conv_ok(g, op, w, cout, groups))
        return;
    int64_t P = (int64_t)w->oh * w->ow;
    nc_status s = NC_ERR_UNSUPPORTED;
    nc_error err = {};
    if (nc_train_convs_take(g->convs, w, cout, groups, rows))
        s = nc_train_convs_forward(g->convs, w, cout, groups, rows, in, weight, out, &err);
    if (s == NC_ERR_UNSUPPORTED) { // not for cuDNN, or refused by it: im2col + cuBLAS
        if (!conv2d_im2col(g, w, cout, groups, rows, in, weight, out))
            return;
    } else if (s != NC_OK) {
        record(g, s, "%s", err.message);
        return;
    }
    if (usable(g) && bias) // as the CPU: the convolution's result + bias
        cuda_failed(g, op, "nc_launch_add_bias", nc_launch_add_bias(g->stream, rows, cout, P, bias, out, out));
}

// The forward through im2col + cuBLAS (false after a failure).
bool conv2d_im2col(gtrain *g, const nc_window *w, int cout, int groups, int64_t rows, const float *in,
                   const float *weight, float *out)
{
    const char *op = "conv2d";
    nc_gwin gw = to_gwin(w);
    int cg = w->c / groups, mg = cout / groups;
    int64_t kg = (int64_t)cg * w->kernel[0] * w->kernel[1], P = (int64_t)w->oh * w->ow;
    int64_t in_row = (int64_t)w->c * w->h * w->w, out_row = (int64_t)cout * P;
    int64_t nb_max = conv_chunk(g, kg * P, P, rows);
    float *col = work_get(g, op, (size_t)(kg * nb_max * P));
    if (!col)
        return false;
    const float one = 1.0f, zero = 0.0f;
    for (int64_t r0 = 0; r0 < rows; r0 += nb_max) {
        int64_t nb = rows - r0 < nb_max ? rows - r0 : nb_max, ld = nb * P;
        for (int grp = 0; grp < groups; grp++) {
            im2col_kernel<<<grid_for(kg * ld), kThreads, 0, g->stream>>>(gw, cg, grp * cg, nb, in + r0 * in_row, col);
            if (!launched(g, op, "im2col_kernel"))
                return false;
            // per sample s, column-major: out_s [P, mg] (ld P) = col_s [P, kg]
            // (ld = nb·P, starting at column s·P) · W_g [kg, mg] (ld kg)
            if (blas_failed(g, op, "cublasSgemmStridedBatched",
                            cublasSgemmStridedBatched(g->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)P, mg, (int)kg, &one, col,
                                                      (int)ld, (long long)P, weight + (int64_t)grp * mg * kg, (int)kg,
                                                      0LL, &zero, out + r0 * out_row + (int64_t)grp * mg * P, (int)P,
                                                      (long long)out_row, (int)nb)))
                return false;
        }
    }
    return true;
}

void gt_conv2d_backward(nc_train_backend *b, const nc_window *w, int cout, int groups, int64_t rows, const float *in,
                        const float *weight, const float *dout, float *din, float *dweight, float *dbias)
{
    gtrain *g = gt(b);
    const char *op = "conv2d_backward";
    if (!usable(g) || rows <= 0 || !conv_ok(g, op, w, cout, groups))
        return;
    int64_t P = (int64_t)w->oh * w->ow;
    if (dbias) {
        red_args r = {};
        r.kind = RED_SUM;
        r.a = dout;
        channel_sums(g, op, rows, cout, P, r, dbias);
    }
    if (!din && !dweight)
        return;
    if (nc_train_convs_take(g->convs, w, cout, groups, rows)) {
        nc_error err = {};
        nc_status s = nc_train_convs_backward(g->convs, w, cout, groups, rows, in, weight, dout, din, dweight, &err);
        if (s == NC_OK)
            return;
        if (s != NC_ERR_UNSUPPORTED) { // cuDNN refused a backward algorithm: im2col computes both below
            record(g, s, "%s", err.message);
            return;
        }
    }
    conv2d_backward_im2col(g, w, cout, groups, rows, in, weight, dout, din, dweight);
}

// The input and weight gradients through im2col + cuBLAS (false after a failure).
bool conv2d_backward_im2col(gtrain *g, const nc_window *w, int cout, int groups, int64_t rows, const float *in,
                            const float *weight, const float *dout, float *din, float *dweight)
{
    const char *op = "conv2d_backward";
    nc_gwin gw = to_gwin(w);
    int cg = w->c / groups, mg = cout / groups;
    int64_t kg = (int64_t)cg * w->kernel[0] * w->kernel[1], P = (int64_t)w->oh * w->ow;
    int64_t in_row = (int64_t)w->c * w->h * w->w, out_row = (int64_t)cout * P;
    int64_t nb_max = conv_chunk(g, (kg + mg) * P, P, rows);
    float *work = work_get(g, op, (size_t)((kg + mg) * nb_max * P));
    if (!work)
        return false;
    for (int64_t r0 = 0; r0 < rows; r0 += nb_max) {
        int64_t nb = rows - r0 < nb_max ? rows - r0 : nb_max, ld = nb * P;
        float *col = work, *dy = work + kg * ld;
        for (int grp = 0; grp < groups; grp++) {
            gather_dy_kernel<<<grid_for(mg * ld), kThreads, 0, g->stream>>>(nb, cout, grp * mg, mg, P,
                                                                             dout + r0 * out_row, dy);
            if (!launched(g, op, "gather_dy_kernel"))
                return false;
            if (dweight) {
                im2col_kernel<<<grid_for(kg * ld), kThreads, 0, g->stream>>>(gw, cg, grp * cg, nb, in + r0 * in_row,
                                                                             col);
                if (!launched(g, op, "im2col_kernel"))
                    return false;
                // row-major dW_g [mg, kg] += dy [mg, ld] · colᵀ; column-major:
                // dW_gᵀ [kg, mg] += col [kg, ld] · dyᵀ [ld, mg]
                if (!sgemm(g, op, CUBLAS_OP_T, CUBLAS_OP_N, kg, mg, ld, col, ld, dy, ld, 1.0f,
                           dweight + (int64_t)grp * mg * kg, kg))
                    return false;
            }
            if (din) {
                // row-major dcol [kg, ld] = W_gᵀ [kg, mg] · dy [mg, ld]; column-
                // major: dcolᵀ [ld, kg] = dyᵀ [ld, mg] · W_g [mg, kg]
                if (!sgemm(g, op, CUBLAS_OP_N, CUBLAS_OP_T, ld, kg, mg, dy, ld, weight + (int64_t)grp * mg * kg, kg,
                           0.0f, col, ld))
                    return false;
                col2im_kernel<<<grid_for(nb * cg * (int64_t)w->h * w->w), kThreads, 0, g->stream>>>(
                    gw, cg, grp * cg, nb, col, din + r0 * in_row);
                if (!launched(g, op, "col2im_kernel"))
                    return false;
            }
        }
    }
    return true;
}

// Rows per dense GEMM call (a cuBLAS dimension is an int).
constexpr int64_t kDenseRows = (int64_t)1 << 30;

// Can a dense layer of this shape run (false: nothing to do, or a bad argument recorded)?
bool dense_ok(gtrain *g, const char *op, int64_t rows, int fin, int fout)
{
    if (!usable(g) || rows <= 0)
        return false;
    if (fin < 1 || fout < 1) {
        bad_argument(g, op, "fin and fout must be positive");
        return false;
    }
    return true;
}

void gt_dense(nc_train_backend *b, int64_t rows, int fin, int fout, const float *in, const float *weight,
              const float *bias, float *out)
{
    gtrain *g = gt(b);
    const char *op = "dense";
    if (!dense_ok(g, op, rows, fin, fout))
        return;
    for (int64_t r0 = 0; r0 < rows; r0 += kDenseRows) {
        int64_t n = rows - r0 < kDenseRows ? rows - r0 : kDenseRows;
        // column-major: outᵀ [fout, n] = W [fout, fin] (stored as Wᵀ, ld fin) · inᵀ [fin, n]
        if (!sgemm(g, op, CUBLAS_OP_T, CUBLAS_OP_N, fout, n, fin, weight, fin, in + r0 * fin, fin, 0.0f,
                   out + r0 * fout, fout))
            return;
    }
    if (bias)
        cuda_failed(g, op, "nc_launch_add_bias", nc_launch_add_bias(g->stream, rows, fout, 1, bias, out, out));
}

void gt_dense_backward(nc_train_backend *b, int64_t rows, int fin, int fout, const float *in, const float *weight,
                       const float *dout, float *din, float *dweight, float *dbias)
{
    gtrain *g = gt(b);
    const char *op = "dense_backward";
    if (!dense_ok(g, op, rows, fin, fout))
        return;
    for (int64_t r0 = 0; r0 < rows; r0 += kDenseRows) {
        int64_t n = rows - r0 < kDenseRows ? rows - r0 : kDenseRows;
        // row-major din [n, fin] = dout [n, fout] · W [fout, fin]; column-major:
        // dinᵀ [fin, n] = Wᵀ [fin, fout] (ld fin) · doutᵀ [fout, n] (ld fout)
        if (din && !sgemm(g, op, CUBLAS_OP_N, CUBLAS_OP_N, fin, n, fout, weight, fin, dout + r0 * fout, fout, 0.0f,
                          din + r0 * fin, fin))
            return;
        // row-major dW [fout, fin] += doutᵀ · in; column-major:
        // dWᵀ [fin, fout] += inᵀ [fin, n] · dout [n, fout]
        if (dweight && !sgemm(g, op, CUBLAS_OP_N, CUBLAS_OP_T, fin, fout, n, in + r0 * fin, fin, dout + r0 * fout,
                              fout, 1.0f, dweight, fin))
            return;
    }
    if (dbias) {
        red_args r = {};
        r.kind = RED_SUM;
        r.a = dout;
        channel_sums(g, op, rows, fout, 1, r, dbias);
    }
}

void gt_avgpool(nc_train_backend *b, const nc_window *w, int cip, int64_t rows, const float *in, float *out)
{
    gtrain *g = gt(b);
    if (!usable(g) || rows <= 0 || !window_ok(g, "avgpool", w))
        return;
    nc_gwin gw = to_gwin(w);
    cuda_failed(g, "avgpool", "nc_launch_avgpool", nc_launch_avgpool(g->stream, &gw, cip, rows, in, out));
}

void gt_maxpool(nc_train_backend *b, const nc_window *w, int64_t rows, const float *in, float *out)
{
    gtrain *g = gt(b);
    if (!usable(g) || rows <= 0 || !window_ok(g, "maxpool", w))
        return;
    nc_gwin gw = to_gwin(w);
    cuda_failed(g, "maxpool", "nc_launch_maxpool", nc_launch_maxpool(g->stream, &gw, rows, nullptr, in, out));
}

void gt_global_avgpool(nc_train_backend *b, int64_t rows, int c, int64_t hw, const float *in, float *out)
{
    gtrain *g = gt(b);
    if (!usable(g) || rows <= 0 || c <= 0 || hw <= 0)
        return;
    cuda_failed(g, "global_avgpool", "nc_launch_gap", nc_launch_gap(g->stream, rows, c, hw, in, out));
}

void gt_affine(nc_train_backend *b, int64_t rows, int c, int64_t inner, const float *scale, const float *shift,
               const float *in, float *out)
{
    gtrain *g = gt(b);
    if (!usable(g) || rows <= 0 || c <= 0 || inner <= 0)
        return;
    cuda_failed(g, "affine", "nc_launch_affine", nc_launch_affine(g->stream, rows, c, inner, scale, shift, in, out));
}

void gt_relu(nc_train_backend *b, int64_t n, const float *in, float *out)
{
    gtrain *g = gt(b);
    if (!usable(g) || n <= 0)
        return;
    cuda_failed(g, "relu", "nc_launch_relu", nc_launch_relu(g->stream, 1, 1, n, nullptr, in, out));
}

void gt_clip(nc_train_backend *b, int64_t n, float lo, float hi, const float *in, float *out)
{
    gtrain *g = gt(b);
    if (!usable(g) || n <= 0)
        return;
    cuda_failed(g, "clip", "nc_launch_clip", nc_launch_clip(g->stream, 1, 1, n, nullptr, lo, hi, in, out));
}

void gt_qcfs(nc_train_backend *b, int64_t rows, int c, int64_t inner, const float *lambda, int n_lambda, int levels,
             float shift, const float *in, float *out)
{
    gtrain *g = gt(b);
    if (!usable(g) || rows <= 0 || c <= 0 || inner <= 0)
        return;
    cuda_failed(g, "qcfs", "nc_launch_qcfs",
                nc_launch_qcfs(g->stream, rows, c, inner, nullptr, lambda, n_lambda, levels, shift, in, out));
}

if_args make_if_args(const nc_if_params *p, int T, int64_t n, int c, int64_t inner)
{
    if_args a = {};
    a.th = p->threshold;
    a.n_th = p->n_threshold;
    a.c = c;
    a.inner = inner;
    a.v0f = p->v0_fraction;
    a.ge = p->compare == NC_FIRE_GE;
    a.sub = p->reset == NC_RESET_SUBTRACT;
    a.T = T;
    a.step = n * c * inner;
    return a;
}

void gt_if_forward_train(nc_train_backend *b, const nc_if_params *p, int T, int64_t n, int c, int64_t inner,
                         const float *in, float *out, float *m_saved)
{
    gtrain *g = gt(b);
    if (!usable(g) || T <= 0 || n <= 0 || c <= 0 || inner <= 0)
        return;
    if_args a = make_if_args(p, T, n, c, inner);
    if_forward_kernel<<<grid_for(a.step), kThreads, 0, g->stream>>>(a, in, out, m_saved);
    launched(g, "if_forward_train", "if_forward_kernel");
}

void gt_if_backward(nc_train_backend *b, const nc_if_params *p, nc_surrogate surrogate, float alpha, int T,
                    int64_t n, int c, int64_t inner, const float *m_saved, const float *dout, float *din,
                    float *dthreshold)
{
    gtrain *g = gt(b);
    const char *op = "if_backward";
    if (!usable(g) || T <= 0 || n <= 0 || c <= 0 || inner <= 0)
        return;
    if_args a = make_if_args(p, T, n, c, inner);
    a.surrogate = (int)surrogate;
    a.alpha = alpha;
    // neurons as [R, C, I]: C = the channels θ is summed over
    int64_t R = n, C = 1, I = (int64_t)c * inner;
    if (!dthreshold) {
        R = 1;
        I = a.step;
    } else if (p->n_threshold == c) {
        C = c;
        I = inner;
    }
    int S = reduce_splits(g, C, R * I);
    double *part = nullptr;
    if (dthreshold && !(part = red_get(g, op, (size_t)C * (size_t)S)))
        return;
    if_backward_kernel<<<dim3((unsigned)C, (unsigned)S), kThreads, 0, g->stream>>>(a, R, (int)C, I, S, m_saved, dout,
                                                                                     din, part);
    if (!launched(g, op, "if_backward_kernel") || !dthreshold)
        return;
    finish_kernel<<<grid_for(C), kThreads, 0, g->stream>>>((int)C, S, part, dthreshold);
    launched(g, op, "finish_kernel");
}

void gt_avgpool_backward(nc_train_backend *b, const nc_window *w, int cip, int64_t rows, const float *dout,
                         float *din)
{
    gtrain *g = gt(b);
    if (!usable(g) || rows <= 0 || !din || !window_ok(g, "avgpool_backward", w))
        return;
    int64_t total = rows * w->c * (int64_t)w->h * w->w;
    int two_by_two = w->kernel[0] == 2 && w->kernel[1] == 2 && w->stride[0] == 2 && w->stride[1] == 2 &&
                     w->dilation[0] == 1 && w->dilation[1] == 1 && !w->pad[0] && !w->pad[1] && !w->pad[2] &&
                     !w->pad[3] && w->h % 2 == 0 && w->w % 2 == 0 && w->oh == w->h / 2 && w->ow == w->w / 2;
    if (two_by_two) {
        int64_t ohw = (int64_t)w->oh * w->ow, windows = rows * w->c * ohw;
        avgpool2_backward_kernel<<<grid_for(windows), kThreads, 0, g->stream>>>(windows, w->ow, ohw, dout, din);
        launched(g, "avgpool_backward", "avgpool2_backward_kernel");
        return;
    }
    pool_backward_kernel<false><<<grid_for(total), kThreads, 0, g->stream>>>(to_gwin(w), cip, total, nullptr, dout,
                                                                               din);
    launched(g, "avgpool_backward", "pool_backward_kernel");
}

void gt_maxpool_backward(nc_train_backend *b, const nc_window *w, int64_t rows, const float *in, const float *dout,
                         float *din)
{
    gtrain *g = gt(b);
    if (!usable(g) || rows <= 0 || !din || !window_ok(g, "maxpool_backward", w))
        return;
    int64_t total = rows * w->c * (int64_t)w->h * w->w;
    pool_backward_kernel<true><<<grid_for(total), kThreads, 0, g->stream>>>(to_gwin(w), 0, total, in, dout, din);
    launched(g, "maxpool_backward", "pool_backward_kernel");
}

void gt_global_avgpool_backward(nc_train_backend *b, int64_t rows, int c, int64_t hw, const float *dout, float *din)
{
    gtrain *g = gt(b);
    if (!usable(g) || rows <= 0 || c <= 0 || hw <= 0 || !din)
        return;
    float inv = 1.0f / (float)hw; // the forward multiplies by this same float
    gap_backward_kernel<<<grid_for(rows * c * hw), kThreads, 0, g->stream>>>(rows * c, hw, inv, dout, din);
    launched(g, "global_avgpool_backward", "gap_backward_kernel");
}

void gt_affine_backward(nc_train_backend *b, int64_t rows, int c, int64_t inner, const float *scale, const float *in,
                        const float *dout, float *din, float *dscale, float *dshift)
{
    gtrain *g = gt(b);
    const char *op = "affine_backward";
    if (!usable(g) || rows <= 0 || c <= 0 || inner <= 0)
        return;
    // the sums first: din may alias dout or in
    red_args r = {};
    r.a = dout;
    r.b = in;
    if (dscale) {
        r.kind = RED_DOT;
        channel_sums(g, op, rows, c, inner, r, dscale);
    }
    if (dshift) {
        r.kind = RED_SUM;
        channel_sums(g, op, rows, c, inner, r, dshift);
    }
    if (!din || !usable(g))
        return;
    int64_t n = rows * c * inner;
    affine_backward_kernel<<<grid_for(n), kThreads, 0, g->stream>>>(n, c, inner, scale, dout, din);
    launched(g, op, "affine_backward_kernel");
}

void gt_relu_backward(nc_train_backend *b, int64_t n, const float *in, const float *dout, float *din)
{
    gtrain *g = gt(b);
    if (!usable(g) || n <= 0 || !din)
        return;
    relu_backward_kernel<<<grid_for(n), kThreads, 0, g->stream>>>(n, in, dout, din);
    launched(g, "relu_backward", "relu_backward_kernel");
}

void gt_clip_backward(nc_train_backend *b, int64_t n, float lo, float hi, const float *in, const float *dout,
                      float *din)
{
    gtrain *g = gt(b);
    if (!usable(g) || n <= 0 || !din)
        return;
    clip_backward_kernel<<<grid_for(n), kThreads, 0, g->stream>>>(n, lo, hi, in, dout, din);
    launched(g, "clip_backward", "clip_backward_kernel");
}

void gt_qcfs_backward(nc_train_backend *b, int64_t rows, int c, int64_t inner, const float *lambda, int n_lambda,
                      int levels, float shift, const float *in, const float *dout, float *din, float *dlambda)
{
    gtrain *g = gt(b);
    const char *op = "qcfs_backward";
    if (!usable(g) || rows <= 0 || c <= 0 || inner <= 0)
        return;
    if (dlambda) { // before din: din may alias dout or in
        red_args r = {};
        r.kind = RED_QCFS;
        r.a = dout;
        r.b = in;
        r.lambda = lambda;
        r.n_lambda = n_lambda;
        r.c = c;
        r.inner = inner;
        r.levels = levels;
        r.shift = shift;
        if (n_lambda == c)
            channel_sums(g, op, rows, c, inner, r, dlambda);
        else
            channel_sums(g, op, rows, 1, (int64_t)c * inner, r, dlambda);
    }
    if (!din || !usable(g))
        return;
    int64_t n = rows * c * inner;
    qcfs_backward_kernel<<<grid_for(n), kThreads, 0, g->stream>>>(n, c, inner, lambda, n_lambda, levels, shift, in,
                                                                  dout, din);
    launched(g, op, "qcfs_backward_kernel");
}

nc_status gt_sync(nc_train_backend *b, nc_error *err)
{
    gtrain *g = gt(b);
    // drain the stream even after a failure: the caller may free what queued work read
    cudaError_t e = cudaStreamSynchronize(g->stream);
    nc_gpu_profile_range_tick();
    if (usable(g))
        cuda_failed(g, "sync", "cudaStreamSynchronize (a queued kernel or copy failed)", e);
    e = cudaGetLastError();
    if (usable(g))
        cuda_failed(g, "sync", "cudaGetLastError", e);
    if (!usable(g))
        return nc_fail(err, g->status, "%s", g->msg);
    return NC_OK;
}

// A step recorded once per (trainer, batch) and replayed (nc_gpu_train_graph.h).
int gt_step_begin(nc_train_backend *b, uintptr_t owner, int64_t batch)
{
    gtrain *g = gt(b);
    if (!usable(g) || !g->graphs)
        return NC_STEP_RUN;
    return nc_step_graphs_begin(g->graphs, g->stream, owner, batch, nc_train_convs_frees(g->convs));
}

int gt_step_end(nc_train_backend *b)
{
    gtrain *g = gt(b);
    cudaError_t e = cudaSuccess;
    int again = g->graphs ? nc_step_graphs_end(g->graphs, g->stream, &e) : 0;
    cuda_failed(g, "step", "cudaGraphLaunch", e);
    return again;
}

void gt_describe(nc_train_backend *b, char *buf, size_t size) { nc_step_graphs_describe(gt(b)->graphs, buf, size); }

nc_train_backend_ops make_ops()
{
    nc_train_backend_ops o;
    memset(&o, 0, sizeof o);
    o.name = "gpu";
    o.destroy = gt_destroy;
    o.alloc = gt_alloc;
    o.release = gt_release;
    o.zero = gt_zero;
    o.copy = gt_copy;
    o.upload = gt_upload;
    o.download = gt_download;
    o.copy_rows = gt_copy_rows;
    o.add = gt_add;
    o.sub = gt_sub;
    o.mean_steps = gt_mean_steps;
    o.broadcast_steps = gt_broadcast_steps;
    o.conv2d = gt_conv2d;
    o.dense = gt_dense;
    o.avgpool = gt_avgpool;
    o.maxpool = gt_maxpool;
    o.global_avgpool = gt_global_avgpool;
    o.affine = gt_affine;
    o.relu = gt_relu;
    o.clip = gt_clip;
    o.qcfs = gt_qcfs;
    o.if_forward_train = gt_if_forward_train;
    o.conv2d_backward = gt_conv2d_backward;
    o.dense_backward = gt_dense_backward;
    o.avgpool_backward = gt_avgpool_backward;
    o.maxpool_backward = gt_maxpool_backward;
    o.global_avgpool_backward = gt_global_avgpool_backward;
    o.affine_backward = gt_affine_backward;
    o.relu_backward = gt_relu_backward;
    o.clip_backward = gt_clip_backward;
    o.qcfs_backward = gt_qcfs_backward;
    o.if_backward = gt_if_backward;
    o.alloc_bytes = gts_alloc_bytes, o.release_bytes = gts_release_bytes;
    o.upload_bytes = gts_upload_bytes, o.download_bytes = gts_download_bytes;
    o.output_loss = gts_output_loss;
    o.sgd_step = gts_sgd_step, o.adam_step = gts_adam_step, o.optimizer_step = gts_optimizer_step;
    o.sync = gt_sync;
    o.step_begin = gt_step_begin, o.step_end = gt_step_end, o.describe = gt_describe;
    return o;
}

const nc_train_backend_ops gpu_train_ops = make_ops();

} // namespace

// What the step operations (nc_gpu_train_step.cu) need of the backend, lent
// to them as a table (nc_gt_lent) when a backend is made.
static cudaStream_t lent_stream(nc_train_backend *b) { return gt(b)->stream; }
static bool lent_usable(nc_train_backend *b) { return usable(gt(b)); }
static bool lent_cuda_failed(nc_train_backend *b, const char *op, const char *call, cudaError_t e)
{
    return cuda_failed(gt(b), op, call, e);
}
static double *lent_scratch(nc_train_backend *b, const char *op, size_t doubles) { return red_get(gt(b), op, doubles); }
static nc_opt_table **lent_opt_table(nc_train_backend *b) { return &gt(b)->opt; }
static const nc_gt_lent lent = {lent_stream, lent_usable, lent_cuda_failed, lent_scratch, lent_opt_table};

// Default conv workspace: 64 MiB (NC_GPU_TRAIN_CHUNK_MB overrides, 1..65536):
// chunks of samples whose im2col columns (and gathered output gradients)
// fit in it.
extern "C" nc_status nc_train_backend_gpu_new(nc_train_backend **out, nc_error *err)
{
    *out = nullptr;
    nc_gpu_info info;
    nc_gpu_query(&info);
    if (!info.available)
        return nc_fail(err, NC_ERR_UNSUPPORTED, "the gpu training backend cannot run here: %s", info.reason);
    nc_train_backend *b = (nc_train_backend *)calloc(1, sizeof *b);
    gtrain *g = new (std::nothrow) gtrain();
    if (!b || !g) {
        free(b);
        delete g;
        return nc_fail(err, NC_ERR_MEMORY, "out of memory creating the gpu training backend");
    }
    nc_gts_lend(&lent);
    b->ops = &gpu_train_ops;
    b->impl = g;
    g->sms = info.sm_count;
    g->graphs = nc_step_graphs_new(); // NULL (out of memory): every step as queued
    long env = nc_gpu_options_get().train_chunk_mb;
    size_t mb = env >= 1 && env <= 65536 ? (size_t)env : 64;
    g->chunk_floats = (mb << 20) / sizeof(float);
    const char *where = "gpu trainer";
    auto init = [&]() -> nc_status {
        // the GPU of this rank's thread (gpu/nc_gpu_nccl.h); 0 with one GPU
        NC_CUDA_TRY(err, where, cudaSetDevice(nc_gpu_thread_device()));
        NC_CUDA_TRY(err, where, cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
        NC_CUBLAS_TRY(err, where, cublasCreate(&g->blas));
        NC_CUBLAS_TRY(err, where, cublasSetStream(g->blas, g->stream));
        // fp32 products (TF32 in the tf32 mode or under NVIDIA_TF32_OVERRIDE, bf16 in the bf16 mode), no
        // atomics: deterministic gradients, in fp32 comparable with the CPU's
        nc_conv_math precision = nc_train_conv_math();
        cublasMath_t math = precision == NC_CONV_TF32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
        NC_CUBLAS_TRY(err, where, cublasSetMathMode(g->blas, math));
        g->dense_compute = precision == NC_CONV_BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F;
        NC_CUBLAS_TRY(err, where, cublasSetAtomicsMode(g->blas, CUBLAS_ATOMICS_NOT_ALLOWED));
        return nc_train_convs_new(g->stream, &g->convs, err);
    };
    nc_status s = init();
    if (s != NC_OK) {
        gt_destroy(b);
        return s;
    }
    *out = b;
    return NC_OK;
}
