/* nc-job.c — a conversion + simulation run in a GTask worker (see nc-job.h). */
#include "nc-job.h"

#include <math.h>

#include "../sim/nc_evaluate.h"
#include "../sim/nc_simulate.h"
#include "nc-teach-record.h"

struct _NcJob {
    GObject parent_instance;

    NcJobSettings settings;
    nc_net *source;             /* the clone we convert from                    */
    char *source_path;
    gboolean converts;

    /* written by the worker, read on the main thread after the run */
    nc_net *net;
    nc_record *record;
    nc_pipeline_result pipeline;
    double seconds;

    /* the worker's progress state (worker thread only) */
    GCancellable *cancellable;
    char stage[32];
    gint64 stage_start, last_publish;
    int64_t last_done, last_samples;
    NcRunViews *last_views;

    /* the hand-over slot (both threads, under the mutex) */
    GMutex lock;
    NcRunData *pending;
    gboolean idle_queued;
};

G_DEFINE_FINAL_TYPE(NcJob, nc_job, G_TYPE_OBJECT)
G_DEFINE_QUARK(nc-job-error-quark, nc_job_error)

enum { SIGNAL_PROGRESS, N_SIGNALS };
static guint signals[N_SIGNALS];

/* ---- settings ------------------------------------------------------------- */

void nc_job_settings_clear(NcJobSettings *s)
{
    g_clear_pointer(&s->dataset, g_free);
    g_clear_pointer(&s->engine, g_free);
}

void nc_job_settings_copy(NcJobSettings *dst, const NcJobSettings *src)
{
    *dst = *src;
    dst->dataset = g_strdup(src->dataset);
    dst->engine = g_strdup(src->engine);
}

char *nc_job_settings_describe(const NcJobSettings *s, gboolean converts)
{
    if (!converts)
        return g_strdup_printf("project · %s", s->engine);
    return g_strdup_printf("%s%s · L %d%s", nc_calib_method_name(s->pipeline.method),
                           s->pipeline.per_channel ? " per channel" : "", s->pipeline.levels,
                           s->encoding == NC_ENCODING_POISSON ? " · Poisson" : "");
}

/* Any neuron that is not an ANN activation (relu, clip, qcfs) makes it an
 * SNN: IF from a conversion, or LIF and friends from a NIR file. */
gboolean nc_net_is_snn(const nc_net *net)
{
    for (int i = 0; net && i < net->n_nodes; i++) {
        const nc_node *n = &net->nodes[i];
        if (n->kind == NC_NODE_NEURON && n->neuron.model != NC_NEURON_RELU && n->neuron.model != NC_NEURON_CLIP &&
            n->neuron.model != NC_NEURON_QCFS)
            return TRUE;
    }
    return FALSE;
}

/* ---- object ----------------------------------------------------------------- */

static void nc_job_finalize(GObject *object)
{
    NcJob *self = NC_JOB(object);
    /* the record points into the net: free it first */
    nc_record_free(self->record);
    nc_net_free(self->net);
    nc_net_free(self->source);
    nc_pipeline_result_clear(&self->pipeline);
    nc_job_settings_clear(&self->settings);
    g_free(self->source_path);
    g_clear_pointer(&self->pending, nc_run_data_unref);
    g_clear_pointer(&self->last_views, nc_run_views_unref);
    g_clear_object(&self->cancellable);
    g_mutex_clear(&self->lock);
    G_OBJECT_CLASS(nc_job_parent_class)->finalize(object);
}

static void nc_job_class_init(NcJobClass *klass)
{
    G_OBJECT_CLASS(klass)->finalize = nc_job_finalize;
    /* Emitted on the main thread with the newest snapshot of the run. */
    signals[SIGNAL_PROGRESS] = g_signal_new("progress", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                                            NULL, G_TYPE_NONE, 1, NC_TYPE_RUN_DATA);
}

static void nc_job_init(NcJob *self) { g_mutex_init(&self->lock); }

NcJob *nc_job_new(const nc_net *source, const char *source_path, const NcJobSettings *settings)
{
    NcJob *self = g_object_new(NC_TYPE_JOB, NULL);
    self->source = nc_net_clone(source);
    self->source_path = g_strdup(source_path);
    self->converts = !nc_net_is_snn(source);
    nc_job_settings_copy(&self->settings, settings);
    return self;
}

