/* test_calib.c — activation statistics and threshold selection (core/nc_calib). */
#include "nc_test.h"
#include "nc_test_util.h"

#include "../core/nc_calib.h"

#define C 3
#define HW 16        /* a [3, 4, 4] feature map */
#define ROWS 4000    /* samples */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double uniform(void) /* (0, 1) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return ((rng_state >> 11) + 0.5) / 9007199254740992.0;
}
static double gaussian(void) { return sqrt(-2 * log(uniform())) * cos(6.283185307179586 * uniform()); }

/* input [shape] → relu → output. */
static nc_net *relu_net(int ndim, const int64_t *shape)
{
    nc_net *net = nc_net_new();
    int in = nc_net_add_node(net, NC_NODE_INPUT, "x", 0, NULL);
    net->nodes[in].ndim = ndim;
    memcpy(net->nodes[in].shape, shape, (size_t)ndim * sizeof(int64_t));
    int r = nc_net_add_node(net, NC_NODE_NEURON, "relu", 1, &in);
    net->nodes[r].neuron.model = NC_NEURON_RELU;
    nc_net_add_node(net, NC_NODE_OUTPUT, "out", 1, &r);
    return inferred(net);
}

/* Runs both passes over data [rows, per_row] in batches of 100 rows. */
static nc_calib_stats *collect(const nc_net *net, const float *data, int64_t rows, int64_t per_row, int bins)
{
    nc_calib_stats *s = NULL;
    nc_error err;
    if (nc_calib_new(net, bins, &s, &err) != NC_OK) {
        printf("# %s\n", err.message);
        return NULL;
    }
    for (int pass = 0; pass < 2; pass++) {
        nc_calib_begin_pass(s, pass ? NC_CALIB_PASS_HISTOGRAM : NC_CALIB_PASS_MAX, NULL);
        for (int64_t r = 0; r < rows; r += 100)
            nc_calib_add(s, 1, data + r * per_row, rows - r < 100 ? rows - r : 100, per_row);
        if (nc_calib_end_pass(s, &err) != NC_OK)
            printf("# %s\n", err.message);
    }
    return s;
}

