/* nc_record.c — accumulation of an SNN run (metrics defined in nc_record.h). */
#include "nc_record.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nc_config.h"
#include "nc_h5util.h"

/* Sums of one error term over (neuron, sample) pairs. */
typedef struct err_acc {
    double sum, sq, abs, ref_sq; /* ref_sq: Σ reference², for rel_l2 */
    int64_t pairs;
} err_acc;

typedef struct layer_acc {
    int node;
    int64_t numel, inner;        /* values per sample, per channel            */
    int channels;
    const nc_neuron *neuron;     /* θ, v0_fraction, reset (owned by the net)  */
    double fanout;

    /* totals over finished batches */
    int64_t spikes, dead, saturated, clipped, pairs;
    int64_t *chan_spikes;        /* [channels]                                */
    err_acc total, local, clip, quant, uneven;

    /* the current batch: [n, numel] each */
    uint16_t *count;             /* spikes per (sample, neuron)               */
    float *zsum;                 /* Σ_t input current                         */
    float *a;                    /* ANN activation                            */
    int steps_spk, steps_in;     /* steps delivered so far                    */
    int has_a;
    int sums, sums_in;           /* count / zsum came as sums over the steps  */
    int has_z;                   /* zsum holds the batch's Σ_t x_t (checked)  */

    /* raster: rk neurons of the first raster_samples samples */
    int rk;
    int64_t *r_index;
    uint8_t *r_bits;
    uint8_t *b_bits;             /* with a raster sink: the batch's raster    */
    /* traces: tk neurons of the first trace_samples samples */
    int tk;
    int64_t *t_index;
    float *t_theta, *t_cur, *t_v;
    uint8_t *t_spk;
} layer_acc;

struct nc_record {
    const nc_net *net;
    int T;
    nc_record_spec spec;
    int n_layers;
    layer_acc *layers;
    int *layer_of;               /* [n_nodes]: layer index or -1              */

    int64_t samples;
    int64_t *correct_by_step;    /* [T]                                       */
    int64_t ref_correct[2], ref_samples[2];

    /* the current batch */
    int64_t batch_n, batch_cap;  /* samples now, buffers sized for           */
    int batch_open;
    int batch_sums;              /* IF layers shown as sums over the steps    */
    int64_t batch_step_n;        /* samples whose every step is shown         */
    int64_t batch_ref_correct[2];
    int batch_ref_seen[2];
    double *cum;                 /* [n, classes] running output sums          */
    int64_t cum_cap;
    nc_error sticky;             /* the first bad observer call               */
};

/* ---- helpers ------------------------------------------------------------------ */

static float theta_of(const layer_acc *L, int64_t flat)
{
    const nc_neuron *nr = L->neuron;
    return nr->n_threshold > 1 ? nr->threshold[(flat / L->inner) % L->channels] : nr->threshold[0];
}

static int resolve(int value, int fallback) { return value == 0 ? fallback : value < 0 ? 0 : value; }

static void set_bit(uint8_t *bits, int64_t b, int on)
{
    if (on)
        bits[b >> 3] |= (uint8_t)(1u << (b & 7));
    else
        bits[b >> 3] &= (uint8_t)~(1u << (b & 7));
}

/* k evenly spread flat indices ⌊j·numel/k⌋ (no two equal since k ≤ numel). */
static int64_t *spread_indices(int k, int64_t numel)
{
    int64_t *idx = malloc((size_t)(k > 0 ? k : 1) * sizeof *idx);
    for (int j = 0; idx && j < k; j++)
        idx[j] = (int64_t)((double)j * (double)numel / (double)k);
    return idx;
}

static void layer_free(layer_acc *L)
{
    free(L->chan_spikes);
    free(L->count);
    free(L->zsum);
    free(L->a);
    free(L->r_index);
    free(L->r_bits);
    free(L->b_bits);
    free(L->t_index);
    free(L->t_theta);
    free(L->t_cur);
    free(L->t_v);
    free(L->t_spk);
}

void nc_record_free(nc_record *rec)
{
    if (!rec)
        return;
    for (int i = 0; i < rec->n_layers; i++)
        layer_free(&rec->layers[i]);
    free(rec->layers);
    free(rec->layer_of);
    free(rec->correct_by_step);
    free(rec->cum);
    free(rec);
}

/* ---- construction ---------------------------------------------------------------- */

static int is_layer(const nc_node *node)
{
    return node->kind == NC_NODE_NEURON && node->neuron.model == NC_NEURON_IF && node->neuron.n_threshold > 0;
}

static int layer_init_views(layer_acc *L, const nc_record_spec *spec, int T)
{
    L->rk = (int)(L->numel < spec->raster_neurons ? L->numel : spec->raster_neurons);
    L->tk = (int)(L->numel < spec->trace_neurons ? L->numel : spec->trace_neurons);
    size_t rbits = (size_t)spec->raster_samples * (size_t)L->rk * (size_t)T;
    size_t tvals = (size_t)spec->trace_samples * (size_t)L->tk * (size_t)T;
    L->r_index = spread_indices(L->rk, L->numel);
    L->r_bits = calloc(rbits / 8 + 1, 1);
    L->t_index = spread_indices(L->tk, L->numel);
    L->t_theta = malloc((size_t)(L->tk + 1) * sizeof(float));
    L->t_cur = calloc(tvals + 1, sizeof(float));
    L->t_spk = calloc(tvals + 1, 1);
    L->t_v = calloc(tvals + (size_t)spec->trace_samples * (size_t)L->tk + 1, sizeof(float));
    if (!L->r_index || !L->r_bits || !L->t_index || !L->t_theta || !L->t_cur || !L->t_spk || !L->t_v)
        return -1;
    for (int j = 0; j < L->tk; j++)
        L->t_theta[j] = theta_of(L, L->t_index[j]);
    return 0;
}

static int layer_init(layer_acc *L, const nc_net *net, int node, const nc_record_spec *spec, int T)
{
    const nc_node *nd = &net->nodes[node];
    L->node = node;
    L->numel = nc_node_numel(nd);
    L->channels = nc_node_channels(nd);
    if (L->numel < 1 || L->channels < 1 || L->numel % L->channels != 0)
        return -1;
    L->inner = L->numel / L->channels;
    L->neuron = &nd->neuron;
    L->fanout = nc_node_fanout(net, node);
    L->chan_spikes = calloc((size_t)L->channels, sizeof(int64_t));
    return L->chan_spikes ? layer_init_views(L, spec, T) : -1;
}

static nc_status find_layers(nc_record *rec, nc_error *err)
{
    const nc_net *net = rec->net;
    rec->layer_of = malloc((size_t)net->n_nodes * sizeof(int));
    rec->layers = calloc((size_t)net->n_nodes, sizeof(layer_acc));
    if (!rec->layer_of || !rec->layers)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for a record");
    for (int i = 0; i < net->n_nodes; i++) {
        rec->layer_of[i] = -1;
        if (rec->spec.layers == NC_RECORD_NONE || !is_layer(&net->nodes[i]))
            continue;
        layer_acc *L = &rec->layers[rec->n_layers++];
        if (layer_init(L, net, i, &rec->spec, rec->T) != 0)
            return nc_fail(err, NC_ERR_MEMORY, "cannot set up recording of node '%s' (out of memory or no shape)",
                           net->nodes[i].name);
        rec->layer_of[i] = rec->n_layers - 1;
    }
    return NC_OK;
}

