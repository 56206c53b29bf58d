/* test_loihi.c — the Loihi-2-style fixed-point engine and its quantisation:
 * the gain and exponent rules, hand-computed integer traces of one neuron and
 * of a two-layer net (24-bit wrap, saturation, each reset, each comparison,
 * the synaptic delay off, compensated and raw, graded spikes), bad input, the
 * observers and records, and the float SNN against the integer one on the
 * fixture models (Fashion-MNIST; skipped when it is not installed).
 *
 * The hand-built nets are scaled so that the integers are round: with a
 * weight equal to the threshold it drives (W̃ = 1), vth_target = 127 and no
 * input fraction bits, the quantiser picks weight_exp −1, vth 127 and weight
 * 254, so an input x adds u = x·254·2^−1·64 = 8128·x, and the threshold is
 * 127 << 6 = 8128: one threshold per unit of input. */
#include "nc_test.h"
#include "nc_test_util.h"

#include <limits.h>
#include <unistd.h>

#include "../core/nc_h5util.h"
#include "../core/nc_loihi.h"
#include "../core/nc_onnx.h"
#include "../sim/nc_engine_loihi.h"
#include "../sim/nc_engine_registry.h"
#include "../sim/nc_evaluate.h"
#include "../sim/nc_pipeline.h"
#include "../sim/nc_simulate.h"

/* ---- building nets --------------------------------------------------------------- */

static int add_dense1(nc_net *net, const char *name, int in, int64_t fin, int64_t fout, const float *w,
                      const float *b)
{
    int i = add1(net, NC_NODE_DENSE, name, in);
    net->nodes[i].weight = nc_tensor_new2(fout, fin);
    memcpy(net->nodes[i].weight->data, w, (size_t)(fin * fout) * sizeof(float));
    if (b) {
        net->nodes[i].bias = nc_tensor_new1(fout);
        memcpy(net->nodes[i].bias->data, b, (size_t)fout * sizeof(float));
    }
    return i;
}

static int add_if(nc_net *net, const char *name, int in, float theta, float v0)
{
    int i = add1(net, NC_NODE_NEURON, name, in);
    nc_neuron *nr = &net->nodes[i].neuron;
    nr->model = NC_NEURON_IF;
    nc_neuron_set_threshold(nr, 1, &theta, NULL);
    nr->v0_fraction = v0;
    return i;
}

/* x[1] → fc1 (W = θ1, bias b1) → if1 (θ1, v0) → fc2 (W = θ2/θ1) → if2 (θ2) →
 * fc3 (W = 1) → out.  layers = 1: x → fc1 → if1 → fc3 → out. */
static nc_net *chain_net(int layers, float theta1, float b1_thresholds, float v0)
{
    nc_net *net = nc_net_new();
    int x = nc_net_add_node(net, NC_NODE_INPUT, "x", 0, NULL);
    net->nodes[x].ndim = 1;
    net->nodes[x].shape[0] = 1;
    float w1 = theta1, b1 = b1_thresholds * theta1;
    int h = add_dense1(net, "fc1", x, 1, 1, &w1, &b1);
    int s = add_if(net, "if1", h, theta1, v0);
    if (layers == 2) {
        float theta2 = 3.0f, w2 = theta2 / theta1;
        h = add_dense1(net, "fc2", s, 1, 1, &w2, NULL);
        s = add_if(net, "if2", h, theta2, v0);
    }
    float w3 = 1.0f;
    int o = add_dense1(net, "fc3", s, 1, 1, &w3, NULL);
    add1(net, NC_NODE_OUTPUT, "out", o);
    return infer(net) ? net : (nc_net_free(net), NULL);
}

static nc_loihi_options round_options(void)
{
    nc_loihi_options o = nc_loihi_options_default();
    o.quant.vth_target = 127;
    o.quant.input_frac_bits = 0;
    return o;
}

static nc_engine *loihi_for(const nc_net *net, const nc_loihi_options *o)
{
    nc_engine *e = nc_engine_loihi_new();
    nc_error err = {0};
    if (!e || nc_engine_loihi_set_options(e, o, &err) != NC_OK || nc_engine_load(e, net, &err) != NC_OK) {
        printf("# loihi engine: %s\n", err.message);
        nc_engine_free(e);
        return NULL;
    }
    return e;
}

/* ---- an observer that keeps every node's values ---------------------------------- */

typedef struct capture {
    int n_nodes;
    float *data[32];
    int64_t rows[32], per_row[32];
    float *input[32];
    int64_t spikes[32];      /* non-zero observed values of IF nodes */
} capture;

static void cap_store(float **slot, int64_t *rows, int64_t *per, const float *d, int64_t r, int64_t p)
{
    free(*slot);
    *slot = malloc((size_t)(r * p) * sizeof(float));
    memcpy(*slot, d, (size_t)(r * p) * sizeof(float));
    if (rows)
        *rows = r, *per = p;
}

static void cap_observe(void *user, int node, const float *d, int64_t rows, int64_t per_row)
{
    capture *c = user;
    if (node < 32) {
        cap_store(&c->data[node], &c->rows[node], &c->per_row[node], d, rows, per_row);
        for (int64_t k = 0; k < rows * per_row; k++)
            c->spikes[node] += d[k] != 0;
    }
}

static void cap_observe_input(void *user, int node, const float *d, int64_t rows, int64_t per_row)
{
    capture *c = user;
    if (node < 32)
        cap_store(&c->input[node], NULL, NULL, d, rows, per_row);
}

static void cap_free(capture *c)
{
    for (int i = 0; i < 32; i++)
        free(c->data[i]), free(c->input[i]);
    memset(c, 0, sizeof *c);
}

/* Runs one sample for T steps: a constant input x, or (seq) T values. */
static nc_tensor *run_snn(nc_engine *e, int T, const float *x, int seq, capture *cap, nc_error *err)
{
    int64_t shape[3] = {T, 1, 1};
    nc_tensor *in = seq ? nc_tensor_new(3, shape) : nc_tensor_new2(1, 1);
    memcpy(in->data, x, (size_t)(seq ? T : 1) * sizeof(float));
    nc_observer ob = {cap_observe, cap_observe_input, cap};
    nc_run_options o = {.mode = NC_MODE_SNN, .T = T, .observer = cap ? &ob : NULL};
    nc_tensor *out = NULL;
    if (nc_engine_forward(e, in, &o, &out, err) != NC_OK)
        out = NULL;
    nc_tensor_free(in);
    return out;
}

