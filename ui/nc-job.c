/* nc-job.c — a conversion + simulation run in a GTask worker (see nc-job.h). */
#include "nc-job.h"

#include <math.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../sim/nc_engine_registry.h"
#include "../sim/nc_recipe.h"
#include "nc-teach-record.h"

struct _NcJob {
    GObject parent_instance;

    NcJobSettings settings;
    nc_net *source;             /* the clone we convert from                    */
    char *source_path;
    gboolean converts;
    gboolean finetunes;         /* converts, and a fine-tuning stage is on       */

    /* the pipeline runner: it sequences the stages and holds what they
     * produced (written by the worker, read on the main thread after it) */
    nc_runner *runner;
    double seconds;
    /* fine-tuning: the converted net's complete snapshot (the "before") */
    NcRunData *baseline;
    int n_stages;               /* each stage's test accuracy (see NcStageAccuracy) */
    NcStageAccuracy stages[NC_MAX_STAGES];

    /* the worker's progress state (worker thread only) */
    GCancellable *cancellable;
    char stage[32];
    gint64 stage_start, last_publish;
    int64_t last_done, last_samples;
    NcRunViews *last_views;
    NcRasterSpill *spill;       /* raster samples past the memory budget        */
    const nc_record *live;      /* the record being filled, or NULL             */
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
    return s->pipeline.finetune_qcfs_epochs > 0 || s->pipeline.finetune_bptt_epochs > 0 ||
           s->pipeline.calibrate_bias_T > 0 || s->target_T > 0;
}