nc_status nc_record_new(const nc_net *net, int T, const nc_record_spec *spec, nc_record **out, nc_error *err)
{
    *out = NULL;
    if (T < 1 || T > 65535) /* spike counts are uint16 per batch */
        return nc_fail(err, NC_ERR_ARGUMENT, "T = %d steps: a record needs 1 ≤ T ≤ 65535", T);
    if (!net || net->n_nodes < 1)
        return nc_fail(err, NC_ERR_ARGUMENT, "a record needs a network");
    nc_record *rec = calloc(1, sizeof *rec);
    if (!rec)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for a record");
    nc_record_spec s = spec ? *spec : (nc_record_spec){0};
    rec->spec.layers = s.layers == NC_RECORD_NONE ? NC_RECORD_NONE : 0;
    rec->spec.raster_samples = resolve(s.raster_samples, NC_RECORD_DEFAULT_RASTER_SAMPLES);
    rec->spec.raster_neurons = resolve(s.raster_neurons, NC_RECORD_DEFAULT_RASTER_NEURONS);
    rec->spec.trace_samples = resolve(s.trace_samples, NC_RECORD_DEFAULT_TRACE_SAMPLES);
    rec->spec.trace_neurons = resolve(s.trace_neurons, NC_RECORD_DEFAULT_TRACE_NEURONS);
    rec->spec.raster_sink = s.raster_sink;
    rec->spec.raster_sink_user = s.raster_sink_user;
    rec->net = net;
    rec->T = T;
    rec->correct_by_step = calloc((size_t)T, sizeof(int64_t));
    nc_status st = rec->correct_by_step ? find_layers(rec, err)
                                        : nc_fail(err, NC_ERR_MEMORY, "out of memory for a record");
    if (st != NC_OK) {
        nc_record_free(rec);
        return st;
    }
    *out = rec;
    return NC_OK;
}

/* ---- feeding ------------------------------------------------------------------------ */

static size_t batch_raster_bytes(const layer_acc *L, int T, int64_t n)
{
    return ((size_t)n * (size_t)L->rk * (size_t)T + 7) / 8;
}

static int grow_batch(nc_record *rec, int64_t n)
{
    for (int i = 0; i < rec->n_layers; i++) {
        layer_acc *L = &rec->layers[i];
        size_t count = (size_t)n * (size_t)L->numel;
        free(L->count);
        free(L->zsum);
        free(L->a);
        L->count = malloc(count * sizeof(uint16_t));
        L->zsum = malloc(count * sizeof(float));
        L->a = malloc(count * sizeof(float));
        if (!L->count || !L->zsum || !L->a)
            return -1;
        free(L->b_bits);
        L->b_bits = NULL;
        if (rec->spec.raster_sink && !(L->b_bits = malloc(batch_raster_bytes(L, rec->T, n))))
            return -1;
    }
    rec->batch_cap = n;
    return 0;
}

nc_status nc_record_begin_batch_at(nc_record *rec, int64_t first, int64_t n, nc_error *err)
{
    if (first < 0)
        return nc_fail(err, NC_ERR_ARGUMENT, "record: a batch cannot start at sample %lld", (long long)first);
    rec->samples = first;
    return nc_record_begin_batch(rec, n, err);
}

nc_status nc_record_begin_batch(nc_record *rec, int64_t n, nc_error *err)
{
    rec->batch_open = 0;
    if (n < 1)
        return nc_fail(err, NC_ERR_ARGUMENT, "a batch needs at least one sample");
    for (int i = 0; i < rec->n_layers; i++)
        if ((uint64_t)n > SIZE_MAX / 8 / (uint64_t)rec->layers[i].numel)
            return nc_fail(err, NC_ERR_MEMORY, "a batch of %lld samples is too large to record", (long long)n);
    if (n > rec->batch_cap && grow_batch(rec, n) != 0) {
        rec->batch_cap = 0;
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for recording a batch of %lld samples", (long long)n);
    }
    for (int i = 0; i < rec->n_layers; i++) {
        layer_acc *L = &rec->layers[i];
        size_t count = (size_t)n * (size_t)L->numel;
        memset(L->count, 0, count * sizeof(uint16_t));
        memset(L->zsum, 0, count * sizeof(float));
        if (L->b_bits)
            memset(L->b_bits, 0, batch_raster_bytes(L, rec->T, n));
        L->steps_spk = L->steps_in = L->has_a = L->sums = L->sums_in = L->has_z = 0;
    }
    rec->batch_sums = 0;
    rec->batch_step_n = n;
    memset(rec->batch_ref_correct, 0, sizeof rec->batch_ref_correct);
    memset(rec->batch_ref_seen, 0, sizeof rec->batch_ref_seen);
    rec->sticky.code = NC_OK;
    rec->sticky.message[0] = 0;
    rec->batch_n = n;
    rec->batch_open = 1;
    return NC_OK;
}

/* The layer a call is about, or NULL (not a layer, or a bad call: then the
 * sticky error says why).  steps: out, the steps this call delivers. */
static layer_acc *observed_layer(nc_record *rec, int node, int64_t rows, int64_t per_row, int snn, int *steps)
{
    if (node < 0 || node >= rec->net->n_nodes || rec->layer_of[node] < 0)
        return NULL;
    layer_acc *L = &rec->layers[rec->layer_of[node]];
    const char *name = rec->net->nodes[node].name;
    if (rec->sticky.code != NC_OK)
        return NULL;
    if (!rec->batch_open) {
        nc_fail(&rec->sticky, NC_ERR_INTERNAL, "record: node '%s' observed outside a batch", name);
        return NULL;
    }
    int64_t n = snn ? rec->batch_step_n : rec->batch_n;
    if (n == 0 || per_row != L->numel || rows % n != 0 || (!snn && rows != n)) {
        nc_fail(&rec->sticky, NC_ERR_SHAPE, "record: node '%s' observed as %lld × %lld values, expected %s × %lld",
                name, (long long)rows, (long long)per_row, snn ? "(steps·batch)" : "batch", (long long)L->numel);
        return NULL;
    }
    *steps = (int)(rows / n);
    return L;
}

void nc_record_observe_ann(void *user, int node, const float *data, int64_t rows, int64_t per_row)
{
    nc_record *rec = user;
    int steps;
    layer_acc *L = observed_layer(rec, node, rows, per_row, 0, &steps);
    if (!L)
        return;
    memcpy(L->a, data, (size_t)rows * (size_t)per_row * sizeof(float));
    L->has_a = 1;
}

static int too_many_steps(nc_record *rec, layer_acc *L, int have, int steps)
{
    if (have + steps <= rec->T)
        return 0;
    nc_fail(&rec->sticky, NC_ERR_SHAPE, "record: node '%s' observed for more than T = %d steps",
            rec->net->nodes[L->node].name, rec->T);
    return 1;
}

/* Raster and trace bits of one step of one sample (global index g). */
static void keep_spike_views(nc_record *rec, layer_acc *L, int64_t g, int t, const float *row)
{
    int T = rec->T;
    for (int j = 0; g < rec->spec.raster_samples && j < L->rk; j++)
        set_bit(L->r_bits, ((int64_t)g * L->rk + j) * T + t, row[L->r_index[j]] != 0.0f);
    for (int j = 0; g < rec->spec.trace_samples && j < L->tk; j++)
        L->t_spk[((int64_t)g * L->tk + j) * T + t] = row[L->t_index[j]] != 0.0f;
    int64_t s = g - rec->samples; /* within the batch */
    for (int j = 0; L->b_bits && j < L->rk; j++)
        set_bit(L->b_bits, (s * L->rk + j) * T + t, row[L->r_index[j]] != 0.0f);
}

