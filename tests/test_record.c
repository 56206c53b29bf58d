/* test_record.c — nc_record fed by hand (metrics against numbers worked out
 * on paper) and nc_simulate on the CPU engine against direct forwards. */
#include <math.h>
#include <stdint.h>

#include "nc_test.h"
#include "nc_test_util.h"
#include "../core/nc_record.h"
#include "../sim/nc_simulate.h"

enum { T4 = 4, N2 = 2, NEUR = 4 };

/* input [2, 1, 2] → IF "block/if1" (θ = 1 for channel 0, 2 for channel 1)
 * → flatten → dense 4→3 → output.  The '/' in the name tests escaping. */
static nc_net *small_net(nc_reset reset, nc_compare compare)
{
    nc_net *net = nc_net_new();
    int in = nc_net_add_node(net, NC_NODE_INPUT, "in", 0, NULL);
    net->nodes[in].ndim = 3;
    net->nodes[in].shape[0] = 2, net->nodes[in].shape[1] = 1, net->nodes[in].shape[2] = 2;
    int n1 = nc_net_add_node(net, NC_NODE_NEURON, "block/if1", 1, &in);
    nc_neuron *nr = &net->nodes[n1].neuron;
    const float theta[2] = {1.0f, 2.0f};
    nr->model = NC_NEURON_IF;
    nr->reset = reset;
    nr->compare = compare;
    nc_neuron_set_threshold(nr, 2, theta, NULL);
    int f = nc_net_add_node(net, NC_NODE_FLATTEN, "flat", 1, &n1);
    int d = nc_net_add_node(net, NC_NODE_DENSE, "fc", 1, &f);
    net->nodes[d].weight = nc_tensor_new2(3, 4);
    for (int i = 0; i < 12; i++)
        net->nodes[d].weight->data[i] = (float)((i * 7) % 5) - 2.0f;
    nc_net_add_node(net, NC_NODE_OUTPUT, "out", 1, &d);
    return inferred(net);
}

/* Input currents x[t][s][i] of the worked example (see the expectations). */
static const float X[T4][N2][NEUR] = {
    {{0.25f, 0, 2.5f, -1}, {1, 1, 0, 0.4f}},
    {{0.25f, 0, 2.5f, -1}, {0, 1, 0, 0.4f}},
    {{0.25f, 0, 2.5f, -1}, {0, 1, 0, 0.4f}},
    {{0.25f, 0, 2.5f, -1}, {0, 1, 4, 0.4f}},
};
/* ANN activations a[s][i]. */
static const float A[N2][NEUR] = {{0.25f, 0, 2.5f, 0}, {0.3f, 1, 1, 0.4f}};

/* Direct IF simulation, the textbook loop: spikes[t][s][i] = θ or 0 and the
 * membrane v[s][i][t], t = 0..T. */
static void if_sim(nc_reset reset, nc_compare compare, float spikes[T4][N2][NEUR], float v[N2][NEUR][T4 + 1])
{
    for (int s = 0; s < N2; s++) {
        for (int i = 0; i < NEUR; i++) {
            float theta = i < 2 ? 1.0f : 2.0f;
            v[s][i][0] = 0.5f * theta;
            for (int t = 0; t < T4; t++) {
                float m = v[s][i][t] + X[t][s][i];
                int fire = compare == NC_FIRE_GE ? m >= theta : m > theta;
                spikes[t][s][i] = fire ? theta : 0.0f;
                v[s][i][t + 1] = !fire ? m : reset == NC_RESET_SUBTRACT ? m - theta : 0.0f;
            }
        }
    }
}

/* SNN output [T, N, 3] whose running sums give accuracy 0.5, 0.5, 1, 0.5
 * for labels {0, 2}. */
static const float OUT[T4][N2][3] = {
    {{0, 1, 0}, {0, 0, 1}},
    {{2, 0, 0}, {0, 3, 0}},
    {{0, 0, 0}, {0, 0, 5}},
    {{0, 0, 3}, {0, 0, 0}},
};
static const int32_t LABELS[N2] = {0, 2};
static const float ANN_OUT[N2][3] = {{1, 0, 0}, {1, 0, 0}}; /* 1 of 2 right */

/* Feeds one batch; `chunks` splits the SNN steps over that many calls. */
static nc_status feed_batch(nc_record *rec, nc_reset reset, nc_compare compare, int chunks, nc_error *err)
{
    float spikes[T4][N2][NEUR], v[N2][NEUR][T4 + 1];
    if_sim(reset, compare, spikes, v);
    nc_status st = nc_record_begin_batch(rec, N2, err);
    if (st != NC_OK)
        return st;
    nc_record_observe_ann(rec, 1, &A[0][0], N2, NEUR);
    nc_record_observe_ann(rec, 4, &ANN_OUT[0][0], N2, 3); /* not a layer: ignored */
    st = nc_record_add_reference(rec, NC_RECORD_REF_ANN, &ANN_OUT[0][0], N2, 3, LABELS, err);
    int per = T4 / chunks;
    for (int c = 0; c < chunks; c++) {
        nc_record_observe_snn_input(rec, 1, &X[c * per][0][0], (int64_t)per * N2, NEUR);
        nc_record_observe_snn(rec, 1, &spikes[c * per][0][0], (int64_t)per * N2, NEUR);
    }
    return st == NC_OK ? nc_record_end_batch(rec, LABELS, &OUT[0][0][0], 3, err) : st;
}

