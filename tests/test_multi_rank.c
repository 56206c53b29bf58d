/* test_multi_rank.c — work spread over ranks, checked against one rank on
 * the CPU: the shard arithmetic, the in-process gradient sum, data-parallel
 * fine-tuning (R ranks with shards = one rank with the whole batch, within
 * float rounding, and bit for bit the same run to run), and the messages
 * that refuse more GPUs than a machine has. */
#include "nc_test.h"
#define NC_TEST_RNG_SEED 0x51ab5eedull
#include "nc_test_util.h"
#include "nc_test_runner.h"

#include <math.h>

#include "../sim/nc_allreduce.h"
#include "../sim/nc_engine_registry.h"
#include "../sim/nc_ranks.h"
#include "../sim/nc_runner.h"
#include "../sim/nc_shard.h"
#include "../sim/nc_train_dp.h"

/* ---- shards ------------------------------------------------------------------ */

static void test_shards_cover_the_set(void)
{
    for (int R = 1; R <= 5; R++)
        for (int64_t n = 0; n <= 23; n++) {
            int64_t next = 0, lo = n, hi = 0, batches = 0;
            for (int r = 0; r < R; r++) {
                int64_t first, count;
                nc_rank_shard(n, R, r, &first, &count);
                NC_CHECK(first == next, "R %d n %lld: rank %d starts at %lld, not %lld", R, (long long)n, r,
                         (long long)first, (long long)next);
                next = first + count;
                lo = count < lo ? count : lo;
                hi = count > hi ? count : hi;
                batches += nc_rank_batches(n, R, r);
            }
            NC_CHECK(next == n && hi - lo <= 1, "R %d n %lld: shards end at %lld, sizes %lld..%lld", R, (long long)n,
                     (long long)next, (long long)lo, (long long)hi);
            NC_CHECK(batches == n, "R %d: %lld batches dealt of %lld", R, (long long)batches, (long long)n);
        }
}

/* ---- the in-process sum ----------------------------------------------------------- */

typedef struct sum_job {
    nc_allreduce *comm;
    nc_train_backend *be[NC_RANKS_MAX];
    float *bufs[NC_RANKS_MAX][2];
    int64_t counts[2];
} sum_job;

static nc_status sum_rank(void *user, int r, nc_error *err)
{
    sum_job *j = user;
    for (int k = 0; k < 2; k++)
        for (int64_t i = 0; i < j->counts[k]; i++)
            j->bufs[r][k][i] = (float)((r + 1) * 1000 + k * 100) + (float)i * 0.25f;
    nc_status s = j->comm->ops->sum(j->comm, r, j->be[r], j->bufs[r], j->counts, 2, err);
    return s == NC_OK ? j->comm->ops->wait(j->comm, r, err) : s;
}

static void test_cpu_sum(void)
{
    for (int R = 1; R <= 4; R++) {
        sum_job j = {.counts = {7, 33}};
        nc_error err = {0};
        nc_rank_pool *pool = NULL;
        NC_CHECK(nc_rank_pool_new("cpu", R, &pool, &err) == NC_OK, "pool: %s", err.message);
        NC_CHECK(nc_allreduce_new("cpu", R, &j.comm, &err) == NC_OK, "sum: %s", err.message);
        for (int r = 0; r < R; r++) {
            nc_train_backend_cpu_new(&j.be[r], &err);
            for (int k = 0; k < 2; k++)
                j.bufs[r][k] = malloc((size_t)j.counts[k] * sizeof(float));
        }
        NC_CHECK(nc_rank_pool_run(pool, sum_rank, &j, &err) == NC_OK, "R %d: %s", R, err.message);
        int wrong = 0;
        for (int r = 0; r < R; r++)
            for (int k = 0; k < 2; k++)
                for (int64_t i = 0; i < j.counts[k]; i++) {
                    double want = 0;
                    for (int q = 0; q < R; q++)
                        want += (float)((q + 1) * 1000 + k * 100) + (float)i * 0.25f;
                    wrong += j.bufs[r][k][i] != (float)want;
                }
        NC_CHECK(wrong == 0, "R %d: %d sums wrong", R, wrong);
        for (int r = 0; r < R; r++) {
            nc_train_backend_free(j.be[r]);
            free(j.bufs[r][0]);
            free(j.bufs[r][1]);
        }
        nc_allreduce_free(j.comm);
        nc_rank_pool_free(pool);
    }
}

