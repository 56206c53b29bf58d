/* nc_loihi.c — float SNN → Loihi-2-style integer network, its report and the
 * hardware checks (see nc_loihi.h).  The netx export is nc_loihi_netx.c. */
#include "nc_loihi.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

nc_loihi_quant_options nc_loihi_quant_options_default(void)
{
    return (nc_loihi_quant_options){.vth_target = NC_LOIHI_DEFAULT_VTH,
                                    .input_frac_bits = NC_LOIHI_DEFAULT_INPUT_BITS};
}

/* ---- structure ------------------------------------------------------------------ */

static int is_nir_model(nc_neuron_model m) { return m >= NC_NEURON_LIF; }

/* Average pools (and MaxPools run as averages) run as integer SUM pools. */
static int is_sum_pool(const nc_node *n)
{
    return n->kind == NC_NODE_AVGPOOL || n->kind == NC_NODE_GLOBAL_AVGPOOL ||
           (n->kind == NC_NODE_MAXPOOL && n->maxpool_strategy == NC_MAXPOOL_AVG);
}

/* Values summed by one output of a sum pool (1 for other nodes). */
static int64_t pool_area(const nc_net *net, const nc_node *n)
{
    if (n->kind == NC_NODE_GLOBAL_AVGPOOL) {
        const nc_node *in = &net->nodes[n->inputs[0]];
        return in->ndim == 3 ? in->shape[1] * in->shape[2] : 1;
    }
    return is_sum_pool(n) ? (int64_t)n->kernel[0] * n->kernel[1] : 1;
}

int64_t nc_loihi_pool_area(const nc_net *net, int node) { return pool_area(net, &net->nodes[node]); }

/* An average pool whose divisor is kh·kw at every output: no padding, or
 * padding counted; no ceil-mode window hanging past the padded input. */
static int avg_divisor_constant(const nc_net *net, const nc_node *n, char *why, size_t size)
{
    const nc_node *in = &net->nodes[n->inputs[0]];
    if (in->ndim != 3 || n->ndim != 3)
        return snprintf(why, size, "needs a [C, H, W] input"), 0;
    int padded = n->pad[0] || n->pad[1] || n->pad[2] || n->pad[3];
    if (padded && !n->count_include_pad) {
        snprintf(why, size, "padding that is not counted gives border windows another divisor; the chip's "
                            "sum pools need one divisor (pad the input or count the padding)");
        return 0;
    }
    for (int a = 0; a < 2; a++) {
        int64_t last = (n->shape[1 + a] - 1) * n->stride[a] + (int64_t)(n->kernel[a] - 1) * (n->dilation[a] > 0 ? n->dilation[a] : 1) + 1;
        if (last > in->shape[1 + a] + n->pad[a] + n->pad[a + 2]) {
            snprintf(why, size, "a ceil-mode window hangs past the input, so its divisor differs");
            return 0;
        }
    }
    return 1;
}

int nc_loihi_node_supported(const nc_net *net, int node, char *why, size_t why_size)
{
    char tmp[8];
    if (!why || !why_size)
        why = tmp, why_size = sizeof tmp;
    why[0] = 0;
    if (node < 0 || node >= net->n_nodes)
        return snprintf(why, why_size, "no such node"), 0;
    const nc_node *n = &net->nodes[node];
    int consumers = nc_net_consumers(net, node);
    if (consumers > 1) {
        snprintf(why, why_size, "it feeds %d nodes; the loihi engine runs chains of layers without branches",
                 consumers);
        return 0;
    }
    switch (n->kind) {
    case NC_NODE_INPUT:
    case NC_NODE_CONV2D:
    case NC_NODE_DENSE:
    case NC_NODE_FLATTEN:
    case NC_NODE_OUTPUT:
    case NC_NODE_GLOBAL_AVGPOOL:
        return 1;
    case NC_NODE_AVGPOOL:
        return avg_divisor_constant(net, n, why, why_size);
    case NC_NODE_MAXPOOL:
        if (n->maxpool_strategy == NC_MAXPOOL_GATED) {
            snprintf(why, why_size, "a gated max pool passes spikes by running counts, which the integer "
                                    "engine does not model; convert with --maxpool pre-spike or avg");
            return 0;
        }
        return n->maxpool_strategy == NC_MAXPOOL_AVG ? avg_divisor_constant(net, n, why, why_size) : 1;
    case NC_NODE_NEURON:
        if (is_nir_model(n->neuron.model)) {
            snprintf(why, why_size, "the loihi engine runs converted IF neurons, not the NIR %s model",
                     nc_neuron_model_name(n->neuron.model));
            return 0;
        }
        return 1; /* relu/clip/qcfs run in ANN/QCFS mode; SNN mode needs IF (nc_loihi_quantise says so) */
    default:
        snprintf(why, why_size, "the loihi engine runs chains of conv/dense layers, pools, flattens and IF "
                                "neurons; %s nodes are not supported", nc_node_kind_name(n->kind));
        return 0;
    }
}

#define node_fail(net, i, err, ...)                                                                            \
    nc_node_fail((err), NC_ERR_UNSUPPORTED, "loihi quantisation", &(net)->nodes[i], __VA_ARGS__)