/* Spikes (0/1 per step) of node i in the capture, as a string "0101…". */
static const char *train_of(const capture *c, int i, char *buf)
{
    int64_t n = c->data[i] ? c->rows[i] : 0;
    for (int64_t t = 0; t < n && t < 63; t++)
        buf[t] = c->data[i][t] != 0 ? '1' : '0';
    buf[n < 63 ? n : 63] = 0;
    return buf;
}

/* ---- quantisation rules ------------------------------------------------------------- */

/* chain_net(2, 2, 0.25, 0.5) (into *net) quantised for a threshold
 * mantissa of 127; NULL (reported) when it is not. */
static nc_loihi_net *quantised_chain(nc_net **net)
{
    *net = chain_net(2, 2.0f, 0.25f, 0.5f);
    nc_loihi_quant_options qo = {127, 0};
    nc_loihi_net *q = NULL;
    nc_error err = {0};
    NC_CHECK(*net && nc_loihi_quantise(*net, &qo, &q, &err) == NC_OK, "quantise: %s", err.message);
    return q;
}

static void test_quantise_rules(void)
{
    nc_net *net;
    nc_loihi_net *q = quantised_chain(&net);
    nc_error err = {0};
    if (!q) {
        nc_net_free(net);
        return;
    }
    NC_CHECK(q->n_layers == 3 && q->max_depth == 2, "3 layers, output at depth 2: %d, %d", q->n_layers, q->max_depth);
    const nc_loihi_layer *L = &q->layers[0];
    NC_CHECK(L->weight_exp == -1 && L->vth_mant == 127 && L->weight[0] == 254, "W̃ = 1: exp %d vth %d w %d",
             L->weight_exp, L->vth_mant, L->weight[0]);
    /* b̃ = 0.25 → 0.25·127·64 = 2032 fits 13 bits: exponent 0 */
    NC_CHECK(L->n_bias == 1 && L->bias_exp == 0 && L->bias_mant[0] == 2032, "bias %d << %d", L->bias_mant[0],
             L->bias_exp);
    NC_CHECK(L->v0 == 4064 && L->v0_error == 0, "v0 = 0.5·8128 = %d", L->v0);
    NC_CHECK(L->weights.rms_rel == 0 && L->thresholds.max_abs == 0 && L->biases.max_abs == 0, "exact");
    NC_CHECK(q->layers[1].weight_exp == -1 && q->layers[1].weight[0] == 254 && q->layers[1].depth == 1, "layer 2");
    /* the output: θ_out = |W3|·θ2/16, W̃ = 16: exp 3, vth 127, w 254 */
    const nc_loihi_layer *O = &q->layers[2];
    NC_CHECK(O->weight_exp == 3 && O->vth_mant == 127 && O->weight[0] == 254, "output exp %d vth %d w %d",
             O->weight_exp, O->vth_mant, O->weight[0]);
    NC_CHECK(fabs(O->theta_out - 3.0 / 16) < 1e-12, "θ_out %g", O->theta_out);
    char buf[8192];
    nc_loihi_report_text(q, buf, sizeof buf);
    NC_CHECK(strstr(buf, "fc1") && strstr(buf, "if2") && strstr(buf, "clipped: 0"), "%s", buf);
    nc_loihi_net_free(q);

    /* default target 4096: vt ≤ vth < 2·vt, the largest weight ±254 (or −256) */
    float w[6] = {0.7f, -0.31f, 0.05f, 0.002f, -0.6f, 0.3f}, th = 1.3f;
    nc_net *n2 = nc_net_new();
    int x = nc_net_add_node(n2, NC_NODE_INPUT, "x", 0, NULL);
    n2->nodes[x].ndim = 1, n2->nodes[x].shape[0] = 3;
    int d = add_dense1(n2, "fc", x, 3, 2, w, NULL);
    int s = add_if(n2, "if", d, th, 0.5f);
    float one[2] = {1, 1};
    int o = add_dense1(n2, "head", s, 2, 1, one, NULL);
    add1(n2, NC_NODE_OUTPUT, "out", o);
    infer(n2);
    NC_CHECK(nc_loihi_quantise(n2, NULL, &q, &err) == NC_OK, "%s", err.message);
    if (q) {
        L = &q->layers[0];
        int maxw = 0;
        for (int k = 0; k < 6; k++)
            maxw = abs(L->weight[k]) > maxw ? abs(L->weight[k]) : maxw;
        double m = (double)0.7f / (double)1.3f;
        int e = (int)ceil(log2(m * 4096 / 254));
        NC_CHECK(L->weight_exp == e && L->vth_mant == (int)floor(254 * ldexp(1, e) / m), "exp %d vth %d", L->weight_exp,
                 L->vth_mant);
        NC_CHECK(L->vth_mant >= 4096 && L->vth_mant < 8192 && maxw == 254, "vth %d, max |w| %d", L->vth_mant, maxw);
        NC_CHECK(L->weight[3] == 0 && L->weights.zeroed == 1, "0.002 rounds to 0 and is counted (%lld)",
                 (long long)L->weights.zeroed);
        for (int k = 0; k < 6; k++)
            NC_CHECK(L->weight[k] % 2 == 0, "even weights (8 significant bits)");
        NC_CHECK(L->weights.rms_rel > 0 && L->weights.rms_rel < 0.01, "8-bit error %g", L->weights.rms_rel);
        printf("# fc: exp %d vth %d weights %d %d %d %d %d %d, rms rel %.4f\n", L->weight_exp, L->vth_mant,
               L->weight[0], L->weight[1], L->weight[2], L->weight[3], L->weight[4], L->weight[5], L->weights.rms_rel);
        nc_loihi_net_free(q);
    }
    nc_net_free(n2);
    nc_net_free(net);
}

