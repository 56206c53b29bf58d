/* test_convert.c — MaxPool preparation, ReLU → QCFS → IF rewrites, the
 * calibration step on the CPU engine, and (when the fixture models exist)
 * calibrate + convert + QCFS accuracy on Fashion-MNIST. */
#include "nc_test.h"
#include "nc_test_util.h"

#include <unistd.h>

#include "../core/nc_convert.h"
#include "../core/nc_onnx.h"
#include "../sim/nc_calibrate.h"
#include "../sim/nc_evaluate.h"

/* ---- building nets by hand --------------------------------------------------- */

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static float uniform_pm(void) /* [−1, 1) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) / 8388608.0 - 1.0);
}

static nc_tensor *random_tensor(int ndim, const int64_t *shape, float scale)
{
    nc_tensor *t = nc_tensor_new(ndim, shape);
    for (int64_t i = 0; i < nc_tensor_numel(t); i++)
        t->data[i] = scale * uniform_pm();
    return t;
}

static int add_dense(nc_net *net, const char *name, int in, int64_t fin, int64_t fout)
{
    int i = nc_net_add_node(net, NC_NODE_DENSE, name, 1, &in);
    int64_t ws[2] = {fout, fin};
    net->nodes[i].weight = random_tensor(2, ws, 1.0f);
    net->nodes[i].bias = random_tensor(1, &fout, 0.3f);
    return i;
}

static int add_conv(nc_net *net, const char *name, int in, int64_t cin, int64_t cout)
{
    int i = nc_net_add_node(net, NC_NODE_CONV2D, name, 1, &in);
    int64_t ws[4] = {cout, cin, 3, 3};
    net->nodes[i].weight = random_tensor(4, ws, 0.5f);
    net->nodes[i].bias = random_tensor(1, &cout, 0.2f);
    for (int k = 0; k < 4; k++)
        net->nodes[i].pad[k] = 1;
    return i;
}

/* x[6] → fc1[5] → relu → fc2[3] → out. */
static nc_net *mlp_net(nc_neuron_model model)
{
    nc_net *net = nc_net_new();
    int x = add_input(net, 1, (int64_t[]){6});
    int h = add_dense(net, "fc1", x, 6, 5);
    int r = add_neuron(net, "act1", h, model);
    int o = add_dense(net, "fc2", r, 5, 3);
    nc_net_add_node(net, NC_NODE_OUTPUT, "out", 1, &o);
    return infer(net) ? net : (nc_net_free(net), NULL);
}

/* x[2,8,8] → conv[4] → relu → maxpool → (maxpool) → flatten → fc → out. */
static nc_net *cnn_net(int two_pools)
{
    nc_net *net = nc_net_new();
    int x = add_input(net, 3, (int64_t[]){2, 8, 8});
    int c = add_conv(net, "conv", x, 2, 4);
    int r = add_neuron(net, "relu", c, NC_NEURON_RELU);
    int p = add_pool(net, NC_NODE_MAXPOOL, "pool", r, 2, 2);
    if (two_pools)
        p = add_pool(net, NC_NODE_MAXPOOL, "pool2", p, 2, 2);
    int f = nc_net_add_node(net, NC_NODE_FLATTEN, "flat", 1, &p);
    int64_t fin = two_pools ? 4 * 2 * 2 : 4 * 4 * 4;
    int o = add_dense(net, "fc", f, fin, 3);
    nc_net_add_node(net, NC_NODE_OUTPUT, "out", 1, &o);
    return infer(net) ? net : (nc_net_free(net), NULL);
}

/* Thresholds for every ReLU/Clip node: n per node (1 or the channels). */
static nc_thresholds *thresholds_for(const nc_net *net, float value, int per_channel)
{
    nc_thresholds *t = nc_thresholds_new(net->n_nodes);
    for (int i = 0; i < net->n_nodes; i++) {
        const nc_node *n = &net->nodes[i];
        if (n->kind != NC_NODE_NEURON)
            continue;
        int count = per_channel ? nc_node_channels(n) : 1;
        float v[64];
        for (int k = 0; k < count; k++)
            v[k] = value * (1.0f + 0.25f * k);
        nc_thresholds_set(t, i, count, v, NULL);
    }
    return t;
}

