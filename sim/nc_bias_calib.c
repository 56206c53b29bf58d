/* nc_bias_calib.c — per-channel bias corrections for T (nc_bias_calib.h).
 * Passes over the calibration images with an observer that sums every IF
 * layer's output per channel: one ANN pass (the targets), then SNN passes,
 * one after each layer's correction, so each layer is corrected with the
 * layers before it already corrected. */
#include "nc_bias_calib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nc_evaluate.h"

void nc_bias_calib_result_clear(nc_bias_calib_result *r)
{
    if (!r)
        return;
    for (int l = 0; l < r->n_layers; l++)
        free(r->layers[l].delta);
    free(r->layers);
    memset(r, 0, sizeof *r);
}

/* ---- the carrier of a layer's correction ---------------------------------- */

static int carrier_from(const nc_net *net, int src, int channels, int depth)
{
    const nc_node *n = &net->nodes[src];
    if (depth > 16 || nc_net_consumers(net, src) != 1)
        return -1; /* a shared value: shifting it would move other layers too */
    switch (n->kind) {
    case NC_NODE_CONV2D:
    case NC_NODE_DENSE:
    case NC_NODE_AFFINE:
        return nc_node_channels(n) == channels ? src : -1;
    case NC_NODE_ADD: /* shifting one summand shifts the sum */
        for (int k = 0; k < n->n_inputs; k++) {
            int c = carrier_from(net, n->inputs[k], channels, depth + 1);
            if (c >= 0)
                return c;
        }
        return -1;
    case NC_NODE_AVGPOOL: /* an average of shifted values, exactly when no padding is counted */
        if (n->pad[0] || n->pad[1] || n->pad[2] || n->pad[3])
            return -1;
        return carrier_from(net, n->inputs[0], channels, depth + 1);
    case NC_NODE_MAXPOOL: /* max(x + Δ) = max(x) + Δ (also of the running sums of pre-spike pooling) */
        return carrier_from(net, n->inputs[0], channels, depth + 1);
    default:
        return -1;
    }
}

int nc_bias_carrier(const nc_net *net, int node)
{
    const nc_node *n = &net->nodes[node];
    if (n->kind != NC_NODE_NEURON || n->n_inputs < 1)
        return -1;
    return carrier_from(net, n->inputs[0], nc_node_channels(n), 0);
}

/* ---- per-channel sums of every IF layer --------------------------------------- */

typedef struct layer_sums {
    int node, channels;
    int64_t inner;
    double *sum;        /* [channels] */
    int64_t rows;       /* rows summed (N in ANN mode, T·N in SNN mode) */
} layer_sums;

typedef struct calib_state {
    nc_engine *engine;
    nc_net *net;
    const nc_dataset *data;
    const nc_bias_calib_options *o;
    int n_layers;
    int *layer_of_node; /* [n_nodes]: −1 or the layer */
    layer_sums *sums;
    nc_tensor *batch;
    int64_t images;
    int batch_size;
    int passes_done, passes_total;
} calib_state;

static void observe_sums(void *user, int node, const float *data, int64_t rows, int64_t per_row)
{
    calib_state *cs = user;
    int l = cs->layer_of_node[node];
    if (l < 0)
        return;
    layer_sums *s = &cs->sums[l];
    for (int64_t r = 0; r < rows; r++)
        for (int c = 0; c < s->channels; c++) {
            const float *x = data + r * per_row + (int64_t)c * s->inner;
            double acc = 0;
            for (int64_t k = 0; k < s->inner; k++)
                acc += x[k];
            s->sum[c] += acc;
        }
    s->rows += rows;
}

/* mean[l][c] of every layer over one pass in `mode` (SNN: over the T steps). */
static nc_status run_pass(calib_state *cs, nc_mode mode, double **mean, nc_error *err)
{
    for (int l = 0; l < cs->n_layers; l++) {
        memset(cs->sums[l].sum, 0, (size_t)cs->sums[l].channels * sizeof(double));
        cs->sums[l].rows = 0;
    }
    nc_observer obs = {.observe = observe_sums, .user = cs};
    nc_run_options ro = {.mode = mode, .T = mode == NC_MODE_SNN ? cs->o->T : 1, .observer = &obs};
    for (int64_t first = 0; first < cs->images; first += cs->batch_size) {
        int64_t n = cs->images - first < cs->batch_size ? cs->images - first : cs->batch_size;
        cs->batch->shape[0] = n;
        nc_dataset_batch(cs->data, first, n, cs->batch->data, NULL);
        nc_tensor *out = NULL;
        nc_status st = nc_engine_forward(cs->engine, cs->batch, &ro, &out, err);
        nc_tensor_free(out);
        if (st != NC_OK)
            return st;
    }
    for (int l = 0; l < cs->n_layers; l++) {
        const layer_sums *s = &cs->sums[l];
        for (int c = 0; c < s->channels; c++)
            mean[l][c] = s->rows > 0 ? s->sum[c] / ((double)s->rows * (double)s->inner) : 0.0;
    }
    nc_progress p = {"calibrate-bias", ++cs->passes_done, cs->passes_total, 0};
    if (cs->o->progress && cs->o->progress(cs->o->progress_user, &p))
        return nc_fail(err, NC_ERR_CANCELLED, "bias calibration cancelled after %d of %d passes", cs->passes_done,
                       cs->passes_total);
    return NC_OK;
}