/* Weights that no exponent can represent; a threshold that is not finite;
 * a ReLU net; a structure the chip cannot place. */
static void test_bad_networks(void)
{
    nc_error err = {0};
    nc_loihi_net *q = NULL;
    nc_net *net = chain_net(2, 2.0f, 0, 0.5f);
    net->nodes[3].weight->data[0] = 1e6f; /* fc2: 1e6·θ1/θ2 ≫ 254·2^7 */
    NC_CHECK(nc_loihi_quantise(net, NULL, &q, &err) == NC_ERR_UNSUPPORTED && !q, "too large");
    NC_CHECK(strstr(err.message, "'fc2'") && strstr(err.message, "cannot be represented") &&
             strstr(err.message, "32512"), "%s", err.message);
    net->nodes[3].weight->data[0] = 1e-12f; /* rounds to 0 at exponent −8 and vth 131071 */
    NC_CHECK(nc_loihi_quantise(net, NULL, &q, &err) == NC_ERR_UNSUPPORTED, "too small");
    NC_CHECK(strstr(err.message, "'fc2'") && strstr(err.message, "rounds to 0"), "%s", err.message);
    net->nodes[3].weight->data[0] = NAN;
    NC_CHECK(nc_loihi_quantise(net, NULL, &q, &err) == NC_ERR_UNSUPPORTED && strstr(err.message, "finite"), "%s",
             err.message);
    net->nodes[3].weight->data[0] = 1.5f;
    net->nodes[4].neuron.threshold[0] = 0;
    NC_CHECK(nc_loihi_quantise(net, NULL, &q, &err) == NC_ERR_UNSUPPORTED && strstr(err.message, "'if2'"), "%s",
             err.message);
    net->nodes[4].neuron.threshold[0] = 3;
    /* the engine refuses to load it too, naming the node */
    nc_engine *e = nc_engine_loihi_new();
    net->nodes[3].weight->data[0] = 1e6f;
    NC_CHECK(nc_engine_load(e, net, &err) == NC_ERR_UNSUPPORTED && strstr(err.message, "fc2"), "%s", err.message);
    net->nodes[3].weight->data[0] = 1.5f;
    net->nodes[2].neuron.model = NC_NEURON_RELU;
    net->nodes[4].neuron.model = NC_NEURON_RELU;
    NC_CHECK(nc_loihi_quantise(net, NULL, &q, &err) == NC_ERR_UNSUPPORTED && strstr(err.message, "convert"), "%s",
             err.message);
    /* an ANN loads (ANN mode runs on floats) but SNN mode says convert first */
    NC_CHECK(nc_engine_load(e, net, &err) == NC_OK, "%s", err.message);
    nc_tensor *x = nc_tensor_new2(1, 1), *out = NULL;
    nc_run_options snn = {.mode = NC_MODE_SNN, .T = 4};
    NC_CHECK(nc_engine_forward(e, x, &snn, &out, &err) == NC_ERR_UNSUPPORTED && strstr(err.message, "convert"), "%s",
             err.message);
    nc_run_options ann = {.mode = NC_MODE_ANN};
    NC_CHECK(nc_engine_forward(e, x, &ann, &out, &err) == NC_OK && out, "ANN mode: %s", err.message);
    nc_tensor_free(out);
    nc_tensor_free(x);
    nc_engine_free(e);
    nc_net_free(net);

    /* a residual add: supports() names it */
    nc_net *r = nc_net_new();
    int in = nc_net_add_node(r, NC_NODE_INPUT, "x", 0, NULL);
    r->nodes[in].ndim = 1, r->nodes[in].shape[0] = 1;
    float w = 1;
    int a = add_dense1(r, "a", in, 1, 1, &w, NULL);
    int b = add_dense1(r, "b", in, 1, 1, &w, NULL);
    int both[2] = {a, b};
    int sum = nc_net_add_node(r, NC_NODE_ADD, "sum", 2, both);
    add1(r, NC_NODE_OUTPUT, "out", sum);
    infer(r);
    e = nc_engine_loihi_new();
    NC_CHECK(nc_engine_check(e, r, &err) == NC_ERR_UNSUPPORTED && strstr(err.message, "'x'"), "branch: %s",
             err.message);
    char why[256];
    NC_CHECK(!e->ops->supports(e, r, sum, why, sizeof why) && strstr(why, "add"), "%s", why);
    nc_engine_free(e);
    nc_net_free(r);
}

/* T + the synaptic delay must fit the step counter. */
static void test_step_overflow(void)
{
    nc_net *net = chain_net(2, 2.0f, 0, 0.5f);
    nc_loihi_options o = round_options();
    nc_engine *e = loihi_for(net, &o);
    nc_error err = {0};
    nc_tensor *x = nc_tensor_new2(1, 1), *out = NULL;
    nc_run_options r = {.mode = NC_MODE_SNN, .T = INT_MAX - 1};
    NC_CHECK(e && nc_engine_forward(e, x, &r, &out, &err) == NC_ERR_ARGUMENT && !out, "T + delay overflows");
    NC_CHECK(strstr(err.message, "overflow") && strstr(err.message, "2-step"), "%s", err.message);
    NC_CHECK(nc_engine_loihi_latency(e, 32) == 34 && nc_engine_loihi_delay_steps(e) == 2, "latency T + 2");
    r.T = 0;
    NC_CHECK(nc_engine_forward(e, x, &r, &out, &err) == NC_ERR_ARGUMENT && strstr(err.message, "T >= 1"), "%s",
             err.message);
    o.quant.vth_target = 0;
    NC_CHECK(nc_engine_loihi_set_options(e, &o, &err) == NC_ERR_ARGUMENT, "bad vth target");
    o = round_options();
    o.graded = 1, o.message_bits = 30;
    NC_CHECK(nc_engine_loihi_set_options(e, &o, &err) == NC_ERR_ARGUMENT && strstr(err.message, "message bits"), "%s",
             err.message);
    nc_engine *cpu = nc_engine_cpu_new();
    NC_CHECK(nc_engine_loihi_set_options(cpu, &o, &err) == NC_ERR_ARGUMENT, "not a loihi engine");
    nc_engine_free(cpu);
    nc_tensor_free(x);
    nc_engine_free(e);
    nc_net_free(net);
}

