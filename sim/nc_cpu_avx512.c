/* nc_cpu_avx512.c — the 16-wide kernels of the AVX-512 build (the contract
 * is in nc_cpu_avx512.h).  Compiled only into that build (sim/meson.build),
 * with -mavx512f/bw/dq/vl: on a CPU with 512-bit FMA units one instruction
 * does the work of two AVX2 ones, and masks replace the scalar tails. */
#include "nc_cpu_avx512.h"

#include <immintrin.h>

int nc_avx512_event_lists(int64_t q0, int64_t q1, int w, int cin, int cout, int64_t tap_ld, const float *xt,
                          int *start, int64_t *off, float *val, int ne)
{
    /* the weight offset of channel ci + lane, less ci·cout */
    const __m512i lane_off = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(cout));
    for (int64_t q = q0; q < q1; q++) {
        const float *xp = xt + (q - q0) * cin;
        const __m512i base = _mm512_set1_epi64((q % w) * tap_ld);
        start[q] = ne;
        for (int ci = 0; ci < cin; ci += 16) {
            /* branch-free left-pack of the non-zero lanes: stores 16 values
             * and offsets, keeps popcount of them (the lists have slack) */
            __mmask16 here = cin - ci >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (cin - ci)) - 1);
            __m512 x = _mm512_maskz_loadu_ps(here, xp + ci);
            __mmask16 m = _mm512_mask_cmp_ps_mask(here, x, _mm512_setzero_ps(), _CMP_NEQ_UQ);
            _mm512_storeu_ps(val + ne, _mm512_maskz_compress_ps(m, x));
            __m512i o32 = _mm512_maskz_compress_epi32(m, _mm512_add_epi32(lane_off, _mm512_set1_epi32(ci * cout)));
            _mm512_storeu_si512(off + ne, _mm512_add_epi64(base, _mm512_cvtepi32_epi64(_mm512_castsi512_si256(o32))));
            _mm512_storeu_si512(off + ne + 8,
                                _mm512_add_epi64(base, _mm512_cvtepi32_epi64(_mm512_extracti32x8_epi32(o32, 1))));
            ne += __builtin_popcount(m);
        }
    }
    return ne;
}

/* ev_gather for 16·(NV − 1) < n ≤ 16·NV outputs, the NV sums of a position in
 * registers; `last` masks the lanes of the last vector that exist (loads and
 * stores past n are masked off, so they never touch memory).  The events of
 * a segment go in pairs into two sets of sums, a and b, added at the end:
 * one set of NV ≤ 2 vectors leaves the FMA units waiting on the latency of
 * the previous FMA of the same sum.  A pair's missing second event (an odd
 * count) is the first one again under an empty mask.  NV up to 8 (16 sums
 * in registers): a dense layer of 128 outputs (the MLP's) reads each event
 * once instead of once per block of 64. */
#define EV_LOAD(NV, j, p) (j < NV - 1 ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(last, p))
#define EV_GATHER16(NV)                                                                                    \
    static void ev_gather16_##NV(float *y, int64_t ldy, int64_t nq, __mmask16 last, const float *init,       \
                                 const float *wt, const int *ns, int64_t lds, const int *lo, const int *hi,  \
                                 const int64_t *soff, const int *start, const int64_t *off, const float *val) \
    {                                                                                                      \
        for (int64_t qq = 0; qq < nq; qq++, y += ldy, lo += lds, hi += lds, soff += lds) {                 \
            __m512 a[NV], b[NV];                                                                           \
            _Pragma("GCC unroll 8") for (int j = 0; j < NV; j++) {                                         \
                a[j] = init ? EV_LOAD(NV, j, init + 16 * j) : _mm512_setzero_ps();                         \
                b[j] = _mm512_setzero_ps();                                                                \
            }                                                                                              \
            for (int t = 0; t < ns[qq]; t++) {                                                             \
                const float *wb = wt + soff[t];                                                            \
                for (int e = start[lo[t]], e1 = start[hi[t]]; e < e1; e += 2) {                            \
                    int more = e + 1 < e1;                                                                 \
                    __mmask16 second = (__mmask16)-more;                                                   \
                    const float *p0 = wb + off[e], *p1 = wb + off[e + more];                               \
                    __m512 u0 = _mm512_set1_ps(val[e]), u1 = _mm512_set1_ps(val[e + more]);                \
                    _Pragma("GCC unroll 8") for (int j = 0; j < NV; j++) {                                 \
                        a[j] = _mm512_fmadd_ps(u0, EV_LOAD(NV, j, p0 + 16 * j), a[j]);                     \
                        b[j] = _mm512_mask3_fmadd_ps(u1, EV_LOAD(NV, j, p1 + 16 * j), b[j], second);       \
                    }                                                                                      \
                }                                                                                          \
            }                                                                                              \
            _Pragma("GCC unroll 8") for (int j = 0; j < NV - 1; j++)                                       \
                _mm512_storeu_ps(y + 16 * j, _mm512_add_ps(a[j], b[j]));                                   \
            _mm512_mask_storeu_ps(y + 16 * (NV - 1), last, _mm512_add_ps(a[NV - 1], b[NV - 1]));          \
        }                                                                                                  \
    }