void nc_loihi_net_free(nc_loihi_net *q)
{
    if (!q)
        return;
    for (int l = 0; l < q->n_layers; l++) {
        free(q->layers[l].weight);
        free(q->layers[l].bias_mant);
    }
    free(q->layers);
    free(q->role);
    free(q->layer_of);
    free(q->population);
    free(q);
}

int nc_loihi_layer_of_target(const nc_loihi_net *q, int node)
{
    for (int l = 0; q && l < q->n_layers; l++)
        if (q->layers[l].target == node)
            return l;
    return -1;
}

/* Node i ends the layer of its input `in`: the IF population or the output
 * that the layer's synapses feed. */
static void end_layer(nc_loihi_net *q, int i, int in, nc_loihi_role role)
{
    q->role[i] = role;
    q->layer_of[i] = q->layer_of[in];
    q->layers[q->layer_of[i]].target = i;
}

/* Assigns roles and builds the layers (no numbers yet). */
static nc_status analyse(nc_loihi_net *q, double *fold_src, int64_t *area_src, nc_error *err)
{
    const nc_net *net = q->net;
    for (int i = 0; i < net->n_nodes; i++) {
        const nc_node *n = &net->nodes[i];
        char why[512];
        q->layer_of[i] = q->population[i] = -1;
        if (!nc_loihi_node_supported(net, i, why, sizeof why))
            return node_fail(net, i, err, "%s", why);
        int in = n->n_inputs > 0 ? n->inputs[0] : -1;
        if (n->kind != NC_NODE_INPUT && (in < 0 || in >= i))
            return node_fail(net, i, err, "has no earlier input");
        nc_loihi_role rin = in >= 0 ? q->role[in] : NC_LOIHI_ROLE_INPUT;
        int from_pop = in >= 0 && (rin == NC_LOIHI_ROLE_INPUT || rin == NC_LOIHI_ROLE_SOURCE || rin == NC_LOIHI_ROLE_NEURON);
        int from_layer = in >= 0 && (rin == NC_LOIHI_ROLE_WEIGHTED || rin == NC_LOIHI_ROLE_TARGET);
        switch (n->kind) {
        case NC_NODE_INPUT:
            q->role[i] = NC_LOIHI_ROLE_INPUT;
            q->population[i] = i;
            fold_src[i] = 1, area_src[i] = 1;
            break;
        case NC_NODE_CONV2D:
        case NC_NODE_DENSE: {
            if (!from_pop)
                return node_fail(net, i, err, "reads '%s' (%s) directly: two weighted layers need an IF neuron "
                                              "between them", net->nodes[in].name, nc_node_kind_name(net->nodes[in].kind));
            if (!n->weight)
                return node_fail(net, i, err, "has no weights");
            nc_loihi_layer *L = &q->layers[q->n_layers];
            memset(L, 0, sizeof *L);
            L->node = i;
            L->source = q->population[in];
            L->target = -1;
            int src_layer = q->layer_of[L->source];
            L->depth = net->nodes[L->source].kind == NC_NODE_INPUT ? 0 : q->layers[src_layer].depth + 1;
            L->fold = fold_src[in];
            L->source_area = area_src[in];
            L->target_area = 1;
            L->input_shift = net->nodes[L->source].kind == NC_NODE_INPUT ? q->opts.input_frac_bits : 0;
            q->role[i] = NC_LOIHI_ROLE_WEIGHTED;
            q->layer_of[i] = q->n_layers++;
            break;
        }
        case NC_NODE_AVGPOOL:
        case NC_NODE_MAXPOOL:
        case NC_NODE_GLOBAL_AVGPOOL:
        case NC_NODE_FLATTEN: {
            int64_t area = pool_area(net, n);
            if (from_pop) {
                q->role[i] = NC_LOIHI_ROLE_SOURCE;
                q->population[i] = q->population[in];
                fold_src[i] = fold_src[in] / (double)area;
                area_src[i] = area_src[in] * area;
            } else if (from_layer) {
                q->role[i] = NC_LOIHI_ROLE_TARGET;
                q->layer_of[i] = q->layer_of[in];
                q->layers[q->layer_of[i]].fold /= (double)area;
                q->layers[q->layer_of[i]].target_area *= area;
            } else {
                return node_fail(net, i, err, "reads '%s', which the integer network cannot place",
                                 net->nodes[in].name);
            }
            break;
        }
        case NC_NODE_NEURON:
            if (n->neuron.model != NC_NEURON_IF)
                return node_fail(net, i, err, "is a %s neuron: the loihi engine runs IF neurons in SNN mode; "
                                              "convert the network first (neurocuda convert)",
                                 nc_neuron_model_name(n->neuron.model));
            if (!from_layer)
                return node_fail(net, i, err, "reads '%s' with no conv or dense layer before it: on the chip every "
                                              "neuron is fed through synapses", net->nodes[in].name);
            end_layer(q, i, in, NC_LOIHI_ROLE_NEURON);
            q->population[i] = i;
            fold_src[i] = 1, area_src[i] = 1;
            break;
        case NC_NODE_OUTPUT:
            if (!from_layer)
                return node_fail(net, i, err, "reads '%s' directly; the loihi engine reads the output as the "
                                              "current of a last conv or dense layer", net->nodes[in].name);
            end_layer(q, i, in, NC_LOIHI_ROLE_OUTPUT);
            break;
        default:
            return node_fail(net, i, err, "is not supported by the loihi engine");
        }
    }
    for (int l = 0; l < q->n_layers; l++) {
        const nc_loihi_layer *L = &q->layers[l];
        if (L->target < 0)
            return node_fail(net, L->node, err, "drives no IF neuron and no output");
        if (net->nodes[L->target].kind == NC_NODE_OUTPUT && L->depth > q->max_depth)
            q->max_depth = L->depth;
    }
    return NC_OK;
}