/* A rank that fails releases the others instead of leaving them waiting. */
static nc_status failing_rank(void *user, int r, nc_error *err)
{
    sum_job *j = user;
    if (r == 1) {
        j->comm->ops->abort(j->comm);
        return nc_fail(err, NC_ERR_ARGUMENT, "rank 1 broke");
    }
    return sum_rank(user, r, err);
}

static void test_failed_rank_releases_the_others(void)
{
    sum_job j = {.counts = {5, 5}};
    nc_error err = {0};
    nc_rank_pool *pool = NULL;
    nc_rank_pool_new("cpu", 3, &pool, &err);
    nc_allreduce_cpu_new(3, &j.comm, &err);
    for (int r = 0; r < 3; r++) {
        nc_train_backend_cpu_new(&j.be[r], &err);
        j.bufs[r][0] = calloc(5, sizeof(float));
        j.bufs[r][1] = calloc(5, sizeof(float));
    }
    nc_status s = nc_rank_pool_run(pool, failing_rank, &j, &err);
    NC_CHECK(s == NC_ERR_ARGUMENT && strstr(err.message, "rank 1 of 3: rank 1 broke"),
             "the failing rank's own message: %s", err.message);
    for (int r = 0; r < 3; r++) {
        nc_train_backend_free(j.be[r]);
        free(j.bufs[r][0]);
        free(j.bufs[r][1]);
    }
    nc_allreduce_free(j.comm);
    nc_rank_pool_free(pool);
}

/* ---- data-parallel fine-tuning --------------------------------------------------- */

/* x [1, 8, 8] → conv 4×3×3 → neuron → avgpool 2 → flatten → dense 4 */
static nc_net *small_net(nc_train_mode mode)
{
    nc_net *net = nc_net_new();
    int64_t xs[3] = {1, 8, 8};
    int x = add_input(net, 3, xs);
    int cv = add1(net, NC_NODE_CONV2D, "conv", x);
    int64_t ws[4] = {4, 1, 3, 3};
    net->nodes[cv].weight = rnd_tensor(4, ws, -0.6f, 0.6f);
    net->nodes[cv].bias = rnd_tensor(1, ws, 0.0f, 0.2f);
    for (int p = 0; p < 4; p++)
        net->nodes[cv].pad[p] = 1;
    int nr = add_neuron(net, "act", cv, mode == NC_TRAIN_BPTT ? NC_NEURON_IF : NC_NEURON_QCFS);
    float th[4] = {0.8f, 1.0f, 1.2f, 0.9f};
    nc_neuron_set_threshold(&net->nodes[nr].neuron, 4, th, NULL);
    net->nodes[nr].neuron.levels = 4;
    net->nodes[nr].neuron.shift = 0.5f;
    net->nodes[nr].neuron.v0_fraction = 0.5f;
    int ap = add1(net, NC_NODE_AVGPOOL, "pool", nr);
    net->nodes[ap].kernel[0] = net->nodes[ap].kernel[1] = 2;
    net->nodes[ap].stride[0] = net->nodes[ap].stride[1] = 2;
    int fl = add1(net, NC_NODE_FLATTEN, "flat", ap);
    int fc = add1(net, NC_NODE_DENSE, "fc", fl);
    int64_t fs[2] = {4, 64};
    net->nodes[fc].weight = rnd_tensor(2, fs, -0.3f, 0.3f);
    net->nodes[fc].bias = rnd_tensor(1, fs, -0.05f, 0.05f);
    add1(net, NC_NODE_OUTPUT, "y", fc);
    return infer(net) ? net : (nc_net_free(net), NULL);
}

