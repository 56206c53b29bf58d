/* nc_calib.c — activation statistics and threshold selection (formulas in
 * nc_calib.h). */
#include "nc_calib.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct calib_layer {
    int node;
    char name[NC_NAME_MAX];
    int channels;
    int64_t spatial;     /* values per channel per sample                 */
    int64_t *count, *zeros;
    double *sum;
    float *max;          /* per channel                                   */
    uint64_t *hist;      /* channels × bins, channel c over (0, max[c]]   */
    uint64_t *layer_hist;/* bins over (0, layer_max]                      */
    float layer_max;
} calib_layer;

struct nc_calib_stats {
    int bins;
    int n_layers;
    calib_layer *layers;
    int n_nodes;
    int *layer_of_node;  /* node index → layer index or −1              */
    int max_done;        /* a max pass has ended                          */
    int hist_ready;      /* a histogram pass has begun after it           */
    nc_calib_pass pass;
    char error[512];     /* first bad call of nc_calib_add in this pass   */
};

/* ---- method names --------------------------------------------------------- */

static const char *const method_names[NC_CALIB_METHOD_COUNT] = {"max", "p99", "p99.9", "p99.99", "mmse"};

const char *nc_calib_method_name(nc_calib_method m)
{
    return (unsigned)m < NC_CALIB_METHOD_COUNT ? method_names[m] : "unknown";
}

int nc_calib_method_parse(const char *text, nc_calib_method *out)
{
    char buf[32];
    if (!text)
        return -1;
    /* Accept "99.9", "99.9%" and "p99.9%" as spellings of "p99.9". */
    snprintf(buf, sizeof buf, "%s%s", (text[0] >= '0' && text[0] <= '9') ? "p" : "", text);
    size_t n = strlen(buf);
    if (n && buf[n - 1] == '%')
        buf[n - 1] = 0;
    for (int m = 0; m < NC_CALIB_METHOD_COUNT; m++) {
        if (strcmp(buf, method_names[m]) == 0) {
            *out = (nc_calib_method)m;
            return 0;
        }
    }
    return -1;
}

double nc_calib_method_percentile(nc_calib_method m)
{
    switch (m) {
    case NC_CALIB_MAX: return 100.0;
    case NC_CALIB_P99: return 99.0;
    case NC_CALIB_P99_9: return 99.9;
    case NC_CALIB_P99_99: return 99.99;
    default: return 0.0;
    }
}

/* ---- construction --------------------------------------------------------- */

static void layer_clear(calib_layer *l)
{
    free(l->count);
    free(l->zeros);
    free(l->sum);
    free(l->max);
    free(l->hist);
    free(l->layer_hist);
}

void nc_calib_free(nc_calib_stats *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n_layers; i++)
        layer_clear(&s->layers[i]);
    free(s->layers);
    free(s->layer_of_node);
    free(s);
}

static nc_status layer_init(calib_layer *l, const nc_node *node, int node_index, int bins, nc_error *err)
{
    int64_t numel = nc_node_numel(node);
    int c = nc_node_channels(node);
    if (node->ndim < 1 || c < 1 || numel < 1 || numel % c)
        return nc_fail(err, NC_ERR_SHAPE, "calibration: node '%s' has no usable shape (infer shapes first)",
                       node->name);
    l->node = node_index;
    snprintf(l->name, sizeof l->name, "%s", node->name);
    l->channels = c;
    l->spatial = numel / c;
    size_t hist_n;
    if (nc_mul_size((size_t)c, (size_t)bins, &hist_n) != 0)
        return nc_fail(err, NC_ERR_MEMORY, "calibration: histogram of node '%s' is too large", node->name);
    l->count = calloc((size_t)c, sizeof *l->count);
    l->zeros = calloc((size_t)c, sizeof *l->zeros);
    l->sum = calloc((size_t)c, sizeof *l->sum);
    l->max = calloc((size_t)c, sizeof *l->max);
    l->hist = calloc(hist_n, sizeof *l->hist);
    l->layer_hist = calloc((size_t)bins, sizeof *l->layer_hist);
    if (!l->count || !l->zeros || !l->sum || !l->max || !l->hist || !l->layer_hist)
        return nc_fail(err, NC_ERR_MEMORY, "calibration: out of memory for %d channels × %d bins of node '%s'",
                       c, bins, node->name);
    return NC_OK;
}