/* ---- options through the engine table ---------------------------------------------------- */

static int same_options(const nc_loihi_options *a, const nc_loihi_options *b)
{
    return a->reset == b->reset && a->compare == b->compare && a->delay == b->delay && a->graded == b->graded &&
           a->message_bits == b->message_bits && a->quant.vth_target == b->quant.vth_target &&
           a->quant.input_frac_bits == b->quant.input_frac_bits;
}

/* The engine made from KEY=VALUE settings (NULL: none), or NULL with err. */
static nc_engine *loihi_with(const char *const *settings, nc_error *err)
{
    nc_engine_settings s = {0};
    for (int k = 0; settings && settings[k]; k++)
        if (nc_engine_settings_add(&s, settings[k], err) != NC_OK)
            return NULL;
    nc_engine *e = NULL;
    return nc_engine_new_with("loihi", &s, &e, err) == NC_OK ? e : NULL;
}

/* Every setting of the engine is a registered option: listed with its
 * default (nc_loihi_options_default's), set by KEY=VALUE, checked. */
static void test_registered_options(void)
{
    static const char *const keys[] = {"threads", "reset", "fire", "delay", "spikes", "message-bits", "vth",
                                       "input-bits"};
    const nc_engine_info *info = nc_engine_find("loihi");
    NC_CHECK(info && info->n_options == 8, "the loihi engine lists 8 options");
    for (size_t k = 0; info && k < sizeof keys / sizeof keys[0]; k++)
        NC_CHECK(nc_engine_option_find(info, keys[k]) && nc_engine_option_find(info, keys[k])->help, "option %s",
                 keys[k]);
    nc_error err = {0};
    nc_loihi_options want = nc_loihi_options_default();
    nc_engine *e = loihi_with(NULL, &err);
    nc_loihi_options got = nc_engine_loihi_get_options(e);
    NC_CHECK(e && same_options(&got, &want), "the registered defaults are nc_loihi_options_default (%s)",
             err.message);
    nc_engine_free(e);

    static const char *const all[] = {"reset=zero", "fire=ge", "delay=raw", "spikes=graded", "message-bits=4",
                                      "vth=2000", "input-bits=6", NULL};
    want = (nc_loihi_options){.quant = {.vth_target = 2000, .input_frac_bits = 6}, .reset = NC_RESET_ZERO,
                              .compare = NC_FIRE_GE, .delay = NC_LOIHI_DELAY_RAW, .graded = 1, .message_bits = 4};
    e = loihi_with(all, &err);
    got = nc_engine_loihi_get_options(e);
    NC_CHECK(e && same_options(&got, &want), "every setting reaches the engine (%s)", err.message);
    nc_net *net = chain_net(2, 2.0f, 0, 0.5f);
    NC_CHECK(e && net && nc_engine_load(e, net, &err) == NC_OK && nc_engine_loihi_quantised(e)->opts.vth_target == 2000,
             "the quantisation aims at the vth setting (%s)", err.message);
    nc_engine_free(e);
    nc_net_free(net);

    static const char *const off[] = {"delay=off", NULL}, *const bad_vth[] = {"vth=0", NULL};
    static const char *const bad_delay[] = {"delay=late", NULL};
    e = loihi_with(off, &err);
    NC_CHECK(e && nc_engine_loihi_get_options(e).delay == NC_LOIHI_DELAY_OFF, "delay=off");
    nc_engine_free(e);
    NC_CHECK(!loihi_with(bad_vth, &err) && strstr(err.message, "vth") && strstr(err.message, "131071"), "%s",
             err.message);
    NC_CHECK(!loihi_with(bad_delay, &err) && strstr(err.message, "compensated|off|raw"), "%s", err.message);
    nc_engine_settings s = {0};
    nc_engine *cpu = NULL;
    nc_engine_settings_add(&s, "vth=100", &err);
    NC_CHECK(nc_engine_new_with("cpu", &s, &cpu, &err) == NC_ERR_ARGUMENT && !cpu && strstr(err.message, "vth"),
             "the cpu engine has no vth: %s", err.message);
}

/* ---- one neuron, by hand ---------------------------------------------------------------- */

static void expect_train(nc_net *net, const nc_loihi_options *o, int T, const float *x, int seq, const char *want,
                         const char *what)
{
    nc_engine *e = loihi_for(net, o);
    capture cap = {0};
    nc_error err = {0};
    nc_tensor *out = e ? run_snn(e, T, x, seq, &cap, &err) : NULL;
    char got[64];
    NC_CHECK(out, "%s: %s", what, err.message);
    NC_CHECK(out && strcmp(train_of(&cap, 2, got), want) == 0, "%s: spikes %s, expected %s", what, got, want);
    nc_tensor_free(out);
    cap_free(&cap);
    nc_engine_free(e);
}

static void test_one_neuron(void)
{
    nc_loihi_options o = round_options();
    float one = 1.0f;
    /* v0 = 0, input 1 threshold per step: v = 8128 ties the threshold.
     * GE fires at once; GT waits for 16256 (then 8128 remains: it fires
     * every step from t = 1). */
    nc_net *net = chain_net(1, 2.0f, 0, 0.0f);
    o.compare = NC_FIRE_GE;
    expect_train(net, &o, 6, &one, 0, "111111", "GE at the tie");
    o.compare = NC_FIRE_GT;
    expect_train(net, &o, 6, &one, 0, "011111", "GT at the tie");
    /* reset to zero after 16256 loses the 8128 left over: 0 1 0 1 0 1 */
    o.reset = NC_RESET_ZERO;
    expect_train(net, &o, 6, &one, 0, "010101", "GT, reset to zero");
    nc_net_free(net);
    /* v0 = 4064 (θ/2), input 0.5 thresholds per step (bias −0.5θ, x = 1):
     * subtract, GE: 8128 fire → 0, 4064, 8128 fire → 0 … : 1 0 1 0 1 0
     * subtract, GT: 8128, 12192 fire → 4064, 8128, 12192 fire : 0 1 0 1 0 1
     * zero,     GE: 8128 fire → 0, 4064, 8128 fire : 1 0 1 0 1 0
     * zero,     GT: 8128, 12192 fire → 0, 4064, 8128, 12192 fire: 0 1 0 0 1 0 */
    net = chain_net(1, 2.0f, -0.5f, 0.5f);
    o = round_options();
    o.compare = NC_FIRE_GE;
    expect_train(net, &o, 6, &one, 0, "101010", "bias, subtract, GE");
    o.compare = NC_FIRE_GT;
    expect_train(net, &o, 6, &one, 0, "010101", "bias, subtract, GT");
    o.reset = NC_RESET_ZERO, o.compare = NC_FIRE_GE;
    expect_train(net, &o, 6, &one, 0, "101010", "bias, zero, GE");
    o.compare = NC_FIRE_GT;
    expect_train(net, &o, 6, &one, 0, "010010", "bias, zero, GT");
    nc_net_free(net);
}