/* Relu'd Gaussians, channel c scaled by (c + 1): about half are zero. */
static float *make_data(void)
{
    float *x = malloc(sizeof(float) * ROWS * C * HW);
    for (int64_t r = 0; r < ROWS; r++)
        for (int c = 0; c < C; c++)
            for (int i = 0; i < HW; i++)
                x[(r * C + c) * HW + i] = (float)fmax(0, gaussian() * (c + 1));
    return x;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Sorted positive values of channel c (−1: all), count in *n. */
static float *positives(const float *x, int c, int64_t *n)
{
    float *v = malloc(sizeof(float) * ROWS * C * HW);
    *n = 0;
    for (int64_t r = 0; r < ROWS; r++)
        for (int k = 0; k < C; k++) {
            if (c >= 0 && k != c)
                continue;
            for (int i = 0; i < HW; i++)
                if (x[(r * C + k) * HW + i] > 0)
                    v[(*n)++] = x[(r * C + k) * HW + i];
        }
    qsort(v, (size_t)*n, sizeof(float), cmp_float);
    return v;
}

/* numpy's linear-interpolation percentile of a sorted array. */
static double exact_percentile(const float *v, int64_t n, double p)
{
    double pos = p / 100 * (double)(n - 1);
    int64_t i = (int64_t)pos;
    double f = pos - (double)i;
    return i + 1 < n ? v[i] * (1 - f) + v[i + 1] * f : v[n - 1];
}

/* The ReLU net over [C, 4, 4], make_data()'s samples (channel `dead`
 * zeroed, none when < 0) and their statistics with `bins` bins. */
typedef struct fixture {
    nc_net *net;
    float *x;
    nc_calib_stats *s;
} fixture;

static fixture fixture_new(int bins, int dead)
{
    fixture f = {relu_net(3, (int64_t[]){C, 4, 4}), make_data(), NULL};
    for (int64_t r = 0; dead >= 0 && r < ROWS; r++)
        for (int i = 0; i < HW; i++)
            f.x[(r * C + dead) * HW + i] = 0;
    f.s = collect(f.net, f.x, ROWS, C * HW, bins);
    return f;
}

static void fixture_free(fixture *f)
{
    nc_calib_free(f->s);
    free(f->x);
    nc_net_free(f->net);
}

static void test_max_and_percentiles(void)
{
    fixture f = fixture_new(2048, -1);
    float *x = f.x;
    nc_calib_stats *s = f.s;
    NC_CHECK(s && nc_calib_layer_count(s) == 1 && nc_calib_channels(s, 0) == C, "one layer of %d channels", C);
    NC_CHECK(nc_calib_layer_node(s, 0) == 1 && nc_calib_find_node(s, 1) == 0 && nc_calib_find_node(s, 0) == -1,
             "node mapping");
    static const double ps[] = {99, 99.9, 99.99, 50};
    for (int c = -1; s && c < C; c++) {
        int64_t n;
        float *v = positives(x, c, &n);
        nc_act_stats st;
        NC_CHECK(nc_calib_get_stats(s, 0, c, &st, NULL) == NC_OK, "stats");
        NC_CHECK(st.max == v[n - 1], "channel %d: max %.9g is exact (%.9g)", c, st.max, v[n - 1]);
        double w = st.max / 2048.0;
        for (int k = 0; k < 4; k++) {
            double want = exact_percentile(v, n, ps[k]);
            NC_CHECK_CLOSE(nc_calib_percentile(s, 0, c, ps[k]), want, w + 1e-6, 0, "channel %d p%g", c, ps[k]);
        }
        NC_CHECK_CLOSE(st.p99_9, exact_percentile(v, n, 99.9), w + 1e-6, 0, "channel %d stats p99.9", c);
        NC_CHECK_CLOSE(nc_calib_select(s, 0, c, NC_CALIB_P99_99, 0, 0), exact_percentile(v, n, 99.99), w + 1e-6, 0,
                       "select p99.99");
        NC_CHECK(nc_calib_select(s, 0, c, NC_CALIB_MAX, 0, 0) == v[n - 1], "select max");
        int64_t total = ROWS * HW * (c < 0 ? C : 1);
        NC_CHECK(st.count == total, "count %lld", (long long)st.count);
        NC_CHECK_CLOSE(st.zero_fraction, 1.0 - (double)n / (double)total, 1e-12, 0, "zero fraction");
        double sum = 0;
        for (int64_t i = 0; i < n; i++)
            sum += v[i];
        NC_CHECK_CLOSE(st.mean, sum / (double)total, 0, 1e-9, "mean");
        free(v);
    }
    fixture_free(&f);
}

/* Uniform (0, 1]: with T = 4 and rounding (φ = ½) the error
 * θ³/(12T²) + (1 − θ)³/3 is least at θ = 2T/(2T + 1) = 8/9. */
static void test_mmse_uniform(void)
{
    int64_t shape[1] = {1};
    nc_net *net = relu_net(1, shape);
    int64_t n = 200000;
    float *x = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)uniform();
    nc_calib_stats *s = collect(net, x, n, 1, 2048);
    float hi = nc_calib_select(s, 0, -1, NC_CALIB_MAX, 4, 0.5f);
    float theta = nc_calib_select(s, 0, -1, NC_CALIB_MMSE, 4, 0.5f);
    printf("# mmse T=4 phi=0.5: theta %.4f (expected about %.4f)\n", theta, 8.0 / 9.0);
    NC_CHECK(theta > 0.85f && theta < 0.93f, "θ %.4f near 8/9", theta);
    double e_theta = nc_calib_mmse_error(s, 0, -1, theta, 4, 0.5f), e_max = nc_calib_mmse_error(s, 0, -1, hi, 4, 0.5f);
    NC_CHECK(e_theta <= e_max, "E(θ) %.4g ≤ E(max) %.4g", e_theta, e_max);
    /* At θ = 1 the error is pure rounding: n·w²/12 with w = 1/4. */
    NC_CHECK_CLOSE(e_max, (double)n / 192.0, 0, 0.03, "rounding error at θ = max");
    /* φ = 0 (floor): the best θ is lower, and still no worse than max. */
    float theta0 = nc_calib_select(s, 0, -1, NC_CALIB_MMSE, 4, 0.0f);
    NC_CHECK(nc_calib_mmse_error(s, 0, -1, theta0, 4, 0) <= nc_calib_mmse_error(s, 0, -1, hi, 4, 0), "floor");
    NC_CHECK(theta0 < theta, "floor θ %.4f < round θ %.4f", theta0, theta);
    nc_calib_free(s);
    free(x);
    nc_net_free(net);
}

