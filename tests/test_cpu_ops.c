/* test_cpu_ops.c — every fast CPU kernel against its naive reference on random
 * shapes, plus hand-checked values for the window rules and QCFS. */
#include "nc_test.h"
#define NC_TEST_RNG_SEED 0x1234567ull
#include "nc_test_util.h"
#include "nc_test_cpu_path.h"

#include "../sim/nc_cpu_ops.h"

#include <stdint.h>

/* Compares got with ref (|got − ref| ≤ atol + rtol·|ref|); prints the first
 * mismatches and the max error; returns 1 when all are close. */
static int compare(const char *what, const float *got, const float *ref, int64_t n, double atol,
                   double rtol)
{
    int shown = 0;
    double max_err = 0.0;
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - ref[i]);
        if (err > max_err || isnan(err))
            max_err = isnan(err) ? INFINITY : err;
        if (!(err <= atol + rtol * fabs(ref[i]))) {
            bad++;
            if (shown++ < 5)
                printf("# %s: [%lld] got %.9g, expected %.9g\n", what, (long long)i, got[i], ref[i]);
        }
    }
    if (bad)
        printf("# %s: %lld of %lld mismatch, max error %.3g\n", what, (long long)bad, (long long)n, max_err);
    return bad == 0;
}

/* A random window that fits an input of at most 12×12. */
static void random_window(nc_window *g, int c, int allow_ceil, int *ceil_mode)
{
    for (;;) {
        int k[2] = {rnd_int(1, 5), rnd_int(1, 5)}, s[2] = {rnd_int(1, 3), rnd_int(1, 3)};
        int d[2] = {rnd_int(1, 2), rnd_int(1, 2)};
        int p[4];
        for (int i = 0; i < 4; i++)
            p[i] = rnd_int(0, 2);
        /* ONNX requires pad < kernel extent; keep windows with real input */
        for (int i = 0; i < 4; i++)
            if (p[i] >= k[i % 2])
                p[i] = k[i % 2] - 1;
        *ceil_mode = allow_ceil ? rnd_int(0, 1) : 0;
        if (nc_window_init(g, c, rnd_int(1, 12), rnd_int(1, 12), k, s, p, d, *ceil_mode) == 0)
            return;
    }
}

static void test_window_sizes(void)
{
    /* floor: (6 + 2 − 3)/2 + 1 = 3; ceil: ceil(5/2) + 1 = 4, last starts at 5 < 7: kept */
    NC_CHECK(nc_window_out_size(6, 3, 2, 1, 1, 1, 0) == 3, "floor");
    NC_CHECK(nc_window_out_size(6, 3, 2, 1, 1, 1, 1) == 4, "ceil");
    /* 4 wide, k 2, s 2, right pad 1: ceil gives 3 but the 3rd window starts at
     * 4 (in the padding) and is dropped */
    NC_CHECK(nc_window_out_size(4, 2, 2, 0, 1, 1, 1) == 2, "ceil window in padding dropped");
    NC_CHECK(nc_window_out_size(5, 3, 1, 0, 0, 2, 0) == 1, "dilated");
    NC_CHECK(nc_window_out_size(2, 3, 1, 0, 0, 1, 0) == 0, "does not fit");
    nc_window g;
    int k[2] = {3, 3}, s[2] = {1, 1}, p[4] = {0}, d[2] = {1, 1};
    NC_CHECK(nc_window_init(&g, 1, 2, 5, k, s, p, d, 0) == -1, "no window fits → -1");
    s[0] = 0;
    NC_CHECK(nc_window_init(&g, 1, 5, 5, k, s, p, d, 0) == -1, "stride 0 → -1");
}

static int conv_case(int64_t rows, int groups, int small_work, int pointwise)
{
    nc_window g;
    int ceil_mode, cg = rnd_int(1, 4), mg = rnd_int(1, 4);
    if (pointwise) {
        int k[2] = {1, 1}, s[2] = {1, 1}, p[4] = {0}, d[2] = {1, 1};
        nc_window_init(&g, cg * groups, rnd_int(1, 9), rnd_int(1, 9), k, s, p, d, 0);
    } else {
        random_window(&g, cg * groups, 0, &ceil_mode);
    }
    int cout = mg * groups;
    int64_t n_in = rows * g.c * g.h * g.w, n_out = rows * cout * g.oh * g.ow;
    float *in = rnd_array(n_in), *w = rnd_array((int64_t)cout * cg * g.kernel[0] * g.kernel[1]);
    float *b = rnd_int(0, 1) ? rnd_array(cout) : NULL;
    float *out = malloc((size_t)n_out * sizeof(float)), *ref = malloc((size_t)n_out * sizeof(float));
    size_t work_n = small_work ? nc_conv2d_work_floats(&g, cout, groups, 1)
                               : nc_conv2d_work_floats(&g, cout, groups, rows);
    float *work = malloc((work_n ? work_n : 1) * sizeof(float));
    nc_conv2d(&g, cout, groups, rows, in, w, b, out, work, work_n);
    nc_ref_conv2d(&g, cout, groups, rows, in, w, b, ref);
    char what[200];
    snprintf(what, sizeof what, "conv rows %lld c %d→%d g %d %dx%d k %dx%d s %d,%d p %d,%d,%d,%d d %d,%d",
             (long long)rows, g.c, cout, groups, g.h, g.w, g.kernel[0], g.kernel[1], g.stride[0],
             g.stride[1], g.pad[0], g.pad[1], g.pad[2], g.pad[3], g.dilation[0], g.dilation[1]);
    int ok = compare(what, out, ref, n_out, 1e-5, 1e-4);
    free(in), free(w), free(b), free(out), free(ref), free(work);
    return ok;
}

