/* nc_convert.c — ANN → QCFS → SNN rewrites of the IR (see nc_convert.h). */
#include "nc_convert.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static nc_status report_oom(nc_error *err)
{
    return nc_fail(err, NC_ERR_MEMORY, "conversion: out of memory for the report");
}

static int is_neuron(const nc_node *n, nc_neuron_model model)
{
    return n->kind == NC_NODE_NEURON && n->neuron.model == model;
}

/* ---- MaxPool preparation ---------------------------------------------------- */

/* 1 if node i's output will carry spikes in the SNN: a neuron's output, or
 * anything that only moves/sums such outputs.  Weighted layers turn spikes
 * back into currents; the input node is an analog current (direct encoding). */
static int carries_spikes(const nc_net *net, int i)
{
    const nc_node *n = &net->nodes[i];
    switch (n->kind) {
    case NC_NODE_NEURON: return 1;
    case NC_NODE_INPUT:
    case NC_NODE_CONV2D:
    case NC_NODE_DENSE:
    case NC_NODE_AFFINE: return 0;
    default:
        for (int k = 0; k < n->n_inputs; k++)
            if (carries_spikes(net, n->inputs[k]))
                return 1;
        return 0;
    }
}

/* Exchanges neuron r and the MaxPool p that is its only consumer, so that the
 * pool reads the neuron's input and the neuron reads the pool.  Node p keeps
 * its index, so the pool's consumers now read the neuron; nothing else read r. */
static void swap_neuron_pool(nc_net *net, int r, int p)
{
    nc_node tmp = net->nodes[r];
    net->nodes[r] = net->nodes[p];
    net->nodes[p] = tmp;
    int source = net->nodes[p].inputs[0]; /* what the neuron read */
    net->nodes[r].inputs[0] = source;
    net->nodes[p].inputs[0] = r;
}

static nc_status pool_to_avg(nc_net *net, int p, nc_error *err)
{
    nc_node *n = &net->nodes[p];
    n->kind = NC_NODE_AVGPOOL;
    n->count_include_pad = 0; /* max ignores padding; so does this average */
    n->maxpool_strategy = NC_MAXPOOL_AVG;
    if (!nc_report_add(&net->report, n->name, "MaxPool", 0, NC_SUPPORT_APPROXIMATED, n->name,
                       "MaxPool replaced by AvgPool: changes the function; accuracy of the ANN may drop (same %dx%d "
                       "window, padding not counted)",
                       n->kernel[0], n->kernel[1]))
        return report_oom(err);
    return NC_OK;
}

static nc_status pool_gated(nc_net *net, int p, const char *why, nc_error *err)
{
    nc_node *n = &net->nodes[p];
    n->maxpool_strategy = NC_MAXPOOL_GATED;
    if (!nc_report_add(&net->report, n->name, "MaxPool", 0, NC_SUPPORT_APPROXIMATED, n->name,
                       "gated spiking MaxPool%s: in the SNN it passes the spikes of the input with the highest "
                       "running rate, which only approximates the max of the rates",
                       why))
        return report_oom(err);
    return NC_OK;
}

static nc_status pool_on_currents(nc_net *net, int p, nc_error *err)
{
    nc_node *n = &net->nodes[p];
    n->maxpool_strategy = NC_MAXPOOL_PRE_SPIKE;
    if (!nc_report_add(&net->report, n->name, "MaxPool", 0, NC_SUPPORT_CONVERTED, n->name,
                       "MaxPool reads currents, not spikes: max over input currents, exact"))
        return report_oom(err);
    return NC_OK;
}

/* PRE_SPIKE for the pool at p: swap with its neuron when allowed. */
static nc_status pool_pre_spike(nc_net *net, int p, nc_error *err)
{
    int r = net->nodes[p].inputs[0];
    if (!carries_spikes(net, p))
        return pool_on_currents(net, p, err);
    const nc_node *in = &net->nodes[r];
    if (in->kind != NC_NODE_NEURON)
        return pool_gated(net, p, " (its input carries spikes but is not a neuron, so the max cannot move before one)",
                          err);
    if (nc_net_consumers(net, r) != 1 || in->n_inputs != 1) {
        char why[NC_NAME_MAX + 96];
        snprintf(why, sizeof why, " (neuron '%s' also feeds other nodes, so the max cannot move before it)",
                 in->name);
        return pool_gated(net, p, why, err);
    }
    swap_neuron_pool(net, r, p);
    const nc_node *pool = &net->nodes[r], *neuron = &net->nodes[p];
    net->nodes[r].maxpool_strategy = NC_MAXPOOL_PRE_SPIKE;
    if (!nc_report_add(&net->report, pool->name, "MaxPool", 0, NC_SUPPORT_CONVERTED, pool->name,
                       "MaxPool moved before %s '%s' (max and a non-decreasing activation commute: the ANN is "
                       "unchanged); the SNN takes the max over input currents instead of spikes",
                       nc_neuron_model_name(neuron->neuron.model), neuron->name))
        return report_oom(err);
    return NC_OK;
}

