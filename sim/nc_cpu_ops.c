/* nc_cpu_ops.c — the fast float32 kernels of nc_cpu_ops.h (the contract is
 * there).  Compiled once per instruction set (sim/meson.build): the AVX2
 * intrinsics below are used where the build has AVX2 + FMA, the AVX-512
 * build calls its 16-wide kernels (nc_cpu_avx512.c) for the hottest loops,
 * the other loops are vectorised by the compiler for the build's vector
 * width, and the file exports only its table of kernels (nc_cpu_kernels.h),
 * named by NC_CPU_KERNELS_TABLE, for sim/nc_cpu_dispatch.c to choose from.
 * The references are in nc_cpu_ref_ops.c. */
#include "nc_cpu_kernels.h"
#include "nc_im2col.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

/* The AVX-512 build replaces the hot 8-wide loops (event lists, event
 * gather, dense GEMM, first-layer conv) with its 16-wide kernels of
 * nc_cpu_avx512.c. */
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
#define NC_EV_AVX512 1
#include "nc_cpu_avx512.h"
#endif

/* Neurons per IF block: their membranes and thresholds stay in L1 while the
 * block walks over all T steps. */
#define NC_IF_BLOCK 256


/* ---- conv2d ------------------------------------------------------------- */


/* A conv over few input channels (Cin·kh·kw ≤ 32: an image's first layer),
 * stride 1, no dilation, groups 1, outputs at least 16 wide: im2col would
 * copy each input Cin·kh·kw times for a GEMM too thin to run near peak.
 * conv_thin instead pads one sample's input with zeros and sums the taps
 * of 32 outputs of a row in four AVX2 registers. */
#define NC_THIN_MAX_TAPS 32
static int conv_is_thin(const nc_window *g, int groups)
{
#if defined(__AVX2__) && defined(__FMA__)
    return groups == 1 && g->c * g->kernel[0] * g->kernel[1] <= NC_THIN_MAX_TAPS && g->stride[0] == 1 &&
           g->stride[1] == 1 && g->dilation[0] == 1 && g->dilation[1] == 1 && g->ow >= 16;
#else
    (void)g, (void)groups;
    return 0;
#endif
}

/* The zero-padded copy of one sample: rows oh + kh − 1, and columns enough
 * for whole blocks of 32 outputs (loads run past the last output). */
static int64_t thin_rows(const nc_window *g) { return g->oh + g->kernel[0] - 1; }
static int64_t thin_cols(const nc_window *g) { return (g->ow + 31) / 32 * 32 + g->kernel[1] - 1; }

#if defined(__AVX2__) && defined(__FMA__)
#if !NC_EV_AVX512 /* that build has its own, 16 wide */
/* The outputs of one sample from its padded copy xp ([Cin][hp][wp]). */
static void conv_thin_sample(const nc_window *g, int cout, const float *xp, const float *weight, const float *bias,
                             float *out)
{
    int cin = g->c, kh = g->kernel[0], kw = g->kernel[1], taps = cin * kh * kw;
    int64_t hp = thin_rows(g), wp = thin_cols(g), p = (int64_t)g->oh * g->ow;
    for (int m = 0; m < cout; m++) {
        const float *wm = weight + (int64_t)m * taps; /* [ci][ky][kx] */
        __m256 b = _mm256_set1_ps(bias ? bias[m] : 0.0f);
        float *om = out + m * p;
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox += 32) {
                __m256 a0 = b, a1 = b, a2 = b, a3 = b;
                for (int ci = 0, k = 0; ci < cin; ci++)
                    for (int ky = 0; ky < kh; ky++) {
                        const float *row = xp + (ci * hp + oy + ky) * wp + ox;
                        for (int kx = 0; kx < kw; kx++, k++) {
                            __m256 w = _mm256_broadcast_ss(wm + k);
                            a0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(row + kx), a0);
                            a1 = _mm256_fmadd_ps(w, _mm256_loadu_ps(row + kx + 8), a1);
                            a2 = _mm256_fmadd_ps(w, _mm256_loadu_ps(row + kx + 16), a2);
                            a3 = _mm256_fmadd_ps(w, _mm256_loadu_ps(row + kx + 24), a3);
                        }
                    }
                float *o = om + (int64_t)oy * g->ow + ox;
                if (ox + 32 <= g->ow) {
                    _mm256_storeu_ps(o, a0), _mm256_storeu_ps(o + 8, a1);
                    _mm256_storeu_ps(o + 16, a2), _mm256_storeu_ps(o + 24, a3);
                } else { /* the row's last, partial block */
                    float block[32];
                    _mm256_storeu_ps(block, a0), _mm256_storeu_ps(block + 8, a1);
                    _mm256_storeu_ps(block + 16, a2), _mm256_storeu_ps(block + 24, a3);
                    memcpy(o, block, (size_t)(g->ow - ox) * sizeof(float));
                }
            }
    }
}
#endif

static void conv_thin(const nc_window *g, int cout, int64_t rows, const float *in, const float *weight,
                      const float *bias, float *out, float *xp)
{
    int cin = g->c;
    int64_t hp = thin_rows(g), wp = thin_cols(g), hw = (int64_t)g->h * g->w, p = (int64_t)g->oh * g->ow;
    for (int64_t r = 0; r < rows; r++) {
        memset(xp, 0, (size_t)(cin * hp * wp) * sizeof(float));
        for (int ci = 0; ci < cin; ci++)
            for (int iy = 0; iy < g->h; iy++)
                memcpy(xp + (ci * hp + iy + g->pad[0]) * wp + g->pad[1], in + (r * cin + ci) * hw + (int64_t)iy * g->w,
                       (size_t)g->w * sizeof(float));
#if NC_EV_AVX512
        nc_avx512_conv_thin_sample(g, cout, xp, hp, wp, weight, bias, out + r * cout * p);
#else
        conv_thin_sample(g, cout, xp, weight, bias, out + r * cout * p);
#endif
    }
}
#endif

static size_t fast_conv2d_work_floats(const nc_window *g, int cout, int groups, int64_t rows)
{
    if (rows < 1)
        return 0;
    if (conv_is_thin(g, groups))
        return (size_t)(g->c * thin_rows(g) * thin_cols(g));
    return nc_conv_chunk_work_floats(g, cout, groups, rows);
}

/* A 1×1, stride-1, unpadded conv needs no im2col: the input plane of one
 * sample already is the [Cin_g, P] matrix, and its output block is [Cout_g, P]. */
static int conv_is_pointwise(const nc_window *g)
{
    return g->kernel[0] == 1 && g->kernel[1] == 1 && g->stride[0] == 1 && g->stride[1] == 1 &&
           !g->pad[0] && !g->pad[1] && !g->pad[2] && !g->pad[3];
}

static void add_bias_planes(int64_t rows, int cout, int64_t p, const float *bias, float *out)
{
    if (!bias)
        return;
    for (int64_t r = 0; r < rows; r++)
        for (int m = 0; m < cout; m++) {
            float b = bias[m], *o = out + (r * cout + m) * p;
            for (int64_t i = 0; i < p; i++)
                o[i] += b;
        }
}

static void conv_pointwise(const nc_window *g, int cout, int groups, int64_t rows,
                           const float *in, const float *weight, const float *bias, float *out)
{
    int cg = g->c / groups, mg = cout / groups;
    int64_t p = (int64_t)g->h * g->w;
    for (int64_t r = 0; r < rows; r++)
        for (int grp = 0; grp < groups; grp++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, mg, (int)p, cg, 1.0f,
                        weight + (int64_t)grp * mg * cg, cg, in + (r * g->c + grp * cg) * p,
                        (int)p, 0.0f, out + (r * cout + grp * mg) * p, (int)p);
    add_bias_planes(rows, cout, p, bias, out);
}