static const nc_report_entry *find_entry(const nc_net *net, const char *name, const char *op, nc_support s)
{
    for (int i = 0; i < net->report.count; i++) {
        const nc_report_entry *e = &net->report.entries[i];
        if (strcmp(e->source_name, name) == 0 && strcmp(e->op_type, op) == 0 && e->support == s)
            return e;
    }
    return NULL;
}

static nc_tensor *forward(const nc_net *net, const nc_tensor *x, nc_mode mode, int T)
{
    nc_engine *e = nc_engine_cpu_new();
    nc_error err;
    nc_tensor *out = NULL;
    nc_run_options o = {.mode = mode, .T = T};
    if (nc_engine_load(e, net, &err) != NC_OK || nc_engine_forward(e, x, &o, &out, &err) != NC_OK)
        printf("# forward: %s\n", err.message);
    nc_engine_free(e);
    return out;
}

static double max_abs_diff(const nc_tensor *a, const nc_tensor *b)
{
    if (!a || !b || nc_tensor_numel(a) != nc_tensor_numel(b))
        return INFINITY;
    double m = 0;
    for (int64_t i = 0; i < nc_tensor_numel(a); i++)
        m = fmax(m, fabs(a->data[i] - b->data[i]));
    return m;
}

/* ---- rewrites ------------------------------------------------------------------ */

static void test_relu_qcfs_if(void)
{
    nc_net *net = mlp_net(NC_NEURON_RELU);
    nc_error err;
    NC_CHECK(!nc_convert_has_qcfs(net) && nc_convert_count_relu(net) == 1, "one relu, no qcfs");
    nc_thresholds *t = thresholds_for(net, 2.0f, 0);
    NC_CHECK(nc_convert_to_qcfs(net, t, 4, &err) == NC_OK, "to qcfs: %s", err.message);
    const nc_neuron *n = &net->nodes[2].neuron;
    NC_CHECK(n->model == NC_NEURON_QCFS && n->levels == 4 && n->shift == 0.5f, "QCFS L 4 φ 0.5");
    NC_CHECK(n->n_threshold == 1 && n->threshold[0] == 2.0f, "λ = θ");
    NC_CHECK(nc_convert_has_qcfs(net) && nc_convert_count_relu(net) == 0, "has qcfs");
    NC_CHECK(find_entry(net, "act1", "Relu", NC_SUPPORT_CONVERTED), "report entry for the relu");
    NC_CHECK(nc_convert_to_qcfs(net, NULL, 4, &err) == NC_OK, "a QCFS net needs no thresholds");

    nc_snn_options o = nc_snn_options_default();
    o.compare = NC_FIRE_GT;
    NC_CHECK(nc_convert_to_snn(net, &o, &err) == NC_OK, "to snn: %s", err.message);
    NC_CHECK(n->model == NC_NEURON_IF && n->threshold[0] == 2.0f && n->levels == 4, "IF θ = λ, L kept");
    NC_CHECK(n->v0_fraction == 0.5f && n->reset == NC_RESET_SUBTRACT && n->compare == NC_FIRE_GT, "IF options");
    const nc_report_entry *e = find_entry(net, "act1", "QCFS", NC_SUPPORT_CONVERTED);
    NC_CHECK(e && strstr(e->reason, "IF"), "report: %s", e ? e->reason : "none");
    NC_CHECK(infer(net), "shapes still fit");
    char buf[2048];
    print_comment(nc_convert_summary_text(net, "p99.9", buf, sizeof buf));
    NC_CHECK(strstr(buf, "act1") && strstr(buf, "if"), "summary");
    nc_convert_layer row;
    NC_CHECK(nc_convert_summary(net, &row, 1) == 1 && row.theta_max == 2.0f && row.levels == 4, "summary row");
    nc_thresholds_free(t);
    nc_net_free(net);
}

