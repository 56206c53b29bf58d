/* nc_simulate.c — the SNN simulation driver (see nc_simulate.h). */
#include "nc_simulate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct sim_ctx {
    nc_engine *engine;
    const nc_dataset *ds;
    const nc_simulate_options *opts;
    nc_progress_fn progress;
    void *progress_user;
    nc_record *rec;
    int64_t total, done;  /* images in the run, images finished */
    int cancelled;
    const nc_simulate_shard *shard; /* NULL: every batch, into rec's own totals */
} sim_ctx;

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Calls the user's progress with the run's own numbers; remembers a stop. */
static int report(sim_ctx *c)
{
    if (!c->progress || c->cancelled)
        return c->cancelled;
    double acc = nc_record_samples(c->rec) ? nc_record_accuracy(c->rec, nc_record_T(c->rec)) : 0.0;
    nc_progress p = {"simulate", c->done, c->total, acc};
    c->cancelled = c->progress(c->progress_user, &p) != 0;
    return c->cancelled;
}

/* The engine's own progress (per node) only serves to let Cancel stop a
 * long batch; the user sees the run's numbers. */
static int engine_progress(void *user, const nc_progress *p)
{
    (void)p;
    return report(user);
}

static nc_status forward(sim_ctx *c, const nc_tensor *input, nc_mode mode, const nc_observer *ob,
                         uint64_t seed, nc_tensor **out, nc_error *err)
{
    nc_run_options ro = {
        .mode = mode,
        .T = mode == NC_MODE_SNN ? c->opts->T : 1,
        .encoding = c->opts->encoding,
        .seed = seed,
        .observer = ob,
        .progress = c->progress ? engine_progress : NULL,
        .progress_user = c,
    };
    nc_status st = nc_engine_forward(c->engine, input, &ro, out, err);
    if (st == NC_OK && (!*out || nc_tensor_numel(*out) % input->shape[0] != 0)) {
        nc_tensor_free(*out);
        *out = NULL;
        st = nc_fail(err, NC_ERR_INTERNAL, "the %s engine returned an output of the wrong size",
                     c->engine->ops->name);
    }
    return st;
}

/* Output values per sample and step = classes. */
static int64_t classes_of(const nc_tensor *out, int64_t rows)
{
    return nc_tensor_numel(out) / rows;
}

static nc_status reference_pass(sim_ctx *c, const nc_tensor *input, const int32_t *labels, nc_mode mode,
                                nc_error *err)
{
    static const nc_observer ann_observer = {nc_record_observe_ann, NULL, NULL};
    nc_observer ob = ann_observer;
    ob.user = c->rec;
    nc_tensor *out = NULL;
    int64_t n = input->shape[0];
    int observed = mode == NC_MODE_ANN && nc_record_layer_count(c->rec) > 0;
    nc_status st = forward(c, input, mode, observed ? &ob : NULL, 0, &out, err);
    if (st == NC_OK)
        st = nc_record_add_reference(c->rec, mode == NC_MODE_ANN ? NC_RECORD_REF_ANN : NC_RECORD_REF_QCFS,
                                     out->data, n, classes_of(out, n), labels, err);
    nc_tensor_free(out);
    return st;
}

/* What the SNN pass shows the record: nothing for a record without layers
 * (the engine then runs its fastest path); sums over the steps where the
 * engine makes them and the record needs every step of only a few samples;
 * else every step. */
static const nc_observer *snn_observer(sim_ctx *c, int64_t n, nc_observer *ob)
{
    if (nc_record_layer_count(c->rec) == 0)
        return NULL;
    *ob = (nc_observer){nc_record_observe_snn, nc_record_observe_snn_input, c->rec};
    int64_t step_samples = nc_record_step_samples(c->rec);
    if ((c->engine->ops->caps & NC_CAP_STEP_SUMS) && step_samples < n) {
        nc_record_expect_sums(c->rec);
        ob->observe_sums = nc_record_observe_sums;
        ob->step_samples = step_samples;
    }
    return ob;
}

static nc_status snn_pass(sim_ctx *c, const nc_tensor *input, const int32_t *labels, int64_t first, nc_error *err)
{
    nc_observer ob;
    const nc_observer *shown = snn_observer(c, input->shape[0], &ob);
    nc_tensor *out = NULL;
    int64_t rows = (int64_t)c->opts->T * input->shape[0];
    nc_status st = forward(c, input, NC_MODE_SNN, shown, splitmix64(c->opts->seed + (uint64_t)first), &out, err);
    if (st == NC_OK && c->shard)
        st = c->shard->commit(c->shard->user, c->rec, labels, out->data, classes_of(out, rows), err);
    else if (st == NC_OK)
        st = nc_record_end_batch(c->rec, labels, out->data, classes_of(out, rows), err);
    nc_tensor_free(out);
    return st;
}

static nc_status run_batch(sim_ctx *c, nc_tensor *input, int32_t *labels, int64_t first, int64_t n,
                           nc_error *err)
{
    input->shape[0] = n;
    nc_dataset_batch(c->ds, first, n, input->data, labels);
    nc_status st = c->shard ? nc_record_begin_batch_at(c->rec, first, n, err) : nc_record_begin_batch(c->rec, n, err);
    if (st == NC_OK && !c->opts->skip_ann)
        st = reference_pass(c, input, labels, NC_MODE_ANN, err);
    if (st == NC_OK && !c->opts->skip_qcfs)
        st = reference_pass(c, input, labels, NC_MODE_QCFS, err);
    if (st == NC_OK)
        st = snn_pass(c, input, labels, first, err);
    return st;
}