/* ---- numbers ------------------------------------------------------------------------ */

typedef struct err_acc {
    double sq_err, sq_ref;
} err_acc;

static void err_add(nc_loihi_error *e, err_acc *a, int64_t index, double x, double q, int clipped)
{
    double d = fabs(q - x);
    e->count++;
    e->max_ref = fmax(e->max_ref, fabs(x));
    e->max_abs = fmax(e->max_abs, d);
    a->sq_err += d * d;
    a->sq_ref += x * x;
    if (x != 0 && q == 0)
        e->zeroed++;
    if (clipped) {
        if (e->clipped == 0 || d > fabs(e->worst_clipped_to - e->worst_value)) {
            e->worst_index = index;
            e->worst_value = x;
            e->worst_clipped_to = q;
        }
        e->clipped++;
    }
}

static void err_finish(nc_loihi_error *e, const err_acc *a)
{
    e->rms_rel = a->sq_ref > 0 ? sqrt(a->sq_err / a->sq_ref) : 0;
}

static void err_init(nc_loihi_error *e)
{
    memset(e, 0, sizeof *e);
    e->worst_index = -1;
}

/* θ of channel c of an IF node, or 1 for the input (and the output until
 * the stand-in is set: target_theta). */
static double theta_of(const nc_node *n, int c)
{
    if (n->kind != NC_NODE_NEURON)
        return 1.0;
    return n->neuron.n_threshold > 1 ? n->neuron.threshold[c] : n->neuron.threshold[0];
}

static double tgt_theta(const nc_loihi_layer *L, const nc_node *tgt, int c)
{
    return tgt->kind == NC_NODE_NEURON ? theta_of(tgt, c) : L->theta_out;
}

static nc_status check_thresholds(const nc_net *net, int i, int want_channels, const char *role, nc_error *err)
{
    const nc_node *n = &net->nodes[i];
    if (n->kind != NC_NODE_NEURON)
        return NC_OK;
    const nc_neuron *nr = &n->neuron;
    if (!nr->threshold || nr->n_threshold < 1)
        return node_fail(net, i, err, "has no threshold");
    if (nr->n_threshold > 1 && nr->n_threshold != want_channels)
        return node_fail(net, i, err, "has %d thresholds per channel but the %s layer has %d channels", nr->n_threshold,
                         role, want_channels);
    for (int c = 0; c < nr->n_threshold; c++)
        if (!(nr->threshold[c] > 0) || !isfinite(nr->threshold[c]))
            return node_fail(net, i, err, "threshold %d is %g; the chip needs positive finite thresholds", c,
                             (double)nr->threshold[c]);
    return NC_OK;
}

static double round_half_away(double x) { return x < 0 ? -floor(-x + 0.5) : floor(x + 0.5); }

/* The shape of one weighted layer, as quantisation needs it. */
typedef struct layer_geom {
    int conv;
    int64_t cout, n_w, per_out;  /* outputs, weights, weights per output     */
    int64_t taps, cin_g, cout_g; /* conv: kernel taps, channels per group    */
    int64_t in_numel;            /* dense: inputs                            */
    int src_ch;                  /* the source's channels                    */
    int src_per_channel;         /* the source has a threshold per channel   */
} layer_geom;

/* The source channel that weight k of output o reads (0 when the source has
 * one threshold). */
static int src_channel(const layer_geom *g, int64_t o, int64_t k)
{
    if (!g->src_per_channel)
        return 0;
    return g->conv ? (int)((o / g->cout_g) * g->cin_g + k / g->taps) : nc_loihi_channel(k, g->in_numel, g->src_ch);
}

/* The target's threshold for output o. */
static double out_theta(const nc_loihi_layer *L, const nc_node *tgt, int64_t o)
{
    return tgt_theta(L, tgt, tgt->kind == NC_NODE_NEURON && tgt->neuron.n_threshold > 1 ? (int)o : 0);
}

/* Reads the layer's geometry and checks that the thresholds of its source
 * and target fit it. */