static void fast_conv2d(const nc_window *g, int cout, int groups, int64_t rows, const float *in,
               const float *weight, const float *bias, float *out, float *work, size_t work_floats)
{
    if (conv_is_pointwise(g)) {
        conv_pointwise(g, cout, groups, rows, in, weight, bias, out);
        return;
    }
#if defined(__AVX2__) && defined(__FMA__)
    if (conv_is_thin(g, groups)) {
        if (work_floats >= fast_conv2d_work_floats(g, cout, groups, 1))
            conv_thin(g, cout, rows, in, weight, bias, out, work);
        return;
    }
#endif
    int mg = cout / groups;
    int64_t kg = nc_conv_k_group(g, groups), p = (int64_t)g->oh * g->ow;
    int64_t in_row = (int64_t)g->c * g->h * g->w, out_row = (int64_t)cout * p;
    int64_t nb_max = (int64_t)work_floats / ((kg + mg) * p);
    if (nb_max < 1)
        return; /* the caller sized work with nc_conv2d_work_floats */
    float *col = work;
    for (int64_t r0 = 0; r0 < rows; r0 += nb_max) {
        int64_t nb = rows - r0 < nb_max ? rows - r0 : nb_max, ld = nb * p;
        float *tmp = col + kg * ld;
        for (int grp = 0; grp < groups; grp++) {
            nc_im2col_chunk(g, groups, grp, nb, in + r0 * in_row, col);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, mg, (int)ld, (int)kg, 1.0f,
                        weight + grp * mg * kg, (int)kg, col, (int)ld, 0.0f, tmp, (int)ld);
            /* tmp is [mg, nb·P]; the output wants [nb, cout, P]: scatter planes */
            for (int64_t s = 0; s < nb; s++)
                for (int m = 0; m < mg; m++) {
                    float *o = out + (r0 + s) * out_row + (int64_t)(grp * mg + m) * p;
                    const float *t = tmp + m * ld + s * p;
                    float b = bias ? bias[grp * mg + m] : 0.0f;
                    for (int64_t i = 0; i < p; i++)
                        o[i] = t[i] + b;
                }
        }
    }
}

/* ---- event-driven conv2d and dense --------------------------------------- */

#if defined(__AVX2__) && defined(__FMA__)
#define NC_EV_AVX2 1
#endif

/* Values of slack at the end of the event lists: the vector builders store
 * a whole vector of values and offsets, and keep those that are events. */
#define NC_EV_LIST_SLACK 16

static int64_t fast_count_nonzero(int64_t n, const float *x)
{
    int64_t count = 0, i = 0;
#if NC_EV_AVX2
    __m256 zero = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8)
        count += __builtin_popcount(
            (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), zero, _CMP_NEQ_UQ)));
#endif
    for (; i < n; i++)
        count += x[i] != 0.0f;
    return count;
}

static void fast_conv2d_events_weight(const nc_window *g, int cout, const float *weight, float *wt)
{
    int cin = g->c, kh = g->kernel[0], kw = g->kernel[1];
    for (int m = 0; m < cout; m++)
        for (int ci = 0; ci < cin; ci++)
            for (int ky = 0; ky < kh; ky++)
                for (int kx = 0; kx < kw; kx++)
                    wt[(((int64_t)ky * kw + kx) * cin + ci) * cout + m] =
                        weight[(((int64_t)m * cin + ci) * kh + ky) * kw + kx];
}

/* Whether the AVX-512 build runs the event-driven conv of this geometry by
 * scatter (nc_avx512_conv_scatter) rather than by gather (ev_gather): the
 * fused and the unfused conv choose alike, so that they agree bit for bit. */
static int conv_events_scatter(const nc_window *g, int cout)
{
#if NC_EV_AVX512
    return nc_avx512_scatter_fits(g, cout);
#else
    (void)g, (void)cout;
    return 0;
#endif
}

/* The event-driven conv's workspace: first the lists and tables of
 * conv_events_carve (int64 tables first), ... */
static size_t conv_events_lists_floats(const nc_window *g, int cout)
{
    size_t hw = (size_t)g->h * g->w, p = (size_t)g->oh * g->ow, taps = (size_t)g->kernel[0] * g->kernel[1];
    /* event offsets (int64) and values with their slack, segment offsets
     * (int64) and bounds, 8 positions of outputs [8][Cout] and of input [8][Cin] */
    return (3 * ((size_t)g->c * hw + NC_EV_LIST_SLACK) + p * (4 * taps + 1) + 8 * (size_t)cout + 8 * (size_t)g->c +
            hw + 1 + 64 + 15) / 16 * 16;
}

/* ... then, for the scatter, its buffer and one sample's currents
 * channel-last (for the unfused conv). */
static size_t conv_events_scatter_floats(const nc_window *g, int cout)
{
#if NC_EV_AVX512
    if (conv_events_scatter(g, cout))
        return (nc_avx512_scatter_work_floats(g, cout) + 15) / 16 * 16 + (size_t)g->oh * g->ow * cout;
#endif
    (void)g, (void)cout;
    return 0;
}

static size_t fast_conv2d_events_work_floats(const nc_window *g, int cout)
{
    return conv_events_lists_floats(g, cout) + conv_events_scatter_floats(g, cout);
}

/* 8×8 transpose of floats: dst[j·ld_d + i] = src[i·ld_s + j]. */
__attribute__((always_inline)) static inline void transpose8(const float *src, int64_t ld_s, float *dst, int64_t ld_d)
{
#if NC_EV_AVX2
    __m256 r[8], t[8];
    _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++)
        r[i] = _mm256_loadu_ps(src + i * ld_s);
    _Pragma("GCC unroll 4") for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    _Pragma("GCC unroll 2") for (int i = 0; i < 8; i += 4) {
        r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
        t[i] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x20);
        t[i + 4] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x31);
    }
    _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++)
        _mm256_storeu_ps(dst + i * ld_d, t[i]);
#else
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++)
            dst[j * ld_d + i] = src[i * ld_s + j];
#endif
}

/* [rows][cols] → [cols][rows]. */
static void transpose_plane(int64_t rows, int cols, const float *src, float *dst)
{
    int64_t r8 = rows & ~(int64_t)7;
    int c8 = cols & ~7;
    for (int64_t r = 0; r < r8; r += 8)
        for (int c = 0; c < c8; c += 8)
            transpose8(src + r * cols + c, cols, dst + c * rows + r, rows);
    for (int64_t r = 0; r < rows; r++)
        for (int c = r < r8 ? c8 : 0; c < cols; c++)
            dst[c * rows + r] = src[r * cols + c];
}

#if NC_EV_AVX2
/* ev_pack[m]: the lanes set in the 8-bit mask m, in order, then zeros (a
 * left-pack permutation for _mm256_permutevar8x32_ps); filled at load. */
static int32_t ev_pack[256][8];

__attribute__((constructor)) static void ev_pack_init(void)
{
    for (int m = 0; m < 256; m++) {
        int n = 0;
        for (int b = 0; b < 8; b++)
            if (m & (1 << b))
                ev_pack[m][n++] = b;
        while (n < 8)
            ev_pack[m][n++] = 0;
    }
}
#endif

/* The events of input positions [q0, q1) of one sample, appended to lists
 * per position (CSR) after the ne events so far: position q holds events
 * [start[q], start[q+1]), of value val[e] and weight offset
 * off[e] = ix·tap_ld + ci·cout (ix: the position's column).  xt holds those
 * positions as [q1 − q0][Cin].  Returns the new count of events. */
static int event_lists(int64_t q0, int64_t q1, int w, int cin, int cout, int64_t tap_ld, const float *xt,
                       int *start, int64_t *off, float *val, int ne)
{
#if NC_EV_AVX512
    return nc_avx512_event_lists(q0, q1, w, cin, cout, tap_ld, xt, start, off, val, ne);
#endif
#if NC_EV_AVX2
    const __m256i vcout = _mm256_set1_epi32(cout);
#endif
    for (int64_t q = q0; q < q1; q++) {
        const float *xp = xt + (q - q0) * cin;
        int64_t base = (q % w) * tap_ld;
        start[q] = ne;
        int ci = 0;
#if NC_EV_AVX2
        /* branch-free left-pack of the non-zero lanes of 8 channels: stores 8
         * values, keeps popcount of them (the lists have slack) */
        const __m256i vbase = _mm256_set1_epi64x(base);
        for (; ci + 8 <= cin; ci += 8) {
            __m256 x = _mm256_loadu_ps(xp + ci);
            unsigned m = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_NEQ_UQ));
            __m256i perm = _mm256_loadu_si256((const __m256i *)ev_pack[m]);
            _mm256_storeu_ps(val + ne, _mm256_permutevar8x32_ps(x, perm));
            __m256i o32 = _mm256_mullo_epi32(_mm256_add_epi32(perm, _mm256_set1_epi32(ci)), vcout);
            _mm256_storeu_si256((__m256i *)(off + ne),
                                _mm256_add_epi64(vbase, _mm256_cvtepi32_epi64(_mm256_castsi256_si128(o32))));
            _mm256_storeu_si256((__m256i *)(off + ne + 4),
                                _mm256_add_epi64(vbase, _mm256_cvtepi32_epi64(_mm256_extracti128_si256(o32, 1))));
            ne += __builtin_popcount(m);
        }
