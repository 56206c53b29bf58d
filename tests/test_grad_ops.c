/* test_grad_ops.c — the backward kernels of nc_grad_ops.h.
 *
 * Smooth or piecewise-linear ops are checked against central finite
 * differences of a float64 forward written here (so float32 rounding does
 * not drown the differences), and the linear ones also against the float
 * forward kernel itself through the adjoint identity Σ dout·F(x) = Σ din·x.
 * Where the kernel is deliberately not the true derivative (the QCFS
 * straight-through estimator, the IF surrogate), it is checked against the
 * header's formulas derived independently here: QCFS by finite differences
 * of the STE's linearisation, IF BPTT by forward-mode differentiation of the
 * recurrence in float64 (the kernel runs reverse mode). */
#include "nc_test.h"
#define NC_TEST_RNG_SEED 0x9e3779b97f4a7c15ull
#include "nc_test_util.h"

#include "../sim/nc_grad_ops.h"

#include <stdint.h>

/* ---- random numbers and comparisons ------------------------------------- */

static float *filled(int64_t n, float value)
{
    float *a = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        a[i] = value;
    return a;
}

static double *to_double(const float *x, int64_t n)
{
    double *d = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    for (int64_t i = 0; i < n; i++)
        d[i] = x ? x[i] : 0.0;
    return d;
}

/* got − offset against ref, |err| ≤ atol + rtol·|ref|; prints the first
 * mismatches and the max error; returns 1 when all are close. */
static int compare(const char *what, const float *got, float offset, const double *ref, int64_t n,
                   double atol, double rtol)
{
    int shown = 0;
    int64_t bad = 0;
    double max_err = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double err = fabs(((double)got[i] - offset) - ref[i]);
        if (isnan(err) || err > max_err)
            max_err = isnan(err) ? INFINITY : err;
        if (!(err <= atol + rtol * fabs(ref[i]))) {
            bad++;
            if (shown++ < 5)
                printf("# %s: [%lld] got %.9g, expected %.9g\n", what, (long long)i,
                       (double)got[i] - offset, ref[i]);
        }
    }
    if (bad)
        printf("# %s: %lld of %lld mismatch, max error %.3g\n", what, (long long)bad, (long long)n,
               max_err);
    return bad == 0;
}

/* Gradients are compared at this tolerance (float32 kernels, float64 references). */
#define ATOL 1e-4
#define RTOL 1e-3

/* ---- finite differences --------------------------------------------------
 * The loss is L = Σ w·y with y from a float64 forward and w the dout given
 * to the kernel; fd_check perturbs the variables x[0, n) (which the forward
 * reads through its context) by ±h and compares the central differences with
 * the kernel's gradient. */
typedef void (*forward64)(const void *ctx, double *y);

typedef struct fd_setup {
    forward64 f;
    const void *ctx;
    int64_t ny;
    const double *w;
} fd_setup;

static double fd_loss(const fd_setup *s, double *y)
{
    s->f(s->ctx, y);
    double l = 0.0;
    for (int64_t i = 0; i < s->ny; i++)
        l += s->w[i] * y[i];
    return l;
}

static int fd_check(const char *what, const fd_setup *s, double *x, int64_t n, double h,
                    const float *got, float offset)
{
    double *y = malloc((size_t)s->ny * sizeof(double)), *fd = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    for (int64_t i = 0; i < n; i++) {
        double x0 = x[i];
        x[i] = x0 + h;
        double lp = fd_loss(s, y);
        x[i] = x0 - h;
        double lm = fd_loss(s, y);
        x[i] = x0;
        fd[i] = (lp - lm) / (2.0 * h);
    }
    int ok = compare(what, got, offset, fd, n, ATOL, RTOL);
    free(y), free(fd);
    return ok;
}

/* Adjoint identity of a linear op F: Σ dout·F(x) = Σ din·x, both sides in
 * double, within 1e-5 of the sum of the absolute terms. */
static int adjoint_check(const char *what, const float *dout, const float *y, int64_t ny,
                         const float *din, const float *x, int64_t nx)
{
    double a = 0, b = 0, scale = 0;
    for (int64_t i = 0; i < ny; i++) {
        a += (double)dout[i] * y[i];
        scale += fabs((double)dout[i] * y[i]);
    }
    for (int64_t i = 0; i < nx; i++) {
        b += (double)din[i] * x[i];
        scale += fabs((double)din[i] * x[i]);
    }
    if (fabs(a - b) <= 1e-5 * scale + 1e-9)
        return 1;
    printf("# %s: adjoint Σ dout·F(x) = %.9g, Σ din·x = %.9g\n", what, a, b);
    return 0;
}

static int window(nc_window *g, int c, int h, int w, int kh, int kw, int sh, int sw, const int pad[4],
                  int dh, int dw, int ceil_mode)
{
    int k[2] = {kh, kw}, s[2] = {sh, sw}, d[2] = {dh, dw};
    return nc_window_init(g, c, h, w, k, s, pad, d, ceil_mode);
}

/* A random window over an input of at most max_hw × max_hw (ONNX: pad < kernel). */
static void random_window(nc_window *g, int c, int max_hw, int allow_ceil)
{
    for (;;) {
        int p[4];
        int kh = rnd_int(1, 4), kw = rnd_int(1, 4);
        for (int i = 0; i < 4; i++)
            p[i] = rnd_int(0, (i % 2 ? kw : kh) - 1);
        if (window(g, c, rnd_int(1, max_hw), rnd_int(1, max_hw), kh, kw, rnd_int(1, 3),
                   rnd_int(1, 3), p, rnd_int(1, 2), rnd_int(1, 2), allow_ceil ? rnd_int(0, 1) : 0) == 0)
            return;
    }
}

static void window_name(char *buf, size_t size, const char *op, const nc_window *g)
{
    snprintf(buf, size, "%s c %d %dx%d k %dx%d s %d,%d p %d,%d,%d,%d d %d,%d → %dx%d", op, g->c,
             g->h, g->w, g->kernel[0], g->kernel[1], g->stride[0], g->stride[1], g->pad[0],
             g->pad[1], g->pad[2], g->pad[3], g->dilation[0], g->dilation[1], g->oh, g->ow);
}

/* ---- conv2d --------------------------------------------------------------- */

typedef struct conv_ctx {
    const nc_window *g;
    int cout, groups;
    int64_t rows;
    const double *in, *w, *b;
} conv_ctx;

/* The direct convolution in float64 (nc_ref_conv2d's loops). */
static void conv_fwd64(const void *vp, double *y)
{
    const conv_ctx *k = vp;
    const nc_window *g = k->g;
    int cg = g->c / k->groups, mg = k->cout / k->groups, kh = g->kernel[0], kw = g->kernel[1];
    for (int64_t r = 0; r < k->rows; r++)
        for (int m = 0; m < k->cout; m++)
            for (int oy = 0; oy < g->oh; oy++)
                for (int ox = 0; ox < g->ow; ox++) {
                    double acc = k->b[m];
                    for (int ci = 0; ci < cg; ci++)
                        for (int ki = 0; ki < kh; ki++)
                            for (int kj = 0; kj < kw; kj++) {
                                int iy = oy * g->stride[0] - g->pad[0] + ki * g->dilation[0];
                                int ix = ox * g->stride[1] - g->pad[1] + kj * g->dilation[1];
                                if (iy < 0 || iy >= g->h || ix < 0 || ix >= g->w)
                                    continue;
                                int cin = (m / mg) * cg + ci;
                                acc += k->in[((r * g->c + cin) * g->h + iy) * g->w + ix] *
                                       k->w[(((int64_t)m * cg + ci) * kh + ki) * kw + kj];
                            }
                    y[((r * k->cout + m) * g->oh + oy) * g->ow + ox] = acc;
                }
}

/* One conv case: FD for din, dweight, dbias (the parameter gradients start
 * from non-zero values: they must be added to; din starts as NaN: it must be
 * overwritten), the adjoint against nc_conv2d, and the NULL-gradient paths. */
