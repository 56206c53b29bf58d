/* nc_pipeline.h — the conversion pipeline as one call, shared by the CLI and
 * the workbench (neither holds pipeline logic of its own):
 *
 *   prepare MaxPool (avg | pre-spike | gated)
 *   → calibrate on the engine (activation statistics of every ReLU layer)
 *   → thresholds λ (max | p99 | p99.9 | p99.99 | mmse; layer- or channel-wise)
 *   → QCFS: ReLU → clip-floor-shift(λ, L)
 *   → SNN: QCFS → IF(θ = λ, v0 = v0_fraction·θ, reset, compare)
 *   → optional fine-tuning (sim/nc_train.h): QCFS stage (the QCFS-ANN with
 *     the straight-through estimator), then BPTT stage (the SNN over T steps
 *     with a surrogate gradient) — nc_pipeline_finetune, one call per stage
 *
 * A model whose ONNX already holds QCFS chains (λ and L recovered at import)
 * skips calibration: its λ are used as they are. */
#ifndef NC_PIPELINE_H
#define NC_PIPELINE_H

#include "../core/nc_calib.h"
#include "../core/nc_convert.h"
#include "../core/nc_dataset.h"
#include "../core/nc_project.h"
#include "nc_bias_calib.h"
#include "nc_calibrate.h"
#include "nc_engine.h"
#include "nc_train.h"

typedef struct nc_pipeline_options {
    nc_calib_method method;       /* default p99.9                                 */
    int per_channel;              /* 0: one θ per layer (default), 1: per channel  */
    int levels;                   /* QCFS L, default 8                              */
    int target_T;                 /* mmse: the T the threshold is tuned for (default L) */
    nc_maxpool_strategy maxpool;  /* default pre-spike                             */
    nc_snn_options snn;           /* v0 = θ/2, reset by subtraction, fire on ≥      */
    int64_t calib_images;         /* default 2000                                  */
    int batch_size;               /* default 100                                   */
    /* Fine-tuning after conversion: epochs of each stage (0 = skipped) and
     * the trainer's settings (mode and epochs are set per stage). */
    int finetune_qcfs_epochs;
    int finetune_bptt_epochs;
    nc_train_options train;       /* T = the BPTT steps (--train-T), default 8     */
    /* Training-free bias calibration after conversion (sim/nc_bias_calib.h):
     * the T its corrections are chosen for (0 = none), on the first
     * bias_calib_images training images (0 = NC_BIAS_CALIB_DEFAULT_IMAGES). */
    int calibrate_bias_T;
    int64_t bias_calib_images;
} nc_pipeline_options;

nc_pipeline_options nc_pipeline_options_default(void);

typedef struct nc_pipeline_result {
    int calibrated;               /* 0 when imported QCFS thresholds were used     */
    nc_calib_stats *stats;        /* owned; NULL when not calibrated               */
    char warnings[2048];          /* dead layers/channels and other notices        */
} nc_pipeline_result;

void nc_pipeline_result_clear(nc_pipeline_result *r);

/* Converts `net` in place into an SNN (see above).  `calib` is the dataset
 * calibrated on (the TRAIN split).  The engine is (re)loaded with the net.
 * Progress: stage "calibrate".  On failure the net may be half converted:
 * callers convert a clone (nc_net_clone) when they must keep the original. */
nc_status nc_pipeline_convert(nc_engine *engine, nc_net *net, const nc_dataset *calib,
                              const nc_pipeline_options *opts, nc_progress_fn progress, void *progress_user,
                              nc_pipeline_result *result, nc_error *err);

/* The two halves of nc_pipeline_convert, so that several threshold choices
 * can share one calibration (neurocuda sweep, the workbench's comparisons):
 *   nc_pipeline_calibrate: prepares the MaxPools of `net` in place and
 *     collects the statistics (result->stats) — or notes that the net holds
 *     imported QCFS thresholds;
 *   nc_pipeline_finish: thresholds by opts->method from result->stats, then
 *     QCFS and IF neurons, on `net` — the calibrated net or a clone of it. */
nc_status nc_pipeline_calibrate(nc_engine *engine, nc_net *net, const nc_dataset *calib,
                                const nc_pipeline_options *opts, nc_progress_fn progress, void *progress_user,
                                nc_pipeline_result *result, nc_error *err);
nc_status nc_pipeline_finish(nc_net *net, const nc_pipeline_options *opts, nc_pipeline_result *result,
                             nc_error *err);

/* One fine-tuning stage on the converted `net` (IF neurons; the QCFS stage
 * trains them as QCFS with λ = θ, which is what they become again in QCFS
 * mode): opts->train with mode = stage and the stage's epochs, on `train`
 * (the TRAIN split; the last opts->train.val_count images are held out to
 * keep the best epoch).  Zero epochs: nothing happens, *result is zeroed.
 * On cancel or error the net is left as it was before the stage. */
nc_status nc_pipeline_finetune(nc_net *net, nc_train_mode stage, const nc_dataset *train,
                               const nc_pipeline_options *opts, nc_train_result *result, nc_error *err);

/* A project holding `net` (taken: the project owns it afterwards), with the
 * source model's path and SHA-256, the preprocessing, the calibration settings
 * and per-layer statistics (max and percentiles per channel), and the
 * options that NIR cannot say, as metadata. */
nc_status nc_pipeline_make_project(nc_net *net, const char *source_path, const nc_preprocess *pp,
                                   const nc_pipeline_options *opts, const nc_pipeline_result *result,
                                   nc_project **out, nc_error *err);

#endif