static nc_status layer_geometry(const nc_net *net, const nc_loihi_layer *L, layer_geom *g, nc_error *err)
{
    const nc_node *w = &net->nodes[L->node], *src = &net->nodes[L->source];
    const nc_tensor *W = w->weight;
    g->conv = w->kind == NC_NODE_CONV2D;
    if ((g->conv && W->ndim != 4) || (!g->conv && W->ndim != 2))
        return node_fail(net, L->node, err, "weight has %d dimensions", W->ndim);
    g->cout = W->shape[0];
    g->n_w = nc_tensor_numel(W);
    g->per_out = g->n_w / g->cout;
    g->taps = g->conv ? W->shape[2] * W->shape[3] : 1;
    int groups = g->conv && w->groups > 0 ? w->groups : 1;
    g->cin_g = g->conv ? W->shape[1] : 0;
    g->cout_g = g->cout / groups;
    g->in_numel = g->conv ? 0 : W->shape[1];
    g->src_ch = nc_node_channels(src);
    g->src_per_channel = src->kind == NC_NODE_NEURON && src->neuron.n_threshold > 1;
    nc_status st = check_thresholds(net, L->target, (int)g->cout, "driving", err);
    if (st != NC_OK)
        return st;
    if (!g->src_per_channel)
        return check_thresholds(net, L->source, 1, "source", err);
    if ((st = check_thresholds(net, L->source, g->src_ch, "source", err)) != NC_OK)
        return st;
    if (g->conv && g->cin_g * groups != g->src_ch)
        return node_fail(net, L->node, err, "reads %lld channels but its source '%s' has %d per-channel thresholds",
                         (long long)(g->cin_g * groups), src->name, g->src_ch);
    if (!g->conv && g->in_numel % g->src_ch != 0)
        return node_fail(net, L->node, err, "cannot map its %lld inputs to the %d channels of '%s'",
                         (long long)g->in_numel, g->src_ch, src->name);
    return NC_OK;
}

/* The output's stand-in threshold: its largest current per step / 16. */
static double output_theta(const nc_net *net, const nc_loihi_layer *L, const layer_geom *g)
{
    const nc_node *w = &net->nodes[L->node], *src = &net->nodes[L->source];
    double worst = 0;
    for (int64_t o = 0; o < g->cout; o++) {
        double s = w->bias && o < nc_tensor_numel(w->bias) ? fabs((double)w->bias->data[o]) : 0;
        for (int64_t k = 0; k < g->per_out; k++)
            s += fabs((double)w->weight->data[o * g->per_out + k]) * theta_of(src, src_channel(g, o, k));
        worst = isfinite(s) && s > worst ? s : worst;
    }
    return worst > 0 ? worst / 16 : 1;
}

/* The weights in units of the target's threshold (θ_in·fold/θ_out folded in)
 * into wn; *max gets the largest magnitude. */
static nc_status normalised_weights(const nc_net *net, const nc_loihi_layer *L, const layer_geom *g, double *wn,
                                    double *max, nc_error *err)
{
    const nc_node *w = &net->nodes[L->node], *src = &net->nodes[L->source], *tgt = &net->nodes[L->target];
    double m = 0;
    for (int64_t o = 0; o < g->cout; o++) {
        double th_t = out_theta(L, tgt, o);
        for (int64_t k = 0; k < g->per_out; k++) {
            double v = (double)w->weight->data[o * g->per_out + k];
            if (!isfinite(v))
                return node_fail(net, L->node, err, "weight %lld is %g; weights must be finite",
                                 (long long)(o * g->per_out + k), v);
            wn[o * g->per_out + k] = v * theta_of(src, src_channel(g, o, k)) * L->fold / th_t;
            m = fmax(m, fabs(wn[o * g->per_out + k]));
        }
    }
    *max = m;
    return NC_OK;
}

/* The weight exponent and threshold mantissa that put the largest weight m
 * at the 8-bit limit (the mantissa capped at its maximum, and said so). */
static nc_status weight_scale(const nc_loihi_net *q, nc_loihi_layer *L, double m, int *exp_out, double *vth_out,
                              nc_error *err)
{
    const nc_net *net = q->net;
    const nc_node *tgt = &net->nodes[L->target];
    int vt = q->opts.vth_target;
    int e = 0;
    double vth = vt;
    if (m > 0) {
        e = (int)ceil(log2(m * vt / NC_LOIHI_W_MAX));
        e = e < NC_LOIHI_WEXP_MIN ? NC_LOIHI_WEXP_MIN : e > NC_LOIHI_WEXP_MAX ? NC_LOIHI_WEXP_MAX : e;
        vth = floor(NC_LOIHI_W_MAX * ldexp(1.0, e) / m);
        if (vth < 1)
            return node_fail(net, L->node, err,
                             "its weights cannot be represented: the largest is %.4g times the threshold of '%s' "
                             "(max |w|·θ_in/θ_out), above 254·2^7 = 32512 even with the largest weight exponent; "
                             "recalibrate with a larger threshold for '%s' or rescale the layer",
                             m, tgt->name, tgt->name);
        if (vth > NC_LOIHI_VTH_MAX) {
            vth = NC_LOIHI_VTH_MAX;
            L->vth_capped = 1;
        }
    }
    *exp_out = e;
    *vth_out = vth;
    return NC_OK;
}

/* Rounds the normalised weights wn to even 8-bit integers (the chip's
 * weights are 8-bit with the lowest bit 0) and records the error; the
 * largest row sum bounds the integer sums later. */