/* One step t of sample s (within the batch) of an IF layer's output:
 * spike counts (unless they come as sums), raster and trace bits. */
static void add_spikes(nc_record *rec, layer_acc *L, int64_t s, int t, const float *row)
{
    uint16_t *count = L->count + s * L->numel;
    for (int64_t i = 0; !rec->batch_sums && i < L->numel; i++)
        count[i] += row[i] != 0.0f;
    keep_spike_views(rec, L, rec->samples + s, t, row);
}

/* One step t of sample s of an IF layer's input current: its sum over the
 * steps (unless it comes as a sum) and the traced neurons' currents. */
static void add_input(nc_record *rec, layer_acc *L, int64_t s, int t, const float *row)
{
    int64_t g = rec->samples + s;
    float *z = L->zsum + s * L->numel;
    for (int64_t i = 0; !rec->batch_sums && i < L->numel; i++)
        z[i] += row[i];
    for (int j = 0; g < rec->spec.trace_samples && j < L->tk; j++)
        L->t_cur[(g * L->tk + j) * rec->T + t] = row[L->t_index[j]];
}

/* The next steps of an IF layer's output (or, with input, its input),
 * [steps, samples, per_row]: every sample of the batch, or with sums its
 * first batch_step_n. */
static void observe_steps(nc_record *rec, int node, const float *data, int64_t rows, int64_t per_row, int input)
{
    int steps;
    layer_acc *L = observed_layer(rec, node, rows, per_row, 1, &steps);
    int *done = L ? (input ? &L->steps_in : &L->steps_spk) : NULL;
    if (!L || too_many_steps(rec, L, *done, steps))
        return;
    int64_t n = rec->batch_step_n;
    for (int k = 0; k < steps; k++)
        for (int64_t s = 0; s < n; s++) {
            const float *row = data + ((int64_t)k * n + s) * per_row;
            if (input)
                add_input(rec, L, s, *done + k, row);
            else
                add_spikes(rec, L, s, *done + k, row);
        }
    *done += steps;
}

int64_t nc_record_step_samples(const nc_record *rec)
{
    if (!rec->batch_open)
        return 0;
    if (rec->spec.raster_sink)
        return rec->batch_n;
    int64_t views = rec->spec.raster_samples > rec->spec.trace_samples ? rec->spec.raster_samples
                                                                       : rec->spec.trace_samples;
    int64_t left = views - rec->samples;
    return left <= 0 ? 0 : left < rec->batch_n ? left : rec->batch_n;
}

void nc_record_expect_sums(nc_record *rec)
{
    rec->batch_step_n = nc_record_step_samples(rec);
    rec->batch_sums = rec->batch_open;
}

void nc_record_observe_sums(void *user, int node, const float *spikes, const float *inputs, int64_t n,
                            int64_t per_row)
{
    nc_record *rec = user;
    if (node < 0 || node >= rec->net->n_nodes || rec->layer_of[node] < 0 || rec->sticky.code != NC_OK)
        return;
    layer_acc *L = &rec->layers[rec->layer_of[node]];
    const char *name = rec->net->nodes[node].name;
    if (!rec->batch_open || !rec->batch_sums) {
        nc_fail(&rec->sticky, NC_ERR_INTERNAL, "record: sums of node '%s' shown outside a batch that expects them",
                name);
        return;
    }
    if (n != rec->batch_n || per_row != L->numel || !spikes || L->sums) {
        nc_fail(&rec->sticky, NC_ERR_SHAPE, "record: sums of node '%s' shown as %lld × %lld values%s, expected "
                "%lld × %lld once", name, (long long)n, (long long)per_row, L->sums ? " a second time" : "",
                (long long)rec->batch_n, (long long)L->numel);
        return;
    }
    int64_t count = n * per_row;
    for (int64_t i = 0; i < count; i++) {
        float c = spikes[i];
        if (!(c >= 0 && c <= rec->T && c == (float)(int)c)) {
            nc_fail(&rec->sticky, NC_ERR_SHAPE, "record: node '%s' shown with %g spikes of a neuron in %d steps",
                    name, c, rec->T);
            return;
        }
        L->count[i] = (uint16_t)c;
    }
    if (inputs)
        memcpy(L->zsum, inputs, (size_t)count * sizeof(float));
    L->sums = 1;
    L->sums_in = inputs != NULL;
}

void nc_record_observe_snn(void *user, int node, const float *data, int64_t rows, int64_t per_row)
{
    observe_steps(user, node, data, rows, per_row, 0);
}

void nc_record_observe_snn_input(void *user, int node, const float *data, int64_t rows, int64_t per_row)
{
    observe_steps(user, node, data, rows, per_row, 1);
}

/* First index of the largest value; NaN never wins. */
static int64_t argmax_d(const double *v, int64_t n)
{
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (v[i] > v[best] || (isnan(v[best]) && !isnan(v[i])))
            best = i;
    return best;
}

static int64_t argmax_f(const float *v, int64_t n)
{
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (v[i] > v[best] || (isnan(v[best]) && !isnan(v[i])))
            best = i;
    return best;
}

nc_status nc_record_add_reference(nc_record *rec, nc_record_ref which, const float *out, int64_t n,
                                  int64_t classes, const int32_t *labels, nc_error *err)
{
    if (!rec->batch_open || n != rec->batch_n || classes < 1 || (which != NC_RECORD_REF_ANN && which != NC_RECORD_REF_QCFS))
        return nc_fail(err, NC_ERR_ARGUMENT, "record: a reference output must match the open batch of %lld samples",
                       (long long)rec->batch_n);
    int64_t correct = 0;
    for (int64_t s = 0; s < n; s++)
        correct += argmax_f(out + s * classes, classes) == labels[s];
    rec->batch_ref_correct[which] = correct;
    rec->batch_ref_seen[which] = 1;
    return NC_OK;
}

/* ---- end of batch ------------------------------------------------------------------ */

/* A batch's sums over its (neuron, sample) pairs before they join a layer's
 * totals: locals, which the compiler keeps in registers (pairs counted once). */
typedef struct pair_sums {
    int64_t spikes, dead, saturated, clipped;
    err_acc total, local, clip, quant, uneven;
} pair_sums;

static inline void err_add(err_acc *e, double value, double ref)
{
    e->sum += value;
    e->sq += value * value;
    e->abs += fabs(value);
    e->ref_sq += ref * ref;
}

/* A term without a reference (its rel_l2 is not defined). */
static inline void err_add_plain(err_acc *e, double value)
{
    e->sum += value;
    e->sq += value * value;
    e->abs += fabs(value);
}

/* The threshold of a channel and what the §3.4 terms use of it, computed
 * once per channel (the pairs then multiply instead of dividing). */
typedef struct channel_consts {
    double th, th_per_step, per_th, per_T, T, v0_fraction;
} channel_consts;

/* The §3.4 terms of one (neuron, sample) pair; see nc_record.h.
 * z·T/θ = zsum/θ, so q_T(z) = (θ/T)·floor(zsum/θ + v0_fraction). */
static inline void add_pair(pair_sums *p, const channel_consts *k, int N, const float *a, const float *zsum)
{
    double phi = k->th_per_step * N, th = k->th;
    p->spikes += N;
    p->dead += N == 0;
    p->saturated += N == k->T;
    if (a)
        err_add(&p->total, phi - *a, *a);
    if (!zsum)
        return;
    double z = (double)*zsum * k->per_T;
    double relu = z > 0 ? z : 0;
    double clip = relu < th ? relu : th;
    double q = k->th_per_step * floor((double)*zsum * k->per_th + k->v0_fraction);
    q = q < 0 ? 0 : q > th ? th : q;
    err_add(&p->local, phi - relu, relu);
    err_add_plain(&p->clip, clip - relu);
    err_add_plain(&p->quant, q - clip);
    err_add_plain(&p->uneven, phi - q);
    p->clipped += z > th;
}