EV_GATHER16(1)
EV_GATHER16(2)
EV_GATHER16(3)
EV_GATHER16(4)
EV_GATHER16(5)
EV_GATHER16(6)
EV_GATHER16(7)
EV_GATHER16(8)
#undef EV_GATHER16

#undef EV_LOAD

void nc_avx512_ev_gather(float *y, int64_t ldy, int64_t nq, int n, const float *init, const float *wt,
                         const int *ns, int64_t lds, const int *lo, const int *hi, const int64_t *soff,
                         const int *start, const int64_t *off, const float *val)
{
    for (int c0 = 0; c0 < n; c0 += NC_AVX512_EV_BLOCK) {
        int nc = n - c0 < NC_AVX512_EV_BLOCK ? n - c0 : NC_AVX512_EV_BLOCK, nv = (nc + 15) / 16;
        __mmask16 last = (__mmask16)(nc % 16 ? (1u << (nc % 16)) - 1 : 0xFFFF);
        const float *i0 = init ? init + c0 : NULL;
        switch (nv) {
        case 1: ev_gather16_1(y + c0, ldy, nq, last, i0, wt + c0, ns, lds, lo, hi, soff, start, off, val); break;
        case 2: ev_gather16_2(y + c0, ldy, nq, last, i0, wt + c0, ns, lds, lo, hi, soff, start, off, val); break;
        case 3: ev_gather16_3(y + c0, ldy, nq, last, i0, wt + c0, ns, lds, lo, hi, soff, start, off, val); break;
        case 4: ev_gather16_4(y + c0, ldy, nq, last, i0, wt + c0, ns, lds, lo, hi, soff, start, off, val); break;
        case 5: ev_gather16_5(y + c0, ldy, nq, last, i0, wt + c0, ns, lds, lo, hi, soff, start, off, val); break;
        case 6: ev_gather16_6(y + c0, ldy, nq, last, i0, wt + c0, ns, lds, lo, hi, soff, start, off, val); break;
        case 7: ev_gather16_7(y + c0, ldy, nq, last, i0, wt + c0, ns, lds, lo, hi, soff, start, off, val); break;
        default: ev_gather16_8(y + c0, ldy, nq, last, i0, wt + c0, ns, lds, lo, hi, soff, start, off, val); break;
        }
    }
}

/* ---- event-driven conv by scatter ---------------------------------------- */

/* The buffer of one sample's currents, channel-last with a margin: buffer
 * row (iy + 2) and column (ix + 2) hold the outputs that tap (0, 0) of input
 * (iy, ix) reaches, and tap (ky, kx) reaches the position ky rows and kx
 * columns before it.  Every tap of every input lands inside, so the scatter
 * tests no bounds; the outputs are its rows and columns from
 * (2 − pad top, 2 − pad left) on. */
#define SC_K 3
static int64_t scatter_buf_cols(const nc_window *g) { return g->w + SC_K - 1; }
static int64_t scatter_buf_floats(const nc_window *g, int cout)
{
    return (int64_t)(g->h + SC_K - 1) * scatter_buf_cols(g) * cout;
}

