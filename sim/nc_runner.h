/* nc_runner.h — the pipeline runner: the one place that sequences a job.
 *
 * A front end (neurocuda convert / run / sweep, the workbench's job, later
 * the Python package) fills an nc_runner_desc saying WHAT to run; the runner
 * turns it into a list of stages and runs them in order:
 *
 *   open       the datasets (training split when converting, test split) and
 *              the engine, loaded with the source network (a clone); a
 *              spiking source, or any with measure_only, is then measured
 *              as it is and nothing else runs;
 *   calibrate  MaxPool preparation and activation statistics;
 *   convert    thresholds, QCFS, IF neurons (one per threshold method of a
 *              sweep, each on a clone of the calibrated net);
 *   calibrate-bias  training-free bias corrections for a T
 *              (pipeline.calibrate_bias_T, sim/nc_bias_calib.h), followed by
 *              a measure; after the QCFS stage when there is one (that
 *              stage retrains the biases for the QCFS-ANN), before BPTT;
 *   measure    one row of the stage table: ANN, QCFS-ANN and SNN accuracy on
 *              the test split (the SNN's after every step up to eval_T);
 *   finetune   one fine-tuning stage (QCFS, then BPTT), each followed by a
 *              measure;
 *   save       the project file (the net, the calibration, every row).
 *
 * The policies that decide a job's numbers live here and nowhere else
 * (docs/DESIGN.md, "One pipeline runner"):
 *   - the training split is opened whole when fine-tuning, else its first
 *     calib_images images;
 *   - the held-out set of fine-tuning is desc->held_out images (default
 *     NC_RUNNER_DEFAULT_HELD_OUT), at most a tenth of the training split;
 *   - bias calibration reads the first pipeline.bias_calib_images training
 *     images and is checked on the next NC_RUNNER_BIAS_CHECK_IMAGES (or as
 *     many as there are): corrections that lower the SNN's accuracy there
 *     are undone;
 *   - the crop padding of augmentation is a black pixel after preprocessing;
 *   - distillation (pipeline.train.distill_alpha > 0) learns from the source
 *     network, the ANN the job converts, unless train.teacher names another;
 *   - the engine's threads are desc->threads when it is > 0, else its own
 *     "threads" setting (engine_settings, e.g. --engine-opt threads=N);
 *   - every row is measured at eval_T steps (default: the simulated T when
 *     the job keeps records, else 32 when fine-tuning or bias calibrating,
 *     else no SNN row), with the same encoding, seed and batch size; a row after BPTT has no ANN
 *     accuracy (the ANN reading of those weights is not what was trained).
 *
 * One observer interface serves every front end: one progress callback for
 * every stage (a non-zero return cancels at the next batch), the trainer's
 * progress per batch, and an event at the start and end of each stage and
 * when a measurement's record is ready.  The runner never prints.
 *
 * A streamed dataset that fails (nc_dataset_stream_status) stops the job at
 * the next progress call, and the job fails with the stream's message. */
#ifndef NC_RUNNER_H
#define NC_RUNNER_H

#include "../core/nc_project.h"
#include "../core/nc_record.h"
#include "nc_budget.h"
#include "nc_pipeline.h"
#include "nc_simulate.h"

#define NC_RUNNER_MAX_ROWS 16
#define NC_RUNNER_MAX_STAGES 40
#define NC_RUNNER_DEFAULT_HELD_OUT 5000
#define NC_RUNNER_DEFAULT_FINETUNE_EVAL_T 32
#define NC_RUNNER_BIAS_CHECK_IMAGES 1000