static void test_conv_random(void)
{
    int bad = 0;
    for (int i = 0; i < 150; i++)
        bad += !conv_case(rnd_int(1, 5), rnd_int(1, 3), 0, 0);
    for (int i = 0; i < 30; i++)
        bad += !conv_case(rnd_int(2, 5), rnd_int(1, 3), 1, 0); /* one sample per chunk */
    for (int i = 0; i < 20; i++)
        bad += !conv_case(rnd_int(1, 4), rnd_int(1, 3), 0, 1); /* 1×1 without im2col */
    NC_CHECK(bad == 0, "%d conv cases mismatch", bad);
}

/* First-layer convs (few input channels, stride 1, outputs ≥ 16 wide) run
 * without im2col (conv_thin): widths around the 32-output blocks, asymmetric
 * padding, any output count, with and without bias; every third one has one
 * input channel and a 3×3 kernel (an image's first conv, which the AVX-512
 * build runs with its inputs held in registers), odd heights included. */
static void test_conv_thin(void)
{
    int bad = 0;
    for (int i = 0; i < 60; i++) {
        nc_window g;
        int k[2] = {rnd_int(1, 5), rnd_int(1, 5)}, s[2] = {1, 1}, d[2] = {1, 1}, p[4];
        if (i % 3 == 0)
            k[0] = k[1] = 3;
        for (int j = 0; j < 4; j++)
            p[j] = rnd_int(0, k[j % 2] - 1);
        int cin = i % 3 == 0 ? 1 : rnd_int(1, 32 / (k[0] * k[1]) < 3 ? 32 / (k[0] * k[1]) : 3);
        if (nc_window_init(&g, cin, rnd_int(3, 40), rnd_int(16, 70), k, s, p, d, 0) != 0 || g.ow < 16) {
            i--;
            continue;
        }
        int cout = rnd_int(1, 20);
        int64_t rows = rnd_int(1, 3), n_out = rows * cout * g.oh * g.ow;
        float *in = rnd_array(rows * cin * g.h * g.w), *w = rnd_array((int64_t)cout * cin * k[0] * k[1]);
        float *b = i % 2 ? rnd_array(cout) : NULL;
        float *out = malloc((size_t)n_out * sizeof(float)), *ref = malloc((size_t)n_out * sizeof(float));
        size_t work_n = nc_conv2d_work_floats(&g, cout, 1, rows);
        float *work = malloc(work_n * sizeof(float));
        nc_conv2d(&g, cout, 1, rows, in, w, b, out, work, work_n);
        nc_ref_conv2d(&g, cout, 1, rows, in, w, b, ref);
        char what[160];
        snprintf(what, sizeof what, "thin conv rows %lld c %d→%d %dx%d k %dx%d p %d,%d,%d,%d", (long long)rows, cin,
                 cout, g.h, g.w, k[0], k[1], p[0], p[1], p[2], p[3]);
        bad += !compare(what, out, ref, n_out, 1e-5, 1e-4);
        free(in), free(w), free(b), free(out), free(ref), free(work);
    }
    NC_CHECK(bad == 0, "%d thin conv cases mismatch", bad);
}

/* A batch large enough to be split into several im2col chunks. */
static void test_conv_chunked(void)
{
    nc_window g;
    int k[2] = {3, 3}, s[2] = {1, 1}, p[4] = {1, 1, 1, 1}, d[2] = {1, 1};
    nc_window_init(&g, 16, 14, 14, k, s, p, d, 0);
    int64_t rows = 37;
    int cout = 24;
    size_t work_n = nc_conv2d_work_floats(&g, cout, 1, rows);
    NC_CHECK(work_n < (size_t)rows * (16 * 9 + cout) * 196, "work is chunked (%zu floats)", work_n);
    float *in = rnd_array(rows * 16 * 196), *w = rnd_array(cout * 16 * 9), *b = rnd_array(cout);
    float *out = malloc(rows * cout * 196 * sizeof(float)), *ref = malloc(rows * cout * 196 * sizeof(float));
    float *work = malloc(work_n * sizeof(float));
    nc_conv2d(&g, cout, 1, rows, in, w, b, out, work, work_n);
    nc_ref_conv2d(&g, cout, 1, rows, in, w, b, ref);
    NC_CHECK(compare("conv chunked", out, ref, rows * cout * 196, 1e-5, 1e-4), "chunked conv");
    free(in), free(w), free(b), free(out), free(ref), free(work);
}

static void test_dense_random(void)
{
    int bad = 0;
    for (int i = 0; i < 40; i++) {
        int64_t rows = rnd_int(1, 9);
        int fin = rnd_int(1, 70), fout = rnd_int(1, 30);
        float *in = rnd_array(rows * fin), *w = rnd_array((int64_t)fin * fout);
        float *b = rnd_int(0, 1) ? rnd_array(fout) : NULL;
        float *out = malloc(rows * fout * sizeof(float)), *ref = malloc(rows * fout * sizeof(float));
        nc_dense(rows, fin, fout, in, w, b, out);
        nc_ref_dense(rows, fin, fout, in, w, b, ref);
        bad += !compare("dense", out, ref, rows * fout, 1e-5, 1e-4);
        free(in), free(w), free(b), free(out), free(ref);
    }
    NC_CHECK(bad == 0, "%d dense cases mismatch", bad);
}

/* The dense kernels on the sizes of real layers: rows over one block of 64,
 * inputs over one pass of 1024 and not a multiple of 16, outputs not a
 * multiple of 4; and nc_dense_cols on a slice of the outputs (the columns
 * outside it stay untouched).  The tolerance grows with fin: float sums. */