int nc_avx512_scatter_fits(const nc_window *g, int cout)
{
    return cout >= 1 && cout <= 32 && g->kernel[0] == SC_K && g->kernel[1] == SC_K && g->stride[0] == 1 &&
           g->stride[1] == 1 && g->dilation[0] == 1 && g->dilation[1] == 1 && g->pad[0] < SC_K &&
           g->pad[2] < SC_K && g->pad[1] < SC_K && g->pad[3] < SC_K &&
           scatter_buf_floats(g, cout) <= NC_AVX512_SCATTER_MAX_FLOATS;
}

size_t nc_avx512_scatter_work_floats(const nc_window *g, int cout)
{
    return 16 + (size_t)scatter_buf_floats(g, cout); /* alignment, the buffer */
}

/* Input position by input position: the taps of its events summed in
 * registers (9·NV sums; one loop over the position's events, whose exit is
 * the one mispredicted branch), then added into the 9 outputs they reach.
 * The gather (nc_avx512_ev_gather) instead runs three short loops per output
 * position, each ending in a mispredicted exit. */
#define SC_LOAD(j, p) (j < nv - 1 || full ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(last, p))
#define SC_STORE(j, p, v) (j < nv - 1 || full ? _mm512_storeu_ps(p, v) : _mm512_mask_storeu_ps(p, last, v))
#define SCATTER(NV, FULL)                                                                                  \
    static void scatter##NV##_##FULL(const nc_window *g, int cout, __mmask16 last, const float *wt,          \
                                     const int *start, const int64_t *off, const float *val, float *buf)   \
    {                                                                                                      \
        const int full = FULL, nv = NV; /* SC_LOAD, SC_STORE (full: no masked lanes) */                                   \
        int64_t tap_ld = (int64_t)g->c * cout, cols = scatter_buf_cols(g);                                 \
        for (int iy = 0, q = 0; iy < g->h; iy++)                                                           \
            for (int ix = 0; ix < g->w; ix++, q++) {                                                       \
                if (start[q] == start[q + 1])                                                              \
                    continue;                                                                              \
                __m512 acc[SC_K * SC_K][NV];                                                               \
                _Pragma("GCC unroll 9") for (int k = 0; k < SC_K * SC_K; k++)                              \
                    _Pragma("GCC unroll 2") for (int j = 0; j < NV; j++) acc[k][j] = _mm512_setzero_ps();  \
                const float *wq = wt - ix * tap_ld; /* off[e] = ix·tap_ld + ci·Cout */                     \
                for (int e = start[q]; e < start[q + 1]; e++) {                                            \
                    __m512 u = _mm512_set1_ps(val[e]);                                                     \
                    const float *w = wq + off[e];                                                          \
                    _Pragma("GCC unroll 9") for (int k = 0; k < SC_K * SC_K; k++)                          \
                        _Pragma("GCC unroll 2") for (int j = 0; j < NV; j++) acc[k][j] =                   \
                            _mm512_fmadd_ps(u, SC_LOAD(j, w + k * tap_ld + 16 * j), acc[k][j]);            \
                }                                                                                          \
                float *o = buf + ((iy + SC_K - 1) * cols + ix + SC_K - 1) * cout;                          \
                _Pragma("GCC unroll 3") for (int ky = 0; ky < SC_K; ky++)                                  \
                    _Pragma("GCC unroll 3") for (int kx = 0; kx < SC_K; kx++) {                            \
                        float *ok = o - (ky * cols + kx) * cout;                                           \
                        _Pragma("GCC unroll 2") for (int j = 0; j < NV; j++)                               \
                            SC_STORE(j, ok + 16 * j, _mm512_add_ps(SC_LOAD(j, ok + 16 * j), acc[ky * SC_K + kx][j])); \
                    }                                                                                      \
            }                                                                                              \
    }
SCATTER(1, 0)
SCATTER(1, 1)
SCATTER(2, 0)
SCATTER(2, 1)
#undef SCATTER
#undef SC_LOAD
#undef SC_STORE