typedef struct nc_runner_desc {
    const nc_net *source;         /* cloned; an ANN is converted, an SNN measured as it is */
    const char *source_path;      /* stored in the project file                          */
    const char *dataset;          /* nc_dataset_open spec (e.g. "fashion-mnist")          */
    /* Datasets made by the caller (borrowed; e.g. streams, nc_dataset.h): each
     * replaces the split of `dataset` it stands for, and is read as it is (no
     * limit, no preprocessing applied).  With no test split at all (dataset
     * and test_data NULL) a conversion measures nothing and saves no rows. */
    const nc_dataset *train_data, *test_data;
    nc_preprocess pp;
    int64_t test_images;          /* test images measured; ≤ 0: all                      */
    const char *engine;           /* engine name ("cpu" when NULL) …                     */
    nc_engine *engine_instance;   /* … or an engine made by the caller (borrowed)        */
    int threads;                  /* CPU threads of a named engine; ≤ 0: the engine's own
                                     setting (its "threads" option; default all cores)   */
    const struct nc_engine_settings *engine_settings; /* KEY=VALUE options (may be NULL) */
    nc_pipeline_options pipeline; /* conversion and fine-tuning                          */
    int64_t held_out;             /* fine-tuning's held-out images; < 0: the default     */
    /* a sweep: each method converts a clone of one calibration and is measured;
     * n_methods = 0: one conversion with pipeline.method */
    int n_methods;
    nc_calib_method methods[NC_RUNNER_MAX_ROWS];
    int eval_T;                   /* SNN steps of each row; 0: the default above         */
    int keep_records;             /* 1: the first and last row keep their record         */
    int T;                        /* with keep_records: the steps simulated (default 32) */
    nc_encoding encoding;
    uint64_t seed;                /* Poisson encoding (the default desc: 1)              */
    int batch_size;               /* measurements; ≤ 0: pipeline.batch_size               */
    nc_record_spec record;        /* what a kept record holds (raster, traces)           */
    int skip_ann, skip_qcfs;      /* no ANN / QCFS-ANN accuracy (e.g. NIR neuron models)  */
    int measure_only;             /* 1: measure the source as it is, an ANN too (no
                                     conversion; `neurocuda eval`): open → measure      */
    const char *output;           /* project file to write; NULL: none                   */
    /* Keep the best stage (the --target-T recipe, sim/nc_recipe.h): after
     * every measured stage of a conversion, the SNN's accuracy at
     * keep_best_T steps on the fine-tuning held-out images decides; a stage
     * that lowers it is undone (the net goes back to the best so far, and
     * the next stage starts from there).  0: off. */
    int keep_best_T;
    /* Seconds for the whole job (0: no limit).  Before each training stage
     * the runner plans the rest of the job (sim/nc_budget.h): every later
     * stage that is not training (measurements, held-out judgements, bias
     * calibration) is estimated from the rates measured so far in this run
     * and reserved, and the training stages share what is left (QCFS weight
     * 1, BPTT 3: a quarter for QCFS when BPTT follows); the trainer fits its
     * epochs into its part (nc_train.h).  When the reserve alone does not
     * fit, the stage runs one epoch and its plan says so
     * (nc_runner_budget_plan). */
    double time_budget;
    /* Devices the job spreads over (sim/nc_ranks.h): every measurement's test
     * set is dealt over them and merged (sim/nc_shard.h; the same numbers as
     * one device), fine-tuning shares each batch (sim/nc_train_dp.h);
     * calibration runs on the first.  0: the engine's "gpus" option
     * (`--gpus`), 1 without one; more than 0 on an engine without devices:
     * that many CPU ranks (tests). */
    int ranks;
} nc_runner_desc;

/* The defaults of every field (pipeline defaults, cpu engine, direct
 * encoding, default held-out set and eval_T, no output). */
nc_runner_desc nc_runner_desc_default(void);

typedef enum nc_run_stage_kind {
    NC_RUN_OPEN,
    NC_RUN_CALIBRATE,
    NC_RUN_CONVERT,
    NC_RUN_MEASURE,
    NC_RUN_FINETUNE,
    NC_RUN_CALIBRATE_BIAS,
    NC_RUN_SELECT,
    NC_RUN_SAVE
} nc_run_stage_kind;

typedef struct nc_run_stage {
    nc_run_stage_kind kind;
    const char *label;      /* for progress displays: "load", "calibrate", "convert",
                               "simulate", "evaluate", "finetune", "calibrate-bias",
                               "select", "save"                                    */
    nc_train_mode mode;     /* FINETUNE: the stage                                */
    int method;             /* CONVERT: index into desc->methods (−1: pipeline.method) */
    int row;                /* MEASURE: the row it fills; SELECT: the row it judges */
    int keep;               /* MEASURE: keeps its record                          */
    int ann, qcfs;          /* MEASURE: also measures ANN / QCFS-ANN accuracy      */
} nc_run_stage;

/* One row of the stage table: a network measured on the test split. */
typedef struct nc_stage_row {
    char name[32];          /* "converted", "bias calibrated", "QCFS fine-tuned", "BPTT fine-tuned",
                               "simulated", or a sweep's method ("p99.9 (channel)") */
    double ann, qcfs;       /* NAN when not measured                              */
    int T;                  /* SNN steps measured (0: none)                       */
    double *snn;            /* [T]: accuracy after step t + 1 (owned)             */
    int64_t images;         /* test images measured                               */
    /* A row measured without SNN steps (eval_T = 0): the ANN pass's correct
     * answers and its speed (nc_eval_result); 0 otherwise. */
    int64_t ann_correct;
    double ann_images_per_second;
} nc_stage_row;

typedef struct nc_runner nc_runner;

typedef enum nc_runner_event {
    NC_RUNNER_STAGE_BEGIN,
    NC_RUNNER_RECORD_READY, /* MEASURE: the engine holds the net and the record is
                               made; its simulation starts when the event returns */
    NC_RUNNER_STAGE_END
} nc_runner_event;

typedef struct nc_runner_observer {
    void *user;
    nc_progress_fn progress;             /* every stage; may be NULL             */
    nc_train_progress_fn train_progress; /* fine-tuning, per batch; may be NULL  */
    /* may be NULL; a failure stops the job with that status */
    nc_status (*event)(void *user, nc_runner *r, const nc_run_stage *stage, nc_runner_event ev, nc_error *err);
} nc_runner_observer;