static void test_channel_thresholds_and_clip(void)
{
    nc_net *net = mlp_net(NC_NEURON_CLIP);
    net->nodes[2].neuron.clip_min = 0;
    net->nodes[2].neuron.clip_max = 2.2f;
    nc_thresholds *t = thresholds_for(net, 1.0f, 1);
    t->count[2] = 0; /* a missing threshold */
    nc_error err;
    NC_CHECK(nc_convert_to_qcfs(net, t, 8, &err) == NC_ERR_ARGUMENT && strstr(err.message, "calibration"), "%s",
             err.message);
    nc_thresholds_free(t);
    t = thresholds_for(net, 1.0f, 1);
    t->count[2] = 3; /* 3 values for 5 channels */
    NC_CHECK(nc_convert_to_qcfs(net, t, 8, &err) == NC_ERR_SHAPE, "%s", err.message);
    nc_thresholds_free(t);

    t = nc_thresholds_new(net->n_nodes);
    float v[5] = {1, 2, 3, 0.5f, 2.2f};
    nc_thresholds_set(t, 2, 5, v, NULL);
    NC_CHECK(nc_convert_to_qcfs(net, t, 8, &err) == NC_OK, "clip(0, 2.2): %s", err.message);
    const nc_neuron *n = &net->nodes[2].neuron;
    NC_CHECK(n->model == NC_NEURON_QCFS && n->n_threshold == 5, "channel-wise QCFS");
    NC_CHECK(n->threshold[0] == 1 && n->threshold[1] == 2 && n->threshold[2] == 2.2f && n->threshold[3] == 0.5f,
             "λ = min(θ, c)");
    const nc_report_entry *e = find_entry(net, "act1", "Clip", NC_SUPPORT_CONVERTED);
    NC_CHECK(e && strstr(e->reason, "min(calibrated, 2.2)") && strstr(e->reason, "1 of 5"), "report: %s",
             e ? e->reason : "none");
    nc_thresholds_free(t);
    nc_net_free(net);

    net = mlp_net(NC_NEURON_CLIP); /* Clip(−1, 1): not ReLU-like */
    net->nodes[2].neuron.clip_min = -1;
    net->nodes[2].neuron.clip_max = 1;
    t = thresholds_for(net, 1.0f, 0);
    NC_CHECK(nc_convert_to_qcfs(net, t, 8, &err) == NC_ERR_UNSUPPORTED && strstr(err.message, "act1"), "%s",
             err.message);
    NC_CHECK(net->nodes[2].neuron.model == NC_NEURON_CLIP, "unchanged on failure");
    NC_CHECK(nc_convert_to_snn(net, NULL, &err) == NC_ERR_ARGUMENT && strstr(err.message, "QCFS"), "%s",
             err.message);
    nc_thresholds_free(t);
    nc_net_free(net);
}

static void test_no_relu(void)
{
    nc_net *net = nc_net_new();
    int x = add_input(net, 1, (int64_t[]){6});
    int h = add_dense(net, "fc1", x, 6, 3);
    nc_net_add_node(net, NC_NODE_OUTPUT, "out", 1, &h);
    snprintf(net->source_path, sizeof net->source_path, "linear.onnx");
    infer(net);
    nc_error err;
    nc_thresholds *t = nc_thresholds_new(net->n_nodes);
    NC_CHECK(nc_convert_to_qcfs(net, t, 8, &err) == NC_ERR_UNSUPPORTED, "fails");
    NC_CHECK(strstr(err.message, "linear.onnx has no ReLU activation: nothing to convert to spiking neurons"),
             "message: %s", err.message);
    NC_CHECK(nc_convert_to_snn(net, NULL, &err) == NC_ERR_UNSUPPORTED, "snn too: %s", err.message);
    nc_thresholds_free(t);
    nc_net_free(net);
}

/* ---- MaxPool ----------------------------------------------------------------- */

