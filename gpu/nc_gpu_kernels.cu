// nc_gpu_kernels.cu — the element-wise, pooling, im2col and IF kernels of the
// GPU engine, then their host launchers (nc_gpu_internal.h).
//
// Every kernel that must match the CPU engine bit for bit (everything except
// the GEMMs) computes in the CPU reference's operation order with explicitly
// rounded intrinsics (__fadd_rn, __fmul_rn, __fdiv_rn): the CPU code is built
// as ISO C11 (no FMA contraction), and gpu/ is built with -fmad=false as well.
#include "gpu/nc_gpu_internal.h"

#include <math.h>

#include <type_traits>

namespace {

// ---- integrate-and-fire ----------------------------------------------------

// One thread per neuron e of [N, C, inner]; the membrane stays in a register
// over the T steps; steps are read 8 ahead (independent loads in flight).
// In place (in == out) is fine: each thread reads step t of its neuron before
// it writes step t.  The current comes in as fp32 or as bf16 (a bf16
// convolution's output, widened here instead of in a pass of its own); the
// spikes go out as θ or 0 (fp32), or as the counts 1 or 0 in bf16 that a
// bf16 convolution reads (its weights carry θ).
__device__ __forceinline__ float load_current(const float *p) { return *p; }
__device__ __forceinline__ float load_current(const nc_bf16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ void store_spike(float *p, bool fire, float theta) { *p = fire ? theta : 0.0f; }
__device__ __forceinline__ void store_spike(nc_bf16 *p, bool fire, float)
{
    *p = __float2bfloat16_rn(fire ? 1.0f : 0.0f);
}
// fp32 counts (the operand of the exact fp32 conv): a wrapper type, so that
// the kernel's output type says what it writes
struct count32 {
    float v;
};
__device__ __forceinline__ void store_spike(count32 *p, bool fire, float) { p->v = fire ? 1.0f : 0.0f; }
// uint8 counts (the operand of the fixed-point spike conv)
__device__ __forceinline__ void store_spike(uint8_t *p, bool fire, float) { *p = fire ? 1 : 0; }

// With PAIRS (channels last only, inner = 1) each count is also written
// twice side by side into `pairs`, [.., 2, C] (steps 2·out_step apart): the
// operand of the exact conv's second pass (nc_gpu_cudnn.h).
template <typename In, typename Out, bool GE, bool SUB, bool PAIRS>
__global__ void if_kernel(int T, int64_t total, int C, int64_t inner, const float *th, int n_th, float v0f,
                          const float *bias, const In *in, int64_t in_step, Out *out, int64_t out_step, Out *pairs)
{
    for (int64_t e = gtid(); e < total; e += gstride()) {
        int c = (int)(inner == 1 ? e % C : (e / inner) % C);
        int64_t pe = PAIRS ? e + (e / C) * C : 0;
        float theta = th[n_th == C ? c : 0];
        float b = bias ? bias[c] : 0.0f;
        float v = __fmul_rn(v0f, theta);
        for (int t0 = 0; t0 < T; t0 += 8) {
            float x[8];
#pragma unroll
            for (int j = 0; j < 8; j++)
                x[j] = t0 + j < T ? load_current(in + (int64_t)(t0 + j) * in_step + e) : 0.0f;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                if (t0 + j >= T)
                    break;
                float xj = bias ? __fadd_rn(x[j], b) : x[j];
                float m = __fadd_rn(v, xj);
                bool fire = GE ? m >= theta : m > theta;
                store_spike(out + (int64_t)(t0 + j) * out_step + e, fire, theta);
                if (PAIRS) {
                    Out *pair = pairs + (int64_t)(t0 + j) * 2 * out_step + pe;
                    store_spike(pair, fire, theta);
                    store_spike(pair + C, fire, theta);
                }
                v = fire ? (SUB ? __fsub_rn(m, theta) : 0.0f) : m;
            }
        }
    }
}

// Four neighbours of a channels-last value (channels c..c+3 of one pixel) as
// one aligned access: 16 bytes of fp32, 8 of bf16, 4 of uint8 counts.
template <typename T> struct alignas(4 * sizeof(T)) quad {
    T v[4];
};

// if_kernel over channels-last values (inner = 1) with C a multiple of 4:
// each thread updates four neighbouring neurons, with one load and one store
// per step for all four.  One byte per thread and step (uint8 counts, the
// spike conv's operand) stores only 32 bytes per warp instruction; the first
// layer's IF (a constant current read once, T steps of counts written) took
// 0.28 ms on the VGG-style net for 0.09 ms of bytes (H100, 2026-12-08).  The
// arithmetic is if_kernel's, neuron by neuron, so the values are the same.
template <typename In, typename Out, bool GE, bool SUB>
__global__ void if4_kernel(int T, int64_t total4, int C, const float *th, int n_th, float v0f, const float *bias,
                           const In *in, int64_t in_step, Out *out, int64_t out_step)
{
    for (int64_t q = gtid(); q < total4; q += gstride()) {
        int64_t e = q * 4;
        int c = (int)(e % C);
        float theta[4], b[4], v[4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            theta[k] = th[n_th == C ? c + k : 0];
            b[k] = bias ? bias[c + k] : 0.0f;
            v[k] = __fmul_rn(v0f, theta[k]);
        }
        for (int t0 = 0; t0 < T; t0 += 4) {
            quad<In> x[4];
#pragma unroll
            for (int j = 0; j < 4; j++)
                if (t0 + j < T)
                    x[j] = *(const quad<In> *)(in + (int64_t)(t0 + j) * in_step + e);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                if (t0 + j >= T)
                    break;
                quad<Out> y;
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    float xk = load_current(&x[j].v[k]);
                    float xb = bias ? __fadd_rn(xk, b[k]) : xk;
                    float m = __fadd_rn(v[k], xb);
                    bool fire = GE ? m >= theta[k] : m > theta[k];
                    store_spike(&y.v[k], fire, theta[k]);
                    v[k] = fire ? (SUB ? __fsub_rn(m, theta[k]) : 0.0f) : m;
                }
                *(quad<Out> *)(out + (int64_t)(t0 + j) * out_step + e) = y;
            }
        }
    }
}

// IF neurons followed by a 2×2, stride-2 average pool, channels last: one
// thread per pooled output [n, oy, ox, c] keeps the four membranes of its
// window in registers over the T steps and writes only the pooled spikes,
// (0 + s00 + s01 + s10 + s11) / 4 with s = θ or 0 — the IF kernel's
// arithmetic and avgpool_2x2_nhwc_kernel's sums, so the values are those of
// the two kernels run one after the other, bit for bit.
template <typename In, bool GE, bool SUB>
__global__ void if_avgpool2_kernel(int T, int64_t total, int C, int h, int w, int oh, int ow, const float *th,
                                   int n_th, float v0f, const float *bias, const In *in, int64_t in_step, float *out,
                                   int64_t out_step)
{
    for (int64_t e = gtid(); e < total; e += gstride()) {
        int c = (int)(e % C);
        int64_t pos = e / C;
        int ox = (int)(pos % ow);
        int64_t rest = pos / ow;
        int oy = (int)(rest % oh);
        int64_t n = rest / oh;
        int64_t base = ((n * h + 2 * oy) * w + 2 * ox) * C + c, off[4] = {0, C, (int64_t)w * C, (int64_t)w * C + C};
        float theta = th[n_th == C ? c : 0];
        float b = bias ? bias[c] : 0.0f;
        float v[4];
#pragma unroll
        for (int k = 0; k < 4; k++)
            v[k] = __fmul_rn(v0f, theta);
        for (int t = 0; t < T; t++) {
            float sum = 0.0f;
#pragma unroll
            for (int k = 0; k < 4; k++) {
                float x = load_current(in + (int64_t)t * in_step + base + off[k]);
                float xk = bias ? __fadd_rn(x, b) : x;
                float m = __fadd_rn(v[k], xk);
                bool fire = GE ? m >= theta : m > theta;
                sum = __fadd_rn(sum, fire ? theta : 0.0f);
                v[k] = fire ? (SUB ? __fsub_rn(m, theta) : 0.0f) : m;
            }
            out[(int64_t)t * out_step + e] = __fdiv_rn(sum, 4.0f);
        }
    }
}