static void err_join(err_acc *into, const err_acc *e, int64_t pairs)
{
    into->sum += e->sum;
    into->sq += e->sq;
    into->abs += e->abs;
    into->ref_sq += e->ref_sq;
    into->pairs += pairs;
}

/* The batch that B observed enters L's totals (B = L for one record; a
 * rank's record otherwise, nc_record_end_batch_into).  A channel's values
 * are contiguous in a sample (layer_init: inner = numel / channels). */
static void fold_layer(layer_acc *L, const layer_acc *B, int T, int64_t n)
{
    const nc_neuron *nr = L->neuron;
    pair_sums p = {0};
    for (int64_t s = 0; s < n; s++) {
        for (int c = 0; c < L->channels; c++) {
            double th = nr->threshold[nr->n_threshold > 1 ? c : 0];
            channel_consts k = {th, th / T, 1.0 / th, 1.0 / T, T, nr->v0_fraction};
            int64_t first = s * L->numel + (int64_t)c * L->inner, before = p.spikes;
            for (int64_t i = first; i < first + L->inner; i++)
                add_pair(&p, &k, B->count[i], B->has_a ? &B->a[i] : NULL, B->has_z ? &B->zsum[i] : NULL);
            L->chan_spikes[c] += p.spikes - before;
        }
    }
    int64_t pairs = n * L->numel;
    L->spikes += p.spikes;
    L->dead += p.dead;
    L->saturated += p.saturated;
    L->clipped += p.clipped;
    err_join(&L->total, &p.total, B->has_a ? pairs : 0);
    err_join(&L->local, &p.local, B->has_z ? pairs : 0);
    err_join(&L->clip, &p.clip, B->has_z ? pairs : 0);
    err_join(&L->quant, &p.quant, B->has_z ? pairs : 0);
    err_join(&L->uneven, &p.uneven, B->has_z ? pairs : 0);
    L->pairs += pairs;
}

/* The raster bits and trace values a rank's record kept of samples
 * [first, first + n), copied to the same places of the total's. */
static void copy_views(const nc_record *rec, layer_acc *L, const layer_acc *B, int64_t first, int64_t n)
{
    int T = rec->T;
    for (int64_t g = first; g < first + n && g < rec->spec.raster_samples; g++)
        for (int64_t b = g * L->rk * T; b < (g + 1) * L->rk * T; b++)
            set_bit(L->r_bits, b, (B->r_bits[b >> 3] >> (b & 7)) & 1);
    for (int64_t g = first; g < first + n && g < rec->spec.trace_samples; g++) {
        size_t at = (size_t)(g * L->tk * T), count = (size_t)L->tk * (size_t)T;
        memcpy(L->t_cur + at, B->t_cur + at, count * sizeof(float));
        memcpy(L->t_spk + at, B->t_spk + at, count);
    }
}

/* v_t from v_0, the inputs and the observed spikes (nc_record.h). */
static void reconstruct_traces(nc_record *rec, layer_acc *L, int64_t first, int64_t n)
{
    int T = rec->T;
    for (int64_t g = first; g < first + n && g < rec->spec.trace_samples; g++) {
        for (int j = 0; j < L->tk; j++) {
            int64_t base = (g * L->tk + j) * T;
            float theta = L->t_theta[j];
            float *v = L->t_v + (g * L->tk + j) * (T + 1);
            v[0] = L->neuron->v0_fraction * theta;
            for (int t = 0; t < T; t++) {
                float m = v[t] + L->t_cur[base + t];
                int spike = L->t_spk[base + t];
                v[t + 1] = !spike ? m : L->neuron->reset == NC_RESET_SUBTRACT ? m - theta : 0.0f;
            }
        }
    }
}

static nc_status check_batch(nc_record *rec, const float *out, int64_t classes, nc_error *err)
{
    if (!rec->batch_open)
        return nc_fail(err, NC_ERR_ARGUMENT, "record: nc_record_end_batch without nc_record_begin_batch");
    if (rec->sticky.code != NC_OK)
        return nc_fail(err, rec->sticky.code, "%s", rec->sticky.message);
    if (!out || classes < 1)
        return nc_fail(err, NC_ERR_ARGUMENT, "record: no SNN output for the batch");
    /* with sums, every step of only the first batch_step_n samples */
    int want = rec->batch_sums && rec->batch_step_n == 0 ? 0 : rec->T;
    for (int i = 0; i < rec->n_layers; i++) {
        layer_acc *L = &rec->layers[i];
        const char *name = rec->net->nodes[L->node].name;
        if (L->steps_spk != want || (L->steps_in != 0 && L->steps_in != want))
            return nc_fail(err, NC_ERR_INTERNAL,
                           "record: the engine showed %d spike steps and %d input steps of node '%s', expected %d",
                           L->steps_spk, L->steps_in, name, want);
        if (rec->batch_sums && !L->sums)
            return nc_fail(err, NC_ERR_INTERNAL, "record: the engine showed no sums over the steps of node '%s'",
                           name);
        L->has_z = rec->batch_sums ? L->sums_in : L->steps_in == rec->T;
    }
    return NC_OK;
}

static nc_status add_accuracy(nc_record *rec, nc_record *total, const int32_t *labels, const float *out,
                              int64_t classes, nc_error *err)
{
    int64_t n = rec->batch_n, need = n * classes;
    if (need > rec->cum_cap) {
        double *cum = realloc(rec->cum, (size_t)need * sizeof(double));
        if (!cum)
            return nc_fail(err, NC_ERR_MEMORY, "out of memory for the output sums");
        rec->cum = cum;
        rec->cum_cap = need;
    }
    memset(rec->cum, 0, (size_t)need * sizeof(double));
    for (int t = 0; t < rec->T; t++) {
        const float *step = out + (int64_t)t * need;
        for (int64_t s = 0; s < n; s++) {
            double *c = rec->cum + s * classes;
            for (int64_t k = 0; k < classes; k++)
                c[k] += step[s * classes + k];
            total->correct_by_step[t] += argmax_d(c, classes) == labels[s];
        }
    }
    return NC_OK;
}

nc_status nc_record_end_batch(nc_record *rec, const int32_t *labels, const float *out, int64_t classes,
                              nc_error *err)
{
    return nc_record_end_batch_into(rec, rec, labels, out, classes, err);
}

/* A record that receives another's batches must be its twin: the same net,
 * T and views, and its next sample must be the batch's first. */
static nc_status check_twin(const nc_record *rec, const nc_record *total, nc_error *err)
{
    if (total == rec)
        return NC_OK;
    if (total->net != rec->net || total->T != rec->T || total->n_layers != rec->n_layers ||
        total->spec.raster_samples != rec->spec.raster_samples || total->spec.trace_samples != rec->spec.trace_samples)
        return nc_fail(err, NC_ERR_ARGUMENT, "record: a batch can only join a record of the same net, T and views");
    if (total->samples != rec->samples)
        return nc_fail(err, NC_ERR_ARGUMENT, "record: the batch starting at sample %lld came before the record's "
                       "next (%lld): batches must join in order", (long long)rec->samples, (long long)total->samples);
    return NC_OK;
}