static int conv_case(const nc_window *g, int cout, int groups, int64_t rows, int small_work)
{
    int cg = g->c / groups;
    int64_t n_in = rows * g->c * g->h * g->w, n_out = rows * cout * g->oh * g->ow;
    int64_t n_w = (int64_t)cout * cg * g->kernel[0] * g->kernel[1];
    float *in = rnd_array(n_in), *w = rnd_array(n_w), *b = rnd_array(cout), *dout = rnd_array(n_out);
    float *din = filled(n_in, NAN), *dw = filled(n_w, 0.5f), *db = filled(cout, 0.25f);
    size_t work_n = nc_conv2d_backward_work_floats(g, cout, groups, small_work ? 1 : rows);
    float *work = malloc((work_n ? work_n : 1) * sizeof(float));
    nc_conv2d_backward(g, cout, groups, rows, in, w, dout, din, dw, db, work, work_n);

    double *in64 = to_double(in, n_in), *w64 = to_double(w, n_w), *b64 = to_double(b, cout);
    double *dout64 = to_double(dout, n_out);
    conv_ctx ctx = {g, cout, groups, rows, in64, w64, b64};
    fd_setup s = {conv_fwd64, &ctx, n_out, dout64};
    char what[256], name[200];
    window_name(name, sizeof name, "conv", g);
    int ok = 1;
    snprintf(what, sizeof what, "%s → %d g %d rows %lld din", name, cout, groups, (long long)rows);
    ok &= fd_check(what, &s, in64, n_in, 0.25, din, 0.0f);
    snprintf(what, sizeof what, "%s → %d g %d rows %lld dweight", name, cout, groups, (long long)rows);
    ok &= fd_check(what, &s, w64, n_w, 0.25, dw, 0.5f);
    snprintf(what, sizeof what, "%s → %d g %d rows %lld dbias", name, cout, groups, (long long)rows);
    ok &= fd_check(what, &s, b64, cout, 0.25, db, 0.25f);

    /* the adjoint against the forward kernel itself */
    size_t fwork_n = nc_conv2d_work_floats(g, cout, groups, rows);
    float *y = malloc((size_t)n_out * sizeof(float)), *fwork = malloc((fwork_n ? fwork_n : 1) * sizeof(float));
    nc_conv2d(g, cout, groups, rows, in, w, NULL, y, fwork, fwork_n);
    ok &= adjoint_check(name, dout, y, n_out, din, in, n_in);

    /* din and dbias NULL: dweight is the same (same work, same sums) */
    float *dw2 = filled(n_w, 0.5f);
    nc_conv2d_backward(g, cout, groups, rows, in, w, dout, NULL, dw2, NULL, work, work_n);
    ok &= memcmp(dw, dw2, (size_t)n_w * sizeof(float)) == 0;
    /* dweight NULL: din is the same */
    float *din2 = filled(n_in, NAN);
    nc_conv2d_backward(g, cout, groups, rows, in, w, dout, din2, NULL, NULL, work, work_n);
    ok &= memcmp(din, din2, (size_t)n_in * sizeof(float)) == 0;

    free(in), free(w), free(b), free(dout), free(din), free(dw), free(db), free(work);
    free(in64), free(w64), free(b64), free(dout64), free(y), free(fwork), free(dw2), free(din2);
    return ok;
}

static void test_conv_backward(void)
{
    nc_window g;
    int bad = 0;
    /* groups 2, stride 2, asymmetric padding, dilation 2 */
    int p1[4] = {1, 0, 2, 1};
    window(&g, 4, 7, 8, 3, 2, 2, 2, p1, 2, 1, 0);
    bad += !conv_case(&g, 6, 2, 2, 0);
    bad += !conv_case(&g, 6, 2, 3, 1); /* one sample per chunk */
    /* the common 3×3, stride 1, padding 1 */
    int p2[4] = {1, 1, 1, 1};
    window(&g, 3, 6, 6, 3, 3, 1, 1, p2, 1, 1, 0);
    bad += !conv_case(&g, 4, 1, 3, 0);
    /* stride and dilation along the width only */
    int p3[4] = {0, 1, 0, 1};
    window(&g, 2, 5, 7, 2, 3, 1, 2, p3, 1, 2, 0);
    bad += !conv_case(&g, 3, 1, 2, 0);
    /* 1×1 (the forward's pointwise path), groups 2 */
    int p0[4] = {0, 0, 0, 0};
    window(&g, 4, 4, 5, 1, 1, 1, 1, p0, 1, 1, 0);
    bad += !conv_case(&g, 4, 2, 2, 0);
    /* depthwise, stride 2 */
    window(&g, 3, 7, 7, 3, 3, 2, 2, p2, 1, 1, 0);
    bad += !conv_case(&g, 3, 3, 2, 0);
    for (int i = 0; i < 12; i++) {
        int groups = rnd_int(1, 2);
        random_window(&g, groups * rnd_int(1, 3), 8, 0);
        bad += !conv_case(&g, groups * rnd_int(1, 3), groups, rnd_int(1, 3), rnd_int(0, 1));
    }
    NC_CHECK(bad == 0, "%d conv cases failed", bad);
}

/* A batch split into several chunks gives the gradients of one big chunk. */
static void test_conv_backward_chunks(void)
{
    nc_window g;
    int p[4] = {1, 1, 1, 1};
    window(&g, 8, 12, 12, 3, 3, 1, 1, p, 1, 1, 0);
    int cout = 6;
    int64_t rows = 9, n_in = rows * 8 * 144, n_out = rows * cout * 144, n_w = cout * 8 * 9;
    float *in = rnd_array(n_in), *w = rnd_array(n_w), *dout = rnd_array(n_out);
    size_t big = nc_conv2d_backward_work_floats(&g, cout, 1, rows);
    size_t small = nc_conv2d_backward_work_floats(&g, cout, 1, 1) * 2; /* 2 samples a chunk */
    float *work = malloc(big * sizeof(float));
    float *din_a = malloc((size_t)n_in * sizeof(float)), *din_b = malloc((size_t)n_in * sizeof(float));
    float *dw_a = filled(n_w, 0), *dw_b = filled(n_w, 0), *db_a = filled(cout, 0), *db_b = filled(cout, 0);
    nc_conv2d_backward(&g, cout, 1, rows, in, w, dout, din_a, dw_a, db_a, work, big);
    nc_conv2d_backward(&g, cout, 1, rows, in, w, dout, din_b, dw_b, db_b, work, small);
    double *din64 = to_double(din_a, n_in), *dw64 = to_double(dw_a, n_w);
    NC_CHECK(compare("chunked din", din_b, 0, din64, n_in, 1e-6, 1e-6), "din");
    NC_CHECK(compare("chunked dweight", dw_b, 0, dw64, n_w, 1e-4, 1e-5), "dweight");
    NC_CHECK(memcmp(db_a, db_b, cout * sizeof(float)) == 0, "dbias does not depend on chunks");
    free(in), free(w), free(dout), free(work), free(din_a), free(din_b), free(dw_a), free(dw_b);
    free(db_a), free(db_b), free(din64), free(dw64);
}

/* ---- dense ---------------------------------------------------------------- */

typedef struct dense_ctx {
    int64_t rows;
    int fin, fout;
    const double *in, *w, *b;
} dense_ctx;

static void dense_fwd64(const void *vp, double *y)
{
    const dense_ctx *k = vp;
    for (int64_t r = 0; r < k->rows; r++)
        for (int o = 0; o < k->fout; o++) {
            double acc = k->b[o];
            for (int i = 0; i < k->fin; i++)
                acc += k->in[r * k->fin + i] * k->w[(int64_t)o * k->fin + i];
            y[r * k->fout + o] = acc;
        }
}

static int dense_case(int64_t rows, int fin, int fout)
{
    int64_t n_in = rows * fin, n_out = rows * fout, n_w = (int64_t)fin * fout;
    float *in = rnd_array(n_in), *w = rnd_array(n_w), *b = rnd_array(fout), *dout = rnd_array(n_out);
    float *din = filled(n_in, NAN), *dw = filled(n_w, -1.0f), *db = filled(fout, 2.0f);
    nc_dense_backward(rows, fin, fout, in, w, dout, din, dw, db);
    double *in64 = to_double(in, n_in), *w64 = to_double(w, n_w), *b64 = to_double(b, fout);
    double *dout64 = to_double(dout, n_out);
    dense_ctx ctx = {rows, fin, fout, in64, w64, b64};
    fd_setup s = {dense_fwd64, &ctx, n_out, dout64};
    char what[100];
    snprintf(what, sizeof what, "dense %lld×%d→%d", (long long)rows, fin, fout);
    int ok = fd_check(what, &s, in64, n_in, 0.25, din, 0.0f);
    ok &= fd_check(what, &s, w64, n_w, 0.25, dw, -1.0f);
    ok &= fd_check(what, &s, b64, fout, 0.25, db, 2.0f);
    float *y = malloc((size_t)n_out * sizeof(float));
    nc_dense(rows, fin, fout, in, w, NULL, y);
    ok &= adjoint_check(what, dout, y, n_out, din, in, n_in);
    float *dw2 = filled(n_w, -1.0f);
    nc_dense_backward(rows, fin, fout, in, w, dout, NULL, dw2, NULL);
    ok &= memcmp(dw, dw2, (size_t)n_w * sizeof(float)) == 0;
    free(in), free(w), free(b), free(dout), free(din), free(dw), free(db), free(in64), free(w64);
    free(b64), free(dout64), free(y), free(dw2);
    return ok;
}

