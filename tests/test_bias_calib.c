/* test_bias_calib.c — training-free bias calibration (sim/nc_bias_calib.h):
 *   - the corrections of a small MLP built here equal a direct computation:
 *     the test simulates the IF net itself (float32, the engine's IF rule),
 *     takes Δ of the first layer, applies it, simulates again for the second;
 *   - the carrier rules (conv, through an add, none through a MaxPool or a
 *     shared value);
 *   - the held-out check undoes corrections that lower the accuracy;
 *   - the work it declares for a time plan (nc_bias_calib_work) is the work
 *     it does, counted by an engine that wraps the CPU engine's passes. */
#include "nc_test.h"
#include "nc_test_util.h"

#include "../sim/nc_bias_calib.h"

enum { FIN = 6, H1 = 5, H2 = 4, CLASSES = 3, IMAGES = 64, T = 4 };

static float frand(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)(uint32_t)(*s >> 40) / 16777216.0f; /* [0, 1) */
}

static int add_dense(nc_net *net, const char *name, int in, int fin, int fout, uint64_t *seed)
{
    int i = add1(net, NC_NODE_DENSE, name, in);
    int64_t ws[2] = {fout, fin}, bs[1] = {fout};
    net->nodes[i].weight = nc_tensor_new(2, ws);
    net->nodes[i].bias = nc_tensor_new(1, bs);
    for (int k = 0; k < fout * fin; k++)
        net->nodes[i].weight->data[k] = (frand(seed) - 0.4f) * 1.2f;
    for (int k = 0; k < fout; k++)
        net->nodes[i].bias->data[k] = (frand(seed) - 0.5f) * 0.4f;
    return i;
}

static int add_if(nc_net *net, const char *name, int in, float theta)
{
    int i = add_neuron(net, name, in, NC_NEURON_IF);
    nc_neuron *nr = &net->nodes[i].neuron;
    nr->v0_fraction = 0.5f;
    nr->reset = NC_RESET_SUBTRACT;
    nr->compare = NC_FIRE_GE;
    nc_neuron_set_threshold(nr, 1, &theta, NULL);
    return i;
}

/* x[6] → dense(5) → IF → dense(4) → IF → dense(3) → y */
static nc_net *small_mlp(void)
{
    uint64_t seed = 17;
    nc_net *net = nc_net_new();
    int x = add_input(net, 1, (int64_t[]){FIN});
    int d1 = add_dense(net, "fc1", x, FIN, H1, &seed);
    int n1 = add_if(net, "if1", d1, 1.1f);
    int d2 = add_dense(net, "fc2", n1, H1, H2, &seed);
    int n2 = add_if(net, "if2", d2, 0.9f);
    int d3 = add_dense(net, "fc3", n2, H2, CLASSES, &seed);
    net->output = add1(net, NC_NODE_OUTPUT, "y", d3);
    net->input = x;
    snprintf(net->source_path, sizeof net->source_path, "small mlp");
    return infer(net) ? net : NULL;
}

static nc_dataset *random_images(void)
{
    uint64_t seed = 99;
    nc_dataset *ds = calloc(1, sizeof *ds);
    ds->count = IMAGES, ds->channels = 1, ds->height = 1, ds->width = FIN, ds->num_classes = CLASSES;
    ds->images = malloc(IMAGES * FIN * sizeof(float));
    ds->labels = malloc(IMAGES * sizeof(int32_t));
    for (int k = 0; k < IMAGES * FIN; k++)
        ds->images[k] = frand(&seed) * 1.5f;
    for (int k = 0; k < IMAGES; k++)
        ds->labels[k] = k % CLASSES;
    snprintf(ds->path, sizeof ds->path, "random images");
    return ds;
}

static void free_images(nc_dataset *ds)
{
    free(ds->images);
    free(ds->labels);
    free(ds);
}

/* ---- the direct computation ---------------------------------------------------- */

static void dense(const nc_node *n, const float *in, int fin, int fout, float *out)
{
    for (int o = 0; o < fout; o++) {
        float acc = n->bias->data[o];
        for (int i = 0; i < fin; i++)
            acc += n->weight->data[o * fin + i] * in[i];
        out[o] = acc;
    }
}

/* Mean ANN activation and mean SNN rate (θ·spikes/T) per neuron of both IF
 * layers over the images, for biases b1 and b2 of the given net. */
