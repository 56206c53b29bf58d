/* nc_ranks.c — the rank pool and the rank arithmetic (see nc_ranks.h). */
#include "nc_ranks.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "nc_engine_registry.h"
#include "nc_workers.h"

typedef struct rank_thread {
    struct nc_rank_pool *pool;
    int rank;
} rank_thread;

struct nc_rank_pool {
    int ranks, started;
    const nc_engine_info *info;
    pthread_t threads[NC_RANKS_MAX];
    rank_thread args[NC_RANKS_MAX];
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    unsigned long generation; /* one per job                    */
    int pending, bound, quit;   /* ranks still working / bound     */
    nc_rank_fn fn;
    void *user;
    nc_status status[NC_RANKS_MAX];
    nc_error errs[NC_RANKS_MAX];
};

/* The calling thread takes device `rank` (engines with devices only). */
static nc_status bind_rank(const nc_engine_info *info, int rank, nc_error *err)
{
    if (!info || !info->bind_device)
        return NC_OK;
    nc_status s = info->bind_device(rank, err);
    if (s != NC_OK)
        nc_error_prefix(err, "%s", info->name);
    return s;
}

static void *rank_main(void *arg)
{
    rank_thread *t = arg;
    nc_rank_pool *p = t->pool;
    nc_status bound = bind_rank(p->info, t->rank, &p->errs[t->rank]);
    pthread_mutex_lock(&p->mu);
    p->status[t->rank] = bound;
    p->bound++;
    pthread_cond_broadcast(&p->done);
    unsigned long seen = 0;
    for (;;) {
        while (!p->quit && p->generation == seen)
            pthread_cond_wait(&p->go, &p->mu);
        if (p->quit)
            break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        nc_status s = bound == NC_OK ? p->fn(p->user, t->rank, &p->errs[t->rank]) : bound;
        pthread_mutex_lock(&p->mu);
        p->status[t->rank] = s;
        if (--p->pending == 0)
            pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

nc_status nc_rank_pool_new(const char *engine, int ranks, nc_rank_pool **out, nc_error *err)
{
    *out = NULL;
    if (ranks < 1 || ranks > NC_RANKS_MAX)
        return nc_fail(err, NC_ERR_ARGUMENT, "%d ranks: a job spreads over 1 to %d devices", ranks, NC_RANKS_MAX);
    nc_rank_pool *p = calloc(1, sizeof *p);
    if (!p)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for the ranks");
    p->ranks = ranks;
    p->info = nc_engine_find(engine ? engine : "cpu");
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    nc_status s = bind_rank(p->info, 0, err);
    for (int r = 1; s == NC_OK && r < ranks; r++) {
        p->args[r] = (rank_thread){p, r};
        if (pthread_create(&p->threads[r], NULL, rank_main, &p->args[r]) != 0)
            s = nc_fail(err, NC_ERR_MEMORY, "cannot start the thread of rank %d of %d", r, ranks);
        else
            p->started = r;
    }
    pthread_mutex_lock(&p->mu); /* every thread has chosen its device */
    while (p->bound < p->started)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    for (int r = 1; s == NC_OK && r <= p->started; r++)
        if (p->status[r] != NC_OK)
            s = nc_fail(err, p->status[r], "rank %d: %s", r, p->errs[r].message);
    if (s != NC_OK) {
        nc_rank_pool_free(p);
        return s;
    }
    *out = p;
    return NC_OK;
}

void nc_rank_pool_free(nc_rank_pool *p)
{
    if (!p)
        return;
    nc_threads_quit(&p->mu, &p->go, &p->done, &p->quit, p->threads + 1, p->started); /* rank 0 is the caller */
    free(p);
}

int nc_rank_pool_size(const nc_rank_pool *p) { return p ? p->ranks : 1; }

nc_status nc_rank_pool_run(nc_rank_pool *p, nc_rank_fn fn, void *user, nc_error *err)
{
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->user = user;
    p->pending = p->ranks - 1;
    p->generation++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    p->status[0] = fn(user, 0, &p->errs[0]);
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    /* the lowest rank that failed for its own reason, not because another
     * rank's failure released it (NC_ERR_CANCELLED) */
    int first = -1;
    for (int r = 0; r < p->ranks; r++)
        if (p->status[r] != NC_OK && (first < 0 || (p->status[first] == NC_ERR_CANCELLED &&
                                                    p->status[r] != NC_ERR_CANCELLED)))
            first = r;
    if (first < 0)
        return NC_OK;
    if (p->ranks == 1)
        return nc_fail(err, p->status[first], "%s", p->errs[first].message);
    return nc_fail(err, p->status[first], "rank %d of %d: %s", first, p->ranks, p->errs[first].message);
}

/* "N" (1 … NC_RANKS_MAX) or "all" (the devices found). */
static nc_status parse_gpus(const char *text, int found, int *out, nc_error *err)
{
    if (strcmp(text, "all") == 0) {
        *out = found > 0 ? found : 1;
        return NC_OK;
    }
    char *end = NULL;
    long v = strtol(text, &end, 10);
    if (!*text || *end || v < 1 || v > NC_RANKS_MAX)
        return nc_fail(err, NC_ERR_ARGUMENT, "--gpus '%s': give a number of GPUs from 1 to %d, or 'all'", text,
                       NC_RANKS_MAX);
    *out = (int)v;
    return NC_OK;
}

/* The engine's "gpus" value, or 1 when it has no such option. */
static nc_status gpus_option(const nc_engine_info *info, const nc_engine_settings *settings, int found, int *out,
                             nc_error *err)
{
    *out = 1;
    const nc_engine_option *o = nc_engine_option_find(info, "gpus");
    char why[256] = "";
    for (int k = 0; !o && settings && k < settings->n; k++) {
        if (strcmp(settings->key[k], "gpus") != 0)
            continue;
        if (info->available && !info->available(why, sizeof why)) /* a build or a machine without GPUs */
            return nc_fail(err, NC_ERR_UNSUPPORTED, "--gpus %s: the %s engine cannot run here: %s",
                           settings->value[k], info->name, why);
        return nc_fail(err, NC_ERR_ARGUMENT, "--gpus %s: the %s engine runs on this machine's cores (--threads); "
                       "several GPUs are for --engine gpu", settings->value[k], info->name);
    }
    if (!o)
        return NC_OK;
    nc_engine_values values;
    nc_status s = nc_engine_resolve(info, settings, &values, err);
    if (s != NC_OK)
        return s;
    return parse_gpus(values.text[o - info->options], found, out, err);
}

nc_status nc_ranks_for(const char *engine, const nc_engine_settings *settings, int requested, int *ranks,
                       nc_error *err)
{
    const char *name = engine ? engine : "cpu";
    const nc_engine_info *info = nc_engine_find(name);
    *ranks = 1;
    if (!info)
        return nc_fail(err, NC_ERR_ARGUMENT, "unknown engine '%s'", name);
    int found = info->device_count ? info->device_count() : 0;
    nc_status s = requested > 0 ? NC_OK : gpus_option(info, settings, found, ranks, err);
    if (s != NC_OK)
        return s;
    if (requested > 0)
        *ranks = requested;
    if (*ranks > NC_RANKS_MAX)
        return nc_fail(err, NC_ERR_ARGUMENT, "%d ranks: a job spreads over 1 to %d devices", *ranks, NC_RANKS_MAX);
    if (*ranks == 1 || !info->device_count)
        return NC_OK;
    char why[256] = "";
    if (*ranks > found && info->available && !info->available(why, sizeof why))
        return nc_fail(err, NC_ERR_UNSUPPORTED, "--gpus %d: the %s engine cannot run here: %s", *ranks, name, why);
    if (*ranks > found)
        return nc_fail(err, NC_ERR_UNSUPPORTED,
                       "--gpus %d: this machine has %d GPU%s that the %s engine can use; use --gpus %d (or 'all'), "
                       "or a machine with %d GPUs",
                       *ranks, found, found == 1 ? "" : "s", name, found > 0 ? found : 1, *ranks);
    if (!info->allreduce_new)
        return nc_fail(err, NC_ERR_UNSUPPORTED,
                       "--gpus %d: several GPUs need NCCL, which this build did not find (meson looks for nccl.h "
                       "and libnccl in the CUDA toolkit); rebuild with NCCL installed, or use --gpus 1",
                       *ranks);
    return NC_OK;
}

int64_t nc_rank_batches(int64_t batches, int ranks, int rank)
{
    return batches / ranks + (rank < batches % ranks ? 1 : 0);
}

void nc_rank_shard(int64_t n, int ranks, int rank, int64_t *first, int64_t *count)
{
    int64_t base = n / ranks, extra = n % ranks;
    *count = base + (rank < extra ? 1 : 0);
    *first = (int64_t)rank * base + (rank < extra ? rank : extra);
}