static void test_dense_large(void)
{
    static const int fins[] = {1, 17, 784, 1030, 2100};
    static const int64_t rows_of[] = {1, 5, 70, 131};
    static const int fouts[] = {1, 3, 10, 33};
    int bad = 0, n = 0;
    for (size_t a = 0; a < sizeof fins / sizeof fins[0]; a++)
        for (size_t b = 0; b < sizeof rows_of / sizeof rows_of[0]; b++, n++) {
            int fin = fins[a], fout = fouts[(a + b) % 4];
            int64_t rows = rows_of[b];
            float *in = rnd_array(rows * fin), *w = rnd_array((int64_t)fin * fout);
            float *bias = n % 2 ? rnd_array(fout) : NULL;
            float *out = malloc(rows * fout * sizeof(float)), *ref = malloc(rows * fout * sizeof(float));
            double atol = 2e-6 * fin;
            nc_dense(rows, fin, fout, in, w, bias, out);
            nc_ref_dense(rows, fin, fout, in, w, bias, ref);
            bad += !compare("dense large", out, ref, rows * fout, atol, 1e-4);
            int o0 = rnd_int(0, fout - 1), o1 = rnd_int(o0 + 1, fout);
            for (int64_t i = 0; i < rows * fout; i++)
                out[i] = -7.0f;
            nc_dense_cols(rows, fin, fout, o0, o1, in, w, bias, out);
            for (int64_t r = 0; r < rows; r++)
                for (int o = 0; o < fout; o++)
                    if (o < o0 || o >= o1)
                        ref[r * fout + o] = -7.0f;
            bad += !compare("dense cols", out, ref, rows * fout, atol, 1e-4);
            free(in), free(w), free(bias), free(out), free(ref);
        }
    NC_CHECK(bad == 0, "%d of %d large dense cases mismatch", bad, n);
}

/* A sparse array: each value is non-zero with probability `density`; half
 * the cases use spikes (one value θ), the others random values (as after a
 * pool of spikes). */
static float *sparse_array(int64_t n, double density, int spikes)
{
    float *a = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    float theta = 0.5f + (float)rnd_int(0, 100) / 50.0f;
    for (int64_t i = 0; i < n; i++)
        a[i] = (double)rnd() / 4294967296.0 * 2.0 < density ? (spikes ? theta : rnd_float()) : 0.0f;
    return a;
}

static const double densities[] = {0.0, 0.02, 0.1, 0.3, 0.6, 1.0};

/* Event-driven conv (groups 1) against the reference on sparse inputs.
 * window: 0 random (stride, padding, dilation, ceil), 1 the 3×3 pad-1
 * layer of a VGG, 2 a 2×2 stride-2 one, 3 a 3×3 stride-1 one with random
 * padding 0–2 per side, up to 30×30 (what the AVX-512 build scatters, for
 * Cout ≤ 32 and a buffer of at most 128 KiB). */
static int conv_events_case(int64_t rows, double density, int window, int cout)
{
    nc_window g;
    int ceil_mode, cin = rnd_int(1, 20);
    if (window == 0) {
        random_window(&g, cin, 1, &ceil_mode);
    } else {
        int k3[2] = {3, 3}, k2[2] = {2, 2}, s1[2] = {1, 1}, s2[2] = {2, 2}, p1[4] = {1, 1, 1, 1}, p0[4] = {0};
        int d[2] = {1, 1}, h = rnd_int(2, 15), w = rnd_int(2, 15);
        int pr[4] = {rnd_int(0, 2), rnd_int(0, 2), rnd_int(0, 2), rnd_int(0, 2)};
        int h3 = rnd_int(2, 30), w3 = rnd_int(2, 30); /* up to the VGG's 28×28 and past it */
        if (window == 3 && nc_window_init(&g, cin, h3, w3, k3, s1, pr, d, 0) == 0)
            ;
        else
            nc_window_init(&g, cin, h, w, window == 2 ? k2 : k3, window == 2 ? s2 : s1, window == 2 ? p0 : p1, d,
                           0);
    }
    int64_t n_in = rows * g.c * g.h * g.w, n_out = rows * cout * g.oh * g.ow;
    int64_t n_w = (int64_t)cout * cin * g.kernel[0] * g.kernel[1];
    float *in = sparse_array(n_in, density, rnd_int(0, 1)), *w = rnd_array(n_w);
    float *b = rnd_int(0, 1) ? rnd_array(cout) : NULL;
    float *wt = malloc((size_t)n_w * sizeof(float));
    float *out = malloc((size_t)n_out * sizeof(float)), *ref = malloc((size_t)n_out * sizeof(float));
    float *work = malloc(nc_conv2d_events_work_floats(&g, cout) * sizeof(float));
    nc_conv2d_events_weight(&g, cout, w, wt);
    nc_conv2d_events(&g, cout, rows, in, wt, b, out, work);
    nc_ref_conv2d(&g, cout, 1, rows, in, w, b, ref);
    char what[220];
    snprintf(what, sizeof what,
             "conv events density %.2f rows %lld c %d→%d %dx%d k %dx%d s %d,%d p %d,%d,%d,%d d %d,%d",
             density, (long long)rows, g.c, cout, g.h, g.w, g.kernel[0], g.kernel[1], g.stride[0],
             g.stride[1], g.pad[0], g.pad[1], g.pad[2], g.pad[3], g.dilation[0], g.dilation[1]);
    int ok = compare(what, out, ref, n_out, 1e-5, 1e-4);
    free(in), free(w), free(b), free(wt), free(out), free(ref), free(work);
    return ok;
}