nc_status nc_calib_new(const nc_net *net, int bins, nc_calib_stats **out, nc_error *err)
{
    *out = NULL;
    if (bins <= 0)
        bins = NC_CALIB_DEFAULT_BINS;
    nc_calib_stats *s = calloc(1, sizeof *s);
    if (!s)
        return nc_fail(err, NC_ERR_MEMORY, "calibration: out of memory");
    s->bins = bins;
    s->n_nodes = net->n_nodes;
    s->layer_of_node = malloc((size_t)(net->n_nodes ? net->n_nodes : 1) * sizeof(int));
    s->layers = calloc((size_t)(net->n_nodes ? net->n_nodes : 1), sizeof *s->layers);
    if (!s->layer_of_node || !s->layers) {
        nc_calib_free(s);
        return nc_fail(err, NC_ERR_MEMORY, "calibration: out of memory");
    }
    for (int i = 0; i < net->n_nodes; i++) {
        s->layer_of_node[i] = -1;
        if (net->nodes[i].kind != NC_NODE_NEURON)
            continue;
        nc_status st = layer_init(&s->layers[s->n_layers], &net->nodes[i], i, bins, err);
        s->n_layers++; /* counted even on failure so that free releases it */
        if (st != NC_OK) {
            nc_calib_free(s);
            return st;
        }
        s->layer_of_node[i] = s->n_layers - 1;
    }
    if (s->n_layers == 0) {
        nc_calib_free(s);
        return nc_fail(err, NC_ERR_UNSUPPORTED, "calibration: the network has no activation (neuron) layer");
    }
    *out = s;
    return NC_OK;
}

/* ---- passes --------------------------------------------------------------- */

static void layer_reset_hist(calib_layer *l, int bins)
{
    memset(l->hist, 0, (size_t)l->channels * (size_t)bins * sizeof *l->hist);
    memset(l->layer_hist, 0, (size_t)bins * sizeof *l->layer_hist);
}

static void layer_reset_all(calib_layer *l, int bins)
{
    size_t c = (size_t)l->channels;
    memset(l->count, 0, c * sizeof *l->count);
    memset(l->zeros, 0, c * sizeof *l->zeros);
    memset(l->sum, 0, c * sizeof *l->sum);
    memset(l->max, 0, c * sizeof *l->max);
    l->layer_max = 0;
    layer_reset_hist(l, bins);
}

static void layer_update_max(calib_layer *l)
{
    l->layer_max = 0;
    for (int c = 0; c < l->channels; c++)
        if (l->max[c] > l->layer_max)
            l->layer_max = l->max[c];
}

nc_status nc_calib_begin_pass(nc_calib_stats *s, nc_calib_pass pass, nc_error *err)
{
    s->error[0] = 0;
    if (pass == NC_CALIB_PASS_HISTOGRAM && !s->max_done)
        return nc_fail(err, NC_ERR_ARGUMENT, "calibration: the histogram pass needs a finished max pass");
    for (int i = 0; i < s->n_layers; i++) {
        if (pass == NC_CALIB_PASS_MAX)
            layer_reset_all(&s->layers[i], s->bins);
        else {
            layer_reset_hist(&s->layers[i], s->bins);
            layer_update_max(&s->layers[i]);
        }
    }
    s->pass = pass;
    s->max_done = pass == NC_CALIB_PASS_HISTOGRAM;
    s->hist_ready = pass == NC_CALIB_PASS_HISTOGRAM;
    return NC_OK;
}

nc_status nc_calib_end_pass(nc_calib_stats *s, nc_error *err)
{
    if (s->error[0])
        return nc_fail(err, NC_ERR_SHAPE, "calibration: %s", s->error);
    if (s->pass == NC_CALIB_PASS_MAX) {
        for (int i = 0; i < s->n_layers; i++)
            layer_update_max(&s->layers[i]);
        s->max_done = 1;
    }
    return NC_OK;
}

/* Bin of a > 0 among `bins` bins over (0, hi]; values past hi (data that
 * differ between the passes) land in the last bin. */
