/* nc_calibrate.h — the calibration step of the pipeline: runs an engine over
 * calibration images and collects the activation statistics of every neuron
 * layer (core/nc_calib.h holds the statistics and the threshold formulas).
 *
 * Typical use (the caller opens the TRAIN split; the test split stays unseen):
 *
 *   nc_convert_prepare(net, NC_MAXPOOL_PRE_SPIKE, err);
 *   nc_calibrate(engine, net, train, NULL, &stats, err);
 *   nc_calibrate_thresholds(stats, net, NC_CALIB_P99_9, 0, 8, 0.5f, &th, err);
 *   nc_convert_to_qcfs(net, th, 8, err);
 *   nc_convert_to_snn(net, NULL, err);
 */
#ifndef NC_CALIBRATE_H
#define NC_CALIBRATE_H

#include "../core/nc_calib.h"
#include "../core/nc_dataset.h"
#include "nc_engine.h"

#define NC_CALIBRATE_DEFAULT_IMAGES 2000
#define NC_CALIBRATE_DEFAULT_BATCH 100

typedef struct nc_calibrate_options {
    int64_t n_images;        /* first n images of the dataset; 0 = 2000 (all if fewer) */
    int batch_size;          /* 0 = 100                                              */
    int bins;                /* histogram bins; 0 = NC_CALIB_DEFAULT_BINS            */
    nc_progress_fn progress; /* may be NULL; stage "calibrate", done/total = images
                                over both passes; non-zero return → NC_ERR_CANCELLED */
    void *progress_user;
} nc_calibrate_options;

/* Runs `engine` in NC_MODE_ANN over the images twice (pass 1: max, pass 2:
 * histogram) with nc_calib_add as the observer, and returns the statistics
 * in *out (free with nc_calib_free).  Loads `net` into the engine first
 * (always: the net may have been rewritten since, e.g. by
 * nc_convert_prepare), so the engine holds `net` afterwards.  opts may be
 * NULL (defaults).  The dataset's images must have as many values per sample
 * as the net's input node. */
nc_status nc_calibrate(nc_engine *engine, const nc_net *net, const nc_dataset *data,
                       const nc_calibrate_options *opts, nc_calib_stats **out, nc_error *err);

/* Thresholds for `net` (the net the stats were collected on) by `method`,
 * layer-wise or per channel; T and φ are used by mmse (φ = 0.5 for v0 = θ/2).
 * Warnings about dead layers/channels are in (*out)->warnings.  Pass the
 * result to nc_convert_to_qcfs. */
nc_status nc_calibrate_thresholds(const nc_calib_stats *stats, const nc_net *net, nc_calib_method method,
                                  int per_channel, int T, float phi, nc_thresholds **out, nc_error *err);

#endif