static void test_dense_backward(void)
{
    int bad = !dense_case(5, 7, 3) + !dense_case(1, 1, 1) + !dense_case(1, 9, 4);
    for (int i = 0; i < 8; i++)
        bad += !dense_case(rnd_int(1, 8), rnd_int(1, 40), rnd_int(1, 12));
    NC_CHECK(bad == 0, "%d dense cases failed", bad);
}

/* ---- pools ---------------------------------------------------------------- */

typedef struct pool_ctx {
    const nc_window *g;
    int count_include_pad;
    int64_t rows;
    const double *in;
} pool_ctx;

/* Average pool in float64 with the header's divisor rule, tap by tap. */
static void avgpool_fwd64(const void *vp, double *y)
{
    const pool_ctx *k = vp;
    const nc_window *g = k->g;
    for (int64_t pl = 0; pl < k->rows * g->c; pl++)
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox++) {
                double sum = 0;
                int count = 0;
                for (int ki = 0; ki < g->kernel[0]; ki++)
                    for (int kj = 0; kj < g->kernel[1]; kj++) {
                        int iy = oy * g->stride[0] - g->pad[0] + ki * g->dilation[0];
                        int ix = ox * g->stride[1] - g->pad[1] + kj * g->dilation[1];
                        int real = iy >= 0 && iy < g->h && ix >= 0 && ix < g->w;
                        int padded = iy < g->h + g->pad[2] && ix < g->w + g->pad[3];
                        if (real)
                            sum += k->in[(pl * g->h + iy) * g->w + ix];
                        count += k->count_include_pad ? padded : real;
                    }
                y[(pl * g->oh + oy) * g->ow + ox] = count ? sum / count : 0.0;
            }
}

/* Max pool in float64: the first largest real tap (padding never wins);
 * pick (may be NULL) receives the plane index of each chosen tap. */
static void maxpool_pick64(const nc_window *g, int64_t rows, const double *in, double *y, int64_t *pick)
{
    for (int64_t pl = 0; pl < rows * g->c; pl++)
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox++) {
                double best = 0;
                int64_t at = -1;
                for (int ki = 0; ki < g->kernel[0]; ki++)
                    for (int kj = 0; kj < g->kernel[1]; kj++) {
                        int iy = oy * g->stride[0] - g->pad[0] + ki * g->dilation[0];
                        int ix = ox * g->stride[1] - g->pad[1] + kj * g->dilation[1];
                        if (iy < 0 || iy >= g->h || ix < 0 || ix >= g->w)
                            continue;
                        int64_t idx = (int64_t)iy * g->w + ix;
                        double v = in[pl * g->h * g->w + idx];
                        if (at < 0 || v > best) {
                            best = v;
                            at = idx;
                        }
                    }
                int64_t o = (pl * g->oh + oy) * g->ow + ox;
                y[o] = at < 0 ? 0.0 : best;
                if (pick)
                    pick[o] = at;
            }
}

static void maxpool_fwd64(const void *vp, double *y)
{
    const pool_ctx *k = vp;
    maxpool_pick64(k->g, k->rows, k->in, y, NULL);
}

/* Distinct values (a shuffled grid of step 2/n) so that no two taps tie and
 * the max is locally linear, for the finite differences. */
static float *distinct_array(int64_t n)
{
    float *a = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        a[i] = -1.0f + 2.0f * (float)i / (float)n;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = rnd() % (uint32_t)(i + 1);
        float t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
    return a;
}

/* One pool's backward pass din (from dout) against finite differences of
 * its float64 forward and against the adjoint of its float forward: a max
 * pool (on distinct inputs, so that no two taps tie) or an average pool
 * (count_include_pad cip; ceil_mode only names the case). */
static int pool_case(const nc_window *g, int max, int cip, int ceil_mode, int64_t rows)
{
    int64_t n_in = rows * g->c * g->h * g->w, n_out = rows * g->c * g->oh * g->ow;
    float *in = max ? distinct_array(n_in) : rnd_array(n_in), *dout = rnd_array(n_out), *din = filled(n_in, NAN);
    float *y = malloc((size_t)n_out * sizeof(float));
    if (max) {
        nc_maxpool_backward(g, rows, in, dout, din);
        nc_maxpool(g, rows, in, y);
    } else {
        nc_avgpool_backward(g, cip, rows, dout, din);
        nc_avgpool(g, cip, rows, in, y);
    }
    double *in64 = to_double(in, n_in), *dout64 = to_double(dout, n_out);
    pool_ctx ctx = {g, cip, rows, in64};
    fd_setup s = {max ? maxpool_fwd64 : avgpool_fwd64, &ctx, n_out, dout64};
    char what[256];
    window_name(what, sizeof what, max ? "maxpool" : "avgpool", g);
    if (!max)
        snprintf(what + strlen(what), sizeof what - strlen(what), " cip %d ceil %d", cip, ceil_mode);
    /* max: the grid step is 2/n_in, and h stays well inside it */
    int ok = fd_check(what, &s, in64, n_in, max ? 0.25 / (double)n_in : 0.25, din, 0.0f);
    ok &= adjoint_check(what, dout, y, n_out, din, in, n_in);
    free(in), free(dout), free(din), free(in64), free(dout64), free(y);
    return ok;
}

/* Fixed windows that exercise each rule, with and without count_include_pad
 * and ceil_mode, then random ones. */
static void test_avgpool_backward(void)
{
    nc_window g;
    int bad = 0;
    int p1[4] = {1, 1, 1, 1}, p0[4] = {0, 0, 0, 0}, p2[4] = {1, 1, 0, 0}, p3[4] = {0, 1, 1, 0};
    for (int cip = 0; cip <= 1; cip++)
        for (int ceil_mode = 0; ceil_mode <= 1; ceil_mode++) {
            /* 7×6, k 3, s 2, pad 1: ceil mode adds windows that overhang
             * the padded border (those positions never count) */
            window(&g, 2, 7, 6, 3, 3, 2, 2, p1, 1, 1, ceil_mode);
            bad += !pool_case(&g, 0, cip, ceil_mode, 2);
            /* 5×5, k 2, s 2 without padding: ceil mode's last window is partial */
            window(&g, 3, 5, 5, 2, 2, 2, 2, p0, 1, 1, ceil_mode);
            bad += !pool_case(&g, 0, cip, ceil_mode, 2);
            /* dilation 2, top-left padding only */
            window(&g, 1, 6, 7, 2, 2, 1, 2, p2, 2, 2, ceil_mode);
            bad += !pool_case(&g, 0, cip, ceil_mode, 3);
            window(&g, 2, 6, 5, 2, 3, 3, 2, p3, 1, 1, ceil_mode);
            bad += !pool_case(&g, 0, cip, ceil_mode, 1);
        }
    /* the forward's 2×2 fast path */
    window(&g, 3, 6, 8, 2, 2, 2, 2, p0, 1, 1, 0);
    bad += !pool_case(&g, 0, 0, 0, 2);
    for (int i = 0; i < 20; i++) {
        random_window(&g, rnd_int(1, 3), 9, 1);
        bad += !pool_case(&g, 0, rnd_int(0, 1), -1, rnd_int(1, 2));
    }
    NC_CHECK(bad == 0, "%d avgpool cases failed", bad);
}

static void test_maxpool_backward(void)
{
    nc_window g;
    int bad = 0;
    int p1[4] = {1, 1, 1, 1}, p0[4] = {0, 0, 0, 0}, p2[4] = {0, 1, 2, 0};
    window(&g, 2, 7, 6, 3, 3, 2, 2, p1, 1, 1, 1); /* overlapping, padded, ceil */
    bad += !pool_case(&g, 1, 0, 0, 2);
    window(&g, 3, 6, 6, 3, 3, 1, 1, p0, 1, 1, 0); /* stride 1: inputs picked many times */
    bad += !pool_case(&g, 1, 0, 0, 2);
    window(&g, 1, 8, 7, 3, 2, 2, 1, p2, 2, 2, 0); /* dilation */
    bad += !pool_case(&g, 1, 0, 0, 2);
    for (int i = 0; i < 20; i++) {
        random_window(&g, rnd_int(1, 3), 9, 1);
        bad += !pool_case(&g, 1, 0, 0, rnd_int(1, 2));
    }
    NC_CHECK(bad == 0, "%d maxpool cases failed", bad);
}

/* Many ties (values in {0, 1, 2}; −1 for some): each output's gradient goes
 * to the first maximum in row-major window order, whose value is what
 * nc_maxpool returns; din is built here in the kernel's output order, so it
 * must match bit for bit. */