static void test_hand_metrics(void)
{
    nc_net *net = small_net(NC_RESET_SUBTRACT, NC_FIRE_GE);
    nc_record *rec;
    nc_error err;
    nc_record_spec spec = {.raster_neurons = 2, .trace_samples = 2};
    NC_CHECK(nc_record_new(net, T4, &spec, &rec, &err) == NC_OK, "%s", err.message);
    NC_CHECK(nc_record_layer_count(rec) == 1, "one IF layer");
    NC_CHECK(feed_batch(rec, NC_RESET_SUBTRACT, NC_FIRE_GE, 1, &err) == NC_OK, "%s", err.message);

    nc_layer_stats s;
    nc_record_layer_stats(rec, 0, &s);
    NC_CHECK(s.spikes == 12, "spikes %lld", (long long)s.spikes);
    NC_CHECK_CLOSE(s.firing_rate, 12.0 / 32.0, 1e-12, 0, "rate = spikes/(4·2·4)");
    NC_CHECK_CLOSE(s.dead_fraction, 0.25, 1e-12, 0, "dead pairs s0i1, s0i3");
    NC_CHECK_CLOSE(s.saturated_fraction, 0.25, 1e-12, 0, "saturated pairs s0i2, s1i1");
    NC_CHECK_CLOSE(s.clipped_fraction, 1.0 / 8, 1e-12, 0, "z > θ only at s0i2");
    NC_CHECK(nc_record_channel_spikes(rec, 0)[0] == 6 && nc_record_channel_spikes(rec, 0)[1] == 6, "channels");
    NC_CHECK_CLOSE(nc_record_channel_rate(rec, 0, 0), 6.0 / 16, 1e-12, 0, "channel rate");

    /* local: φ − ReLU(z) = {0,0,−.5,0 | 0,0,−.5,.1} */
    NC_CHECK_CLOSE(s.local.mean, -0.9 / 8, 1e-6, 0, "local mean");
    NC_CHECK_CLOSE(s.local.mse, 0.51 / 8, 1e-6, 0, "local mse");
    NC_CHECK_CLOSE(s.clip.mean, -0.5 / 8, 1e-6, 0, "clip mean");
    NC_CHECK_CLOSE(s.quant.mean, 0.1 / 8, 1e-6, 0, "quant mean (s1i3: q=.5, clip(z)=.4)");
    NC_CHECK_CLOSE(s.uneven.mean, -0.5 / 8, 1e-6, 0, "uneven mean (s1i2: φ=.5, q=1)");
    NC_CHECK_CLOSE(s.clip.mean + s.quant.mean + s.uneven.mean, s.local.mean, 1e-9, 0, "decomposition sums");
    NC_CHECK_CLOSE(s.uneven.mean_abs, 0.5 / 8, 1e-6, 0, "uneven mean abs");

    /* total: φ − a = {0,0,−.5,0 | −.05,0,−.5,.1} */
    NC_CHECK(s.has_ann, "ANN activations seen");
    NC_CHECK_CLOSE(s.total.mean, -0.95 / 8, 1e-6, 0, "total mean");
    NC_CHECK_CLOSE(s.total.mse, 0.5125 / 8, 1e-6, 0, "total mse");
    NC_CHECK_CLOSE(s.total.rel_l2, sqrt(0.5125 / 8.5625), 1e-6, 0, "total rel L2");

    /* accuracy after each step and the reference */
    const double acc[T4] = {0.5, 0.5, 1.0, 0.5};
    for (int t = 1; t <= T4; t++)
        NC_CHECK_CLOSE(nc_record_accuracy(rec, t), acc[t - 1], 1e-12, 0, "accuracy at t=%d", t);
    NC_CHECK_CLOSE(nc_record_ann_accuracy(rec), 0.5, 1e-12, 0, "ANN accuracy");
    NC_CHECK(isnan(nc_record_qcfs_accuracy(rec)), "no QCFS pass → NAN");

    /* SOPs: fan-out 3 (dense 4→3), ANN MACs 12 per sample */
    nc_record_totals tot;
    nc_record_get_totals(rec, &tot);
    NC_CHECK_CLOSE(s.fanout, 3.0, 1e-12, 0, "fanout");
    NC_CHECK_CLOSE(s.sops, 36.0, 1e-12, 0, "sops = spikes × fanout");
    NC_CHECK_CLOSE(s.ann_macs, 24.0, 1e-12, 0, "ann macs = fanout × neurons × samples");
    NC_CHECK_CLOSE(tot.sops_per_mac, 36.0 / 24.0, 1e-12, 0, "net ratio");

    /* raster: neurons 0 and 2; s0 neuron 0 fires at step 1 (0-based), neuron 2 always */
    nc_raster r;
    nc_record_raster(rec, 0, &r);
    NC_CHECK(r.samples == 2 && r.neurons == 2 && r.neuron_index[1] == 2, "raster layout");
    for (int t = 0; t < T4; t++) {
        NC_CHECK(nc_raster_spike(&r, 0, 0, t) == (t == 1), "s0 n0 t%d", t);
        NC_CHECK(nc_raster_spike(&r, 0, 1, t) == 1, "s0 n2 t%d", t);
        NC_CHECK(nc_raster_spike(&r, 1, 1, t) == (t == 3), "s1 n2 t%d", t);
    }
    nc_record_free(rec);
    nc_net_free(net);
}