// ---- element-wise ----------------------------------------------------------

enum elt_op { ELT_RELU, ELT_CLIP, ELT_QCFS, ELT_BIAS };

struct elt_params {
    int op;
    int64_t n, inner;
    int c;
    const float *bias;
    float lo, hi;
    const float *lambda;
    int n_lambda, levels;
    float shift;
};

__device__ __forceinline__ float qcfs1(float x, float lambda, int levels, float shift)
{
    // nc_qcfs1: floorf(x / λ · L + φ), clamp to [0, L], / L · λ
    float q = floorf(__fadd_rn(__fmul_rn(__fdiv_rn(x, lambda), (float)levels), shift));
    q = q < 0.0f ? 0.0f : (q > (float)levels ? (float)levels : q);
    return __fmul_rn(__fdiv_rn(q, (float)levels), lambda);
}

__global__ void elt_kernel(elt_params p, const float *in, float *out)
{
    for (int64_t i = gtid(); i < p.n; i += gstride()) {
        int ch = (int)((i / p.inner) % p.c);
        float x = in[i];
        if (p.bias)
            x = __fadd_rn(x, p.bias[ch]);
        switch (p.op) {
        case ELT_RELU: x = x > 0.0f ? x : 0.0f; break;
        case ELT_CLIP: {
            float v = x < p.lo ? p.lo : x;
            x = v > p.hi ? p.hi : v;
            break;
        }
        case ELT_QCFS: x = qcfs1(x, p.lambda[p.n_lambda == p.c ? ch : 0], p.levels, p.shift); break;
        default: break;
        }
        out[i] = x;
    }
}

__global__ void affine_kernel(int64_t n, int c, int64_t inner, const float *scale, const float *shift,
                              const float *in, float *out)
{
    for (int64_t i = gtid(); i < n; i += gstride()) {
        int ch = (int)((i / inner) % c);
        float a = scale ? scale[ch] : 1.0f, b = shift ? shift[ch] : 0.0f;
        out[i] = __fadd_rn(__fmul_rn(a, in[i]), b);
    }
}

__global__ void scale_values_kernel(int64_t n, int64_t numel, const float *w, int64_t n_w, const float *in,
                                    float *out)
{
    for (int64_t i = gtid(); i < n; i += gstride())
        out[i] = __fmul_rn(in[i], w[n_w == 1 ? 0 : i % numel]);
}

__global__ void add_kernel(int64_t n, const float *a, int64_t a_n, const float *b, int64_t b_n, float *out)
{
    for (int64_t i = gtid(); i < n; i += gstride())
        out[i] = __fadd_rn(a[a_n == n ? i : i % a_n], b[b_n == n ? i : i % b_n]);
}

__global__ void concat_kernel(int64_t n, int64_t out_row, int64_t off, const float *in, int64_t in_rows,
                              int64_t per_row, float *out)
{
    for (int64_t i = gtid(); i < n; i += gstride()) {
        int64_t r = i / per_row, j = i % per_row;
        out[r * out_row + off + j] = in[(r % in_rows) * per_row + j];
    }
}

__global__ void repeat_kernel(int64_t n, const float *in, int64_t in_n, float *out)
{
    for (int64_t i = gtid(); i < n; i += gstride())
        out[i] = in[i % in_n];
}

// Running sums over the T steps of a time-major [T, step] array, in place
// (one thread per element of a step, t innermost: coalesced across threads),
// and the inverse, increments x(t) − x(t−1).  Used by the pre-spike max pool.
__global__ void cumsum_steps_kernel(int T, int64_t step, float *x)
{
    for (int64_t k = gtid(); k < step; k += gstride()) {
        float sum = 0.0f;
        for (int t = 0; t < T; t++) {
            sum += x[t * step + k];
            x[t * step + k] = sum;
        }
    }
}

__global__ void diff_steps_kernel(int T, int64_t step, float *x)
{
    for (int64_t k = gtid(); k < step; k += gstride()) {
        float prev = 0.0f;
        for (int t = 0; t < T; t++) {
            float cur = x[t * step + k];
            x[t * step + k] = cur - prev;
            prev = cur;
        }
    }
}

// ---- pools -----------------------------------------------------------------

__global__ void avgpool_kernel(nc_gwin g, int cip, int64_t total, const float *in, float *out)
{
    int64_t hw = (int64_t)g.h * g.w;
    for (int64_t e = gtid(); e < total; e += gstride()) {
        int ox = (int)(e % g.ow);
        int oy = (int)((e / g.ow) % g.oh);
        int64_t pl = e / ((int64_t)g.ow * g.oh);
        const float *x = in + pl * hw;
        nc_axis_taps ty = nc_taps_of(oy, g.kh, g.sh, g.pt, g.pb, g.dh, g.h);
        nc_axis_taps tx = nc_taps_of(ox, g.kw, g.sw, g.pl, g.pr, g.dw, g.w);
        int count = cip ? ty.n_padded * tx.n_padded : (ty.hi - ty.lo) * (tx.hi - tx.lo);
        float sum = 0.0f;
        for (int ki = ty.lo; ki < ty.hi; ki++) {
            const float *row = x + (int64_t)(ty.start + ki * g.dh) * g.w + tx.start;
            for (int kj = tx.lo; kj < tx.hi; kj++)
                sum = __fadd_rn(sum, row[kj * g.dw]);
        }
        out[e] = count > 0 ? __fdiv_rn(sum, (float)count) : 0.0f;
    }
}

__global__ void maxpool_kernel(nc_gwin g, int64_t total, const float *bias, const float *in, float *out)
{
    int64_t hw = (int64_t)g.h * g.w;
    for (int64_t e = gtid(); e < total; e += gstride()) {
        int ox = (int)(e % g.ow);
        int oy = (int)((e / g.ow) % g.oh);
        int64_t pl = e / ((int64_t)g.ow * g.oh);
        const float *x = in + pl * hw;
        nc_axis_taps ty = nc_taps_of(oy, g.kh, g.sh, g.pt, g.pb, g.dh, g.h);
        nc_axis_taps tx = nc_taps_of(ox, g.kw, g.sw, g.pl, g.pr, g.dw, g.w);
        float best = -INFINITY;
        for (int ki = ty.lo; ki < ty.hi; ki++) {
            const float *row = x + (int64_t)(ty.start + ki * g.dh) * g.w + tx.start;
            for (int kj = tx.lo; kj < tx.hi; kj++) {
                float v = row[kj * g.dw];
                best = v > best ? v : best;
            }
        }
        // max(x_i + b) = max(x_i) + b: rounding is monotonic, so adding a
        // pending bias after the max gives the CPU engine's value exactly
        if (ty.lo == ty.hi || tx.lo == tx.hi)
            best = 0.0f;
        else if (bias)
            best = __fadd_rn(best, bias[(int)(pl % g.c)]);
        out[e] = best;
    }
}

__global__ void gap_kernel(int64_t planes, int64_t hw, float inv, const float *in, float *out)
{
    for (int64_t pl = gtid(); pl < planes; pl += gstride()) {
        const float *x = in + pl * hw;
        float sum = 0.0f;
        for (int64_t i = 0; i < hw; i++)
            sum = __fadd_rn(sum, x[i]);
        out[pl] = __fmul_rn(sum, inv);
    }
}

__global__ void gated_count_kernel(int64_t n, const float *in, int *counts)
{
    for (int64_t i = gtid(); i < n; i += gstride())
        counts[i] += in[i] > 0.0f;
}

__global__ void gated_pick_kernel(nc_gwin g, int64_t total, const float *in, const int *counts, float *out)
{
    int64_t hw = (int64_t)g.h * g.w;
    for (int64_t e = gtid(); e < total; e += gstride()) {
        int ox = (int)(e % g.ow);
        int oy = (int)((e / g.ow) % g.oh);
        int64_t pl = e / ((int64_t)g.ow * g.oh);
        nc_axis_taps ty = nc_taps_of(oy, g.kh, g.sh, g.pt, g.pb, g.dh, g.h);
        nc_axis_taps tx = nc_taps_of(ox, g.kw, g.sw, g.pl, g.pr, g.dw, g.w);
        int64_t best = -1;
        int best_count = -1;
        for (int ki = ty.lo; ki < ty.hi; ki++)
            for (int kj = tx.lo; kj < tx.hi; kj++) {
                int64_t idx = (int64_t)(ty.start + ki * g.dh) * g.w + tx.start + kj * g.dw;
                int cnt = counts[pl * hw + idx];
                if (cnt > best_count) {
                    best_count = cnt;
                    best = idx;
                }
            }
        out[e] = best >= 0 ? in[pl * hw + best] : 0.0f;
    }
}