static void test_conv_events(void)
{
    /* Cout: under one vector, whole vectors, more than one block of 64, tails */
    static const int couts[] = {1, 5, 8, 13, 16, 32, 40, 64, 72, 100, 130};
    int bad = 0, n = 0;
    for (size_t di = 0; di < sizeof densities / sizeof densities[0]; di++)
        for (size_t ci = 0; ci < sizeof couts / sizeof couts[0]; ci++)
            for (int window = 0; window < 4; window++, n++)
                bad += !conv_events_case(rnd_int(1, 3), densities[di], window, couts[ci]);
    for (int i = 0; i < 100; i++, n++) /* more random windows */
        bad += !conv_events_case(rnd_int(1, 3), densities[rnd_int(0, 5)], 0, rnd_int(1, 70));
    NC_CHECK(bad == 0, "%d of %d event-driven conv cases mismatch", bad, n);
}

static void test_dense_events(void)
{
    int bad = 0, n = 0;
    for (size_t di = 0; di < sizeof densities / sizeof densities[0]; di++)
        for (int i = 0; i < 20; i++, n++) {
            int64_t rows = rnd_int(1, 40); /* over one block of rows too */
            int fin = rnd_int(1, 300), fout = rnd_int(1, 150);
            float *in = sparse_array(rows * fin, densities[di], rnd_int(0, 1));
            float *w = rnd_array((int64_t)fin * fout), *wt = malloc((size_t)fin * fout * sizeof(float));
            float *b = rnd_int(0, 1) ? rnd_array(fout) : NULL;
            float *out = malloc(rows * fout * sizeof(float)), *ref = malloc(rows * fout * sizeof(float));
            float *work = malloc(nc_dense_events_work_floats(fin) * sizeof(float));
            nc_dense_events_weight(fin, fout, w, wt);
            nc_dense_events(rows, fin, fout, in, wt, b, out, work);
            nc_ref_dense(rows, fin, fout, in, w, b, ref);
            bad += !compare("dense events", out, ref, rows * fout, 1e-5, 1e-4);
            free(in), free(w), free(wt), free(b), free(out), free(ref), free(work);
        }
    NC_CHECK(bad == 0, "%d of %d event-driven dense cases mismatch", bad, n);
}

/* The 2×2 stride-2 avgpool fast path (vectors of 8 outputs and a tail),
 * against the reference, on even and odd sizes. */
static void test_avgpool_2x2(void)
{
    static const int sizes[][2] = {{20, 18}, {21, 17}, {16, 16}, {4, 40}, {3, 3}};
    int k[2] = {2, 2}, s2[2] = {2, 2}, p0[4] = {0}, d[2] = {1, 1};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        nc_window g;
        NC_CHECK(nc_window_init(&g, 5, sizes[i][0], sizes[i][1], k, s2, p0, d, 0) == 0, "window");
        int64_t rows = 3, n_in = rows * 5 * g.h * g.w, n_out = rows * 5 * g.oh * g.ow;
        float *in = sparse_array(n_in, 0.5, 0), *out = malloc((size_t)n_out * sizeof(float));
        float *ref = malloc((size_t)n_out * sizeof(float));
        nc_avgpool(&g, 1, rows, in, out);
        nc_ref_avgpool(&g, 1, rows, in, ref);
        NC_CHECK(compare("avgpool 2x2", out, ref, n_out, 1e-6, 1e-6), "%dx%d", g.h, g.w);
        free(in), free(out), free(ref);
    }
}

static void test_count_nonzero(void)
{
    for (int i = 0; i < 20; i++) {
        int64_t n = rnd_int(0, 100);
        float *a = sparse_array(n, 0.3, 0);
        int64_t want = 0;
        for (int64_t k = 0; k < n; k++)
            want += a[k] != 0.0f;
        NC_CHECK(nc_count_nonzero(n, a) == want, "count of %lld values", (long long)n);
        free(a);
    }
}

static void test_pools_random(void)
{
    int bad = 0;
    for (int i = 0; i < 300; i++) {
        nc_window g;
        int ceil_mode, include = rnd_int(0, 1);
        random_window(&g, rnd_int(1, 3), 1, &ceil_mode);
        int64_t rows = rnd_int(1, 3), n_out = rows * g.c * g.oh * g.ow;
        float *in = rnd_array(rows * g.c * g.h * g.w);
        float *out = malloc(n_out * sizeof(float)), *ref = malloc(n_out * sizeof(float));
        char what[160];
        snprintf(what, sizeof what, "pool %dx%d k %dx%d s %d,%d p %d,%d,%d,%d d %d,%d ceil %d incl %d",
                 g.h, g.w, g.kernel[0], g.kernel[1], g.stride[0], g.stride[1], g.pad[0], g.pad[1],
                 g.pad[2], g.pad[3], g.dilation[0], g.dilation[1], ceil_mode, include);
        nc_avgpool(&g, include, rows, in, out);
        nc_ref_avgpool(&g, include, rows, in, ref);
        bad += !compare(what, out, ref, n_out, 1e-6, 1e-5);
        nc_maxpool(&g, rows, in, out);
        nc_ref_maxpool(&g, rows, in, ref);
        bad += !compare(what, out, ref, n_out, 0, 0);
        free(in), free(out), free(ref);
    }
    NC_CHECK(bad == 0, "%d pool cases mismatch", bad);
}

/* 4×4 ones, k 3, s 2, pad 1, ceil: 3×3 outputs; the last window covers rows
 * 3..5 of which 3 is real, 4 is padding and 5 is past the padded border. */