/* A batch tensor [batch, shape of the input node], checked against the data. */
static nc_status make_input(const nc_net *net, const nc_dataset *ds, int64_t batch, nc_tensor **out, nc_error *err)
{
    const nc_node *in = &net->nodes[net->input];
    int64_t shape[NC_MAX_DIMS] = {batch};
    for (int i = 0; i < in->ndim; i++)
        shape[i + 1] = in->shape[i];
    int64_t per_sample = (int64_t)ds->channels * ds->height * ds->width;
    if (nc_node_numel(in) != per_sample)
        return nc_fail(err, NC_ERR_SHAPE, "the network's input '%s' takes %lld values, images of '%s' have %lld",
                       in->name, (long long)nc_node_numel(in), ds->path, (long long)per_sample);
    *out = nc_tensor_new(in->ndim + 1, shape);
    return *out ? NC_OK : nc_fail(err, NC_ERR_MEMORY, "out of memory for a batch of %lld images", (long long)batch);
}

static nc_status check_args(nc_engine *engine, const nc_dataset *ds, const nc_simulate_options *opts,
                            nc_record *rec, nc_error *err)
{
    if (!engine || !ds || !opts || !rec)
        return nc_fail(err, NC_ERR_ARGUMENT, "nc_simulate: no engine, dataset, options or record");
    if (opts->T != nc_record_T(rec))
        return nc_fail(err, NC_ERR_ARGUMENT, "simulate: T = %d but the record was made for T = %d", opts->T,
                       nc_record_T(rec));
    if (ds->count < 1)
        return nc_fail(err, NC_ERR_ARGUMENT, "simulate: the dataset '%s' is empty", ds->path);
    const nc_net *net = nc_record_net(rec);
    if (net->input < 0 || net->output < 0)
        return nc_fail(err, NC_ERR_ARGUMENT, "simulate: the network has no input or output node");
    return engine->net == net ? NC_OK : nc_engine_load(engine, net, err);
}

static nc_status run_all(sim_ctx *c, int64_t batch, nc_error *err)
{
    nc_tensor *input = NULL;
    int32_t *labels = malloc((size_t)batch * sizeof(int32_t));
    nc_status st = labels ? make_input(nc_record_net(c->rec), c->ds, batch, &input, err)
                          : nc_fail(err, NC_ERR_MEMORY, "out of memory");
    int64_t start = c->shard ? c->shard->rank * batch : 0, step = c->shard ? c->shard->ranks * batch : batch;
    for (int64_t first = start; st == NC_OK && first < c->total; first += step) {
        int64_t n = c->total - first < batch ? c->total - first : batch;
        st = run_batch(c, input, labels, first, n, err);
        if (st == NC_OK) {
            c->done = first + n;
            report(c);
        }
        if (st == NC_OK && c->cancelled && c->done < c->total)
            st = NC_ERR_CANCELLED;
    }
    if (c->cancelled && (st == NC_OK || st == NC_ERR_CANCELLED))
        st = c->done < c->total ? nc_fail(err, NC_ERR_CANCELLED, "simulation cancelled after %lld of %lld images",
                                          (long long)c->done, (long long)c->total)
                                : NC_OK;
    nc_tensor_free(input);
    free(labels);
    return st;
}

nc_status nc_simulate_into(nc_engine *engine, const nc_dataset *ds, const nc_simulate_options *opts,
                           nc_progress_fn progress, void *progress_user, nc_record *rec, nc_error *err)
{
    return nc_simulate_shard_into(engine, ds, opts, NULL, progress, progress_user, rec, err);
}

nc_status nc_simulate_shard_into(nc_engine *engine, const nc_dataset *ds, const nc_simulate_options *opts,
                                 const nc_simulate_shard *shard, nc_progress_fn progress, void *progress_user,
                                 nc_record *rec, nc_error *err)
{
    nc_status st = check_args(engine, ds, opts, rec, err);
    if (st != NC_OK)
        return st;
    sim_ctx c = {engine, ds, opts, progress, progress_user, rec, 0, 0, 0, shard};
    c.total = opts->limit > 0 && opts->limit < ds->count ? opts->limit : ds->count;
    int64_t batch = opts->batch_size > 0 ? opts->batch_size : NC_SIMULATE_DEFAULT_BATCH;
    if (batch > c.total)
        batch = c.total;
    if (report(&c))
        return nc_fail(err, NC_ERR_CANCELLED, "simulation cancelled before the first image");
    return run_all(&c, batch, err);
}

nc_status nc_simulate(nc_engine *engine, const nc_net *net, const nc_dataset *ds, const nc_simulate_options *opts,
                      nc_progress_fn progress, void *progress_user, nc_record **out, nc_error *err)
{
    *out = NULL;
    if (!opts || !net)
        return nc_fail(err, NC_ERR_ARGUMENT, "nc_simulate: no network or options");
    nc_status st = nc_record_new(net, opts->T, &opts->record, out, err);
    if (st == NC_OK)
        st = nc_simulate_into(engine, ds, opts, progress, progress_user, *out, err);
    return st;
}
