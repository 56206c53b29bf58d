/* nc_train_run.c — a whole fine-tuning run (nc_train, nc_train.h): epochs of
 * shuffled, augmented batches, the learning-rate schedule, the held-out
 * accuracy that picks the best epoch, the time budget.  A step is one
 * trainer's (sim/nc_train.c) or, with o->ranks > 1, every rank's of a
 * data-parallel group (sim/nc_train_dp.h); the loop is the same. */
#include "nc_train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nc_budget.h"
#include "nc_engine_registry.h"
#include "nc_evaluate.h"
#include "nc_train_dp.h"

static double learning_rate_of(const nc_train_options *o)
{
    if (o->learning_rate > 0)
        return o->learning_rate;
    return o->optimizer == NC_OPTIMIZER_SGD ? 1e-3 : 1e-4;
}

static double physical_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (double)pages * (double)size : 8e9;
}

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void shuffle(int64_t *order, int64_t n, uint64_t *rng)
{
    for (int64_t k = n - 1; k > 0; k--) {
        int64_t j = (int64_t)(splitmix64(rng) % (uint64_t)(k + 1));
        int64_t tmp = order[k];
        order[k] = order[j];
        order[j] = tmp;
    }
}

/* One image into dst with the options' random crop and flip. */
static void augment_image(const nc_dataset *ds, const float *src, const nc_train_options *o, uint64_t *rng,
                          float *dst)
{
    int C = ds->channels, H = ds->height, W = ds->width, p = o->crop_padding;
    int dy = p > 0 ? (int)(splitmix64(rng) % (uint64_t)(2 * p + 1)) - p : 0;
    int dx = p > 0 ? (int)(splitmix64(rng) % (uint64_t)(2 * p + 1)) - p : 0;
    int flip = o->flip && (splitmix64(rng) & 1);
    for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                int sy = y + dy, sx = (flip ? W - 1 - x : x) + dx;
                int inside = sy >= 0 && sy < H && sx >= 0 && sx < W;
                dst[((int64_t)c * H + y) * W + x] = inside ? src[((int64_t)c * H + sy) * W + sx] : o->crop_fill;
            }
}

typedef struct param_copy {
    float **values;
    int count;
} param_copy;

/* A host copy of the working parameters (the best epoch's). */
static int params_save(const nc_trainer *tr, param_copy *pc)
{
    if (!pc->values) {
        pc->count = nc_trainer_param_count(tr);
        pc->values = calloc((size_t)pc->count + 1, sizeof(float *));
        if (!pc->values)
            return -1;
    }
    for (int k = 0; k < pc->count; k++) {
        nc_train_param p;
        nc_trainer_param(tr, k, &p);
        if (!pc->values[k] && !(pc->values[k] = malloc((size_t)p.count * sizeof(float))))
            return -1;
        memcpy(pc->values[k], p.value, (size_t)p.count * sizeof(float));
    }
    return 0;
}

/* The net's own array of parameter p. */
static float *net_array(nc_net *net, const nc_train_param *p)
{
    nc_node *n = &net->nodes[p->node];
    if (strcmp(p->what, "weight") == 0)
        return n->weight->data;
    if (strcmp(p->what, "bias") == 0)
        return n->bias->data;
    return n->neuron.threshold;
}

/* Writes a saved copy into the net. */
static void params_to_net(const nc_trainer *tr, nc_net *net, const param_copy *pc)
{
    for (int k = 0; k < pc->count; k++) {
        nc_train_param p;
        nc_trainer_param(tr, k, &p);
        memcpy(net_array(net, &p), pc->values[k], (size_t)p.count * sizeof(float));
    }
}

static void params_free(param_copy *pc)
{
    for (int k = 0; pc->values && k < pc->count; k++)
        free(pc->values[k]);
    free(pc->values);
    pc->values = NULL;
}

/* Accuracy on images [first, first + count) of ds, from the trainer's
 * logits (rank 0's in a group: every rank holds the same parameters). */
static nc_status held_out_accuracy(nc_trainer *tr, const nc_dataset *ds, int64_t first, int64_t count, int batch,
                                   int classes, float *images, int32_t *labels, float *logits, double *accuracy,
                                   nc_error *err)
{
    int64_t right = 0;
    for (int64_t b = 0; b < count; b += batch) {
        int n = (int)(count - b < batch ? count - b : batch);
        nc_dataset_batch(ds, first + b, n, images, labels);
        nc_status s = nc_trainer_logits(tr, images, n, logits, err);
        if (s != NC_OK)
            return s;
        for (int k = 0; k < n; k++)
            right += nc_argmax(logits + (int64_t)k * classes, classes) == labels[k];
    }
    *accuracy = count > 0 ? (double)right / (double)count : -1;
    return NC_OK;
}