// ---- im2col ----------------------------------------------------------------

// Rows of the column matrix handled by one thread, walking (ci, ki, kj) with
// increments instead of divisions.
constexpr int kIm2colSlice = 16;

template <typename T>
__device__ __forceinline__ T to_out(float v);
template <>
__device__ __forceinline__ float to_out<float>(float v) { return v; }
template <>
__device__ __forceinline__ nc_bf16 to_out<nc_bf16>(float v) { return __float2bfloat16_rn(v); }

// grid.x covers nb·P positions (sample s, output position p), grid.y the
// slices of Kg rows.  Consecutive threads: consecutive p, so the loads (ix)
// and the stores (p) are coalesced.
template <typename T>
__global__ void im2col_kernel(nc_gwin g, int cg, int ch0, int64_t nb, const float *in, const float *scale,
                              int64_t ld, T *col)
{
    int p_count = g.oh * g.ow;
    int kg = cg * g.kh * g.kw;
    int64_t sp = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (sp >= nb * p_count)
        return;
    int64_t s = sp / p_count;
    int p = (int)(sp % p_count);
    int oy = p / g.ow, ox = p % g.ow;
    int k0 = blockIdx.y * kIm2colSlice;
    if (k0 >= kg)
        return;
    int k1 = min(k0 + kIm2colSlice, kg);
    int kj = k0 % g.kw, ki = (k0 / g.kw) % g.kh, ci = k0 / (g.kw * g.kh);
    int64_t hw = (int64_t)g.h * g.w;
    const float *x = in + (s * g.c + ch0 + ci) * hw;
    int iy0 = oy * g.sh - g.pt, ix0 = ox * g.sw - g.pl;
    T *dst = col + (s * kg + k0) * ld + p;
    for (int k = k0; k < k1; k++) {
        int iy = iy0 + ki * g.dh, ix = ix0 + kj * g.dw;
        float v = ((unsigned)iy < (unsigned)g.h && (unsigned)ix < (unsigned)g.w) ? x[(int64_t)iy * g.w + ix] : 0.0f;
        if (scale)
            v = rintf(__fmul_rn(v, scale[ch0 + ci]));
        *dst = to_out<T>(v);
        dst += ld;
        if (++kj == g.kw) {
            kj = 0;
            if (++ki == g.kh) {
                ki = 0;
                ci++;
                x += hw;
            }
        }
    }
}

// Direct convolution, one thread per output (r, m, oy, ox); fp32 with fused
// multiply-adds (explicit: gpu/ is built with -fmad=false).
__global__ void conv_direct_kernel(nc_gwin g, int cout, int groups, int64_t total, const float *in,
                                   const float *w, float *out)
{
    int cg = g.c / groups, mg = cout / groups;
    int64_t hw = (int64_t)g.h * g.w;
    for (int64_t e = gtid(); e < total; e += gstride()) {
        int ox = (int)(e % g.ow);
        int oy = (int)((e / g.ow) % g.oh);
        int m = (int)((e / ((int64_t)g.ow * g.oh)) % cout);
        int64_t r = e / ((int64_t)g.ow * g.oh * cout);
        int grp = m / mg;
        float acc = 0.0f;
        for (int ci = 0; ci < cg; ci++) {
            const float *x = in + (r * g.c + grp * cg + ci) * hw;
            const float *wk = w + ((int64_t)m * cg + ci) * g.kh * g.kw;
            for (int ki = 0; ki < g.kh; ki++) {
                int iy = oy * g.sh - g.pt + ki * g.dh;
                if ((unsigned)iy >= (unsigned)g.h)
                    continue;
                for (int kj = 0; kj < g.kw; kj++) {
                    int ix = ox * g.sw - g.pl + kj * g.dw;
                    if ((unsigned)ix < (unsigned)g.w)
                        acc = __fmaf_rn(x[(int64_t)iy * g.w + ix], wk[ki * g.kw + kj], acc);
                }
            }
        }
        out[e] = acc;
    }
}