/* Traces reconstructed from inputs and spikes equal the membrane of a direct
 * IF simulation, for both reset modes and both comparisons. */
static void check_traces(nc_reset reset, nc_compare compare)
{
    nc_net *net = small_net(reset, compare);
    nc_record *rec;
    nc_error err;
    nc_record_spec spec = {.trace_samples = 2, .trace_neurons = 4};
    float spikes[T4][N2][NEUR], v[N2][NEUR][T4 + 1];
    if_sim(reset, compare, spikes, v);
    NC_CHECK(nc_record_new(net, T4, &spec, &rec, &err) == NC_OK, "%s", err.message);
    NC_CHECK(feed_batch(rec, reset, compare, 2, &err) == NC_OK, "%s", err.message);
    nc_trace tr;
    nc_record_trace(rec, 0, &tr);
    NC_CHECK(tr.samples == 2 && tr.neurons == 4, "trace layout");
    for (int s = 0; s < N2; s++)
        for (int j = 0; j < NEUR; j++)
            for (int t = 0; t <= T4; t++)
                NC_CHECK(tr.v[(s * 4 + j) * (T4 + 1) + t] == v[s][j][t], "v s%d j%d t%d: %g vs %g", s, j, t,
                         tr.v[(s * 4 + j) * (T4 + 1) + t], v[s][j][t]);
    nc_record_free(rec);
    nc_net_free(net);
}

static void test_traces_subtract_ge(void) { check_traces(NC_RESET_SUBTRACT, NC_FIRE_GE); }
static void test_traces_zero_gt(void) { check_traces(NC_RESET_ZERO, NC_FIRE_GT); }

/* Two batches accumulate; a bad or unfinished batch adds nothing. */
static void test_batches_and_bad_calls(void)
{
    nc_net *net = small_net(NC_RESET_SUBTRACT, NC_FIRE_GE);
    nc_record *rec;
    nc_error err;
    NC_CHECK(nc_record_new(net, T4, NULL, &rec, &err) == NC_OK, "%s", err.message);
    NC_CHECK(feed_batch(rec, NC_RESET_SUBTRACT, NC_FIRE_GE, 1, &err) == NC_OK, "%s", err.message);
    NC_CHECK(feed_batch(rec, NC_RESET_SUBTRACT, NC_FIRE_GE, 4, &err) == NC_OK, "%s", err.message);
    nc_layer_stats s;
    nc_record_layer_stats(rec, 0, &s);
    NC_CHECK(nc_record_samples(rec) == 4 && s.spikes == 24, "two batches");
    NC_CHECK_CLOSE(s.firing_rate, 0.375, 1e-12, 0, "rate unchanged by repetition");
    nc_raster r;
    nc_record_raster(rec, 0, &r);
    NC_CHECK(r.samples == 4, "default raster: first 4 samples");
    for (int j = 0; j < r.neurons; j++)
        for (int t = 0; t < T4; t++)
            NC_CHECK(nc_raster_spike(&r, 2, j, t) == nc_raster_spike(&r, 0, j, t), "sample 2 = sample 0");

    /* wrong per_row: sticky error, nothing added */
    float junk[T4 * N2 * 3] = {0};
    NC_CHECK(nc_record_begin_batch(rec, N2, &err) == NC_OK, "begin");
    nc_record_observe_snn(rec, 1, junk, T4 * N2, 3);
    NC_CHECK(nc_record_end_batch(rec, LABELS, &OUT[0][0][0], 3, &err) == NC_ERR_SHAPE, "bad call reported");
    printf("# bad call: %s\n", err.message);
    /* missing steps: refused */
    NC_CHECK(nc_record_begin_batch(rec, N2, &err) == NC_OK, "begin");
    NC_CHECK(nc_record_end_batch(rec, LABELS, &OUT[0][0][0], 3, &err) != NC_OK, "no spikes observed");
    /* a begun, never ended batch (cancelled) */
    NC_CHECK(nc_record_begin_batch(rec, N2, &err) == NC_OK, "begin");
    nc_record_observe_snn_input(rec, 1, &X[0][0][0], T4 * N2, NEUR);
    nc_record_layer_stats(rec, 0, &s);
    NC_CHECK(nc_record_samples(rec) == 4 && s.spikes == 24, "totals untouched");
    nc_record *none;
    NC_CHECK(nc_record_new(net, 0, NULL, &none, &err) == NC_ERR_ARGUMENT && !none, "T = 0 refused");
    nc_record_free(rec);
    nc_net_free(net);
}