static inline int bin_of(float a, float scale, int bins)
{
    float f = a * scale; /* scale = bins / hi */
    return f >= (float)bins ? bins - 1 : (int)f;
}

static void add_max(calib_layer *l, const float *x, int64_t n, int c)
{
    float mx = l->max[c];
    int64_t zeros = 0;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        float a = x[i];
        if (!(a > 0)) { /* NaN counts as a zero: it must not poison the max */
            zeros++;
            continue;
        }
        sum += a;
        if (a > mx)
            mx = a;
    }
    l->max[c] = mx;
    l->zeros[c] += zeros;
    l->count[c] += n;
    l->sum[c] += sum;
}

static void add_hist(calib_layer *l, const float *x, int64_t n, int c, int bins)
{
    if (!(l->max[c] > 0))
        return; /* pass 1 saw no positive value here */
    uint64_t *h = l->hist + (size_t)c * (size_t)bins;
    float sc = (float)bins / l->max[c], sl = (float)bins / l->layer_max;
    for (int64_t i = 0; i < n; i++) {
        float a = x[i];
        if (!(a > 0))
            continue;
        h[bin_of(a, sc, bins)]++;
        l->layer_hist[bin_of(a, sl, bins)]++;
    }
}

void nc_calib_add(void *user, int node, const float *data, int64_t rows, int64_t per_row)
{
    nc_calib_stats *s = user;
    if (node < 0 || node >= s->n_nodes || s->layer_of_node[node] < 0)
        return;
    calib_layer *l = &s->layers[s->layer_of_node[node]];
    if (per_row != (int64_t)l->channels * l->spatial) {
        if (!s->error[0])
            snprintf(s->error, sizeof s->error, "node '%s' gave %lld values per sample, expected %lld", l->name,
                     (long long)per_row, (long long)l->channels * l->spatial);
        return;
    }
    for (int64_t r = 0; r < rows; r++) {
        const float *row = data + r * per_row;
        for (int c = 0; c < l->channels; c++) {
            const float *x = row + (int64_t)c * l->spatial;
            if (s->pass == NC_CALIB_PASS_MAX)
                add_max(l, x, l->spatial, c);
            else
                add_hist(l, x, l->spatial, c, s->bins);
        }
    }
}

/* ---- accessors ------------------------------------------------------------ */

int nc_calib_layer_count(const nc_calib_stats *s) { return s->n_layers; }
int nc_calib_bins(const nc_calib_stats *s) { return s->bins; }
int nc_calib_has_histogram(const nc_calib_stats *s) { return s->hist_ready; }

static const calib_layer *get_layer(const nc_calib_stats *s, int layer)
{
    return layer >= 0 && layer < s->n_layers ? &s->layers[layer] : NULL;
}

int nc_calib_layer_node(const nc_calib_stats *s, int layer)
{
    const calib_layer *l = get_layer(s, layer);
    return l ? l->node : -1;
}

const char *nc_calib_layer_name(const nc_calib_stats *s, int layer)
{
    const calib_layer *l = get_layer(s, layer);
    return l ? l->name : "";
}

int nc_calib_find_node(const nc_calib_stats *s, int node)
{
    return node >= 0 && node < s->n_nodes ? s->layer_of_node[node] : -1;
}

int nc_calib_channels(const nc_calib_stats *s, int layer)
{
    const calib_layer *l = get_layer(s, layer);
    return l ? l->channels : 0;
}

const uint64_t *nc_calib_histogram(const nc_calib_stats *s, int layer, int channel, float *hi)
{
    const calib_layer *l = get_layer(s, layer);
    if (!l || !s->hist_ready || channel < -1 || channel >= l->channels)
        return NULL;
    if (channel < 0) {
        *hi = l->layer_max;
        return l->layer_hist;
    }
    *hi = l->max[channel];
    return l->hist + (size_t)channel * (size_t)s->bins;
}

static nc_status check_index(const nc_calib_stats *s, int layer, int channel, int allow_layer, nc_error *err)
{
    const calib_layer *l = get_layer(s, layer);
    if (!l)
        return nc_fail(err, NC_ERR_ARGUMENT, "calibration: no layer %d (there are %d)", layer, s->n_layers);
    if (channel < (allow_layer ? -1 : 0) || channel >= l->channels)
        return nc_fail(err, NC_ERR_ARGUMENT, "calibration: layer '%s' has no channel %d (it has %d)", l->name,
                       channel, l->channels);
    return NC_OK;
}