/* 24-bit saturation of v and wrap of u, through a sequence input. */
static void test_wrap_and_saturation(void)
{
    nc_loihi_options o = round_options();
    o.compare = NC_FIRE_GE;
    nc_net *net = chain_net(1, 2.0f, 0, 0.5f);
    /* u = 8128·x.  x = 1000: v = 4064 + 8 128 000 = 8 132 064 → fire → 8 123 936;
     * x = 1000: 16 251 936 saturates at 8 388 607 → fire → 8 380 479;
     * x = −1031: 8 380 479 − 8 379 968 = 511 → no spike (without the
     * saturation v would be 7 863 840 and fire); x = 0: 511 stays. */
    float seq[4] = {1000, 1000, -1031, 0};
    nc_engine *e = loihi_for(net, &o);
    capture cap = {0};
    nc_error err = {0};
    nc_tensor *out = e ? run_snn(e, 4, seq, 1, &cap, &err) : NULL;
    char got[64];
    NC_CHECK(out && strcmp(train_of(&cap, 2, got), "1100") == 0, "saturation: %s (%s)", got, err.message);
    nc_loihi_layer_stats s = nc_engine_loihi_layer_stats(e, 0);
    NC_CHECK(s.v_saturations == 1 && s.u_wraps == 0 && s.spikes == 2, "1 saturation, %lld; spikes %lld",
             (long long)s.v_saturations, (long long)s.spikes);
    /* observed input current (u + bias)/(vth·64)·θ = x·θ exactly here */
    NC_CHECK(cap.input[2] && cap.input[2][0] == 2000.0f && cap.input[2][2] == -2062.0f, "currents %g %g",
             cap.input[2] ? cap.input[2][0] : -1, cap.input[2] ? cap.input[2][2] : -1);
    NC_CHECK(cap.data[2] && cap.data[2][0] == 2.0f && cap.data[2][3] == 0.0f, "spike value θ");
    nc_tensor_free(out);
    cap_free(&cap);
    /* x = 1100: u = 8 940 800 > 2^23 wraps to 8 940 800 − 2^24 = −7 836 416;
     * v = 4064 − 7 836 416 = −7 832 352: no spike where the float fires.
     * Then x = 1: v = −7 832 352 + 8128 (no spike). */
    float wrap[2] = {1100, 1};
    nc_engine_loihi_reset_stats(e);
    out = run_snn(e, 2, wrap, 1, &cap, &err);
    NC_CHECK(out && strcmp(train_of(&cap, 2, got), "00") == 0, "wrap: %s", got);
    s = nc_engine_loihi_layer_stats(e, 0);
    NC_CHECK(s.u_wraps == 1 && s.v_saturations == 0, "1 wrap: %lld", (long long)s.u_wraps);
    float want = (float)(-7836416.0 / 8128.0 * 2.0);
    NC_CHECK(cap.input[2] && cap.input[2][0] == want, "wrapped current %.9g, expected %.9g",
             cap.input[2] ? cap.input[2][0] : 0, want);
    nc_tensor_free(out);
    cap_free(&cap);
    nc_engine_free(e);
    nc_net_free(net);
}

/* Graded spikes: the payload is the number of thresholds v holds. */
static void test_graded(void)
{
    nc_loihi_options o = round_options();
    o.compare = NC_FIRE_GE;
    o.graded = 1;
    o.message_bits = 2; /* payload ≤ 3 */
    nc_net *net = chain_net(1, 2.0f, 0, 0.0f);
    /* x = 5 → u = 5·8128 = 40640 per step: t0: v = 40640 holds 5 thresholds,
     * k capped at 3 → v = 16256; t1: 56896 → 3 → 32512 … */
    float x[3] = {5, 5, 0};
    nc_engine *e = loihi_for(net, &o);
    capture cap = {0};
    nc_error err = {0};
    nc_tensor *out = e ? run_snn(e, 3, x, 1, &cap, &err) : NULL;
    NC_CHECK(out && cap.data[2], "%s", err.message);
    if (out && cap.data[2]) {
        /* t2: x = 0, v = 32512 = 4 thresholds → k = 3, v = 8128 */
        NC_CHECK(cap.data[2][0] == 6.0f && cap.data[2][1] == 6.0f && cap.data[2][2] == 6.0f, "payload 3·θ: %g %g %g",
                 cap.data[2][0], cap.data[2][1], cap.data[2][2]);
        nc_loihi_layer_stats s = nc_engine_loihi_layer_stats(e, 0);
        NC_CHECK(s.spikes == 3 && s.payload == 9, "3 messages, payload 9: %lld %lld", (long long)s.spikes,
                 (long long)s.payload);
    }
    nc_tensor_free(out);
    cap_free(&cap);
    nc_engine_free(e);
    nc_net_free(net);
}

/* ---- two layers and the synaptic delay ------------------------------------------------ */