static void direct_means(const nc_net *net, const nc_dataset *ds, double ann[2][8], double snn[2][8])
{
    const nc_node *fc1 = &net->nodes[nc_net_find(net, "fc1")], *fc2 = &net->nodes[nc_net_find(net, "fc2")];
    float th1 = net->nodes[nc_net_find(net, "if1")].neuron.threshold[0];
    float th2 = net->nodes[nc_net_find(net, "if2")].neuron.threshold[0];
    memset(ann, 0, 2 * 8 * sizeof(double));
    memset(snn, 0, 2 * 8 * sizeof(double));
    for (int k = 0; k < IMAGES; k++) {
        const float *x = ds->images + k * FIN;
        float z1[H1], a1[H1], z2[H2], s1[H1], v1[H1], v2[H2];
        dense(fc1, x, FIN, H1, z1);
        for (int j = 0; j < H1; j++)
            a1[j] = z1[j] > 0 ? z1[j] : 0, ann[0][j] += a1[j], v1[j] = 0.5f * th1;
        dense(fc2, a1, H1, H2, z2);
        for (int j = 0; j < H2; j++)
            ann[1][j] += z2[j] > 0 ? z2[j] : 0, v2[j] = 0.5f * th2;
        for (int t = 0; t < T; t++) {
            for (int j = 0; j < H1; j++) {
                v1[j] += z1[j];
                s1[j] = v1[j] >= th1 ? th1 : 0;
                v1[j] -= s1[j];
                snn[0][j] += s1[j];
            }
            dense(fc2, s1, H1, H2, z2);
            for (int j = 0; j < H2; j++) {
                v2[j] += z2[j];
                float s = v2[j] >= th2 ? th2 : 0;
                v2[j] -= s;
                snn[1][j] += s;
            }
        }
    }
    for (int j = 0; j < 8; j++)
        ann[0][j] /= IMAGES, ann[1][j] /= IMAGES, snn[0][j] /= IMAGES * T, snn[1][j] /= IMAGES * T;
}

/* What three tests start from: small_mlp, a clone of it to compare with,
 * the random images and a CPU engine. */
typedef struct mlp_fixture {
    nc_net *net, *clone;
    nc_dataset *ds;
    nc_engine *e;
} mlp_fixture;

/* 0 (reported) when either net is missing. */
static int mlp_fixture_open(mlp_fixture *f)
{
    f->net = small_mlp();
    f->clone = f->net ? nc_net_clone(f->net) : NULL;
    NC_CHECK(f->net && f->clone, "nets");
    if (!f->net || !f->clone) {
        nc_net_free(f->net);
        nc_net_free(f->clone);
        return 0;
    }
    f->ds = random_images();
    f->e = nc_engine_cpu_new();
    return 1;
}

static void mlp_fixture_close(mlp_fixture *f)
{
    nc_engine_free(f->e);
    free_images(f->ds);
    nc_net_free(f->net);
    nc_net_free(f->clone);
}