const nc_net *nc_job_get_net(NcJob *self) { return self->net; }
const nc_record *nc_job_get_record(NcJob *self) { return self->record; }
const nc_pipeline_result *nc_job_get_pipeline_result(NcJob *self) { return &self->pipeline; }
const NcJobSettings *nc_job_get_settings(NcJob *self) { return &self->settings; }
const char *nc_job_get_source_path(NcJob *self) { return self->source_path; }
gboolean nc_job_converts(NcJob *self) { return self->converts; }
double nc_job_get_seconds(NcJob *self) { return self->seconds; }

/* ---- hand-over to the main loop ------------------------------------------------- */

static gboolean emit_pending(gpointer user_data)
{
    NcJob *self = user_data;
    g_mutex_lock(&self->lock);
    NcRunData *data = g_steal_pointer(&self->pending);
    self->idle_queued = FALSE;
    g_mutex_unlock(&self->lock);
    if (data) {
        g_signal_emit(self, signals[SIGNAL_PROGRESS], 0, data);
        nc_run_data_unref(data);
    }
    return G_SOURCE_REMOVE;
}

/* Worker thread: replaces the slot's snapshot; queues one idle at a time.
 * The converted net and the teaching data come once: a newer snapshot that
 * replaces an unseen one inherits them, so they are never dropped. */
static void publish(NcJob *self, NcRunData *data)
{
    g_mutex_lock(&self->lock);
    if (self->pending && !data->converted) {
        data->converted = g_steal_pointer(&self->pending->converted);
        data->teach = g_steal_pointer(&self->pending->teach);
    }
    g_clear_pointer(&self->pending, nc_run_data_unref);
    self->pending = data;
    gboolean queue = !self->idle_queued;
    self->idle_queued = TRUE;
    g_mutex_unlock(&self->lock);
    if (queue)
        g_idle_add_full(G_PRIORITY_DEFAULT, emit_pending, g_object_ref(self), g_object_unref);
}

static void begin_stage(NcJob *self, const char *stage)
{
    g_strlcpy(self->stage, stage, sizeof self->stage);
    self->stage_start = g_get_monotonic_time();
    self->last_done = -1;
    self->last_publish = 0;
}

static double stage_seconds(NcJob *self) { return (g_get_monotonic_time() - self->stage_start) / 1e6; }

/* Snapshots of the record only when a batch finished (its totals changed). */
static NcRunData *make_snapshot(NcJob *self, const nc_progress *p)
{
    if (!self->record || nc_record_samples(self->record) == self->last_samples)
        return nc_run_data_new(self->stage, p->done, p->total, stage_seconds(self));
    self->last_samples = nc_record_samples(self->record);
    NcRunData *d = nc_run_data_new_from_record(self->stage, p->done, p->total, stage_seconds(self), self->record,
                                               self->last_views);
    if (d->views && d->views != self->last_views) {
        g_clear_pointer(&self->last_views, nc_run_views_unref);
        self->last_views = nc_run_views_ref(d->views);
    }
    return d;
}

/* The pipeline's progress callback (worker thread).  Engines call it often
 * (every node), so it only answers Cancel unless there is news: a new count
 * of finished units, at most 20 times a second, or a heartbeat for the ETA. */
static int on_progress(void *user, const nc_progress *p)
{
    NcJob *self = user;
    if (g_cancellable_is_cancelled(self->cancellable))
        return 1;
    gint64 now = g_get_monotonic_time();
    gboolean news = p->done != self->last_done && now - self->last_publish > 50000;
    if (!news && now - self->last_publish < 500000)
        return 0;
    self->last_done = p->done;
    self->last_publish = now;
    publish(self, make_snapshot(self, p));
    return 0;
}

/* ---- the worker -------------------------------------------------------------------- */

static nc_status open_data(NcJob *self, nc_split split, int64_t limit, nc_dataset **out, nc_error *err)
{
    nc_status st = nc_dataset_open(self->settings.dataset, split, &self->settings.pp, limit, out, err);
    if (st != NC_OK)
        nc_error_prefix(err, "dataset '%s'", self->settings.dataset);
    return st;
}

