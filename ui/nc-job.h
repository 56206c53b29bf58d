/* nc-job.h — one conversion + simulation run, off the main thread.
 *
 * A job describes its run to the pipeline runner (sim/nc_runner.h:
 * nc_job_settings_describe_run) and runs it in a GTask worker; the runner
 * sequences the stages (open, calibrate, convert, measure, fine-tune) exactly
 * as for `neurocuda convert`, and the job presents them.  With fine-tuning on
 * (epochs > 0, converted networks only) the first row (the converted net) and
 * the last (the fine-tuned net) are simulated with records; every snapshot of
 * the last simulation carries the first one's complete snapshot
 * (NcRunData.baseline) and each stage's accuracy (NcRunData.stages).  A
 * cancelled stage leaves the net as it was before the stage; the job then
 * keeps the converted net and its run (nc_job_get_net/record).  The worker
 * never touches a widget: its progress callback copies a snapshot (NcRunData)
 * into a mutex-protected slot and, if none is queued yet, queues an idle on
 * the main context that emits ::progress with the newest snapshot (older
 * unseen ones are dropped: the views only ever need the latest).  Cancelling
 * the GCancellable makes the progress callback return non-zero, which stops
 * the runner cleanly; the record then holds the batches finished before. */
#pragma once

#include <gio/gio.h>

#include "../core/nc_record.h"
#include "../sim/nc_runner.h"
#include "nc-run-data.h"

G_BEGIN_DECLS

typedef struct {
    char *dataset;            /* nc_dataset_open spec ("fashion-mnist", a path) */
    nc_preprocess pp;
    int64_t images;           /* test images to simulate                       */
    nc_pipeline_options pipeline;
    int T;
    nc_encoding encoding;
    char *engine;             /* "cpu", "gpu", "loihi"                          */
    int gpus;                 /* GPUs a gpu run spreads over (1: one)           */
    int batch_size;
    int raster_neurons;       /* also the traced neurons (up to NC_JOB_MAX_TRACED),
                                 so a raster row has a trace */
    int raster_samples;       /* images whose raster is kept (the first ones); ≤ 0: 4 */
    int raster_memory_mb;     /* memory those rasters may take (≤ 0: the default); the
                                 samples past it go to a temporary file (NcRasterSpill) */
    int target_T;             /* the --target-T recipe (sim/nc_recipe.h); 0 = off */
    double time_budget_minutes; /* its budget (≤ 0: the recipe's default)     */
} NcJobSettings;

#define NC_JOB_MAX_TRACED 16384
#define NC_JOB_DEFAULT_RASTER_MEMORY_MB 64
/* The nice value of a run's threads (see nc_job_run_async). */
#define NC_JOB_NICE 10

void nc_job_settings_clear(NcJobSettings *s);
void nc_job_settings_copy(NcJobSettings *dst, const NcJobSettings *src);
/* "p99.9 · layer · L 8" — names a run in the accuracy chart's legend. */
char *nc_job_settings_describe(const NcJobSettings *s, gboolean converts);
/* "QCFS 1 ep + BPTT 2 ep", "bias calibration T 8", "recipe T 8", or NULL when
 * no stage changes the net after conversion (nc_job_settings_finetunes). */
char *nc_job_settings_describe_finetune(const NcJobSettings *s);
/* TRUE when a stage changes the net after conversion (bias calibration,
 * fine-tuning, the recipe): the views then compare before and after. */
gboolean nc_job_settings_finetunes(const NcJobSettings *s);
/* The pipeline runner's description of a job with these settings on
 * `source` (pointers into s and source: they must outlive it); with
 * target_T the recipe's plan is written into it (the rows are still
 * measured at the simulated T). */
void nc_job_settings_describe_run(const NcJobSettings *s, const nc_net *source, const char *source_path,
                                  nc_runner_desc *d);
/* How many of the kept raster samples stay in memory: as many as fit
 * raster_memory_mb at about Σ over the neuron layers of `net` of
 * min(neurons, raster_neurons) × T bits each (at least one).  `net` is the
 * network before conversion; the converted one may record fewer neurons
 * (an IF after a max pool), so the estimate errs towards less memory. */
int nc_job_settings_raster_in_memory(const NcJobSettings *s, const nc_net *net);

#define NC_JOB_ERROR (nc_job_error_quark())
GQuark nc_job_error_quark(void); /* codes are nc_status values */

#define NC_TYPE_JOB (nc_job_get_type())
G_DECLARE_FINAL_TYPE(NcJob, nc_job, NC, JOB, GObject)

/* `source` is cloned; it may be an ANN (converted by the job) or an SNN
 * (already converted: simulated as it is). */
NcJob *nc_job_new(const nc_net *source, const char *source_path, const NcJobSettings *settings);

/* Runs the job in a worker thread at a lower priority (nice NC_JOB_NICE on
 * Linux, inherited by the engine's threads), so that the window's thread
 * gets the CPU first when both want it. */
void nc_job_run_async(NcJob *self, GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data);
/* FALSE with G_IO_ERROR_CANCELLED when cancelled, or NC_JOB_ERROR. */
gboolean nc_job_run_finish(NcJob *self, GAsyncResult *result, GError **error);

/* After the run (also a cancelled or failed one): what it produced, owned by
 * the job; NULL when it did not get that far.  A fine-tuning run stopped
 * before the fine-tuned net's first simulated batch gives the converted net
 * and its record. */
const nc_net *nc_job_get_net(NcJob *self);
const nc_record *nc_job_get_record(NcJob *self);
/* A new snapshot of that record, with the stage table and, after
 * fine-tuning, the baseline; NULL without a record. */
NcRunData *nc_job_get_final(NcJob *self);
/* The stages the net of nc_job_get_net went through, with their test
 * accuracy (owned by the job), and the epochs of each fine-tuning stage it
 * holds (0: none, or cancelled). */
const NcStageAccuracy *nc_job_get_stages(NcJob *self, int *n);
int nc_job_get_finetuned_epochs(NcJob *self, nc_train_mode stage);
/* The trainer's result of a stage that ran to its end; FALSE otherwise.
 * best_epoch 0: no epoch beat the held-out accuracy before training, and
 * the net kept the parameters it had. */
gboolean nc_job_get_train_result(NcJob *self, nc_train_mode stage, nc_train_result *out);
gboolean nc_job_finetunes(NcJob *self); /* converts, with a fine-tuning stage on */
/* The project file of nc_job_get_net: after a job whose stages all ran and
 * changed the net after conversion, the runner's (nc_runner_make_project:
 * every row with its time, the bias corrections — what `neurocuda convert`
 * saves); else the net and its settings, and the converted net's row when a
 * later stage was cancelled.  NC_ERR_ARGUMENT, saying what to do, when there
 * is no net yet (self may be NULL: no run yet). */
nc_status nc_job_make_project(NcJob *self, nc_project **out, nc_error *err);
const nc_pipeline_result *nc_job_get_pipeline_result(NcJob *self);
const NcJobSettings *nc_job_get_settings(NcJob *self);
const char *nc_job_get_source_path(NcJob *self);
gboolean nc_job_converts(NcJob *self); /* FALSE when the source was an SNN */
double nc_job_get_seconds(NcJob *self);  /* wall time of the run */

/* TRUE if the net is already spiking (IF, or NIR neurons such as LIF). */
gboolean nc_net_is_snn(const nc_net *net);

G_END_DECLS