static nc_status round_weights(const nc_net *net, nc_loihi_layer *L, const layer_geom *g, const double *wn, double m,
                               double vth, nc_error *err)
{
    const nc_node *tgt = &net->nodes[L->target];
    double to_int = vth / ldexp(1.0, L->weight_exp), any = 0;
    err_acc acc = {0};
    err_init(&L->weights);
    for (int64_t k = 0; k < g->n_w; k++) {
        double r = 2.0 * round_half_away(wn[k] * to_int / 2.0);
        int clipped = r < NC_LOIHI_W_MIN || r > NC_LOIHI_W_MAX;
        r = r < NC_LOIHI_W_MIN ? NC_LOIHI_W_MIN : r > NC_LOIHI_W_MAX ? NC_LOIHI_W_MAX : r;
        L->weight[k] = (int16_t)r;
        any += fabs(r);
        err_add(&L->weights, &acc, k, wn[k], r / to_int, clipped);
    }
    err_finish(&L->weights, &acc);
    if (m > 0 && any == 0)
        return node_fail(net, L->node, err,
                         "its weights cannot be represented: the largest is %.3g times the threshold of '%s', and "
                         "every weight rounds to 0 even at weight exponent %d with threshold mantissa %d; the "
                         "layer's threshold is far too large for its weights (recalibrate '%s')",
                         m, tgt->name, NC_LOIHI_WEXP_MIN, NC_LOIHI_VTH_MAX, tgt->name);
    L->w_abs_row_max = 0;
    for (int64_t o = 0; o < g->cout; o++) {
        double s = 0;
        for (int64_t k = 0; k < g->per_out; k++)
            s += abs(L->weight[o * g->per_out + k]);
        L->w_abs_row_max = fmax(L->w_abs_row_max, s);
    }
    return NC_OK;
}

/* Biases: b̃ = b/θ in v units (·vth·64), 13-bit mantissa + exponent. */
static nc_status quantise_biases(const nc_net *net, nc_loihi_layer *L, int64_t cout, double vth, nc_error *err)
{
    const nc_node *w = &net->nodes[L->node], *tgt = &net->nodes[L->target];
    err_init(&L->biases);
    if (!w->bias)
        return NC_OK;
    if (nc_tensor_numel(w->bias) != cout)
        return node_fail(net, L->node, err, "has %lld biases for %lld outputs", (long long)nc_tensor_numel(w->bias),
                         (long long)cout);
    L->n_bias = (int)cout;
    L->bias_mant = malloc((size_t)cout * sizeof *L->bias_mant);
    if (!L->bias_mant)
        return nc_fail(err, NC_ERR_MEMORY, "loihi quantisation: out of memory");
    double vunit = vth * (1 << NC_LOIHI_VTH_SHIFT), bmax = 0;
    for (int64_t o = 0; o < cout; o++) {
        double b = w->bias->data[o];
        if (!isfinite(b))
            return node_fail(net, L->node, err, "bias %lld is %g; biases must be finite", (long long)o, b);
        bmax = fmax(bmax, fabs(b / out_theta(L, tgt, o) * vunit));
    }
    int be = 0;
    while (be < NC_LOIHI_BIAS_EXP_MAX && round_half_away(bmax / ldexp(1.0, be)) > NC_LOIHI_BIAS_MAX)
        be++;
    L->bias_exp = be;
    err_acc bacc = {0};
    for (int64_t o = 0; o < cout; o++) {
        double th = out_theta(L, tgt, o);
        double bt = w->bias->data[o] / th, r = round_half_away(bt * vunit / ldexp(1.0, be));
        int clipped = r < NC_LOIHI_BIAS_MIN || r > NC_LOIHI_BIAS_MAX;
        r = r < NC_LOIHI_BIAS_MIN ? NC_LOIHI_BIAS_MIN : r > NC_LOIHI_BIAS_MAX ? NC_LOIHI_BIAS_MAX : r;
        L->bias_mant[o] = (int16_t)r;
        err_add(&L->biases, &bacc, o, bt, r * ldexp(1.0, be) / vunit, clipped);
    }
    err_finish(&L->biases, &bacc);
    return NC_OK;
}

/* Thresholds: the layer is normalised to θ, which (vth << 6) represents
 * exactly; the comparison below is computed, not assumed.  Then v0. */
static void quantise_thresholds(const nc_net *net, nc_loihi_layer *L, double vth)
{
    const nc_node *tgt = &net->nodes[L->target];
    err_init(&L->thresholds);
    err_acc tacc = {0};
    int nt = tgt->kind == NC_NODE_NEURON ? tgt->neuron.n_threshold : 1;
    for (int c = 0; c < nt; c++) {
        double th = tgt_theta(L, tgt, c);
        double back = (double)((int64_t)L->vth_mant << NC_LOIHI_VTH_SHIFT) / (vth * (1 << NC_LOIHI_VTH_SHIFT)) * th;
        err_add(&L->thresholds, &tacc, c, th, back, 0);
    }
    err_finish(&L->thresholds, &tacc);
    if (tgt->kind == NC_NODE_NEURON) {
        double f = tgt->neuron.v0_fraction, vu = vth * (1 << NC_LOIHI_VTH_SHIFT);
        L->v0 = (int32_t)llround(f * vu);
        L->v0_error = fabs(L->v0 / vu - f);
    }
}