static void test_matches_direct_computation(void)
{
    mlp_fixture f;
    if (!mlp_fixture_open(&f))
        return;
    /* the direct computation: Δ1 from the net as it is, Δ2 after applying Δ1 */
    double ann0[2][8], snn[2][8], ann[2][8], want1[H1], want2[H2];
    direct_means(f.clone, f.ds, ann0, snn);
    nc_node *fc1 = &f.clone->nodes[nc_net_find(f.clone, "fc1")];
    for (int j = 0; j < H1; j++)
        want1[j] = ann0[0][j] - snn[0][j], fc1->bias->data[j] += (float)want1[j];
    direct_means(f.clone, f.ds, ann, snn);
    for (int j = 0; j < H2; j++)
        want2[j] = ann0[1][j] - snn[1][j]; /* the target is the uncorrected ANN */
    /* the library */
    nc_bias_calib_options o = {.T = T, .images = IMAGES, .batch_size = 16};
    nc_bias_calib_result r;
    nc_error err = {0};
    NC_CHECK(nc_bias_calibrate(f.e, f.net, f.ds, &o, &r, &err) == NC_OK, "calibrate: %s", err.message);
    NC_CHECK(r.n_layers == 2 && r.kept && r.images == IMAGES, "two layers, kept");
    if (r.n_layers == 2) {
        NC_CHECK(r.layers[0].carrier == nc_net_find(f.net, "fc1") && r.layers[1].carrier == nc_net_find(f.net, "fc2"),
                 "carriers fc1, fc2");
        double worst = 0, largest = 0;
        for (int j = 0; j < H1; j++)
            worst = fmax(worst, fabs(r.layers[0].delta[j] - want1[j])), largest = fmax(largest, fabs(want1[j]));
        for (int j = 0; j < H2; j++)
            worst = fmax(worst, fabs(r.layers[1].delta[j] - want2[j])), largest = fmax(largest, fabs(want2[j]));
        NC_CHECK(worst < 1e-5 && largest > 1e-3, "Δ = direct computation (max diff %.3g, largest Δ %.3g)", worst,
                 largest);
        const nc_node *b1 = &f.net->nodes[nc_net_find(f.net, "fc1")];
        NC_CHECK(fabsf(b1->bias->data[0] - fc1->bias->data[0]) < 1e-6f, "the net's fc1 bias holds b + Δ");
        printf("# mean error per layer: %.4f → %.4f, %.4f → %.4f\n", r.layers[0].error_before,
               r.layers[0].error_after, r.layers[1].error_before, r.layers[1].error_after);
        NC_CHECK(fabs(r.layers[0].error_after) < fabs(r.layers[0].error_before), "layer 1's mean error shrinks");
    }
    nc_bias_calib_result_clear(&r);
    mlp_fixture_close(&f);
}

/* With held-out check images, the SNN accuracy at T is measured before and
 * after, and the net keeps the corrections exactly when it did not fall. */
static void test_check_rule(void)
{
    mlp_fixture f;
    if (!mlp_fixture_open(&f))
        return;
    nc_bias_calib_options o = {.T = T, .images = 32, .check_first = 32, .check_count = 32};
    nc_bias_calib_result r;
    nc_error err = {0};
    NC_CHECK(nc_bias_calibrate(f.e, f.net, f.ds, &o, &r, &err) == NC_OK, "calibrate: %s", err.message);
    NC_CHECK(r.check_before >= 0 && r.check_after >= 0, "check measured (%.3f → %.3f)", r.check_before,
             r.check_after);
    NC_CHECK(r.kept == (r.check_after >= r.check_before), "kept exactly when the check did not fall");
    const nc_node *b = &f.net->nodes[nc_net_find(f.net, "fc1")], *b0 = &f.clone->nodes[nc_net_find(f.clone, "fc1")];
    int same = memcmp(b->bias->data, b0->bias->data, H1 * sizeof(float)) == 0;
    NC_CHECK(r.kept ? !same : same, "the net holds the corrections iff kept");
    if (!r.kept)
        NC_CHECK(strstr(r.notes, "undone") != NULL, "the undo is noted: %s", r.notes);
    nc_bias_calib_result_clear(&r);
    /* bad input: check images outside the set, T = 0 */
    o.check_first = 60;
    NC_CHECK(nc_bias_calibrate(f.e, f.net, f.ds, &o, &r, &err) == NC_ERR_ARGUMENT && strstr(err.message, "outside"),
             "check outside the set: %s", err.message);
    nc_bias_calib_result_clear(&r);
    o = (nc_bias_calib_options){.T = 0};
    NC_CHECK(nc_bias_calibrate(f.e, f.net, f.ds, &o, &r, &err) == NC_ERR_ARGUMENT, "T = 0 refused");
    nc_bias_calib_result_clear(&r);
    mlp_fixture_close(&f);
}

/* conv → IF: the conv; add(conv, IF) → IF: the conv summand; a padded
 * avgpool → IF: none; conv → maxpool → IF: the conv. */