typedef struct run_state {
    nc_trainer *tr;      /* the one trainer, or rank 0's of the group  */
    nc_train_group *group; /* o->ranks > 1                              */
    nc_net *net;
    int eval_batch, classes;
    float *logits;       /* [eval_batch, classes]                     */
    const nc_dataset *ds;
    const nc_train_options *o;
    int64_t n_train, n_val, batches;
    int64_t *order;
    float *images;
    float *raw;          /* a streamed set's batch before augmentation */
    int32_t *labels;
    uint64_t rng;
    double start;
    int epochs;          /* planned: o->epochs, fewer when the time budget says so */
    double lr_scale;     /* 1, halved at each rollback                 */
    double last_val;     /* the last epoch's held-out accuracy (−1)    */
} run_state;

/* Batch b of an epoch, augmented, into rs->images and rs->labels.  A set in
 * memory is read in the epoch's shuffled order; a stream is read in its own
 * order (its source shuffles, as a PyTorch DataLoader does). */
static void gather_batch(run_state *rs, int64_t first, int n)
{
    const nc_dataset *ds = rs->ds;
    int64_t feature = (int64_t)ds->channels * ds->height * ds->width;
    if (ds->stream)
        nc_dataset_batch(ds, first, n, rs->raw, rs->labels);
    for (int k = 0; k < n; k++) {
        int64_t index = rs->order[first + k];
        const float *src = ds->stream ? rs->raw + k * feature : ds->images + index * feature;
        augment_image(ds, src, rs->o, &rs->rng, rs->images + k * feature);
        if (!ds->stream)
            rs->labels[k] = ds->labels[index];
    }
}

/* One optimiser step on the batch in rs->images / rs->labels. */
static nc_status train_step(run_state *rs, int n, double lr, double *loss, int64_t *correct, nc_error *err)
{
    if (rs->group)
        return nc_train_group_step(rs->group, rs->images, rs->labels, n, lr, loss, correct, err);
    nc_status s = nc_trainer_gradients(rs->tr, rs->images, rs->labels, n, loss, correct, err);
    if (s == NC_OK)
        nc_trainer_apply(rs->tr, lr);
    return s;
}

static nc_status held_out(run_state *rs, double *accuracy, nc_error *err)
{
    return held_out_accuracy(rs->tr, rs->ds, rs->n_train, rs->n_val, rs->eval_batch, rs->classes, rs->images,
                             rs->labels, rs->logits, accuracy, err);
}

/* Every trainer (each rank of a group) back to a saved copy, its optimiser
 * state cleared. */
static void params_to_trainers(run_state *rs, const param_copy *pc)
{
    if (!rs->group) {
        nc_trainer_reset(rs->tr, (const float *const *)pc->values);
        return;
    }
    for (int r = 0; r < nc_train_group_ranks(rs->group); r++)
        nc_trainer_reset(nc_train_group_trainer(rs->group, r), (const float *const *)pc->values);
}