static nc_status convert(NcJob *self, nc_engine *engine, nc_error *err)
{
    self->net = nc_net_clone(self->source);
    if (!self->net)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for a copy of the network");
    if (!self->converts)
        return nc_engine_load(engine, self->net, err);
    nc_dataset *calib = NULL;
    begin_stage(self, "load");
    publish(self, nc_run_data_new("load", 0, 0, 0));
    nc_status st = open_data(self, NC_SPLIT_TRAIN, self->settings.pipeline.calib_images, &calib, err);
    if (st == NC_OK) {
        begin_stage(self, "calibrate");
        st = nc_pipeline_convert(engine, self->net, calib, &self->settings.pipeline, on_progress, self,
                                 &self->pipeline, err);
    }
    nc_dataset_free(calib);
    return st;
}

/* The converted net goes to the main thread as a clone it owns, with the
 * teaching view's image (recorded first, so it can play during the run). */
static void publish_converted(NcJob *self, NcTeachData *teach)
{
    NcRunData *d = nc_run_data_new("converted", 0, 0, 0);
    d->converted = nc_net_clone(self->net);
    d->teach = teach;
    if (teach && g_str_equal(self->settings.dataset, "fashion-mnist") && teach->classes == 10)
        teach->class_names = nc_fashion_mnist_classes;
    publish(self, d);
}

static nc_status simulate(NcJob *self, nc_engine *engine, nc_error *err)
{
    nc_dataset *test = NULL;
    NcTeachData *teach = NULL;
    begin_stage(self, "load");
    nc_status st = open_data(self, NC_SPLIT_TEST, self->settings.images, &test, err);
    if (st == NC_OK)
        st = nc_check_dataset_fits(self->net, test, err);
    if (st == NC_OK)
        st = nc_teach_record(engine, self->net, test, self->settings.T, self->settings.encoding, on_progress, self,
                             &teach, err);
    if (st == NC_OK)
        publish_converted(self, teach);
    nc_simulate_options so = {
        .T = self->settings.T,
        .encoding = self->settings.encoding,
        .seed = 1,
        .limit = self->settings.images,
        .batch_size = self->settings.batch_size,
        /* every raster row is traced (sample 0), up to a size that keeps the
         * traces (9 bytes per neuron and step) small */
        .record = {.raster_samples = 0, .raster_neurons = self->settings.raster_neurons,
                   .trace_samples = 1, .trace_neurons = MIN(self->settings.raster_neurons, NC_JOB_MAX_TRACED)},
    };
    if (st == NC_OK)
        st = nc_record_new(self->net, so.T, &so.record, &self->record, err);
    if (st == NC_OK) {
        begin_stage(self, "simulate");
        self->last_samples = -1;
        st = nc_simulate_into(engine, test, &so, on_progress, self, self->record, err);
    }
    nc_dataset_free(test);
    return st;
}

static void worker(GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
    NcJob *self = source;
    nc_error err = {0};
    gint64 start = g_get_monotonic_time();
    nc_engine *engine = NULL;
    nc_status st = nc_engine_new(self->settings.engine, &engine, &err);
    if (st == NC_OK)
        st = convert(self, engine, &err);
    if (st == NC_OK)
        st = simulate(self, engine, &err);
    nc_engine_free(engine);
    self->seconds = (g_get_monotonic_time() - start) / 1e6;
    if (st == NC_OK)
        g_task_return_boolean(task, TRUE);
    else if (st == NC_ERR_CANCELLED || g_cancellable_is_cancelled(cancellable))
        g_task_return_new_error(task, G_IO_ERROR, G_IO_ERROR_CANCELLED, "%s", err.message);
    else
        g_task_return_new_error(task, NC_JOB_ERROR, st, "%s", err.message);
}

void nc_job_run_async(NcJob *self, GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail(NC_IS_JOB(self));
    g_return_if_fail(self->cancellable == NULL); /* a job runs once */
    self->cancellable = cancellable ? g_object_ref(cancellable) : g_cancellable_new();
    GTask *task = g_task_new(self, self->cancellable, callback, user_data);
    g_task_set_source_tag(task, nc_job_run_async);
    g_task_run_in_thread(task, worker);
    g_object_unref(task);
}

gboolean nc_job_run_finish(NcJob *self, GAsyncResult *result, GError **error)
{
    g_return_val_if_fail(g_task_is_valid(result, self), FALSE);
    return g_task_propagate_boolean(G_TASK(result), error);
}
