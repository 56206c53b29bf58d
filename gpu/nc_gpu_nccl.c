/* nc_gpu_nccl.c — gradient sums across the GPUs of one host through NCCL
 * (sim/nc_allreduce.h, "nccl"); compiled only where meson found NCCL.
 *
 * One communicator and one stream per rank, made by the rank's own thread
 * (ncclCommInitRank with one unique id: the ranks' threads join together).
 * A bucket is one NCCL group of in-place ncclAllReduce(sum) calls on the
 * rank's stream.  The trainer backend works on a stream of its own, which
 * this file cannot see, so a sum first waits for the backend's queue
 * (sync): the gradients in the bucket are then final, and the backward
 * pass of the earlier nodes runs on the backend's stream while NCCL sums on
 * this one (the two touch different buffers).  wait() — before the
 * optimiser step — waits for this rank's sums, polling so that a rank that
 * failed (abort, or NCCL's asynchronous error) does not leave the others
 * hanging: their communicators are aborted instead. */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../sim/nc_allreduce.h"
#include "../sim/nc_ranks.h"
#include "nc_gpu_nccl.h"

typedef struct nccl_rank {
    ncclComm_t comm;
    cudaStream_t stream;
    int device;
} nccl_rank;

typedef struct nccl_reduce {
    int ranks;
    ncclUniqueId id;
    nccl_rank r[NC_RANKS_MAX];
    volatile int aborted;
} nccl_reduce;

static nc_status nccl_failed(nc_error *err, const char *call, ncclResult_t res)
{
    return nc_fail(err, NC_ERR_DEVICE, "%s: %s", call, ncclGetErrorString(res));
}

static nc_status nccl_join(nc_allreduce *a, int rank, nc_error *err)
{
    nccl_reduce *c = a->impl;
    nccl_rank *me = &c->r[rank];
    me->device = nc_gpu_thread_device();
    int current = -1;
    cudaGetDevice(&current);
    if (current != me->device) /* the trainer made on this thread moved it to another GPU */
        return nc_fail(err, NC_ERR_INTERNAL,
                       "rank %d was bound to GPU %d but its trainer runs on GPU %d: the engine and the trainer "
                       "backend must choose nc_gpu_thread_device() (gpu/nc_gpu_nccl.h)", rank, me->device, current);
    cudaError_t e = cudaStreamCreateWithFlags(&me->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess)
        return nc_fail(err, NC_ERR_DEVICE, "GPU %d: cudaStreamCreate: %s", me->device, cudaGetErrorString(e));
    ncclResult_t res = ncclCommInitRank(&me->comm, c->ranks, c->id, rank);
    if (res != ncclSuccess) {
        me->comm = NULL;
        return nccl_failed(err, "ncclCommInitRank", res);
    }
    return NC_OK;
}

static nc_status nccl_sum(nc_allreduce *a, int rank, nc_train_backend *be, float *const *bufs, const int64_t *counts,
                          int n, nc_error *err)
{
    nccl_reduce *c = a->impl;
    nccl_rank *me = &c->r[rank];
    if (c->aborted)
        return nc_fail(err, NC_ERR_CANCELLED, "gradient sum abandoned: another GPU's rank failed");
    nc_status s = be->ops->sync(be, err); /* the bucket's gradients are final */
    if (s != NC_OK)
        return s;
    ncclResult_t res = ncclGroupStart();
    for (int k = 0; res == ncclSuccess && k < n; k++)
        res = ncclAllReduce(bufs[k], bufs[k], (size_t)counts[k], ncclFloat, ncclSum, me->comm, me->stream);
    ncclResult_t end = ncclGroupEnd();
    if (res != ncclSuccess || end != ncclSuccess)
        return nccl_failed(err, "ncclAllReduce", res != ncclSuccess ? res : end);
    return NC_OK;
}

static nc_status nccl_wait(nc_allreduce *a, int rank, nc_error *err)
{
    nccl_reduce *c = a->impl;
    nccl_rank *me = &c->r[rank];
    for (;;) {
        cudaError_t e = cudaStreamQuery(me->stream);
        if (e == cudaSuccess)
            return NC_OK;
        if (e != cudaErrorNotReady)
            return nc_fail(err, NC_ERR_DEVICE, "GPU %d: gradient sum: %s", me->device, cudaGetErrorString(e));
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(me->comm, &async);
        if (c->aborted || async != ncclSuccess) {
            ncclCommAbort(me->comm); /* frees the kernels waiting for a rank that is gone */
            me->comm = NULL;
            return async != ncclSuccess ? nccl_failed(err, "NCCL", async)
                                        : nc_fail(err, NC_ERR_CANCELLED, "gradient sum abandoned: another GPU's rank "
                                                                         "failed");
        }
        usleep(20);
    }
}

static void nccl_abort(nc_allreduce *a)
{
    nccl_reduce *c = a->impl;
    c->aborted = 1;
}

static void nccl_destroy(nc_allreduce *a)
{
    nccl_reduce *c = a->impl;
    int current = 0;
    cudaGetDevice(&current);
    for (int r = 0; r < c->ranks; r++) {
        nccl_rank *me = &c->r[r];
        cudaSetDevice(me->device);
        if (me->comm && c->aborted)
            ncclCommAbort(me->comm);
        else if (me->comm)
            ncclCommDestroy(me->comm);
        if (me->stream)
            cudaStreamDestroy(me->stream);
    }
    cudaSetDevice(current);
    free(a); /* the nccl_allreduce it starts */
}

/* The interface and its state in one allocation. */
typedef struct nccl_allreduce {
    nc_allreduce base;
    nccl_reduce state;
} nccl_allreduce;

static const nc_allreduce_ops nccl_ops = {
    .name = "nccl", .join = nccl_join, .sum = nccl_sum, .wait = nccl_wait, .abort = nccl_abort,
    .destroy = nccl_destroy,
};

nc_status nc_gpu_nccl_new(int ranks, nc_allreduce **out, nc_error *err)
{
    *out = NULL;
    if (ranks < 1 || ranks > NC_RANKS_MAX)
        return nc_fail(err, NC_ERR_ARGUMENT, "NCCL over %d GPUs: 1 to %d are possible", ranks, NC_RANKS_MAX);
    /* multicast (NVLink SHARP) stays off on these machines: set before NCCL
     * reads its environment, which it does once, at its first call */
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    nccl_allreduce *all = calloc(1, sizeof *all);
    if (!all)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for the NCCL communicators");
    ncclResult_t res = ncclGetUniqueId(&all->state.id);
    if (res != ncclSuccess) {
        free(all);
        return nccl_failed(err, "ncclGetUniqueId", res);
    }
    all->state.ranks = ranks;
    all->base = (nc_allreduce){.ops = &nccl_ops, .ranks = ranks, .impl = &all->state};
    *out = &all->base;
    return NC_OK;
}