static nc_status run_epoch(run_state *rs, int epoch, nc_train_result *res, nc_error *err)
{
    const nc_train_options *o = rs->o;
    double lr0 = learning_rate_of(o) * rs->lr_scale, loss_sum = 0;
    int64_t right = 0, seen = 0;
    if (!rs->ds->stream)
        shuffle(rs->order, rs->n_train, &rs->rng);
    for (int64_t b = 0; b < rs->batches; b++) {
        int64_t first = b * o->batch_size;
        int n = (int)(rs->n_train - first < o->batch_size ? rs->n_train - first : o->batch_size);
        gather_batch(rs, first, n);
        double loss;
        int64_t correct;
        double progress = (double)((epoch - 1) * rs->batches + b) / (double)(rs->epochs * rs->batches);
        double lr = o->cosine ? lr0 * 0.5 * (1.0 + cos(3.14159265358979323846 * progress)) : lr0;
        nc_status s = train_step(rs, n, lr, &loss, &correct, err);
        if (s != NC_OK)
            return s;
        loss_sum += loss * n;
        right += correct;
        seen += n;
        res->final_loss = loss_sum / (double)seen;
        nc_train_progress p = {.mode = o->mode, .epoch = epoch, .epochs = rs->epochs, .batch = b + 1,
                               .batches = rs->batches, .loss = loss_sum / (double)seen,
                               .train_accuracy = (double)right / (double)seen, .val_accuracy = -1,
                               .learning_rate = lr, .seconds = nc_now() - rs->start};
        if (b + 1 == rs->batches && rs->n_val > 0) {
            s = held_out(rs, &p.val_accuracy, err);
            if (s != NC_OK)
                return s;
            rs->last_val = p.val_accuracy;
        }
        if (o->progress && o->progress(o->progress_user, &p))
            return nc_fail(err, NC_ERR_CANCELLED, "fine-tuning cancelled in epoch %d, batch %lld", epoch,
                           (long long)(b + 1));
        if (b + 1 == rs->batches && p.val_accuracy > res->best_val_accuracy) {
            res->best_val_accuracy = p.val_accuracy;
            res->best_epoch = epoch;
        }
    }
    return NC_OK;
}

/* With a time budget: the epochs that fit (nc_budget_epochs: by the longest
 * epoch so far). */
static void fit_epochs_to_budget(run_state *rs, int epochs_done, double longest_epoch)
{
    if (rs->o->time_budget > 0)
        rs->epochs = nc_budget_epochs(rs->epochs, epochs_done, rs->o->time_budget, nc_now() - rs->start,
                                      longest_epoch);
}

static nc_status check_run(const nc_net *net, const nc_dataset *ds, const nc_train_options *o, int64_t *n_train,
                           nc_error *err)
{
    if (o->epochs < 1 || o->batch_size < 1)
        return nc_fail(err, NC_ERR_ARGUMENT, "fine-tuning needs at least 1 epoch and a batch of 1 image or more");
    nc_status s = nc_check_dataset_fits(net, ds, err);
    if (s != NC_OK)
        return s;
    if (o->val_count < 0 || o->val_count >= ds->count)
        return nc_fail(err, NC_ERR_ARGUMENT, "%s: cannot hold out %lld of its %lld images for validation",
                       ds->path, (long long)o->val_count, (long long)ds->count);
    *n_train = ds->count - o->val_count;
    if (o->train_count > 0 && o->train_count < *n_train)
        *n_train = o->train_count;
    return NC_OK;
}

/* The memory a run may use: the option, else 60 % of the host's memory
 * (cpu) or 90 % of the device's free memory (gpu). */
static double default_budget(const nc_train_options *o)
{
    const nc_engine_info *info = o->engine ? nc_engine_find(o->engine) : NULL;
    double device = info && info->train_memory ? info->train_memory() : 0;
    return device > 0 ? device : 0.6 * physical_memory();
}

/* Each rank holds its share of a batch: the budget is per device. */
static nc_status check_budget(const nc_net *net, const nc_train_options *o, double *bytes, nc_error *err)
{
    nc_train_options per_rank = *o;
    if (o->ranks > 1)
        per_rank.batch_size = (o->batch_size + o->ranks - 1) / o->ranks;
    nc_status s = nc_train_estimate(net, &per_rank, bytes, err);
    if (s != NC_OK)
        return s;
    double budget = o->memory_budget > 0 ? o->memory_budget : default_budget(o);
    int gpu = o->engine && strcmp(o->engine, "gpu") == 0;
    if (*bytes > budget)
        return nc_fail(err, NC_ERR_MEMORY,
                       "fine-tuning %s with batch %d%s needs about %.2f GB but the %s budget is %.2f GB; use a "
                       "smaller --batch%s",
                       net->source_path, o->batch_size, o->mode == NC_TRAIN_BPTT ? " over T steps" : "",
                       *bytes / 1e9, gpu ? "GPU" : "memory", budget / 1e9,
                       o->mode == NC_TRAIN_BPTT ? " or --train-T" : "");
    return NC_OK;
}

/* The trainer, or the group of o->ranks trainers (rank 0's trains `net`),
 * and the run's host buffers. */
