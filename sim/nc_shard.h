/* nc_shard.h — measurements spread over ranks (devices), merged into the
 * result one rank gives.
 *
 * The test set's batches are dealt round-robin (batch b to rank b % R, every
 * rank a near-equal share, the same batch boundaries as one rank), each rank
 * runs its batches on its own engine, and the results are merged:
 *   simulate : each finished batch joins the run's record in run order
 *              (nc_record_end_batch_into): accuracy by step, rates, errors
 *              per layer, raster and traces come out bit for bit as one
 *              rank makes them, for any R and any engine;
 *   evaluate : correct answers and images are summed (integers).
 * Progress is the run's (images finished in run order); Cancel stops every
 * rank at its next batch.  The engines of ranks 1 … R − 1 are made on their
 * ranks' threads (nc_shard_engines_new), so that each uses its own device;
 * rank 0's is the caller's. */
#ifndef NC_SHARD_H
#define NC_SHARD_H

#include "nc_evaluate.h"
#include "nc_ranks.h"
#include "nc_simulate.h"

struct nc_engine_settings;

/* One engine per rank: engines[0] = rank0 (borrowed), the others made with
 * nc_engine_new_with(name, settings) on their threads (threads: the CPU
 * engine's, split between the ranks when 0). */
nc_status nc_shard_engines_new(nc_rank_pool *pool, const char *name, const struct nc_engine_settings *settings,
                               int threads, nc_engine *rank0, nc_engine **engines, nc_error *err);
/* Loads `net` into engines 1 … R − 1 on their threads (engines[0] is the
 * caller's to load). */
nc_status nc_shard_engines_load(nc_rank_pool *pool, nc_engine *const *engines, const nc_net *net, nc_error *err);
/* Frees engines 1 … R − 1 on their threads. */
void nc_shard_engines_free(nc_rank_pool *pool, nc_engine **engines);

/* nc_simulate_into over the pool's ranks (engines[r] for rank r; each loads
 * the record's net) into `rec`. */
nc_status nc_simulate_sharded(nc_rank_pool *pool, nc_engine *const *engines, const nc_dataset *ds,
                              const nc_simulate_options *opts, nc_progress_fn progress, void *progress_user,
                              nc_record *rec, nc_error *err);

/* nc_evaluate over the pool's ranks (each engine already holds the net);
 * seconds and images/s are the wall time of the whole. */
nc_status nc_evaluate_sharded(nc_rank_pool *pool, nc_engine *const *engines, const nc_dataset *ds, int batch,
                              nc_mode mode, nc_progress_fn progress, void *progress_user, nc_eval_result *result,
                              nc_error *err);

#endif