#endif
        for (; ci < cin; ci++) { /* branch-free: spikes are random */
            float v = xp[ci];
            off[ne] = base + (int64_t)ci * cout;
            val[ne] = v;
            ne += v != 0.0f;
        }
    }
    return ne;
}

/* Output positions q < nq: y[q·ldy + (0, n)] = init + Σ over the segments s
 * of q (ns[q] of them, at q·lds in lo, hi, soff) and their events e of
 * val[e]·wt[soff[s] + off[e] + (0, n)].  A segment is a run of input
 * positions [lo, hi) of one kernel row (consecutive columns when the dilation
 * is 1, else one position), whose events lie consecutively in the lists;
 * soff makes off[e] point at the tap of e's column.  The n ≤ 8·NV sums of a
 * position stay in registers: NV vectors of 8.  (A second set of sums for
 * every other event, for more FMA chains at NV ≤ 4, measured 10 % slower:
 * a segment holds a few events only.) */
#if NC_EV_AVX2
#define EV_GATHER(NV)                                                                              \
    static void ev_gather##NV(float *y, int64_t ldy, int64_t nq, const float *init, const float *wt, \
                              const int *ns, int64_t lds, const int *lo, const int *hi,            \
                              const int64_t *soff, const int *start, const int64_t *off,           \
                              const float *val)                                                    \
    {                                                                                              \
        for (int64_t qq = 0; qq < nq; qq++, y += ldy, lo += lds, hi += lds, soff += lds) {         \
            __m256 a[NV];                                                                          \
            _Pragma("GCC unroll 8") for (int j = 0; j < NV; j++) a[j] =                            \
                init ? _mm256_loadu_ps(init + 8 * j) : _mm256_setzero_ps();                        \
            for (int t = 0; t < ns[qq]; t++) {                                                     \
                const float *wb = wt + soff[t];                                                    \
                for (int e = start[lo[t]], e1 = start[hi[t]]; e < e1; e++) {                       \
                    const float *p = wb + off[e];                                                  \
                    __m256 u = _mm256_broadcast_ss(val + e);                                       \
                    _Pragma("GCC unroll 8") for (int j = 0; j < NV; j++) a[j] =                    \
                        _mm256_fmadd_ps(u, _mm256_loadu_ps(p + 8 * j), a[j]);                      \
                }                                                                                  \
            }                                                                                      \
            _Pragma("GCC unroll 8") for (int j = 0; j < NV; j++) _mm256_storeu_ps(y + 8 * j, a[j]); \
        }                                                                                          \
    }
EV_GATHER(1)
EV_GATHER(2)
EV_GATHER(3)
EV_GATHER(4)

EV_GATHER(5)
EV_GATHER(6)
EV_GATHER(7)
EV_GATHER(8)
#undef EV_GATHER
#endif

/* The same for n outputs of any count, in blocks of up to 64 (tail scalar). */
static void ev_gather(float *y, int64_t ldy, int64_t nq, int n, const float *init, const float *wt,
                      const int *ns, int64_t lds, const int *lo, const int *hi, const int64_t *soff,
                      const int *start, const int64_t *off, const float *val)
{
#if NC_EV_AVX512
    nc_avx512_ev_gather(y, ldy, nq, n, init, wt, ns, lds, lo, hi, soff, start, off, val);
    return;
#endif
    int c0 = 0;
#if NC_EV_AVX2
    while (n - c0 >= 8) {
        int nv = (n - c0) / 8 < 8 ? (n - c0) / 8 : 8;
        const float *i0 = init ? init + c0 : NULL;
        float *y0 = y + c0;
        const float *w0 = wt + c0;
        switch (nv) {
        case 1: ev_gather1(y0, ldy, nq, i0, w0, ns, lds, lo, hi, soff, start, off, val); break;
        case 2: ev_gather2(y0, ldy, nq, i0, w0, ns, lds, lo, hi, soff, start, off, val); break;
        case 3: ev_gather3(y0, ldy, nq, i0, w0, ns, lds, lo, hi, soff, start, off, val); break;
        case 4: ev_gather4(y0, ldy, nq, i0, w0, ns, lds, lo, hi, soff, start, off, val); break;
        case 5: ev_gather5(y0, ldy, nq, i0, w0, ns, lds, lo, hi, soff, start, off, val); break;
        case 6: ev_gather6(y0, ldy, nq, i0, w0, ns, lds, lo, hi, soff, start, off, val); break;
        case 7: ev_gather7(y0, ldy, nq, i0, w0, ns, lds, lo, hi, soff, start, off, val); break;
        default: ev_gather8(y0, ldy, nq, i0, w0, ns, lds, lo, hi, soff, start, off, val); break;
        }
        c0 += 8 * nv;
    }
#endif
    for (int64_t qq = 0; qq < nq && c0 < n; qq++) {
        const int *l = lo + qq * lds, *h = hi + qq * lds;
        const int64_t *so = soff + qq * lds;
        for (int i = c0; i < n; i++) {
            float acc = init ? init[i] : 0.0f;
            for (int t = 0; t < ns[qq]; t++)
                for (int e = start[l[t]]; e < start[h[t]]; e++)
                    acc += val[e] * wt[so[t] + off[e] + i];
            y[qq * ldy + i] = acc;
        }
    }
}

/* The workspace of nc_conv2d_events, carved from `work`: one sample's event
 * lists, the segment tables of every output position, and staging for 8
 * positions of outputs and inputs. */
typedef struct conv_events_work {
    int64_t *off, *soff;
    float *val, *acc, *xt;
    int *start, *n_s, *s_lo, *s_hi;
} conv_events_work;

static conv_events_work conv_events_carve(const nc_window *g, int cout, float *work)
{
    int64_t p = (int64_t)g->oh * g->ow, hw = (int64_t)g->h * g->w, taps = (int64_t)g->kernel[0] * g->kernel[1];
    conv_events_work cw;
    cw.off = (int64_t *)work;
    cw.soff = cw.off + g->c * hw + NC_EV_LIST_SLACK;
    cw.val = (float *)(cw.soff + p * taps);
    cw.acc = cw.val + g->c * hw + NC_EV_LIST_SLACK;
    cw.xt = cw.acc + 8 * cout;
    cw.start = (int *)(cw.xt + 8 * g->c);
    cw.n_s = cw.start + hw + 1;
    cw.s_lo = cw.n_s + p;
    cw.s_hi = cw.s_lo + p * taps;
    return cw;
}

/* The segments of every output position q (see ev_gather). */
static void conv_events_segments(const nc_window *g, int cout, conv_events_work *cw)
{
    int kh = g->kernel[0], kw = g->kernel[1], taps = kh * kw, dw = g->dilation[1];
    int64_t tap_ld = (int64_t)g->c * cout; /* floats between taps of wt */
    for (int oy = 0; oy < g->oh; oy++)
        for (int ox = 0; ox < g->ow; ox++) {
            int64_t q = (int64_t)oy * g->ow + ox, at = q * taps;
            int n = 0, x0 = ox * g->stride[1] - g->pad[1];
            for (int ky = 0; ky < kh; ky++) {
                int iy = oy * g->stride[0] - g->pad[0] + ky * g->dilation[0];
                if (iy < 0 || iy >= g->h)
                    continue;
                for (int kx = 0; kx < kw; kx++) {
                    int ix = x0 + kx * dw;
                    if (ix < 0 || ix >= g->w)
                        continue;
                    int pos = iy * g->w + ix;
                    if (dw == 1 && n > 0 && cw->s_hi[at + n - 1] == pos &&
                        cw->soff[at + n - 1] == ((int64_t)ky * kw - x0) * tap_ld) {
                        cw->s_hi[at + n - 1] = pos + 1; /* extends the run of this kernel row */
                        continue;
                    }
                    cw->s_lo[at + n] = pos;
                    cw->s_hi[at + n] = pos + 1;
                    /* tap ky·kw + kx of column ix: (ky·kw + kx)·tap_ld − ix·tap_ld + off */
                    cw->soff[at + n++] = ((int64_t)ky * kw + kx - ix) * tap_ld;
                }
            }
            cw->n_s[q] = n;
        }
}