enum { STEPS = 6 };
static const int batch_of[STEPS] = {10, 10, 7, 10, 2, 9}; /* uneven shards, and a shard of none for 3 ranks */

typedef struct run_out {
    double loss[STEPS];
    int64_t correct[STEPS];
    float *params; /* all parameters, in trainer order */
    int64_t n_params;
    double divergence;
} run_out;

static void collect_params(nc_trainer *tr, run_out *out)
{
    int count = nc_trainer_param_count(tr);
    out->n_params = 0;
    for (int k = 0; k < count; k++) {
        nc_train_param p;
        nc_trainer_param(tr, k, &p);
        out->params = realloc(out->params, (size_t)(out->n_params + p.count) * sizeof(float));
        memcpy(out->params + out->n_params, p.value, (size_t)p.count * sizeof(float));
        out->n_params += p.count;
    }
}

static const char *train_engine = "cpu"; /* the GPU tests set "gpu" */

static nc_train_options dp_options(nc_train_mode mode)
{
    nc_train_options o = nc_train_options_default(mode);
    o.engine = train_engine;
    o.T = 4;
    o.learning_rate = 2e-2;
    o.train_threshold = 1;
    o.weight_decay = 1e-3;
    return o;
}

/* STEPS steps on the same batches: ranks = 0 is one plain trainer. */
static int train_steps(const nc_net *start, nc_train_mode mode, int ranks, const nc_dataset *ds, run_out *out)
{
    nc_net *net = nc_net_clone(start);
    nc_train_options o = dp_options(mode);
    nc_error err = {0};
    nc_trainer *tr = NULL;
    nc_train_group *g = NULL;
    nc_status s = ranks == 0 ? nc_trainer_new(net, &o, 10, &tr, &err)
                             : nc_train_group_new(net, &o, ranks, 10, 40, &g, &err); /* small buckets: several */
    if (s == NC_OK && g)
        tr = nc_train_group_trainer(g, 0);
    float *images = malloc(10 * 64 * sizeof(float));
    int32_t labels[10];
    int64_t first = 0;
    for (int k = 0; s == NC_OK && k < STEPS; k++) {
        nc_dataset_batch(ds, first, batch_of[k], images, labels);
        first += batch_of[k];
        if (g)
            s = nc_train_group_step(g, images, labels, batch_of[k], o.learning_rate, &out->loss[k], &out->correct[k],
                                    &err);
        else if ((s = nc_trainer_gradients(tr, images, labels, batch_of[k], &out->loss[k], &out->correct[k], &err)) ==
                 NC_OK)
            nc_trainer_apply(tr, o.learning_rate);
    }
    if (s == NC_OK) {
        collect_params(tr, out);
        out->divergence = g ? nc_train_group_divergence(g) : 0;
    } else
        printf("# %d ranks: %s\n", ranks, err.message);
    free(images);
    if (g)
        nc_train_group_free(g);
    else
        nc_trainer_free(tr);
    nc_net_free(net);
    return s == NC_OK ? 0 : -1;
}