/* Feeds one batch as an engine with NC_CAP_STEP_SUMS does: every step of
 * only the record's step samples, then each IF node's sums over the steps. */
static nc_status feed_batch_sums(nc_record *rec, int64_t *step_samples, nc_error *err)
{
    float spikes[T4][N2][NEUR], v[N2][NEUR][T4 + 1];
    if_sim(NC_RESET_SUBTRACT, NC_FIRE_GE, spikes, v);
    nc_status st = nc_record_begin_batch(rec, N2, err);
    if (st != NC_OK)
        return st;
    nc_record_expect_sums(rec);
    int64_t m = *step_samples = nc_record_step_samples(rec);
    nc_record_observe_ann(rec, 1, &A[0][0], N2, NEUR);
    st = nc_record_add_reference(rec, NC_RECORD_REF_ANN, &ANN_OUT[0][0], N2, 3, LABELS, err);
    float x_steps[T4 * N2 * NEUR], s_steps[T4 * N2 * NEUR], counts[N2 * NEUR] = {0}, sums[N2 * NEUR] = {0};
    for (int t = 0; t < T4; t++)
        for (int s = 0; s < N2; s++)
            for (int i = 0; i < NEUR; i++) {
                if (s < m) {
                    x_steps[(t * m + s) * NEUR + i] = X[t][s][i];
                    s_steps[(t * m + s) * NEUR + i] = spikes[t][s][i];
                }
                counts[s * NEUR + i] += spikes[t][s][i] != 0.0f;
                sums[s * NEUR + i] += X[t][s][i];
            }
    if (m > 0) {
        nc_record_observe_snn_input(rec, 1, x_steps, T4 * m, NEUR);
        nc_record_observe_snn(rec, 1, s_steps, T4 * m, NEUR);
    }
    nc_record_observe_sums(rec, 1, counts, sums, N2, NEUR);
    return st == NC_OK ? nc_record_end_batch(rec, LABELS, &OUT[0][0][0], 3, err) : st;
}

static void check_same_error(const nc_error_stats *a, const nc_error_stats *b, const char *what)
{
    NC_CHECK(a->mean == b->mean && a->mse == b->mse && a->mean_abs == b->mean_abs &&
                 (a->rel_l2 == b->rel_l2 || (isnan(a->rel_l2) && isnan(b->rel_l2))),
             "%s: the same as fed step by step", what);
}

/* Sums over the steps give the record that every step gives, bit for bit:
 * metrics, channel counts, the raster and traces of the first sample. */