static void test_maxpool_ties(void)
{
    int bad = 0;
    for (int i = 0; i < 30; i++) {
        nc_window g;
        random_window(&g, rnd_int(1, 3), 9, 1);
        int64_t rows = 2, hw = (int64_t)g.h * g.w;
        int64_t n_in = rows * g.c * hw, n_out = rows * g.c * g.oh * g.ow;
        float *in = malloc((size_t)n_in * sizeof(float)), *dout = rnd_array(n_out);
        for (int64_t k = 0; k < n_in; k++)
            in[k] = (float)rnd_int(-1, 2) * (i % 2 ? 1.0f : -1.0f); /* all-negative planes too */
        float *din = malloc((size_t)n_in * sizeof(float)), *y = malloc((size_t)n_out * sizeof(float));
        nc_maxpool_backward(&g, rows, in, dout, din);
        nc_maxpool(&g, rows, in, y);
        double *in64 = to_double(in, n_in), *y64 = malloc((size_t)n_out * sizeof(double));
        int64_t *pick = malloc((size_t)n_out * sizeof(int64_t));
        maxpool_pick64(&g, rows, in64, y64, pick);
        float *want = filled(n_in, 0.0f);
        int ok = 1;
        for (int64_t o = 0; o < n_out; o++) {
            int64_t pl = o / (g.oh * g.ow);
            ok &= pick[o] >= 0 && in[pl * hw + pick[o]] == y[o];
            want[pl * hw + pick[o]] += dout[o];
        }
        ok &= memcmp(want, din, (size_t)n_in * sizeof(float)) == 0;
        if (!ok) {
            char name[200];
            window_name(name, sizeof name, "maxpool ties", &g);
            printf("# %s: gradient not at the first maximum\n", name);
        }
        bad += !ok;
        free(in), free(dout), free(din), free(y), free(in64), free(y64), free(pick), free(want);
    }
    /* a hand case: 1×4 input [3, 5, 5, 1], k 1×2 stride 1 → outputs max(3,5),
     * max(5,5), max(5,1): the first two go to x[1] (the tie to the first 5),
     * the third to x[2] (the first 5 of its own window) */
    nc_window g;
    int p0[4] = {0, 0, 0, 0};
    window(&g, 1, 1, 4, 1, 2, 1, 1, p0, 1, 1, 0);
    float in[4] = {3, 5, 5, 1}, dout[3] = {1, 10, 100}, din[4];
    nc_maxpool_backward(&g, 1, in, dout, din);
    NC_CHECK(din[0] == 0 && din[1] == 11 && din[2] == 100 && din[3] == 0, "hand ties: %g %g %g %g",
             din[0], din[1], din[2], din[3]);
    NC_CHECK(bad == 0, "%d maxpool tie cases failed", bad);
}

typedef struct gap_ctx {
    int64_t rows, hw;
    int c;
    const double *in;
} gap_ctx;

static void gap_fwd64(const void *vp, double *y)
{
    const gap_ctx *k = vp;
    for (int64_t pl = 0; pl < k->rows * k->c; pl++) {
        double sum = 0;
        for (int64_t i = 0; i < k->hw; i++)
            sum += k->in[pl * k->hw + i];
        y[pl] = sum / (double)k->hw;
    }
}

static void test_global_avgpool_backward(void)
{
    int64_t shapes[3][3] = {{3, 4, 10}, {1, 1, 1}, {2, 5, 49}};
    for (int i = 0; i < 3; i++) {
        int64_t rows = shapes[i][0], hw = shapes[i][2];
        int c = (int)shapes[i][1];
        int64_t n_in = rows * c * hw, n_out = rows * c;
        float *in = rnd_array(n_in), *dout = rnd_array(n_out), *din = filled(n_in, NAN);
        nc_global_avgpool_backward(rows, c, hw, dout, din);
        double *in64 = to_double(in, n_in), *dout64 = to_double(dout, n_out);
        gap_ctx ctx = {rows, hw, c, in64};
        fd_setup s = {gap_fwd64, &ctx, n_out, dout64};
        NC_CHECK(fd_check("global avgpool", &s, in64, n_in, 0.25, din, 0.0f), "shape %d", i);
        float *y = malloc((size_t)n_out * sizeof(float));
        nc_global_avgpool(rows, c, hw, in, y);
        NC_CHECK(adjoint_check("global avgpool", dout, y, n_out, din, in, n_in), "shape %d", i);
        free(in), free(dout), free(din), free(in64), free(dout64), free(y);
    }
}

/* ---- element-wise ---------------------------------------------------------- */

typedef struct affine_ctx {
    int64_t rows, inner;
    int c;
    const double *scale, *shift, *in;
} affine_ctx;

static void affine_fwd64(const void *vp, double *y)
{
    const affine_ctx *k = vp;
    for (int64_t r = 0; r < k->rows; r++)
        for (int ch = 0; ch < k->c; ch++)
            for (int64_t i = 0; i < k->inner; i++) {
                int64_t e = (r * k->c + ch) * k->inner + i;
                y[e] = k->scale[ch] * k->in[e] + k->shift[ch];
            }
}

static void test_affine_backward(void)
{
    enum { ROWS = 3, C = 4, INNER = 5, N = ROWS * C * INNER };
    float *in = rnd_array(N), *dout = rnd_array(N), *scale = rnd_array(C), *shift = rnd_array(C);
    float *din = filled(N, NAN), *dscale = filled(C, 1.0f), *dshift = filled(C, -3.0f);
    nc_affine_backward(ROWS, C, INNER, scale, in, dout, din, dscale, dshift);
    double *in64 = to_double(in, N), *dout64 = to_double(dout, N);
    double *scale64 = to_double(scale, C), *shift64 = to_double(shift, C);
    affine_ctx ctx = {ROWS, INNER, C, scale64, shift64, in64};
    fd_setup s = {affine_fwd64, &ctx, N, dout64};
    NC_CHECK(fd_check("affine din", &s, in64, N, 0.25, din, 0.0f), "din");
    NC_CHECK(fd_check("affine dscale", &s, scale64, C, 0.25, dscale, 1.0f), "dscale");
    NC_CHECK(fd_check("affine dshift", &s, shift64, C, 0.25, dshift, -3.0f), "dshift");
    /* no scale means 1: din = dout */
    nc_affine_backward(ROWS, C, INNER, NULL, in, dout, din, NULL, NULL);
    NC_CHECK(memcmp(din, dout, N * sizeof(float)) == 0, "scale NULL");
    free(in), free(dout), free(scale), free(shift), free(din), free(dscale), free(dshift);
    free(in64), free(dout64), free(scale64), free(shift64);
}

typedef struct clip_ctx {
    int64_t n;
    double lo, hi; /* relu: lo 0, hi +inf */
    const double *in;
} clip_ctx;

static void clip_fwd64(const void *vp, double *y)
{
    const clip_ctx *k = vp;
    for (int64_t i = 0; i < k->n; i++)
        y[i] = k->in[i] < k->lo ? k->lo : (k->in[i] > k->hi ? k->hi : k->in[i]);
}

/* Values in [−3, 3] at least 0.01 from the kinks lo and hi. */
static float *away_from(int64_t n, float lo, float hi)
{
    float *a = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        do
            a[i] = 3.0f * rnd_float();
        while (fabsf(a[i] - lo) < 0.01f || fabsf(a[i] - hi) < 0.01f);
    return a;
}

static void test_relu_clip_backward(void)
{
    enum { N = 300 };
    float *dout = rnd_array(N), *din = filled(N, NAN);
    /* ReLU */
    float *in = away_from(N, 0.0f, 0.0f);
    nc_relu_backward(N, in, dout, din);
    double *in64 = to_double(in, N), *dout64 = to_double(dout, N);
    clip_ctx relu = {N, 0.0, INFINITY, in64};
    fd_setup s = {clip_fwd64, &relu, N, dout64};
    NC_CHECK(fd_check("relu", &s, in64, N, 1e-3, din, 0.0f), "relu");
    free(in), free(in64);
    /* Clip to [−1, 2] */
    in = away_from(N, -1.0f, 2.0f);
    nc_clip_backward(N, -1.0f, 2.0f, in, dout, din);
    in64 = to_double(in, N);
    clip_ctx clip = {N, -1.0, 2.0, in64};
    s.ctx = &clip;
    NC_CHECK(fd_check("clip", &s, in64, N, 1e-3, din, 0.0f), "clip");
    /* at the kinks: 0 (the header's strict inequalities) */
    float x[5] = {0.0f, -1.0f, 2.0f, 1.9999f, -0.9999f}, d[5] = {1, 1, 1, 1, 1}, g[5];
    nc_relu_backward(1, x, d, g);
    NC_CHECK(g[0] == 0.0f, "relu'(0) = 0");
    nc_clip_backward(5, -1.0f, 2.0f, x, d, g);
    NC_CHECK(g[0] == 1 && g[1] == 0 && g[2] == 0 && g[3] == 1 && g[4] == 1, "clip at the bounds: %g %g %g %g %g",
             g[0], g[1], g[2], g[3], g[4]);
    free(in), free(in64), free(dout), free(din), free(dout64);
}