static void test_maxpool_pre_spike(void)
{
    for (int two = 0; two < 2; two++) {
        nc_net *net = cnn_net(two), *swapped = nc_net_clone(net);
        nc_error err;
        NC_CHECK(nc_convert_prepare(swapped, NC_MAXPOOL_PRE_SPIKE, &err) == NC_OK, "prepare: %s", err.message);
        /* conv(1) relu(2) pool(3) [pool2(4)] → conv(1) pool(2) [pool2(3)] relu(last) */
        int relu = two ? 4 : 3;
        NC_CHECK(swapped->nodes[2].kind == NC_NODE_MAXPOOL && swapped->nodes[2].inputs[0] == 1, "pool reads conv");
        NC_CHECK(swapped->nodes[relu].kind == NC_NODE_NEURON && swapped->nodes[relu].inputs[0] == relu - 1,
                 "relu after the pools");
        NC_CHECK(swapped->nodes[2].maxpool_strategy == NC_MAXPOOL_PRE_SPIKE, "pre-spike");
        NC_CHECK(swapped->nodes[relu].ndim == 3 && swapped->nodes[relu].shape[1] == (two ? 2 : 4), "relu shape");
        const nc_report_entry *e = find_entry(swapped, "pool", "MaxPool", NC_SUPPORT_CONVERTED);
        NC_CHECK(e && strstr(e->reason, "moved before relu 'relu'"), "report: %s", e ? e->reason : "none");
        if (two)
            NC_CHECK(find_entry(swapped, "pool2", "MaxPool", NC_SUPPORT_CONVERTED), "second pool swapped too");
        int64_t xs[4] = {5, 2, 8, 8};
        nc_tensor *x = random_tensor(4, xs, 1.0f);
        nc_tensor *a = forward(net, x, NC_MODE_ANN, 1), *b = forward(swapped, x, NC_MODE_ANN, 1);
        double d = max_abs_diff(a, b);
        NC_CHECK(d == 0, "ANN outputs identical after the swap (max diff %g)", d);
        nc_tensor_free(a);
        nc_tensor_free(b);
        nc_tensor_free(x);
        nc_net_free(swapped);
        nc_net_free(net);
    }
}

static void test_maxpool_avg_and_gated(void)
{
    nc_net *net = cnn_net(0);
    nc_error err;
    NC_CHECK(nc_convert_prepare(net, NC_MAXPOOL_AVG, &err) == NC_OK, "avg: %s", err.message);
    NC_CHECK(net->nodes[3].kind == NC_NODE_AVGPOOL && net->nodes[3].maxpool_strategy == NC_MAXPOOL_AVG, "avgpool");
    const nc_report_entry *e = find_entry(net, "pool", "MaxPool", NC_SUPPORT_APPROXIMATED);
    NC_CHECK(e && strstr(e->reason, "MaxPool replaced by AvgPool: changes the function; accuracy of the ANN may drop"),
             "report: %s", e ? e->reason : "none");
    nc_net_free(net);

    net = cnn_net(0);
    NC_CHECK(nc_convert_prepare(net, NC_MAXPOOL_GATED, &err) == NC_OK, "gated: %s", err.message);
    NC_CHECK(net->nodes[3].kind == NC_NODE_MAXPOOL && net->nodes[3].maxpool_strategy == NC_MAXPOOL_GATED &&
                 net->nodes[2].kind == NC_NODE_NEURON,
             "kept after the neuron, gated");
    e = find_entry(net, "pool", "MaxPool", NC_SUPPORT_APPROXIMATED);
    NC_CHECK(e && strstr(e->reason, "gated"), "report: %s", e ? e->reason : "none");
    nc_net_free(net);

    /* relu feeds a pool and an add: it cannot move, pre-spike falls back to gated */
    net = nc_net_new();
    int64_t shape[3] = {2, 4, 4};
    int x = add_input(net, 3, shape);
    int c = add_conv(net, "conv", x, 2, 2);
    int r = add_neuron(net, "relu", c, NC_NEURON_RELU);
    int p = add_pool(net, NC_NODE_MAXPOOL, "pool", r, 2, 2);
    int q = add_pool(net, NC_NODE_AVGPOOL, "avg", r, 2, 2);
    int in2[2] = {p, q};
    int a = nc_net_add_node(net, NC_NODE_ADD, "add", 2, in2);
    int m = add_pool(net, NC_NODE_MAXPOOL, "pool_on_conv", x, 2, 2); /* on the analog input: exact */
    (void)m;
    nc_net_add_node(net, NC_NODE_OUTPUT, "out", 1, &a);
    NC_CHECK(infer(net), "shapes");
    NC_CHECK(nc_convert_prepare(net, NC_MAXPOOL_PRE_SPIKE, &err) == NC_OK, "prepare: %s", err.message);
    NC_CHECK(net->nodes[p].maxpool_strategy == NC_MAXPOOL_GATED && net->nodes[r].kind == NC_NODE_NEURON,
             "not swapped, gated");
    e = find_entry(net, "pool", "MaxPool", NC_SUPPORT_APPROXIMATED);
    NC_CHECK(e && strstr(e->reason, "also feeds other nodes"), "report: %s", e ? e->reason : "none");
    NC_CHECK(net->nodes[m].maxpool_strategy == NC_MAXPOOL_PRE_SPIKE &&
                 find_entry(net, "pool_on_conv", "MaxPool", NC_SUPPORT_CONVERTED),
             "a pool on currents is exact");
    nc_net_free(net);
}

