/* nc_train_dp.c — data-parallel fine-tuning over the ranks of one host (see
 * nc_train_dp.h). */
#include "nc_train_dp.h"

#include <math.h>
#include <stdlib.h>

#include "nc_allreduce.h"
#include "nc_ranks.h"

typedef struct rank_step {
    const float *images;
    const int32_t *labels;
    int n;
    double lr;
    double loss;
    int64_t correct;
} rank_step;

struct nc_train_group {
    int ranks, max_batch;
    int64_t bucket_floats, feature;
    nc_train_options o;
    nc_rank_pool *pool;
    nc_allreduce *comm;
    nc_net *nets[NC_RANKS_MAX];   /* [0] the caller's, the others clones */
    int owned[NC_RANKS_MAX];
    nc_trainer *trainers[NC_RANKS_MAX];
    rank_step step[NC_RANKS_MAX];
    float *snapshot;              /* divergence: every rank's parameters  */
    int64_t params;               /* floats of one rank's parameters      */
};

/* On rank r's thread (its device chosen): its trainer, joined to the sums. */
static nc_status make_rank(void *user, int r, nc_error *err)
{
    nc_train_group *g = user;
    nc_status s = nc_trainer_new(g->nets[r], &g->o, g->max_batch, &g->trainers[r], err);
    if (s == NC_OK)
        s = g->comm->ops->join(g->comm, r, err);
    if (s != NC_OK) {
        g->comm->ops->abort(g->comm);
        return s;
    }
    nc_trainer_set_reducer(g->trainers[r], g->comm, r, g->bucket_floats);
    return NC_OK;
}

nc_status nc_train_group_new(nc_net *net, const nc_train_options *o, int ranks, int max_batch,
                             int64_t bucket_floats, nc_train_group **out, nc_error *err)
{
    *out = NULL;
    if (ranks < 1 || ranks > NC_RANKS_MAX || max_batch < ranks)
        return nc_fail(err, NC_ERR_ARGUMENT, "data-parallel fine-tuning over %d ranks needs 1 to %d ranks and a "
                       "batch of at least one image per rank (got %d)", ranks, NC_RANKS_MAX, max_batch);
    nc_train_group *g = calloc(1, sizeof *g);
    if (!g)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory");
    g->ranks = ranks;
    g->max_batch = (max_batch + ranks - 1) / ranks;
    g->bucket_floats = bucket_floats;
    g->o = *o;
    g->o.ranks = 1;
    g->feature = nc_node_numel(&net->nodes[net->input]);
    g->nets[0] = net;
    nc_status s = NC_OK;
    for (int r = 1; s == NC_OK && r < ranks; r++) {
        g->nets[r] = nc_net_clone(net);
        g->owned[r] = 1;
        if (!g->nets[r])
            s = nc_fail(err, NC_ERR_MEMORY, "out of memory for the network of rank %d", r);
    }
    if (s == NC_OK)
        s = nc_rank_pool_new(o->engine, ranks, &g->pool, err);
    if (s == NC_OK)
        s = nc_allreduce_new(o->engine, ranks, &g->comm, err);
    if (s == NC_OK)
        s = nc_rank_pool_run(g->pool, make_rank, g, err);
    if (s != NC_OK) {
        nc_train_group_free(g);
        return s;
    }
    *out = g;
    return NC_OK;
}

static nc_status free_rank(void *user, int r, nc_error *err)
{
    (void)err;
    nc_train_group *g = user;
    nc_trainer_free(g->trainers[r]);
    g->trainers[r] = NULL;
    return NC_OK;
}

void nc_train_group_free(nc_train_group *g)
{
    if (!g)
        return;
    nc_error ignored = {0};
    if (g->pool) /* each backend is freed on its own thread, where its device is current */
        nc_rank_pool_run(g->pool, free_rank, g, &ignored);
    nc_allreduce_free(g->comm);
    nc_rank_pool_free(g->pool);
    for (int r = 0; r < g->ranks; r++)
        if (g->owned[r])
            nc_net_free(g->nets[r]);
    free(g->snapshot);
    free(g);
}

int nc_train_group_ranks(const nc_train_group *g) { return g->ranks; }
nc_trainer *nc_train_group_trainer(nc_train_group *g, int rank) { return g->trainers[rank]; }

/* On rank r's thread: its shard's gradients (summed with the others'), then
 * the optimiser step. */
static nc_status step_rank(void *user, int r, nc_error *err)
{
    nc_train_group *g = user;
    rank_step *st = &g->step[r];
    int64_t first, count;
    nc_rank_shard(st->n, g->ranks, r, &first, &count);
    nc_trainer *tr = g->trainers[r];
    nc_trainer_set_share(tr, (double)count / (double)st->n);
    nc_status s = nc_trainer_gradients(tr, st->images + first * g->feature, st->labels + first, (int)count,
                                       &st->loss, &st->correct, err);
    if (s != NC_OK) {
        g->comm->ops->abort(g->comm);
        return s;
    }
    nc_trainer_apply(tr, st->lr);
    st->loss *= (double)count / (double)st->n;
    return NC_OK;
}

nc_status nc_train_group_step(nc_train_group *g, const float *images, const int32_t *labels, int n, double lr,
                              double *loss, int64_t *correct, nc_error *err)
{
    if (n < 1 || n > g->max_batch * g->ranks)
        return nc_fail(err, NC_ERR_ARGUMENT, "batch of %d images; the %d ranks were made for 1 to %d", n, g->ranks,
                       g->max_batch * g->ranks);
    for (int r = 0; r < g->ranks; r++)
        g->step[r] = (rank_step){.images = images, .labels = labels, .n = n, .lr = lr};
    nc_status s = nc_rank_pool_run(g->pool, step_rank, g, err);
    if (s != NC_OK)
        return s;
    double total = 0;
    int64_t right = 0;
    for (int r = 0; r < g->ranks; r++) { /* in rank order: the same sum every run */
        total += g->step[r].loss;
        right += g->step[r].correct;
    }
    if (loss)
        *loss = total;
    if (correct)
        *correct = right;
    return NC_OK;
}

/* On rank r's thread: its parameters into its part of the snapshot. */
static nc_status snapshot_rank(void *user, int r, nc_error *err)
{
    (void)err;
    nc_train_group *g = user;
    float *dst = g->snapshot + (int64_t)r * g->params;
    int count = nc_trainer_param_count(g->trainers[r]);
    for (int k = 0; k < count; k++) {
        nc_train_param p;
        nc_trainer_param(g->trainers[r], k, &p);
        for (int64_t j = 0; j < p.count; j++)
            *dst++ = p.value[j];
    }
    return NC_OK;
}

double nc_train_group_divergence(nc_train_group *g)
{
    g->params = 0;
    for (int k = 0; k < nc_trainer_param_count(g->trainers[0]); k++) {
        nc_train_param p;
        nc_trainer_param(g->trainers[0], k, &p);
        g->params += p.count;
    }
    free(g->snapshot);
    g->snapshot = malloc((size_t)(g->params * g->ranks + 1) * sizeof(float));
    nc_error ignored = {0};
    if (!g->snapshot || nc_rank_pool_run(g->pool, snapshot_rank, g, &ignored) != NC_OK)
        return INFINITY;
    double worst = 0;
    for (int r = 1; r < g->ranks; r++)
        for (int64_t j = 0; j < g->params; j++)
            worst = fmax(worst, fabs((double)g->snapshot[j] - (double)g->snapshot[(int64_t)r * g->params + j]));
    return worst;
}