__device__ __forceinline__ void store_value(nc_bf16 *p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void store_value(float *p, float v) { *p = v; }
__device__ __forceinline__ void store_value(uint8_t *p, float v) { *p = (uint8_t)__float2uint_rn(fminf(fmaxf(v, 0.0f), 255.0f)); }

template <typename Out>
__global__ void to_operand_kernel(int64_t n, int64_t f, const float *in, const float *scale, int c, int64_t inner,
                                  Out *out)
{
    for (int64_t i = gtid(); i < n; i += gstride()) {
        float v = in[i];
        if (scale)
            v = rintf(__fmul_rn(v, scale[(int)(((i % f) / inner) % c)]));
        store_value(out + i, v);
    }
}

// The exact conv's operand from channels-last values ([n, c]): the counts
// q = rint(x·scale[ch]) in bf16, and each again twice side by side in pairs
// ([n, 2, c]).
__global__ void to_counts_exact_kernel(int64_t n, int c, const float *in, const float *scale, nc_bf16 *counts,
                                       nc_bf16 *pairs)
{
    for (int64_t i = gtid(); i < n * c; i += gstride()) {
        nc_bf16 q = __float2bfloat16_rn(rintf(__fmul_rn(in[i], scale[i % c])));
        counts[i] = q;
        nc_bf16 *pair = pairs + i + (i / c) * c;
        pair[0] = q;
        pair[c] = q;
    }
}

// The exact conv's filter: w·mul (KRSC rows, channel ch = i % C) in three
// bf16 parts, hi (same layout as w) and mid, lo side by side per tap
// ([.., 2, C]); hi + mid + lo is the fp32 product exactly.
__global__ void weight_parts_exact_kernel(int64_t n, const float *w, const float *mul, int C, nc_bf16 *hi,
                                          nc_bf16 *rest)
{
    for (int64_t i = gtid(); i < n; i += gstride()) {
        int ch = (int)(i % C);
        float v = mul ? __fmul_rn(w[i], mul[ch]) : w[i];
        nc_bf16 h = __float2bfloat16_rn(v);
        float r = __fsub_rn(v, __bfloat162float(h));
        nc_bf16 m = __float2bfloat16_rn(r);
        nc_bf16 *dst = rest + i + (i / C) * C;
        hi[i] = h;
        dst[0] = m;
        dst[C] = __float2bfloat16_rn(__fsub_rn(r, __bfloat162float(m)));
    }
}

// x rounded to TF32 (10 stored mantissa bits), to nearest even: a value a
// TF32 tensor core reads unchanged.
__device__ __forceinline__ float round_tf32(float x)
{
    unsigned u = __float_as_uint(x);
    if ((u & 0x7f800000u) != 0x7f800000u)
        u += 0xfffu + ((u >> 13) & 1u);
    return __uint_as_float(u & 0xffffe000u);
}

// w·mul in three TF32 parts whose sum is exactly the fp32 value: hi carries
// its top 11 significant bits, mid the next 11, lo the rest.
__global__ void weight_parts_tf32_kernel(int64_t n, int64_t k, const float *w, const float *mul, int ch_per_row,
                                         float *hi, float *mid, float *lo)
{
    for (int64_t i = gtid(); i < n; i += gstride()) {
        float v = w[i];
        if (mul)
            v = __fmul_rn(v, mul[(i % k) % ch_per_row]);
        float h = round_tf32(v), r = __fsub_rn(v, h), m = round_tf32(r);
        hi[i] = h;
        mid[i] = m;
        lo[i] = __fsub_rn(r, m);
    }
}

__global__ void weight_parts_kernel(int64_t n, int64_t k, const float *w, const float *mul, int rows_per_group,
                                    int ch_per_group, int64_t k_inner, int parts, nc_bf16 *p0, nc_bf16 *p1,
                                    nc_bf16 *p2)
{
    for (int64_t i = gtid(); i < n; i += gstride()) {
        float v = w[i];
        if (mul) {
            int64_t o = i / k, j = i % k;
            int ch = (int)((o / rows_per_group) * ch_per_group + (j / k_inner) % ch_per_group);
            v = __fmul_rn(v, mul[ch]);
        }
        nc_bf16 h = __float2bfloat16_rn(v);
        p0[i] = h;
        if (parts > 1) {
            float r = __fsub_rn(v, __bfloat162float(h));
            nc_bf16 m = __float2bfloat16_rn(r);
            p1[i] = m;
            if (parts > 2)
                p2[i] = __float2bfloat16_rn(__fsub_rn(r, __bfloat162float(m)));
        }
    }
}

__global__ void inv_scale_kernel(int c, const float *th, int n_th, float d, float *out, int invert)
{
    for (int64_t i = gtid(); i < c; i += gstride()) {
        float t = th[n_th == c ? i : 0];
        out[i] = invert ? __fdiv_rn(d, t) : __fdiv_rn(t, d);
    }
}

// ---- random numbers --------------------------------------------------------

__host__ __device__ __forceinline__ uint64_t splitmix_at(uint64_t seed, uint64_t counter)
{
    uint64_t z = seed + (counter + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

__global__ void poisson_kernel(uint64_t seed, int64_t total, int64_t n, const float *in, float *out)
{
    for (int64_t e = gtid(); e < total; e += gstride()) {
        int64_t i = e % n;
        float rate = in[i] < 0.0f ? 0.0f : (in[i] > 1.0f ? 1.0f : in[i]);
        float u = __fmul_rn((float)(splitmix_at(seed, (uint64_t)e) >> 40), 1.0f / 16777216.0f);
        out[e] = u < rate ? 1.0f : 0.0f;
    }
}

__global__ void step_sums_kernel(int T, int64_t n, int64_t step, const float *in, int nonzero, float *out)
{
    for (int64_t j = gtid(); j < n; j += gstride()) {
        float sum = 0.0f;
        for (int t = 0; t < T; t++) {
            float x = in[t * step + j];
            sum += nonzero ? (x != 0.0f ? 1.0f : 0.0f) : x;
        }
        out[j] = sum;
    }
}

template <typename T>
__global__ void fill_random_kernel(int64_t n, uint64_t seed, float lo, float hi, T *out)
{
    for (int64_t i = gtid(); i < n; i += gstride()) {
        float u = (float)(splitmix_at(seed, (uint64_t)i) >> 40) * (1.0f / 16777216.0f);
        out[i] = to_out<T>(lo + u * (hi - lo));
    }
}

// ---- layouts (channels-last values for cuDNN) -------------------------------

// out[r, b, a] = in[r, a, b] for r < rows: NCHW ↔ NHWC of one sample is the
// transpose of its [C, HW] (or [HW, C]) matrix.  32×32 tiles through shared
// memory, so that reads and writes are both coalesced; blockIdx.z walks rows.
// The trainer's bf16 convolutions use two variants: fp32 in, bf16 out (rounded
// to nearest), and bf16 in, fp32 out, added to what out holds (Add).
// Each thread loads its kTile / kTileRows values of a tile before it stores
// any: with one load at a time in flight the kernel ran at about half the
// memory bandwidth (H100, 2026-12-08: 1.5 ms of a 6.9 ms bf16 training step).
constexpr int kTile = 32;
constexpr int kTileRows = 8; // blockDim.y
constexpr int kPerThread = kTile / kTileRows;

__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ float widen(nc_bf16 x) { return __bfloat162float(x); }
template <typename Out> __device__ __forceinline__ Out narrow(float x);
template <> __device__ __forceinline__ float narrow<float>(float x) { return x; }
template <> __device__ __forceinline__ nc_bf16 narrow<nc_bf16>(float x) { return __float2bfloat16_rn(x); }

template <typename In, typename Out, bool Add>
__global__ void __launch_bounds__(kTile *kTileRows) transpose_rows_kernel(int64_t rows, int64_t A, int64_t B,
                                                                          const In *in, Out *out)
{
    __shared__ float tile[kTile][kTile + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    int64_t a0 = (int64_t)blockIdx.y * kTile, b0 = (int64_t)blockIdx.x * kTile;
    for (int64_t r = blockIdx.z; r < rows; r += gridDim.z) {
        const In *x = in + r * A * B;
        Out *y = out + r * A * B;
        float v[kPerThread];
#pragma unroll
        for (int j = 0; j < kPerThread; j++) {
            int64_t a = a0 + ty + j * kTileRows, b = b0 + tx;
            v[j] = a < A && b < B ? widen(x[a * B + b]) : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < kPerThread; j++)
            tile[ty + j * kTileRows][tx] = v[j];
        __syncthreads();
        if (Add) { // what out holds, all loaded before any store
#pragma unroll
            for (int j = 0; j < kPerThread; j++) {
                int64_t b = b0 + ty + j * kTileRows, a = a0 + tx;
                v[j] = a < A && b < B ? widen(y[b * A + a]) : 0.0f;
            }
        }
#pragma unroll
        for (int j = 0; j < kPerThread; j++) {
            int i = ty + j * kTileRows;
            int64_t b = b0 + i, a = a0 + tx;
            if (a < A && b < B)
                y[b * A + a] = narrow<Out>(Add ? v[j] + tile[tx][i] : tile[tx][i]);
        }
        __syncthreads();
    }
}

// Average pool over channels-last values [rows, H, W, C] → [rows, OH, OW, C],
// one thread per output, channels fastest (coalesced); the sum in the order
// of avgpool_kernel (and of the CPU engine), so both layouts agree bit for bit.
// The window of pooled output e of channels-last values [rows, OH, OW, C]:
// its channel's first input value x (x[(iy·W + ix)·C] is input (iy, ix))
// and its taps along each axis.
struct nhwc_window {
    const float *x;
    nc_axis_taps ty, tx;
};

__device__ __forceinline__ nhwc_window nhwc_window_of(const nc_gwin &g, int64_t e, const float *in)
{
    int ch = (int)(e % g.c);
    int ox = (int)((e / g.c) % g.ow);
    int oy = (int)((e / ((int64_t)g.c * g.ow)) % g.oh);
    int64_t r = e / ((int64_t)g.c * g.ow * g.oh);
    nhwc_window win;
    win.x = in + r * ((int64_t)g.h * g.w * g.c) + ch;
    win.ty = nc_taps_of(oy, g.kh, g.sh, g.pt, g.pb, g.dh, g.h);
    win.tx = nc_taps_of(ox, g.kw, g.sw, g.pl, g.pr, g.dw, g.w);
    return win;
}

__global__ void avgpool_nhwc_kernel(nc_gwin g, int cip, int64_t total, const float *in, float *out)
{
    for (int64_t e = gtid(); e < total; e += gstride()) {
        nhwc_window win = nhwc_window_of(g, e, in);
        const float *x = win.x;
        const nc_axis_taps &ty = win.ty, &tx = win.tx;
        int count = cip ? ty.n_padded * tx.n_padded : (ty.hi - ty.lo) * (tx.hi - tx.lo);
        float sum = 0.0f;
        for (int ki = ty.lo; ki < ty.hi; ki++) {
            int64_t iy = ty.start + ki * g.dh;
            for (int kj = tx.lo; kj < tx.hi; kj++)
                sum = __fadd_rn(sum, x[(iy * g.w + tx.start + kj * g.dw) * g.c]);
        }
        out[e] = count > 0 ? __fdiv_rn(sum, (float)count) : 0.0f;
    }
}

// nc_launch_maxpool over channels-last values (an empty window gives 0, as
// maxpool_kernel).
__global__ void maxpool_nhwc_kernel(nc_gwin g, int64_t total, const float *in, float *out)
{
    for (int64_t e = gtid(); e < total; e += gstride()) {
        nhwc_window win = nhwc_window_of(g, e, in);
        const float *x = win.x;
        const nc_axis_taps &ty = win.ty, &tx = win.tx;
        float best = -INFINITY;
        for (int ki = ty.lo; ki < ty.hi; ki++) {
            int64_t iy = ty.start + ki * g.dh;
            for (int kj = tx.lo; kj < tx.hi; kj++) {
                float v = x[(iy * g.w + tx.start + kj * g.dw) * g.c];
                best = v > best ? v : best;
            }
        }
        out[e] = ty.lo == ty.hi || tx.lo == tx.hi ? 0.0f : best;
    }
}

// The pre-spike max pool in one pass, instead of running sums, a max pool and
// step differences in three: one thread per pooled output of a step keeps the
// running sums S_k(t) of its window's taps in registers over the T steps and
// writes max_k S_k(t) − max_k S_k(t−1).  The conv's pending bias is added to
// each tap as it is read.  Every sum, max and difference is the fp32
// operation of the three-pass path in the same order, so both agree bit for
// bit.  Values time-major: step t of the input at in + t·in_step.
__global__ void prespike_max_kernel(nc_gwin g, int nhwc, int T, int64_t per_step, const float *bias,
                                    const float *in, int64_t in_step, float *out)
{
    for (int64_t e = gtid(); e < per_step; e += gstride()) {
        const float *x;
        nc_axis_taps ty, tx;
        int64_t pitch_y, pitch_x;
        int ch;
        if (nhwc) {
            nhwc_window win = nhwc_window_of(g, e, in);
            x = win.x, ty = win.ty, tx = win.tx;
            pitch_y = (int64_t)g.w * g.c, pitch_x = g.c, ch = (int)(e % g.c);
        } else {
            int ox = (int)(e % g.ow), oy = (int)((e / g.ow) % g.oh);
            int64_t pl = e / ((int64_t)g.ow * g.oh);
            x = in + pl * g.h * g.w;
            ty = nc_taps_of(oy, g.kh, g.sh, g.pt, g.pb, g.dh, g.h);
            tx = nc_taps_of(ox, g.kw, g.sw, g.pl, g.pr, g.dw, g.w);
            pitch_y = g.w, pitch_x = 1, ch = (int)(pl % g.c);
        }
        int64_t off[kPrespikeTaps];
        int n = 0;
        for (int ki = ty.lo; ki < ty.hi; ki++)
            for (int kj = tx.lo; kj < tx.hi; kj++)
                off[n++] = (ty.start + (int64_t)ki * g.dh) * pitch_y + (tx.start + (int64_t)kj * g.dw) * pitch_x;
        float b = bias ? bias[ch] : 0.0f, sum[kPrespikeTaps], prev = 0.0f;
#pragma unroll
        for (int k = 0; k < kPrespikeTaps; k++)
            sum[k] = 0.0f;
        for (int t = 0; t < T; t++) {
            const float *xt = x + (int64_t)t * in_step;
            float best = -INFINITY;
#pragma unroll
            for (int k = 0; k < kPrespikeTaps; k++) {
                if (k < n) {
                    float v = xt[off[k]];
                    sum[k] = __fadd_rn(sum[k], bias ? __fadd_rn(v, b) : v);
                    best = sum[k] > best ? sum[k] : best;
                }
            }
            float m = n == 0 ? 0.0f : best; // an empty window gives 0, as maxpool_kernel
            out[(int64_t)t * per_step + e] = __fsub_rn(m, prev);
            prev = m;
        }
    }
}

// The common 2×2, stride-2, unpadded window over channels-last values: four
// channels per thread (16-byte loads and stores), the sums in the order of
// avgpool_nhwc_kernel (0 + x00 + x01 + x10 + x11, then / 4).
__global__ void avgpool_2x2_nhwc_kernel(int64_t total4, int c4, int h, int w, int oh, int ow, const float4 *in,
                                        float4 *out)
{
    for (int64_t e = gtid(); e < total4; e += gstride()) {
        int64_t pos = e / c4;
        int ch = (int)(e - pos * c4);
        int ox = (int)(pos % ow);
        int64_t rest = pos / ow;
        int oy = (int)(rest % oh);
        int64_t r = rest / oh;
        int64_t base = ((r * h + 2 * oy) * w + 2 * ox) * c4 + ch, below = (int64_t)w * c4;
        float4 a = in[base], b = in[base + c4], c = in[base + below], d = in[base + below + c4];
        float4 y;
        y.x = __fdiv_rn(__fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(0.0f, a.x), b.x), c.x), d.x), 4.0f);
        y.y = __fdiv_rn(__fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(0.0f, a.y), b.y), c.y), d.y), 4.0f);
        y.z = __fdiv_rn(__fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(0.0f, a.z), b.z), c.z), d.z), 4.0f);
        y.w = __fdiv_rn(__fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(0.0f, a.w), b.w), c.w), d.w), 4.0f);
        out[e] = y;
    }
}