/* The event lists of one input row x (see event_lists), 8 input positions
 * at a time: their [8][Cin] stay in L1. */
static void conv_events_lists(const nc_window *g, int cout, const float *x, const conv_events_work *cw)
{
    int cin = g->c, c8 = cin & ~7;
    int64_t hw = (int64_t)g->h * g->w, tap_ld = (int64_t)cin * cout;
    int ne = 0;
    for (int64_t q0 = 0; q0 < hw; q0 += 8) {
        int nq = hw - q0 < 8 ? (int)(hw - q0) : 8;
        if (q0 % 16 == 0)
            for (int ci = 0; ci < cin; ci++)
                __builtin_prefetch(x + ci * hw + q0 + 64);
        for (int ci = 0; ci < cin; ci += 8)
            if (nq == 8 && ci < c8)
                transpose8(x + ci * hw + q0, hw, cw->xt + ci, cin);
            else
                for (int i = ci; i < cin && i < ci + 8; i++)
                    for (int j = 0; j < nq; j++)
                        cw->xt[j * cin + i] = x[i * hw + q0 + j];
        ne = event_lists(q0, q0 + nq, g->w, cin, cout, tap_ld, cw->xt, cw->start, cw->off, cw->val, ne);
    }
    cw->start[hw] = ne;
}

/* Output positions [q0, q0 + nq) (nq ≤ 8) of the row whose lists cw holds,
 * as [nq][Cout] in dst: bias plus the gathered events. */
static void conv_events_block(const nc_window *g, int cout, int64_t q0, int nq, const float *wt, const float *bias,
                              const conv_events_work *cw, float *dst)
{
    int taps = g->kernel[0] * g->kernel[1];
    ev_gather(dst, cout, nq, cout, bias, wt, cw->n_s + q0, taps, cw->s_lo + q0 * taps, cw->s_hi + q0 * taps,
              cw->soff + q0 * taps, cw->start, cw->off, cw->val);
}

/* One row (sample) of the conv, once the segment tables are made. */
static void conv_events_row(const nc_window *g, int cout, const float *x, const float *wt, const float *bias,
                            float *o, const conv_events_work *cw)
{
    int m8 = cout & ~7;
    int64_t p = (int64_t)g->oh * g->ow;
    conv_events_lists(g, cout, x, cw);
    /* the outputs, 8 positions at a time: [8][Cout] in L1 → [Cout][P] */
    for (int64_t q0 = 0; q0 < p; q0 += 8) {
        int nq = p - q0 < 8 ? (int)(p - q0) : 8;
        conv_events_block(g, cout, q0, nq, wt, bias, cw, cw->acc);
        for (int m = 0; m < cout; m += 8)
            if (nq == 8 && m < m8)
                transpose8(cw->acc + m, cout, o + m * p + q0, p);
            else
                for (int i = m; i < cout && i < m + 8; i++)
                    for (int j = 0; j < nq; j++)
                        o[i * p + q0 + j] = cw->acc[j * cout + i];
    }
}

/* sum[k] += x[k]. */
static void add_into(int64_t n, const float *restrict x, float *restrict sum)
{
    int64_t k = 0;
#if NC_EV_AVX2 /* -O2 does not vectorise loops of unknown length */
    for (; k + 8 <= n; k += 8)
        _mm256_storeu_ps(sum + k, _mm256_add_ps(_mm256_loadu_ps(sum + k), _mm256_loadu_ps(x + k)));
#endif
    for (; k < n; k++)
        sum[k] += x[k];
}

/* sum (channel-last [P][Cout]) = the currents of spikes x (add 0), or
 * sum += them (add 1): by scatter where conv_events_scatter, else by
 * gather, 8 positions a block.  cw: the lists of `work`. */
static void conv_events_sum(const nc_window *conv, int cout, const float *x, const float *next, const float *wt,
                            const float *bias, int add, float *sum, const conv_events_work *cw, float *work)
{
    int64_t p = (int64_t)conv->oh * conv->ow, in_row = (int64_t)conv->c * conv->h * conv->w;
    conv_events_lists(conv, cout, x, cw);
    /* the next input (if any) into L2 while this one's sums are made: the
     * lists wait on it otherwise (it was written long ago, by the IF) */
    for (int64_t k = 0; next && k < in_row; k += 16)
        __builtin_prefetch(next + k, 0, 2);
#if NC_EV_AVX512
    if (conv_events_scatter(conv, cout)) {
        nc_avx512_conv_scatter(conv, cout, cw->start, cw->off, cw->val, wt, bias, sum, add,
                               work + conv_events_lists_floats(conv, cout));
        return;
    }
#endif
    (void)work;
    for (int64_t q0 = 0; q0 < p; q0 += 8) {
        int nq = p - q0 < 8 ? (int)(p - q0) : 8;
        float *dst = add ? cw->acc : sum + q0 * cout;
        conv_events_block(conv, cout, q0, nq, wt, bias, cw, dst);
        if (add)
            add_into((int64_t)nq * cout, cw->acc, sum + q0 * cout);
    }
}

static void fast_conv2d_events(const nc_window *g, int cout, int64_t rows, const float *in, const float *wt,
                      const float *bias, float *out, float *work)
{
    int64_t in_row = (int64_t)g->c * g->h * g->w, out_row = (int64_t)cout * g->oh * g->ow;
    if (conv_events_scatter(g, cout)) { /* channel-last currents, then [Cout][OH·OW] */
        conv_events_work cw = conv_events_carve(g, cout, work);
        float *cl = work + fast_conv2d_events_work_floats(g, cout) - (size_t)g->oh * g->ow * cout;
        for (int64_t r = 0; r < rows; r++) {
            conv_events_sum(g, cout, in + r * in_row, r + 1 < rows ? in + (r + 1) * in_row : NULL, wt, bias, 0, cl,
                            &cw, work);
            transpose_plane((int64_t)g->oh * g->ow, cout, cl, out + r * out_row);
        }
        return;
    }
    conv_events_work cw = conv_events_carve(g, cout, work);
    conv_events_segments(g, cout, &cw);
    for (int64_t r = 0; r < rows; r++)
        conv_events_row(g, cout, in + r * in_row, wt, bias, out + r * out_row, &cw);
}

static void fast_dense_events_weight(int fin, int fout, const float *weight, float *wt)
{
    /* [fout][fin] → [fin][fout] in 8×8 tiles: the engine redoes this every
     * pass, and one value at a time it cost a cache miss per value */
    transpose_plane(fout, fin, weight, wt);
}

/* Rows per block of nc_dense_events: their event lists are built first, then
 * each slice of NC_EV_BLOCK outputs of the weight serves all of them while
 * in cache (the AVX-512 build's gather holds 128 sums in registers, the
 * others 64). */
#if NC_EV_AVX512
#define NC_EV_BLOCK NC_AVX512_EV_BLOCK
#else
#define NC_EV_BLOCK 64
#endif
#define NC_DENSE_EV_ROWS 16

static size_t fast_dense_events_work_floats(int fin)
{
    /* event offsets (int64) and values with their slack, list starts */
    return 3 * ((size_t)NC_DENSE_EV_ROWS * (size_t)fin + NC_EV_LIST_SLACK) + NC_DENSE_EV_ROWS + 1 + 16;
}