/* SNN accuracy at T on the check images (−1 without). */
static nc_status check_accuracy(calib_state *cs, double *accuracy, nc_error *err)
{
    const nc_bias_calib_options *o = cs->o;
    *accuracy = -1;
    if (o->check_count <= 0)
        return NC_OK;
    return nc_evaluate_snn_range(cs->engine, cs->data, o->check_first, o->check_count, o->T, cs->batch_size,
                                 accuracy, err);
}

/* ---- set-up ------------------------------------------------------------------ */

static nc_status setup(calib_state *cs, nc_bias_calib_result *res, nc_error *err)
{
    const nc_net *net = cs->net;
    cs->layer_of_node = malloc((size_t)net->n_nodes * sizeof(int));
    if (!cs->layer_of_node)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for bias calibration");
    for (int i = 0; i < net->n_nodes; i++) {
        const nc_node *n = &net->nodes[i];
        int is_if = n->kind == NC_NODE_NEURON && n->neuron.model == NC_NEURON_IF;
        cs->layer_of_node[i] = is_if ? cs->n_layers++ : -1;
    }
    if (cs->n_layers == 0)
        return nc_fail(err, NC_ERR_ARGUMENT, "%s: bias calibration corrects IF layers; convert the network first",
                       net->source_path);
    cs->sums = calloc((size_t)cs->n_layers, sizeof *cs->sums);
    res->layers = calloc((size_t)cs->n_layers, sizeof *res->layers);
    if (!cs->sums || !res->layers)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for bias calibration");
    res->n_layers = cs->n_layers;
    for (int i = 0; i < net->n_nodes; i++) {
        int l = cs->layer_of_node[i];
        if (l < 0)
            continue;
        const nc_node *n = &net->nodes[i];
        int channels = nc_node_channels(n) > 0 ? nc_node_channels(n) : 1;
        cs->sums[l] = (layer_sums){.node = i, .channels = channels, .inner = nc_node_numel(n) / channels};
        cs->sums[l].sum = calloc((size_t)channels, sizeof(double));
        res->layers[l] = (nc_bias_layer){.node = i, .carrier = nc_bias_carrier(net, i), .channels = channels};
        res->layers[l].delta = calloc((size_t)channels, sizeof(float));
        if (!cs->sums[l].sum || !res->layers[l].delta)
            return nc_fail(err, NC_ERR_MEMORY, "out of memory for bias calibration");
    }
    const nc_node *in = &net->nodes[net->input];
    int64_t shape[NC_MAX_DIMS] = {cs->batch_size};
    for (int d = 0; d < in->ndim && d + 1 < NC_MAX_DIMS; d++)
        shape[d + 1] = in->shape[d];
    cs->batch = nc_tensor_new(in->ndim + 1, shape);
    return cs->batch ? NC_OK : nc_fail(err, NC_ERR_MEMORY, "out of memory for a batch");
}

static void free_state(calib_state *cs)
{
    for (int l = 0; cs->sums && l < cs->n_layers; l++)
        free(cs->sums[l].sum);
    free(cs->sums);
    free(cs->layer_of_node);
    nc_tensor_free(cs->batch);
}

/* ---- applying and undoing ------------------------------------------------------ */

static nc_status add_to_bias(nc_node *carrier, const float *delta, int channels, nc_error *err)
{
    if (!carrier->bias) {
        int64_t shape[1] = {channels};
        carrier->bias = nc_tensor_new(1, shape);
        if (!carrier->bias)
            return nc_fail(err, NC_ERR_MEMORY, "out of memory for a bias of '%s'", carrier->name);
        memset(carrier->bias->data, 0, (size_t)channels * sizeof(float));
    }
    if (nc_tensor_numel(carrier->bias) != channels)
        return nc_fail(err, NC_ERR_SHAPE, "'%s' has %lld bias values for %d channels", carrier->name,
                       (long long)nc_tensor_numel(carrier->bias), channels);
    for (int c = 0; c < channels; c++)
        carrier->bias->data[c] += delta[c];
    return NC_OK;
}

