/* nc_ranks.h — work spread over the devices of one host: one rank per device,
 * one thread per rank, in one process.
 *
 * Threads, not processes: an engine or a trainer backend is an object of this
 * process, so a rank is simply a thread that owns its own engine (or trainer)
 * on its own device, and the results meet in memory (sim/nc_shard.h) or
 * through gradient sums (sim/nc_allreduce.h) without any file or socket.
 *
 * The ranks' threads live as long as the pool: rank 0 is the caller's thread,
 * ranks 1 … R − 1 are started once, choose their device once (the engine's
 * bind_device hook, sim/nc_engine_registry.h; nothing for the CPU engines,
 * whose "ranks" are plain threads) and are woken for each job. */
#ifndef NC_RANKS_H
#define NC_RANKS_H

#include "../core/nc_status.h"

#define NC_RANKS_MAX 16

struct nc_engine_settings;

typedef struct nc_rank_pool nc_rank_pool;

/* One rank's part of a job, on that rank's thread. */
typedef nc_status (*nc_rank_fn)(void *user, int rank, nc_error *err);

/* A pool of `ranks` ranks (1 … NC_RANKS_MAX) for engine `engine` (NULL:
 * "cpu"), each thread bound to its device.  Fails when a thread cannot be
 * started or a device cannot be chosen (naming the rank). */
nc_status nc_rank_pool_new(const char *engine, int ranks, nc_rank_pool **out, nc_error *err);
void nc_rank_pool_free(nc_rank_pool *p); /* NULL is a no-op */
int nc_rank_pool_size(const nc_rank_pool *p);

/* Runs fn(user, r) on every rank r at once and returns when all are done:
 * NC_OK, or the failure of the lowest failing rank (its message prefixed
 * with the rank when there are several). */
nc_status nc_rank_pool_run(nc_rank_pool *p, nc_rank_fn fn, void *user, nc_error *err);

/* The ranks a job on `engine` uses: `requested` when > 0 (programs and tests;
 * on an engine without devices the ranks are CPU threads), else the engine's
 * "gpus" option from `settings` ("N" or "all"; 1 for an engine without it).
 * Checked against the devices the engine finds: asking for more GPUs than
 * the machine has, or for several without NCCL, fails with what to do. */
nc_status nc_ranks_for(const char *engine, const struct nc_engine_settings *settings, int requested, int *ranks,
                       nc_error *err);

/* Batch b of a run whose batches are dealt round-robin goes to rank b % R;
 * this is how many of `batches` rank r gets. */
int64_t nc_rank_batches(int64_t batches, int ranks, int rank);

/* Images [*first, *first + *count) of rank r when n images are split into R
 * contiguous shards whose sizes differ by at most one (the first n % R
 * shards get one more). */
void nc_rank_shard(int64_t n, int ranks, int rank, int64_t *first, int64_t *count);

#endif