static void fast_dense_events(int64_t rows, int fin, int fout, const float *in, const float *wt,
                     const float *bias, float *out, float *work)
{
    int64_t *off = (int64_t *)work;
    float *val = (float *)(off + (int64_t)NC_DENSE_EV_ROWS * fin + NC_EV_LIST_SLACK);
    int *start = (int *)(val + (int64_t)NC_DENSE_EV_ROWS * fin + NC_EV_LIST_SLACK);
    /* row k is one segment: positions [k, k + 1) of the lists, offset 0 */
    static const int ones[NC_DENSE_EV_ROWS] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    static const int rows_lo[NC_DENSE_EV_ROWS + 1] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    static const int64_t zeros[NC_DENSE_EV_ROWS] = {0};
    for (int64_t r0 = 0; r0 < rows; r0 += NC_DENSE_EV_ROWS) {
        int nb = rows - r0 < NC_DENSE_EV_ROWS ? (int)(rows - r0) : NC_DENSE_EV_ROWS, ne = 0;
        /* row k is position k of the lists: one position of fin channels,
         * event offsets i·fout */
        for (int k = 0; k < nb; k++)
            ne = event_lists(k, k + 1, 1, fin, fout, 0, in + (r0 + k) * fin, start, off, val, ne);
        start[nb] = ne;
        for (int c0 = 0; c0 < fout; c0 += NC_EV_BLOCK) {
            int n = fout - c0 < NC_EV_BLOCK ? fout - c0 : NC_EV_BLOCK;
            ev_gather(out + r0 * fout + c0, fout, nb, n, bias ? bias + c0 : NULL, wt + c0, ones, 1, rows_lo,
                      rows_lo + 1, zeros, start, off, val);
        }
    }
}

/* ---- dense -------------------------------------------------------------- */

/* The AVX-512 build computes the dense layer itself: OpenBLAS 0.3.21 runs its
 * 8-wide Haswell kernels on AMD CPUs with AVX-512, half their FMA width. */
static void fast_dense(int64_t rows, int fin, int fout, const float *in, const float *weight,
              const float *bias, float *out)
{
#if NC_EV_AVX512
    nc_avx512_dense(rows, fin, fout, 0, fout, in, weight, bias, out);
    return;
#endif
    float beta = 0.0f;
    if (bias) {
        for (int64_t r = 0; r < rows; r++)
            memcpy(out + r * fout, bias, (size_t)fout * sizeof(float));
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, fout, fin, 1.0f, in, fin,
                weight, fin, beta, out, fout);
}

static void fast_dense_cols(int64_t rows, int fin, int fout, int o0, int o1, const float *in, const float *weight,
                   const float *bias, float *out)
{
#if NC_EV_AVX512
    nc_avx512_dense(rows, fin, fout, o0, o1, in, weight, bias, out);
    return;
#endif
    float beta = 0.0f;
    if (bias) {
        for (int64_t r = 0; r < rows; r++)
            memcpy(out + r * fout + o0, bias + o0, (size_t)(o1 - o0) * sizeof(float));
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, o1 - o0, fin, 1.0f, in, fin,
                weight + (int64_t)o0 * fin, fin, beta, out + o0, fout);
}

/* ---- pools -------------------------------------------------------------- */

/* Column taps of every output column, computed once per call instead of per
 * output; `tab` has room for NC_POOL_TAB columns, wider outputs compute
 * theirs on the fly. */
#define NC_POOL_TAB 1024

static void column_taps(const nc_window *g, nc_axis_taps *tab)
{
    for (int ox = 0; ox < g->ow && ox < NC_POOL_TAB; ox++)
        tab[ox] = nc_taps_of(ox, g->kernel[1], g->stride[1], g->pad[1], g->pad[3], g->dilation[1], g->w);
}

static nc_axis_taps column_tap(const nc_window *g, const nc_axis_taps *tab, int ox)
{
    return ox < NC_POOL_TAB ? tab[ox]
                            : nc_taps_of(ox, g->kernel[1], g->stride[1], g->pad[1], g->pad[3], g->dilation[1], g->w);
}

/* 2×2 windows of stride 2, no padding, no dilation, every window inside the
 * input: the common pool; avgpool_2x2 sums in the same order as the general
 * loop, maxpool_2x2 compares in it. */
static int pool_is_2x2(const nc_window *g)
{
    return g->kernel[0] == 2 && g->kernel[1] == 2 && g->stride[0] == 2 && g->stride[1] == 2 &&
           g->dilation[0] == 1 && g->dilation[1] == 1 && !g->pad[0] && !g->pad[1] && !g->pad[2] &&
           !g->pad[3] && 2 * g->oh <= g->h && 2 * g->ow <= g->w;
}

#if NC_EV_AVX2
/* The even and the odd ones of the 16 floats at p, in order. */
static inline void even_odd16(const float *p, __m256 *even, __m256 *odd)
{
    __m256 lo = _mm256_loadu_ps(p), hi = _mm256_loadu_ps(p + 8);
    *even = _mm256_castpd_ps(_mm256_permute4x64_pd(
        _mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0))), 0xD8));
    *odd = _mm256_castpd_ps(_mm256_permute4x64_pd(
        _mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1))), 0xD8));
}
#endif

static void avgpool_2x2(const nc_window *g, int64_t rows, const float *in, float *out)
{
    int64_t hw = (int64_t)g->h * g->w;
    for (int64_t pl = 0; pl < rows * g->c; pl++) {
        const float *x = in + pl * hw;
        float *y = out + pl * g->oh * g->ow;
        for (int oy = 0; oy < g->oh; oy++) {
            const float *r0 = x + (int64_t)(2 * oy) * g->w, *r1 = r0 + g->w;
            float *yo = y + (int64_t)oy * g->ow;
            int ox = 0;
#if NC_EV_AVX2
            /* 8 outputs at a time: even and odd columns of 16 inputs per row,
             * summed in the order of the loop below (bit for bit the same) */
            for (; ox + 8 <= g->ow; ox += 8) {
                __m256 ae, ao, be, bo;
                even_odd16(r0 + 2 * ox, &ae, &ao);
                even_odd16(r1 + 2 * ox, &be, &bo);
                __m256 sum = _mm256_add_ps(_mm256_setzero_ps(), ae);
                sum = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(sum, ao), be), bo);
                _mm256_storeu_ps(yo + ox, _mm256_div_ps(sum, _mm256_set1_ps(4.0f)));
            }
#endif
            for (; ox < g->ow; ox++) {
                float sum = 0.0f;
                sum += r0[2 * ox];
                sum += r0[2 * ox + 1];
                sum += r1[2 * ox];
                sum += r1[2 * ox + 1];
                yo[ox] = sum / 4.0f;
            }
        }
    }
}

static void fast_avgpool(const nc_window *g, int count_include_pad, int64_t rows, const float *in, float *out)
{
    if (pool_is_2x2(g)) {
        avgpool_2x2(g, rows, in, out);
        return;
    }
    int64_t hw = (int64_t)g->h * g->w;
    int dh = g->dilation[0], dw = g->dilation[1];
    nc_axis_taps tab[NC_POOL_TAB];
    column_taps(g, tab);
    /* one plane at a time, so that its rows stay in cache while it is pooled */
    for (int64_t pl = 0; pl < rows * g->c; pl++) {
        const float *x = in + pl * hw;
        float *y = out + pl * g->oh * g->ow;
        for (int oy = 0; oy < g->oh; oy++) {
            nc_axis_taps ty = nc_taps_of(oy, g->kernel[0], g->stride[0], g->pad[0], g->pad[2], dh, g->h);
            for (int ox = 0; ox < g->ow; ox++) {
                nc_axis_taps tx = column_tap(g, tab, ox);
                int count = count_include_pad ? ty.n_padded * tx.n_padded
                                              : (ty.hi - ty.lo) * (tx.hi - tx.lo);
                float sum = 0.0f;
                for (int ki = ty.lo; ki < ty.hi; ki++) {
                    const float *row = x + (int64_t)(ty.start + ki * dh) * g->w + tx.start;
                    for (int kj = tx.lo; kj < tx.hi; kj++)
                        sum += row[kj * dw];
                }
                y[oy * g->ow + ox] = count > 0 ? sum / (float)count : 0.0f;
            }
        }
    }
}