static nc_status quantise_layer(nc_loihi_net *q, nc_loihi_layer *L, nc_error *err)
{
    const nc_net *net = q->net;
    layer_geom g = {0};
    nc_status st = layer_geometry(net, L, &g, err);
    if (st != NC_OK)
        return st;
    L->theta_out = net->nodes[L->target].kind == NC_NODE_OUTPUT ? output_theta(net, L, &g) : 1;
    double *wn = malloc((size_t)g.n_w * sizeof *wn);
    L->weight = malloc((size_t)g.n_w * sizeof *L->weight);
    if (!wn || !L->weight) {
        free(wn);
        return nc_fail(err, NC_ERR_MEMORY, "loihi quantisation: out of memory for %lld weights", (long long)g.n_w);
    }
    L->n_weight = g.n_w;
    double m = 0, vth = 0;
    int e = 0;
    st = normalised_weights(net, L, &g, wn, &m, err);
    if (st == NC_OK)
        st = weight_scale(q, L, m, &e, &vth, err);
    if (st == NC_OK) {
        L->weight_exp = e;
        L->vth_mant = (int)vth;
        st = round_weights(net, L, &g, wn, m, vth, err);
    }
    free(wn);
    if (st == NC_OK)
        st = quantise_biases(net, L, g.cout, vth, err);
    if (st == NC_OK)
        quantise_thresholds(net, L, vth);
    return st;
}

nc_status nc_loihi_quantise(const nc_net *net, const nc_loihi_quant_options *opts, nc_loihi_net **out, nc_error *err)
{
    *out = NULL;
    if (!net || net->n_nodes < 2)
        return nc_fail(err, NC_ERR_ARGUMENT, "loihi quantisation: no network");
    nc_loihi_quant_options o = opts ? *opts : nc_loihi_quant_options_default();
    if (o.vth_target < 1 || o.vth_target > NC_LOIHI_VTH_MAX)
        return nc_fail(err, NC_ERR_ARGUMENT, "loihi quantisation: the threshold mantissa target must be 1 … %d, got %d",
                       NC_LOIHI_VTH_MAX, o.vth_target);
    if (o.input_frac_bits < 0 || o.input_frac_bits > 16)
        return nc_fail(err, NC_ERR_ARGUMENT, "loihi quantisation: input fractional bits must be 0 … 16, got %d",
                       o.input_frac_bits);
    nc_loihi_net *q = calloc(1, sizeof *q);
    double *fold_src = calloc((size_t)net->n_nodes, sizeof *fold_src);
    int64_t *area_src = calloc((size_t)net->n_nodes, sizeof *area_src);
    if (q) {
        q->net = net;
        q->opts = o;
        q->layers = calloc((size_t)net->n_nodes, sizeof *q->layers);
        q->role = calloc((size_t)net->n_nodes, sizeof *q->role);
        q->layer_of = calloc((size_t)net->n_nodes, sizeof *q->layer_of);
        q->population = calloc((size_t)net->n_nodes, sizeof *q->population);
    }
    nc_status st = q && fold_src && area_src && q->layers && q->role && q->layer_of && q->population
                       ? NC_OK
                       : nc_fail(err, NC_ERR_MEMORY, "loihi quantisation: out of memory");
    if (st == NC_OK)
        st = analyse(q, fold_src, area_src, err);
    for (int l = 0; st == NC_OK && q && l < q->n_layers; l++)
        st = quantise_layer(q, &q->layers[l], err);
    free(fold_src);
    free(area_src);
    if (st != NC_OK) {
        nc_loihi_net_free(q);
        return st;
    }
    *out = q;
    return NC_OK;
}

/* ---- report ---------------------------------------------------------------------- */

typedef struct textbuf {
    char *buf;
    size_t size, len;
} textbuf;

