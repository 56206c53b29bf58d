/* nc_evaluate.h — test-set accuracy of a network in ANN or QCFS mode.
 *
 * accuracy = correct predictions / images, prediction = argmax of the output
 * (softmax would not change it).  images/s counts the forward passes only. */
#ifndef NC_EVALUATE_H
#define NC_EVALUATE_H

#include "../core/nc_dataset.h"
#include "nc_engine.h"

typedef struct nc_eval_result {
    int64_t images;
    int64_t correct;
    double accuracy;        /* correct / images                       */
    double seconds;         /* wall time of the forward passes        */
    double images_per_second;
} nc_eval_result;

/* Runs `engine` (already loaded with the net) over the whole dataset in
 * batches of `batch` images, in `mode` (NC_MODE_ANN or NC_MODE_QCFS).
 * Progress stage "evaluate" after every batch (value = accuracy so far); a
 * non-zero return cancels with NC_ERR_CANCELLED and a partial result. */
nc_status nc_evaluate(nc_engine *engine, const nc_dataset *ds, int batch, nc_mode mode,
                      nc_progress_fn progress, void *progress_user, nc_eval_result *result, nc_error *err);

/* The same over the batches numbered rank, rank + ranks, … only (one rank's
 * part of a run split over ranks, sim/nc_shard.h); progress and the result
 * count those. */
nc_status nc_evaluate_dealt(nc_engine *engine, const nc_dataset *ds, int batch, nc_mode mode, int rank, int ranks,
                            nc_progress_fn progress, void *progress_user, nc_eval_result *result, nc_error *err);

/* The SNN's accuracy after T steps (argmax of the output summed over the
 * steps, direct encoding) on images [first, first + count) of ds, for the net
 * the engine holds — e.g. a held-out slice of the training split. */
nc_status nc_evaluate_snn_range(nc_engine *engine, const nc_dataset *ds, int64_t first, int64_t count, int T,
                                int batch, double *accuracy, nc_error *err);

/* Checks that the dataset's images fit the network's input node; the message
 * names both shapes and what to do. */
nc_status nc_check_dataset_fits(const nc_net *net, const nc_dataset *ds, nc_error *err);

/* Index of the largest of n values (first on ties). */
int nc_argmax(const float *values, int64_t n);

/* Seconds since an arbitrary start, monotonic. */
double nc_now(void);

#endif