/* The 2×2, stride-2 max pool (windows as in pool_is_2x2), taken in the
 * order of the general loop: best = x > best ? x : best from −inf, which is
 * what MAXPS(x, best) computes, NaN and signed zeros included. */
static void maxpool_2x2(const nc_window *g, int64_t rows, const float *in, float *out)
{
    int64_t hw = (int64_t)g->h * g->w;
    for (int64_t pl = 0; pl < rows * g->c; pl++) {
        const float *x = in + pl * hw;
        float *y = out + pl * g->oh * g->ow;
        for (int oy = 0; oy < g->oh; oy++) {
            const float *r0 = x + (int64_t)(2 * oy) * g->w, *r1 = r0 + g->w;
            float *yo = y + (int64_t)oy * g->ow;
            int ox = 0;
#if NC_EV_AVX2
            for (; ox + 8 <= g->ow; ox += 8) {
                __m256 ae, ao, be, bo;
                even_odd16(r0 + 2 * ox, &ae, &ao);
                even_odd16(r1 + 2 * ox, &be, &bo);
                __m256 best = _mm256_max_ps(ae, _mm256_set1_ps(-INFINITY));
                best = _mm256_max_ps(be, _mm256_max_ps(ao, best));
                _mm256_storeu_ps(yo + ox, _mm256_max_ps(bo, best));
            }
#endif
            for (; ox < g->ow; ox++) {
                float best = -INFINITY;
                best = r0[2 * ox] > best ? r0[2 * ox] : best;
                best = r0[2 * ox + 1] > best ? r0[2 * ox + 1] : best;
                best = r1[2 * ox] > best ? r1[2 * ox] : best;
                best = r1[2 * ox + 1] > best ? r1[2 * ox + 1] : best;
                yo[ox] = best;
            }
        }
    }
}

static void fast_maxpool(const nc_window *g, int64_t rows, const float *in, float *out)
{
    if (pool_is_2x2(g)) {
        maxpool_2x2(g, rows, in, out);
        return;
    }
    int64_t hw = (int64_t)g->h * g->w;
    int dh = g->dilation[0], dw = g->dilation[1];
    nc_axis_taps tab[NC_POOL_TAB];
    column_taps(g, tab);
    for (int64_t pl = 0; pl < rows * g->c; pl++) {
        const float *x = in + pl * hw;
        float *y = out + pl * g->oh * g->ow;
        for (int oy = 0; oy < g->oh; oy++) {
            nc_axis_taps ty = nc_taps_of(oy, g->kernel[0], g->stride[0], g->pad[0], g->pad[2], dh, g->h);
            for (int ox = 0; ox < g->ow; ox++) {
                nc_axis_taps tx = column_tap(g, tab, ox);
                float best = -INFINITY;
                for (int ki = ty.lo; ki < ty.hi; ki++) {
                    const float *row = x + (int64_t)(ty.start + ki * dh) * g->w + tx.start;
                    for (int kj = tx.lo; kj < tx.hi; kj++)
                        best = row[kj * dw] > best ? row[kj * dw] : best;
                }
                /* a window made only of padding (pad ≥ kernel) gives 0, not −inf */
                y[oy * g->ow + ox] = ty.lo == ty.hi || tx.lo == tx.hi ? 0.0f : best;
            }
        }
    }
}

/* y[k] becomes y[k] − prev[k], and prev[k] the old y[k]. */
static void diff_and_keep(int64_t n, float *restrict y, float *restrict prev)
{
    int64_t k = 0;
#if NC_EV_AVX2
    for (; k + 8 <= n; k += 8) {
        __m256 pooled = _mm256_loadu_ps(y + k);
        _mm256_storeu_ps(y + k, _mm256_sub_ps(pooled, _mm256_loadu_ps(prev + k)));
        _mm256_storeu_ps(prev + k, pooled);
    }
#endif
    for (; k < n; k++) {
        float pooled = y[k];
        y[k] = pooled - prev[k];
        prev[k] = pooled;
    }
}

/* Step t of the running max pool of one sample, once sum holds S(t): y gets
 * maxpool(S(t)) − maxpool(S(t−1)), prev keeps maxpool(S(t)). */
static void running_max_step(const nc_window *g, int t, const float *sum, float *prev, float *y)
{
    int64_t out_row = (int64_t)g->c * g->oh * g->ow;
    fast_maxpool(g, 1, sum, y);
    if (t == 0)
        memcpy(prev, y, (size_t)out_row * sizeof(float));
    else
        diff_and_keep(out_row, y, prev);
}

static void fast_maxpool_running(const nc_window *g, int T, int64_t n, const float *in, int64_t in_step, float *out,
                        int64_t out_step, float *work)
{
    int64_t in_row = (int64_t)g->c * g->h * g->w, out_row = (int64_t)g->c * g->oh * g->ow;
    float *sum = work, *prev = work + in_row;
    for (int64_t s = 0; s < n; s++) {
        const float *x = in + s * in_row;
        float *y = out + s * out_row;
        memcpy(sum, x, (size_t)in_row * sizeof(float));
        for (int t = 0; t < T; t++) {
            if (t > 0)
                add_into(in_row, x + t * in_step, sum);
            running_max_step(g, t, sum, prev, y + t * out_step);
        }
    }
}

static size_t fast_conv2d_events_maxpool_work_floats(const nc_window *conv, int cout, const nc_window *pool)
{
    size_t conv_out = (size_t)cout * conv->oh * conv->ow, pooled = (size_t)pool->c * pool->oh * pool->ow;
    /* the conv's workspace (its int64 tables first), then the running sums,
     * this step's pooled sums and the last step's */
    return (fast_conv2d_events_work_floats(conv, cout) + 15) / 16 * 16 + conv_out + 2 * pooled;
}

/* Max pool of a channel-last plane, in [H·W][C] → out [OH·OW][C]: the
 * comparisons of nc_maxpool in its order (window row-major, best = x > best ?
 * x : best from −inf; a window of padding only gives 0), 8 channels a vector. */
static void maxpool_channels_last_2x2(const nc_window *g, const float *in, float *out);

static void maxpool_channels_last(const nc_window *g, const float *in, float *out)
{
    if (pool_is_2x2(g)) {
        maxpool_channels_last_2x2(g, in, out);
        return;
    }
    int c = g->c, dh = g->dilation[0], dw = g->dilation[1];
    for (int oy = 0; oy < g->oh; oy++) {
        nc_axis_taps ty = nc_taps_of(oy, g->kernel[0], g->stride[0], g->pad[0], g->pad[2], dh, g->h);
        for (int ox = 0; ox < g->ow; ox++) {
            nc_axis_taps tx = nc_taps_of(ox, g->kernel[1], g->stride[1], g->pad[1], g->pad[3], dw, g->w);
            float *y = out + ((int64_t)oy * g->ow + ox) * c;
            int empty = ty.lo == ty.hi || tx.lo == tx.hi, ch = 0;
#if NC_EV_AVX2
            for (; ch + 8 <= c; ch += 8) {
                __m256 best = _mm256_set1_ps(-INFINITY);
                for (int ki = ty.lo; ki < ty.hi; ki++)
                    for (int kj = tx.lo; kj < tx.hi; kj++) {
                        int64_t at = ((int64_t)(ty.start + ki * dh) * g->w + tx.start + kj * dw) * c + ch;
                        best = _mm256_max_ps(_mm256_loadu_ps(in + at), best); /* x > best ? x : best */
                    }
                _mm256_storeu_ps(y + ch, empty ? _mm256_setzero_ps() : best);
            }
#endif
            for (; ch < c; ch++) {
                float best = -INFINITY;
                for (int ki = ty.lo; ki < ty.hi; ki++)
                    for (int kj = tx.lo; kj < tx.hi; kj++) {
                        float x = in[((int64_t)(ty.start + ki * dh) * g->w + tx.start + kj * dw) * c + ch];
                        best = x > best ? x : best;
                    }
                y[ch] = empty ? 0.0f : best;
            }
        }
    }
}

/* The same for the 2×2, stride-2 window of pool_is_2x2 (the CNNs'), without
 * the window arithmetic per output: its four taps in the general loop's
 * order, so that the results are the same bit for bit. */