static void test_two_layer_delay(void)
{
    /* if1: v0 4064, 0.5 threshold per step (bias −0.5θ1, x = 1), GE: 1 0 1 0 1 0.
     * if2 (v0 4064) gets one threshold per if1 spike:
     *   no delay / compensated: 12192 fire → 4064, 4064, fire … : 1 0 1 0 1 0
     *   raw delay: step t hears if1's step t − 1: 0 1 0 1 0 1.
     * out(t) = W3·θ2 · if2(t) (compensated, off) or if2(t − 1) (raw). */
    nc_net *net = chain_net(2, 2.0f, -0.5f, 0.5f);
    nc_loihi_options o = round_options();
    o.compare = NC_FIRE_GE;
    float one = 1;
    const char *want2[3] = {"101010", "101010", "010101"};
    const float want_out[3][6] = {{3, 0, 3, 0, 3, 0}, {3, 0, 3, 0, 3, 0}, {0, 0, 3, 0, 3, 0}};
    nc_loihi_delay modes[3] = {NC_LOIHI_DELAY_OFF, NC_LOIHI_DELAY_COMPENSATED, NC_LOIHI_DELAY_RAW};
    const char *names[3] = {"off", "compensated", "raw"};
    for (int m = 0; m < 3; m++) {
        o.delay = modes[m];
        nc_engine *e = loihi_for(net, &o);
        capture cap = {0};
        nc_error err = {0};
        nc_tensor *out = e ? run_snn(e, 6, &one, 0, &cap, &err) : NULL;
        char got1[64], got2[64];
        NC_CHECK(out, "%s: %s", names[m], err.message);
        NC_CHECK(strcmp(train_of(&cap, 2, got1), "101010") == 0, "%s: if1 %s", names[m], got1);
        NC_CHECK(strcmp(train_of(&cap, 4, got2), want2[m]) == 0, "%s: if2 %s, expected %s", names[m], got2, want2[m]);
        for (int t = 0; out && t < 6; t++)
            NC_CHECK(out->data[t] == want_out[m][t], "%s: out[%d] = %g, expected %g", names[m], t, out->data[t],
                     want_out[m][t]);
        NC_CHECK(nc_engine_loihi_latency(e, 6) == (m == 1 ? 8 : 6), "%s: latency %lld", names[m],
                 (long long)nc_engine_loihi_latency(e, 6));
        nc_tensor_free(out);
        cap_free(&cap);
        nc_engine_free(e);
    }
    nc_net_free(net);
}

/* ---- netx export, read back with our HDF5 reader ------------------------------------------ */

/* The first value of the int64 (or with f32, float32) dataset `name`, or
 * −999999 (why printed). */
static double read_first(hid_t f, const char *name, int f32)
{
    int64_t *i = NULL;
    float *v = NULL;
    nc_error err;
    nc_status st = f32 ? nc_h5_read_f32(f, name, 4, NULL, NULL, &v, &err)
                       : nc_h5_read_i64(f, name, 1, NULL, NULL, &i, &err);
    double out = st != NC_OK ? -999999 : f32 ? v[0] : (double)i[0];
    if (st != NC_OK)
        printf("# read %s: %s\n", name, err.message);
    free(i);
    free(v);
    return out;
}

static int64_t read_i64(hid_t f, const char *name) { return (int64_t)read_first(f, name, 0); }
static float read_f32_0(hid_t f, const char *name) { return (float)read_first(f, name, 1); }

static void test_export_netx(void)
{
    nc_net *net;
    nc_loihi_net *q = quantised_chain(&net);
    nc_error err = {0};
    char path[256];
    snprintf(path, sizeof path, "/tmp/nc_test_loihi_%d.net", (int)getpid());
    nc_loihi_notes notes = {0};
    nc_loihi_netx_options xo = {NC_RESET_SUBTRACT, 6};
    NC_CHECK(q && nc_loihi_export_netx(q, path, &xo, &notes, &err) == NC_OK, "export: %s", err.message);
    int says_reset = 0;
    for (int i = 0; i < notes.count; i++)
        says_reset |= strstr(notes.lines[i], "reset by subtraction") != NULL;
    NC_CHECK(says_reset, "the notes state the subtractive reset");
    hid_t f = H5I_INVALID_HID;
    NC_CHECK(nc_h5_open_read(path, &f, &err) == NC_OK, "%s", err.message);
    if (f != H5I_INVALID_HID) {
        /* /layer/0 input, 1 fc1, 2 fc2, 3 fc3.  The engine's a_in = acc·2^−1 becomes
         * netx's acc with vThMant 127·2 = 254; bias 2032·2 = 4064 v units = 63.5 << 6 → 64 */
        NC_CHECK(nc_h5_exists(f, "layer/3") && !nc_h5_exists(f, "layer/4"), "4 layer groups");
        NC_CHECK(read_f32_0(f, "layer/1/weight") == 254 && read_i64(f, "layer/1/neuron/vThMant") == 254,
                 "fc1: weight 254, vThMant 254");
        NC_CHECK(read_f32_0(f, "layer/1/bias") == 64, "fc1 bias %g", read_f32_0(f, "layer/1/bias"));
        NC_CHECK(read_i64(f, "layer/2/neuron/iDecay") == 4096 && read_i64(f, "layer/2/neuron/vDecay") == 0,
                 "CUBA as IF");
        NC_CHECK(read_i64(f, "layer/2/inFeatures") == 1 && read_i64(f, "layer/2/outFeatures") == 1, "features");
        NC_CHECK(read_i64(f, "simulation/tSample") == 8, "tSample = T + 2");
        char type[32] = "";
        int64_t n = 0;
        char **texts = NULL;
        if (nc_h5_read_strings(f, "layer/1/neuron/type", &n, &texts, &err) == NC_OK && n == 1)
            snprintf(type, sizeof type, "%s", texts[0]);
        nc_h5_free_strings(n, texts);
        NC_CHECK(strcmp(type, "CUBA") == 0, "neuron type '%s'", type);
        nc_h5_close(&f);
    }
    remove(path);
    nc_loihi_notes_clear(&notes);
    /* an unwritable place: an error naming it, nothing left behind */
    NC_CHECK(nc_loihi_export_netx(q, "/nonexistent-dir/x.net", &xo, NULL, &err) == NC_ERR_IO, "%s", err.message);
    nc_loihi_net_free(q);
    nc_net_free(net);
}

/* ---- observers, records, ANN mode -------------------------------------------------------- */