static void test_avgpool_divisor(void)
{
    nc_window g;
    int k[2] = {3, 3}, s[2] = {2, 2}, p[4] = {1, 1, 1, 1}, d[2] = {1, 1};
    NC_CHECK(nc_window_init(&g, 1, 4, 4, k, s, p, d, 1) == 0 && g.oh == 3 && g.ow == 3, "3x3");
    float in[16], out[9];
    for (int i = 0; i < 16; i++)
        in[i] = 1.0f;
    nc_avgpool(&g, 1, 1, in, out);
    NC_CHECK_CLOSE(out[0], 4.0 / 9.0, 1e-6, 0, "corner: 4 real of 9 padded taps");
    NC_CHECK_CLOSE(out[4], 1.0, 1e-6, 0, "centre");
    NC_CHECK_CLOSE(out[8], 1.0 / 4.0, 1e-6, 0, "overhang corner: 1 real of 2×2 inside the padding");
    NC_CHECK_CLOSE(out[2], 2.0 / 6.0, 1e-6, 0, "top right: 2 real of 3×2");
    nc_avgpool(&g, 0, 1, in, out);
    for (int i = 0; i < 9; i++)
        NC_CHECK_CLOSE(out[i], 1.0, 1e-6, 0, "exclude pad: mean of ones [%d]", i);
    nc_maxpool(&g, 1, in, out);
    for (int i = 0; i < 9; i++)
        NC_CHECK_CLOSE(out[i], 1.0, 0, 0, "max [%d]", i);
    /* padding is −inf for max: all-negative input keeps its negative max */
    for (int i = 0; i < 16; i++)
        in[i] = -1.0f - (float)i;
    nc_maxpool(&g, 1, in, out);
    NC_CHECK_CLOSE(out[0], -1.0, 0, 0, "max ignores padding");
    NC_CHECK_CLOSE(out[8], -16.0, 0, 0, "max over the single real tap");
}

/* The 2×2 stride-2 pools have a vector path (8 outputs at a time, then a
 * tail): widths around 16 and odd sizes (the last row/column dropped);
 * max with NaN, ±0 and −inf inputs must follow the general loop exactly. */
static void test_pool_2x2(void)
{
    int bad = 0;
    for (int h = 2; h <= 9; h++)
        for (int w = 2; w <= 37; w += 1 + (w > 20) * 4) {
            nc_window g;
            int k[2] = {2, 2}, s[2] = {2, 2}, p[4] = {0, 0, 0, 0}, d[2] = {1, 1};
            if (nc_window_init(&g, 3, h, w, k, s, p, d, 0) != 0) {
                bad++;
                continue;
            }
            int64_t rows = 2, n_in = rows * 3 * h * w, n_out = rows * 3 * g.oh * g.ow;
            float *in = rnd_array(n_in), *out = malloc(n_out * sizeof(float)), *ref = malloc(n_out * sizeof(float));
            nc_avgpool(&g, 1, rows, in, out);
            nc_ref_avgpool(&g, 1, rows, in, ref);
            bad += !compare("2x2 avgpool", out, ref, n_out, 1e-6, 1e-5);
            /* the max, also over NaN, −0 and −inf, against the general loop's rule */
            for (int64_t i = 0; i < n_in; i += 7)
                in[i] = i % 3 == 0 ? NAN : i % 3 == 1 ? -0.0f : -INFINITY;
            nc_maxpool(&g, rows, in, out);
            for (int64_t pl = 0; pl < rows * 3; pl++)
                for (int oy = 0; oy < g.oh; oy++)
                    for (int ox = 0; ox < g.ow; ox++) {
                        float best = -INFINITY;
                        for (int ky = 0; ky < 2; ky++)
                            for (int kx = 0; kx < 2; kx++) {
                                float v = in[(pl * h + 2 * oy + ky) * w + 2 * ox + kx];
                                best = v > best ? v : best;
                            }
                        bad += memcmp(&best, &out[(pl * g.oh + oy) * g.ow + ox], sizeof best) != 0;
                    }
            free(in), free(out), free(ref);
        }
    NC_CHECK(bad == 0, "%d values of 2x2 pools differ from the reference", bad);
}

/* The running-sum max pool of SNNs equals pooling the running sums step by
 * step with the reference and taking differences. */
static void test_maxpool_running(void)
{
    nc_window g;
    int k[2] = {2, 2}, s[2] = {2, 2}, p[4] = {0, 0, 0, 0}, d[2] = {1, 1};
    int kk[2] = {3, 3}, ss[2] = {2, 2}, pp[4] = {1, 1, 1, 1};
    for (int variant = 0; variant < 2; variant++) {
        int ok = variant ? nc_window_init(&g, 4, 9, 11, kk, ss, pp, d, 0) : nc_window_init(&g, 4, 10, 18, k, s, p, d, 0);
        NC_CHECK(ok == 0, "window");
        int T = 5;
        int64_t N = 3, in_row = 4 * g.h * g.w, out_row = 4 * g.oh * g.ow;
        float *in = rnd_array(T * N * in_row), *out = malloc(T * N * out_row * sizeof(float));
        float *work = malloc((in_row + out_row) * sizeof(float));
        float *sum = calloc(in_row, sizeof(float)), *pooled = malloc(out_row * sizeof(float));
        float *prev = malloc(out_row * sizeof(float));
        nc_maxpool_running(&g, T, N, in, N * in_row, out, N * out_row, work);
        int bad = 0;
        for (int64_t n = 0; n < N; n++) {
            memset(sum, 0, in_row * sizeof(float));
            for (int t = 0; t < T; t++) {
                for (int64_t i = 0; i < in_row; i++)
                    sum[i] = t ? sum[i] + in[(t * N + n) * in_row + i] : in[(t * N + n) * in_row + i];
                nc_ref_maxpool(&g, 1, sum, pooled);
                for (int64_t i = 0; i < out_row; i++) {
                    float want = t ? pooled[i] - prev[i] : pooled[i];
                    bad += out[(t * N + n) * out_row + i] != want;
                    prev[i] = pooled[i];
                }
            }
        }
        NC_CHECK(bad == 0, "running max pool (variant %d): %d values differ", variant, bad);
        free(in), free(out), free(work), free(sum), free(pooled), free(prev);
    }
}