static void maxpool_channels_last_2x2(const nc_window *g, const float *in, float *out)
{
    int c = g->c;
    int64_t row = (int64_t)g->w * c;
    for (int oy = 0; oy < g->oh; oy++)
        for (int ox = 0; ox < g->ow; ox++) {
            const float *x = in + (2 * oy * (int64_t)g->w + 2 * ox) * c;
            float *y = out + ((int64_t)oy * g->ow + ox) * c;
            int ch = 0;
#if NC_EV_AVX2
            for (; ch + 8 <= c; ch += 8) {
                __m256 best = _mm256_max_ps(_mm256_loadu_ps(x + ch), _mm256_set1_ps(-INFINITY));
                best = _mm256_max_ps(_mm256_loadu_ps(x + c + ch), best);
                best = _mm256_max_ps(_mm256_loadu_ps(x + row + ch), best);
                _mm256_storeu_ps(y + ch, _mm256_max_ps(_mm256_loadu_ps(x + row + c + ch), best));
            }
#endif
            for (; ch < c; ch++) {
                float best = -INFINITY;
                best = x[ch] > best ? x[ch] : best;
                best = x[c + ch] > best ? x[c + ch] : best;
                best = x[row + ch] > best ? x[row + ch] : best;
                best = x[row + c + ch] > best ? x[row + c + ch] : best;
                y[ch] = best;
            }
        }
}

/* Works channel-last inside: each step's currents (the gather's [8
 * positions][Cout] blocks, or the scatter's buffer) are added to running sums
 * kept as [P][Cout], pooled 8 channels at a time, and only the pooled
 * increments are transposed to [C][OH·OW].  Every sum, comparison and
 * difference is the one the unfused path makes, in its order. */
static void fast_conv2d_events_maxpool(const nc_window *conv, int cout, const nc_window *pool, int T, int64_t n,
                              const float *in, int64_t in_step, const float *wt, const float *bias, float *out,
                              int64_t out_step, float *work)
{
    int64_t in_row = (int64_t)conv->c * conv->h * conv->w, p = (int64_t)conv->oh * conv->ow;
    int64_t pooled_n = (int64_t)pool->oh * pool->ow, out_row = (int64_t)cout * pooled_n;
    float *sum = work + (fast_conv2d_events_work_floats(conv, cout) + 15) / 16 * 16;
    float *pooled = sum + p * cout, *prev = pooled + out_row;
    conv_events_work cw = conv_events_carve(conv, cout, work);
    if (!conv_events_scatter(conv, cout))
        conv_events_segments(conv, cout, &cw);
    for (int64_t s = 0; s < n; s++) {
        const float *x = in + s * in_row;
        float *y = out + s * out_row;
        for (int t = 0; t < T; t++) {
            /* step 0's currents are the sums; later steps add theirs */
            const float *next = t + 1 < T ? x + (t + 1) * in_step : s + 1 < n ? x + in_row : NULL;
            conv_events_sum(conv, cout, x + t * in_step, next, wt, bias, t > 0, sum, &cw, work);
            maxpool_channels_last(pool, sum, pooled);
            if (t == 0)
                memcpy(prev, pooled, (size_t)out_row * sizeof(float));
            else
                diff_and_keep(out_row, pooled, prev); /* pooled − last, and keeps pooled as last */
            transpose_plane(pooled_n, cout, pooled, y + t * out_step);
        }
    }
}

/* Index (in the plane) of the first real tap with the largest count. */
static int64_t gated_pick(const nc_window *g, const int *counts, nc_axis_taps ty, nc_axis_taps tx)
{
    int64_t best = -1;
    int best_count = -1;
    for (int ki = ty.lo; ki < ty.hi; ki++)
        for (int kj = tx.lo; kj < tx.hi; kj++) {
            int64_t idx = (int64_t)(ty.start + ki * g->dilation[0]) * g->w + tx.start +
                          kj * g->dilation[1];
            if (counts[idx] > best_count) {
                best_count = counts[idx];
                best = idx;
            }
        }
    return best;
}

/* One step of the gated pool on one plane: counts first, then the picks. */
static void gated_plane(const nc_window *g, const float *x, float *y, int *counts)
{
    for (int64_t i = 0; i < (int64_t)g->h * g->w; i++)
        counts[i] += x[i] > 0.0f;
    for (int oy = 0; oy < g->oh; oy++) {
        nc_axis_taps ty = nc_taps_of(oy, g->kernel[0], g->stride[0], g->pad[0], g->pad[2], g->dilation[0], g->h);
        for (int ox = 0; ox < g->ow; ox++) {
            nc_axis_taps tx = nc_taps_of(ox, g->kernel[1], g->stride[1], g->pad[1], g->pad[3], g->dilation[1], g->w);
            int64_t idx = gated_pick(g, counts, ty, tx);
            y[oy * g->ow + ox] = idx >= 0 ? x[idx] : 0.0f;
        }
    }
}

static void fast_maxpool_gated(const nc_window *g, int T, int64_t n, const float *in, int64_t in_step,
                      float *out, int64_t out_step, int *counts)
{
    int64_t planes = n * g->c, hw = (int64_t)g->h * g->w, ohw = (int64_t)g->oh * g->ow;
    memset(counts, 0, (size_t)(planes * hw) * sizeof(int));
    for (int t = 0; t < T; t++)
        for (int64_t pl = 0; pl < planes; pl++)
            gated_plane(g, in + t * in_step + pl * hw, out + t * out_step + pl * ohw, counts + pl * hw);
}

static void fast_global_avgpool(int64_t rows, int c, int64_t hw, const float *in, float *out)
{
    float inv = 1.0f / (float)hw;
    for (int64_t pl = 0; pl < rows * c; pl++) {
        const float *x = in + pl * hw;
        float sum = 0.0f;
        for (int64_t i = 0; i < hw; i++)
            sum += x[i];
        out[pl] = sum * inv;
    }
}

/* ---- element-wise ------------------------------------------------------- */

static void fast_affine(int64_t rows, int c, int64_t inner, const float *scale, const float *shift,
               const float *in, float *out)
{
    for (int64_t r = 0; r < rows; r++)
        for (int ch = 0; ch < c; ch++) {
            float a = scale ? scale[ch] : 1.0f, b = shift ? shift[ch] : 0.0f;
            int64_t base = (r * c + ch) * inner;
            for (int64_t i = 0; i < inner; i++)
                out[base + i] = a * in[base + i] + b;
        }
}

static void fast_scale(int64_t rows, int64_t numel, const float *w, int64_t n_w, const float *in, float *out)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *x = in + r * numel;
        float *y = out + r * numel;
        if (n_w == 1)
            for (int64_t k = 0; k < numel; k++)
                y[k] = x[k] * w[0];
        else
            for (int64_t k = 0; k < numel; k++)
                y[k] = x[k] * w[k];
    }
}

static void fast_add(int64_t n, const float *a, const float *b, float *out)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

static void fast_concat(int64_t rows, int n_inputs, const float *const *in, const int64_t *per_row,
               float *out)
{
    for (int64_t r = 0; r < rows; r++)
        for (int k = 0; k < n_inputs; k++) {
            memcpy(out, in[k] + r * per_row[k], (size_t)per_row[k] * sizeof(float));
            out += per_row[k];
        }
}

/* ---- neuron functions --------------------------------------------------- */

static void fast_relu(int64_t n, const float *in, float *out)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = in[i] > 0.0f ? in[i] : 0.0f;
}

static void fast_clip(int64_t n, float lo, float hi, const float *in, float *out)
{
    for (int64_t i = 0; i < n; i++) {
        float v = in[i] < lo ? lo : in[i];
        out[i] = v > hi ? hi : v;
    }
}

static void fast_qcfs(int64_t rows, int c, int64_t inner, const float *lambda, int n_lambda, int levels,
             float shift, const float *in, float *out)
{
    for (int64_t r = 0; r < rows; r++)
        for (int ch = 0; ch < c; ch++) {
            float lam = lambda[n_lambda == c ? ch : 0];
            int64_t base = (r * c + ch) * inner;
            for (int64_t i = 0; i < inner; i++)
                out[base + i] = nc_qcfs1(in[base + i], lam, levels, shift);
        }
}