__global__ void bf16_to_f32_kernel(int64_t n, const nc_bf16 *in, float *out)
{
    for (int64_t i = gtid(); i < n; i += gstride())
        out[i] = __bfloat162float(in[i]);
}


} // namespace

// ---- launchers ---------------------------------------------------------------

// Calls launch(GE, SUB) with the IF's compare (fire on ≥: GE) and reset
// (subtract θ: SUB) as compile-time constants, the four kernel variants.
template <typename F>
cudaError_t with_if_variant(int reset_zero, int fire_gt, F launch)
{
    if (!fire_gt && !reset_zero)
        launch(std::true_type{}, std::true_type{});
    else if (!fire_gt)
        launch(std::true_type{}, std::false_type{});
    else if (!reset_zero)
        launch(std::false_type{}, std::true_type{});
    else
        launch(std::false_type{}, std::false_type{});
    return cudaGetLastError();
}

template <typename In, typename Out, bool PAIRS>
cudaError_t launch_if_variant(cudaStream_t s, int T, int64_t total, int c, int64_t inner, const float *th, int n_th,
                              float v0f, int reset_zero, int fire_gt, const float *bias, const In *in,
                              int64_t in_step, Out *out, int64_t out_step, Out *pairs)
{
    return with_if_variant(reset_zero, fire_gt, [&](auto ge, auto sub) {
        if_kernel<In, Out, decltype(ge)::value, decltype(sub)::value, PAIRS><<<grid_for(total), kThreads, 0, s>>>(
            T, total, c, inner, th, n_th, v0f, bias, in, in_step, out, out_step, pairs);
    });
}

// Whether if4_kernel can run: channels last, four channels to a thread, and
// every step's start aligned for the wide accesses.
template <typename In, typename Out>
bool fits_if4(int64_t total, int c, int64_t inner, const In *in, int64_t in_step, const Out *out, int64_t out_step)
{
    return inner == 1 && c % 4 == 0 && total % 4 == 0 && in_step % 4 == 0 && out_step % 4 == 0 &&
           (uintptr_t)in % sizeof(quad<In>) == 0 && (uintptr_t)out % sizeof(quad<Out>) == 0;
}

template <typename In, typename Out>
cudaError_t launch_if_typed(cudaStream_t s, int T, int64_t total, int c, int64_t inner, const float *th, int n_th,
                            float v0f, int reset_zero, int fire_gt, const float *bias, const In *in, int64_t in_step,
                            Out *out, int64_t out_step, Out *pairs = nullptr)
{
    if (!pairs && fits_if4(total, c, inner, in, in_step, out, out_step))
        return with_if_variant(reset_zero, fire_gt, [&](auto ge, auto sub) {
            if4_kernel<In, Out, decltype(ge)::value, decltype(sub)::value><<<grid_for(total / 4), kThreads, 0, s>>>(
                T, total / 4, c, th, n_th, v0f, bias, in, in_step, out, out_step);
        });
    if (pairs)
        return launch_if_variant<In, Out, true>(s, T, total, c, inner, th, n_th, v0f, reset_zero, fire_gt, bias, in,
                                                in_step, out, out_step, pairs);
    return launch_if_variant<In, Out, false>(s, T, total, c, inner, th, n_th, v0f, reset_zero, fire_gt, bias, in,
                                             in_step, out, out_step, nullptr);
}