nc_status nc_record_end_batch_into(nc_record *rec, nc_record *total, const int32_t *labels, const float *out,
                                   int64_t classes, nc_error *err)
{
    nc_status st = check_batch(rec, out, classes, err);
    if (st == NC_OK)
        st = check_twin(rec, total, err);
    if (st == NC_OK)
        st = add_accuracy(rec, total, labels, out, classes, err);
    if (st != NC_OK) {
        rec->batch_open = 0;
        return st;
    }
    int64_t first = total->samples, n = rec->batch_n;
    for (int i = 0; i < rec->n_layers; i++) {
        if (total != rec)
            copy_views(total, &total->layers[i], &rec->layers[i], first, n);
        fold_layer(&total->layers[i], &rec->layers[i], rec->T, n);
        reconstruct_traces(total, &total->layers[i], first, n);
    }
    for (int i = 0; total->spec.raster_sink && i < rec->n_layers; i++)
        total->spec.raster_sink(total->spec.raster_sink_user, total, i, first, n, rec->layers[i].rk, rec->T,
                                rec->layers[i].b_bits);
    for (int k = 0; k < 2; k++) {
        if (rec->batch_ref_seen[k]) {
            total->ref_correct[k] += rec->batch_ref_correct[k];
            total->ref_samples[k] += n;
        }
    }
    total->samples += n;
    rec->batch_open = 0;
    return NC_OK;
}

/* ---- reading ------------------------------------------------------------------------ */

int nc_record_T(const nc_record *rec) { return rec->T; }
int64_t nc_record_samples(const nc_record *rec) { return rec->samples; }
const nc_net *nc_record_net(const nc_record *rec) { return rec->net; }
const nc_record_spec *nc_record_get_spec(const nc_record *rec) { return &rec->spec; }
int nc_record_layer_count(const nc_record *rec) { return rec->n_layers; }

int nc_record_layer_of_node(const nc_record *rec, int node)
{
    return node >= 0 && node < rec->net->n_nodes ? rec->layer_of[node] : -1;
}

double nc_record_accuracy(const nc_record *rec, int t)
{
    if (t < 1 || t > rec->T || rec->samples == 0)
        return NAN;
    return (double)rec->correct_by_step[t - 1] / (double)rec->samples;
}

static double ref_accuracy(const nc_record *rec, int which)
{
    return rec->ref_samples[which] ? (double)rec->ref_correct[which] / (double)rec->ref_samples[which] : NAN;
}

double nc_record_ann_accuracy(const nc_record *rec) { return ref_accuracy(rec, NC_RECORD_REF_ANN); }
double nc_record_qcfs_accuracy(const nc_record *rec) { return ref_accuracy(rec, NC_RECORD_REF_QCFS); }

static double ratio(double a, double b) { return b != 0 ? a / b : NAN; }

static nc_error_stats err_stats(const err_acc *e, int with_rel)
{
    double n = (double)e->pairs;
    nc_error_stats s = {ratio(e->sum, n), ratio(e->sq, n), ratio(e->abs, n), NAN};
    if (with_rel)
        s.rel_l2 = e->pairs ? ratio(sqrt(e->sq), sqrt(e->ref_sq)) : NAN;
    return s;
}

void nc_record_layer_stats(const nc_record *rec, int layer, nc_layer_stats *out)
{
    const layer_acc *L = &rec->layers[layer];
    double pairs = (double)L->pairs;
    memset(out, 0, sizeof *out);
    out->node = L->node;
    out->name = rec->net->nodes[L->node].name;
    out->neurons = L->numel;
    out->channels = L->channels;
    out->spikes = L->spikes;
    out->firing_rate = ratio((double)L->spikes, pairs * rec->T);
    out->dead_fraction = ratio((double)L->dead, pairs);
    out->saturated_fraction = ratio((double)L->saturated, pairs);
    out->fanout = L->fanout;
    out->sops = (double)L->spikes * L->fanout;
    out->ann_macs = L->fanout * (double)L->numel * (double)rec->samples;
    out->has_ann = L->total.pairs > 0;
    out->total = err_stats(&L->total, 1);
    out->local = err_stats(&L->local, 1);
    out->clip = err_stats(&L->clip, 0);
    out->quant = err_stats(&L->quant, 0);
    out->uneven = err_stats(&L->uneven, 0);
    out->clipped_fraction = ratio((double)L->clipped, (double)L->local.pairs);
}

void nc_record_get_totals(const nc_record *rec, nc_record_totals *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < rec->n_layers; i++) {
        out->spikes += rec->layers[i].spikes;
        out->sops += (double)rec->layers[i].spikes * rec->layers[i].fanout;
    }
    out->ann_macs = (double)nc_net_macs(rec->net) * (double)rec->samples;
    out->sops_per_mac = ratio(out->sops, out->ann_macs);
}

const int64_t *nc_record_channel_spikes(const nc_record *rec, int layer) { return rec->layers[layer].chan_spikes; }

double nc_record_channel_rate(const nc_record *rec, int layer, int channel)
{
    const layer_acc *L = &rec->layers[layer];
    return ratio((double)L->chan_spikes[channel], (double)L->inner * (double)rec->samples * rec->T);
}

static int min_i64(int64_t a, int64_t b) { return (int)(a < b ? a : b); }

void nc_record_raster(const nc_record *rec, int layer, nc_raster *out)
{
    const layer_acc *L = &rec->layers[layer];
    out->samples = min_i64(rec->spec.raster_samples, rec->samples);
    out->neurons = L->rk;
    out->T = rec->T;
    out->neuron_index = L->r_index;
    out->bits = L->r_bits;
}

int nc_raster_spike(const nc_raster *r, int s, int j, int t)
{
    int64_t b = ((int64_t)s * r->neurons + j) * r->T + t;
    return (r->bits[b >> 3] >> (b & 7)) & 1;
}

void nc_record_trace(const nc_record *rec, int layer, nc_trace *out)
{
    const layer_acc *L = &rec->layers[layer];
    out->samples = min_i64(rec->spec.trace_samples, rec->samples);
    out->neurons = L->tk;
    out->T = rec->T;
    out->neuron_index = L->t_index;
    out->current = L->t_cur;
    out->spike = L->t_spk;
    out->v = L->t_v;
    out->threshold = L->t_theta;
}

/* ---- saving (HDF5) ------------------------------------------------------------------ */