static void test_sums_match_steps(void)
{
    nc_net *net = small_net(NC_RESET_SUBTRACT, NC_FIRE_GE);
    nc_record *steps, *sums;
    nc_error err;
    nc_record_spec spec = {.raster_samples = 1, .trace_samples = 1, .trace_neurons = 4};
    NC_CHECK(nc_record_new(net, T4, &spec, &steps, &err) == NC_OK, "%s", err.message);
    NC_CHECK(nc_record_new(net, T4, &spec, &sums, &err) == NC_OK, "%s", err.message);
    int64_t m1 = -1, m2 = -1;
    for (int b = 0; b < 2; b++)
        NC_CHECK(feed_batch(steps, NC_RESET_SUBTRACT, NC_FIRE_GE, 1, &err) == NC_OK, "%s", err.message);
    NC_CHECK(feed_batch_sums(sums, &m1, &err) == NC_OK, "first batch: %s", err.message);
    NC_CHECK(feed_batch_sums(sums, &m2, &err) == NC_OK, "second batch: %s", err.message);
    NC_CHECK(m1 == 1 && m2 == 0, "steps of the first sample only, then none (%lld, %lld)", (long long)m1,
             (long long)m2);
    nc_layer_stats a, b;
    nc_record_layer_stats(steps, 0, &a);
    nc_record_layer_stats(sums, 0, &b);
    NC_CHECK(a.spikes == b.spikes && a.spikes == 24, "spikes %lld, %lld", (long long)a.spikes, (long long)b.spikes);
    NC_CHECK(a.firing_rate == b.firing_rate && a.dead_fraction == b.dead_fraction &&
                 a.saturated_fraction == b.saturated_fraction && a.clipped_fraction == b.clipped_fraction &&
                 a.has_ann == b.has_ann && a.sops == b.sops,
             "rates and fractions");
    check_same_error(&a.total, &b.total, "total");
    check_same_error(&a.local, &b.local, "local");
    check_same_error(&a.clip, &b.clip, "clip");
    check_same_error(&a.quant, &b.quant, "quant");
    check_same_error(&a.uneven, &b.uneven, "uneven");
    for (int c = 0; c < 2; c++)
        NC_CHECK(nc_record_channel_spikes(steps, 0)[c] == nc_record_channel_spikes(sums, 0)[c], "channel %d", c);
    for (int t = 1; t <= T4; t++)
        NC_CHECK(nc_record_accuracy(steps, t) == nc_record_accuracy(sums, t), "accuracy at t = %d", t);
    NC_CHECK(nc_record_ann_accuracy(steps) == nc_record_ann_accuracy(sums), "ANN accuracy");
    nc_raster ra, rb;
    nc_record_raster(steps, 0, &ra);
    nc_record_raster(sums, 0, &rb);
    NC_CHECK(ra.samples == 1 && rb.samples == 1 && ra.neurons == rb.neurons, "raster of one sample");
    for (int j = 0; j < ra.neurons; j++)
        for (int t = 0; t < T4; t++)
            NC_CHECK(nc_raster_spike(&ra, 0, j, t) == nc_raster_spike(&rb, 0, j, t), "raster n%d t%d", j, t);
    nc_trace ta, tb;
    nc_record_trace(steps, 0, &ta);
    nc_record_trace(sums, 0, &tb);
    NC_CHECK(ta.samples == 1 && tb.samples == 1, "trace of one sample");
    for (int k = 0; k < 4 * T4; k++)
        NC_CHECK(ta.current[k] == tb.current[k] && ta.spike[k] == tb.spike[k], "trace value %d", k);
    for (int k = 0; k < 4 * (T4 + 1); k++)
        NC_CHECK(ta.v[k] == tb.v[k], "membrane value %d", k);
    nc_record_free(steps);
    nc_record_free(sums);
    nc_net_free(net);
}

/* Sums shown where none are expected, twice, not at all or not counts:
 * the batch fails and adds nothing. */
static void test_bad_sums(void)
{
    nc_net *net = small_net(NC_RESET_SUBTRACT, NC_FIRE_GE);
    nc_record *rec;
    nc_error err;
    nc_record_spec spec = {.raster_samples = NC_RECORD_NONE, .trace_samples = NC_RECORD_NONE};
    NC_CHECK(nc_record_new(net, T4, &spec, &rec, &err) == NC_OK, "%s", err.message);
    float counts[N2 * NEUR] = {0}, sums[N2 * NEUR] = {0}, half[N2 * NEUR] = {0.5f};
    const char *what[4] = {"sums not expected", "sums twice", "no sums", "a count that is not an integer"};
    nc_status want[4] = {NC_ERR_INTERNAL, NC_ERR_SHAPE, NC_ERR_INTERNAL, NC_ERR_SHAPE};
    for (int k = 0; k < 4; k++) {
        NC_CHECK(nc_record_begin_batch(rec, N2, &err) == NC_OK, "begin");
        if (k > 0)
            nc_record_expect_sums(rec);
        NC_CHECK(nc_record_step_samples(rec) == 0, "no views: no steps needed");
        if (k == 0 || k == 1)
            nc_record_observe_sums(rec, 1, counts, sums, N2, NEUR);
        if (k == 1)
            nc_record_observe_sums(rec, 1, counts, sums, N2, NEUR);
        if (k == 3)
            nc_record_observe_sums(rec, 1, half, sums, N2, NEUR);
        nc_status st = nc_record_end_batch(rec, LABELS, &OUT[0][0][0], 3, &err);
        NC_CHECK(st == want[k], "%s: status %d (%s)", what[k], st, err.message);
        printf("# %s: %s\n", what[k], err.message);
    }
    NC_CHECK(nc_record_samples(rec) == 0, "nothing added");
    nc_record_free(rec);
    nc_net_free(net);
}