static void compare_runs(nc_train_mode mode, int max_ranks, double tolerance)
{
    nc_dataset *ds = quadrant_dataset(64, 7);
    nc_net *start = small_net(mode);
    run_out one = {0};
    NC_CHECK(train_steps(start, mode, 0, ds, &one) == 0, "one trainer");
    for (int R = 1; R <= max_ranks; R++) {
        run_out dp = {0}, again = {0};
        if (train_steps(start, mode, R, ds, &dp) != 0 || train_steps(start, mode, R, ds, &again) != 0) {
            NC_CHECK(0, "%d ranks failed", R);
            continue;
        }
        double worst_loss = 0, worst_param = 0;
        for (int k = 0; k < STEPS; k++) {
            worst_loss = fmax(worst_loss, fabs(dp.loss[k] - one.loss[k]) / fmax(1.0, fabs(one.loss[k])));
            NC_CHECK(dp.correct[k] == one.correct[k], "%s R %d step %d: %lld right, one trainer %lld",
                     nc_train_mode_name(mode), R, k, (long long)dp.correct[k], (long long)one.correct[k]);
        }
        for (int64_t j = 0; j < one.n_params; j++)
            worst_param = fmax(worst_param, fabs((double)dp.params[j] - one.params[j]) /
                                                fmax(1e-2, fabs((double)one.params[j])));
        NC_CHECK(dp.n_params == one.n_params && worst_loss < tolerance && worst_param < 10 * tolerance,
                 "%s R %d: loss curve within %.2g, parameters within %.2g of one trainer", nc_train_mode_name(mode),
                 R, worst_loss, worst_param);
        NC_CHECK(dp.divergence == 0, "%s R %d: every rank holds the same parameters (max diff %g)",
                 nc_train_mode_name(mode), R, dp.divergence);
        NC_CHECK(memcmp(dp.params, again.params, (size_t)dp.n_params * sizeof(float)) == 0 &&
                     memcmp(dp.loss, again.loss, sizeof dp.loss) == 0,
                 "%s R %d: the same bits run to run", nc_train_mode_name(mode), R);
        printf("# %s %s, %d ranks: loss within %.2g, parameters within %.2g of one trainer\n", train_engine,
               nc_train_mode_name(mode), R, worst_loss, worst_param);
        free(dp.params);
        free(again.params);
    }
    free(one.params);
    nc_net_free(start);
    free_dataset(ds);
}

static void test_dp_qcfs_matches_one_trainer(void) { compare_runs(NC_TRAIN_QCFS, 3, 1e-5); }
static void test_dp_bptt_matches_one_trainer(void) { compare_runs(NC_TRAIN_BPTT, 3, 1e-5); }

/* nc_train with o.ranks: the whole run (shuffling, held-out set, best epoch). */
static void test_train_run_over_ranks(void)
{
    nc_dataset *ds = quadrant_dataset(300, 11);
    double acc[3] = {0}, loss[3] = {0};
    float first_weight[3] = {0};
    nc_net *start = small_net(NC_TRAIN_BPTT);
    for (int R = 1; R <= 3; R += 2) {
        nc_net *net = nc_net_clone(start);
        nc_train_options o = dp_options(NC_TRAIN_BPTT);
        o.epochs = 2;
        o.batch_size = 16;
        o.val_count = 60;
        o.ranks = R;
        nc_train_result res;
        nc_error err = {0};
        nc_status s = nc_train(net, ds, &o, &res, &err);
        NC_CHECK(s == NC_OK, "%d ranks: %s", R, err.message);
        acc[R - 1] = res.best_val_accuracy;
        loss[R - 1] = res.final_loss;
        first_weight[R - 1] = net->nodes[nc_net_find(net, "conv")].weight->data[0];
        nc_net_free(net);
    }
    NC_CHECK(acc[0] == acc[2] && fabs(loss[0] - loss[2]) < 1e-5 && fabs(first_weight[0] - first_weight[2]) < 1e-4,
             "3 ranks: held-out %.4f (one: %.4f), loss %.6f (%.6f), a weight %.6f (%.6f)", acc[2], acc[0], loss[2],
             loss[0], first_weight[2], first_weight[0]);
    nc_net_free(start);
    free_dataset(ds);
}

/* ---- simulations and evaluations over ranks ------------------------------------- */

static int same_stats(const nc_layer_stats *a, const nc_layer_stats *b)
{
    const nc_error_stats *ea[5] = {&a->total, &a->local, &a->clip, &a->quant, &a->uneven};
    const nc_error_stats *eb[5] = {&b->total, &b->local, &b->clip, &b->quant, &b->uneven};
    int same = a->spikes == b->spikes && a->firing_rate == b->firing_rate && a->dead_fraction == b->dead_fraction &&
               a->saturated_fraction == b->saturated_fraction && a->sops == b->sops &&
               a->clipped_fraction == b->clipped_fraction;
    for (int k = 0; k < 5; k++)
        same &= memcmp(ea[k], eb[k], sizeof *ea[k]) == 0;
    return same;
}