/* The biases of `saved` (a clone taken before) back into net. */
static void restore_biases(nc_net *net, const nc_net *saved, const nc_bias_calib_result *res)
{
    for (int l = 0; l < res->n_layers; l++) {
        int k = res->layers[l].carrier;
        if (k < 0)
            continue;
        nc_tensor_free(net->nodes[k].bias);
        net->nodes[k].bias = saved->nodes[k].bias ? nc_tensor_copy(saved->nodes[k].bias) : NULL;
    }
}

static double mean_error(const double *snn, const double *ann, int channels)
{
    double e = 0;
    for (int c = 0; c < channels; c++)
        e += snn[c] - ann[c];
    return e / channels;
}

/* Layer by layer: an SNN pass when the net changed since the last one, then
 * the layer's Δ; a last pass gives every layer's error after. */
static nc_status correct_layers(calib_state *cs, nc_bias_calib_result *res, double **ann, double **snn,
                                nc_error *err)
{
    nc_status st = run_pass(cs, NC_MODE_ANN, ann, err);
    int stale = 1;
    for (int l = 0; st == NC_OK && l <= cs->n_layers; l++) {
        if (stale && (st = run_pass(cs, NC_MODE_SNN, snn, err)) != NC_OK)
            break;
        stale = 0;
        if (l == 0)
            for (int k = 0; k < cs->n_layers; k++)
                res->layers[k].error_before = mean_error(snn[k], ann[k], res->layers[k].channels);
        if (l == cs->n_layers || res->layers[l].carrier < 0)
            continue;
        nc_bias_layer *bl = &res->layers[l];
        for (int c = 0; c < bl->channels; c++)
            bl->delta[c] = (float)(ann[l][c] - snn[l][c]);
        st = add_to_bias(&cs->net->nodes[bl->carrier], bl->delta, bl->channels, err);
        if (st == NC_OK)
            st = nc_engine_load(cs->engine, cs->net, err);
        stale = 1;
    }
    for (int k = 0; st == NC_OK && k < cs->n_layers; k++)
        res->layers[k].error_after = mean_error(snn[k], ann[k], res->layers[k].channels);
    return st;
}

static void note_uncorrected(const nc_net *net, nc_bias_calib_result *res)
{
    size_t len = strlen(res->notes);
    for (int l = 0; l < res->n_layers; l++)
        if (res->layers[l].carrier < 0 && len < sizeof res->notes)
            len += (size_t)snprintf(res->notes + len, sizeof res->notes - len,
                                    "%s: no bias of its own feeds it (a shared value, or a padded AvgPool): not corrected\n",
                                    net->nodes[res->layers[l].node].name);
}

static void free_table(double **t, int n)
{
    for (int l = 0; t && l < n; l++)
        free(t[l]);
    free(t);
}

/* [layer][channel] doubles, or NULL (nothing left allocated). */
static double **new_table(const nc_bias_calib_result *res)
{
    double **t = calloc((size_t)res->n_layers, sizeof(double *));
    for (int l = 0; t && l < res->n_layers; l++)
        if (!(t[l] = calloc((size_t)res->layers[l].channels, sizeof(double)))) {
            free_table(t, res->n_layers);
            return NULL;
        }
    return t;
}

/* The images the passes read: the option or the default, at most all of the set. */
static int64_t images_of(const nc_bias_calib_options *o, int64_t count)
{
    int64_t images = o->images > 0 ? o->images : NC_BIAS_CALIB_DEFAULT_IMAGES;
    return images < count ? images : count;
}