static nc_net *small_cnn(void)
{
    nc_net *net = nc_net_new();
    int x = nc_net_add_node(net, NC_NODE_INPUT, "x", 0, NULL);
    net->nodes[x].ndim = 3, net->nodes[x].shape[0] = 1, net->nodes[x].shape[1] = 6, net->nodes[x].shape[2] = 6;
    int c = add1(net, NC_NODE_CONV2D, "conv", x);
    net->nodes[c].weight = nc_tensor_new4(4, 1, 3, 3);
    net->nodes[c].bias = nc_tensor_new1(4);
    uint32_t r = 12345;
    for (int k = 0; k < 36; k++) {
        r = r * 1664525u + 1013904223u;
        net->nodes[c].weight->data[k] = (float)((r >> 8) % 1000) / 1000.0f - 0.45f;
    }
    for (int k = 0; k < 4; k++)
        net->nodes[c].bias->data[k] = 0.05f * (float)k;
    for (int p = 0; p < 4; p++)
        net->nodes[c].pad[p] = 1;
    int mp = add_pool(net, NC_NODE_MAXPOOL, "pool", c, 2, 2);
    net->nodes[mp].maxpool_strategy = NC_MAXPOOL_PRE_SPIKE;
    float th[4] = {0.6f, 0.7f, 0.8f, 0.9f};
    int s = add1(net, NC_NODE_NEURON, "if", mp);
    net->nodes[s].neuron.model = NC_NEURON_IF;
    nc_neuron_set_threshold(&net->nodes[s].neuron, 4, th, NULL);
    int ap = add_pool(net, NC_NODE_AVGPOOL, "avg", s, 3, 3);
    int f = add1(net, NC_NODE_FLATTEN, "flat", ap);
    float w[12];
    for (int k = 0; k < 12; k++)
        w[k] = (float)((k * 7) % 5) * 0.2f - 0.4f;
    int d = add_dense1(net, "fc", f, 4, 3, w, NULL);
    add1(net, NC_NODE_OUTPUT, "out", d);
    return infer(net) ? net : (nc_net_free(net), NULL);
}

static void test_observers_and_record(void)
{
    nc_net *net = small_cnn();
    nc_engine *e = nc_engine_loihi_new(), *cpu = nc_engine_cpu_new();
    nc_error err = {0};
    NC_CHECK(net && nc_engine_load(e, net, &err) == NC_OK && nc_engine_load(cpu, net, &err) == NC_OK, "%s",
             err.message);
    float images[8 * 36];
    int32_t labels[8];
    for (int k = 0; k < 8 * 36; k++)
        images[k] = (float)((k * 37) % 17) / 8.0f;
    for (int k = 0; k < 8; k++)
        labels[k] = k % 3;
    nc_dataset ds = {.count = 8, .channels = 1, .height = 6, .width = 6, .images = images, .labels = labels,
                     .num_classes = 3, .path = "in-memory"};
    /* ANN mode is the float network: the same numbers as the cpu engine */
    int64_t xs[4] = {8, 1, 6, 6};
    nc_tensor *x = nc_tensor_new(4, xs), *a = NULL, *b = NULL;
    memcpy(x->data, images, sizeof images);
    nc_run_options ann = {.mode = NC_MODE_ANN};
    NC_CHECK(nc_engine_forward(e, x, &ann, &a, &err) == NC_OK && nc_engine_forward(cpu, x, &ann, &b, &err) == NC_OK,
             "%s", err.message);
    for (int64_t k = 0; a && b && k < nc_tensor_numel(a); k++)
        NC_CHECK(a->data[k] == b->data[k], "ANN output %lld differs", (long long)k);
    nc_tensor_free(a), nc_tensor_free(b);
    /* every node observed with T·N rows, constant values expanded */
    capture cap = {0};
    nc_observer ob = {cap_observe, cap_observe_input, &cap};
    nc_run_options snn = {.mode = NC_MODE_SNN, .T = 5, .observer = &ob};
    NC_CHECK(nc_engine_forward(e, x, &snn, &a, &err) == NC_OK, "%s", err.message);
    for (int i = 0; i < net->n_nodes; i++)
        NC_CHECK(cap.data[i] && cap.rows[i] == 40 && cap.per_row[i] == nc_node_numel(&net->nodes[i]),
                 "node %d observed %lld × %lld", i, (long long)cap.rows[i], (long long)cap.per_row[i]);
    NC_CHECK(cap.input[3] && !cap.input[1], "input current of the IF node only");
    /* spike values are θ of the channel: channel c of [4, 3, 3] is k / 9 */
    int ok = 1;
    for (int64_t k = 0; cap.data[3] && k < 40 * 36; k++) {
        float v = cap.data[3][k], th[4] = {0.6f, 0.7f, 0.8f, 0.9f};
        ok &= v == 0 || v == th[(k % 36) / 9];
    }
    NC_CHECK(ok, "spike values are the channel's θ");
    /* the dequantised conv current is within the weight quantisation of the float one */
    nc_tensor_free(a);
    cap_free(&cap);
    /* a record fills from the observers */
    nc_record *rec = NULL;
    nc_simulate_options so = {.T = 8, .batch_size = 4};
    NC_CHECK(nc_simulate(e, net, &ds, &so, NULL, NULL, &rec, &err) == NC_OK, "simulate: %s", err.message);
    if (rec) {
        nc_layer_stats s;
        nc_record_layer_stats(rec, 0, &s);
        NC_CHECK(nc_record_samples(rec) == 8 && s.spikes > 0 && s.has_ann && isfinite(s.local.mse), "record: %lld "
                 "samples, %lld spikes", (long long)nc_record_samples(rec), (long long)s.spikes);
        printf("# record: rate %.3f, local mse %.4g, quant mean |e| %.4g\n", s.firing_rate, s.local.mse,
               s.quant.mean_abs);
    }
    nc_record_free(rec);
    nc_tensor_free(x);
    nc_engine_free(cpu);
    nc_engine_free(e);
    nc_net_free(net);
}

static int stop_at_three(void *user, const nc_progress *p)
{
    (void)user;
    return p->done >= 3;
}