/* Every number of the two records, bit for bit; the first difference. */
static const char *records_differ(const nc_record *a, const nc_record *b)
{
    int T = nc_record_T(a);
    if (nc_record_samples(a) != nc_record_samples(b))
        return "samples";
    for (int t = 1; t <= T; t++)
        if (nc_record_accuracy(a, t) != nc_record_accuracy(b, t))
            return "accuracy by step";
    if (nc_record_ann_accuracy(a) != nc_record_ann_accuracy(b) || nc_record_qcfs_accuracy(a) != nc_record_qcfs_accuracy(b))
        return "ANN / QCFS accuracy";
    for (int l = 0; l < nc_record_layer_count(a); l++) {
        nc_layer_stats sa, sb;
        nc_record_layer_stats(a, l, &sa);
        nc_record_layer_stats(b, l, &sb);
        if (!same_stats(&sa, &sb))
            return "layer statistics (rates, errors)";
        if (memcmp(nc_record_channel_spikes(a, l), nc_record_channel_spikes(b, l), (size_t)sa.channels * 8) != 0)
            return "spikes by channel";
        nc_raster ra, rb;
        nc_record_raster(a, l, &ra);
        nc_record_raster(b, l, &rb);
        size_t bits = (size_t)ra.samples * (size_t)ra.neurons * (size_t)ra.T;
        if (ra.samples != rb.samples || memcmp(ra.bits, rb.bits, (bits + 7) / 8) != 0)
            return "raster";
        nc_trace ta, tb;
        nc_record_trace(a, l, &ta);
        nc_record_trace(b, l, &tb);
        size_t n = (size_t)ta.samples * (size_t)ta.neurons * (size_t)ta.T;
        if (ta.samples != tb.samples || memcmp(ta.current, tb.current, n * 4) != 0 ||
            memcmp(ta.spike, tb.spike, n) != 0 || memcmp(ta.v, tb.v, (n + (size_t)ta.samples * ta.neurons) * 4) != 0)
            return "traces";
    }
    return NULL;
}

static nc_record *simulate_over(const nc_net *net, const nc_dataset *ds, const nc_simulate_options *so, int R)
{
    const char *engine = train_engine;
    nc_error err = {0};
    nc_record *rec = NULL;
    nc_engine *e0 = NULL, *engines[NC_RANKS_MAX] = {0};
    nc_rank_pool *pool = NULL;
    nc_status s = NC_OK;
    if (R > 0) /* rank 0's engine is made on rank 0's thread, bound to its device */
        s = nc_rank_pool_new(engine, R, &pool, &err);
    if (s == NC_OK)
        s = nc_engine_new(engine, &e0, &err);
    if (s == NC_OK)
        s = nc_record_new(net, so->T, &so->record, &rec, &err);
    if (s == NC_OK && R == 0)
        s = nc_simulate_into(e0, ds, so, NULL, NULL, rec, &err);
    else if (s == NC_OK) {
        s = nc_shard_engines_new(pool, engine, NULL, 1, e0, engines, &err);
        if (s == NC_OK)
            s = nc_simulate_sharded(pool, engines, ds, so, NULL, NULL, rec, &err);
        nc_shard_engines_free(pool, engines);
    }
    nc_rank_pool_free(pool);
    if (s != NC_OK)
        printf("# %d ranks: %s\n", R, err.message);
    nc_engine_free(e0);
    if (s != NC_OK) {
        nc_record_free(rec);
        return NULL;
    }
    return rec;
}

