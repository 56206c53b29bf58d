/* nc_shard.c — simulations and evaluations over ranks, merged (see
 * nc_shard.h).
 *
 * Merging a simulation in run order: a rank that finished batch b waits
 * until batch b − 1 has joined the run's record, joins b, and lets the next
 * one in.  Batches are dealt round-robin, so the ranks work on neighbouring
 * batches and the wait is short; a failed or cancelled rank wakes the
 * others, which then stop. */
#include "nc_shard.h"

#include <pthread.h>
#include <stdlib.h>

#include "nc_engine_registry.h"
#include "nc_workers.h"

/* ---- engines ------------------------------------------------------------------ */

typedef struct engines_job {
    const char *name;
    const nc_engine_settings *settings;
    int threads;
    nc_engine **engines;
} engines_job;

static nc_status make_engine(void *user, int r, nc_error *err)
{
    engines_job *j = user;
    if (r == 0)
        return NC_OK;
    nc_status s = nc_engine_new_with(j->name, j->settings, &j->engines[r], err);
    if (s == NC_OK)
        j->engines[r]->threads = j->threads;
    return s;
}

static nc_status free_engine(void *user, int r, nc_error *err)
{
    (void)err;
    engines_job *j = user;
    if (r > 0) {
        nc_engine_free(j->engines[r]);
        j->engines[r] = NULL;
    }
    return NC_OK;
}

nc_status nc_shard_engines_new(nc_rank_pool *pool, const char *name, const nc_engine_settings *settings,
                               int threads, nc_engine *rank0, nc_engine **engines, nc_error *err)
{
    int R = nc_rank_pool_size(pool);
    engines[0] = rank0;
    /* CPU ranks share the cores: each gets its part unless told */
    int per_rank = threads > 0 ? threads : nc_workers_count(0) / R;
    engines_job j = {name, settings, per_rank > 0 ? per_rank : 1, engines};
    nc_status s = nc_rank_pool_run(pool, make_engine, &j, err);
    if (s != NC_OK)
        nc_shard_engines_free(pool, engines);
    return s;
}

typedef struct load_job {
    nc_engine *const *engines;
    const nc_net *net;
} load_job;

static nc_status load_engine(void *user, int r, nc_error *err)
{
    load_job *j = user;
    return r == 0 || j->engines[r]->net == j->net ? NC_OK : nc_engine_load(j->engines[r], j->net, err);
}

nc_status nc_shard_engines_load(nc_rank_pool *pool, nc_engine *const *engines, const nc_net *net, nc_error *err)
{
    load_job j = {engines, net};
    return nc_rank_pool_run(pool, load_engine, &j, err);
}

void nc_shard_engines_free(nc_rank_pool *pool, nc_engine **engines)
{
    engines_job j = {.engines = engines};
    nc_error ignored = {0};
    nc_rank_pool_run(pool, free_engine, &j, &ignored);
}

/* ---- simulation ------------------------------------------------------------------ */

typedef struct sim_share {
    nc_rank_pool *pool;
    nc_engine *const *engines;
    const nc_dataset *ds;
    const nc_simulate_options *opts;
    nc_progress_fn progress;
    void *progress_user;
    nc_record *total;
    int64_t images;          /* in the run                              */
    pthread_mutex_t mu;
    pthread_cond_t turn;
    int stopped;             /* a rank failed, or the user cancelled     */
    int cancelled;
} sim_share;

/* The engines' progress inside a rank's batch: only Cancel matters there. */
static int rank_progress(void *user, const nc_progress *p)
{
    (void)p;
    sim_share *sh = user;
    return sh->stopped;
}

static void stop_all(sim_share *sh)
{
    pthread_mutex_lock(&sh->mu);
    sh->stopped = 1;
    pthread_cond_broadcast(&sh->turn);
    pthread_mutex_unlock(&sh->mu);
}

/* A rank's finished batch joins the run's record when its turn comes (the
 * record's next sample is the batch's first); then the run's progress. */
static nc_status commit(void *user, nc_record *rec, const int32_t *labels, const float *out, int64_t classes,
                        nc_error *err)
{
    sim_share *sh = user;
    int64_t first = nc_record_samples(rec);
    pthread_mutex_lock(&sh->mu);
    while (!sh->stopped && nc_record_samples(sh->total) != first)
        pthread_cond_wait(&sh->turn, &sh->mu);
    nc_status s = sh->stopped ? nc_fail(err, NC_ERR_CANCELLED, "stopped: another rank failed or was cancelled")
                              : nc_record_end_batch_into(rec, sh->total, labels, out, classes, err);
    if (s == NC_OK && sh->progress) {
        int64_t done = nc_record_samples(sh->total);
        nc_progress p = {"simulate", done, sh->images, nc_record_accuracy(sh->total, nc_record_T(sh->total))};
        if (sh->progress(sh->progress_user, &p) != 0)
            sh->cancelled = sh->stopped = 1;
    }
    if (s != NC_OK)
        sh->stopped = 1;
    pthread_cond_broadcast(&sh->turn);
    pthread_mutex_unlock(&sh->mu);
    return s;
}