static void test_cancel(void)
{
    nc_net *net = small_cnn();
    nc_engine *e = nc_engine_loihi_new();
    nc_error err = {0};
    NC_CHECK(nc_engine_load(e, net, &err) == NC_OK, "%s", err.message);
    nc_tensor *x = nc_tensor_new4(2, 1, 6, 6), *out = NULL;
    nc_run_options o = {.mode = NC_MODE_SNN, .T = 4, .progress = stop_at_three};
    NC_CHECK(nc_engine_forward(e, x, &o, &out, &err) == NC_ERR_CANCELLED && !out, "cancelled: %s", err.message);
    nc_tensor_free(x);
    nc_engine_free(e);
    nc_net_free(net);
}

/* ---- fixture models: float SNN against the integer one --------------------------------------- */

typedef struct spike_count {
    int64_t spikes[64];
} spike_count;

static void count_spikes(void *user, int node, const float *d, int64_t rows, int64_t per_row)
{
    spike_count *c = user;
    if (node < 64)
        for (int64_t k = 0; k < rows * per_row; k++)
            c->spikes[node] += d[k] != 0;
}

static double snn_accuracy(nc_engine *e, const nc_dataset *ds, int T, const nc_net *net, spike_count *counts)
{
    int64_t correct = 0, bs = ds->count < 50 ? ds->count : 50;
    int64_t xs[4] = {bs, ds->channels, ds->height, ds->width};
    nc_tensor *x = nc_tensor_new(4, xs);
    int32_t labels[50];
    nc_observer ob = {count_spikes, NULL, counts};
    nc_run_options o = {.mode = NC_MODE_SNN, .T = T, .observer = &ob};
    (void)net;
    for (int64_t first = 0; first + bs <= ds->count; first += bs) {
        nc_dataset_batch(ds, first, bs, x->data, labels);
        nc_tensor *out = NULL;
        nc_error err;
        if (nc_engine_forward(e, x, &o, &out, &err) != NC_OK) {
            printf("# snn: %s\n", err.message);
            correct = -1;
            break;
        }
        correct += snn_correct(out, T, bs, labels);
        nc_tensor_free(out);
    }
    nc_tensor_free(x);
    return correct < 0 ? -1 : (double)correct / (double)(ds->count - ds->count % bs);
}

static void check_fixture(const char *name, const nc_dataset *train, const nc_dataset *test)
{
    char rel[256], path[1024], test_name[160];
    snprintf(rel, sizeof rel, "tests/fixtures/models/%s.onnx", name);
    nc_test_path(rel, path, sizeof path);
    snprintf(test_name, sizeof test_name, "fixture %s: loihi engine within 1 point of the float SNN at T = 32", name);
    if (!train || !test || access(path, R_OK) != 0) {
        nc_test_report(test_name, 0, !train || !test ? "Fashion-MNIST not installed" : "fixture model missing");
        return;
    }
    nc_error err = {0};
    nc_net *net = NULL;
    nc_engine *loihi = nc_engine_loihi_new(), *cpu = nc_engine_cpu_new();
    nc_pipeline_options po = nc_pipeline_options_default();
    po.calib_images = 500;
    nc_pipeline_result pr;
    memset(&pr, 0, sizeof pr);
    int failed = 1;
    /* the pipeline calibrates through the loihi engine (ANN mode on floats) */
    if (nc_onnx_load(path, NULL, &net, &err) != NC_OK ||
        nc_pipeline_convert(loihi, net, train, &po, NULL, NULL, &pr, &err) != NC_OK ||
        nc_engine_load(cpu, net, &err) != NC_OK) {
        printf("# %s: %s\n", name, err.message);
    } else {
        char buf[8192];
        const nc_loihi_net *q = nc_engine_loihi_quantised(loihi);
        const char *text = nc_loihi_report_text(q, buf, sizeof buf);
        for (const char *line = text; *line;) {
            const char *end = strchr(line, '\n');
            int n = end ? (int)(end - line) : (int)strlen(line);
            printf("# %.*s\n", n, line);
            line += n + (end != NULL);
        }
        spike_count fc = {{0}}, lc = {{0}};
        double af = snn_accuracy(cpu, test, 32, net, &fc);
        double al = snn_accuracy(loihi, test, 32, net, &lc);
        printf("# %s: float SNN %.2f%%, loihi %.2f%% (T = 32, %lld images, latency %lld steps)\n", name, 100 * af,
               100 * al, (long long)test->count, (long long)nc_engine_loihi_latency(loihi, 32));
        for (int i = 0; i < net->n_nodes && i < 64; i++)
            if (net->nodes[i].kind == NC_NODE_NEURON)
                printf("# %s: spikes of %-10s float %10lld  loihi %10lld  (ratio %.4f)\n", name, net->nodes[i].name,
                       (long long)fc.spikes[i], (long long)lc.spikes[i],
                       fc.spikes[i] ? (double)lc.spikes[i] / (double)fc.spikes[i] : 0.0);
        failed = !(af > 0) || !(al >= af - 0.01);
    }
    nc_test_report(test_name, failed, NULL);
    nc_pipeline_result_clear(&pr);
    nc_engine_free(loihi);
    nc_engine_free(cpu);
    nc_net_free(net);
}

static void run_fixtures(void)
{
    const char *limit = getenv("NC_LOIHI_TEST_IMAGES");
    int64_t n = limit ? atoll(limit) : 1000;
    static const char *const models[] = {"mlp", "cnn_maxpool", "vgg_bn"};
    check_fmnist_fixtures(models, 3, n > 0 ? n : 1000, check_fixture);
}

int main(void)
{
    NC_RUN(test_quantise_rules);
    NC_RUN(test_bad_networks);
    NC_RUN(test_step_overflow);
    NC_RUN(test_registered_options);
    NC_RUN(test_one_neuron);
    NC_RUN(test_wrap_and_saturation);
    NC_RUN(test_graded);
    NC_RUN(test_two_layer_delay);
    NC_RUN(test_export_netx);
    NC_RUN(test_observers_and_record);
    NC_RUN(test_cancel);
    run_fixtures();
    return nc_test_done();
}