/* Every position of the buffer starts at the bias (or 0). */
static void scatter_init(int64_t positions, int cout, const float *bias, float *buf)
{
    for (int c0 = 0; c0 < cout; c0 += 16) {
        __mmask16 m = cout - c0 >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (cout - c0)) - 1);
        __m512 b = bias ? _mm512_maskz_loadu_ps(m, bias + c0) : _mm512_setzero_ps();
        for (int64_t p = 0; p < positions; p++)
            _mm512_mask_storeu_ps(buf + p * cout + c0, m, b);
    }
}

/* y = (add ? y : 0) + the buffer's outputs: OW·Cout consecutive floats per
 * output row. */
static void scatter_out(const nc_window *g, int cout, const float *buf, float *y, int add)
{
    int64_t n = (int64_t)g->ow * cout, cols = scatter_buf_cols(g);
    for (int oy = 0; oy < g->oh; oy++) {
        const float *b = buf + ((oy + SC_K - 1 - g->pad[0]) * cols + SC_K - 1 - g->pad[1]) * cout;
        float *yo = y + oy * n;
        for (int64_t k = 0; k < n; k += 16) {
            __mmask16 m = n - k >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - k)) - 1);
            __m512 v = _mm512_maskz_loadu_ps(m, b + k);
            _mm512_mask_storeu_ps(yo + k, m, add ? _mm512_add_ps(_mm512_maskz_loadu_ps(m, yo + k), v) : v);
        }
    }
}

void nc_avx512_conv_scatter(const nc_window *g, int cout, const int *start, const int64_t *off, const float *val,
                            const float *wt, const float *bias, float *y, int add, float *work)
{
    float *buf = (float *)(((uintptr_t)work + 63) & ~(uintptr_t)63); /* whole cache lines per 16 outputs */
    scatter_init(scatter_buf_floats(g, cout) / cout, cout, bias, buf);
    __mmask16 last = (__mmask16)(cout % 16 ? (1u << (cout % 16)) - 1 : 0xFFFF);
    if (cout > 16)
        (cout % 16 ? scatter2_0 : scatter2_1)(g, cout, last, wt, start, off, val, buf);
    else
        (cout % 16 ? scatter1_0 : scatter1_1)(g, cout, last, wt, start, off, val, buf);
    scatter_out(g, cout, buf, y, add);
}
#undef SC_K

/* ---- first-layer conv ---------------------------------------------------------- */

/* The same for one input channel and a 3×3 kernel (an image's first conv):
 * the 24 vectors of input that two output rows of 32 read (4 rows × 3
 * column shifts × 2) are loaded once and kept in registers for every
 * output channel, which then costs 9 broadcasts and 36 FMAs; the general
 * loop reloads them per channel (36 loads, most of them across two cache
 * lines).  The FMAs of an output run in the general loop's order. */
static void conv_thin_3x3(const nc_window *g, int cout, const float *xp, int64_t wp, const float *weight,
                          const float *bias, float *out)
{
    int64_t p = (int64_t)g->oh * g->ow;
    for (int oy = 0; oy < g->oh; oy += 2) {
        int two = oy + 1 < g->oh; /* a last single row: its second rows are its first */
        for (int ox = 0; ox < g->ow; ox += 32) {
            __m512 x[4][3][2];
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
                const float *row = xp + (oy + (two ? r : r < 3 ? r : 2)) * wp + ox;
                _Pragma("GCC unroll 3") for (int kx = 0; kx < 3; kx++) {
                    x[r][kx][0] = _mm512_loadu_ps(row + kx);
                    x[r][kx][1] = _mm512_loadu_ps(row + kx + 16);
                }
            }
            int n = g->ow - ox < 32 ? g->ow - ox : 32;
            __mmask16 m0 = (__mmask16)(n >= 16 ? 0xFFFF : (1u << n) - 1);
            __mmask16 m1 = (__mmask16)(n >= 32 ? 0xFFFF : n > 16 ? (1u << (n - 16)) - 1 : 0);
            for (int m = 0; m < cout; m++) {
                __m512 a0 = _mm512_set1_ps(bias ? bias[m] : 0.0f), a1 = a0, c0 = a0, c1 = a0;
                _Pragma("GCC unroll 3") for (int ky = 0; ky < 3; ky++)
                    _Pragma("GCC unroll 3") for (int kx = 0; kx < 3; kx++) {
                        __m512 w = _mm512_set1_ps(weight[m * 9 + ky * 3 + kx]);
                        a0 = _mm512_fmadd_ps(w, x[ky][kx][0], a0);
                        a1 = _mm512_fmadd_ps(w, x[ky][kx][1], a1);
                        c0 = _mm512_fmadd_ps(w, x[two ? ky + 1 : ky][kx][0], c0);
                        c1 = _mm512_fmadd_ps(w, x[two ? ky + 1 : ky][kx][1], c1);
                    }
                float *o = out + m * p + (int64_t)oy * g->ow + ox;
                _mm512_mask_storeu_ps(o, m0, a0);
                _mm512_mask_storeu_ps(o + 16, m1, a1);
                if (two) {
                    _mm512_mask_storeu_ps(o + g->ow, m0, c0);
                    _mm512_mask_storeu_ps(o + g->ow + 16, m1, c1);
                }
            }
        }
    }
}

