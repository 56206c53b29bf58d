/* nc-run-data.c — snapshots of a run (see nc-run-data.h). */
#include "nc-run-data.h"

#include <math.h>
#include <string.h>

G_DEFINE_BOXED_TYPE(NcRunData, nc_run_data, nc_run_data_ref, nc_run_data_unref)

static void free_run_data(NcRunData *d)
{
    for (int i = 0; i < d->n_layers; i++) {
        g_free(d->layers[i].name);
        g_free(d->layers[i].channel_rate);
    }
    g_free(d->layers);
    g_free(d->accuracy);
    g_clear_pointer(&d->views, nc_run_views_unref);
    g_clear_pointer(&d->spill, nc_raster_spill_unref);
    g_clear_pointer(&d->teach, nc_teach_data_unref);
    g_clear_pointer(&d->baseline, nc_run_data_unref);
    nc_net_free(d->converted);
}

NcRunData *nc_run_data_ref(NcRunData *data) { return g_atomic_rc_box_acquire(data); }

void nc_run_data_unref(NcRunData *data)
{
    if (data)
        g_atomic_rc_box_release_full(data, (GDestroyNotify)free_run_data);
}

NcRunData *nc_run_data_new(const char *stage, int64_t done, int64_t total, double stage_elapsed)
{
    NcRunData *d = g_atomic_rc_box_new0(NcRunData);
    g_strlcpy(d->stage, stage ? stage : "", sizeof d->stage);
    d->done = done, d->total = total, d->stage_elapsed = stage_elapsed;
    d->ann_accuracy = d->qcfs_accuracy = NAN;
    return d;
}

/* ---- teaching data ----------------------------------------------------------------- */

static void free_teach(NcTeachData *t)
{
    for (int i = 0; i < t->n_layers; i++) {
        g_free(t->layers[i].name);
        g_free(t->layers[i].spikes);
    }
    g_free(t->layers);
    g_free(t->image);
    g_free(t->evidence);
}

NcTeachData *nc_teach_data_new(void) { return g_atomic_rc_box_new0(NcTeachData); }
NcTeachData *nc_teach_data_ref(NcTeachData *teach) { return g_atomic_rc_box_acquire(teach); }

void nc_teach_data_unref(NcTeachData *teach)
{
    if (teach)
        g_atomic_rc_box_release_full(teach, (GDestroyNotify)free_teach);
}

/* ---- views ---------------------------------------------------------------- */

static void free_views(NcRunViews *v)
{
    for (int i = 0; i < v->n_layers; i++) {
        NcLayerViews *L = &v->layers[i];
        g_free(L->raster_index), g_free(L->raster_bits);
        g_free(L->trace_index), g_free(L->trace_current), g_free(L->trace_spike);
        g_free(L->trace_v), g_free(L->trace_theta);
    }
    g_free(v->layers);
}

NcRunViews *nc_run_views_ref(NcRunViews *views) { return g_atomic_rc_box_acquire(views); }

void nc_run_views_unref(NcRunViews *views)
{
    if (views)
        g_atomic_rc_box_release_full(views, (GDestroyNotify)free_views);
}

static void copy_layer_views(const nc_record *rec, int layer, NcLayerViews *L)
{
    nc_raster r;
    nc_record_raster(rec, layer, &r);
    L->raster_samples = r.samples, L->raster_neurons = r.neurons, L->T = r.T;
    size_t bits = (size_t)r.samples * (size_t)r.neurons * (size_t)r.T;
    L->raster_index = g_memdup2(r.neuron_index, (size_t)r.neurons * sizeof(int64_t));
    L->raster_bits = bits ? g_memdup2(r.bits, (bits + 7) / 8) : NULL;

    nc_trace tr;
    nc_record_trace(rec, layer, &tr);
    L->trace_samples = tr.samples, L->trace_neurons = tr.neurons;
    size_t n = (size_t)tr.samples * (size_t)tr.neurons;
    L->trace_index = g_memdup2(tr.neuron_index, (size_t)tr.neurons * sizeof(int64_t));
    L->trace_theta = g_memdup2(tr.threshold, (size_t)tr.neurons * sizeof(float));
    if (n) {
        L->trace_current = g_memdup2(tr.current, n * (size_t)tr.T * sizeof(float));
        L->trace_spike = g_memdup2(tr.spike, n * (size_t)tr.T);
        L->trace_v = g_memdup2(tr.v, n * (size_t)(tr.T + 1) * sizeof(float));
    }
}

