/* nc_allreduce.h — gradient sums across the ranks of a data-parallel run.
 *
 * Each rank (one thread, one device) trains the same network on its share of
 * every batch (sim/nc_train_dp.h); after each node's backward pass its
 * parameter gradients join a bucket, and a full bucket is summed across the
 * ranks while the backward pass goes on (as PyTorch DDP does).  The sum is
 * elementwise and in place: afterwards every rank's buffers hold Σ over the
 * ranks, the same values on every rank.
 *
 * Two implementations behind one small vtable:
 *   "cpu"  (nc_allreduce.c) ranks are threads of this process whose buffers
 *          are host memory (the CPU trainer backend); each element is summed
 *          in double in rank order 0, 1, …, R − 1, so the result does not
 *          depend on timing: deterministic run to run.  The tests use it.
 *   "nccl" (gpu/nc_gpu_nccl.c) one NCCL communicator per GPU, created by
 *          the GPU engine's entry in the engine table (allreduce_new).
 *
 * Every rank calls the functions with the same buckets in the same order
 * (collective calls).  A rank that fails calls abort, which releases the
 * others: their pending and later calls fail instead of waiting forever. */
#ifndef NC_ALLREDUCE_H
#define NC_ALLREDUCE_H

#include "../core/nc_status.h"
#include "nc_train_backend.h"

#define NC_ALLREDUCE_MAX_BUFFERS 64 /* buffers of one bucket */

typedef struct nc_allreduce nc_allreduce;

typedef struct nc_allreduce_ops {
    const char *name; /* "cpu", "nccl" */
    /* Rank `rank` joins, on its own thread (after the thread chose its
     * device); every rank must join before the first sum. */
    nc_status (*join)(nc_allreduce *a, int rank, nc_error *err);
    /* Starts summing one bucket of n buffers (backend memory of `be`,
     * counts[k] floats each).  The gradients in them must be final: the
     * implementation orders the sum after the work queued on `be`.  It may
     * return before the sum is done; wait() finishes it. */
    nc_status (*sum)(nc_allreduce *a, int rank, nc_train_backend *be, float *const *bufs, const int64_t *counts,
                     int n, nc_error *err);
    /* Returns when every sum this rank started is done. */
    nc_status (*wait)(nc_allreduce *a, int rank, nc_error *err);
    /* A rank failed: every call of every rank fails from now on. */
    void (*abort)(nc_allreduce *a);
    void (*destroy)(nc_allreduce *a);
} nc_allreduce_ops;

struct nc_allreduce {
    const nc_allreduce_ops *ops;
    int ranks;
    void *impl;
};

/* The in-process implementation for `ranks` threads (1 … NC_RANKS_MAX). */
nc_status nc_allreduce_cpu_new(int ranks, nc_allreduce **out, nc_error *err);
/* The one the engine `engine` names in the engine table (the GPU's: NCCL),
 * else the in-process one.  Fails with the reason when the engine's device
 * has none (a build without NCCL). */
nc_status nc_allreduce_new(const char *engine, int ranks, nc_allreduce **out, nc_error *err);
void nc_allreduce_free(nc_allreduce *a); /* NULL is a no-op */

#endif