nc_status nc_calib_get_stats(const nc_calib_stats *s, int layer, int channel, nc_act_stats *out, nc_error *err)
{
    nc_status st = check_index(s, layer, channel, 1, err);
    if (st != NC_OK)
        return st;
    const calib_layer *l = &s->layers[layer];
    int first = channel < 0 ? 0 : channel, last = channel < 0 ? l->channels : channel + 1;
    int64_t count = 0, zeros = 0;
    double sum = 0;
    for (int c = first; c < last; c++) {
        count += l->count[c];
        zeros += l->zeros[c];
        sum += l->sum[c];
    }
    memset(out, 0, sizeof *out);
    out->count = count;
    out->zero_fraction = count ? (double)zeros / (double)count : 0;
    out->mean = count ? sum / (double)count : 0;
    out->max = channel < 0 ? l->layer_max : l->max[channel];
    out->p99 = nc_calib_percentile(s, layer, channel, 99.0);
    out->p99_9 = nc_calib_percentile(s, layer, channel, 99.9);
    out->p99_99 = nc_calib_percentile(s, layer, channel, 99.99);
    return NC_OK;
}

nc_status nc_calib_get_channel(const nc_calib_stats *s, int layer, int channel, nc_calib_channel *out,
                               nc_error *err)
{
    nc_status st = check_index(s, layer, channel, 0, err);
    if (st != NC_OK)
        return st;
    const calib_layer *l = &s->layers[layer];
    out->count = l->count[channel];
    out->zeros = l->zeros[channel];
    out->sum = l->sum[channel];
    out->max = l->max[channel];
    out->hist = s->hist_ready ? l->hist + (size_t)channel * (size_t)s->bins : NULL;
    return NC_OK;
}

nc_status nc_calib_set_channel(nc_calib_stats *s, int layer, int channel, const nc_calib_channel *in,
                               nc_error *err)
{
    nc_status st = check_index(s, layer, channel, 0, err);
    if (st != NC_OK)
        return st;
    if (in->count < 0 || in->zeros < 0 || in->zeros > in->count || !(in->max >= 0) || !isfinite(in->max))
        return nc_fail(err, NC_ERR_FORMAT, "calibration: inconsistent statistics for channel %d of '%s'",
                       channel, s->layers[layer].name);
    calib_layer *l = &s->layers[layer];
    l->count[channel] = in->count;
    l->zeros[channel] = in->zeros;
    l->sum[channel] = in->sum;
    l->max[channel] = in->max;
    if (in->hist) {
        memcpy(l->hist + (size_t)channel * (size_t)s->bins, in->hist, (size_t)s->bins * sizeof *l->hist);
        s->hist_ready = 1;
    }
    s->max_done = 1;
    return NC_OK;
}

void nc_calib_rebuild_layers(nc_calib_stats *s)
{
    for (int i = 0; i < s->n_layers; i++) {
        calib_layer *l = &s->layers[i];
        layer_update_max(l);
        memset(l->layer_hist, 0, (size_t)s->bins * sizeof *l->layer_hist);
        if (!(l->layer_max > 0))
            continue;
        float sl = (float)s->bins / l->layer_max;
        for (int c = 0; c < l->channels; c++) {
            const uint64_t *h = l->hist + (size_t)c * (size_t)s->bins;
            float w = l->max[c] / (float)s->bins;
            for (int b = 0; b < s->bins; b++)
                if (h[b])
                    l->layer_hist[bin_of(((float)b + 0.5f) * w, sl, s->bins)] += h[b];
        }
    }
}

/* ---- thresholds ----------------------------------------------------------- */

/* The histogram and its upper end for a layer or channel, or NULL when there
 * is no positive data. */
static const uint64_t *hist_of(const nc_calib_stats *s, int layer, int channel, float *hi)
{
    const calib_layer *l = get_layer(s, layer);
    if (!l || channel < -1 || channel >= l->channels)
        return NULL;
    const uint64_t *h = nc_calib_histogram(s, layer, channel, hi);
    return h && *hi > 0 ? h : NULL;
}