nc_status nc_convert_prepare(nc_net *net, nc_maxpool_strategy strategy, nc_error *err)
{
    if (strategy != NC_MAXPOOL_AVG && strategy != NC_MAXPOOL_PRE_SPIKE && strategy != NC_MAXPOOL_GATED)
        return nc_fail(err, NC_ERR_ARGUMENT, "conversion: unknown MaxPool strategy %d", (int)strategy);
    /* Increasing index: after a swap the neuron sits at the pool's old index,
     * so a second MaxPool right after it is met later and swaps again. */
    for (int p = 0; p < net->n_nodes; p++) {
        if (net->nodes[p].kind != NC_NODE_MAXPOOL || net->nodes[p].n_inputs != 1)
            continue;
        nc_status st;
        if (strategy == NC_MAXPOOL_AVG)
            st = pool_to_avg(net, p, err);
        else if (strategy == NC_MAXPOOL_PRE_SPIKE)
            st = pool_pre_spike(net, p, err);
        else if (carries_spikes(net, p))
            st = pool_gated(net, p, "", err);
        else
            st = pool_on_currents(net, p, err);
        if (st != NC_OK)
            return st;
    }
    return nc_net_infer_shapes(net, err);
}

/* ---- ReLU → QCFS ------------------------------------------------------------ */

int nc_convert_has_qcfs(const nc_net *net)
{
    for (int i = 0; i < net->n_nodes; i++)
        if (is_neuron(&net->nodes[i], NC_NEURON_QCFS))
            return 1;
    return 0;
}

int nc_convert_count_relu(const nc_net *net)
{
    int n = 0;
    for (int i = 0; i < net->n_nodes; i++)
        n += is_neuron(&net->nodes[i], NC_NEURON_RELU) || is_neuron(&net->nodes[i], NC_NEURON_CLIP);
    return n;
}

/* Checks that node i can become QCFS with the given thresholds. */
static nc_status check_relu(const nc_net *net, int i, const nc_thresholds *t, nc_error *err)
{
    const nc_node *n = &net->nodes[i];
    if (n->neuron.model == NC_NEURON_CLIP && n->neuron.clip_min != 0.0f)
        return nc_fail(err, NC_ERR_UNSUPPORTED,
                       "node '%s': Clip(min = %g, max = %g) cannot become a spiking neuron; only Clip(0, c) "
                       "(ReLU-like, e.g. ReLU6) can",
                       n->name, n->neuron.clip_min, n->neuron.clip_max);
    if (n->neuron.model == NC_NEURON_CLIP && !(n->neuron.clip_max > 0))
        return nc_fail(err, NC_ERR_UNSUPPORTED, "node '%s': Clip(0, %g) is always 0: nothing to convert", n->name,
                       n->neuron.clip_max);
    int count = t && i < t->n_nodes ? t->count[i] : 0;
    if (count < 1)
        return nc_fail(err, NC_ERR_ARGUMENT, "node '%s': no threshold for this ReLU; run calibration first",
                       n->name);
    if (count != 1 && count != nc_node_channels(n))
        return nc_fail(err, NC_ERR_SHAPE, "node '%s': %d thresholds for %d channels", n->name, count,
                       nc_node_channels(n));
    for (int k = 0; k < count; k++)
        if (!(t->values[i][k] > 0) || !isfinite(t->values[i][k]))
            return nc_fail(err, NC_ERR_ARGUMENT, "node '%s': threshold %d is %g; thresholds must be positive",
                           n->name, k, t->values[i][k]);
    return NC_OK;
}

static void range_of(const float *v, int n, float *lo, float *hi)
{
    *lo = *hi = v[0];
    for (int k = 1; k < n; k++) {
        *lo = fminf(*lo, v[k]);
        *hi = fmaxf(*hi, v[k]);
    }
}

/* Writes "λ = 1.23" or "λ per channel in [a, b]" into buf. */
static const char *lambda_text(const float *v, int n, char *buf, size_t size)
{
    float lo, hi;
    range_of(v, n, &lo, &hi);
    if (n == 1)
        snprintf(buf, size, "λ = %.4g", v[0]);
    else
        snprintf(buf, size, "λ per channel (%d) in [%.4g, %.4g]", n, lo, hi);
    return buf;
}