static void test_carriers(void)
{
    nc_net *net = nc_net_new();
    int x = add_input(net, 3, (int64_t[]){2, 4, 4});
    int c1 = add1(net, NC_NODE_CONV2D, "c1", x);
    int64_t ws[4] = {2, 2, 1, 1};
    net->nodes[c1].weight = nc_tensor_new(4, ws);
    int n1 = add_if(net, "n1", c1, 1.0f);
    int c2 = add1(net, NC_NODE_CONV2D, "c2", n1);
    net->nodes[c2].weight = nc_tensor_new(4, ws);
    int inputs[2] = {c2, n1};
    int sum = nc_net_add_node(net, NC_NODE_ADD, "sum", 2, inputs);
    int n2 = add_if(net, "n2", sum, 1.0f);
    int ap = add_pool(net, NC_NODE_AVGPOOL, "ap", n2, 3, 1);
    for (int p = 0; p < 4; p++)
        net->nodes[ap].pad[p] = 1;
    int n3 = add_if(net, "n3", ap, 1.0f);
    int c4 = add1(net, NC_NODE_CONV2D, "c4", n3);
    net->nodes[c4].weight = nc_tensor_new(4, ws);
    int mp = add_pool(net, NC_NODE_MAXPOOL, "mp", c4, 2, 2);
    int n4 = add_if(net, "n4", mp, 1.0f);
    net->output = add1(net, NC_NODE_OUTPUT, "y", add1(net, NC_NODE_FLATTEN, "f", n4));
    net->input = x;
    NC_CHECK(infer(net), "shapes");
    NC_CHECK(nc_bias_carrier(net, n1) == c1, "conv feeds n1");
    NC_CHECK(nc_bias_carrier(net, n2) == c2, "the conv summand of the residual add");
    NC_CHECK(nc_bias_carrier(net, n3) == -1, "no carrier through a padded AvgPool");
    NC_CHECK(nc_bias_carrier(net, n4) == c4, "through a MaxPool: the conv");
    nc_net_free(net);
}

/* ---- its work, for a time plan ------------------------------------------------- */

static const nc_engine_ops *cpu_ops;
static double counted_observed, counted_plain; /* image-steps the wrapped engine ran */

static nc_status counting_forward(nc_engine *e, const nc_tensor *input, const nc_run_options *opts, nc_tensor **out,
                                  nc_error *err)
{
    double steps = (double)input->shape[0] * (opts->mode == NC_MODE_SNN ? opts->T : 1);
    if (opts->observer)
        counted_observed += steps;
    else
        counted_plain += steps;
    return cpu_ops->forward(e, input, opts, out, err);
}

static void test_work_is_what_it_does(void)
{
    mlp_fixture f;
    if (!mlp_fixture_open(&f))
        return;
    cpu_ops = f.e->ops;
    nc_engine_ops counting = *cpu_ops;
    counting.forward = counting_forward;
    f.e->ops = &counting;
    nc_bias_calib_options o = {.T = T, .images = 40, .batch_size = 16, .check_first = 40, .check_count = 24};
    double observed = 0, plain = 0;
    nc_bias_calib_work(f.net, &o, f.ds->count, &observed, &plain);
    nc_bias_calib_result r;
    nc_error err = {0};
    counted_observed = counted_plain = 0;
    NC_CHECK(nc_bias_calibrate(f.e, f.net, f.ds, &o, &r, &err) == NC_OK, "calibrate: %s", err.message);
    NC_CHECK(observed == counted_observed && plain == counted_plain,
             "declared %.0f observed + %.0f plain image-steps, ran %.0f + %.0f", observed, plain, counted_observed,
             counted_plain);
    NC_CHECK(observed == 40.0 * (1 + T * 3), "one ANN pass, then 3 SNN passes (2 layers corrected)");
    nc_bias_calib_result_clear(&r);
    /* the rate of one observed pass: one batch, the net untouched */
    double rate = 0;
    counted_observed = counted_plain = 0;
    NC_CHECK(nc_bias_calib_pass_rate(f.e, f.clone, f.ds, &o, &rate, &err) == NC_OK, "pass rate: %s", err.message);
    NC_CHECK(rate > 0 && counted_observed == 2 * 16.0 * T && counted_plain == 0,
             "one batch of 16 over T steps, twice (the first untimed): %g s", rate);
    nc_net *fresh = small_mlp();
    const nc_node *b = &f.clone->nodes[nc_net_find(f.clone, "fc1")], *b0 = &fresh->nodes[nc_net_find(fresh, "fc1")];
    NC_CHECK(memcmp(b->bias->data, b0->bias->data, H1 * sizeof(float)) == 0, "the pass rate changes no bias");
    nc_net_free(fresh);
    f.e->ops = cpu_ops;
    mlp_fixture_close(&f);
}

int main(void)
{
    NC_RUN(test_matches_direct_computation);
    NC_RUN(test_check_rule);
    NC_RUN(test_carriers);
    NC_RUN(test_work_is_what_it_does);
    return nc_test_done();
}