/* Plans the stages of `desc` (copied; the pointers in it must outlive the
 * runner).  NC_ERR_ARGUMENT for a description that cannot run. */
nc_status nc_runner_new(const nc_runner_desc *desc, nc_runner **out, nc_error *err);
void nc_runner_free(nc_runner *r); /* NULL is a no-op */

int nc_runner_stage_count(const nc_runner *r);
const nc_run_stage *nc_runner_stage(const nc_runner *r, int i);
const nc_runner_desc *nc_runner_get_desc(const nc_runner *r);

/* Runs every stage; obs may be NULL.  Stops at the first failure or cancel
 * (NC_ERR_CANCELLED); what finished stays readable below.  Runs once. */
nc_status nc_runner_run(nc_runner *r, const nc_runner_observer *obs, nc_error *err);

/* ---- results (also after a failure or cancel) ---- */
int nc_runner_row_count(const nc_runner *r);
const nc_stage_row *nc_runner_row(const nc_runner *r, int row);
/* The record of a measurement (kept or in progress), or NULL. */
const nc_record *nc_runner_record(const nc_runner *r, int row);
/* The net a row measured (kept rows: their own clone), or NULL. */
const nc_net *nc_runner_row_net(const nc_runner *r, int row);
/* The job's network as it is now (converted, fine-tuned). */
const nc_net *nc_runner_net(const nc_runner *r);
const nc_pipeline_result *nc_runner_pipeline_result(const nc_runner *r);
/* The trainer's result of a stage that ran to its end; 0 otherwise. */
int nc_runner_train_result(const nc_runner *r, nc_train_mode mode, nc_train_result *out);
/* Seconds stage i took (0 before it ran). */
double nc_runner_stage_seconds(const nc_runner *r, int i);
/* With desc.time_budget: the time plan a training stage runs under (its
 * seconds, the reserve for the stages after it, its reason), made just before
 * its STAGE_BEGIN event; NULL for other stages and before then. */
const nc_budget_plan *nc_runner_budget_plan(const nc_runner *r, int i);
/* Seconds the stages that made row `row` took: calibrate and convert for the
 * converted net, else the fine-tuning or bias calibration stage before the
 * row's measurement (its measurement and judgement not included); 0 for a
 * row no stage made (a simulated project) or one not reached. */
double nc_runner_row_seconds(const nc_runner *r, int row);
/* keep_best_T: the row whose net the job holds now (the best stage so far),
 * and the held-out accuracy of row `row` at keep_best_T (−1: not judged). */
int nc_runner_best_row(const nc_runner *r);
double nc_runner_held_out_accuracy(const nc_runner *r, int row);
/* The bias calibration's result (NULL when the stage did not run to its end). */
const nc_bias_calib_result *nc_runner_bias_result(const nc_runner *r);
/* The options the trainer ran with (held-out set and crop fill decided). */
const nc_train_options *nc_runner_train_options(const nc_runner *r);
int nc_runner_eval_T(const nc_runner *r);
/* While running (observer calls): the engine and the datasets. */
nc_engine *nc_runner_engine(nc_runner *r);
const nc_dataset *nc_runner_train_set(const nc_runner *r);
const nc_dataset *nc_runner_test_set(const nc_runner *r);

/* Writes rows into `p` as metrics under the names `neurocuda convert` always
 * used: "<prefix>ann_accuracy", "<prefix>qcfs_accuracy",
 * "<prefix>snn_accuracy_t<t>" with prefix "" (converted), "bias_calibrated_", "qcfs_finetuned_",
 * "bptt_finetuned_", and "final_" for the last of several rows. */
void nc_runner_store_rows(nc_project *p, const nc_stage_row *rows, int n);

/* The project the save stage writes: a clone of the job's net, the source
 * model, the preprocessing, the calibration, every row and the fine-tuning
 * settings.  When a stage changed the net after conversion, also each row's
 * time as "seconds_<row>" (<row>: converted, qcfs_finetuned, bias_calibrated,
 * bptt_finetuned; nc_runner_row_seconds), each kind of stage's as
 * "seconds_<stage label>" and "seconds_total", and with keep_best_T each
 * row's "<prefix>held_out_accuracy".  Callable after a run (front ends that
 * save later). */
nc_status nc_runner_make_project(const nc_runner *r, nc_project **out, nc_error *err);

/* 1 if the net holds spiking or stateful neurons (IF from a conversion, or
 * LIF and friends from a NIR file): it is simulated, not converted. */
int nc_runner_is_spiking(const nc_net *net);

/* The policies, for front ends that show them before a run. */
int64_t nc_runner_held_out(int64_t requested, int64_t train_images);
float nc_runner_crop_fill(const nc_preprocess *pp);

#endif