static nc_status run_setup(run_state *rs, nc_net *net, nc_error *err)
{
    const nc_train_options *o = rs->o;
    const nc_dataset *ds = rs->ds;
    nc_status s;
    if (o->ranks > 1) {
        s = nc_train_group_new(net, o, o->ranks, o->batch_size, 0, &rs->group, err);
        rs->tr = s == NC_OK ? nc_train_group_trainer(rs->group, 0) : NULL;
        rs->eval_batch = (o->batch_size + o->ranks - 1) / o->ranks;
    } else {
        s = nc_trainer_new(net, o, o->batch_size, &rs->tr, err);
        rs->eval_batch = o->batch_size;
    }
    if (s != NC_OK)
        return s;
    size_t feature = (size_t)ds->channels * (size_t)ds->height * (size_t)ds->width;
    rs->classes = (int)nc_node_numel(&net->nodes[net->output]);
    rs->order = malloc((size_t)rs->n_train * sizeof(int64_t));
    rs->images = malloc((size_t)o->batch_size * feature * sizeof(float));
    rs->labels = malloc((size_t)o->batch_size * sizeof(int32_t));
    rs->raw = ds->stream ? malloc((size_t)o->batch_size * feature * sizeof(float)) : NULL;
    rs->logits = malloc((size_t)rs->eval_batch * (size_t)rs->classes * sizeof(float));
    if (!rs->order || !rs->images || !rs->labels || (ds->stream && !rs->raw) || !rs->logits)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for fine-tuning");
    for (int64_t k = 0; k < rs->n_train; k++)
        rs->order[k] = k;
    return NC_OK;
}

static void run_free(run_state *rs)
{
    free(rs->order);
    free(rs->images);
    free(rs->raw);
    free(rs->labels);
    free(rs->logits);
    if (rs->group)
        nc_train_group_free(rs->group);
    else
        nc_trainer_free(rs->tr);
}

nc_status nc_train(nc_net *net, const nc_dataset *ds, const nc_train_options *o, nc_train_result *result,
                   nc_error *err)
{
    *result = (nc_train_result){.best_val_accuracy = -1, .val_accuracy_before = -1};
    run_state rs = {.ds = ds, .o = o, .net = net, .rng = o->seed ^ 0x5EEDull, .start = nc_now(),
                    .epochs = o->epochs, .lr_scale = 1, .last_val = -1};
    nc_status s = check_run(net, ds, o, &rs.n_train, err);
    if (s == NC_OK)
        s = check_budget(net, o, &result->memory_bytes, err);
    if (s != NC_OK)
        return s;
    rs.n_val = o->val_count;
    rs.batches = (rs.n_train + o->batch_size - 1) / o->batch_size;
    /* The net is not touched until the run ends well: the backend trains a
     * working copy, so a cancel or an error leaves the net as it was. */
    param_copy best = {0};
    s = run_setup(&rs, net, err);
    if (s == NC_OK && rs.n_val > 0) {
        s = held_out(&rs, &result->val_accuracy_before, err);
        result->best_val_accuracy = result->val_accuracy_before;
        if (s == NC_OK && params_save(rs.tr, &best) != 0)
            s = nc_fail(err, NC_ERR_MEMORY, "out of memory for the best checkpoint");
    }
    double longest_epoch = 0;
    for (int epoch = 1; s == NC_OK && epoch <= rs.epochs; epoch++) {
        int best_before = result->best_epoch;
        /* the first epoch's time counts from the start: the set-up and the held-out pass are its */
        double began = epoch == 1 ? rs.start : nc_now();
        s = run_epoch(&rs, epoch, result, err);
        result->epochs_run = epoch;
        longest_epoch = nc_now() - began > longest_epoch ? nc_now() - began : longest_epoch;
        fit_epochs_to_budget(&rs, epoch, longest_epoch);
        if (s == NC_OK && rs.n_val > 0 && result->best_epoch != best_before && params_save(rs.tr, &best) != 0)
            s = nc_fail(err, NC_ERR_MEMORY, "out of memory for the best checkpoint");
        if (s == NC_OK && o->rollback && rs.n_val > 0 && rs.last_val < result->best_val_accuracy &&
            epoch < rs.epochs) {
            params_to_trainers(&rs, &best);
            rs.lr_scale *= 0.5;
            result->rollbacks++;
        }
    }
    if (s == NC_OK && rs.n_val > 0)
        params_to_net(rs.tr, net, &best);
    else if (s == NC_OK) {
        result->best_epoch = result->epochs_run;
        s = nc_trainer_sync_net(rs.tr, err);
    }
    result->seconds = nc_now() - rs.start;
    params_free(&best);
    run_free(&rs);
    return s;
}