/* A record without layers keeps the accuracies and needs no observer. */
static void test_accuracy_only(void)
{
    nc_net *net = small_net(NC_RESET_SUBTRACT, NC_FIRE_GE);
    nc_record *full, *acc;
    nc_error err;
    nc_record_spec spec = {.layers = NC_RECORD_NONE};
    NC_CHECK(nc_record_new(net, T4, NULL, &full, &err) == NC_OK, "%s", err.message);
    NC_CHECK(nc_record_new(net, T4, &spec, &acc, &err) == NC_OK, "%s", err.message);
    NC_CHECK(nc_record_layer_count(acc) == 0 && nc_record_layer_of_node(acc, 1) == -1, "no layer");
    NC_CHECK(nc_record_get_spec(acc)->layers == NC_RECORD_NONE, "the spec says so");
    NC_CHECK(feed_batch(full, NC_RESET_SUBTRACT, NC_FIRE_GE, 1, &err) == NC_OK, "%s", err.message);
    NC_CHECK(nc_record_begin_batch(acc, N2, &err) == NC_OK, "begin");
    NC_CHECK(nc_record_add_reference(acc, NC_RECORD_REF_ANN, &ANN_OUT[0][0], N2, 3, LABELS, &err) == NC_OK, "ref");
    NC_CHECK(nc_record_end_batch(acc, LABELS, &OUT[0][0][0], 3, &err) == NC_OK, "no observer: %s", err.message);
    for (int t = 1; t <= T4; t++)
        NC_CHECK(nc_record_accuracy(acc, t) == nc_record_accuracy(full, t), "accuracy at t = %d", t);
    NC_CHECK(nc_record_ann_accuracy(acc) == 0.5 && nc_record_samples(acc) == N2, "reference and samples");
    nc_record_totals tot;
    nc_record_get_totals(acc, &tot);
    NC_CHECK(tot.spikes == 0, "no spikes counted");
    nc_record_free(full);
    nc_record_free(acc);
    nc_net_free(net);
}

/* What a raster sink was handed: every sample's bits, by run index. */
typedef struct sink_log {
    int calls, neurons, T;
    int64_t samples;
    uint8_t bits[16][NEUR * T4]; /* one byte per (neuron, step) */
} sink_log;

static void log_raster(void *user, const nc_record *rec, int layer, int64_t first, int64_t n, int neurons, int T,
                       const uint8_t *bits)
{
    sink_log *log = user;
    log->calls++;
    log->neurons = neurons, log->T = T;
    NC_CHECK(layer == 0 && first == log->samples && nc_record_samples(rec) == first, "sink: batch at %lld",
             (long long)first);
    for (int64_t s = 0; s < n && first + s < 16; s++)
        for (int64_t b = 0; b < (int64_t)neurons * T; b++) {
            int64_t bit = s * neurons * T + b;
            log->bits[first + s][b] = (bits[bit >> 3] >> (bit & 7)) & 1;
        }
    log->samples = first + n;
}

/* A raster sink gets every sample, also those past raster_samples, with the
 * bits the in-memory raster holds; a failed batch is not handed over. */
static void test_raster_sink(void)
{
    nc_net *net = small_net(NC_RESET_SUBTRACT, NC_FIRE_GE);
    sink_log log = {0};
    nc_record_spec spec = {.raster_samples = 1, .raster_neurons = 3, .raster_sink = log_raster,
                           .raster_sink_user = &log};
    nc_record_spec whole = {.raster_samples = 6, .raster_neurons = 3};
    nc_record *rec, *ref;
    nc_error err;
    NC_CHECK(nc_record_new(net, T4, &spec, &rec, &err) == NC_OK, "%s", err.message);
    NC_CHECK(nc_record_new(net, T4, &whole, &ref, &err) == NC_OK, "%s", err.message);
    for (int b = 0; b < 3; b++) {
        NC_CHECK(feed_batch(rec, NC_RESET_SUBTRACT, NC_FIRE_GE, b + 1 == 3 ? 4 : 1, &err) == NC_OK, "%s", err.message);
        NC_CHECK(feed_batch(ref, NC_RESET_SUBTRACT, NC_FIRE_GE, 1, &err) == NC_OK, "%s", err.message);
    }
    NC_CHECK(log.calls == 3 && log.samples == 6 && log.neurons == 3 && log.T == T4, "one call per batch: %d",
             log.calls);
    nc_raster kept, all;
    nc_record_raster(rec, 0, &kept);
    nc_record_raster(ref, 0, &all);
    NC_CHECK(kept.samples == 1 && all.samples == 6, "the record itself keeps raster_samples");
    int same = 1, spikes = 0;
    for (int s = 0; s < 6; s++)
        for (int j = 0; j < 3; j++)
            for (int t = 0; t < T4; t++) {
                same &= log.bits[s][j * T4 + t] == nc_raster_spike(&all, s, j, t);
                spikes += log.bits[s][j * T4 + t];
            }
    NC_CHECK(same && spikes > 0, "the sink's bits are the raster's (%d spikes)", spikes);
    /* a bad batch: the sink is not called */
    float junk[T4 * N2 * 3] = {0};
    NC_CHECK(nc_record_begin_batch(rec, N2, &err) == NC_OK, "begin");
    nc_record_observe_snn(rec, 1, junk, T4 * N2, 3);
    NC_CHECK(nc_record_end_batch(rec, LABELS, &OUT[0][0][0], 3, &err) != NC_OK && log.calls == 3,
             "a failed batch is not handed over");
    nc_record_free(rec);
    nc_record_free(ref);
    nc_net_free(net);
}