static void test_channel_vs_layer(void)
{
    fixture f = fixture_new(0, -1);
    nc_calib_stats *s = f.s;
    const nc_net *net = f.net;
    nc_thresholds *lt = NULL, *ct = NULL;
    nc_calib_choice ch = nc_calib_choice_default();
    NC_CHECK(nc_calib_thresholds(s, net->n_nodes, &ch, &lt, NULL) == NC_OK, "layer-wise");
    ch.per_channel = 1;
    NC_CHECK(nc_calib_thresholds(s, net->n_nodes, &ch, &ct, NULL) == NC_OK, "channel-wise");
    NC_CHECK(lt->count[0] == 0 && lt->count[1] == 1 && lt->count[2] == 0, "one layer threshold on node 1");
    NC_CHECK(ct->count[1] == C, "%d channel thresholds", ct->count[1]);
    NC_CHECK(lt->values[1][0] == nc_calib_percentile(s, 0, -1, 99.9), "layer θ = layer p99.9");
    /* Channel c has scale c + 1, so its θ grows with c and the layer θ
     * (dominated by the widest channel) is near the last one. */
    for (int c = 0; c < C; c++) {
        NC_CHECK(ct->values[1][c] == nc_calib_percentile(s, 0, c, 99.9), "channel θ = channel p99.9");
        NC_CHECK_CLOSE(ct->values[1][c] / (c + 1), ct->values[1][0], 0, 0.15, "channel %d scales", c);
    }
    NC_CHECK(lt->values[1][0] > ct->values[1][1], "layer θ above the narrower channels");
    NC_CHECK(lt->warnings[0] == 0 && ct->warnings[0] == 0, "no warnings: '%s' '%s'", lt->warnings, ct->warnings);
    nc_thresholds_free(lt);
    nc_thresholds_free(ct);
    fixture_free(&f);
}

static void test_dead_fallbacks(void)
{
    fixture f = fixture_new(256, 1); /* channel 1 never activates */
    nc_calib_stats *s = f.s;
    const nc_net *net = f.net;
    nc_calib_choice ch = {NC_CALIB_MMSE, 1, 4, 0.5f};
    nc_thresholds *t = NULL;
    NC_CHECK(nc_calib_thresholds(s, net->n_nodes, &ch, &t, NULL) == NC_OK, "thresholds");
    float layer = nc_calib_select(s, 0, -1, NC_CALIB_MMSE, 4, 0.5f);
    NC_CHECK(t && t->values[1][1] == layer, "dead channel gets the layer θ %g (got %g)", layer, t->values[1][1]);
    NC_CHECK(t && strstr(t->warnings, "1 of 3 channels never activated"), "warning: '%s'", t ? t->warnings : "");
    nc_act_stats st;
    nc_calib_get_stats(s, 0, 1, &st, NULL);
    NC_CHECK(st.max == 0 && st.p99_9 == 0 && st.zero_fraction == 1, "dead channel stats");
    nc_thresholds_free(t);
    nc_calib_free(s);

    memset(f.x, 0, sizeof(float) * ROWS * C * HW); /* the whole layer is dead */
    s = f.s = collect(net, f.x, ROWS, C * HW, 256);
    ch.method = NC_CALIB_P99_9;
    NC_CHECK(nc_calib_thresholds(s, net->n_nodes, &ch, &t, NULL) == NC_OK, "thresholds");
    NC_CHECK(t && t->values[1][0] == 1.0f && t->values[1][2] == 1.0f, "dead layer θ = 1");
    NC_CHECK(t && strstr(t->warnings, "'relu' never activated"), "warning: '%s'", t ? t->warnings : "");
    nc_thresholds_free(t);
    fixture_free(&f);
}

