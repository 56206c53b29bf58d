/* nc-job.c — a conversion + simulation run in a GTask worker (see nc-job.h). */
#include "nc-job.h"

#include <math.h>
#include <string.h>

#include "../sim/nc_evaluate.h"
#include "../sim/nc_simulate.h"
#include "nc-teach-record.h"

struct _NcJob {
    GObject parent_instance;

    NcJobSettings settings;
    nc_net *source;             /* the clone we convert from                    */
    char *source_path;
    gboolean converts;
    gboolean finetunes;         /* converts, and a fine-tuning stage is on       */

    /* written by the worker, read on the main thread after the run */
    nc_net *net;
    nc_record *record;
    nc_pipeline_result pipeline;
    double seconds;
    /* fine-tuning: the converted net before it, its run, and that run's
     * complete snapshot (the "before" of the comparisons) */
    nc_net *before_net;
    nc_record *before_record;
    NcRunData *baseline;
    int epochs_done[2];         /* per nc_train_mode: epochs the net went through */
    nc_train_result results[2]; /* per nc_train_mode                            */
    int n_stages;               /* each stage's test accuracy (see NcStageAccuracy) */
    NcStageAccuracy stages[NC_MAX_STAGES];

    /* the worker's progress state (worker thread only) */
    GCancellable *cancellable;
    char stage[32];
    gint64 stage_start, last_publish;
    int64_t last_done, last_samples;
    NcRunViews *last_views;
    nc_record *live;            /* the record being filled, or NULL             */
    int live_stage;             /* the stage row it measures, or −1             */
    gboolean live_ann;          /* that row shows the ANN accuracy              */
    gboolean finetuned;         /* simulating the fine-tuned net                */
    double last_val_accuracy;   /* newest held-out accuracy of the stage, or −1  */

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

gboolean nc_job_settings_finetunes(const NcJobSettings *s)
{
    return s->pipeline.finetune_qcfs_epochs > 0 || s->pipeline.finetune_bptt_epochs > 0;
}

char *nc_job_settings_describe_finetune(const NcJobSettings *s)
{
    int qcfs = s->pipeline.finetune_qcfs_epochs, bptt = s->pipeline.finetune_bptt_epochs;
    if (qcfs <= 0 && bptt <= 0)
        return NULL;
    g_autofree char *q = qcfs > 0 ? g_strdup_printf("QCFS %d ep", qcfs) : NULL;
    g_autofree char *b = bptt > 0 ? g_strdup_printf("BPTT %d ep", bptt) : NULL;
    return q && b ? g_strdup_printf("%s + %s", q, b) : g_strdup(q ? q : b);
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
    /* a record points into its net: free it first */
    nc_record_free(self->record);
    nc_net_free(self->net);
    nc_record_free(self->before_record);
    nc_net_free(self->before_net);
    g_clear_pointer(&self->baseline, nc_run_data_unref);
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
    self->finetunes = self->converts && nc_job_settings_finetunes(settings);
    self->live_stage = -1;
    return self;
}

/* A run stopped before the fine-tuned net's first batch: what it has is the
 * converted net and its run. */
static gboolean keeps_before(NcJob *self)
{
    return self->before_record && (!self->record || nc_record_samples(self->record) == 0);
}

const nc_net *nc_job_get_net(NcJob *self) { return keeps_before(self) ? self->before_net : self->net; }
const nc_record *nc_job_get_record(NcJob *self) { return keeps_before(self) ? self->before_record : self->record; }
gboolean nc_job_finetunes(NcJob *self) { return self->finetunes; }

int nc_job_get_finetuned_epochs(NcJob *self, nc_train_mode stage)
{
    return keeps_before(self) || (int)stage < 0 || (int)stage > 1 ? 0 : self->epochs_done[stage];
}

gboolean nc_job_get_train_result(NcJob *self, nc_train_mode stage, nc_train_result *out)
{
    if ((int)stage < 0 || (int)stage > 1 || self->results[stage].epochs_run == 0)
        return FALSE;
    *out = self->results[stage];
    return TRUE;
}

const NcStageAccuracy *nc_job_get_stages(NcJob *self, int *n)
{
    *n = keeps_before(self) ? MIN(self->n_stages, 1) : self->n_stages;
    return self->stages;
}

/* The fields every snapshot of this job carries (worker thread, or the main
 * thread once the worker is done). */
static void stamp(NcJob *self, NcRunData *d, gboolean finetuned)
{
    d->finetuned = finetuned;
    d->n_stages = self->n_stages;
    memcpy(d->stages, self->stages, sizeof d->stages);
    if (self->baseline && !d->baseline && d != self->baseline)
        d->baseline = nc_run_data_ref(self->baseline);
}

NcRunData *nc_job_get_final(NcJob *self)
{
    const nc_record *rec = nc_job_get_record(self);
    if (!rec)
        return NULL;
    NcRunData *d = nc_run_data_new_from_record("done", 0, 0, 0, rec, NULL);
    int n;
    nc_job_get_stages(self, &n);
    stamp(self, d, self->finetunes && !keeps_before(self));
    d->n_stages = n;
    return d;
}
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
    stamp(self, data, self->finetuned);
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

/* ---- stage accuracies ------------------------------------------------------------ */

static NcStageAccuracy *add_stage(NcJob *self, const char *name)
{
    g_assert(self->n_stages < NC_MAX_STAGES);
    NcStageAccuracy *s = &self->stages[self->n_stages++];
    *s = (NcStageAccuracy){.ann = NAN, .qcfs = NAN, .snn = NAN, .T = self->settings.T};
    g_strlcpy(s->name, name, sizeof s->name);
    return s;
}

/* The live stage row from the record's finished batches. */
static void update_stage(NcJob *self)
{
    if (!self->live || self->live_stage < 0 || nc_record_samples(self->live) == 0)
        return;
    NcStageAccuracy *s = &self->stages[self->live_stage];
    s->T = nc_record_T(self->live);
    s->snn = nc_record_accuracy(self->live, s->T);
    s->qcfs = nc_record_qcfs_accuracy(self->live);
    s->ann = self->live_ann ? nc_record_ann_accuracy(self->live) : NAN;
    s->images = nc_record_samples(self->live);
}

/* Snapshots of the record only when a batch finished (its totals changed). */
static NcRunData *make_snapshot(NcJob *self, const nc_progress *p)
{
    if (!self->live || nc_record_samples(self->live) == self->last_samples)
        return nc_run_data_new(self->stage, p->done, p->total, stage_seconds(self));
    self->last_samples = nc_record_samples(self->live);
    update_stage(self);
    NcRunData *d = nc_run_data_new_from_record(self->stage, p->done, p->total, stage_seconds(self), self->live,
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

/* The trainer's progress callback (worker thread), after every batch: news
 * at most 10 times a second, and at the end of every epoch. */
static int on_train_progress(void *user, const nc_train_progress *p)
{
    NcJob *self = user;
    if (g_cancellable_is_cancelled(self->cancellable))
        return 1;
    if (p->val_accuracy >= 0)
        self->last_val_accuracy = p->val_accuracy;
    gint64 now = g_get_monotonic_time();
    if (p->batch != p->batches && now - self->last_publish < 100000)
        return 0;
    self->last_publish = now;
    int64_t done = (int64_t)(p->epoch - 1) * p->batches + p->batch, total = (int64_t)p->epochs * p->batches;
    NcRunData *d = nc_run_data_new("finetune", done, total, p->seconds);
    d->has_train = TRUE;
    d->train = *p;
    d->train.val_accuracy = self->last_val_accuracy;
    publish(self, d);
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

/* Calibration reads the first calib-images training images; fine-tuning
 * reads them all, so then the whole split is opened (and kept in *train). */
static nc_status convert(NcJob *self, nc_engine *engine, nc_dataset **train, nc_error *err)
{
    self->net = nc_net_clone(self->source);
    if (!self->net)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for a copy of the network");
    if (!self->converts)
        return nc_engine_load(engine, self->net, err);
    begin_stage(self, "load");
    publish(self, nc_run_data_new("load", 0, 0, 0));
    nc_status st = open_data(self, NC_SPLIT_TRAIN, self->finetunes ? 0 : self->settings.pipeline.calib_images, train,
                             err);
    if (st == NC_OK) {
        begin_stage(self, "calibrate");
        st = nc_pipeline_convert(engine, self->net, *train, &self->settings.pipeline, on_progress, self,
                                 &self->pipeline, err);
    }
    return st;
}

/* The simulated net goes to the main thread as a clone it owns, with the
 * teaching view's image (recorded first, so it can play during the run). */
static void publish_converted(NcJob *self, const nc_net *net, NcTeachData *teach)
{
    NcRunData *d = nc_run_data_new("converted", 0, 0, 0);
    d->converted = nc_net_clone(net);
    d->teach = teach;
    if (teach && g_str_equal(self->settings.dataset, "fashion-mnist") && teach->classes == 10)
        teach->class_names = nc_fashion_mnist_classes;
    publish(self, d);
}

/* Simulates `net` on the test images into a new *rec, with live snapshots;
 * `stage` is the row of the stage table it measures. */
static nc_status simulate(NcJob *self, nc_engine *engine, const nc_net *net, const nc_dataset *test, int stage,
                          gboolean ann, nc_record **rec, nc_error *err)
{
    NcTeachData *teach = NULL;
    begin_stage(self, "load");
    /* reloaded: fine-tuning changes the weights of the same net in place */
    nc_status st = nc_engine_load(engine, net, err);
    if (st == NC_OK)
        st = nc_teach_record(engine, net, test, self->settings.T, self->settings.encoding, on_progress, self, &teach,
                             err);
    if (st == NC_OK)
        publish_converted(self, net, teach);
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
        st = nc_record_new(net, so.T, &so.record, rec, err);
    if (st == NC_OK) {
        begin_stage(self, "simulate");
        self->live = *rec;
        self->live_stage = stage;
        self->live_ann = ann;
        self->last_samples = -1;
        g_clear_pointer(&self->last_views, nc_run_views_unref);
        st = nc_simulate_into(engine, test, &so, on_progress, self, *rec, err);
        update_stage(self); /* the last batch may have ended after the last progress call */
        self->live = NULL;
    }
    return st;
}

/* The test accuracy of the net between the QCFS and the BPTT stage: ANN and
 * QCFS-ANN, and the SNN's after T steps (no views). */
static nc_status measure_stage(NcJob *self, nc_engine *engine, const nc_dataset *test, NcStageAccuracy *row,
                               nc_error *err)
{
    nc_eval_result r;
    begin_stage(self, "evaluate");
    nc_status st = nc_evaluate(engine, test, self->settings.batch_size, NC_MODE_ANN, on_progress, self, &r, err);
    if (st == NC_OK) {
        row->ann = r.accuracy;
        st = nc_evaluate(engine, test, self->settings.batch_size, NC_MODE_QCFS, on_progress, self, &r, err);
    }
    if (st == NC_OK)
        row->qcfs = r.accuracy;
    nc_record *rec = NULL;
    nc_simulate_options so = {.T = self->settings.T, .encoding = self->settings.encoding, .seed = 1,
                              .limit = self->settings.images, .batch_size = self->settings.batch_size,
                              .skip_ann = 1, .skip_qcfs = 1};
    if (st == NC_OK)
        st = nc_simulate(engine, self->net, test, &so, on_progress, self, &rec, err);
    if (st == NC_OK) {
        row->snn = nc_record_accuracy(rec, so.T);
        row->images = nc_record_samples(rec);
    }
    nc_record_free(rec);
    return st;
}

/* The fine-tuning stages on self->net (the QCFS stage, then BPTT), as the
 * CLI runs them; on cancel the trainer leaves the net as before the stage. */
static nc_status finetune(NcJob *self, nc_engine *engine, const nc_dataset *train, const nc_dataset *test,
                          nc_error *err)
{
    nc_pipeline_options o = self->settings.pipeline;
    nc_train_options *t = &o.train;
    t->progress = on_train_progress;
    t->progress_user = self;
    t->engine = g_strcmp0(self->settings.engine, "gpu") == 0 ? "gpu" : "cpu"; /* the trainer follows the engine */
    t->val_count = MIN(t->val_count, train->count / 10);                      /* at most a tenth is held out */
    /* padding of random crops: a black pixel after the preprocessing */
    const nc_preprocess *pp = &self->settings.pp;
    t->crop_fill = pp->n_std > 0 && pp->std[0] != 0 ? (0.0f - (pp->n_mean > 0 ? pp->mean[0] : 0)) / pp->std[0] : 0.0f;
    static const nc_train_mode modes[2] = {NC_TRAIN_QCFS, NC_TRAIN_BPTT};
    nc_status st = NC_OK;
    for (int k = 0; k < 2 && st == NC_OK; k++) {
        int epochs = modes[k] == NC_TRAIN_QCFS ? o.finetune_qcfs_epochs : o.finetune_bptt_epochs;
        if (epochs <= 0)
            continue;
        begin_stage(self, "finetune");
        self->last_val_accuracy = -1;
        NcRunData *d = nc_run_data_new("finetune", 0, 0, 0);
        d->has_train = TRUE;
        d->train = (nc_train_progress){.mode = modes[k], .epochs = epochs, .val_accuracy = -1};
        publish(self, d);
        nc_train_result result;
        st = nc_pipeline_finetune(self->net, modes[k], train, &o, &result, err);
        if (st == NC_OK) {
            self->results[modes[k]] = result;
            self->epochs_done[modes[k]] = result.best_epoch;
        }
        if (st == NC_OK)
            st = nc_engine_load(engine, self->net, err);
        /* a QCFS stage followed by BPTT gets its own row in the table */
        if (st == NC_OK && modes[k] == NC_TRAIN_QCFS && o.finetune_bptt_epochs > 0)
            st = measure_stage(self, engine, test, add_stage(self, "QCFS fine-tuned"), err);
    }
    return st;
}

static void worker(GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
    NcJob *self = source;
    nc_error err = {0};
    gint64 start = g_get_monotonic_time();
    nc_engine *engine = NULL;
    nc_dataset *train = NULL, *test = NULL;
    nc_status st = nc_engine_new(self->settings.engine, &engine, &err);
    if (st == NC_OK)
        st = convert(self, engine, &train, &err);
    if (st == NC_OK) {
        begin_stage(self, "load");
        st = open_data(self, NC_SPLIT_TEST, self->settings.images, &test, &err);
    }
    if (st == NC_OK)
        st = nc_check_dataset_fits(self->net, test, &err);
    if (st == NC_OK && self->finetunes) {
        /* the converted net is simulated first (the "before"), then
         * fine-tuned and simulated again */
        self->before_net = nc_net_clone(self->net);
        st = self->before_net ? NC_OK : nc_fail(&err, NC_ERR_MEMORY, "out of memory for a copy of the network");
        int row = (int)(add_stage(self, "converted") - self->stages);
        if (st == NC_OK)
            st = simulate(self, engine, self->before_net, test, row, TRUE, &self->before_record, &err);
        if (st == NC_OK) {
            self->baseline = nc_run_data_new_from_record("done", 0, 0, 0, self->before_record, NULL);
            stamp(self, self->baseline, FALSE);
            st = finetune(self, engine, train, test, &err);
        }
        if (st == NC_OK) {
            self->finetuned = TRUE;
            int bptt = self->settings.pipeline.finetune_bptt_epochs > 0;
            row = (int)(add_stage(self, bptt ? "BPTT fine-tuned" : "QCFS fine-tuned") - self->stages);
            /* after BPTT the ANN reading of the weights is not what was
             * trained: no ANN accuracy, as `neurocuda convert` prints it */
            st = simulate(self, engine, self->net, test, row, !bptt, &self->record, &err);
        }
    } else if (st == NC_OK) {
        int row = (int)(add_stage(self, self->converts ? "converted" : "simulated") - self->stages);
        st = simulate(self, engine, self->net, test, row, TRUE, &self->record, &err);
    }
    nc_dataset_free(train);
    nc_dataset_free(test);
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