/* ---- engine: QCFS formula, SNN, calibration ------------------------------------- */

static float qcfs(float z, float lambda, int L)
{
    float k = floorf(z * (float)L / lambda + 0.5f);
    k = k < 0 ? 0 : k > (float)L ? (float)L : k;
    return lambda * k / (float)L;
}

/* fc2(QCFS(fc1(x))) by hand, for N samples. */
static void hand_forward(const nc_net *net, const float *x, int N, float *out)
{
    const nc_node *f1 = &net->nodes[1], *f2 = &net->nodes[3];
    const nc_neuron *n = &net->nodes[2].neuron;
    for (int s = 0; s < N; s++) {
        float h[5];
        for (int j = 0; j < 5; j++) {
            float z = f1->bias->data[j];
            for (int i = 0; i < 6; i++)
                z += f1->weight->data[j * 6 + i] * x[s * 6 + i];
            h[j] = qcfs(z, n->threshold[n->n_threshold == 1 ? 0 : j], n->levels);
        }
        for (int k = 0; k < 3; k++) {
            float o = f2->bias->data[k];
            for (int j = 0; j < 5; j++)
                o += f2->weight->data[k * 5 + j] * h[j];
            out[s * 3 + k] = o;
        }
    }
}

static void test_qcfs_and_snn_forward(void)
{
    nc_net *net = mlp_net(NC_NEURON_RELU);
    nc_thresholds *t = thresholds_for(net, 1.5f, 1); /* λ per channel 1.5 … 3 */
    nc_error err;
    NC_CHECK(nc_convert_to_qcfs(net, t, 4, &err) == NC_OK, "%s", err.message);
    int N = 64;
    int64_t xs[2] = {N, 6};
    nc_tensor *x = random_tensor(2, xs, 1.5f);
    nc_tensor *q = forward(net, x, NC_MODE_QCFS, 1);
    float want[64 * 3];
    hand_forward(net, x->data, N, want);
    double d = 0;
    for (int i = 0; q && i < N * 3; i++)
        d = fmax(d, fabs(q->data[i] - want[i]));
    NC_CHECK(q && d < 1e-5, "QCFS mode = hand QCFS formula (max diff %g)", d);

    /* One hidden layer, constant input, T = L, v0 = θ/2: the IF's spike count
     * is exactly the QCFS level, so the mean output over T steps is equal. */
    NC_CHECK(nc_convert_to_snn(net, NULL, &err) == NC_OK, "%s", err.message);
    nc_tensor *s = forward(net, x, NC_MODE_SNN, 4);
    d = INFINITY;
    if (s && s->ndim == 3 && s->shape[0] == 4) {
        d = 0;
        for (int i = 0; i < N * 3; i++) {
            double mean = 0;
            for (int k = 0; k < 4; k++)
                mean += s->data[k * N * 3 + i] / 4.0;
            d = fmax(d, fabs(mean - want[i]));
        }
    }
    NC_CHECK(d < 1e-4, "SNN mean over T = L steps = QCFS (max diff %g)", d);
    nc_tensor *q2 = forward(net, x, NC_MODE_QCFS, 1);
    NC_CHECK(max_abs_diff(q, q2) == 0, "the IF net still evaluates its QCFS function");
    nc_tensor_free(q2);
    nc_tensor_free(s);
    nc_tensor_free(q);
    nc_tensor_free(x);
    nc_thresholds_free(t);
    nc_net_free(net);
}

/* A dataset of n random [2, 8, 8] images, held in memory. */
static nc_dataset *random_dataset(int64_t n)
{
    nc_dataset *ds = calloc(1, sizeof *ds);
    ds->count = n;
    ds->channels = 2;
    ds->height = ds->width = 8;
    ds->images = malloc(sizeof(float) * (size_t)n * 128);
    ds->labels = calloc((size_t)n, sizeof(int32_t));
    ds->num_classes = 1;
    snprintf(ds->path, sizeof ds->path, "random");
    for (int64_t i = 0; i < n * 128; i++)
        ds->images[i] = uniform_pm();
    return ds;
}