/* Formulas and units, written once under /definitions (nc_record.h). */
static const char *const definitions[][3] = {
    {"accuracy_by_step", "fraction of samples whose argmax of the output summed over steps 1..t equals the label", "fraction"},
    {"ann_accuracy", "fraction of samples whose ANN output argmax equals the label", "fraction"},
    {"qcfs_accuracy", "fraction of samples whose QCFS-ANN output argmax equals the label", "fraction"},
    {"firing_rate", "spikes / (neurons × samples × steps)", "spikes per neuron per step"},
    {"rate_by_channel", "spikes in channel / (neurons in channel × samples × steps)", "spikes per neuron per step"},
    {"spike_count_by_channel", "spikes in channel over all samples and steps", "spikes"},
    {"dead_fraction", "fraction of (neuron, sample) pairs with N = 0 spikes", "fraction"},
    {"saturated_fraction", "fraction of (neuron, sample) pairs with N = T spikes", "fraction"},
    {"phi", "θ·N/T, the mean over steps of the spike output values", "activation units"},
    {"total_error", "φ − a, a = ANN activation of the node on the same input; mean, mse, rel_l2 = ‖φ−a‖/‖a‖", "activation units"},
    {"local_error", "φ − ReLU(z), z = mean over steps of the input current; mean, mse, rel_l2 = ‖φ−ReLU(z)‖/‖ReLU(z)‖", "activation units"},
    {"clip_error", "clip(z, 0, θ) − ReLU(z); mean, mse, mean_abs", "activation units"},
    {"quant_error", "q_T(z) − clip(z, 0, θ), q_T(z) = θ·clip(floor(z·T/θ + v0_fraction)/T, 0, 1); mean, mse, mean_abs", "activation units"},
    {"uneven_error", "φ − q_T(z); mean, mse, mean_abs", "activation units"},
    {"clipped_fraction", "fraction of (neuron, sample) pairs with z > θ", "fraction"},
    {"fanout", "synapses one output value drives in the next weighted layers", "synapses"},
    {"sops", "spikes × fanout", "synaptic operations"},
    {"ann_macs", "fanout × neurons × samples (the ANN's MACs on this layer's outputs)", "multiply-accumulates"},
    {"sops_per_mac", "Σ sops / (network MACs per sample × samples)", "ratio"},
    {"neuron", "flat index of the neuron within one sample of the layer (C-order of the node shape)", "index"},
    {"step", "time step of a spike, 0-based (0 = first step)", "step"},
    {"sample", "index of the sample in the run, 0-based", "index"},
    {"v", "membrane potential v_t, t = 0..T, reconstructed from v_0 = v0_fraction·θ, inputs and spikes", "activation units"},
    {"current", "input current x_t of the neuron at step t", "activation units"},
};

static nc_status save_definitions(hid_t file, nc_error *err)
{
    hid_t g;
    nc_status st = nc_h5_group_create(file, "definitions", &g, err);
    for (size_t i = 0; st == NC_OK && i < sizeof definitions / sizeof definitions[0]; i++) {
        char units[128];
        snprintf(units, sizeof units, "%s.units", definitions[i][0]);
        st = nc_h5_attr_string(g, definitions[i][0], definitions[i][1], err);
        if (st == NC_OK)
            st = nc_h5_attr_string(g, units, definitions[i][2], err);
    }
    nc_h5_close(&g);
    return st;
}

static nc_status save_summary(const nc_record *rec, hid_t file, nc_error *err)
{
    double *acc = malloc((size_t)rec->T * sizeof(double));
    if (!acc)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory");
    for (int t = 1; t <= rec->T; t++)
        acc[t - 1] = nc_record_accuracy(rec, t);
    int64_t T = rec->T;
    double ann = nc_record_ann_accuracy(rec), qcfs = nc_record_qcfs_accuracy(rec);
    nc_status st = nc_h5_attr_string(file, "format", "neurocuda-recording", err);
    if (st == NC_OK) st = nc_h5_attr_i64(file, "version", 1, err);
    if (st == NC_OK) st = nc_h5_attr_string(file, "created_by", "neurocuda " NC_VERSION, err);
    if (st == NC_OK) st = nc_h5_attr_i64(file, "T", rec->T, err);
    if (st == NC_OK) st = nc_h5_attr_i64(file, "samples", rec->samples, err);
    if (st == NC_OK) st = nc_h5_write_f64(file, "accuracy_by_step", 1, &T, acc, err);
    if (st == NC_OK) st = nc_h5_write_f64(file, "ann_accuracy", 0, NULL, &ann, err);
    if (st == NC_OK) st = nc_h5_write_f64(file, "qcfs_accuracy", 0, NULL, &qcfs, err);
    free(acc);
    return st;
}

static nc_status save_totals(const nc_record *rec, hid_t file, nc_error *err)
{
    nc_record_totals t;
    hid_t g;
    nc_record_get_totals(rec, &t);
    nc_status st = nc_h5_group_create(file, "totals", &g, err);
    if (st == NC_OK) st = nc_h5_attr_i64(g, "spikes", t.spikes, err);
    if (st == NC_OK) st = nc_h5_attr_f64(g, "sops", t.sops, err);
    if (st == NC_OK) st = nc_h5_attr_f64(g, "ann_macs", t.ann_macs, err);
    if (st == NC_OK) st = nc_h5_attr_f64(g, "sops_per_mac", t.sops_per_mac, err);
    nc_h5_close(&g);
    const char **names = malloc((size_t)(rec->n_layers + 1) * sizeof(char *));
    if (st == NC_OK && !names)
        st = nc_fail(err, NC_ERR_MEMORY, "out of memory");
    for (int i = 0; st == NC_OK && i < rec->n_layers; i++)
        names[i] = rec->net->nodes[rec->layers[i].node].name;
    if (st == NC_OK)
        st = nc_h5_write_strings(file, "layer_names", rec->n_layers, names, err);
    free(names);
    return st;
}

/* Writes "<prefix>_mean", "_mse", "_mean_abs" (and "_rel_l2"). */
static nc_status save_error(hid_t g, const char *prefix, const nc_error_stats *e, int with_rel, nc_error *err)
{
    char name[64];
    const double values[4] = {e->mean, e->mse, e->mean_abs, e->rel_l2};
    const char *suffix[4] = {"mean", "mse", "mean_abs", "rel_l2"};
    nc_status st = NC_OK;
    for (int k = 0; st == NC_OK && k < (with_rel ? 4 : 3); k++) {
        snprintf(name, sizeof name, "%s_%s", prefix, suffix[k]);
        st = nc_h5_attr_f64(g, name, values[k], err);
    }
    return st;
}

static nc_status save_layer_attrs(const nc_record *rec, int layer, hid_t g, nc_error *err)
{
    nc_layer_stats s;
    nc_record_layer_stats(rec, layer, &s);
    const nc_node *nd = &rec->net->nodes[s.node];
    int32_t shape[4];
    for (int i = 0; i < nd->ndim; i++)
        shape[i] = (int32_t)nd->shape[i];
    nc_status st = nc_h5_attr_string(g, "node_name", nd->name, err);
    if (st == NC_OK) st = nc_h5_attr_i64(g, "node_index", s.node, err);
    if (st == NC_OK && nd->ndim > 0) st = nc_h5_attr_i32s(g, "shape", nd->ndim, shape, err);
    if (st == NC_OK) st = nc_h5_attr_i64(g, "neurons", s.neurons, err);
    if (st == NC_OK) st = nc_h5_attr_i64(g, "channels", s.channels, err);
    if (st == NC_OK) st = nc_h5_attr_f32s(g, "threshold", nd->neuron.n_threshold, nd->neuron.threshold, err);
    if (st == NC_OK) st = nc_h5_attr_f64(g, "v0_fraction", nd->neuron.v0_fraction, err);
    if (st == NC_OK) st = nc_h5_attr_string(g, "reset", nd->neuron.reset == NC_RESET_ZERO ? "zero" : "subtract", err);
    if (st == NC_OK) st = nc_h5_attr_i64(g, "spikes", s.spikes, err);
    if (st == NC_OK) st = nc_h5_attr_f64(g, "firing_rate", s.firing_rate, err);
    if (st == NC_OK) st = nc_h5_attr_f64(g, "dead_fraction", s.dead_fraction, err);
    if (st == NC_OK) st = nc_h5_attr_f64(g, "saturated_fraction", s.saturated_fraction, err);
    if (st == NC_OK) st = nc_h5_attr_f64(g, "fanout", s.fanout, err);
    if (st == NC_OK) st = nc_h5_attr_f64(g, "sops", s.sops, err);
    if (st == NC_OK) st = nc_h5_attr_f64(g, "ann_macs", s.ann_macs, err);
    if (st == NC_OK) st = nc_h5_attr_f64(g, "clipped_fraction", s.clipped_fraction, err);
    if (st == NC_OK) st = save_error(g, "total", &s.total, 1, err);
    if (st == NC_OK) st = save_error(g, "local", &s.local, 1, err);
    if (st == NC_OK) st = save_error(g, "clip", &s.clip, 0, err);
    if (st == NC_OK) st = save_error(g, "quant", &s.quant, 0, err);
    if (st == NC_OK) st = save_error(g, "uneven", &s.uneven, 0, err);
    return st;
}