nc_status nc_bias_calibrate(nc_engine *engine, nc_net *net, const nc_dataset *calib,
                            const nc_bias_calib_options *o, nc_bias_calib_result *result, nc_error *err)
{
    memset(result, 0, sizeof *result);
    if (o->T < 1)
        return nc_fail(err, NC_ERR_ARGUMENT, "bias calibration needs T ≥ 1, got %d", o->T);
    nc_status st = nc_check_dataset_fits(net, calib, err);
    if (st != NC_OK)
        return st;
    if (o->check_count < 0 || o->check_first < 0 || o->check_first + o->check_count > calib->count)
        return nc_fail(err, NC_ERR_ARGUMENT, "%s: check images %lld..%lld are outside its %lld images", calib->path,
                       (long long)o->check_first, (long long)(o->check_first + o->check_count),
                       (long long)calib->count);
    calib_state cs = {.engine = engine, .net = net, .data = calib, .o = o};
    cs.images = images_of(o, calib->count);
    cs.batch_size = o->batch_size > 0 ? o->batch_size : 100;
    result->T = o->T;
    result->images = cs.images;
    nc_net *saved = nc_net_clone(net);
    st = saved ? setup(&cs, result, err) : nc_fail(err, NC_ERR_MEMORY, "out of memory for a copy of the network");
    cs.passes_total = cs.n_layers + 2;
    double **ann = st == NC_OK ? new_table(result) : NULL, **snn = st == NC_OK ? new_table(result) : NULL;
    if (st == NC_OK && (!ann || !snn))
        st = nc_fail(err, NC_ERR_MEMORY, "out of memory for bias calibration");
    if (st == NC_OK)
        st = nc_engine_load(engine, net, err);
    if (st == NC_OK)
        st = check_accuracy(&cs, &result->check_before, err);
    if (st == NC_OK)
        st = correct_layers(&cs, result, ann, snn, err);
    if (st == NC_OK)
        st = check_accuracy(&cs, &result->check_after, err);
    result->kept = st == NC_OK && result->check_after >= result->check_before;
    if (saved && (st != NC_OK || !result->kept)) { /* nothing half-corrected is left behind */
        restore_biases(net, saved, result);
        nc_status reload = nc_engine_load(engine, net, st == NC_OK ? err : NULL);
        st = st == NC_OK ? reload : st;
    }
    if (st == NC_OK && !result->kept)
        snprintf(result->notes, sizeof result->notes,
                 "the corrections lowered the held-out SNN accuracy at T = %d (%.4f → %.4f): undone\n", o->T,
                 result->check_before, result->check_after);
    note_uncorrected(net, result);
    free_table(ann, result->n_layers);
    free_table(snn, result->n_layers);
    free_state(&cs);
    nc_net_free(saved);
    return st;
}

/* ---- what it costs, for a time plan ------------------------------------------- */

void nc_bias_calib_work(const nc_net *net, const nc_bias_calib_options *o, int64_t count, double *observed,
                        double *plain)
{
    int corrected = 0;
    for (int i = 0; i < net->n_nodes; i++) {
        const nc_node *n = &net->nodes[i];
        corrected += n->kind == NC_NODE_NEURON && n->neuron.model == NC_NEURON_IF && nc_bias_carrier(net, i) >= 0;
    }
    /* as correct_layers runs them: the ANN pass, the first SNN pass, one more after each correction */
    *observed = (double)images_of(o, count) * (1.0 + (double)o->T * (1 + corrected));
    *plain = o->check_count > 0 ? 2.0 * (double)o->check_count * o->T : 0;
}

nc_status nc_bias_calib_pass_rate(nc_engine *engine, nc_net *net, const nc_dataset *calib,
                                  const nc_bias_calib_options *o, double *seconds_per_image_step, nc_error *err)
{
    *seconds_per_image_step = 0;
    if (o->T < 1)
        return nc_fail(err, NC_ERR_ARGUMENT, "bias calibration needs T ≥ 1, got %d", o->T);
    nc_status st = nc_check_dataset_fits(net, calib, err);
    if (st != NC_OK)
        return st;
    nc_bias_calib_options quiet = *o; /* a measurement, not a pass of the stage: no progress */
    quiet.progress = NULL;
    calib_state cs = {.engine = engine, .net = net, .data = calib, .o = &quiet};
    cs.batch_size = o->batch_size > 0 ? o->batch_size : 100;
    cs.images = images_of(o, calib->count);
    cs.images = cs.images < cs.batch_size ? cs.images : cs.batch_size;
    nc_bias_calib_result scratch = {0};
    st = setup(&cs, &scratch, err);
    double **snn = st == NC_OK ? new_table(&scratch) : NULL;
    if (st == NC_OK && !snn)
        st = nc_fail(err, NC_ERR_MEMORY, "out of memory for bias calibration");
    if (st == NC_OK && engine->net != net)
        st = nc_engine_load(engine, net, err);
    if (st == NC_OK) /* untimed: an engine's first pass of a kind sets up what the next ones reuse */
        st = run_pass(&cs, NC_MODE_SNN, snn, err);
    double began = nc_now();
    if (st == NC_OK)
        st = run_pass(&cs, NC_MODE_SNN, snn, err);
    if (st == NC_OK && cs.images > 0)
        *seconds_per_image_step = (nc_now() - began) / ((double)cs.images * o->T);
    free_table(snn, scratch.n_layers);
    nc_bias_calib_result_clear(&scratch);
    free_state(&cs);
    return st;
}