/* ---- with the CPU engine ---------------------------------------------------- */

/* input [1,2,2] → flatten → dense 4→5 → IF (θ per channel) → dense 5→3 → output */
static nc_net *engine_net(void)
{
    nc_net *net = nc_net_new();
    int in = nc_net_add_node(net, NC_NODE_INPUT, "image", 0, NULL);
    net->nodes[in].ndim = 3;
    net->nodes[in].shape[0] = 1, net->nodes[in].shape[1] = 2, net->nodes[in].shape[2] = 2;
    int f = nc_net_add_node(net, NC_NODE_FLATTEN, "flat", 1, &in);
    int d1 = nc_net_add_node(net, NC_NODE_DENSE, "fc1", 1, &f);
    net->nodes[d1].weight = nc_tensor_new2(5, 4);
    net->nodes[d1].bias = nc_tensor_new1(5);
    for (int i = 0; i < 20; i++)
        net->nodes[d1].weight->data[i] = (float)(((i * 37) % 11) - 4) * 0.15f;
    for (int i = 0; i < 5; i++)
        net->nodes[d1].bias->data[i] = 0.05f * (float)i;
    int n1 = nc_net_add_node(net, NC_NODE_NEURON, "if1", 1, &d1);
    const float theta[5] = {0.8f, 1.0f, 0.6f, 1.2f, 0.9f};
    net->nodes[n1].neuron.model = NC_NEURON_IF;
    net->nodes[n1].neuron.levels = 4;
    nc_neuron_set_threshold(&net->nodes[n1].neuron, 5, theta, NULL);
    int d2 = nc_net_add_node(net, NC_NODE_DENSE, "fc2", 1, &n1);
    net->nodes[d2].weight = nc_tensor_new2(3, 5);
    for (int i = 0; i < 15; i++)
        net->nodes[d2].weight->data[i] = (float)(((i * 13) % 7) - 3) * 0.3f;
    nc_net_add_node(net, NC_NODE_OUTPUT, "logits", 1, &d2);
    return inferred(net);
}

static nc_dataset *tiny_dataset(int64_t count)
{
    static float images[64 * 4];
    static int32_t labels[64];
    static nc_dataset ds;
    uint32_t x = 12345;
    for (int64_t i = 0; i < count * 4; i++) {
        x = x * 1664525u + 1013904223u;
        images[i] = (float)(x >> 8) / (float)(1u << 24) * 2.0f;
    }
    for (int64_t i = 0; i < count; i++)
        labels[i] = (int32_t)(i % 3);
    ds = (nc_dataset){.count = count, .channels = 1, .height = 2, .width = 2, .images = images,
                      .labels = labels, .num_classes = 3};
    snprintf(ds.path, sizeof ds.path, "in-memory");
    return &ds;
}

/* Counts spikes of node `node` over everything observed. */
typedef struct spike_counter { int node; int64_t spikes; } spike_counter;

static void count_spikes(void *user, int node, const float *data, int64_t rows, int64_t per_row)
{
    spike_counter *c = user;
    for (int64_t i = 0; node == c->node && i < rows * per_row; i++)
        c->spikes += data[i] != 0.0f;
}

/* Accuracy after each step and spikes, from one direct SNN forward. */
static void direct_run(nc_engine *e, const nc_dataset *ds, int T, double *acc, int64_t *spikes, double *ann_acc)
{
    nc_tensor *in = nc_tensor_new4(ds->count, 1, 2, 2), *out = NULL;
    memcpy(in->data, ds->images, (size_t)ds->count * 4 * sizeof(float));
    spike_counter sc = {3, 0};
    nc_observer ob = {count_spikes, NULL, &sc};
    nc_run_options ro = {.mode = NC_MODE_SNN, .T = T, .observer = &ob};
    nc_error err;
    if (nc_engine_forward(e, in, &ro, &out, &err) != NC_OK) {
        printf("# direct: %s\n", err.message);
        return;
    }
    for (int t = 0; t < T; t++)
        acc[t] = 0;
    for (int64_t s = 0; s < ds->count; s++) {
        double sum[3] = {0, 0, 0};
        for (int t = 0; t < T; t++) {
            int best = 0;
            for (int k = 0; k < 3; k++)
                sum[k] += out->data[((int64_t)t * ds->count + s) * 3 + k];
            for (int k = 1; k < 3; k++)
                best = sum[k] > sum[best] ? k : best;
            acc[t] += (best == ds->labels[s]) / (double)ds->count;
        }
    }
    *spikes = sc.spikes;
    nc_tensor_free(out);
    ro = (nc_run_options){.mode = NC_MODE_ANN};
    nc_engine_forward(e, in, &ro, &out, &err);
    *ann_acc = 0;
    for (int64_t s = 0; out && s < ds->count; s++) {
        const float *o = out->data + s * 3;
        int best = o[1] > o[0] ? 1 : 0;
        best = o[2] > o[best] ? 2 : best;
        *ann_acc += (best == ds->labels[s]) / (double)ds->count;
    }
    nc_tensor_free(out);
    nc_tensor_free(in);
}