/* Rewrites node i (already checked) into QCFS with λ = λs (ownership taken). */
static nc_status relu_to_qcfs(nc_net *net, int i, float *lambda, int n, int capped, int levels, nc_error *err)
{
    nc_node *node = &net->nodes[i];
    int was_clip = node->neuron.model == NC_NEURON_CLIP;
    float clip_max = node->neuron.clip_max;
    free(node->neuron.threshold);
    node->neuron.threshold = lambda;
    node->neuron.n_threshold = n;
    node->neuron.model = NC_NEURON_QCFS;
    node->neuron.levels = levels;
    node->neuron.shift = 0.5f;
    char lt[128];
    lambda_text(lambda, n, lt, sizeof lt);
    nc_report_entry *e;
    if (was_clip)
        e = nc_report_add(&net->report, node->name, "Clip", 0, NC_SUPPORT_CONVERTED, node->name,
                          "Clip(0, %g) treated as ReLU: QCFS(%s, L = %d, φ = 0.5), λ = min(calibrated, %g); "
                          "%d of %d thresholds capped at %g",
                          clip_max, lt, levels, clip_max, capped, n, clip_max);
    else
        e = nc_report_add(&net->report, node->name, "Relu", 0, NC_SUPPORT_CONVERTED, node->name,
                          "ReLU → QCFS(%s, L = %d, φ = 0.5), λ from calibration", lt, levels);
    return e ? NC_OK : report_oom(err);
}

/* λ of node i: the thresholds, capped at c for a Clip(0, c). */
static float *lambda_of(const nc_node *n, const nc_thresholds *t, int i, int *capped)
{
    int count = t->count[i];
    float *v = malloc((size_t)count * sizeof *v);
    if (!v)
        return NULL;
    *capped = 0;
    for (int k = 0; k < count; k++) {
        v[k] = t->values[i][k];
        if (n->neuron.model == NC_NEURON_CLIP && v[k] > n->neuron.clip_max) {
            v[k] = n->neuron.clip_max;
            (*capped)++;
        }
    }
    return v;
}

static nc_status fail_no_relu(const nc_net *net, nc_error *err)
{
    const char *name = net->source_path[0] ? net->source_path : "the network";
    return nc_fail(err, NC_ERR_UNSUPPORTED,
                   "%s has no ReLU activation: nothing to convert to spiking neurons (only networks whose "
                   "activations are ReLU or Clip(0, c) can be converted)",
                   name);
}

nc_status nc_convert_to_qcfs(nc_net *net, const nc_thresholds *thresholds, int levels, nc_error *err)
{
    if (nc_convert_count_relu(net) == 0)
        return nc_convert_has_qcfs(net) ? NC_OK : fail_no_relu(net, err);
    if (levels < 1)
        return nc_fail(err, NC_ERR_ARGUMENT, "conversion: QCFS needs L ≥ 1 (got %d)", levels);
    /* Check every node first so that a failure changes nothing. */
    for (int i = 0; i < net->n_nodes; i++) {
        const nc_node *n = &net->nodes[i];
        if (is_neuron(n, NC_NEURON_RELU) || is_neuron(n, NC_NEURON_CLIP)) {
            nc_status st = check_relu(net, i, thresholds, err);
            if (st != NC_OK)
                return st;
        }
    }
    for (int i = 0; i < net->n_nodes; i++) {
        const nc_node *n = &net->nodes[i];
        if (!is_neuron(n, NC_NEURON_RELU) && !is_neuron(n, NC_NEURON_CLIP))
            continue;
        int capped;
        float *lambda = lambda_of(n, thresholds, i, &capped);
        if (!lambda)
            return nc_fail(err, NC_ERR_MEMORY, "conversion: out of memory");
        nc_status st = relu_to_qcfs(net, i, lambda, thresholds->count[i], capped, levels, err);
        if (st != NC_OK)
            return st;
    }
    return nc_net_infer_shapes(net, err);
}

/* ---- QCFS → IF ---------------------------------------------------------------- */

nc_snn_options nc_snn_options_default(void)
{
    nc_snn_options o = {0.5f, NC_RESET_SUBTRACT, NC_FIRE_GE};
    return o;
}

static nc_status check_snn_ready(const nc_net *net, const nc_snn_options *o, nc_error *err)
{
    if (!(o->v0_fraction >= 0 && o->v0_fraction <= 1))
        return nc_fail(err, NC_ERR_ARGUMENT, "conversion: v0 fraction must be in [0, 1] (got %g)", o->v0_fraction);
    if (o->reset != NC_RESET_SUBTRACT && o->reset != NC_RESET_ZERO)
        return nc_fail(err, NC_ERR_ARGUMENT, "conversion: unknown reset mode %d", (int)o->reset);
    if (o->compare != NC_FIRE_GE && o->compare != NC_FIRE_GT)
        return nc_fail(err, NC_ERR_ARGUMENT, "conversion: unknown firing comparison %d", (int)o->compare);
    int spiking = 0;
    for (int i = 0; i < net->n_nodes; i++) {
        const nc_node *n = &net->nodes[i];
        if (is_neuron(n, NC_NEURON_RELU) || is_neuron(n, NC_NEURON_CLIP))
            return nc_fail(err, NC_ERR_ARGUMENT,
                           "node '%s' is still a %s: calibrate and convert to QCFS before converting to an SNN",
                           n->name, nc_neuron_model_name(n->neuron.model));
        spiking += is_neuron(n, NC_NEURON_QCFS) || is_neuron(n, NC_NEURON_IF);
    }
    return spiking ? NC_OK : fail_no_relu(net, err);
}