static void test_errors_and_names(void)
{
    nc_calib_method m;
    for (int k = 0; k < NC_CALIB_METHOD_COUNT; k++)
        NC_CHECK(nc_calib_method_parse(nc_calib_method_name(k), &m) == 0 && (int)m == k, "round trip %d", k);
    NC_CHECK(nc_calib_method_parse("99.9%", &m) == 0 && m == NC_CALIB_P99_9, "99.9%%");
    NC_CHECK(nc_calib_method_parse("p42", &m) == -1 && nc_calib_method_parse("", &m) == -1, "bad names");

    int64_t shape[1] = {4};
    nc_net *net = relu_net(1, shape);
    nc_calib_stats *s = NULL;
    nc_error err;
    NC_CHECK(nc_calib_new(net, 16, &s, &err) == NC_OK, "new");
    NC_CHECK(nc_calib_begin_pass(s, NC_CALIB_PASS_HISTOGRAM, &err) == NC_ERR_ARGUMENT, "histogram before max");
    nc_calib_begin_pass(s, NC_CALIB_PASS_MAX, NULL);
    float row[5] = {1, 2, 3, 4, 5};
    nc_calib_add(s, 1, row, 1, 5); /* wrong size */
    nc_calib_add(s, 0, row, 1, 5); /* an untracked node: ignored */
    NC_CHECK(nc_calib_end_pass(s, &err) == NC_ERR_SHAPE && strstr(err.message, "'relu'"), "size mismatch: %s",
             err.message);
    nc_thresholds *t = NULL;
    nc_calib_choice ch = nc_calib_choice_default();
    NC_CHECK(nc_calib_thresholds(s, net->n_nodes, &ch, &t, &err) == NC_ERR_ARGUMENT && !t, "p99.9 needs pass 2");
    nc_calib_free(s);
    nc_calib_free(NULL);
    nc_thresholds_free(NULL);

    nc_net *empty = nc_net_new();
    int in = nc_net_add_node(empty, NC_NODE_INPUT, "x", 0, NULL);
    empty->nodes[in].ndim = 1;
    empty->nodes[in].shape[0] = 2;
    nc_net_add_node(empty, NC_NODE_OUTPUT, "y", 1, &in);
    NC_CHECK(nc_calib_new(empty, 0, &s, &err) == NC_ERR_UNSUPPORTED && !s, "no neuron: %s", err.message);
    nc_net_free(empty);
    nc_net_free(net);
}

/* Saving and restoring every channel gives the same channel thresholds. */
static void test_restore(void)
{
    int64_t shape[3] = {C, 4, 4};
    nc_net *net = relu_net(3, shape);
    float *x = make_data();
    nc_calib_stats *s = collect(net, x, ROWS, C * HW, 512), *r = NULL;
    NC_CHECK(nc_calib_new(net, 512, &r, NULL) == NC_OK, "new");
    for (int c = 0; c < C; c++) {
        nc_calib_channel ch;
        nc_calib_get_channel(s, 0, c, &ch, NULL);
        NC_CHECK(nc_calib_set_channel(r, 0, c, &ch, NULL) == NC_OK, "set channel %d", c);
    }
    nc_calib_rebuild_layers(r);
    for (int c = 0; c < C; c++)
        NC_CHECK(nc_calib_select(r, 0, c, NC_CALIB_MMSE, 8, 0.5f) == nc_calib_select(s, 0, c, NC_CALIB_MMSE, 8, 0.5f),
                 "channel %d", c);
    float w = nc_calib_select(s, 0, -1, NC_CALIB_MAX, 0, 0) / 512;
    NC_CHECK_CLOSE(nc_calib_percentile(r, 0, -1, 99.9), nc_calib_percentile(s, 0, -1, 99.9), 2 * w, 0, "layer");
    nc_calib_free(r);
    nc_calib_free(s);
    free(x);
    nc_net_free(net);
}

int main(void)
{
    NC_RUN(test_max_and_percentiles);
    NC_RUN(test_mmse_uniform);
    NC_RUN(test_channel_vs_layer);
    NC_RUN(test_dead_fallbacks);
    NC_RUN(test_errors_and_names);
    NC_RUN(test_restore);
    return nc_test_done();
}