static void test_simulate_cpu(void)
{
    enum { T = 8 };
    nc_net *net = engine_net();
    nc_dataset *ds = tiny_dataset(10);
    nc_engine *e = nc_engine_cpu_new();
    nc_error err;
    nc_record *rec = NULL;
    nc_simulate_options o = {.T = T, .batch_size = 4};
    NC_CHECK(nc_simulate(e, net, ds, &o, NULL, NULL, &rec, &err) == NC_OK, "%s", err.message);
    if (!rec)
        goto done;
    double acc[T], ann = 0;
    int64_t spikes = 0;
    direct_run(e, ds, T, acc, &spikes, &ann);
    NC_CHECK(nc_record_samples(rec) == 10, "3 batches (4+4+2) = 10 images");
    for (int t = 1; t <= T; t++)
        NC_CHECK_CLOSE(nc_record_accuracy(rec, t), acc[t - 1], 1e-12, 0, "accuracy at t=%d", t);
    NC_CHECK_CLOSE(nc_record_ann_accuracy(rec), ann, 1e-12, 0, "ANN accuracy");
    NC_CHECK(!isnan(nc_record_qcfs_accuracy(rec)), "QCFS accuracy measured");
    nc_layer_stats s;
    nc_record_layer_stats(rec, 0, &s);
    NC_CHECK(s.spikes == spikes, "spikes %lld vs direct %lld", (long long)s.spikes, (long long)spikes);
    NC_CHECK(s.has_ann, "total error measured");
    /* constant input current, v0 = θ/2: the IF gives q_T(z) exactly */
    NC_CHECK(s.uneven.mean_abs < 1e-5, "no unevenness with a constant input (%g)", s.uneven.mean_abs);
    NC_CHECK_CLOSE(s.clip.mean + s.quant.mean + s.uneven.mean, s.local.mean, 1e-9, 0, "decomposition sums");
    /* the ANN activation of the first layer is ReLU(z) itself: total = local */
    NC_CHECK_CLOSE(s.total.mean, s.local.mean, 1e-5, 0, "first layer: total error = local error");
    printf("# simulate: acc(T) %.3f ann %.3f qcfs %.3f rate %.3f local mse %.4g\n", nc_record_accuracy(rec, T),
           nc_record_ann_accuracy(rec), nc_record_qcfs_accuracy(rec), s.firing_rate, s.local.mse);
done:
    nc_record_free(rec);
    nc_engine_free(e);
    nc_net_free(net);
}

typedef struct cancel_state { int calls_after_first_batch; int64_t last_done; } cancel_state;

static int cancel_after_first_batch(void *user, const nc_progress *p)
{
    cancel_state *c = user;
    c->last_done = p->done;
    NC_CHECK(strcmp(p->stage, "simulate") == 0 && p->total == 10, "progress stage and total");
    return p->done >= 4;
}

static void test_simulate_cancel(void)
{
    nc_net *net = engine_net();
    nc_dataset *ds = tiny_dataset(10);
    nc_engine *e = nc_engine_cpu_new();
    nc_error err;
    nc_record *rec = NULL;
    cancel_state cs = {0, 0};
    nc_simulate_options o = {.T = 4, .batch_size = 4, .encoding = NC_ENCODING_POISSON, .seed = 7};
    NC_CHECK(nc_simulate(e, net, ds, &o, cancel_after_first_batch, &cs, &rec, &err) == NC_ERR_CANCELLED,
             "cancelled");
    printf("# cancel: %s\n", err.message);
    NC_CHECK(rec && nc_record_samples(rec) == 4, "partial record holds the first batch");
    NC_CHECK(rec && !isnan(nc_record_accuracy(rec, 4)), "partial record readable");
    nc_record_free(rec);
    /* limit */
    o.limit = 3;
    NC_CHECK(nc_simulate(e, net, ds, &o, NULL, NULL, &rec, &err) == NC_OK, "%s", err.message);
    NC_CHECK(rec && nc_record_samples(rec) == 3, "limit 3");
    nc_record_free(rec);
    nc_engine_free(e);
    nc_net_free(net);
}

int main(void)
{
    NC_RUN(test_hand_metrics);
    NC_RUN(test_traces_subtract_ge);
    NC_RUN(test_traces_zero_gt);
    NC_RUN(test_batches_and_bad_calls);
    NC_RUN(test_raster_sink);
    NC_RUN(test_sums_match_steps);
    NC_RUN(test_bad_sums);
    NC_RUN(test_accuracy_only);
    NC_RUN(test_simulate_cpu);
    NC_RUN(test_simulate_cancel);
    return nc_test_done();
}