static void simulation_over_ranks(int max_ranks)
{
    nc_net *net = small_net(NC_TRAIN_BPTT);
    nc_dataset *ds = quadrant_dataset(103, 5); /* 13 batches of 8, the last of 7 */
    for (int enc = 0; enc < 2; enc++) {
        nc_simulate_options so = {.T = 6, .encoding = enc ? NC_ENCODING_POISSON : NC_ENCODING_DIRECT, .seed = 9,
                                  .batch_size = 8,
                                  .record = {.raster_samples = 20, .raster_neurons = 16, .trace_samples = 11,
                                             .trace_neurons = 3}};
        nc_record *one = simulate_over(net, ds, &so, 0);
        for (int R = 1; R <= max_ranks; R++) {
            nc_record *rec = simulate_over(net, ds, &so, R);
            const char *diff = one && rec ? records_differ(one, rec) : "a run failed";
            NC_CHECK(!diff, "%s encoding, %d ranks: %s differ from one rank", enc ? "poisson" : "direct", R,
                     diff ? diff : "");
            nc_record_free(rec);
        }
        nc_record_totals tot = {0};
        if (one)
            nc_record_get_totals(one, &tot);
        NC_CHECK(tot.spikes > 0, "the net spikes (%lld spikes)", (long long)tot.spikes);
        if (one)
            printf("# %s: accuracy at T %.4f, %lld images, the same from 1 to 4 ranks\n", enc ? "poisson" : "direct",
                   nc_record_accuracy(one, 6), (long long)nc_record_samples(one));
        nc_record_free(one);
    }
    free_dataset(ds);
    nc_net_free(net);
}

static void test_simulation_over_ranks_is_identical(void) { simulation_over_ranks(4); }

/* ---- the same on GPUs, where this machine has several ----------------------------- */

static char gpu_skip[320];

/* Why the GPU ranks cannot be tested here, or NULL. */
static const char *gpu_ranks_missing(void)
{
    const nc_engine_info *info = nc_engine_find("gpu");
    char why[256] = "";
    if (!info || !info->available || !info->available(why, sizeof why))
        snprintf(gpu_skip, sizeof gpu_skip, "no GPU engine here: %s", why);
    else if (!info->device_count || info->device_count() < 2)
        snprintf(gpu_skip, sizeof gpu_skip, "%d GPU on this machine: several GPUs are needed",
                 info->device_count ? info->device_count() : 0);
    else if (!info->allreduce_new)
        snprintf(gpu_skip, sizeof gpu_skip, "this build has no NCCL (meson found no nccl.h / libnccl)");
    else
        return NULL;
    return gpu_skip;
}

/* R GPUs (up to 4) against one: fine-tuning within float rounding (NCCL
 * adds in its own order), every rank the same, the same bits run to run;
 * simulations merged bit for bit. */
static void test_gpu_ranks(void)
{
    int gpus = nc_engine_find("gpu")->device_count();
    train_engine = "gpu";
    compare_runs(NC_TRAIN_BPTT, gpus < 4 ? gpus : 4, 1e-4);
    simulation_over_ranks(gpus < 4 ? gpus : 4);
    train_engine = "cpu";
}

/* Batches that join out of order are refused, naming the rule. */
static void test_record_refuses_out_of_order(void)
{
    nc_net *net = small_net(NC_TRAIN_BPTT);
    nc_record *total = NULL, *rank = NULL;
    nc_error err = {0};
    nc_record_new(net, 2, NULL, &total, &err);
    nc_record_new(net, 2, NULL, &rank, &err);
    NC_CHECK(nc_record_begin_batch_at(rank, 8, 1, &err) == NC_OK, "open at 8");
    float out[2 * 4] = {0};
    int32_t label = 0;
    nc_status s = nc_record_end_batch_into(rank, total, &label, out, 4, &err);
    NC_CHECK(s != NC_OK && nc_record_samples(total) == 0, "a batch at 8 cannot join a record at 0 (%s)", err.message);
    nc_record_free(rank);
    nc_record_free(total);
    nc_net_free(net);
}