/* Estimate of the k-th smallest (0-based) positive value: placed inside its
 * bin at (j + ½)/h of the width, j its place among the bin's h values. */
static double order_stat(const uint64_t *h, int bins, double w, uint64_t k)
{
    uint64_t cum = 0;
    for (int b = 0; b < bins; b++) {
        if (cum + h[b] > k)
            return (b + ((double)(k - cum) + 0.5) / (double)h[b]) * w;
        cum += h[b];
    }
    return bins * w;
}

float nc_calib_percentile(const nc_calib_stats *s, int layer, int channel, double p)
{
    float hi;
    const uint64_t *h = hist_of(s, layer, channel, &hi);
    if (!h || !(p > 0))
        return 0;
    if (p >= 100)
        return hi; /* the exact max, not a bin estimate */
    uint64_t n = 0;
    for (int b = 0; b < s->bins; b++)
        n += h[b];
    if (n == 0)
        return 0;
    double pos = p / 100.0 * (double)(n - 1), w = (double)hi / s->bins;
    uint64_t k = (uint64_t)pos;
    double f = pos - (double)k, v = order_stat(h, s->bins, w, k);
    if (f > 0 && k + 1 < n)
        v += f * (order_stat(h, s->bins, w, k + 1) - v);
    return (float)fmin(v, hi);
}

/* q(a) of nc_calib.h: the quantiser of an IF neuron with threshold θ over T
 * steps, v0 = φθ. */
static inline double quantise(double a, double theta, int T, double phi)
{
    double k = floor(a * T / theta + phi);
    k = k < 0 ? 0 : k > T ? T : k;
    return k * theta / T;
}

double nc_calib_mmse_error(const nc_calib_stats *s, int layer, int channel, float theta, int T, float phi)
{
    float hi;
    const uint64_t *h = hist_of(s, layer, channel, &hi);
    if (!h || !(theta > 0) || T < 1)
        return 0;
    double w = (double)hi / s->bins, e = 0;
    for (int b = 0; b < s->bins; b++) {
        if (!h[b])
            continue;
        double a = (b + 0.5) * w, d = quantise(a, theta, T, phi) - a;
        e += (double)h[b] * d * d;
    }
    return e;
}

static float select_mmse(const nc_calib_stats *s, int layer, int channel, int T, float phi)
{
    float hi;
    if (!hist_of(s, layer, channel, &hi) || T < 1)
        return 0;
    float best = hi;
    double best_e = INFINITY;
    for (int i = 0; i <= 94; i++) {
        float theta = hi * (1.0f - 0.01f * (float)i);
        double e = nc_calib_mmse_error(s, layer, channel, theta, T, phi);
        if (e < best_e) { /* strict: ties keep the larger θ */
            best_e = e;
            best = theta;
        }
    }
    return best;
}

float nc_calib_select(const nc_calib_stats *s, int layer, int channel, nc_calib_method method, int T, float phi)
{
    const calib_layer *l = get_layer(s, layer);
    if (!l || channel < -1 || channel >= l->channels)
        return 0;
    switch (method) {
    case NC_CALIB_MAX: return channel < 0 ? l->layer_max : l->max[channel];
    case NC_CALIB_MMSE: return select_mmse(s, layer, channel, T, phi);
    default: return nc_calib_percentile(s, layer, channel, nc_calib_method_percentile(method));
    }
}

/* ---- threshold sets ------------------------------------------------------- */

nc_calib_choice nc_calib_choice_default(void)
{
    nc_calib_choice c = {NC_CALIB_DEFAULT_METHOD, 0, 8, 0.5f};
    return c;
}

nc_thresholds *nc_thresholds_new(int n_nodes)
{
    nc_thresholds *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->n_nodes = n_nodes;
    t->count = calloc((size_t)(n_nodes > 0 ? n_nodes : 1), sizeof *t->count);
    t->values = calloc((size_t)(n_nodes > 0 ? n_nodes : 1), sizeof *t->values);
    if (!t->count || !t->values) {
        nc_thresholds_free(t);
        return NULL;
    }
    return t;
}