/* The fused event-driven conv + running max pool gives, bit for bit, what
 * nc_conv2d_events then nc_maxpool_running give: over random conv and pool
 * windows, spike densities, step counts and samples. */
static void test_conv_events_maxpool(void)
{
    int bad = 0, cases = 0;
    for (int iter = 0; iter < 120; iter++, cases++) {
        nc_window conv, pool;
        int ceil_mode, cin = rnd_int(1, 20), cout = rnd_int(1, 40), T = rnd_int(1, 6);
        int64_t N = rnd_int(1, 3);
        random_window(&conv, cin, 1, &ceil_mode);
        if (iter % 4 == 1) {
            /* 3×3, stride 1 (the CNNs' layer; the AVX-512 build scatters its
             * events when Cout ≤ 32): every padding 0–2 per side, input up
             * to 14×14 */
            int k3[2] = {3, 3}, s1[2] = {1, 1}, d1[2] = {1, 1};
            int p3[4] = {rnd_int(0, 2), rnd_int(0, 2), rnd_int(0, 2), rnd_int(0, 2)};
            cout = rnd_int(1, 32);
            if (nc_window_init(&conv, cin, rnd_int(3, 14), rnd_int(3, 14), k3, s1, p3, d1, 0) != 0) {
                cases--;
                continue;
            }
        }
        /* every third pool is the common 2×2/2; the others have random
         * padding, dilation and ceil mode */
        int k[2] = {rnd_int(1, 3), rnd_int(1, 3)}, st[2] = {rnd_int(1, 2), rnd_int(1, 2)}, d[2] = {1, 1}, pd[4];
        for (int a = 0; a < 4; a++)
            pd[a] = rnd_int(0, k[a % 2] - 1);
        d[0] = rnd_int(1, 2), d[1] = rnd_int(1, 2);
        int pool_ceil = rnd_int(0, 1);
        if (iter % 3 == 0) {
            k[0] = k[1] = st[0] = st[1] = 2;
            d[0] = d[1] = 1;
            pd[0] = pd[1] = pd[2] = pd[3] = pool_ceil = 0;
        }
        if (nc_window_init(&pool, cout, conv.oh, conv.ow, k, st, pd, d, pool_ceil) != 0) {
            cases--;
            continue;
        }
        int64_t in_row = (int64_t)cin * conv.h * conv.w, conv_row = (int64_t)cout * conv.oh * conv.ow;
        int64_t out_row = (int64_t)cout * pool.oh * pool.ow, n_w = (int64_t)cout * cin * conv.kernel[0] * conv.kernel[1];
        float *in = sparse_array(T * N * in_row, densities[rnd_int(0, 5)], 1), *w = rnd_array(n_w);
        float *b = rnd_int(0, 1) ? rnd_array(cout) : NULL, *wt = malloc((size_t)n_w * sizeof(float));
        float *currents = malloc((size_t)(T * N * conv_row) * sizeof(float));
        float *ref = malloc((size_t)(T * N * out_row) * sizeof(float)), *got = malloc((size_t)(T * N * out_row) * sizeof(float));
        float *conv_work = malloc(nc_conv2d_events_work_floats(&conv, cout) * sizeof(float));
        float *pool_work = malloc((size_t)(conv_row + out_row) * sizeof(float));
        float *work = malloc(nc_conv2d_events_maxpool_work_floats(&conv, cout, &pool) * sizeof(float));
        nc_conv2d_events_weight(&conv, cout, w, wt);
        nc_conv2d_events(&conv, cout, T * N, in, wt, b, currents, conv_work);
        nc_maxpool_running(&pool, T, N, currents, N * conv_row, ref, N * out_row, pool_work);
        nc_conv2d_events_maxpool(&conv, cout, &pool, T, N, in, N * in_row, wt, b, got, N * out_row, work);
        if (memcmp(got, ref, (size_t)(T * N * out_row) * sizeof(float)) != 0) {
            bad++;
            char what[160];
            snprintf(what, sizeof what, "fused conv+max pool, T %d N %lld, %d→%d %dx%d, pool %dx%d/%d,%d p %d,%d,%d,%d d %d,%d",
                     T, (long long)N, cin, cout, conv.h, conv.w, k[0], k[1], st[0], st[1], pd[0], pd[1], pd[2], pd[3],
                     d[0], d[1]);
            compare(what, got, ref, T * N * out_row, 0, 0);
        }
        free(in), free(w), free(b), free(wt), free(currents), free(ref), free(got);
        free(conv_work), free(pool_work), free(work);
    }
    NC_CHECK(cases >= 60, "only %d usable random cases", cases);
    printf("# %d random cases\n", cases);
    NC_CHECK(bad == 0, "%d of %d fused conv + max pool cases differ from the two kernels", bad, cases);
}