nc_status nc_convert_to_snn(nc_net *net, const nc_snn_options *opts, nc_error *err)
{
    nc_snn_options o = opts ? *opts : nc_snn_options_default();
    nc_status st = check_snn_ready(net, &o, err);
    if (st != NC_OK)
        return st;
    for (int i = 0; i < net->n_nodes; i++) {
        nc_node *n = &net->nodes[i];
        if (!is_neuron(n, NC_NEURON_QCFS))
            continue;
        n->neuron.model = NC_NEURON_IF; /* θ = λ: the threshold array is kept */
        n->neuron.v0_fraction = o.v0_fraction;
        n->neuron.reset = o.reset;
        n->neuron.compare = o.compare;
        char lt[128];
        lambda_text(n->neuron.threshold, n->neuron.n_threshold, lt, sizeof lt);
        if (!nc_report_add(&net->report, n->name, "QCFS", 0, NC_SUPPORT_CONVERTED, n->name,
                           "QCFS(%s, L = %d) → IF(θ = λ, v0 = %gθ, reset %s, fire when v %s θ)", lt,
                           n->neuron.levels, o.v0_fraction, o.reset == NC_RESET_SUBTRACT ? "by subtraction" : "to zero",
                           o.compare == NC_FIRE_GE ? "≥" : ">"))
            return report_oom(err);
    }
    return NC_OK;
}

/* ---- summary ------------------------------------------------------------------- */

static void summarise(const nc_net *net, int i, nc_convert_layer *row)
{
    const nc_node *n = &net->nodes[i];
    memset(row, 0, sizeof *row);
    row->node = i;
    row->name = n->name;
    row->model = n->neuron.model;
    row->n_threshold = n->neuron.n_threshold;
    row->levels = (n->neuron.model == NC_NEURON_QCFS || n->neuron.model == NC_NEURON_IF) ? n->neuron.levels : 0;
    if (n->neuron.n_threshold < 1 || !n->neuron.threshold)
        return;
    double sum = 0;
    range_of(n->neuron.threshold, n->neuron.n_threshold, &row->theta_min, &row->theta_max);
    for (int k = 0; k < n->neuron.n_threshold; k++)
        sum += n->neuron.threshold[k];
    row->theta_mean = (float)(sum / n->neuron.n_threshold);
}

int nc_convert_summary(const nc_net *net, nc_convert_layer *rows, int max)
{
    int count = 0;
    for (int i = 0; i < net->n_nodes; i++) {
        if (net->nodes[i].kind != NC_NODE_NEURON)
            continue;
        if (rows && count < max)
            summarise(net, i, &rows[count]);
        count++;
    }
    return count;
}

static size_t append(char *buf, size_t size, size_t used, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static size_t append(char *buf, size_t size, size_t used, const char *fmt, ...)
{
    if (used >= size)
        return used;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + used, size - used, fmt, ap);
    va_end(ap);
    return n < 0 ? used : used + (size_t)n;
}

const char *nc_convert_summary_text(const nc_net *net, const char *method, char *buf, size_t size)
{
    if (!size)
        return buf;
    buf[0] = 0;
    size_t used = 0;
    if (method)
        used = append(buf, size, used, "method: %s\n", method);
    used = append(buf, size, used, "%-24s %-5s %10s %10s %10s %10s %4s\n", "layer", "model", "thresholds", "th_min",
                  "th_mean", "th_max", "L");
    for (int i = 0; i < net->n_nodes; i++) {
        if (net->nodes[i].kind != NC_NODE_NEURON)
            continue;
        nc_convert_layer r;
        summarise(net, i, &r);
        char count[32];
        snprintf(count, sizeof count, "%s", r.n_threshold == 0 ? "-" : r.n_threshold == 1 ? "layer" : "");
        if (r.n_threshold > 1)
            snprintf(count, sizeof count, "%d ch", r.n_threshold);
        if (r.n_threshold == 0)
            used = append(buf, size, used, "%-24s %-5s %10s %10s %10s %10s %4s\n", r.name,
                          nc_neuron_model_name(r.model), count, "-", "-", "-", "-");
        else
            used = append(buf, size, used, "%-24s %-5s %10s %10.4g %10.4g %10.4g %4d\n", r.name,
                          nc_neuron_model_name(r.model), count, r.theta_min, r.theta_mean, r.theta_max, r.levels);
    }
    return buf;
}