void nc_avx512_conv_thin_sample(const nc_window *g, int cout, const float *xp, int64_t hp, int64_t wp,
                                const float *weight, const float *bias, float *out)
{
    if (g->c == 1 && g->kernel[0] == 3 && g->kernel[1] == 3) {
        conv_thin_3x3(g, cout, xp, wp, weight, bias, out);
        return;
    }
    int cin = g->c, kh = g->kernel[0], kw = g->kernel[1], taps = cin * kh * kw;
    int64_t p = (int64_t)g->oh * g->ow;
    for (int m = 0; m < cout; m++) {
        const float *wm = weight + (int64_t)m * taps; /* [ci][ky][kx] */
        __m512 b = _mm512_set1_ps(bias ? bias[m] : 0.0f);
        float *om = out + m * p;
        for (int oy = 0; oy < g->oh; oy += 2) {
            int two = oy + 1 < g->oh; /* a last single row sums its own inputs twice, stored once */
            for (int ox = 0; ox < g->ow; ox += 32) {
                __m512 a0 = b, a1 = b, c0 = b, c1 = b;
                for (int ci = 0, k = 0; ci < cin; ci++)
                    for (int ky = 0; ky < kh; ky++) {
                        const float *row = xp + (ci * hp + oy + ky) * wp + ox, *next = two ? row + wp : row;
                        for (int kx = 0; kx < kw; kx++, k++) {
                            __m512 w = _mm512_set1_ps(wm[k]);
                            a0 = _mm512_fmadd_ps(w, _mm512_loadu_ps(row + kx), a0);
                            a1 = _mm512_fmadd_ps(w, _mm512_loadu_ps(row + kx + 16), a1);
                            c0 = _mm512_fmadd_ps(w, _mm512_loadu_ps(next + kx), c0);
                            c1 = _mm512_fmadd_ps(w, _mm512_loadu_ps(next + kx + 16), c1);
                        }
                    }
                int n = g->ow - ox < 32 ? g->ow - ox : 32; /* the row's last block may be partial */
                __mmask16 m0 = (__mmask16)(n >= 16 ? 0xFFFF : (1u << n) - 1);
                __mmask16 m1 = (__mmask16)(n >= 32 ? 0xFFFF : n > 16 ? (1u << (n - 16)) - 1 : 0);
                float *o = om + (int64_t)oy * g->ow + ox;
                _mm512_mask_storeu_ps(o, m0, a0);
                _mm512_mask_storeu_ps(o + 16, m1, a1);
                if (two) {
                    _mm512_mask_storeu_ps(o + g->ow, m0, c0);
                    _mm512_mask_storeu_ps(o + g->ow + 16, m1, c1);
                }
            }
        }
    }
}

/* ---- dense ---------------------------------------------------------------- */

/* Inputs per pass over a block of rows: 4 KiB of each row, so that a block
 * of DENSE_ROWS rows (256 KiB) stays in L2 while every output reads it, and
 * four weight rows (16 KiB) stay in L1 while the block's rows pass. */
#define DENSE_K 1024
#define DENSE_ROWS 64