static void tb_printf(textbuf *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tb_printf(textbuf *t, const char *fmt, ...)
{
    if (t->len + 1 >= t->size)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->buf + t->len, t->size - t->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->len = t->len + (size_t)n < t->size ? t->len + (size_t)n : t->size - 1;
}

const char *nc_loihi_report_text(const nc_loihi_net *q, char *buf, size_t size)
{
    textbuf t = {buf, size, 0};
    if (size)
        buf[0] = 0;
    if (!q)
        return buf;
    const nc_net *net = q->net;
    tb_printf(&t, "Loihi quantisation (8-bit weights, thresholds vth<<6, 24-bit u/v; errors in thresholds of "
                  "the target, input payload x·2^%d):\n", q->opts.input_frac_bits);
    tb_printf(&t, "  %-14s %-14s %4s %6s %4s %9s %10s %10s %7s %7s %10s %7s %8s\n", "layer", "-> target", "wexp",
              "vth", "bexp", "max|w|", "w rms rel", "w max err", "zeroed", "clipped", "b rms rel", "b clip",
              "v0 err");
    int64_t clipped = 0;
    for (int l = 0; l < q->n_layers; l++) {
        const nc_loihi_layer *L = &q->layers[l];
        tb_printf(&t, "  %-14.14s %-14.14s %4d %6d%s%4d %9.4g %9.3f%% %10.3g %7lld %7lld %9.3f%% %7lld %8.2g\n",
                  net->nodes[L->node].name, net->nodes[L->target].name, L->weight_exp, L->vth_mant,
                  L->vth_capped ? "*" : " ", L->bias_exp, L->weights.max_ref, 100 * L->weights.rms_rel,
                  L->weights.max_abs, (long long)L->weights.zeroed, (long long)L->weights.clipped,
                  100 * L->biases.rms_rel, (long long)L->biases.clipped, L->v0_error);
        clipped += L->weights.clipped + L->biases.clipped + L->thresholds.clipped;
    }
    for (int l = 0; l < q->n_layers; l++) {
        const nc_loihi_layer *L = &q->layers[l];
        const nc_loihi_error *e[2] = {&L->weights, &L->biases};
        const char *what[2] = {"weight", "bias"};
        for (int k = 0; k < 2; k++)
            if (e[k]->clipped)
                tb_printf(&t, "  clipped: %lld %s value(s) of '%s', the worst %s %lld: %.6g -> %.6g thresholds\n",
                          (long long)e[k]->clipped, what[k], net->nodes[L->node].name, what[k],
                          (long long)e[k]->worst_index, e[k]->worst_value, e[k]->worst_clipped_to);
        if (L->vth_capped)
            tb_printf(&t, "  '%s': threshold mantissa capped at %d (17 bits): its weights use less than the "
                          "8-bit range\n", net->nodes[L->node].name, NC_LOIHI_VTH_MAX);
    }
    tb_printf(&t, "  thresholds are exact (each layer is scaled to its threshold); values clipped: %lld\n",
              (long long)clipped);
    return buf;
}

/* ---- hardware checks -------------------------------------------------------------- */

nc_loihi_hw_options nc_loihi_hw_options_default(void)
{
    return (nc_loihi_hw_options){.cores_per_chip = 128, .neurons_per_core = 8192, .synapses_per_core = 937500,
                                 .max_fan_in = 937500, .reset = NC_RESET_SUBTRACT, .graded = 0};
}

void nc_loihi_hw_report_clear(nc_loihi_hw_report *r)
{
    if (!r)
        return;
    nc_strings_free(r->warnings, r->n_warnings);
    free(r->layers);
    memset(r, 0, sizeof *r);
}

static void hw_warn(nc_loihi_hw_report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void hw_warn(nc_loihi_hw_report *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    nc_strings_addv(&r->warnings, &r->n_warnings, &r->cap_warnings, fmt, ap); /* out of memory: one line fewer */
    va_end(ap);
}

static int64_t ceil_div(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : 0; }

/* Window size (in input positions) of the target path's pools: a target
 * neuron gathers that many outputs of the weighted node. */
static int64_t target_window(const nc_loihi_net *q, const nc_loihi_layer *L)
{
    int64_t area = 1;
    for (int i = L->node + 1; i <= L->target; i++)
        if (q->role[i] == NC_LOIHI_ROLE_TARGET && q->layer_of[i] == (int)(L - q->layers)) {
            const nc_node *n = &q->net->nodes[i];
            area *= n->kind == NC_NODE_MAXPOOL ? (int64_t)n->kernel[0] * n->kernel[1] : pool_area(q->net, n);
        }
    return area;
}

nc_status nc_loihi_hw_check(const nc_loihi_net *q, const nc_loihi_hw_options *opts, nc_loihi_hw_report *out,
                            nc_error *err)
{
    memset(out, 0, sizeof *out);
    if (!q)
        return nc_fail(err, NC_ERR_ARGUMENT, "loihi hardware check: no quantised network");
    nc_loihi_hw_options o = opts ? *opts : nc_loihi_hw_options_default();
    if (o.cores_per_chip < 1 || o.neurons_per_core < 1 || o.synapses_per_core < 1)
        return nc_fail(err, NC_ERR_ARGUMENT, "loihi hardware check: core limits must be positive");
    const nc_net *net = q->net;
    out->layers = calloc((size_t)(q->n_layers > 0 ? q->n_layers : 1), sizeof *out->layers);
    if (!out->layers)
        return nc_fail(err, NC_ERR_MEMORY, "loihi hardware check: out of memory");
    out->n_layers = q->n_layers;
    int64_t cores = 0;
    for (int l = 0; l < q->n_layers; l++) {
        const nc_loihi_layer *L = &q->layers[l];
        const nc_node *w = &net->nodes[L->node], *tgt = &net->nodes[L->target], *src = &net->nodes[L->source];
        nc_loihi_hw_layer *h = &out->layers[l];
        h->layer = l;
        h->neurons = nc_node_numel(tgt);
        int64_t win = target_window(q, L);
        int64_t fan_in = (w->kind == NC_NODE_CONV2D ? w->weight->shape[1] * w->weight->shape[2] * w->weight->shape[3]
                                                    : w->weight->shape[1]) * L->source_area * win;
        h->fan_in_max = fan_in;
        h->synapses = nc_node_macs(net, L->node) * L->source_area;
        h->fan_in_mean = h->neurons ? (double)h->synapses / (double)h->neurons : 0;
        h->fan_out_mean = (double)h->synapses / (double)nc_node_numel(src);
        if (w->kind == NC_NODE_CONV2D) {
            int64_t cout_g = w->weight->shape[0] / (w->groups > 0 ? w->groups : 1);
            h->fan_out_max = cout_g * ceil_div(w->weight->shape[2], w->stride[0]) * ceil_div(w->weight->shape[3], w->stride[1]);
        } else {
            h->fan_out_max = w->weight->shape[0];
        }
        h->weight_bytes = L->n_weight;
        int64_t c = ceil_div(h->neurons, o.neurons_per_core), cs = ceil_div(h->synapses, o.synapses_per_core);
        h->cores = (int)(c > cs ? c : cs);
        cores += h->cores;
        out->neurons += h->neurons;
        out->synapses += h->synapses;
        out->weight_bytes += h->weight_bytes;
        if (c > 1)
            hw_warn(out, "layer '%s' -> '%s': %lld neurons need %lld cores at %lld neurons per core", w->name, tgt->name,
                    (long long)h->neurons, (long long)c, (long long)o.neurons_per_core);
        if (cs > c)
            hw_warn(out, "layer '%s': %lld synapses need %lld cores at %lld synapses per core (more than its neurons do)",
                    w->name, (long long)h->synapses, (long long)cs, (long long)o.synapses_per_core);
        if (h->fan_in_max > o.max_fan_in)
            hw_warn(out, "layer '%s': fan-in %lld per neuron exceeds the %lld synapses a core holds", w->name,
                    (long long)h->fan_in_max, (long long)o.max_fan_in);
        if (L->source_area > 1)
            hw_warn(out, "layer '%s': average pools before it are folded into its weights (fan-in x%lld, "
                         "%lld synapses instead of %lld)", w->name, (long long)L->source_area,
                    (long long)h->synapses, (long long)nc_node_macs(net, L->node));
        if (tgt->kind == NC_NODE_OUTPUT)
            hw_warn(out, "the output '%s' is read as the current of layer '%s' (%lld integrating neurons)", tgt->name,
                    w->name, (long long)h->neurons);
    }
    for (int i = 0; i < net->n_nodes; i++) {
        const nc_node *n = &net->nodes[i];
        if (n->kind == NC_NODE_MAXPOOL && n->maxpool_strategy != NC_MAXPOOL_AVG)
            hw_warn(out, "MaxPool '%s' (%s: max over the running sums of %s) has no Loihi 2 equivalent: the chip "
                         "cannot run it (the engine simulates it exactly in integers); convert with --maxpool avg "
                         "for a chip-ready network", n->name, nc_maxpool_strategy_name(n->maxpool_strategy),
                    q->role[i] == NC_LOIHI_ROLE_TARGET ? "synaptic currents" : "spikes");
        if (q->role[i] == NC_LOIHI_ROLE_NEURON && n->neuron.v0_fraction != 0)
            hw_warn(out, "neuron '%s': v(0) = %.3g·θ must be loaded into each neuron's v before every sample "
                         "(Lava's LIFReset resets v to 0)", n->name, (double)n->neuron.v0_fraction);
    }
    if (o.reset == NC_RESET_SUBTRACT)
        hw_warn(out, "reset by subtraction is not Lava's stock LIF (reset to zero): it needs a microcoded "
                     "neuron on Loihi 2");
    if (o.graded)
        hw_warn(out, "graded spikes: every spike message carries an integer payload (Loihi 2 feature)");
    hw_warn(out, "the input arrives as graded spikes with %d fractional bits (values x·2^%d)", q->opts.input_frac_bits,
            q->opts.input_frac_bits);
    out->cores = (int)cores;
    out->chips = (int)ceil_div(cores, o.cores_per_chip);
    if (out->chips > 1)
        hw_warn(out, "the network needs %lld cores: %d chips of %d cores", (long long)cores, out->chips, o.cores_per_chip);
    return NC_OK;
}

const char *nc_loihi_hw_text(const nc_loihi_net *q, const nc_loihi_hw_report *r, char *buf, size_t size)
{
    textbuf t = {buf, size, 0};
    if (size)
        buf[0] = 0;
    if (!q || !r)
        return buf;
    tb_printf(&t, "Loihi 2 hardware check (%d cores, %d chip%s; %lld neurons, %lld synapses, %lld weight bytes):\n",
              r->cores, r->chips, r->chips == 1 ? "" : "s", (long long)r->neurons, (long long)r->synapses,
              (long long)r->weight_bytes);
    tb_printf(&t, "  %-14s %9s %11s %10s %10s %10s %10s %6s\n", "layer", "neurons", "synapses", "fan-in max",
              "fan-in avg", "fan-out max", "fan-out avg", "cores");
    for (int l = 0; l < r->n_layers; l++) {
        const nc_loihi_hw_layer *h = &r->layers[l];
        tb_printf(&t, "  %-14.14s %9lld %11lld %10lld %10.1f %10lld %10.1f %6d\n", q->net->nodes[q->layers[l].node].name,
                  (long long)h->neurons, (long long)h->synapses, (long long)h->fan_in_max, h->fan_in_mean,
                  (long long)h->fan_out_max, h->fan_out_mean, h->cores);
    }
    for (int i = 0; i < r->n_warnings; i++)
        tb_printf(&t, "  warning: %s\n", r->warnings[i]);
    return buf;
}

/* ---- notes ------------------------------------------------------------------------- */

void nc_loihi_notes_add(nc_loihi_notes *notes, const char *fmt, ...)
{
    if (!notes)
        return;
    va_list ap;
    va_start(ap, fmt);
    nc_strings_addv(&notes->lines, &notes->count, &notes->capacity, fmt, ap); /* out of memory: one line fewer */
    va_end(ap);
}

void nc_loihi_notes_clear(nc_loihi_notes *notes)
{
    if (!notes)
        return;
    nc_strings_free(notes->lines, notes->count);
    memset(notes, 0, sizeof *notes);
}