template <typename In>
cudaError_t launch_if_avgpool2_typed(cudaStream_t s, int T, int64_t total, int c, int h, int w, int oh, int ow,
                                     const float *th, int n_th, float v0f, int reset_zero, int fire_gt,
                                     const float *bias, const In *in, int64_t in_step, float *out, int64_t out_step)
{
    return with_if_variant(reset_zero, fire_gt, [&](auto ge, auto sub) {
        if_avgpool2_kernel<In, decltype(ge)::value, decltype(sub)::value><<<grid_for(total), kThreads, 0, s>>>(
            T, total, c, h, w, oh, ow, th, n_th, v0f, bias, in, in_step, out, out_step);
    });
}

cudaError_t nc_launch_if_avgpool2(cudaStream_t s, int T, int64_t n, int c, int h, int w, const float *th, int n_th,
                                  float v0f, int reset_zero, int fire_gt, const float *bias, const float *in,
                                  const nc_bf16 *in16, int64_t in_step, float *out)
{
    int oh = h / 2, ow = w / 2;
    int64_t total = n * oh * ow * c;
    if (T < 1 || total <= 0)
        return total == 0 ? cudaSuccess : cudaErrorInvalidValue;
    if ((in == nullptr) == (in16 == nullptr) || c < 1)
        return cudaErrorInvalidValue;
    if (in)
        return launch_if_avgpool2_typed(s, T, total, c, h, w, oh, ow, th, n_th, v0f, reset_zero, fire_gt, bias, in,
                                        in_step, out, total);
    return launch_if_avgpool2_typed(s, T, total, c, h, w, oh, ow, th, n_th, v0f, reset_zero, fire_gt, bias, in16,
                                    in_step, out, total);
}

cudaError_t nc_launch_if(cudaStream_t s, int T, int64_t total, int c, int64_t inner, const float *th, int n_th,
                         float v0f, int reset_zero, int fire_gt, const float *bias, const float *in,
                         int64_t in_step, float *out, int64_t out_step)
{
    nc_if_io io = {in, nullptr, out, nullptr, nullptr, nullptr};
    return nc_launch_if_io(s, T, total, c, inner, th, n_th, v0f, reset_zero, fire_gt, bias, &io, in_step, out_step);
}

cudaError_t nc_launch_if_io(cudaStream_t s, int T, int64_t total, int c, int64_t inner, const float *th, int n_th,
                            float v0f, int reset_zero, int fire_gt, const float *bias, const nc_if_io *io,
                            int64_t in_step, int64_t out_step)
{
    if (T < 1 || total < 1 || c < 1 || inner < 1)
        return total == 0 ? cudaSuccess : cudaErrorInvalidValue;
    int outs = (io->out != nullptr) + (io->out_counts != nullptr) + (io->out_counts32 != nullptr) +
               (io->out_counts8 != nullptr);
    if ((io->in == nullptr) == (io->in16 == nullptr) || outs != 1)
        return cudaErrorInvalidValue;
    if (io->out_counts8 && io->out_pairs)
        return cudaErrorInvalidValue;
    if (io->out_counts8 && io->in)
        return launch_if_typed(s, T, total, c, inner, th, n_th, v0f, reset_zero, fire_gt, bias, io->in, in_step,
                               io->out_counts8, out_step);
    if (io->out_counts8)
        return launch_if_typed(s, T, total, c, inner, th, n_th, v0f, reset_zero, fire_gt, bias, io->in16, in_step,
                               io->out_counts8, out_step);
    if (io->out_pairs && (!io->out_counts || inner != 1))
        return cudaErrorInvalidValue;
    if (io->out_counts32 && io->in)
        return launch_if_typed(s, T, total, c, inner, th, n_th, v0f, reset_zero, fire_gt, bias, io->in, in_step,
                               (count32 *)io->out_counts32, out_step);
    if (io->out_counts32)
        return launch_if_typed(s, T, total, c, inner, th, n_th, v0f, reset_zero, fire_gt, bias, io->in16, in_step,
                               (count32 *)io->out_counts32, out_step);
    if (io->in && io->out)
        return launch_if_typed(s, T, total, c, inner, th, n_th, v0f, reset_zero, fire_gt, bias, io->in, in_step,
                               io->out, out_step);
    if (io->in && io->out_counts)
        return launch_if_typed(s, T, total, c, inner, th, n_th, v0f, reset_zero, fire_gt, bias, io->in, in_step,
                               io->out_counts, out_step, io->out_pairs);
    if (io->out)
        return launch_if_typed(s, T, total, c, inner, th, n_th, v0f, reset_zero, fire_gt, bias, io->in16, in_step,
                               io->out, out_step);
    return launch_if_typed(s, T, total, c, inner, th, n_th, v0f, reset_zero, fire_gt, bias, io->in16, in_step,
                           io->out_counts, out_step, io->out_pairs);
}

static cudaError_t launch_elt(cudaStream_t s, const elt_params &p, const float *in, float *out)
{
    if (p.n <= 0)
        return cudaSuccess;
    if (p.c < 1 || p.inner < 1)
        return cudaErrorInvalidValue;
    elt_kernel<<<grid_for(p.n), kThreads, 0, s>>>(p, in, out);
    return cudaGetLastError();
}

// The parameters every element-wise op has: rows of [c, inner] values and a
// per-channel bias (may be NULL).
static elt_params elt_of(int op, int64_t rows, int c, int64_t inner, const float *bias)
{
    elt_params p = {};
    p.op = op;
    p.n = rows * c * inner;
    p.c = c;
    p.inner = inner;
    p.bias = bias;
    return p;
}

cudaError_t nc_launch_relu(cudaStream_t s, int64_t rows, int c, int64_t inner, const float *bias,
                           const float *in, float *out)
{
    return launch_elt(s, elt_of(ELT_RELU, rows, c, inner, bias), in, out);
}

cudaError_t nc_launch_clip(cudaStream_t s, int64_t rows, int c, int64_t inner, const float *bias, float lo,
                           float hi, const float *in, float *out)
{
    elt_params p = elt_of(ELT_CLIP, rows, c, inner, bias);
    p.lo = lo;
    p.hi = hi;
    return launch_elt(s, p, in, out);
}

cudaError_t nc_launch_qcfs(cudaStream_t s, int64_t rows, int c, int64_t inner, const float *bias,
                           const float *lambda, int n_lambda, int levels, float shift, const float *in,
                           float *out)
{
    elt_params p = elt_of(ELT_QCFS, rows, c, inner, bias);
    p.lambda = lambda;
    p.n_lambda = n_lambda;
    p.levels = levels;
    p.shift = shift;
    return launch_elt(s, p, in, out);
}

cudaError_t nc_launch_add_bias(cudaStream_t s, int64_t rows, int c, int64_t inner, const float *bias,
                               const float *in, float *out)
{
    return launch_elt(s, elt_of(ELT_BIAS, rows, c, inner, bias), in, out);
}

cudaError_t nc_launch_affine(cudaStream_t s, int64_t rows, int c, int64_t inner, const float *scale,
                             const float *shift, const float *in, float *out)
{
    int64_t n = rows * c * inner;
    if (n <= 0)
        return cudaSuccess;
    affine_kernel<<<grid_for(n), kThreads, 0, s>>>(n, c, inner, scale, shift, in, out);
    return cudaGetLastError();
}

cudaError_t nc_launch_scale_values(cudaStream_t s, int64_t rows, int64_t numel, const float *w, int64_t n_w,
                                   const float *in, float *out)
{
    int64_t n = rows * numel;
    if (n <= 0)
        return cudaSuccess;
    if (numel < 1 || (n_w != 1 && n_w != numel))
        return cudaErrorInvalidValue;
    scale_values_kernel<<<grid_for(n), kThreads, 0, s>>>(n, numel, w, n_w, in, out);
    return cudaGetLastError();
}

cudaError_t nc_launch_add(cudaStream_t s, int64_t n, const float *a, int64_t a_n, const float *b, int64_t b_n,
                          float *out)
{
    if (n <= 0)
        return cudaSuccess;
    if (a_n < 1 || b_n < 1)
        return cudaErrorInvalidValue;
    add_kernel<<<grid_for(n), kThreads, 0, s>>>(n, a, a_n, b, b_n, out);
    return cudaGetLastError();
}