/* The sums of four vectors as the four lanes of one: [Σa, Σb, Σc, Σd]. */
static inline __m128 sum4(__m512 a, __m512 b, __m512 c, __m512 d)
{
    __m256 a8 = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
    __m256 b8 = _mm256_add_ps(_mm512_castps512_ps256(b), _mm512_extractf32x8_ps(b, 1));
    __m256 c8 = _mm256_add_ps(_mm512_castps512_ps256(c), _mm512_extractf32x8_ps(c, 1));
    __m256 d8 = _mm256_add_ps(_mm512_castps512_ps256(d), _mm512_extractf32x8_ps(d, 1));
    /* [a01 a23 b01 b23 | a45 a67 b45 b67], the same for c, d, then
     * [a0123 b0123 c0123 d0123 | a4567 b4567 c4567 d4567] */
    __m256 abcd = _mm256_hadd_ps(_mm256_hadd_ps(a8, b8), _mm256_hadd_ps(c8, d8));
    return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

/* s[r] = [Σ_i a[r][i]·w[o][i] for o < 4] over i < k, for r < 4: sixteen sums
 * in sixteen registers, 16 inputs a step (the last step masked). */
static void dot4x4(int k, const float *const a[4], const float *const w[4], __m128 s[4])
{
    __m512 acc[4][4];
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)
        _Pragma("GCC unroll 4") for (int o = 0; o < 4; o++) acc[r][o] = _mm512_setzero_ps();
    for (int i = 0; i < k; i += 16) {
        __mmask16 m = k - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (k - i)) - 1);
        __m512 wv[4];
        _Pragma("GCC unroll 4") for (int o = 0; o < 4; o++) wv[o] = _mm512_maskz_loadu_ps(m, w[o] + i);
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
            __m512 av = _mm512_maskz_loadu_ps(m, a[r] + i);
            _Pragma("GCC unroll 4") for (int o = 0; o < 4; o++) acc[r][o] = _mm512_fmadd_ps(av, wv[o], acc[r][o]);
        }
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) s[r] = sum4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
}

/* Outputs [o, o + no) of rows [r, r + nr) (no, nr ≤ 4) over inputs
 * [k0, k0 + k): the first pass (k0 = 0) starts from the bias, later ones add
 * to what the earlier passes stored.  Missing rows and outputs of a block
 * repeat its last one, their sums unused. */
static void dense_block(int64_t r, int nr, int o, int no, int fin, int fout, int k0, int k, const float *in,
                        const float *weight, const float *bias, float *out)
{
    const float *a[4], *w[4];
    for (int j = 0; j < 4; j++) {
        a[j] = in + (r + (j < nr ? j : nr - 1)) * fin + k0;
        w[j] = weight + (int64_t)(o + (j < no ? j : no - 1)) * fin + k0;
    }
    __m128 s[4];
    dot4x4(k, a, w, s);
    __mmask8 m = (__mmask8)((1u << no) - 1);
    __m128 b = bias ? _mm_maskz_loadu_ps(m, bias + o) : _mm_setzero_ps();
    for (int j = 0; j < nr; j++) {
        float *y = out + (r + j) * fout + o;
        _mm_mask_storeu_ps(y, m, _mm_add_ps(k0 == 0 ? b : _mm_maskz_loadu_ps(m, y), s[j]));
    }
}

void nc_avx512_dense(int64_t rows, int fin, int fout, int o0, int o1, const float *in, const float *weight,
                     const float *bias, float *out)
{
    for (int64_t r0 = 0; r0 < rows; r0 += DENSE_ROWS) {
        int64_t r1 = rows - r0 < DENSE_ROWS ? rows : r0 + DENSE_ROWS;
        int k0 = 0;
        do { /* fin = 0 still runs one pass: the outputs are the bias */
            int k = fin - k0 < DENSE_K ? fin - k0 : DENSE_K;
            for (int o = o0; o < o1; o += 4)
                for (int64_t r = r0; r < r1; r += 4)
                    dense_block(r, r1 - r < 4 ? (int)(r1 - r) : 4, o, o1 - o < 4 ? o1 - o : 4, fin, fout, k0, k,
                                in, weight, bias, out);
            k0 += k;
        } while (k0 < fin);
    }
}