static NcRunViews *copy_views(const nc_record *rec)
{
    NcRunViews *v = g_atomic_rc_box_new0(NcRunViews);
    const nc_record_spec *spec = nc_record_get_spec(rec);
    int64_t wanted = MAX(spec->raster_samples, spec->trace_samples);
    v->samples = nc_record_samples(rec);
    v->complete = v->samples >= wanted;
    v->n_layers = nc_record_layer_count(rec);
    v->layers = g_new0(NcLayerViews, v->n_layers);
    for (int i = 0; i < v->n_layers; i++)
        copy_layer_views(rec, i, &v->layers[i]);
    return v;
}

int nc_layer_views_spike(const NcLayerViews *v, int s, int j, int t)
{
    if (!v->raster_bits || s < 0 || s >= v->raster_samples || j < 0 || j >= v->raster_neurons || t < 0 || t >= v->T)
        return 0;
    int64_t b = ((int64_t)s * v->raster_neurons + j) * v->T + t;
    return (v->raster_bits[b >> 3] >> (b & 7)) & 1;
}

/* ---- totals ----------------------------------------------------------------- */

static void copy_layer(const nc_record *rec, int i, NcRunLayer *L)
{
    const nc_net *net = nc_record_net(rec);
    nc_record_layer_stats(rec, i, &L->stats);
    const nc_node *node = &net->nodes[L->stats.node];
    L->name = g_strdup(node->name);
    L->stats.name = L->name;
    L->node = L->stats.node;
    L->ndim = node->ndim;
    memcpy(L->shape, node->shape, sizeof L->shape);
    L->channels = L->stats.channels;
    L->channel_rate = g_new(double, MAX(L->channels, 1));
    for (int c = 0; c < L->channels; c++)
        L->channel_rate[c] = nc_record_channel_rate(rec, i, c);
    const nc_neuron *nr = &node->neuron;
    L->theta_min = L->theta_max = nr->n_threshold > 0 ? nr->threshold[0] : 0;
    for (int c = 1; c < nr->n_threshold; c++)
        L->theta_min = fminf(L->theta_min, nr->threshold[c]), L->theta_max = fmaxf(L->theta_max, nr->threshold[c]);
}

NcRunData *nc_run_data_new_from_record(const char *stage, int64_t done, int64_t total, double stage_elapsed,
                                       const nc_record *rec, NcRunViews *previous_views)
{
    NcRunData *d = nc_run_data_new(stage, done, total, stage_elapsed);
    d->has_record = TRUE;
    d->T = nc_record_T(rec);
    d->samples = nc_record_samples(rec);
    d->accuracy = g_new(double, d->T);
    for (int t = 0; t < d->T; t++)
        d->accuracy[t] = nc_record_accuracy(rec, t + 1);
    d->ann_accuracy = nc_record_ann_accuracy(rec);
    d->qcfs_accuracy = nc_record_qcfs_accuracy(rec);
    nc_record_get_totals(rec, &d->totals);
    d->n_layers = nc_record_layer_count(rec);
    d->layers = g_new0(NcRunLayer, d->n_layers);
    for (int i = 0; i < d->n_layers; i++)
        copy_layer(rec, i, &d->layers[i]);
    if (previous_views && previous_views->complete)
        d->views = nc_run_views_ref(previous_views);
    else if (d->samples > 0)
        d->views = copy_views(rec);
    return d;
}

int64_t nc_run_data_raster_samples(const NcRunData *data)
{
    if (!data || !data->views || data->views->n_layers < 1)
        return 0;
    int64_t in_memory = data->views->layers[0].raster_samples;
    if (!data->spill || in_memory < nc_raster_spill_first(data->spill))
        return in_memory;
    return nc_raster_spill_first(data->spill) + nc_raster_spill_samples(data->spill);
}

int nc_run_data_find_node(const NcRunData *data, int node)
{
    for (int i = 0; data && i < data->n_layers; i++)
        if (data->layers[i].node == node)
            return i;
    return -1;
}