cudaError_t nc_launch_concat_part(cudaStream_t s, int64_t rows, int64_t out_row, int64_t off, const float *in,
                                  int64_t in_rows, int64_t per_row, float *out)
{
    int64_t n = rows * per_row;
    if (n <= 0)
        return cudaSuccess;
    if (in_rows < 1)
        return cudaErrorInvalidValue;
    concat_kernel<<<grid_for(n), kThreads, 0, s>>>(n, out_row, off, in, in_rows, per_row, out);
    return cudaGetLastError();
}

cudaError_t nc_launch_cumsum_steps(cudaStream_t s, int T, int64_t step, float *x)
{
    if (step <= 0 || T <= 0)
        return cudaSuccess;
    cumsum_steps_kernel<<<grid_for(step), kThreads, 0, s>>>(T, step, x);
    return cudaGetLastError();
}

cudaError_t nc_launch_diff_steps(cudaStream_t s, int T, int64_t step, float *x)
{
    if (step <= 0 || T <= 0)
        return cudaSuccess;
    diff_steps_kernel<<<grid_for(step), kThreads, 0, s>>>(T, step, x);
    return cudaGetLastError();
}

cudaError_t nc_launch_repeat(cudaStream_t s, int64_t n, const float *in, int64_t in_n, float *out)
{
    if (n <= 0)
        return cudaSuccess;
    if (in_n < 1)
        return cudaErrorInvalidValue;
    repeat_kernel<<<grid_for(n), kThreads, 0, s>>>(n, in, in_n, out);
    return cudaGetLastError();
}

cudaError_t nc_launch_avgpool(cudaStream_t s, const nc_gwin *g, int count_include_pad, int64_t rows,
                              const float *in, float *out)
{
    int64_t total = rows * g->c * g->oh * g->ow;
    if (total <= 0)
        return cudaSuccess;
    avgpool_kernel<<<grid_for(total), kThreads, 0, s>>>(*g, count_include_pad, total, in, out);
    return cudaGetLastError();
}

cudaError_t nc_launch_maxpool(cudaStream_t s, const nc_gwin *g, int64_t rows, const float *bias,
                              const float *in, float *out)
{
    int64_t total = rows * g->c * g->oh * g->ow;
    if (total <= 0)
        return cudaSuccess;
    maxpool_kernel<<<grid_for(total), kThreads, 0, s>>>(*g, total, bias, in, out);
    return cudaGetLastError();
}

cudaError_t nc_launch_gap(cudaStream_t s, int64_t rows, int c, int64_t hw, const float *in, float *out)
{
    int64_t planes = rows * c;
    if (planes <= 0)
        return cudaSuccess;
    if (hw < 1)
        return cudaErrorInvalidValue;
    float inv = 1.0f / (float)hw; /* as nc_global_avgpool */
    gap_kernel<<<grid_for(planes), kThreads, 0, s>>>(planes, hw, inv, in, out);
    return cudaGetLastError();
}

cudaError_t nc_launch_gated_step(cudaStream_t s, const nc_gwin *g, int64_t n, const float *in, int *counts,
                                 float *out)
{
    int64_t in_total = n * g->c * g->h * g->w, out_total = n * g->c * g->oh * g->ow;
    if (in_total <= 0)
        return cudaSuccess;
    gated_count_kernel<<<grid_for(in_total), kThreads, 0, s>>>(in_total, in, counts);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;
    gated_pick_kernel<<<grid_for(out_total), kThreads, 0, s>>>(*g, out_total, in, counts, out);
    return cudaGetLastError();
}

template <typename T>
static cudaError_t launch_im2col(cudaStream_t s, const nc_gwin *g, int groups, int grp, int64_t nb,
                                 const float *in, const float *scale, int64_t ld, T *col)
{
    int cg = g->c / groups;
    int kg = cg * g->kh * g->kw;
    int64_t sp = nb * g->oh * g->ow;
    if (sp <= 0 || kg <= 0)
        return cudaSuccess;
    if (ld < (int64_t)g->oh * g->ow)
        return cudaErrorInvalidValue;
    int64_t bx = (sp + kThreads - 1) / kThreads;
    int by = (kg + kIm2colSlice - 1) / kIm2colSlice;
    if (bx > 0x7fffffff || by > 65535)
        return cudaErrorInvalidConfiguration;
    dim3 grid((unsigned)bx, (unsigned)by);
    im2col_kernel<T><<<grid, kThreads, 0, s>>>(*g, cg, grp * cg, nb, in, scale, ld, col);
    return cudaGetLastError();
}

cudaError_t nc_launch_im2col_f32(cudaStream_t s, const nc_gwin *g, int groups, int grp, int64_t nb,
                                 const float *in, int64_t ld, float *col)
{
    return launch_im2col<float>(s, g, groups, grp, nb, in, nullptr, ld, col);
}

cudaError_t nc_launch_im2col_bf16(cudaStream_t s, const nc_gwin *g, int groups, int grp, int64_t nb,
                                  const float *in, const float *scale, int64_t ld, nc_bf16 *col)
{
    return launch_im2col<nc_bf16>(s, g, groups, grp, nb, in, scale, ld, col);
}

cudaError_t nc_launch_conv_direct(cudaStream_t s, const nc_gwin *g, int cout, int groups, int64_t rows,
                                  const float *in, const float *w, float *out)
{
    int64_t total = rows * cout * g->oh * g->ow;
    if (total <= 0)
        return cudaSuccess;
    if (groups < 1 || g->c % groups || cout % groups)
        return cudaErrorInvalidValue;
    conv_direct_kernel<<<grid_for(total), kThreads, 0, s>>>(*g, cout, groups, total, in, w, out);
    return cudaGetLastError();
}

// to_operand_kernel over rows·f values (a scale needs c and inner).
template <typename T>
cudaError_t launch_to_operand(cudaStream_t s, int64_t rows, int64_t f, const float *in, const float *scale, int c,
                              int64_t inner, T *out)
{
    int64_t n = rows * f;
    if (n <= 0)
        return cudaSuccess;
    if (scale && (c < 1 || inner < 1))
        return cudaErrorInvalidValue;
    to_operand_kernel<<<grid_for(n), kThreads, 0, s>>>(n, f, in, scale, c < 1 ? 1 : c, inner < 1 ? 1 : inner, out);
    return cudaGetLastError();
}

cudaError_t nc_launch_to_bf16(cudaStream_t s, int64_t rows, int64_t f, const float *in, const float *scale,
                              int c, int64_t inner, nc_bf16 *out)
{
    return launch_to_operand(s, rows, f, in, scale, c, inner, out);
}

cudaError_t nc_launch_to_counts_exact(cudaStream_t s, int64_t n, int c, const float *in, const float *scale,
                                      nc_bf16 *counts, nc_bf16 *pairs)
{
    if (n <= 0)
        return cudaSuccess;
    if (!scale || c < 1)
        return cudaErrorInvalidValue;
    to_counts_exact_kernel<<<grid_for(n * c), kThreads, 0, s>>>(n, c, in, scale, counts, pairs);
    return cudaGetLastError();
}

cudaError_t nc_launch_weight_parts_exact(cudaStream_t s, int64_t rows, int64_t k, const float *w, const float *mul,
                                         int c, nc_bf16 *hi, nc_bf16 *rest)
{
    int64_t n = rows * k;
    if (n <= 0)
        return cudaSuccess;
    if (c < 1 || k % c)
        return cudaErrorInvalidValue;
    weight_parts_exact_kernel<<<grid_for(n), kThreads, 0, s>>>(n, w, mul, c, hi, rest);
    return cudaGetLastError();
}

cudaError_t nc_launch_to_counts_f32(cudaStream_t s, int64_t rows, int64_t f, const float *in, const float *scale,
                                    int c, int64_t inner, float *out)
{
    if (!scale && rows * f > 0) // counts are x / scale: a scale is required
        return cudaErrorInvalidValue;
    return launch_to_operand(s, rows, f, in, scale, c, inner, out);
}

cudaError_t nc_launch_to_counts8(cudaStream_t s, int64_t rows, int64_t f, const float *in, const float *scale, int c,
                                 int64_t inner, uint8_t *out)
{
    if (!scale && rows * f > 0) // counts are x / scale: a scale is required
        return cudaErrorInvalidValue;
    return launch_to_operand(s, rows, f, in, scale, c, inner, out);
}