static int cancel_after(void *user, const nc_progress *p)
{
    int *calls = user;
    (*calls)++;
    return strcmp(p->stage, "calibrate") == 0 && p->done >= 60;
}

typedef struct node_max {
    int node;
    float max;
} node_max;

static void observe_max(void *user, int node, const float *data, int64_t rows, int64_t per_row)
{
    node_max *m = user;
    for (int64_t i = 0; node == m->node && i < rows * per_row; i++)
        m->max = fmaxf(m->max, data[i]);
}

static void test_calibrate_engine(void)
{
    nc_net *net = cnn_net(0);
    nc_error err;
    nc_convert_prepare(net, NC_MAXPOOL_PRE_SPIKE, &err);
    nc_dataset *ds = random_dataset(90);
    nc_engine *e = nc_engine_cpu_new();
    nc_calib_stats *stats = NULL;
    nc_calibrate_options o = {.n_images = 1000, .batch_size = 32};
    NC_CHECK(nc_calibrate(e, net, ds, &o, &stats, &err) == NC_OK, "calibrate: %s", err.message);
    /* The relu (node 3 after the swap): its max over a plain ANN forward. */
    int64_t xs[4] = {90, 2, 8, 8};
    nc_tensor *x = nc_tensor_new(4, xs), *y = NULL;
    memcpy(x->data, ds->images, sizeof(float) * 90 * 128);
    node_max want = {3, 0};
    nc_observer obs = {observe_max, NULL, &want};
    nc_run_options ro = {.mode = NC_MODE_ANN, .observer = &obs};
    NC_CHECK(nc_engine_forward(e, x, &ro, &y, &err) == NC_OK, "%s", err.message);
    nc_act_stats st = {0};
    NC_CHECK(stats && nc_calib_layer_count(stats) == 1 && nc_calib_layer_node(stats, 0) == 3, "one layer at node 3");
    /* Batches of 32 vs one of 90: the GEMM may block differently, so allow rounding. */
    NC_CHECK(stats && nc_calib_get_stats(stats, 0, -1, &st, NULL) == NC_OK && want.max > 0 &&
                 fabsf(st.max - want.max) <= 1e-5f * want.max,
             "layer max %.9g = ANN max %.9g", st.max, want.max);
    NC_CHECK(st.count == 90 * 4 * 4 * 4, "every value seen once per pass (%lld)", (long long)st.count);
    nc_thresholds *t = NULL;
    NC_CHECK(nc_calibrate_thresholds(stats, net, NC_CALIB_MMSE, 1, 8, 0.5f, &t, &err) == NC_OK, "%s", err.message);
    NC_CHECK(t && t->count[3] == 4, "4 channel thresholds");
    NC_CHECK(nc_convert_to_qcfs(net, t, 8, &err) == NC_OK, "%s", err.message);
    nc_thresholds_free(t);
    nc_calib_free(stats);

    int calls = 0;
    o.progress = cancel_after;
    o.progress_user = &calls;
    NC_CHECK(nc_calibrate(e, net, ds, &o, &stats, &err) == NC_ERR_CANCELLED && !stats, "cancelled: %s",
             err.message);
    NC_CHECK(calls == 2, "stopped at the second batch (%d calls)", calls);
    nc_tensor_free(y);
    nc_tensor_free(x);
    nc_engine_free(e);
    nc_dataset_free(ds);
    nc_net_free(net);
}

/* ---- fixture models on Fashion-MNIST ------------------------------------------ */

static double snn_accuracy(nc_engine *e, const nc_dataset *ds, int T, int64_t n)
{
    int64_t correct = 0, bs = 100;
    int64_t xs[4] = {bs, ds->channels, ds->height, ds->width};
    nc_tensor *x = nc_tensor_new(4, xs);
    int32_t labels[100];
    nc_run_options o = {.mode = NC_MODE_SNN, .T = T};
    for (int64_t first = 0; first < n; first += bs) {
        nc_dataset_batch(ds, first, bs, x->data, labels);
        nc_tensor *out = NULL;
        nc_error err;
        if (nc_engine_forward(e, x, &o, &out, &err) != NC_OK) {
            printf("# snn: %s\n", err.message);
            break;
        }
        correct += snn_correct(out, T, bs, labels);
        nc_tensor_free(out);
    }
    nc_tensor_free(x);
    return (double)correct / (double)n;
}

