/* nc_allreduce.c — the in-process gradient sum for ranks that are threads
 * (see nc_allreduce.h), and the choice of implementation.
 *
 * A sum is a collective call: every rank posts its bucket, then each rank
 * adds up one slice of the elements over all ranks' buffers (in rank order,
 * in double) and writes the total into every rank's buffer at that slice, so
 * no two threads touch the same element, and the total of an element does
 * not depend on which thread computed it. */
#include "nc_allreduce.h"

#include <pthread.h>
#include <stdlib.h>

#include "nc_engine_registry.h"
#include "nc_ranks.h"

typedef struct posted {
    float *const *bufs;
    const int64_t *counts;
    int n;
} posted;

typedef struct cpu_reduce {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int ranks, arrived, aborted;
    unsigned long phase;
    posted post[NC_RANKS_MAX];
} cpu_reduce;

/* Waits until every rank arrives; 0, or −1 once a rank aborted. */
static int barrier(cpu_reduce *c)
{
    pthread_mutex_lock(&c->mu);
    unsigned long phase = c->phase;
    if (++c->arrived == c->ranks) {
        c->arrived = 0;
        c->phase++;
        pthread_cond_broadcast(&c->cv);
    }
    while (!c->aborted && c->phase == phase)
        pthread_cond_wait(&c->cv, &c->mu);
    int failed = c->aborted;
    pthread_mutex_unlock(&c->mu);
    return failed ? -1 : 0;
}

static nc_status aborted(nc_error *err)
{
    return nc_fail(err, NC_ERR_CANCELLED, "gradient sum abandoned: another rank failed");
}

static nc_status cpu_join(nc_allreduce *a, int rank, nc_error *err)
{
    (void)a, (void)rank, (void)err;
    return NC_OK;
}

/* Rank `rank`'s slice of buffer k: every rank's values summed in rank order. */
static void sum_slice(cpu_reduce *c, int rank, int k)
{
    int64_t first, count;
    nc_rank_shard(c->post[0].counts[k], c->ranks, rank, &first, &count);
    for (int64_t j = first; j < first + count; j++) {
        double total = 0;
        for (int r = 0; r < c->ranks; r++)
            total += c->post[r].bufs[k][j];
        for (int r = 0; r < c->ranks; r++)
            c->post[r].bufs[k][j] = (float)total;
    }
}

static nc_status cpu_sum(nc_allreduce *a, int rank, nc_train_backend *be, float *const *bufs, const int64_t *counts,
                         int n, nc_error *err)
{
    cpu_reduce *c = a->impl;
    nc_status s = be->ops->sync(be, err); /* the gradients are final */
    if (s != NC_OK) {
        a->ops->abort(a);
        return s;
    }
    c->post[rank] = (posted){bufs, counts, n};
    if (barrier(c) != 0)
        return aborted(err);
    for (int r = 1; r < c->ranks; r++)
        if (c->post[r].n != n) {
            a->ops->abort(a);
            return nc_fail(err, NC_ERR_INTERNAL, "gradient sum: rank %d posted %d buffers, rank 0 %d", r,
                           c->post[r].n, n);
        }
    for (int k = 0; k < n; k++)
        sum_slice(c, rank, k);
    return barrier(c) == 0 ? NC_OK : aborted(err); /* nobody reads before all wrote */
}

static nc_status cpu_wait(nc_allreduce *a, int rank, nc_error *err)
{
    (void)rank;
    cpu_reduce *c = a->impl;
    return c->aborted ? aborted(err) : NC_OK;
}

static void cpu_abort(nc_allreduce *a)
{
    cpu_reduce *c = a->impl;
    pthread_mutex_lock(&c->mu);
    c->aborted = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* The interface and its state in one allocation. */
typedef struct cpu_allreduce {
    nc_allreduce base;
    cpu_reduce state;
} cpu_allreduce;

static void cpu_destroy(nc_allreduce *a)
{
    cpu_reduce *c = a->impl;
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(a); /* the cpu_allreduce it starts */
}

static const nc_allreduce_ops cpu_ops = {
    .name = "cpu", .join = cpu_join, .sum = cpu_sum, .wait = cpu_wait, .abort = cpu_abort, .destroy = cpu_destroy,
};

nc_status nc_allreduce_cpu_new(int ranks, nc_allreduce **out, nc_error *err)
{
    *out = NULL;
    if (ranks < 1 || ranks > NC_RANKS_MAX)
        return nc_fail(err, NC_ERR_ARGUMENT, "gradient sums over %d ranks: 1 to %d are possible", ranks,
                       NC_RANKS_MAX);
    cpu_allreduce *all = calloc(1, sizeof *all);
    if (!all)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for the gradient sums");
    cpu_reduce *c = &all->state;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    c->ranks = ranks;
    all->base = (nc_allreduce){.ops = &cpu_ops, .ranks = ranks, .impl = c};
    *out = &all->base;
    return NC_OK;
}

nc_status nc_allreduce_new(const char *engine, int ranks, nc_allreduce **out, nc_error *err)
{
    *out = NULL;
    const nc_engine_info *info = nc_engine_find(engine ? engine : "cpu");
    if (!info || !info->device_count)
        return nc_allreduce_cpu_new(ranks, out, err);
    if (!info->allreduce_new)
        return nc_fail(err, NC_ERR_UNSUPPORTED, "fine-tuning on %d GPUs needs NCCL, which this build did not find; "
                       "rebuild with NCCL installed, or use --gpus 1", ranks);
    return info->allreduce_new(ranks, out, err);
}

void nc_allreduce_free(nc_allreduce *a)
{
    if (a)
        a->ops->destroy(a);
}