static nc_status save_channels(const nc_record *rec, int layer, hid_t g, nc_error *err)
{
    const layer_acc *L = &rec->layers[layer];
    int64_t C = L->channels;
    double *rate = malloc((size_t)C * sizeof(double));
    if (!rate)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory");
    for (int c = 0; c < L->channels; c++)
        rate[c] = nc_record_channel_rate(rec, layer, c);
    nc_status st = nc_h5_write_f64(g, "rate_by_channel", 1, &C, rate, err);
    if (st == NC_OK)
        st = nc_h5_write_i64(g, "spike_count_by_channel", 1, &C, L->chan_spikes, err);
    free(rate);
    return st;
}

/* The raster as (neuron, step, sample) events. */
static nc_status save_events(const nc_record *rec, int layer, hid_t g, nc_error *err)
{
    nc_raster r;
    nc_record_raster(rec, layer, &r);
    int64_t E = 0, k = r.neurons;
    for (int s = 0; s < r.samples; s++)
        for (int j = 0; j < r.neurons; j++)
            for (int t = 0; t < r.T; t++)
                E += nc_raster_spike(&r, s, j, t);
    int32_t *ev = malloc((size_t)(3 * E + 1) * sizeof(int32_t));
    if (!ev)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for %lld spike events", (long long)E);
    int64_t e = 0;
    for (int s = 0; s < r.samples; s++)
        for (int j = 0; j < r.neurons; j++)
            for (int t = 0; t < r.T; t++)
                if (nc_raster_spike(&r, s, j, t)) {
                    ev[e] = (int32_t)r.neuron_index[j];
                    ev[E + e] = t;
                    ev[2 * E + e] = s;
                    e++;
                }
    nc_status st = nc_h5_write_i32(g, "neuron", 1, &E, ev, err);
    if (st == NC_OK) st = nc_h5_write_i32(g, "step", 1, &E, ev + E, err);
    if (st == NC_OK) st = nc_h5_write_i32(g, "sample", 1, &E, ev + 2 * E, err);
    if (st == NC_OK) st = nc_h5_write_i64(g, "raster_neurons", 1, &k, r.neuron_index, err);
    if (st == NC_OK) st = nc_h5_attr_i64(g, "raster_samples", r.samples, err);
    free(ev);
    return st;
}

static nc_status save_traces(const nc_record *rec, int layer, hid_t g, nc_error *err)
{
    nc_trace tr;
    hid_t tg;
    nc_record_trace(rec, layer, &tr);
    int64_t k = tr.neurons, shape[3] = {tr.samples, tr.neurons, tr.T}, vshape[3] = {tr.samples, tr.neurons, tr.T + 1};
    nc_status st = nc_h5_group_create(g, "traces", &tg, err);
    if (st == NC_OK) st = nc_h5_write_i64(tg, "neuron", 1, &k, tr.neuron_index, err);
    if (st == NC_OK) st = nc_h5_write_f32(tg, "threshold", 1, &k, tr.threshold, err);
    if (st == NC_OK) st = nc_h5_write_f32(tg, "current", 3, shape, tr.current, err);
    if (st == NC_OK) st = nc_h5_write_u8(tg, "spike", 3, shape, tr.spike, err);
    if (st == NC_OK) st = nc_h5_write_f32(tg, "v", 3, vshape, tr.v, err);
    nc_h5_close(&tg);
    return st;
}

static nc_status save_layer(const nc_record *rec, int layer, hid_t layers, nc_error *err)
{
    char link[2 * NC_NAME_MAX + 16];
    hid_t g;
    const char *name = rec->net->nodes[rec->layers[layer].node].name;
    nc_status st = nc_h5_group_create(layers, nc_h5_escape_name(name, link, sizeof link), &g, err);
    if (st == NC_OK) st = save_layer_attrs(rec, layer, g, err);
    if (st == NC_OK) st = save_channels(rec, layer, g, err);
    if (st == NC_OK) st = save_events(rec, layer, g, err);
    if (st == NC_OK) st = save_traces(rec, layer, g, err);
    nc_h5_close(&g);
    return st;
}

nc_status nc_record_save(const nc_record *rec, const char *path, nc_error *err)
{
    nc_h5_writer w;
    hid_t layers = H5I_INVALID_HID;
    nc_status st = nc_h5_create(&w, path, err);
    if (st != NC_OK)
        return st;
    st = save_summary(rec, w.file, err);
    if (st == NC_OK) st = save_totals(rec, w.file, err);
    if (st == NC_OK) st = save_definitions(w.file, err);
    if (st == NC_OK) st = nc_h5_group_create(w.file, "layers", &layers, err);
    for (int i = 0; st == NC_OK && i < rec->n_layers; i++)
        st = save_layer(rec, i, layers, err);
    nc_h5_close(&layers);
    if (st == NC_OK)
        return nc_h5_commit(&w, err);
    nc_h5_discard(&w);
    nc_error_prefix(err, "saving recording '%s'", path);
    return st;
}

/* ---- loading a saved recording -------------------------------------------------------- */

#define RECORDING_MAX_T 1000000
#define RECORDING_MAX_LAYERS 100000

void nc_recording_free(nc_recording *r)
{
    if (!r)
        return;
    for (int i = 0; r->layers && i < r->n_layers; i++) {
        free(r->layers[i].neuron);
        free(r->layers[i].step);
        free(r->layers[i].sample);
        free(r->layers[i].rate_by_channel);
    }
    free(r->layers);
    free(r->accuracy_by_step);
    free(r);
}

static int is_recording(hid_t file)
{
    char format[64];
    return nc_h5_attr_get_string(file, "format", format, sizeof format, NULL) == NC_OK &&
           strcmp(format, "neurocuda-recording") == 0;
}

int nc_recording_probe(const char *path)
{
    hid_t file;
    if (nc_h5_open_read(path, &file, NULL) != NC_OK)
        return 0;
    int yes = is_recording(file);
    nc_h5_close(&file);
    return yes;
}

/* A 1-d numeric dataset of exactly n values (n < 0: any length, into *got). */
static nc_status read_vector_i32(hid_t g, const char *name, int64_t n, int64_t *got, int32_t **out, nc_error *err)
{
    int ndim;
    int64_t shape[1];
    nc_status st = nc_h5_read_i32(g, name, 1, &ndim, shape, out, err);
    if (st != NC_OK)
        return st;
    int64_t len = ndim == 1 ? shape[0] : 1;
    if (ndim != 1 || (n >= 0 && len != n)) {
        free(*out);
        *out = NULL;
        return nc_fail(err, NC_ERR_FORMAT, "dataset '%s' holds %lld values, %lld expected", name, (long long)len,
                       (long long)n);
    }
    if (got)
        *got = len;
    return NC_OK;
}