/* ---- QCFS ------------------------------------------------------------------ */

/* The true QCFS in float64 (piecewise constant in range, smooth where clipped). */
static double qcfs64(double z, double lam, int levels, double shift)
{
    double q = floor(z / lam * levels + shift);
    q = q < 0 ? 0 : (q > levels ? levels : q);
    return q / levels * lam;
}

/* Distance of z·L/λ + φ from the nearest integer (a floor step). */
static double floor_gap(double z, double lam, int levels, double shift)
{
    double a = z / lam * levels + shift;
    return fabs(a - floor(a + 0.5));
}

/* A random z with z/λ in range (0, 1), 0.01 from the bounds and 0.01/L from
 * a floor step, or clipped (z/λ < −0.05 or > 1.05). */
static float qcfs_point(float lam, int levels, float shift, int region)
{
    for (;;) {
        float u = region == 0 ? -0.05f - 2.0f * (rnd_float() + 1.0f)
                : region == 2 ? 1.05f + 2.0f * (rnd_float() + 1.0f)
                              : 0.01f + 0.98f * (rnd_float() + 1.0f) / 2.0f;
        float z = u * lam;
        if (region != 1 || floor_gap(z, lam, levels, shift) > 0.01)
            return z;
    }
}

/* The header's formulas, written out: in range ∂y/∂z = 1, ∂y/∂λ = (y − z)/λ;
 * clipped at the top 0 and 1; at the bottom 0 and 0.  Checked with
 * per-layer and per-channel λ, including z exactly at 0 and at λ, and the
 * accumulation into dlambda. */
static int qcfs_formula_case(int n_lambda, int levels, float shift)
{
    enum { ROWS = 3, C = 3, INNER = 40, N = ROWS * C * INNER };
    float lam[C] = {0.5f + (rnd_float() + 1.0f), 0.7f, 2.5f};
    float *in = malloc(N * sizeof(float)), *dout = rnd_array(N), *din = filled(N, NAN);
    float dlam[C] = {0.5f, 0.5f, 0.5f};
    double want_dlam[C] = {0}, want_din[N];
    for (int e = 0; e < N; e++) {
        int ch = (e / INNER) % C, li = n_lambda == C ? ch : 0;
        int kind = rnd_int(0, 4); /* 0, 1, 2: regions; 3: z = 0; 4: z = λ */
        in[e] = kind <= 2 ? qcfs_point(lam[li], levels, shift, kind) : (kind == 3 ? 0.0f : lam[li]);
        double dz, dl;
        if (kind == 0) {
            dz = 0, dl = 0;
        } else if (kind == 2) {
            dz = 0, dl = 1;
        } else {
            dz = 1, dl = (qcfs64(in[e], lam[li], levels, shift) - in[e]) / lam[li];
        }
        want_din[e] = dout[e] * dz;
        want_dlam[li] += dout[e] * dl;
    }
    nc_qcfs_backward(ROWS, C, INNER, lam, n_lambda, levels, shift, in, dout, din, dlam);
    char what[100];
    snprintf(what, sizeof what, "qcfs formulas n_lambda %d L %d φ %g", n_lambda, levels, shift);
    int ok = compare(what, din, 0.0f, want_din, N, 1e-6, 1e-5);
    ok &= compare(what, dlam, 0.5f, want_dlam, n_lambda, 1e-5, 1e-5);
    for (int k = n_lambda; k < C; k++)
        ok &= dlam[k] == 0.5f; /* per layer: only dlambda[0] */
    free(in), free(dout), free(din);
    return ok;
}

typedef struct qcfs_ctx {
    int64_t rows, inner;
    int c, n_lambda, levels;
    double shift;
    const double *lam, *in;
} qcfs_ctx;

static void qcfs_fwd64(const void *vp, double *y)
{
    const qcfs_ctx *k = vp;
    for (int64_t e = 0; e < k->rows * k->c * k->inner; e++) {
        int ch = (int)((e / k->inner) % k->c);
        y[e] = qcfs64(k->in[e], k->lam[k->n_lambda == k->c ? ch : 0], k->levels, k->shift);
    }
}

/* Where z is clipped the STE is the true derivative: finite differences of
 * the real QCFS in z and in every λ. */
static int qcfs_clipped_case(int n_lambda, int levels, float shift)
{
    enum { ROWS = 2, C = 3, INNER = 30, N = ROWS * C * INNER };
    float lam[C] = {1.0f, 0.6f, 2.0f};
    float *in = malloc(N * sizeof(float)), *dout = rnd_array(N), *din = filled(N, NAN);
    float dlam[C] = {0, 0, 0};
    for (int e = 0; e < N; e++) {
        int ch = (e / INNER) % C;
        in[e] = qcfs_point(lam[n_lambda == C ? ch : 0], levels, shift, rnd_int(0, 1) * 2);
    }
    nc_qcfs_backward(ROWS, C, INNER, lam, n_lambda, levels, shift, in, dout, din, dlam);
    double *in64 = to_double(in, N), *dout64 = to_double(dout, N), *lam64 = to_double(lam, C);
    qcfs_ctx ctx = {ROWS, INNER, C, n_lambda, levels, shift, lam64, in64};
    fd_setup s = {qcfs_fwd64, &ctx, N, dout64};
    int ok = fd_check("qcfs clipped din", &s, in64, N, 1e-3, din, 0.0f);
    ok &= fd_check("qcfs clipped dlambda", &s, lam64, n_lambda, 1e-3, dlam, 0.0f);
    free(in), free(dout), free(din), free(in64), free(dout64), free(lam64);
    return ok;
}

/* In range, the STE treats floor as x − frac(x) with frac frozen: the
 * kernel's one-value gradients must be the finite differences of
 *     g(z, λ) = λ·(z·L/λ + φ − frac₀)/L,
 * frac₀ the fractional part at the evaluation point (this checks the
 * header's (y − z)/λ by another route than the formula itself). */
static int qcfs_ste_case(int levels, float shift)
{
    float lam = 0.3f + 2.0f * (rnd_float() + 1.0f), z = qcfs_point(lam, levels, shift, 1);
    double a0 = (double)z / lam * levels + shift, frac0 = a0 - floor(a0), h = 1e-4;
#define G(zz, ll) ((ll) * (((zz) / (ll) * levels + shift - frac0) / levels))
    double fd_z = (G(z + h, (double)lam) - G(z - h, (double)lam)) / (2 * h);
    double fd_l = (G((double)z, lam + h) - G((double)z, lam - h)) / (2 * h);
#undef G
    float one = 1.0f, din, dlam = 0.0f;
    nc_qcfs_backward(1, 1, 1, &lam, 1, levels, shift, &z, &one, &din, &dlam);
    int ok = fabs(din - fd_z) <= 1e-5 && fabs(dlam - fd_l) <= 1e-4 * (1 + fabs(fd_l));
    if (!ok)
        printf("# qcfs STE z %.9g λ %.9g L %d: din %.9g (fd %.9g), dλ %.9g (fd %.9g)\n", z, lam, levels,
               din, fd_z, dlam, fd_l);
    return ok;
}

static void test_qcfs_backward(void)
{
    int bad = 0, levels[3] = {2, 4, 8};
    float shifts[2] = {0.5f, 0.0f};
    for (int li = 0; li < 3; li++)
        for (int si = 0; si < 2; si++)
            for (int per_channel = 0; per_channel <= 1; per_channel++) {
                int n_lambda = per_channel ? 3 : 1;
                bad += !qcfs_formula_case(n_lambda, levels[li], shifts[si]);
                bad += !qcfs_clipped_case(n_lambda, levels[li], shifts[si]);
            }
    for (int i = 0; i < 200; i++)
        bad += !qcfs_ste_case(levels[i % 3], shifts[i % 2]);
    /* hand values: λ = 2, L = 4, φ = ½ */
    float lam = 2.0f, z[4] = {0.3f, -1.0f, 5.0f, 2.0f}, d[4] = {1, 1, 1, 1}, g[4], dl = 0.0f;
    nc_qcfs_backward(1, 1, 4, &lam, 1, 4, 0.5f, z, d, g, &dl);
    /* y(0.3) = 0.5: (0.5 − 0.3)/2 = 0.1; −1 → 0; 5 → 1; z = λ: (2 − 2)/2 = 0 */
    NC_CHECK(g[0] == 1 && g[1] == 0 && g[2] == 0 && g[3] == 1, "hand dz: %g %g %g %g", g[0], g[1], g[2], g[3]);
    NC_CHECK_CLOSE(dl, 1.1, 1e-6, 0, "hand dλ");
    NC_CHECK(bad == 0, "%d qcfs cases failed", bad);
}