/* The stages after conversion in the runner's order: QCFS, bias calibration, BPTT. */
char *nc_job_settings_describe_finetune(const NcJobSettings *s)
{
    if (s->target_T > 0)
        return g_strdup_printf("recipe T %d", s->target_T);
    int qcfs = s->pipeline.finetune_qcfs_epochs, bptt = s->pipeline.finetune_bptt_epochs;
    int bias = s->pipeline.calibrate_bias_T;
    GString *text = g_string_new(NULL);
    if (qcfs > 0)
        g_string_append_printf(text, "QCFS %d ep", qcfs);
    if (bias > 0)
        g_string_append_printf(text, "%sbias calibration T %d", text->len ? " + " : "", bias);
    if (bptt > 0)
        g_string_append_printf(text, "%sBPTT %d ep", text->len ? " + " : "", bptt);
    return g_string_free(text, text->len == 0);
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
gboolean nc_net_is_snn(const nc_net *net) { return nc_runner_is_spiking(net); }

/* ---- object ----------------------------------------------------------------- */

static void nc_job_finalize(GObject *object)
{
    NcJob *self = NC_JOB(object);
    nc_runner_free(self->runner);
    g_clear_pointer(&self->baseline, nc_run_data_unref);
    nc_net_free(self->source);
    nc_job_settings_clear(&self->settings);
    g_free(self->source_path);
    g_clear_pointer(&self->pending, nc_run_data_unref);
    g_clear_pointer(&self->last_views, nc_run_views_unref);
    g_clear_pointer(&self->spill, nc_raster_spill_unref);
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

/* The record of the first row (the converted net's run) and of the last. */
static const nc_record *first_record(NcJob *self)
{
    return self->runner ? nc_runner_record(self->runner, 0) : NULL;
}

static const nc_record *last_record(NcJob *self)
{
    int n = self->runner ? nc_runner_row_count(self->runner) : 0;
    return n > 1 ? nc_runner_record(self->runner, n - 1) : NULL;
}

/* A fine-tuning run stopped before the fine-tuned net's first batch: what it
 * has is the converted net and its run. */
static gboolean keeps_before(NcJob *self)
{
    const nc_record *after = last_record(self);
    return self->finetunes && first_record(self) && (!after || nc_record_samples(after) == 0);
}

const nc_net *nc_job_get_net(NcJob *self)
{
    if (!self->runner)
        return NULL;
    return keeps_before(self) ? nc_runner_row_net(self->runner, 0) : nc_runner_net(self->runner);
}

const nc_record *nc_job_get_record(NcJob *self)
{
    if (keeps_before(self) || !self->finetunes)
        return first_record(self);
    return last_record(self);
}

gboolean nc_job_finetunes(NcJob *self) { return self->finetunes; }

nc_status nc_job_make_project(NcJob *self, nc_project **out, nc_error *err)
{
    *out = NULL;
    const nc_net *held = self ? nc_job_get_net(self) : NULL;
    if (!held)
        return nc_fail(err, NC_ERR_ARGUMENT, "Convert the model first (Convert & Run); a project holds the converted "
                                             "network.");
    if (self->finetunes && !keeps_before(self))
        return nc_runner_make_project(self->runner, out, err);
    nc_net *net = nc_net_clone(held); /* the project takes it */
    if (!net)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for a copy of the network");
    nc_status st = nc_pipeline_make_project(net, self->source_path, &self->settings.pp, &self->settings.pipeline,
                                            nc_job_get_pipeline_result(self), out, err);
    if (st == NC_OK && self->finetunes) /* a later stage was cancelled: the converted net's row */
        nc_runner_store_rows(*out, nc_runner_row(self->runner, 0), 1);
    return st;
}

int nc_job_get_finetuned_epochs(NcJob *self, nc_train_mode stage)
{
    nc_train_result r;
    if (keeps_before(self) || !self->runner || !nc_runner_train_result(self->runner, stage, &r))
        return 0;
    return r.best_epoch;
}

gboolean nc_job_get_train_result(NcJob *self, nc_train_mode stage, nc_train_result *out)
{
    nc_train_result r;
    if (!self->runner || !nc_runner_train_result(self->runner, stage, &r) || r.epochs_run == 0)
        return FALSE;
    *out = r;
    return TRUE;
}

const NcStageAccuracy *nc_job_get_stages(NcJob *self, int *n)
{
    *n = keeps_before(self) ? MIN(self->n_stages, 1) : self->n_stages;
    return self->stages;
}

/* ---- the raster past the memory budget ---------------------------------------------- */

static int raster_samples_kept(const NcJobSettings *s)
{
    return s->raster_samples > 0 ? s->raster_samples : NC_RECORD_DEFAULT_RASTER_SAMPLES;
}

int nc_job_settings_raster_in_memory(const NcJobSettings *s, const nc_net *net)
{
    double bits = 0;
    for (int i = 0; net && i < net->n_nodes; i++)
        if (net->nodes[i].kind == NC_NODE_NEURON)
            bits += (double)MIN(nc_node_numel(&net->nodes[i]), (int64_t)MAX(s->raster_neurons, 1)) * MAX(s->T, 1);
    int mb = s->raster_memory_mb > 0 ? s->raster_memory_mb : NC_JOB_DEFAULT_RASTER_MEMORY_MB;
    double budget_bits = (double)mb * 1024 * 1024 * 8;
    double fit = bits > 0 ? floor(budget_bits / bits) : (double)G_MAXINT;
    return (int)MAX(1, MIN((double)raster_samples_kept(s), fit));
}

/* The record's raster sink (worker thread): the samples past those the
 * record keeps go to a spill file, one per record (a fine-tuning run has
 * two); the snapshots carry it so that the views can read them back. */
static void on_raster_batch(void *user, const nc_record *rec, int layer, int64_t first, int64_t n, int neurons,
                            int T, const uint8_t *bits)
{
    NcJob *self = user;
    if (!self->spill || nc_raster_spill_get_record(self->spill) != rec) {
        g_clear_pointer(&self->spill, nc_raster_spill_unref);
        self->spill = nc_raster_spill_new(rec, nc_record_get_spec(rec)->raster_samples,
                                          raster_samples_kept(&self->settings));
    }
    nc_raster_spill_sink(self->spill, rec, layer, first, n, neurons, T, bits);
}

static void attach_spill(NcJob *self, NcRunData *d, const nc_record *rec)
{
    if (self->spill && nc_raster_spill_get_record(self->spill) == rec)
        d->spill = nc_raster_spill_ref(self->spill);
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
    attach_spill(self, d, rec);
    int n;
    nc_job_get_stages(self, &n);
    stamp(self, d, self->finetunes && !keeps_before(self));
    d->n_stages = n;
    return d;
}
const nc_pipeline_result *nc_job_get_pipeline_result(NcJob *self)
{
    static const nc_pipeline_result none;
    return self->runner ? nc_runner_pipeline_result(self->runner) : &none;
}
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

/* The stage table from the runner's rows (their values once measured). */
static void sync_stages(NcJob *self)
{
    int n = MIN(nc_runner_row_count(self->runner), NC_MAX_STAGES);
    for (int k = 0; k < n; k++) {
        const nc_stage_row *row = nc_runner_row(self->runner, k);
        NcStageAccuracy *s = &self->stages[k];
        *s = (NcStageAccuracy){.ann = row->ann, .qcfs = row->qcfs, .images = row->images,
                               .T = row->T > 0 ? row->T : nc_runner_eval_T(self->runner),
                               .snn = row->T > 0 ? row->snn[row->T - 1] : NAN};
        g_strlcpy(s->name, row->name, sizeof s->name);
    }
    self->n_stages = n;
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
    attach_spill(self, d, self->live);
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

/* What the job runs, for the pipeline runner (nc_runner.h decides the rest:
 * the held-out set, the crop fill, the order of the stages). */
void nc_job_settings_describe_run(const NcJobSettings *s, const nc_net *source, const char *source_path,
                                  nc_runner_desc *d)
{
    *d = nc_runner_desc_default();
    d->source = source;
    d->source_path = source_path;
    d->dataset = s->dataset;
    d->pp = s->pp;
    d->test_images = s->images;
    d->engine = s->engine;
    const nc_engine_info *info = nc_engine_find(s->engine);
    if (s->gpus > 1 && info && info->device_count) /* several GPUs: the runner deals the work over them */
        d->ranks = s->gpus;
    d->pipeline = s->pipeline;
    d->held_out = s->pipeline.train.val_count;
    d->keep_records = 1;
    d->T = s->T;
    d->encoding = s->encoding;
    d->batch_size = s->batch_size;
    /* every raster row is traced (sample 0), up to a size that keeps the
     * traces (9 bytes per neuron and step) small; the raster samples past
     * the memory budget are handed to a spill file by the job (raster_sink) */
    d->record = (nc_record_spec){.raster_samples = nc_job_settings_raster_in_memory(s, source),
                                 .raster_neurons = s->raster_neurons, .trace_samples = 1,
                                 .trace_neurons = MIN(s->raster_neurons, NC_JOB_MAX_TRACED)};
    if (s->target_T > 0) {
        nc_recipe plan; /* fails only for T < 1 */
        nc_recipe_describe(source, s->target_T, s->time_budget_minutes, d, &plan, NULL);
        d->eval_T = 0; /* the views show the simulated T */
    }
}

/* The simulated net goes to the main thread as a clone it owns, with the
 * teaching view's image (recorded first, so it can play during the run). */
static nc_status publish_converted(NcJob *self, nc_runner *r, const nc_run_stage *stage, nc_error *err)
{
    const nc_net *net = nc_runner_row_net(r, stage->row);
    NcTeachData *teach = NULL;
    nc_status st = nc_teach_record(nc_runner_engine(r), net, nc_runner_test_set(r), self->settings.T,
                                   self->settings.encoding, on_progress, self, &teach, err);
    if (st != NC_OK)
        return st;
    NcRunData *d = nc_run_data_new("converted", 0, 0, 0);
    d->converted = nc_net_clone(net);
    d->teach = teach;
    if (teach && g_str_equal(self->settings.dataset, "fashion-mnist") && teach->classes == 10)
        teach->class_names = nc_fashion_mnist_classes;
    publish(self, d);
    return NC_OK;
}

/* A kept measurement's record is ready: the views follow it live. */
static nc_status begin_live(NcJob *self, nc_runner *r, const nc_run_stage *stage, nc_error *err)
{
    nc_status st = publish_converted(self, r, stage, err);
    if (st != NC_OK)
        return st;
    sync_stages(self);
    begin_stage(self, "simulate");
    self->finetuned = self->finetunes && stage->row > 0;
    self->live = nc_runner_record(r, stage->row);
    self->live_stage = stage->row;
    self->live_ann = stage->ann;
    self->last_samples = -1;
    g_clear_pointer(&self->last_views, nc_run_views_unref);
    return NC_OK;
}

static void end_live(NcJob *self)
{
    update_stage(self); /* the last batch may have ended after the last progress call */
    self->live = NULL;
    sync_stages(self);
}

static void begin_finetune(NcJob *self, nc_runner *r, const nc_run_stage *stage)
{
    const nc_pipeline_options *o = &nc_runner_get_desc(r)->pipeline; /* the recipe's, when it decided */
    begin_stage(self, "finetune");
    self->last_val_accuracy = -1;
    NcRunData *d = nc_run_data_new("finetune", 0, 0, 0);
    d->has_train = TRUE;
    d->train = (nc_train_progress){.mode = stage->mode, .val_accuracy = -1,
                                   .epochs = stage->mode == NC_TRAIN_QCFS ? o->finetune_qcfs_epochs
                                                                         : o->finetune_bptt_epochs};
    publish(self, d);
}

/* The runner's stages as they begin and end (worker thread). */
static nc_status on_event(void *user, nc_runner *r, const nc_run_stage *stage, nc_runner_event ev, nc_error *err)
{
    NcJob *self = user;
    if (ev == NC_RUNNER_STAGE_BEGIN && stage->kind == NC_RUN_FINETUNE)
        begin_finetune(self, r, stage);
    else if (ev == NC_RUNNER_STAGE_BEGIN && stage->kind == NC_RUN_MEASURE)
        begin_stage(self, stage->keep ? "load" : "evaluate");
    else if (ev == NC_RUNNER_STAGE_BEGIN) {
        begin_stage(self, stage->label);
        if (stage->kind == NC_RUN_OPEN)
            publish(self, nc_run_data_new("load", 0, 0, 0));
    } else if (ev == NC_RUNNER_RECORD_READY && stage->keep)
        return begin_live(self, r, stage, err);
    else if (ev == NC_RUNNER_STAGE_END && stage->kind == NC_RUN_MEASURE) {
        end_live(self);
        /* the converted net's complete run: the "before" of every later snapshot */
        if (self->finetunes && stage->row == 0 && nc_runner_record(r, 0)) {
            self->baseline = nc_run_data_new_from_record("done", 0, 0, 0, nc_runner_record(r, 0), NULL);
            attach_spill(self, self->baseline, nc_runner_record(r, 0));
            stamp(self, self->baseline, FALSE);
        }
    }
    return NC_OK;
}

/* The run yields the CPU to the window: on a machine whose cores the engine
 * fills (2 cores, the CPU engine on both), the main thread would otherwise
 * wait for a time slice at every frame.  On Linux the nice value belongs to
 * the thread, and the engine's worker threads, started from this one on
 * their first use, inherit it.  The pool thread keeps it for the background
 * work it does later (an unprivileged process cannot lower it again). */
static void yield_to_the_window(void)
{
#ifdef __linux__
    pid_t thread = gettid();
    int nice = getpriority(PRIO_PROCESS, (id_t)thread);
    if (nice < NC_JOB_NICE)
        setpriority(PRIO_PROCESS, (id_t)thread, NC_JOB_NICE);
#endif
}

static void worker(GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
    NcJob *self = source;
    yield_to_the_window();
    nc_error err = {0};
    gint64 start = g_get_monotonic_time();
    nc_runner_desc desc;
    nc_job_settings_describe_run(&self->settings, self->source, self->source_path, &desc);
    if (raster_samples_kept(&self->settings) > desc.record.raster_samples)
        desc.record.raster_sink = on_raster_batch, desc.record.raster_sink_user = self;
    nc_runner_observer obs = {.user = self, .progress = on_progress, .train_progress = on_train_progress,
                              .event = on_event};
    nc_status st = nc_runner_new(&desc, &self->runner, &err);
    if (st == NC_OK)
        st = nc_runner_run(self->runner, &obs, &err);
    if (self->runner)
        end_live(self); /* a failed or cancelled simulation keeps its finished batches */
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