static nc_status read_vector_f64(hid_t g, const char *name, int64_t n, double **out, nc_error *err)
{
    int ndim;
    int64_t shape[1];
    nc_status st = nc_h5_read_f64(g, name, 1, &ndim, shape, out, err);
    if (st != NC_OK)
        return st;
    if (ndim != 1 || shape[0] != n) {
        free(*out);
        *out = NULL;
        return nc_fail(err, NC_ERR_FORMAT, "dataset '%s' holds %lld values, %lld expected", name,
                       (long long)(ndim == 1 ? shape[0] : 1), (long long)n);
    }
    return NC_OK;
}

static nc_status read_scalar_f64(hid_t g, const char *name, double *value, nc_error *err)
{
    double *v = NULL;
    int ndim;
    int64_t shape[1];
    nc_status st = nc_h5_read_f64(g, name, 1, &ndim, shape, &v, err);
    if (st == NC_OK && ndim == 1 && shape[0] != 1)
        st = nc_fail(err, NC_ERR_FORMAT, "dataset '%s' should hold one value", name);
    if (st == NC_OK)
        *value = v[0];
    free(v);
    return st;
}

/* A count attribute: an integer in [0, max]. */
static nc_status read_count(hid_t obj, const char *name, int64_t max, int64_t *value, nc_error *err)
{
    nc_status st = nc_h5_attr_get_i64(obj, name, value, err);
    if (st == NC_OK && (*value < 0 || *value > max))
        st = nc_fail(err, NC_ERR_FORMAT, "attribute '%s' is %lld, outside [0, %lld]", name, (long long)*value,
                     (long long)max);
    return st;
}

static nc_status load_layer(hid_t layers, const char *name, const nc_recording *r, nc_recording_layer *L,
                            nc_error *err)
{
    char link[2 * NC_NAME_MAX + 16];
    hid_t g;
    nc_status st = nc_h5_group_open(layers, nc_h5_escape_name(name, link, sizeof link), &g, err);
    if (st != NC_OK)
        return st;
    snprintf(L->name, sizeof L->name, "%s", name);
    char stored[NC_NAME_MAX];
    st = nc_h5_attr_get_string(g, "node_name", stored, sizeof stored, err);
    if (st == NC_OK && strcmp(stored, name) != 0)
        st = nc_fail(err, NC_ERR_FORMAT, "its node_name '%s' is not the layer name", stored);
    if (st == NC_OK) st = read_count(g, "node_index", INT32_MAX, &L->node_index, err);
    if (st == NC_OK) st = read_count(g, "neurons", INT64_MAX, &L->neurons, err);
    if (st == NC_OK) st = read_count(g, "channels", L->neurons, &L->channels, err);
    if (st == NC_OK) st = read_count(g, "spikes", INT64_MAX, &L->spikes, err);
    if (st == NC_OK) st = read_count(g, "raster_samples", r->samples, &L->raster_samples, err);
    if (st == NC_OK) st = nc_h5_attr_get_f64(g, "firing_rate", &L->firing_rate, err);
    if (st == NC_OK) st = nc_h5_attr_get_f64(g, "sops", &L->sops, err);
    if (st == NC_OK) st = read_vector_f64(g, "rate_by_channel", L->channels, &L->rate_by_channel, err);
    if (st == NC_OK) st = read_vector_i32(g, "neuron", -1, &L->n_events, &L->neuron, err);
    if (st == NC_OK) st = read_vector_i32(g, "step", L->n_events, NULL, &L->step, err);
    if (st == NC_OK) st = read_vector_i32(g, "sample", L->n_events, NULL, &L->sample, err);
    for (int64_t e = 0; st == NC_OK && e < L->n_events; e++)
        if (L->neuron[e] < 0 || L->neuron[e] >= L->neurons || L->step[e] < 0 || L->step[e] >= r->T ||
            L->sample[e] < 0 || L->sample[e] >= L->raster_samples)
            st = nc_fail(err, NC_ERR_FORMAT,
                         "spike event %lld (neuron %d, step %d, sample %d) lies outside the layer's %lld neurons, "
                         "%d steps or %lld raster samples",
                         (long long)e, L->neuron[e], L->step[e], L->sample[e], (long long)L->neurons, r->T,
                         (long long)L->raster_samples);
    nc_h5_close(&g);
    if (st != NC_OK)
        nc_error_prefix(err, "layer '%s'", name);
    return st;
}

static nc_status load_recording(hid_t file, void *recording, nc_error *err)
{
    nc_recording *r = recording;
    char format[64];
    int64_t version, T;
    nc_status st = nc_h5_attr_get_string(file, "format", format, sizeof format, err);
    if (st == NC_OK && strcmp(format, "neurocuda-recording") != 0)
        st = nc_fail(err, NC_ERR_FORMAT, "format is '%s', not 'neurocuda-recording'", format);
    if (st == NC_OK) st = nc_h5_attr_get_i64(file, "version", &version, err);
    if (st == NC_OK && version != 1)
        st = nc_fail(err, NC_ERR_UNSUPPORTED, "recording version %lld; this program reads version 1",
                     (long long)version);
    if (st == NC_OK) st = read_count(file, "T", RECORDING_MAX_T, &T, err);
    if (st == NC_OK && T < 1)
        st = nc_fail(err, NC_ERR_FORMAT, "attribute 'T' is 0");
    if (st == NC_OK) {
        r->T = (int)T;
        st = read_count(file, "samples", INT64_MAX, &r->samples, err);
    }
    if (st == NC_OK) st = read_vector_f64(file, "accuracy_by_step", r->T, &r->accuracy_by_step, err);
    if (st == NC_OK) st = read_scalar_f64(file, "ann_accuracy", &r->ann_accuracy, err);
    if (st == NC_OK) st = read_scalar_f64(file, "qcfs_accuracy", &r->qcfs_accuracy, err);
    hid_t totals = H5I_INVALID_HID, layers = H5I_INVALID_HID;
    if (st == NC_OK) st = nc_h5_group_open(file, "totals", &totals, err);
    if (st == NC_OK) st = read_count(totals, "spikes", INT64_MAX, &r->total_spikes, err);
    if (st == NC_OK) st = nc_h5_attr_get_f64(totals, "sops", &r->total_sops, err);
    nc_h5_close(&totals);
    int64_t n = 0;
    char **names = NULL;
    if (st == NC_OK) st = nc_h5_read_strings(file, "layer_names", &n, &names, err);
    if (st == NC_OK && n > RECORDING_MAX_LAYERS)
        st = nc_fail(err, NC_ERR_FORMAT, "%lld layers, at most %d expected", (long long)n, RECORDING_MAX_LAYERS);
    if (st == NC_OK && !(r->layers = calloc((size_t)n + 1, sizeof *r->layers)))
        st = nc_fail(err, NC_ERR_MEMORY, "out of memory for %lld layers", (long long)n);
    if (st == NC_OK) st = nc_h5_group_open(file, "layers", &layers, err);
    for (int64_t i = 0; st == NC_OK && i < n; i++) {
        r->n_layers = (int)i + 1; /* so that nc_recording_free frees what was read */
        st = load_layer(layers, names[i], r, &r->layers[i], err);
    }
    nc_h5_close(&layers);
    nc_h5_free_strings(n, names);
    return st;
}

nc_status nc_recording_load(const char *path, nc_recording **out, nc_error *err)
{
    *out = NULL;
    nc_recording *r = calloc(1, sizeof *r);
    nc_status st = r ? nc_h5_load(path, load_recording, r, "recording", err)
                     : nc_fail(err, NC_ERR_MEMORY, "out of memory");
    if (st != NC_OK) {
        nc_recording_free(r);
        return st;
    }
    *out = r;
    return NC_OK;
}