/* ---- integrate-and-fire ------------------------------------------------- */

/* One step of a full block of IF neurons, `ge` and `sub` constant after
 * inlining.  Written so that GCC vectorises it at -O2: a fixed trip count,
 * only local arrays (no aliasing checks), and the test as m − θ ≥ 0 against
 * the constant 0 (GCC if-converts that; `m >= θ` it keeps as a branch, which
 * mispredicts on near-random firing: 16 ns per update measured).  For finite
 * values m − θ ≥ 0 ⟺ m ≥ θ exactly (IEEE subtraction is 0 only when m = θ),
 * a NaN never fires, and v = m − θ is the reference's value. */
static inline void if_step(int ge, int sub, const float *x, const float *th, float *v, float *o)
{
    for (int j = 0; j < NC_IF_BLOCK; j++) {
        float m = v[j] + x[j], d = m - th[j];
        int fire = ge ? d >= 0.0f : d > 0.0f;
        o[j] = fire ? th[j] : 0.0f;
        v[j] = fire ? (sub ? d : 0.0f) : m;
    }
}

static float if_theta(const nc_if_params *p, int c, int64_t inner, int64_t e)
{
    return p->threshold[p->n_threshold == c ? (e / inner) % c : 0];
}

/* Runs neurons [e0, e0 + len) of the flat n·C·inner range over all steps;
 * their membranes stay in L1 for all T steps.  Input and output go through
 * local copies, so in == out (in place) is fine.  v_init: the membranes
 * before the first step, or NULL for v0_fraction·θ. */
static void if_block(const nc_if_params *p, int T, int c, int64_t inner, const float *in,
                     int64_t in_step, float *out, int64_t out_step, int64_t e0, int len,
                     const float *v_init, float *v_final)
{
    float v[NC_IF_BLOCK], th[NC_IF_BLOCK], x[NC_IF_BLOCK], o[NC_IF_BLOCK];
    /* θ walks the channels without a division per neuron (they cost more than
     * the T steps of a small T) */
    int per_channel = p->n_threshold == c && c > 1;
    int64_t k = per_channel ? e0 % inner : 0;
    int ch = per_channel ? (int)((e0 / inner) % c) : 0;
    if (!per_channel) {
        float t0 = p->threshold[0];
        for (int j = 0; j < NC_IF_BLOCK; j++)
            th[j] = t0;
    } else {
        for (int j = 0; j < len; j++) {
            th[j] = p->threshold[ch];
            if (++k == inner) {
                k = 0;
                ch = ch + 1 == c ? 0 : ch + 1;
            }
        }
    }
    for (int j = len; j < NC_IF_BLOCK; j++) { /* lanes past len compute on zeros, unused */
        th[j] = 1.0f;
        x[j] = 0.0f;
    }
    for (int j = 0; j < NC_IF_BLOCK; j++)
        v[j] = p->v0_fraction * th[j];
    if (v_init)
        memcpy(v, v_init + e0, (size_t)len * sizeof(float));
    int ge = p->compare == NC_FIRE_GE, sub = p->reset == NC_RESET_SUBTRACT;
    for (int t = 0; t < T; t++) {
        if (t == 0 || in_step) /* a constant input (in_step 0) is copied once */
            memcpy(x, in + t * in_step + e0, (size_t)len * sizeof(float));
        /* a whole block writes its spikes straight to out (x is a copy, so
         * in place is fine); a partial one through o */
        float *dst = len == NC_IF_BLOCK ? out + t * out_step + e0 : o;
        if (ge && sub)
            if_step(1, 1, x, th, v, dst);
        else if (ge)
            if_step(1, 0, x, th, v, dst);
        else if (sub)
            if_step(0, 1, x, th, v, dst);
        else
            if_step(0, 0, x, th, v, dst);
        if (dst == o)
            memcpy(out + t * out_step + e0, o, (size_t)len * sizeof(float));
    }
    if (v_final)
        memcpy(v_final + e0, v, (size_t)len * sizeof(float));
}

static void if_all(const nc_if_params *p, int T, int64_t n, int c, int64_t inner, const float *in,
                   int64_t in_step, float *out, int64_t out_step, const float *v_init, float *v_final)
{
    int64_t total = n * c * inner;
    for (int64_t e0 = 0; e0 < total; e0 += NC_IF_BLOCK) {
        int len = (int)(total - e0 < NC_IF_BLOCK ? total - e0 : NC_IF_BLOCK);
        if_block(p, T, c, inner, in, in_step, out, out_step, e0, len, v_init, v_final);
    }
}

static void fast_if_run(const nc_if_params *p, int T, int64_t n, int c, int64_t inner, const float *in,
               int64_t in_step, float *out, int64_t out_step, float *v_final)
{
    if_all(p, T, n, c, inner, in, in_step, out, out_step, NULL, v_final);
}

static void fast_if_state_init(const nc_if_params *p, int64_t n, int c, int64_t inner, float *v)
{
    for (int64_t e = 0; e < n * c * inner; e++)
        v[e] = p->v0_fraction * if_theta(p, c, inner, e);
}

static void fast_if_run_state(const nc_if_params *p, int T, int64_t n, int c, int64_t inner, const float *in,
                     int64_t in_step, float *out, int64_t out_step, float *v)
{
    /* each block reads its membranes before it writes them: v may be both */
    if_all(p, T, n, c, inner, in, in_step, out, out_step, v, v);
}

/* ---- input encoding ----------------------------------------------------- */

/* splitmix64 at position `counter` of the stream `seed`: a counter-based
 * generator, so any element can be drawn without the ones before it. */
static uint64_t splitmix_at(uint64_t seed, uint64_t counter)
{
    uint64_t z = seed + (counter + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void fast_poisson_encode(uint64_t seed, int first_step, int T, int64_t n, const float *in, float *out)
{
    for (int t = 0; t < T; t++) {
        uint64_t base = (uint64_t)(first_step + t) * (uint64_t)n;
        float *o = out + (int64_t)t * n;
        for (int64_t i = 0; i < n; i++) {
            float rate = in[i] < 0.0f ? 0.0f : (in[i] > 1.0f ? 1.0f : in[i]);
            float u = (float)(splitmix_at(seed, base + (uint64_t)i) >> 40) * (1.0f / 16777216.0f);
            o[i] = u < rate ? 1.0f : 0.0f;
        }
    }
}

/* ---- this build's table ------------------------------------------------- */

#if !defined(NC_CPU_KERNELS_TABLE) || !defined(NC_CPU_ISA)
#error "compile with -DNC_CPU_KERNELS_TABLE=nc_cpu_kernels_<isa> -DNC_CPU_ISA=\"<isa>\" (sim/meson.build)"
#endif

const nc_cpu_kernels NC_CPU_KERNELS_TABLE = {
    .isa = NC_CPU_ISA,
    .conv2d_work_floats = fast_conv2d_work_floats,
    .conv2d = fast_conv2d,
    .count_nonzero = fast_count_nonzero,
    .conv2d_events_weight = fast_conv2d_events_weight,
    .conv2d_events_work_floats = fast_conv2d_events_work_floats,
    .conv2d_events = fast_conv2d_events,
    .dense_events_weight = fast_dense_events_weight,
    .dense_events_work_floats = fast_dense_events_work_floats,
    .dense_events = fast_dense_events,
    .dense = fast_dense,
    .dense_cols = fast_dense_cols,
    .avgpool = fast_avgpool,
    .maxpool = fast_maxpool,
    .maxpool_running = fast_maxpool_running,
    .conv2d_events_maxpool_work_floats = fast_conv2d_events_maxpool_work_floats,
    .conv2d_events_maxpool = fast_conv2d_events_maxpool,
    .maxpool_gated = fast_maxpool_gated,
    .global_avgpool = fast_global_avgpool,
    .affine = fast_affine,
    .scale = fast_scale,
    .add = fast_add,
    .concat = fast_concat,
    .relu = fast_relu,
    .clip = fast_clip,
    .qcfs = fast_qcfs,
    .if_run = fast_if_run,
    .if_state_init = fast_if_state_init,
    .if_run_state = fast_if_run_state,
    .poisson_encode = fast_poisson_encode,
};