/* ---- surrogates ------------------------------------------------------------ */

static void test_surrogates(void)
{
    NC_CHECK_CLOSE(nc_surrogate_grad(NC_SURROGATE_TRIANGLE, 1, 0.25f), 0.75, 1e-7, 0, "triangle");
    NC_CHECK_CLOSE(nc_surrogate_grad(NC_SURROGATE_TRIANGLE, 2, -1.0f), 0.25, 1e-7, 0, "triangle α 2");
    NC_CHECK_CLOSE(nc_surrogate_grad(NC_SURROGATE_TRIANGLE, 1, 1.5f), 0.0, 0, 0, "triangle outside");
    NC_CHECK_CLOSE(nc_surrogate_grad(NC_SURROGATE_SIGMOID, 4, 0.0f), 1.0, 1e-7, 0, "sigmoid peak");
    NC_CHECK_CLOSE(nc_surrogate_grad(NC_SURROGATE_SIGMOID, 4, 0.5f), 0.41997434, 1e-6, 0, "sigmoid");
    NC_CHECK_CLOSE(nc_surrogate_grad(NC_SURROGATE_ATAN, 2, 0.0f), 1.0, 1e-7, 0, "atan peak");
    NC_CHECK_CLOSE(nc_surrogate_grad(NC_SURROGATE_ATAN, 2, (float)(1 / M_PI)), 0.5, 1e-6, 0, "atan");
    NC_CHECK_CLOSE(nc_surrogate_grad(NC_SURROGATE_RECT, 1, 0.4f), 1.0, 0, 0, "rect inside");
    NC_CHECK_CLOSE(nc_surrogate_grad(NC_SURROGATE_RECT, 1, -0.5f), 0.0, 0, 0, "rect edge");
    NC_CHECK_CLOSE(nc_surrogate_grad(NC_SURROGATE_RECT, 2, 0.9f), 0.5, 0, 0, "rect α 2");
    /* each is the derivative of a smoothed step: the area is 1 (atan's tails
     * past ±40 hold about 2/(π²·α·40) each) */
    for (int k = 0; k < 4; k++) {
        float alpha = nc_surrogate_default_alpha((nc_surrogate)k);
        double area = 0, dx = 1e-3;
        for (double x = -40; x < 40; x += dx)
            area += nc_surrogate_grad((nc_surrogate)k, alpha, (float)(x + dx / 2)) * dx;
        NC_CHECK_CLOSE(area, 1.0, k == NC_SURROGATE_ATAN ? 0.02 : 2e-3, 0, "area of %s",
                       nc_surrogate_name((nc_surrogate)k));
    }
    NC_CHECK(nc_surrogate_default_alpha(NC_SURROGATE_TRIANGLE) == 1 &&
                 nc_surrogate_default_alpha(NC_SURROGATE_SIGMOID) == 4 &&
                 nc_surrogate_default_alpha(NC_SURROGATE_ATAN) == 2 &&
                 nc_surrogate_default_alpha(NC_SURROGATE_RECT) == 1,
             "default α");
    const char *names[4] = {"triangle", "sigmoid", "atan", "rect"};
    for (int k = 0; k < 4; k++) {
        nc_surrogate s = (nc_surrogate)-1;
        NC_CHECK(strcmp(nc_surrogate_name((nc_surrogate)k), names[k]) == 0, "name %d", k);
        NC_CHECK(nc_surrogate_parse(names[k], &s) == 0 && s == (nc_surrogate)k, "parse %s", names[k]);
    }
    nc_surrogate s = NC_SURROGATE_ATAN;
    NC_CHECK(nc_surrogate_parse("ATan", &s) == 0 && s == NC_SURROGATE_ATAN, "case-insensitive");
    NC_CHECK(nc_surrogate_parse("triangl", &s) == -1 && nc_surrogate_parse("", &s) == -1, "bad names");
}

/* ---- integrate-and-fire ---------------------------------------------------- */

typedef struct if_case {
    int T, c;
    int64_t n, inner, step;
    float th[4];
    nc_if_params p;
    float *in; /* [T, step] */
} if_case;

/* A random IF layer.  dyadic: inputs k/8 and thresholds of quarters, so that
 * m = θ happens exactly (where ≥ and > differ); else random values. */
static void if_case_make(if_case *k, int reset, int compare_gt, int per_channel, int dyadic)
{
    k->T = rnd_int(1, 9);
    k->c = rnd_int(1, 4);
    k->n = rnd_int(1, 3);
    k->inner = rnd_int(1, 120);
    k->step = k->n * k->c * k->inner;
    for (int i = 0; i < 4; i++)
        k->th[i] = dyadic ? 0.5f + 0.25f * (float)rnd_int(0, 3) : 0.4f + (rnd_float() + 1.0f);
    float fractions[4] = {0.0f, 0.25f, 0.5f, 1.0f};
    nc_if_params p = {k->th, per_channel ? k->c : 1, fractions[rnd_int(0, 3)],
                      reset ? NC_RESET_ZERO : NC_RESET_SUBTRACT, compare_gt ? NC_FIRE_GT : NC_FIRE_GE};
    k->p = p;
    k->in = malloc((size_t)(k->T * k->step) * sizeof(float));
    for (int64_t i = 0; i < k->T * k->step; i++)
        k->in[i] = dyadic ? (float)rnd_int(-6, 10) / 8.0f : 1.2f * rnd_float() + 0.3f;
}

static float if_theta(const if_case *k, int64_t e)
{
    return k->th[k->p.n_threshold == k->c ? (e / k->inner) % k->c : 0];
}

static int if_fires(const if_case *k, float m, float th)
{
    return k->p.compare == NC_FIRE_GE ? m >= th : m > th;
}

/* The recurrence of the header, one neuron at a time in float: membranes m
 * [T, step] and spikes.  Returns how many times m was exactly θ. */
static int if_forward_ref(const if_case *k, float *m, float *out)
{
    int ties = 0;
    for (int64_t e = 0; e < k->step; e++) {
        float th = if_theta(k, e), v = k->p.v0_fraction * th;
        for (int t = 0; t < k->T; t++) {
            float mt = v + k->in[t * k->step + e];
            int s = if_fires(k, mt, th);
            ties += mt == th;
            m[t * k->step + e] = mt;
            out[t * k->step + e] = s ? th : 0.0f;
            v = s ? (k->p.reset == NC_RESET_SUBTRACT ? mt - th : 0.0f) : mt;
        }
    }
    return ties;
}

static int same_bits(const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0 && !(isnan(a[i]) && isnan(b[i])))
            return 0;
    return 1;
}

/* nc_if_forward_train's spikes are nc_if_run's bit for bit, its m_saved the
 * reference's; in place too.  Also with inf/NaN inputs (NaN never fires). */
static void test_if_forward_train(void)
{
    int bad = 0, ties = 0;
    for (int i = 0; i < 64; i++) {
        if_case k;
        if_case_make(&k, i & 1, (i >> 1) & 1, (i >> 2) & 1, (i >> 3) & 1);
        int64_t total = k.T * k.step;
        if (i >= 48) /* some extreme values */
            for (int j = 0; j < 5; j++)
                k.in[rnd() % total] = j == 0 ? NAN : (j == 1 ? INFINITY : 1e30f * rnd_float());
        float *out = malloc(total * sizeof(float)), *ms = malloc(total * sizeof(float));
        float *run = malloc(total * sizeof(float)), *ref = malloc(total * sizeof(float));
        float *m_ref = malloc(total * sizeof(float)), *inplace = malloc(total * sizeof(float));
        float *ms2 = malloc(total * sizeof(float));
        nc_if_forward_train(&k.p, k.T, k.n, k.c, k.inner, k.in, out, ms);
        nc_if_run(&k.p, k.T, k.n, k.c, k.inner, k.in, k.step, run, k.step, NULL);
        ties += if_forward_ref(&k, m_ref, ref);
        memcpy(inplace, k.in, total * sizeof(float));
        nc_if_forward_train(&k.p, k.T, k.n, k.c, k.inner, inplace, inplace, ms2);
        int ok = memcmp(out, run, total * sizeof(float)) == 0;
        ok &= memcmp(out, ref, total * sizeof(float)) == 0;
        ok &= same_bits(ms, m_ref, total);
        ok &= memcmp(inplace, out, total * sizeof(float)) == 0 && same_bits(ms2, ms, total);
        if (!ok)
            printf("# IF forward case %d: T %d n %lld c %d inner %lld differs\n", i, k.T,
                   (long long)k.n, k.c, (long long)k.inner);
        bad += !ok;
        free(k.in), free(out), free(ms), free(run), free(ref), free(m_ref), free(inplace), free(ms2);
    }
    NC_CHECK(bad == 0, "%d IF forward cases differ", bad);
    NC_CHECK(ties > 0, "the cases contain m = θ exactly (≥ and > differ)");
}