cudaError_t nc_launch_weight_parts_tf32(cudaStream_t s, int64_t rows, int64_t k, const float *w, const float *mul,
                                        int ch_per_row, float *const *out)
{
    int64_t n = rows * k;
    if (n <= 0)
        return cudaSuccess;
    if (ch_per_row < 1 || !out[0] || !out[1] || !out[2])
        return cudaErrorInvalidValue;
    weight_parts_tf32_kernel<<<grid_for(n), kThreads, 0, s>>>(n, k, w, mul, ch_per_row, out[0], out[1], out[2]);
    return cudaGetLastError();
}

cudaError_t nc_launch_weight_parts(cudaStream_t s, int64_t rows, int64_t k, const float *w, const float *mul,
                                   int rows_per_group, int ch_per_group, int64_t k_inner, int parts,
                                   nc_bf16 *const *out)
{
    int64_t n = rows * k;
    if (n <= 0)
        return cudaSuccess;
    if (parts < 1 || parts > 3 || (mul && (rows_per_group < 1 || ch_per_group < 1 || k_inner < 1)))
        return cudaErrorInvalidValue;
    weight_parts_kernel<<<grid_for(n), kThreads, 0, s>>>(n, k, w, mul, rows_per_group < 1 ? 1 : rows_per_group,
                                                          ch_per_group < 1 ? 1 : ch_per_group,
                                                          k_inner < 1 ? 1 : k_inner, parts, out[0],
                                                          parts > 1 ? out[1] : nullptr,
                                                          parts > 2 ? out[2] : nullptr);
    return cudaGetLastError();
}

cudaError_t nc_launch_inv_scale(cudaStream_t s, int c, const float *th, int n_th, float d, float *out)
{
    if (c < 1)
        return cudaErrorInvalidValue;
    inv_scale_kernel<<<grid_for(c), kThreads, 0, s>>>(c, th, n_th, d, out, 1);
    return cudaGetLastError();
}

cudaError_t nc_launch_scale(cudaStream_t s, int c, const float *th, int n_th, float d, float *out)
{
    if (c < 1)
        return cudaErrorInvalidValue;
    inv_scale_kernel<<<grid_for(c), kThreads, 0, s>>>(c, th, n_th, d, out, 0);
    return cudaGetLastError();
}

cudaError_t nc_launch_poisson(cudaStream_t s, uint64_t seed, int T, int64_t n, const float *in, float *out)
{
    int64_t total = (int64_t)T * n;
    if (total <= 0)
        return cudaSuccess;
    poisson_kernel<<<grid_for(total), kThreads, 0, s>>>(seed, total, n, in, out);
    return cudaGetLastError();
}

cudaError_t nc_launch_step_sums(cudaStream_t s, int T, int64_t n, int64_t step, const float *in, int nonzero,
                                float *out)
{
    if (n <= 0 || T < 1)
        return n <= 0 ? cudaSuccess : cudaErrorInvalidValue;
    step_sums_kernel<<<grid_for(n), kThreads, 0, s>>>(T, n, step, in, nonzero, out);
    return cudaGetLastError();
}

cudaError_t nc_launch_fill_random_f32(cudaStream_t s, int64_t n, uint64_t seed, float lo, float hi, float *out)
{
    if (n <= 0)
        return cudaSuccess;
    fill_random_kernel<float><<<grid_for(n), kThreads, 0, s>>>(n, seed, lo, hi, out);
    return cudaGetLastError();
}

cudaError_t nc_launch_fill_random_bf16(cudaStream_t s, int64_t n, uint64_t seed, float lo, float hi,
                                       nc_bf16 *out)
{
    if (n <= 0)
        return cudaSuccess;
    fill_random_kernel<nc_bf16><<<grid_for(n), kThreads, 0, s>>>(n, seed, lo, hi, out);
    return cudaGetLastError();
}

template <typename In, typename Out, bool Add>
cudaError_t launch_transpose_rows(cudaStream_t s, int64_t rows, int64_t a, int64_t b, const In *in, Out *out)
{
    if (rows <= 0 || a <= 0 || b <= 0)
        return cudaSuccess;
    if ((const void *)in == (const void *)out || (a + kTile - 1) / kTile > 65535)
        return cudaErrorInvalidValue;
    dim3 block(kTile, kTileRows);
    dim3 grid((unsigned)((b + kTile - 1) / kTile), (unsigned)((a + kTile - 1) / kTile),
              (unsigned)(rows < 65535 ? rows : 65535));
    transpose_rows_kernel<In, Out, Add><<<grid, block, 0, s>>>(rows, a, b, in, out);
    return cudaGetLastError();
}

cudaError_t nc_launch_transpose_rows(cudaStream_t s, int64_t rows, int64_t a, int64_t b, const float *in, float *out)
{
    return launch_transpose_rows<float, float, false>(s, rows, a, b, in, out);
}

cudaError_t nc_launch_transpose_rows_to_bf16(cudaStream_t s, int64_t rows, int64_t a, int64_t b, const float *in,
                                             nc_bf16 *out)
{
    return launch_transpose_rows<float, nc_bf16, false>(s, rows, a, b, in, out);
}

cudaError_t nc_launch_transpose_rows_add_bf16(cudaStream_t s, int64_t rows, int64_t a, int64_t b,
                                              const nc_bf16 *in, int add, float *out)
{
    return add ? launch_transpose_rows<nc_bf16, float, true>(s, rows, a, b, in, out)
               : launch_transpose_rows<nc_bf16, float, false>(s, rows, a, b, in, out);
}

cudaError_t nc_launch_avgpool_nhwc(cudaStream_t s, const nc_gwin *g, int count_include_pad, int64_t rows,
                                   const float *in, float *out)
{
    int64_t total = rows * g->c * g->oh * g->ow;
    if (total <= 0)
        return cudaSuccess;
    bool two_by_two = g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 && g->dh == 1 && g->dw == 1 && !g->pt &&
                      !g->pl && !g->pb && !g->pr && 2 * g->oh <= g->h && 2 * g->ow <= g->w;
    bool aligned = g->c % 4 == 0 && ((uintptr_t)in | (uintptr_t)out) % 16 == 0;
    if (two_by_two && aligned) {
        /* every window lies inside: the count is 4 whatever count_include_pad says */
        int64_t total4 = total / 4;
        avgpool_2x2_nhwc_kernel<<<grid_for(total4), kThreads, 0, s>>>(total4, g->c / 4, g->h, g->w, g->oh, g->ow,
                                                                      (const float4 *)in, (float4 *)out);
        return cudaGetLastError();
    }
    avgpool_nhwc_kernel<<<grid_for(total), kThreads, 0, s>>>(*g, count_include_pad, total, in, out);
    return cudaGetLastError();
}

bool nc_prespike_max_fits(const nc_gwin *g) { return (int64_t)g->kh * g->kw <= kPrespikeTaps; }

cudaError_t nc_launch_prespike_max(cudaStream_t s, const nc_gwin *g, int nhwc, int T, int64_t rows_per_step,
                                   const float *bias, const float *in, float *out)
{
    int64_t per_step = rows_per_step * g->c * g->oh * g->ow;
    if (!nc_prespike_max_fits(g))
        return cudaErrorInvalidValue;
    if (per_step <= 0 || T <= 0)
        return cudaSuccess;
    int64_t in_step = rows_per_step * g->c * g->h * g->w;
    prespike_max_kernel<<<grid_for(per_step), kThreads, 0, s>>>(*g, nhwc, T, per_step, bias, in, in_step, out);
    return cudaGetLastError();
}

cudaError_t nc_launch_maxpool_nhwc(cudaStream_t s, const nc_gwin *g, int64_t rows, const float *in, float *out)
{
    int64_t total = rows * g->c * g->oh * g->ow;
    if (total <= 0)
        return cudaSuccess;
    maxpool_nhwc_kernel<<<grid_for(total), kThreads, 0, s>>>(*g, total, in, out);
    return cudaGetLastError();
}

cudaError_t nc_launch_bf16_to_f32(cudaStream_t s, int64_t n, const nc_bf16 *in, float *out)
{
    if (n <= 0)
        return cudaSuccess;
    bf16_to_f32_kernel<<<grid_for(n), kThreads, 0, s>>>(n, in, out);
    return cudaGetLastError();
}