/* Calibrates on 500 train images, converts (L = 8) and compares the QCFS-ANN
 * and the SNN at T = 32 with the ANN on 1000 test images. */
static void check_fixture(const char *name, const nc_dataset *train, const nc_dataset *test)
{
    char rel[256], path[1024];
    snprintf(rel, sizeof rel, "tests/fixtures/models/%s.onnx", name);
    nc_test_path(rel, path, sizeof path);
    char test_name[128];
    snprintf(test_name, sizeof test_name, "fixture %s: calibrate, convert, QCFS and SNN accuracy", name);
    if (access(path, R_OK) != 0 || !train || !test) {
        nc_test_report(test_name, 0, !train || !test ? "Fashion-MNIST not installed" : "fixture model not there yet");
        return;
    }
    nc_error err;
    nc_net *net = NULL;
    nc_engine *e = nc_engine_cpu_new();
    int failed = 1;
    nc_eval_result ann, q;
    nc_calib_stats *stats = NULL;
    nc_thresholds *t = NULL;
    nc_calibrate_options o = {.n_images = 500, .batch_size = 100};
    if (nc_onnx_load(path, NULL, &net, &err) != NC_OK || nc_convert_prepare(net, NC_MAXPOOL_PRE_SPIKE, &err) ||
        nc_engine_load(e, net, &err) || nc_evaluate(e, test, 100, NC_MODE_ANN, NULL, NULL, &ann, &err) ||
        nc_calibrate(e, net, train, &o, &stats, &err) ||
        nc_calibrate_thresholds(stats, net, NC_CALIB_P99_9, 0, 8, 0.5f, &t, &err)) {
        printf("# %s: %s\n", name, err.message);
        goto done;
    }
    if (nc_convert_to_qcfs(net, t, 8, &err) || nc_engine_load(e, net, &err) ||
        nc_evaluate(e, test, 100, NC_MODE_QCFS, NULL, NULL, &q, &err) || nc_convert_to_snn(net, NULL, &err) ||
        nc_engine_load(e, net, &err)) {
        printf("# %s: %s\n", name, err.message);
        goto done;
    }
    char buf[4096];
    print_comment(nc_convert_summary_text(net, "p99.9 layer-wise", buf, sizeof buf));
    printf("# %s: ANN %.2f%%, QCFS (p99.9, L=8) %.2f%% on %lld test images\n", name, 100 * ann.accuracy,
           100 * q.accuracy, (long long)q.images);
    /* IF neurons, v0 = θ/2, summed logits: at T = 32 the SNN is within 1.5
     * points of the ANN (the average over T steps approaches the clipped
     * ReLU; QCFS with L = 8 quantises more coarsely and may lose a few points
     * on deep nets without fine-tuning, so it gets a wider margin). */
    double snn32 = snn_accuracy(e, test, 32, test->count);
    printf("# %s: SNN T=32 %.2f%%\n", name, 100 * snn32);
    failed = !(q.accuracy > ann.accuracy - 0.06) || !(snn32 > ann.accuracy - 0.015);
done:
    nc_test_report(test_name, failed, NULL);
    nc_thresholds_free(t);
    nc_calib_free(stats);
    nc_engine_free(e);
    nc_net_free(net);
}

static void run_fixtures(void)
{
    static const char *const models[] = {"cnn_maxpool", "vgg_bn"};
    check_fmnist_fixtures(models, 2, 1000, check_fixture);
}

int main(void)
{
    NC_RUN(test_relu_qcfs_if);
    NC_RUN(test_channel_thresholds_and_clip);
    NC_RUN(test_no_relu);
    NC_RUN(test_maxpool_pre_spike);
    NC_RUN(test_maxpool_avg_and_gated);
    NC_RUN(test_qcfs_and_snn_forward);
    NC_RUN(test_calibrate_engine);
    run_fixtures();
    return nc_test_done();
}