static double surrogate64(nc_surrogate kind, double a, double x)
{
    switch (kind) {
    case NC_SURROGATE_TRIANGLE: return fmax(0.0, a - fabs(x)) / (a * a);
    case NC_SURROGATE_SIGMOID: {
        double s = 1.0 / (1.0 + exp(-a * x));
        return a * s * (1.0 - s);
    }
    case NC_SURROGATE_ATAN: {
        double u = M_PI / 2.0 * a * x;
        return a / (2.0 * (1.0 + u * u));
    }
    case NC_SURROGATE_RECT: return fabs(x) < a / 2.0 ? 1.0 / a : 0.0;
    }
    return NAN;
}

/* One neuron's gradients in forward mode: for each input x_τ (τ < T) and for
 * θ (τ = T), push a tangent through the recurrence with H' := σ' and take
 * Σ_t dout_t·(d out_t):
 *   ṁ_t = v̇_{t−1} + ẋ_t,  ṡ_t = σ'(m_t − θ)·(ṁ_t − θ̇),  d out_t = θ̇·s_t + θ·ṡ_t,
 *   v̇_t = ṁ_t − θ̇·s_t − θ·ṡ_t (subtract)  or  ṁ_t·(1 − s_t) − m_t·ṡ_t (zero),
 *   v̇_0 = f·θ̇. */
static void if_neuron_jvp(const if_case *k, nc_surrogate kind, double alpha, int64_t e,
                          const float *m, const float *dout, double *din, double *dth)
{
    double th = if_theta(k, e), f = k->p.v0_fraction;
    int sub = k->p.reset == NC_RESET_SUBTRACT;
    for (int tau = 0; tau <= k->T; tau++) {
        double th_dot = tau == k->T ? 1.0 : 0.0, v_dot = f * th_dot, total = 0.0;
        for (int t = 0; t < k->T; t++) {
            double mt = m[t * k->step + e], st = if_fires(k, m[t * k->step + e], (float)th);
            double m_dot = v_dot + (t == tau ? 1.0 : 0.0);
            double s_dot = surrogate64(kind, alpha, mt - th) * (m_dot - th_dot);
            total += dout[t * k->step + e] * (th_dot * st + th * s_dot);
            v_dot = sub ? m_dot - th_dot * st - th * s_dot : m_dot * (1.0 - st) - mt * s_dot;
        }
        if (tau < k->T)
            din[tau * k->step + e] = total;
        else
            *dth += total;
    }
}

static int if_backward_case(int reset, int compare_gt, int per_channel, int dyadic,
                            nc_surrogate kind, int with_dth)
{
    if_case k;
    if_case_make(&k, reset, compare_gt, per_channel, dyadic);
    float alpha = rnd_int(0, 1) ? nc_surrogate_default_alpha(kind) : 0.5f + (rnd_float() + 1.0f);
    int64_t total = k.T * k.step;
    float *out = malloc(total * sizeof(float)), *ms = malloc(total * sizeof(float));
    float *dout = rnd_array(total), *din = filled(total, NAN);
    float dth[4] = {0.5f, 0.5f, 0.5f, 0.5f};
    nc_if_forward_train(&k.p, k.T, k.n, k.c, k.inner, k.in, out, ms);
    nc_if_backward(&k.p, kind, alpha, k.T, k.n, k.c, k.inner, ms, dout, din, with_dth ? dth : NULL);

    double *want = malloc(total * sizeof(double)), want_dth[4] = {0};
    for (int64_t e = 0; e < k.step; e++)
        if_neuron_jvp(&k, kind, alpha, e, ms, dout, want,
                      &want_dth[k.p.n_threshold == k.c ? (e / k.inner) % k.c : 0]);
    char what[160];
    snprintf(what, sizeof what, "IF %s %s %s θ %s α %g T %d n %lld c %d inner %lld%s",
             nc_surrogate_name(kind), reset ? "zero" : "subtract", compare_gt ? ">" : "≥",
             per_channel ? "per channel" : "per layer", alpha, k.T, (long long)k.n, k.c,
             (long long)k.inner, dyadic ? " dyadic" : "");
    int ok = compare(what, din, 0.0f, want, total, ATOL, RTOL);
    if (with_dth)
        ok &= compare(what, dth, 0.5f, want_dth, k.p.n_threshold, 1e-3, RTOL);
    for (int i = with_dth ? k.p.n_threshold : 0; i < 4; i++)
        ok &= dth[i] == 0.5f;
    /* din may alias dout */
    nc_if_backward(&k.p, kind, alpha, k.T, k.n, k.c, k.inner, ms, dout, dout, NULL);
    ok &= memcmp(din, dout, total * sizeof(float)) == 0;
    free(k.in), free(out), free(ms), free(dout), free(din), free(want);
    return ok;
}

/* Both resets × both comparisons × per-layer / per-channel θ × four
 * surrogates × with / without dthreshold, on random and on dyadic inputs. */
static void test_if_backward(void)
{
    int bad = 0, cases = 0;
    for (int combo = 0; combo < 64; combo++)
        for (int dyadic = 0; dyadic <= 1; dyadic++) {
            bad += !if_backward_case(combo & 1, (combo >> 1) & 1, (combo >> 2) & 1, dyadic,
                                     (nc_surrogate)((combo >> 3) & 3), (combo >> 5) & 1);
            cases++;
        }
    NC_CHECK(bad == 0, "%d of %d IF BPTT cases failed", bad, cases);
}

/* T = 2, one neuron, worked by hand: θ = 1, v0 = ½, subtract, ≥, triangle
 * α = 1, x = (0.7, 0.2), dout = (1, 1).  m = (1.2, 0.4), s = (1, 0), σ' =
 * (0.8, 0.4).  t = 2: ds = 1, dm = 0.4, dθ −0.4.  t = 1: ds = 1 − 0.4 = 0.6,
 * dm = 0.4 + 0.48 = 0.88, dθ 1 − 0.48 − 0.4 = 0.12.  v0: + 0.88·½. */
static void test_if_backward_hand(void)
{
    float th = 1.0f, x[2] = {0.7f, 0.2f}, out[2], ms[2], dout[2] = {1, 1}, din[2], dth = 0;
    nc_if_params p = {&th, 1, 0.5f, NC_RESET_SUBTRACT, NC_FIRE_GE};
    nc_if_forward_train(&p, 2, 1, 1, 1, x, out, ms);
    NC_CHECK(out[0] == 1.0f && out[1] == 0.0f, "spikes %g %g", out[0], out[1]);
    NC_CHECK_CLOSE(ms[0], 1.2, 1e-6, 0, "m_1");
    NC_CHECK_CLOSE(ms[1], 0.4, 1e-6, 0, "m_2");
    nc_if_backward(&p, NC_SURROGATE_TRIANGLE, 1.0f, 2, 1, 1, 1, ms, dout, din, &dth);
    NC_CHECK_CLOSE(din[0], 0.88, 1e-6, 0, "din_1");
    NC_CHECK_CLOSE(din[1], 0.4, 1e-6, 0, "din_2");
    NC_CHECK_CLOSE(dth, 0.16, 1e-6, 0, "dθ");
    /* reset to zero: v_1 = 0, m_2 = 0.2, σ'(−0.8) = 0.2.  t = 2: ds = 1,
     * dm = 0.2.  t = 1: ds = 1 − 0.2·1.2 = 0.76, dm = 0.2·0 + 0.76·0.8 = 0.608;
     * dθ = (−0.2) + (1 − 0.608) + 0.608·½ = 0.496 */
    p.reset = NC_RESET_ZERO;
    dth = 0;
    nc_if_forward_train(&p, 2, 1, 1, 1, x, out, ms);
    nc_if_backward(&p, NC_SURROGATE_TRIANGLE, 1.0f, 2, 1, 1, 1, ms, dout, din, &dth);
    NC_CHECK_CLOSE(din[0], 0.608, 1e-6, 0, "zero reset din_1");
    NC_CHECK_CLOSE(din[1], 0.2, 1e-6, 0, "zero reset din_2");
    NC_CHECK_CLOSE(dth, 0.496, 1e-6, 0, "zero reset dθ");
}

/* ---- softmax cross-entropy -------------------------------------------------- */

typedef struct xent_ctx {
    int64_t rows;
    int classes;
    const int32_t *labels;
    const double *logits;
} xent_ctx;

static double xent64(const xent_ctx *k)
{
    double total = 0;
    for (int64_t r = 0; r < k->rows; r++) {
        const double *z = k->logits + r * k->classes;
        double sum = 0;
        for (int j = 0; j < k->classes; j++)
            sum += exp(z[j]);
        total += log(sum) - z[k->labels[r]];
    }
    return total / (double)k->rows;
}