/* Outputs wider than the kernels' column-tap table (1024) take another path. */
static void test_pool_wide(void)
{
    nc_window g;
    int k[2] = {1, 3}, s[2] = {1, 1}, p[4] = {0, 1, 0, 2}, d[2] = {1, 2};
    NC_CHECK(nc_window_init(&g, 2, 2, 1500, k, s, p, d, 1) == 0 && g.ow > 1024, "wide");
    int64_t n_in = 2 * 2 * 1500, n_out = 2 * 2 * g.ow;
    float *in = rnd_array(n_in), *out = malloc(n_out * sizeof(float)), *ref = malloc(n_out * sizeof(float));
    nc_avgpool(&g, 1, 1, in, out);
    nc_ref_avgpool(&g, 1, 1, in, ref);
    NC_CHECK(compare("wide avgpool", out, ref, n_out, 1e-6, 1e-5), "avg");
    nc_maxpool(&g, 1, in, out);
    nc_ref_maxpool(&g, 1, in, ref);
    NC_CHECK(compare("wide maxpool", out, ref, n_out, 0, 0), "max");
    free(in), free(out), free(ref);
}

static void test_global_avgpool_affine_add_concat(void)
{
    float in[2 * 3 * 4], out[6];
    for (int i = 0; i < 24; i++)
        in[i] = (float)i;
    nc_global_avgpool(2, 3, 4, in, out);
    for (int i = 0; i < 6; i++)
        NC_CHECK_CLOSE(out[i], 4.0 * i + 1.5, 1e-6, 0, "gap plane %d", i);
    float scale[3] = {2, -1, 0.5f}, shift[3] = {1, 0, -1}, y[24];
    nc_affine(2, 3, 4, scale, shift, in, y);
    for (int i = 0; i < 24; i++) {
        int ch = (i / 4) % 3;
        NC_CHECK_CLOSE(y[i], scale[ch] * in[i] + shift[ch], 1e-6, 0, "affine %d", i);
    }
    nc_add(24, in, y, y);
    NC_CHECK_CLOSE(y[5], 5.0 + (-5.0), 1e-6, 0, "add in place");
    float a[2 * 2] = {1, 2, 3, 4}, b[2 * 3] = {5, 6, 7, 8, 9, 10}, c[10];
    const float *ins[2] = {a, b};
    int64_t per_row[2] = {2, 3};
    nc_concat(2, 2, ins, per_row, c);
    float want[10] = {1, 2, 5, 6, 7, 3, 4, 8, 9, 10};
    NC_CHECK(compare("concat", c, want, 10, 0, 0), "concat rows");
}

static void test_neuron_functions(void)
{
    float x[6] = {-2, -0.5f, 0, 0.5f, 3, 7}, y[6];
    nc_relu(6, x, y);
    float relu_want[6] = {0, 0, 0, 0.5f, 3, 7};
    NC_CHECK(compare("relu", y, relu_want, 6, 0, 0), "relu");
    nc_clip(6, 0, 6, x, y);
    float clip_want[6] = {0, 0, 0, 0.5f, 3, 6};
    NC_CHECK(compare("clip", y, clip_want, 6, 0, 0), "relu6");
    /* λ = 2, L = 4, φ = ½: steps of 0.5, rounding to nearest, clipped to [0, 2] */
    NC_CHECK_CLOSE(nc_qcfs1(0.3f, 2, 4, 0.5f), 0.5, 0, 0, "0.3·2 + ½ = 1.1 → 1 step");
    NC_CHECK_CLOSE(nc_qcfs1(0.24f, 2, 4, 0.5f), 0.0, 0, 0, "0.98 → 0");
    NC_CHECK_CLOSE(nc_qcfs1(0.25f, 2, 4, 0.5f), 0.5, 0, 0, "exactly 1.0 → 1 step");
    NC_CHECK_CLOSE(nc_qcfs1(1.0f, 2, 4, 0.5f), 1.0, 0, 0, "2.5 → 2 steps");
    NC_CHECK_CLOSE(nc_qcfs1(-1.0f, 2, 4, 0.5f), 0.0, 0, 0, "negative → 0");
    NC_CHECK_CLOSE(nc_qcfs1(5.0f, 2, 4, 0.5f), 2.0, 0, 0, "clipped at λ");
    NC_CHECK_CLOSE(nc_qcfs1(0.3f, 2, 4, 0.0f), 0.0, 0, 0, "φ = 0 floors");
    /* per channel: [2 rows, 2 channels, 1] with λ = {1, 4}, L = 2 */
    float in[4] = {0.6f, 0.6f, 1.5f, 3.1f}, lam[2] = {1, 4}, out[4];
    nc_qcfs(2, 2, 1, lam, 2, 2, 0.5f, in, out);
    float want[4] = {0.5f, 0.0f, 1.0f, 4.0f};
    NC_CHECK(compare("qcfs per channel", out, want, 4, 0, 0), "qcfs per channel");
    nc_qcfs(2, 2, 1, lam, 1, 2, 0.5f, in, out);
    float want1[4] = {0.5f, 0.5f, 1.0f, 1.0f};
    NC_CHECK(compare("qcfs per layer", out, want1, 4, 0, 0), "qcfs per layer");
}