static nc_status simulate_rank(void *user, int r, nc_error *err)
{
    sim_share *sh = user;
    const nc_net *net = nc_record_net(sh->total);
    nc_record *rec = NULL;
    nc_status s = nc_record_new(net, sh->opts->T, nc_record_get_spec(sh->total), &rec, err);
    nc_simulate_shard shard = {.rank = r, .ranks = nc_rank_pool_size(sh->pool), .commit = commit, .user = sh};
    if (s == NC_OK)
        s = nc_simulate_shard_into(sh->engines[r], sh->ds, sh->opts, &shard, rank_progress, sh, rec, err);
    nc_record_free(rec);
    if (s != NC_OK)
        stop_all(sh);
    return s;
}

nc_status nc_simulate_sharded(nc_rank_pool *pool, nc_engine *const *engines, const nc_dataset *ds,
                              const nc_simulate_options *opts, nc_progress_fn progress, void *progress_user,
                              nc_record *rec, nc_error *err)
{
    if (!ds || !opts || !rec || ds->count < 1)
        return nc_fail(err, NC_ERR_ARGUMENT, "simulate: no dataset, options or record, or an empty dataset");
    sim_share sh = {.pool = pool, .engines = engines, .ds = ds, .opts = opts, .progress = progress,
                    .progress_user = progress_user, .total = rec};
    sh.images = opts->limit > 0 && opts->limit < ds->count ? opts->limit : ds->count;
    pthread_mutex_init(&sh.mu, NULL);
    pthread_cond_init(&sh.turn, NULL);
    nc_status s = nc_rank_pool_run(pool, simulate_rank, &sh, err);
    pthread_mutex_destroy(&sh.mu);
    pthread_cond_destroy(&sh.turn);
    if (sh.cancelled && nc_record_samples(rec) < sh.images)
        return nc_fail(err, NC_ERR_CANCELLED, "simulation cancelled after %lld of %lld images",
                       (long long)nc_record_samples(rec), (long long)sh.images);
    return sh.cancelled ? NC_OK : s;
}

/* ---- evaluation ------------------------------------------------------------------- */

typedef struct eval_share {
    nc_rank_pool *pool;
    nc_engine *const *engines;
    const nc_dataset *ds;
    int batch;
    nc_mode mode;
    nc_progress_fn progress;
    void *progress_user;
    pthread_mutex_t mu;
    int64_t done[NC_RANKS_MAX];
    double accuracy[NC_RANKS_MAX];
    nc_eval_result results[NC_RANKS_MAX];
    int stopped;
} eval_share;

typedef struct eval_rank_ctx {
    eval_share *sh;
    int rank;
} eval_rank_ctx;

/* A rank's progress joins the others' into the run's: images finished by
 * all, and their accuracy so far. */
static int eval_progress(void *user, const nc_progress *p)
{
    eval_rank_ctx *c = user;
    eval_share *sh = c->sh;
    pthread_mutex_lock(&sh->mu);
    sh->done[c->rank] = p->done;
    sh->accuracy[c->rank] = p->value;
    int64_t done = 0;
    double right = 0;
    for (int r = 0; r < nc_rank_pool_size(sh->pool); r++) {
        done += sh->done[r];
        right += sh->accuracy[r] * (double)sh->done[r];
    }
    nc_progress all = {"evaluate", done, sh->ds->count, done > 0 ? right / (double)done : 0};
    if (!sh->stopped && sh->progress && sh->progress(sh->progress_user, &all) != 0)
        sh->stopped = 1;
    int stop = sh->stopped;
    pthread_mutex_unlock(&sh->mu);
    return stop;
}

static nc_status evaluate_rank(void *user, int r, nc_error *err)
{
    eval_share *sh = user;
    eval_rank_ctx c = {sh, r};
    return nc_evaluate_dealt(sh->engines[r], sh->ds, sh->batch, sh->mode, r, nc_rank_pool_size(sh->pool),
                             eval_progress, &c, &sh->results[r], err);
}

nc_status nc_evaluate_sharded(nc_rank_pool *pool, nc_engine *const *engines, const nc_dataset *ds, int batch,
                              nc_mode mode, nc_progress_fn progress, void *progress_user, nc_eval_result *result,
                              nc_error *err)
{
    eval_share sh = {.pool = pool, .engines = engines, .ds = ds, .batch = batch, .mode = mode,
                     .progress = progress, .progress_user = progress_user};
    pthread_mutex_init(&sh.mu, NULL);
    double start = nc_now();
    nc_status s = nc_rank_pool_run(pool, evaluate_rank, &sh, err);
    pthread_mutex_destroy(&sh.mu);
    *result = (nc_eval_result){.seconds = nc_now() - start};
    for (int r = 0; r < nc_rank_pool_size(pool); r++) {
        result->images += sh.results[r].images;
        result->correct += sh.results[r].correct;
    }
    result->accuracy = result->images > 0 ? (double)result->correct / (double)result->images : 0;
    if (result->seconds > 0)
        result->images_per_second = (double)result->images / result->seconds;
    return s;
}