void nc_thresholds_free(nc_thresholds *t)
{
    if (!t)
        return;
    for (int i = 0; t->values && i < t->n_nodes; i++)
        free(t->values[i]);
    free(t->values);
    free(t->count);
    free(t);
}

nc_status nc_thresholds_set(nc_thresholds *t, int node, int n, const float *values, nc_error *err)
{
    if (node < 0 || node >= t->n_nodes || n < 1)
        return nc_fail(err, NC_ERR_ARGUMENT, "thresholds: bad node %d or count %d", node, n);
    float *copy = malloc((size_t)n * sizeof *copy);
    if (!copy)
        return nc_fail(err, NC_ERR_MEMORY, "thresholds: out of memory");
    memcpy(copy, values, (size_t)n * sizeof *copy);
    free(t->values[node]);
    t->values[node] = copy;
    t->count[node] = n;
    return NC_OK;
}

__attribute__((format(printf, 2, 3))) static void warn(nc_thresholds *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    nc_append_linev(t->warnings, sizeof t->warnings, fmt, ap);
    va_end(ap);
}

/* θ for one layer, layer-wise or per channel, with the dead fallbacks. */
static nc_status layer_thresholds(const nc_calib_stats *s, int layer, const nc_calib_choice *ch,
                                  nc_thresholds *t, nc_error *err)
{
    const calib_layer *l = &s->layers[layer];
    float layer_theta = nc_calib_select(s, layer, -1, ch->method, ch->T, ch->phi);
    if (!(layer_theta > 0)) {
        warn(t, "layer '%s' never activated on the calibration data: threshold set to 1.0", l->name);
        layer_theta = 1.0f;
    }
    int n = ch->per_channel ? l->channels : 1;
    float *v = malloc((size_t)n * sizeof *v);
    if (!v)
        return nc_fail(err, NC_ERR_MEMORY, "thresholds: out of memory");
    int dead = 0;
    v[0] = layer_theta;
    for (int c = 0; ch->per_channel && c < n; c++) {
        v[c] = nc_calib_select(s, layer, c, ch->method, ch->T, ch->phi);
        if (!(v[c] > 0)) {
            v[c] = layer_theta;
            dead++;
        }
    }
    if (dead && dead < n)
        warn(t, "layer '%s': %d of %d channels never activated; they get the layer threshold %.4g", l->name, dead,
             n, layer_theta);
    nc_status st = nc_thresholds_set(t, l->node, n, v, err);
    free(v);
    return st;
}

nc_status nc_calib_thresholds(const nc_calib_stats *s, int n_nodes, const nc_calib_choice *choice,
                              nc_thresholds **out, nc_error *err)
{
    *out = NULL;
    nc_calib_choice ch = choice ? *choice : nc_calib_choice_default();
    if ((unsigned)ch.method >= NC_CALIB_METHOD_COUNT)
        return nc_fail(err, NC_ERR_ARGUMENT, "calibration: unknown threshold method %d", (int)ch.method);
    if (ch.method == NC_CALIB_MMSE && (ch.T < 1 || !(ch.phi >= 0 && ch.phi < 1)))
        return nc_fail(err, NC_ERR_ARGUMENT, "calibration: mmse needs T ≥ 1 and 0 ≤ φ < 1 (got T %d, φ %g)", ch.T,
                       ch.phi);
    if (ch.method != NC_CALIB_MAX && !s->hist_ready)
        return nc_fail(err, NC_ERR_ARGUMENT, "calibration: method %s needs the histogram pass",
                       nc_calib_method_name(ch.method));
    if (n_nodes != s->n_nodes)
        return nc_fail(err, NC_ERR_ARGUMENT, "calibration: statistics are for a net of %d nodes, not %d",
                       s->n_nodes, n_nodes);
    nc_thresholds *t = nc_thresholds_new(n_nodes);
    if (!t)
        return nc_fail(err, NC_ERR_MEMORY, "thresholds: out of memory");
    for (int i = 0; i < s->n_layers; i++) {
        nc_status st = layer_thresholds(s, i, &ch, t, err);
        if (st != NC_OK) {
            nc_thresholds_free(t);
            return st;
        }
    }
    *out = t;
    return NC_OK;
}