static void test_if_random(void)
{
    int bad = 0;
    for (int i = 0; i < 40; i++) {
        int T = rnd_int(1, 12), c = rnd_int(1, 5);
        int64_t n = rnd_int(1, 4), inner = rnd_int(1, 150), step = n * c * inner;
        int constant = rnd_int(0, 1);
        float th[5];
        for (int k = 0; k < c; k++)
            th[k] = 0.25f + (float)rnd_int(0, 8) * 0.25f;
        nc_if_params p = {th, rnd_int(0, 1) ? c : 1, (float)rnd_int(0, 4) / 4.0f,
                          rnd_int(0, 1) ? NC_RESET_ZERO : NC_RESET_SUBTRACT,
                          rnd_int(0, 1) ? NC_FIRE_GT : NC_FIRE_GE};
        float *in = rnd_array(constant ? step : T * step);
        float *out = malloc(T * step * sizeof(float)), *ref = malloc(T * step * sizeof(float));
        float *v = malloc(step * sizeof(float)), *v_ref = malloc(step * sizeof(float));
        nc_if_run(&p, T, n, c, inner, in, constant ? 0 : step, out, step, v);
        nc_ref_if_run(&p, T, n, c, inner, in, constant ? 0 : step, ref, step, v_ref);
        bad += !compare("if spikes", out, ref, T * step, 0, 0);
        bad += !compare("if membrane", v, v_ref, step, 0, 0);
        free(in), free(out), free(ref), free(v), free(v_ref);
    }
    NC_CHECK(bad == 0, "%d IF cases mismatch", bad);
}

/* T steps in one call equal T calls of one step with a carried membrane. */
static void test_if_state(void)
{
    enum { T = 9, N = 2, C = 3, INNER = 100, STEP = N * C * INNER };
    float th[C] = {0.5f, 1.0f, 0.75f};
    nc_if_params p = {th, C, 0.5f, NC_RESET_SUBTRACT, NC_FIRE_GE};
    float *in = rnd_array(T * STEP), *a = malloc(T * STEP * sizeof(float)), *b = malloc(T * STEP * sizeof(float));
    float *va = malloc(STEP * sizeof(float)), *vb = malloc(STEP * sizeof(float));
    nc_if_run(&p, T, N, C, INNER, in, STEP, a, STEP, va);
    nc_if_state_init(&p, N, C, INNER, vb);
    NC_CHECK_CLOSE(vb[0], 0.25, 0, 0, "v0 = θ/2 of channel 0");
    NC_CHECK_CLOSE(vb[INNER], 0.5, 0, 0, "v0 = θ/2 of channel 1");
    for (int t = 0; t < T; t++)
        nc_if_run_state(&p, 1, N, C, INNER, in + t * STEP, 0, b + t * STEP, 0, vb);
    NC_CHECK(compare("stepwise spikes", b, a, T * STEP, 0, 0), "spikes");
    NC_CHECK(compare("stepwise membrane", vb, va, STEP, 0, 0), "membrane");
    free(in), free(a), free(b), free(va), free(vb);
}

static void test_scale(void)
{
    float x[6] = {1, 2, 3, 4, 5, 6}, w[3] = {2, -1, 0.5f}, y[6];
    nc_scale(2, 3, w, 3, x, y);
    float want[6] = {2, -2, 1.5f, 8, -5, 3};
    NC_CHECK(compare("scale per value", y, want, 6, 0, 0), "per value");
    nc_scale(2, 3, w, 1, x, x);
    float want1[6] = {2, 4, 6, 8, 10, 12};
    NC_CHECK(compare("scale scalar in place", x, want1, 6, 0, 0), "scalar");
}

static void test_poisson(void)
{
    enum { T = 400, N = 5 };
    float in[N] = {-0.5f, 0.0f, 0.25f, 0.7f, 1.5f};
    float *a = malloc(T * N * sizeof(float)), *b = malloc(T * N * sizeof(float));
    nc_poisson_encode(42, 0, T, N, in, a);
    nc_poisson_encode(42, 0, T, N, in, b);
    NC_CHECK(memcmp(a, b, T * N * sizeof(float)) == 0, "same seed, same spikes");
    /* doing the second half on its own gives the same steps */
    nc_poisson_encode(42, T / 2, T / 2, N, in, b);
    NC_CHECK(memcmp(a + (T / 2) * N, b, (T / 2) * N * sizeof(float)) == 0, "split by steps");
    nc_poisson_encode(43, 0, T, N, in, b);
    NC_CHECK(memcmp(a, b, T * N * sizeof(float)) != 0, "another seed differs");
    float want[N] = {0, 0, 0.25f, 0.7f, 1};
    for (int i = 0; i < N; i++) {
        double rate = 0;
        for (int t = 0; t < T; t++) {
            NC_CHECK(a[t * N + i] == 0.0f || a[t * N + i] == 1.0f, "binary");
            rate += a[t * N + i];
        }
        NC_CHECK_CLOSE(rate / T, want[i], 0.07, 0, "rate of input %d", i);
    }
    free(a), free(b);
}

int main(void)
{
    nc_test_cpu_path_or_skip();
    NC_RUN(test_cpu_path_taken);
    NC_RUN(test_window_sizes);
    NC_RUN(test_conv_random);
    NC_RUN(test_conv_chunked);
    NC_RUN(test_dense_random);
    NC_RUN(test_dense_large);
    NC_RUN(test_conv_events);
    NC_RUN(test_dense_events);
    NC_RUN(test_count_nonzero);
    NC_RUN(test_avgpool_2x2);
    NC_RUN(test_pools_random);
    NC_RUN(test_avgpool_divisor);
    NC_RUN(test_pool_wide);
    NC_RUN(test_pool_2x2);
    NC_RUN(test_conv_thin);
    NC_RUN(test_maxpool_running);
    NC_RUN(test_conv_events_maxpool);
    NC_RUN(test_global_avgpool_affine_add_concat);
    NC_RUN(test_neuron_functions);
    NC_RUN(test_if_random);
    NC_RUN(test_if_state);
    NC_RUN(test_scale);
    NC_RUN(test_poisson);
    return nc_test_done();
}
