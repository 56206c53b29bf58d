/* nc_simulate.h — the SNN simulation driver: runs a converted network over
 * a dataset on an engine and fills an nc_record (core/nc_record.h).
 *
 * Per batch of images:
 *   1. ANN forward  (NC_MODE_ANN)  with the record's ANN observer: every IF
 *      node's activation a (for the total error) and the ANN accuracy;
 *   2. QCFS forward (NC_MODE_QCFS): the QCFS-ANN accuracy;
 *   3. SNN forward  (NC_MODE_SNN, T steps) with the record's SNN observers;
 *   4. nc_record_end_batch: accuracy after every step, rates, errors, ...
 * Memory is bounded by the batch: nothing of size [T, N, ...] outlives a
 * batch, and the record keeps only per-layer sums plus the small raster and
 * traces.
 *
 * Progress: stage "simulate", done = images finished, total = images in the
 * run, value = SNN accuracy at step T so far.  It is also called while a
 * batch runs (through the engine), so Cancel answers quickly; a non-zero
 * return stops the run with NC_ERR_CANCELLED, and the record then holds
 * every batch finished before (valid, just shorter).
 *
 * Poisson encoding: batch b starting at sample `first` uses the seed
 * splitmix64(seed + first), so a run is reproducible for a given seed and
 * batch size. */
#ifndef NC_SIMULATE_H
#define NC_SIMULATE_H

#include "../core/nc_dataset.h"
#include "../core/nc_record.h"
#include "nc_engine.h"

#define NC_SIMULATE_DEFAULT_BATCH 32

typedef struct nc_simulate_options {
    int T;                  /* SNN steps, ≥ 1                                  */
    nc_encoding encoding;   /* input encoding in SNN mode                      */
    uint64_t seed;          /* Poisson encoding                                */
    int64_t limit;          /* images to simulate; ≤ 0: the whole dataset      */
    int batch_size;         /* ≤ 0: NC_SIMULATE_DEFAULT_BATCH                  */
    nc_record_spec record;  /* raster and trace choice (0 = defaults)          */
    int skip_ann;           /* 1: no ANN pass (no ANN accuracy, no total error) */
    int skip_qcfs;          /* 1: no QCFS pass (no QCFS accuracy)              */
} nc_simulate_options;

/* Simulates `net` on `engine` (loaded with net here unless it already is)
 * over the first `limit` images of `ds`.  *out receives a new record, also
 * when the run was cancelled (NC_ERR_CANCELLED) or failed after some batches;
 * it is NULL only when no record could be made.  progress may be NULL. */
nc_status nc_simulate(nc_engine *engine, const nc_net *net, const nc_dataset *ds,
                      const nc_simulate_options *opts, nc_progress_fn progress, void *progress_user,
                      nc_record **out, nc_error *err);

/* The same into a record the caller made with nc_record_new(net, opts->T,
 * ...), e.g. so that a GUI can read it from the progress callback (which runs
 * on the simulating thread, between batches or inside one: read only the
 * totals of finished batches there). */
nc_status nc_simulate_into(nc_engine *engine, const nc_dataset *ds, const nc_simulate_options *opts,
                           nc_progress_fn progress, void *progress_user, nc_record *rec, nc_error *err);

/* One rank's part of a run split over ranks (sim/nc_shard.h): of the run's
 * batches it simulates those numbered rank, rank + ranks, … into `rec` (its
 * own record, opened at each batch's first sample), and hands each finished
 * batch to commit, which joins it to the run's record in run order
 * (nc_record_end_batch_into).  progress sees this rank's batches only. */
typedef struct nc_simulate_shard {
    int rank, ranks;
    nc_status (*commit)(void *user, nc_record *rec, const int32_t *labels, const float *out, int64_t classes,
                        nc_error *err);
    void *user;
} nc_simulate_shard;

nc_status nc_simulate_shard_into(nc_engine *engine, const nc_dataset *ds, const nc_simulate_options *opts,
                                 const nc_simulate_shard *shard, nc_progress_fn progress, void *progress_user,
                                 nc_record *rec, nc_error *err);

#endif