static void test_evaluation_over_ranks(void)
{
    nc_net *net = small_net(NC_TRAIN_QCFS);
    nc_dataset *ds = quadrant_dataset(77, 3);
    nc_error err = {0};
    nc_eval_result one = {0};
    nc_engine *e0 = NULL;
    nc_engine_new("cpu", &e0, &err);
    nc_engine_load(e0, net, &err);
    NC_CHECK(nc_evaluate(e0, ds, 8, NC_MODE_QCFS, NULL, NULL, &one, &err) == NC_OK, "one rank: %s", err.message);
    for (int R = 2; R <= 3; R++) {
        nc_rank_pool *pool = NULL;
        nc_engine *engines[NC_RANKS_MAX] = {0};
        nc_eval_result res = {0};
        nc_status s = nc_rank_pool_new("cpu", R, &pool, &err);
        if (s == NC_OK)
            s = nc_shard_engines_new(pool, "cpu", NULL, 1, e0, engines, &err);
        for (int r = 1; s == NC_OK && r < R; r++)
            s = nc_engine_load(engines[r], net, &err);
        if (s == NC_OK)
            s = nc_evaluate_sharded(pool, engines, ds, 8, NC_MODE_QCFS, NULL, NULL, &res, &err);
        NC_CHECK(s == NC_OK && res.images == one.images && res.correct == one.correct,
                 "%d ranks: %lld of %lld right, one rank %lld of %lld (%s)", R, (long long)res.correct,
                 (long long)res.images, (long long)one.correct, (long long)one.images, s == NC_OK ? "" : err.message);
        nc_shard_engines_free(pool, engines);
        nc_rank_pool_free(pool);
    }
    nc_engine_free(e0);
    free_dataset(ds);
    nc_net_free(net);
}

/* ---- the runner: `neurocuda run` and a conversion with fine-tuning ---------------- */

/* The runner's job with d->ranks ranks (NULL and a message if it failed). */
static nc_runner *run_job(const nc_runner_desc *d)
{
    char what[48];
    snprintf(what, sizeof what, "runner, %d ranks", d->ranks);
    return nc_test_run_job(d, what);
}

static void test_runner_over_ranks(void)
{
    nc_net *snn = small_net(NC_TRAIN_BPTT);
    nc_dataset *test = quadrant_dataset(90, 21);
    nc_runner_desc d = nc_runner_desc_default();
    d.source = snn;
    d.dataset = NULL;
    d.test_data = test;
    d.keep_records = 1;
    d.T = 5;
    d.batch_size = 16;
    d.ranks = 1;
    nc_runner *one = run_job(&d);
    d.ranks = 3;
    nc_runner *three = run_job(&d);
    NC_CHECK(one && three, "both runs");
    if (one && three) {
        const char *diff = records_differ(nc_runner_record(one, 0), nc_runner_record(three, 0));
        NC_CHECK(!diff, "run over 3 ranks: the record's %s differ", diff ? diff : "");
        const nc_stage_row *a = nc_runner_row(one, 0), *b = nc_runner_row(three, 0);
        NC_CHECK(memcmp(a->snn, b->snn, (size_t)a->T * sizeof(double)) == 0 && a->images == b->images,
                 "the same row");
    }
    nc_runner_free(one);
    nc_runner_free(three);

    /* an ANN converted and fine-tuned over 2 ranks: every stage runs */
    nc_net *ann = small_net(NC_TRAIN_QCFS);
    nc_node *act = &ann->nodes[nc_net_find(ann, "act")];
    act->neuron.model = NC_NEURON_RELU;
    nc_dataset *train = quadrant_dataset(400, 22);
    d = nc_runner_desc_default();
    d.source = ann;
    d.dataset = NULL;
    d.train_data = train;
    d.test_data = test;
    d.pipeline.calib_images = 100;
    d.pipeline.finetune_bptt_epochs = 1;
    d.pipeline.train.batch_size = 16;
    d.pipeline.train.T = 4;
    d.eval_T = 4;
    d.ranks = 2;
    nc_runner *tuned = run_job(&d);
    nc_train_result tr = {0};
    NC_CHECK(tuned && nc_runner_train_result(tuned, NC_TRAIN_BPTT, &tr) && tr.epochs_run == 1 &&
                 nc_runner_train_options(tuned)->ranks == 2 && nc_runner_row_count(tuned) == 2,
             "converted, fine-tuned over 2 ranks and measured");
    nc_runner_free(tuned);
    free_dataset(train);
    nc_net_free(ann);
    free_dataset(test);
    nc_net_free(snn);
}