static void xent_fwd64(const void *vp, double *y) { *y = xent64(vp); }

static void test_softmax_xent(void)
{
    /* by hand: row 0 logits (1, 2, 3), label 2: log(e + e² + e³) − 3;
     * row 1 (0, 0, 0), label 0: log 3; both argmaxes right (row 1's first) */
    float logits[6] = {1, 2, 3, 0, 0, 0}, d[6];
    int32_t labels[2] = {2, 0};
    int64_t correct = 5;
    double loss = nc_softmax_xent(2, 3, logits, labels, d, &correct);
    double l0 = log(exp(1.0) + exp(2.0) + exp(3.0)) - 3.0, l1 = log(3.0);
    NC_CHECK_CLOSE(loss, (l0 + l1) / 2, 1e-12, 0, "hand loss");
    NC_CHECK(correct == 7, "correct += 2 (got %lld)", (long long)correct);
    double e_sum = exp(1.0) + exp(2.0) + exp(3.0);
    double want[6] = {exp(1.0) / e_sum / 2, exp(2.0) / e_sum / 2, (exp(3.0) / e_sum - 1) / 2,
                      (1.0 / 3 - 1) / 2, 1.0 / 6, 1.0 / 6};
    NC_CHECK(compare("xent hand", d, 0.0f, want, 6, 1e-7, 1e-6), "hand dlogits");
    /* a wrong argmax, and a label out of range: no gradient, no loss */
    int32_t labels2[2] = {0, 3};
    correct = 0;
    loss = nc_softmax_xent(2, 3, logits, labels2, d, &correct);
    NC_CHECK(correct == 0, "nothing correct");
    NC_CHECK_CLOSE(loss, (log(e_sum) - 1.0) / 2, 1e-12, 0, "loss of the valid row over 2 rows");
    NC_CHECK(d[3] == 0 && d[4] == 0 && d[5] == 0, "no gradient for a bad label");
    NC_CHECK(nc_softmax_xent(2, 3, logits, labels, NULL, NULL) > 0, "NULL outputs");

    /* finite differences: of a float64 reference, and of the kernel's own
     * double loss under float perturbations (exactly representable steps) */
    enum { ROWS = 6, CLASSES = 5, N = ROWS * CLASSES };
    float *z = rnd_array(N), *dz = malloc(N * sizeof(float));
    int32_t lab[ROWS];
    for (int r = 0; r < ROWS; r++)
        lab[r] = rnd_int(0, CLASSES - 1);
    for (int i = 0; i < N; i++)
        z[i] *= 4.0f;
    loss = nc_softmax_xent(ROWS, CLASSES, z, lab, dz, NULL);
    double *z64 = to_double(z, N), one = 1.0;
    xent_ctx ctx = {ROWS, CLASSES, lab, z64};
    NC_CHECK_CLOSE(loss, xent64(&ctx), 1e-12, 1e-12, "loss = float64 reference");
    fd_setup s = {xent_fwd64, &ctx, 1, &one};
    NC_CHECK(fd_check("xent fd", &s, z64, N, 1e-4, dz, 0.0f), "FD of the reference");
    double *fd = malloc(N * sizeof(double));
    for (int i = 0; i < N; i++) {
        float z0 = z[i], zp = z0 + 1.0f / 1024, zm = z0 - 1.0f / 1024;
        z[i] = zp;
        double lp = nc_softmax_xent(ROWS, CLASSES, z, lab, NULL, NULL);
        z[i] = zm;
        double lm = nc_softmax_xent(ROWS, CLASSES, z, lab, NULL, NULL);
        z[i] = z0;
        fd[i] = (lp - lm) / ((double)zp - zm); /* the steps float really took */
    }
    NC_CHECK(compare("xent fd of the kernel", dz, 0.0f, fd, N, 1e-5, 1e-3), "FD of the kernel");
    free(z), free(dz), free(z64), free(fd);
}

/* ---- distillation ----------------------------------------------------------- */

typedef struct distill_ctx {
    xent_ctx hard;
    const double *teacher;
    double alpha, tau;
} distill_ctx;

/* (1 − α)·CE + α·τ²·KL(softmax(t/τ) ‖ softmax(s/τ)), written out naively in float64 */
static double distill64(const distill_ctx *k)
{
    int C = k->hard.classes;
    double kl = 0;
    for (int64_t r = 0; r < k->hard.rows; r++) {
        const double *s = k->hard.logits + r * C, *t = k->teacher + r * C;
        double ss = 0, st = 0;
        for (int j = 0; j < C; j++)
            ss += exp(s[j] / k->tau), st += exp(t[j] / k->tau);
        for (int j = 0; j < C; j++) {
            double pt = exp(t[j] / k->tau) / st, ps = exp(s[j] / k->tau) / ss;
            kl += pt * log(pt / ps);
        }
    }
    kl /= (double)k->hard.rows;
    return (1 - k->alpha) * xent64(&k->hard) + k->alpha * k->tau * k->tau * kl;
}

static void distill_fwd64(const void *vp, double *y) { *y = distill64(vp); }

static void test_distill_xent(void)
{
    enum { ROWS = 5, CLASSES = 7, N = ROWS * CLASSES };
    float *z = rnd_array(N), *t = rnd_array(N), *dz = malloc(N * sizeof(float)), *d0 = malloc(N * sizeof(float));
    int32_t lab[ROWS];
    for (int r = 0; r < ROWS; r++)
        lab[r] = rnd_int(0, CLASSES - 1);
    for (int i = 0; i < N; i++)
        z[i] *= 3.0f, t[i] *= 5.0f;
    /* α = 0 is the plain cross-entropy, bit for bit */
    int64_t c1 = 0, c2 = 0;
    double l1 = nc_distill_xent(ROWS, CLASSES, z, t, lab, 0.0, 2.0, dz, &c1);
    double l2 = nc_softmax_xent(ROWS, CLASSES, z, lab, d0, &c2);
    NC_CHECK(l1 == l2 && c1 == c2 && memcmp(dz, d0, N * sizeof(float)) == 0, "alpha 0 = nc_softmax_xent");
    double *z64 = to_double(z, N), *t64 = to_double(t, N), one = 1.0;
    static const double settings[][2] = {{0.5, 2.0}, {0.9, 4.0}, {1.0, 1.0}, {0.3, 0.5}};
    for (int k = 0; k < 4; k++) {
        distill_ctx ctx = {{ROWS, CLASSES, lab, z64}, t64, settings[k][0], settings[k][1]};
        double loss = nc_distill_xent(ROWS, CLASSES, z, t, lab, ctx.alpha, ctx.tau, dz, NULL);
        NC_CHECK_CLOSE(loss, distill64(&ctx), 1e-12, 1e-12, "distill loss = float64 reference (α %g, τ %g)",
                       ctx.alpha, ctx.tau);
        fd_setup s = {distill_fwd64, &ctx, 1, &one};
        NC_CHECK(fd_check("distill fd", &s, z64, N, 1e-5, dz, 0.0f), "distill gradient = FD of the reference "
                 "(α %g, τ %g)", ctx.alpha, ctx.tau);
    }
    /* a student equal to its teacher, α = 1: no loss, no gradient */
    NC_CHECK_CLOSE(nc_distill_xent(ROWS, CLASSES, t, t, lab, 1.0, 3.0, dz, NULL), 0.0, 0, 1e-12, "KL(p ‖ p) = 0");
    for (int i = 0; i < N; i++)
        NC_CHECK(fabsf(dz[i]) < 1e-7f, "zero gradient at the teacher (%d: %g)", i, dz[i]);
    /* a label out of range: no loss and no gradient from that row */
    lab[0] = CLASSES;
    nc_distill_xent(ROWS, CLASSES, z, t, lab, 0.5, 2.0, dz, NULL);
    for (int j = 0; j < CLASSES; j++)
        NC_CHECK(dz[j] == 0, "no gradient for a bad label");
    free(z), free(t), free(dz), free(d0), free(z64), free(t64);
}

int main(void)
{
    NC_RUN(test_conv_backward);
    NC_RUN(test_conv_backward_chunks);
    NC_RUN(test_dense_backward);
    NC_RUN(test_avgpool_backward);
    NC_RUN(test_maxpool_backward);
    NC_RUN(test_maxpool_ties);
    NC_RUN(test_global_avgpool_backward);
    NC_RUN(test_affine_backward);
    NC_RUN(test_relu_clip_backward);
    NC_RUN(test_qcfs_backward);
    NC_RUN(test_surrogates);
    NC_RUN(test_if_forward_train);
    NC_RUN(test_if_backward);
    NC_RUN(test_if_backward_hand);
    NC_RUN(test_softmax_xent);
    NC_RUN(test_distill_xent);
    return nc_test_done();
}