/* ---- how many ranks a job may have ---------------------------------------------- */

static int one_device(void) { return 1; }
static const nc_engine_option fake_options[] = {
    {.key = "gpus", .type = NC_ENGINE_OPTION_TEXT, .default_value = "1", .help = "GPUs"},
};
static nc_status fake_create(const nc_engine_values *v, nc_engine **out, nc_error *err)
{
    (void)v, (void)out;
    return nc_fail(err, NC_ERR_UNSUPPORTED, "not an engine");
}

static void test_ranks_refused_clearly(void)
{
    static const nc_engine_info fake = {.name = "fakegpu", .description = "one device", .n_options = 1,
                                        .options = fake_options, .create = fake_create, .device_count = one_device};
    nc_engine_register(&fake);
    nc_engine_settings set = {0};
    nc_error err = {0};
    int R = 0;
    NC_CHECK(nc_ranks_for("cpu", NULL, 0, &R, &err) == NC_OK && R == 1, "cpu: one rank");
    NC_CHECK(nc_ranks_for("cpu", NULL, 3, &R, &err) == NC_OK && R == 3, "cpu: 3 ranks asked for");
    NC_CHECK(nc_ranks_for("fakegpu", &set, 0, &R, &err) == NC_OK && R == 1, "default: one GPU");
    nc_engine_settings_add(&set, "gpus=all", &err);
    NC_CHECK(nc_ranks_for("fakegpu", &set, 0, &R, &err) == NC_OK && R == 1, "all of one GPU: 1");
    nc_engine_settings two = {0};
    nc_engine_settings_add(&two, "gpus=2", &err);
    nc_status s = nc_ranks_for("fakegpu", &two, 0, &R, &err);
    NC_CHECK(s == NC_ERR_UNSUPPORTED && strstr(err.message, "--gpus 2: this machine has 1 GPU") &&
                 strstr(err.message, "use --gpus 1"),
             "2 GPUs on a machine with 1: %s", err.message);
    s = nc_ranks_for("cpu", &two, 0, &R, &err);
    NC_CHECK(s == NC_ERR_ARGUMENT && strstr(err.message, "--gpus 2: the cpu engine runs on this machine's cores"),
             "--gpus on the cpu engine: %s", err.message);
    nc_engine_settings bad = {0};
    nc_engine_settings_add(&bad, "gpus=two", &err);
    s = nc_ranks_for("fakegpu", &bad, 0, &R, &err);
    NC_CHECK(s == NC_ERR_ARGUMENT && strstr(err.message, "'two'"), "not a number: %s", err.message);
}

int main(void)
{
    NC_RUN(test_shards_cover_the_set);
    NC_RUN(test_cpu_sum);
    NC_RUN(test_failed_rank_releases_the_others);
    NC_RUN(test_dp_qcfs_matches_one_trainer);
    NC_RUN(test_dp_bptt_matches_one_trainer);
    NC_RUN(test_train_run_over_ranks);
    NC_RUN(test_simulation_over_ranks_is_identical);
    NC_RUN(test_record_refuses_out_of_order);
    NC_RUN(test_evaluation_over_ranks);
    NC_RUN(test_runner_over_ranks);
    NC_RUN(test_ranks_refused_clearly);
    if (gpu_ranks_missing())
        nc_test_report("test_gpu_ranks", 0, gpu_skip);
    else
        NC_RUN(test_gpu_ranks);
    return nc_test_done();
}
