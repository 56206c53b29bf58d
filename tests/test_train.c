/* test_train.c — the fine-tuning trainer (sim/nc_train.h):
 *   - one QCFS step and one BPTT step (T = 4) of a small conv net against
 *     PyTorch (tests/fixtures/train/{qcfs,bptt}.bin, written by
 *     tools/pytorch_train_reference.py): logits, loss, every gradient and the
 *     parameters after one SGD step, within 1e-4 relative;
 *   - a short run that must learn (loss falls, held-out accuracy rises);
 *   - the memory estimate refuses a run over budget; cancel leaves the net as
 *     it was; nodes that cannot be trained are named;
 *   - the step bracket: what a backend that records steps is told (inputs
 *     uploaded before step_begin, nothing that waits inside, no work queued
 *     on a replay, a refused recording queued again, same results);
 *   - the CPU backend's output_loss and optimizer_step are the host path
 *     they replaced (nc_softmax_xent / nc_distill_xent and the share in
 *     float; the per-tensor steps), bit for bit. */
#include "nc_test.h"
#include "nc_test_util.h"

#include "../sim/nc_grad_ops.h"
#include "../sim/nc_train.h"
#include "../sim/nc_train_backend.h"
#include "../sim/nc_workers.h"

#include <stdint.h>

/* ---- the fixture file ----------------------------------------------------- */

#define MAX_RECORDS 64

typedef struct record {
    char name[64];
    nc_tensor *t;
} record;

typedef struct fixture {
    int count;
    record r[MAX_RECORDS];
} fixture;

static const char *fixture_hint =
    "regenerate it with: /usr/bin/python3 tools/pytorch_train_reference.py tests/fixtures/train";

static int read_u32(FILE *f, uint32_t *v) { return fread(v, 4, 1, f) == 1 ? 0 : -1; }

static int read_fixture(const char *path, fixture *fx)
{
    memset(fx, 0, sizeof *fx);
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("# cannot open %s; %s\n", path, fixture_hint);
        return -1;
    }
    char magic[8];
    uint32_t version = 0, count = 0;
    int bad = fread(magic, 8, 1, f) != 1 || memcmp(magic, "NCTRAIN", 8) != 0 || read_u32(f, &version) ||
              version != 1 || read_u32(f, &count) || count > MAX_RECORDS;
    for (uint32_t k = 0; !bad && k < count; k++) {
        uint32_t len, ndim;
        int64_t dims[NC_MAX_DIMS];
        bad = read_u32(f, &len) || len >= sizeof fx->r[k].name || fread(fx->r[k].name, 1, len, f) != len ||
              read_u32(f, &ndim) || ndim > NC_MAX_DIMS || fread(dims, 8, ndim, f) != ndim;
        if (bad)
            break;
        fx->r[k].t = nc_tensor_new((int)ndim, dims);
        int64_t n = fx->r[k].t ? nc_tensor_numel(fx->r[k].t) : -1;
        bad = n < 0 || fread(fx->r[k].t->data, 4, (size_t)n, f) != (size_t)n;
        fx->count = (int)k + 1;
    }
    fclose(f);
    if (bad)
        printf("# %s is not a version-1 NCTRAIN fixture or is truncated; %s\n", path, fixture_hint);
    return bad ? -1 : 0;
}

static void free_fixture(fixture *fx)
{
    for (int k = 0; k < fx->count; k++)
        nc_tensor_free(fx->r[k].t);
}

static const nc_tensor *get(const fixture *fx, const char *name)
{
    for (int k = 0; k < fx->count; k++)
        if (strcmp(fx->r[k].name, name) == 0)
            return fx->r[k].t;
    printf("# fixture has no record '%s'; %s\n", name, fixture_hint);
    return NULL;
}

/* ---- the net of tools/pytorch_train_reference.py --------------------------- */

static nc_tensor *copy_of(const nc_tensor *t) { return nc_tensor_copy(t); }

static int add_neuron_th(nc_net *net, const char *name, int in, nc_neuron_model model, const nc_tensor *th)
{
    int i = add1(net, NC_NODE_NEURON, name, in);
    nc_neuron *nr = &net->nodes[i].neuron;
    nr->model = model;
    nr->levels = 4;
    nr->shift = 0.5f;
    nr->v0_fraction = 0.5f;
    nc_neuron_set_threshold(nr, (int)nc_tensor_numel(th), th->data, NULL);
    return i;
}

static nc_net *reference_net(const fixture *fx, nc_neuron_model model)
{
    nc_net *net = nc_net_new();
    int x = nc_net_add_node(net, NC_NODE_INPUT, "x", 0, NULL);
    net->nodes[x].ndim = 3;
    net->nodes[x].shape[0] = 1, net->nodes[x].shape[1] = 8, net->nodes[x].shape[2] = 8;
    int c1 = add1(net, NC_NODE_CONV2D, "conv1", x);
    net->nodes[c1].weight = copy_of(get(fx, "conv1.weight"));
    net->nodes[c1].bias = copy_of(get(fx, "conv1.bias"));
    for (int p = 0; p < 4; p++)
        net->nodes[c1].pad[p] = 1;
    int n1 = add_neuron_th(net, "n1", c1, model, get(fx, "n1.threshold"));
    int ap = add_pool(net, NC_NODE_AVGPOOL, "pool1", n1, 2, 2);
    int c2 = add1(net, NC_NODE_CONV2D, "conv2", ap);
    net->nodes[c2].weight = copy_of(get(fx, "conv2.weight"));
    net->nodes[c2].bias = copy_of(get(fx, "conv2.bias"));
    net->nodes[c2].groups = 2;
    for (int p = 0; p < 4; p++)
        net->nodes[c2].pad[p] = 1;
    int n2 = add_neuron_th(net, "n2", c2, model, get(fx, "n2.threshold"));
    int mp = add_pool(net, NC_NODE_MAXPOOL, "pool2", n2, 2, 2);
    net->nodes[mp].maxpool_strategy = NC_MAXPOOL_PRE_SPIKE;
    int fl = add1(net, NC_NODE_FLATTEN, "flatten", mp);
    int fc = add1(net, NC_NODE_DENSE, "fc", fl);
    net->nodes[fc].weight = copy_of(get(fx, "fc.weight"));
    net->nodes[fc].bias = copy_of(get(fx, "fc.bias"));
    int out = add1(net, NC_NODE_OUTPUT, "y", fc);
    net->input = x;
    net->output = out;
    snprintf(net->source_path, sizeof net->source_path, "reference net");
    nc_error err = {0};
    if (nc_net_infer_shapes(net, &err) != NC_OK)
        printf("# shapes: %s\n", err.message);
    return net;
}

/* Every value of got within 1e-4 of ref, relative to the largest |ref|. */
static void check_tensor(const char *what, const float *got, const nc_tensor *ref)
{
    if (!ref)
        return;
    int64_t n = nc_tensor_numel(ref);
    double scale = 0, worst = 0;
    int64_t at = 0;
    for (int64_t k = 0; k < n; k++)
        scale = fmax(scale, fabs(ref->data[k]));
    for (int64_t k = 0; k < n; k++) {
        double d = fabs((double)got[k] - ref->data[k]);
        if (d > worst)
            worst = d, at = k;
    }
    NC_CHECK(worst <= 1e-4 * fmax(scale, 1e-3), "%s: |C − PyTorch| = %.3g at %lld (C %.7g, PyTorch %.7g, scale %.3g)",
             what, worst, (long long)at, got[at], ref->data[at], scale);
}

static const char *fixture_name(const nc_train_param *p, const nc_net *net, char *buf, size_t size)
{
    snprintf(buf, size, "%s.%s", net->nodes[p->node].name, p->what);
    return buf;
}

static void compare_step(const char *file, nc_train_mode mode)
{
    fixture fx;
    char path[1200];
    char rel[256];
    snprintf(rel, sizeof rel, "tests/fixtures/train/%s", file);
    nc_test_path(rel, path, sizeof path);
    if (read_fixture(path, &fx) != 0) {
        NC_CHECK(0, "fixture %s unreadable", path);
        free_fixture(&fx);
        return;
    }
    const nc_tensor *config = get(&fx, "config");
    nc_train_options o = nc_train_options_default(mode);
    o.T = (int)config->data[0];
    o.optimizer = NC_OPTIMIZER_SGD;
    o.momentum = config->data[5];
    o.weight_decay = config->data[6];
    o.train_threshold = 1;
    nc_net *net = reference_net(&fx, mode == NC_TRAIN_BPTT ? NC_NEURON_IF : NC_NEURON_QCFS);
    nc_trainer *tr = NULL;
    nc_error err = {0};
    nc_status s = nc_trainer_new(net, &o, 3, &tr, &err);
    NC_CHECK(s == NC_OK, "trainer: %s", err.message);
    if (s == NC_OK) {
        const nc_tensor *labels_f = get(&fx, "labels");
        int32_t labels[3];
        for (int k = 0; k < 3; k++)
            labels[k] = (int32_t)labels_f->data[k];
        float logits[15];
        s = nc_trainer_logits(tr, get(&fx, "input")->data, 3, logits, &err);
        check_tensor("logits", logits, get(&fx, "logits"));
        double loss = 0;
        s = nc_trainer_gradients(tr, get(&fx, "input")->data, labels, 3, &loss, NULL, &err);
        NC_CHECK(s == NC_OK, "gradients: %s", err.message);
        NC_CHECK_CLOSE(loss, get(&fx, "loss")->data[0], 0, 1e-4, "loss");
        int count = nc_trainer_param_count(tr);
        NC_CHECK(count == 8, "8 trained tensors, got %d", count);
        char name[128], key[160];
        for (int k = 0; k < count; k++) {
            nc_train_param p;
            nc_trainer_param(tr, k, &p);
            fixture_name(&p, net, name, sizeof name);
            snprintf(key, sizeof key, "grad.%s", name);
            check_tensor(key, p.grad, get(&fx, key));
        }
        nc_trainer_apply(tr, config->data[4]);
        for (int k = 0; k < count; k++) {
            nc_train_param p;
            nc_trainer_param(tr, k, &p);
            fixture_name(&p, net, name, sizeof name);
            snprintf(key, sizeof key, "step.%s", name);
            check_tensor(key, p.value, get(&fx, key));
        }
    }
    nc_trainer_free(tr);
    nc_net_free(net);
    free_fixture(&fx);
}

static void test_qcfs_step_matches_pytorch(void) { compare_step("qcfs.bin", NC_TRAIN_QCFS); }
static void test_bptt_step_matches_pytorch(void) { compare_step("bptt.bin", NC_TRAIN_BPTT); }

/* ---- learning on a synthetic task ------------------------------------------ */

typedef struct progress_log {
    int calls, cancel_after;
    double first_loss, last_loss;
} progress_log;

static int log_progress(void *user, const nc_train_progress *p)
{
    progress_log *log = user;
    if (log->calls++ == 0)
        log->first_loss = p->loss;
    log->last_loss = p->loss;
    return log->cancel_after > 0 && log->calls >= log->cancel_after;
}

/* The reference net with 4 outputs and fresh small weights. */
static nc_net *learning_net(nc_neuron_model model)
{
    fixture fx;
    char path[1200];
    nc_test_path("tests/fixtures/train/qcfs.bin", path, sizeof path);
    if (read_fixture(path, &fx) != 0) {
        free_fixture(&fx);
        return NULL;
    }
    nc_net *net = reference_net(&fx, model);
    free_fixture(&fx);
    nc_node *fc = &net->nodes[nc_net_find(net, "fc")];
    fc->weight->shape[0] = 4; /* keep the first 4 classes: rows are contiguous */
    fc->bias->shape[0] = 4;
    nc_error err = {0};
    nc_net_infer_shapes(net, &err);
    return net;
}

static void test_run_learns(nc_train_mode mode)
{
    nc_net *net = learning_net(mode == NC_TRAIN_BPTT ? NC_NEURON_IF : NC_NEURON_QCFS);
    NC_CHECK(net != NULL, "net");
    if (!net)
        return;
    nc_dataset *ds = quadrant_dataset(1200, 42);
    nc_train_options o = nc_train_options_default(mode);
    o.T = 4;
    o.epochs = 3;
    o.batch_size = 32;
    o.learning_rate = 1e-2;
    o.val_count = 200;
    o.train_threshold = 1;
    progress_log log = {0};
    o.progress = log_progress;
    o.progress_user = &log;
    nc_train_result r;
    nc_error err = {0};
    nc_status s = nc_train(net, ds, &o, &r, &err);
    NC_CHECK(s == NC_OK, "train: %s", err.message);
    NC_CHECK(log.calls == 3 * 32, "one progress call per batch: %d", log.calls);
    NC_CHECK(r.epochs_run == 3, "3 epochs, ran %d", r.epochs_run);
    NC_CHECK(r.best_val_accuracy > r.val_accuracy_before + 0.2 && r.best_val_accuracy > 0.8,
             "%s: held-out accuracy %.3f → %.3f", nc_train_mode_name(mode), r.val_accuracy_before,
             r.best_val_accuracy);
    NC_CHECK(r.memory_bytes > 0, "memory estimate");
    printf("# %s: held-out %.3f → %.3f (epoch %d), loss %.3f → %.3f, %.2f s, %.1f MB estimated\n",
           nc_train_mode_name(mode), r.val_accuracy_before, r.best_val_accuracy, r.best_epoch, log.first_loss,
           log.last_loss, r.seconds, r.memory_bytes / 1e6);
    free_dataset(ds);
    nc_net_free(net);
}

/* A time budget shorter than one epoch: the run stops after the first. */
static void test_time_budget_stops(void)
{
    nc_net *net = learning_net(NC_NEURON_QCFS);
    NC_CHECK(net != NULL, "net");
    if (!net)
        return;
    nc_dataset *ds = quadrant_dataset(300, 9);
    nc_train_options o = nc_train_options_default(NC_TRAIN_QCFS);
    o.epochs = 5;
    o.batch_size = 50;
    o.time_budget = 1e-6;
    nc_train_result r;
    nc_error err = {0};
    NC_CHECK(nc_train(net, ds, &o, &r, &err) == NC_OK, "train: %s", err.message);
    NC_CHECK(r.epochs_run == 1, "1 of 5 epochs within the budget (ran %d)", r.epochs_run);
    o.time_budget = 0;
    o.epochs = 2;
    NC_CHECK(nc_train(net, ds, &o, &r, &err) == NC_OK && r.epochs_run == 2, "no budget: every epoch");
    free_dataset(ds);
    nc_net_free(net);
}

/* The values of every parameter, copied (nc_trainer_param's are valid only
 * until the next call). */
static float **copy_params(nc_trainer *tr)
{
    int count = nc_trainer_param_count(tr);
    float **values = calloc((size_t)count, sizeof(float *));
    for (int k = 0; k < count; k++) {
        nc_train_param p;
        nc_trainer_param(tr, k, &p);
        values[k] = malloc((size_t)p.count * sizeof(float));
        memcpy(values[k], p.value, (size_t)p.count * sizeof(float));
    }
    return values;
}

static void free_params(float **values, int count)
{
    for (int k = 0; k < count; k++)
        free(values[k]);
    free(values);
}

/* One Adam step on the first 32 images of ds. */
static void adam_step(nc_trainer *tr, const nc_dataset *ds, double lr)
{
    nc_error err = {0};
    NC_CHECK(nc_trainer_gradients(tr, ds->images, ds->labels, 32, NULL, NULL, &err) == NC_OK, "gradients: %s",
             err.message);
    nc_trainer_apply(tr, lr);
}

/* nc_trainer_reset: after a few steps, a reset to the first values goes on
 * exactly as a trainer made afresh with them (Adam's moments and its bias
 * correction restart). */
static void test_trainer_reset_is_a_fresh_start(void)
{
    nc_net *net = learning_net(NC_NEURON_IF), *twin = net ? nc_net_clone(net) : NULL;
    NC_CHECK(net && twin, "nets");
    if (!net || !twin)
        return;
    nc_dataset *ds = quadrant_dataset(64, 5);
    nc_train_options o = nc_train_options_default(NC_TRAIN_BPTT);
    o.T = 4;
    o.train_threshold = 1;
    nc_trainer *tr = NULL, *fresh = NULL;
    nc_error err = {0};
    NC_CHECK(nc_trainer_new(net, &o, 32, &tr, &err) == NC_OK, "trainer: %s", err.message);
    NC_CHECK(nc_trainer_new(twin, &o, 32, &fresh, &err) == NC_OK, "fresh trainer: %s", err.message);
    if (tr && fresh) {
        int count = nc_trainer_param_count(tr);
        float **start = copy_params(tr);
        for (int k = 0; k < 3; k++)
            adam_step(tr, ds, 1e-2);
        float **moved = copy_params(tr);
        nc_train_param p;
        nc_trainer_param(tr, 0, &p);
        NC_CHECK(memcmp(moved[0], start[0], (size_t)p.count * sizeof(float)) != 0, "the steps moved weights");
        nc_trainer_reset(tr, (const float *const *)start);
        for (int k = 0; k < count; k++) {
            nc_trainer_param(tr, k, &p);
            NC_CHECK(memcmp(p.value, start[k], (size_t)p.count * sizeof(float)) == 0, "param %d reset", k);
        }
        adam_step(tr, ds, 1e-2);
        adam_step(fresh, ds, 1e-2);
        float **after = copy_params(tr);
        for (int k = 0; k < count; k++) {
            nc_trainer_param(fresh, k, &p);
            NC_CHECK(memcmp(p.value, after[k], (size_t)p.count * sizeof(float)) == 0,
                     "param %d: the step after a reset is a fresh trainer's first", k);
        }
        free_params(start, count);
        free_params(moved, count);
        free_params(after, count);
    }
    nc_trainer_free(tr);
    nc_trainer_free(fresh);
    free_dataset(ds);
    nc_net_free(net);
    nc_net_free(twin);
}

/* ---- the step bracket (sim/nc_train_backend.h: step_begin / step_end) ------------
 * A backend that is the CPU backend with some entries watched: it answers
 * step_begin from a script, and counts what the trainer queues between
 * step_begin and step_end (and after a failed recording, up to the sync). */

enum { WATCH_FAIL = 3 /* RECORD, then step_end says the recording failed */, WATCH_STEPS = 4 };

typedef struct step_watch {
    const nc_train_backend_ops *cpu; /* the CPU backend's own table */
    nc_train_backend_ops ops;        /* the same with the watching entries */
    int script[WATCH_STEPS];
    int step;                        /* step_begin calls so far */
    int inside, redo;                /* between begin and end; after a failed end, up to the sync */
    int ends;                        /* step_end calls */
    int forbidden;                   /* alloc, release, upload, download or sync inside */
    int convs_inside[WATCH_STEPS], convs_redo[WATCH_STEPS];
} step_watch;

static step_watch W;

static void watch_forbidden(void) { W.forbidden += W.inside; }
static float *watch_alloc(nc_train_backend *b, size_t n) { watch_forbidden(); return W.cpu->alloc(b, n); }
static void watch_release(nc_train_backend *b, float *p) { watch_forbidden(); W.cpu->release(b, p); }
static void watch_upload(nc_train_backend *b, float *d, const float *h, size_t n)
{
    watch_forbidden();
    W.cpu->upload(b, d, h, n);
}
static void watch_download(nc_train_backend *b, float *h, const float *d, size_t n)
{
    watch_forbidden();
    W.cpu->download(b, h, d, n);
}
static void watch_upload_bytes(nc_train_backend *b, void *d, const void *h, size_t n)
{
    watch_forbidden();
    W.cpu->upload_bytes(b, d, h, n);
}
static void watch_download_bytes(nc_train_backend *b, void *h, const void *d, size_t n)
{
    watch_forbidden();
    W.cpu->download_bytes(b, h, d, n);
}
static nc_status watch_sync(nc_train_backend *b, nc_error *err)
{
    watch_forbidden();
    W.redo = 0;
    return W.cpu->sync(b, err);
}
static void watch_conv2d(nc_train_backend *b, const nc_window *g, int cout, int groups, int64_t rows,
                         const float *in, const float *w, const float *bias, float *out)
{
    int k = W.step - 1;
    if (k >= 0 && k < WATCH_STEPS) {
        W.convs_inside[k] += W.inside;
        W.convs_redo[k] += W.redo;
    }
    W.cpu->conv2d(b, g, cout, groups, rows, in, w, bias, out);
}
static int watch_step_begin(nc_train_backend *b, uintptr_t owner, int64_t batch)
{
    int mode = W.step < WATCH_STEPS ? W.script[W.step] : NC_STEP_RUN;
    W.step++;
    W.inside = mode != NC_STEP_RUN;
    return mode == WATCH_FAIL ? NC_STEP_RECORD : mode;
}
static int watch_step_end(nc_train_backend *b)
{
    W.ends++;
    W.inside = 0;
    W.redo = W.script[W.step - 1] == WATCH_FAIL;
    return W.redo;
}

static void watch_init(const nc_train_backend *cpu, const int script[WATCH_STEPS])
{
    memset(&W, 0, sizeof W);
    W.cpu = cpu->ops;
    W.ops = *cpu->ops;
    W.ops.alloc = watch_alloc, W.ops.release = watch_release;
    W.ops.upload = watch_upload, W.ops.download = watch_download;
    W.ops.upload_bytes = watch_upload_bytes, W.ops.download_bytes = watch_download_bytes;
    W.ops.sync = watch_sync, W.ops.conv2d = watch_conv2d;
    W.ops.step_begin = watch_step_begin, W.ops.step_end = watch_step_end;
    memcpy(W.script, script, sizeof W.script);
}

/* A step run as usual, recorded, recorded but refused (queued again), then
 * replayed: nothing that waits is queued inside the bracket; a replay
 * queues no work; a refused recording is queued again and gives what a
 * plain trainer gives, bit for bit (as do the steps before it). */
static void test_step_bracket(void)
{
    nc_net *net = learning_net(NC_NEURON_IF), *twin = net ? nc_net_clone(net) : NULL;
    nc_train_backend *cpu = NULL;
    nc_error err = {0};
    NC_CHECK(net && twin && nc_train_backend_cpu_new(&cpu, &err) == NC_OK, "nets and backend: %s", err.message);
    if (!net || !twin || !cpu)
        return;
    watch_init(cpu, (const int[WATCH_STEPS]){NC_STEP_RUN, NC_STEP_RECORD, WATCH_FAIL, NC_STEP_REPLAY});
    nc_train_backend watched = {&W.ops, cpu->impl};
    nc_dataset *ds = quadrant_dataset(64, 5);
    nc_train_options o = nc_train_options_default(NC_TRAIN_BPTT);
    o.T = 4;
    nc_trainer *tr = NULL, *plain = NULL;
    NC_CHECK(nc_trainer_new_on(net, &o, 32, &watched, &tr, &err) == NC_OK, "watched trainer: %s", err.message);
    NC_CHECK(nc_trainer_new(twin, &o, 32, &plain, &err) == NC_OK, "plain trainer: %s", err.message);
    for (int k = 0; tr && plain && k < WATCH_STEPS; k++) {
        double loss = 0, plain_loss = 1;
        NC_CHECK(nc_trainer_gradients(tr, ds->images, ds->labels, 32, &loss, NULL, &err) == NC_OK, "step %d: %s", k,
                 err.message);
        NC_CHECK(nc_trainer_gradients(plain, ds->images, ds->labels, 32, &plain_loss, NULL, &err) == NC_OK,
                 "plain step %d: %s", k, err.message);
        if (k < WATCH_STEPS - 1) /* the replay ran nothing here: its loss is the last one */
            NC_CHECK(memcmp(&loss, &plain_loss, sizeof loss) == 0, "step %d: loss %.17g, plain %.17g", k, loss,
                     plain_loss);
        nc_trainer_apply(tr, 1e-2);
        nc_trainer_apply(plain, 1e-2);
    }
    NC_CHECK(W.forbidden == 0, "%d calls that wait inside the bracket", W.forbidden);
    NC_CHECK(W.step == WATCH_STEPS && W.ends == WATCH_STEPS - 1, "%d step_begin, %d step_end", W.step, W.ends);
    NC_CHECK(W.convs_inside[0] == 0 && W.convs_inside[1] > 0 && W.convs_inside[2] > 0 && W.convs_inside[3] == 0,
             "convs queued inside: run %d, record %d, refused %d, replay %d", W.convs_inside[0], W.convs_inside[1],
             W.convs_inside[2], W.convs_inside[3]);
    NC_CHECK(W.convs_redo[2] == W.convs_inside[2] && W.convs_redo[0] + W.convs_redo[1] + W.convs_redo[3] == 0,
             "the refused step queued again (%d convs, %d the first time)", W.convs_redo[2], W.convs_inside[2]);
    nc_trainer_free(tr);
    nc_trainer_free(plain);
    nc_train_backend_free(cpu);
    free_dataset(ds);
    nc_net_free(net);
    nc_net_free(twin);
}

typedef struct epoch_rates {
    int epochs;
    double rate[8];    /* each epoch's learning rate (cosine off: constant) */
    double val[8];     /* its held-out accuracy                              */
} epoch_rates;

static int log_epoch_rates(void *user, const nc_train_progress *p)
{
    epoch_rates *log = user;
    if (p->batch == p->batches && p->epoch <= 8) {
        log->rate[p->epoch - 1] = p->learning_rate;
        log->val[p->epoch - 1] = p->val_accuracy;
        log->epochs = p->epoch;
    }
    return 0;
}

/* options.rollback: a learning rate far too large makes epochs worse; each
 * such epoch is undone and the rate halved, and the run ends on the best. */
static void test_rollback_halves_the_rate(void)
{
    nc_net *net = learning_net(NC_NEURON_QCFS);
    NC_CHECK(net != NULL, "net");
    if (!net)
        return;
    nc_dataset *ds = quadrant_dataset(600, 11);
    nc_train_options o = nc_train_options_default(NC_TRAIN_QCFS);
    o.epochs = 5;
    o.batch_size = 50;
    o.learning_rate = 3.0;
    o.cosine = 0;
    o.val_count = 100;
    o.rollback = 1;
    epoch_rates log = {0};
    o.progress = log_epoch_rates;
    o.progress_user = &log;
    nc_train_result r;
    nc_error err = {0};
    NC_CHECK(nc_train(net, ds, &o, &r, &err) == NC_OK, "train: %s", err.message);
    NC_CHECK(log.epochs == 5 && r.rollbacks >= 1, "%d epochs, %d rolled back", log.epochs, r.rollbacks);
    int undone = 0;
    double best = r.val_accuracy_before;
    for (int e = 0; e + 1 < log.epochs; e++) {
        int worse = log.val[e] < best;
        undone += worse;
        best = log.val[e] > best ? log.val[e] : best;
        NC_CHECK_CLOSE(log.rate[e + 1], log.rate[e] * (worse ? 0.5 : 1.0), 0, 1e-12,
                       "epoch %d (held-out %.3f, best %.3f): the next rate", e + 1, log.val[e], best);
    }
    NC_CHECK(undone == r.rollbacks, "%d worse epochs before the last, %d rollbacks", undone, r.rollbacks);
    printf("# rollback: held-out %.3f → best %.3f (epoch %d), %d epochs undone, last rate %g\n",
           r.val_accuracy_before, r.best_val_accuracy, r.best_epoch, r.rollbacks, log.rate[log.epochs - 1]);
    free_dataset(ds);
    nc_net_free(net);
}

static void test_qcfs_run_learns(void) { test_run_learns(NC_TRAIN_QCFS); }
static void test_bptt_run_learns(void) { test_run_learns(NC_TRAIN_BPTT); }

static void test_cancel_keeps_the_net(void)
{
    nc_net *net = learning_net(NC_NEURON_IF);
    NC_CHECK(net != NULL, "net");
    if (!net)
        return;
    nc_net *before = nc_net_clone(net);
    nc_dataset *ds = quadrant_dataset(400, 7);
    nc_train_options o = nc_train_options_default(NC_TRAIN_BPTT);
    o.T = 4;
    o.epochs = 2;
    o.batch_size = 16;
    o.learning_rate = 1e-2;
    o.train_threshold = 1;
    progress_log log = {.cancel_after = 5};
    o.progress = log_progress;
    o.progress_user = &log;
    nc_train_result r;
    nc_error err = {0};
    nc_status s = nc_train(net, ds, &o, &r, &err);
    NC_CHECK(s == NC_ERR_CANCELLED, "cancelled, got %d: %s", s, err.message);
    NC_CHECK(log.calls == 5, "stopped at the batch that asked: %d calls", log.calls);
    int same = 1;
    for (int i = 0; i < net->n_nodes; i++) {
        const nc_node *a = &net->nodes[i], *b = &before->nodes[i];
        if (a->weight)
            same &= memcmp(a->weight->data, b->weight->data, (size_t)nc_tensor_numel(a->weight) * 4) == 0;
        if (a->bias)
            same &= memcmp(a->bias->data, b->bias->data, (size_t)nc_tensor_numel(a->bias) * 4) == 0;
        if (a->kind == NC_NODE_NEURON)
            same &= memcmp(a->neuron.threshold, b->neuron.threshold, (size_t)a->neuron.n_threshold * 4) == 0;
    }
    NC_CHECK(same, "the net holds its parameters from before the run");
    nc_net_free(before);
    nc_net_free(net);
    free_dataset(ds);
}

static void test_memory_budget_refuses(void)
{
    nc_net *net = learning_net(NC_NEURON_IF);
    NC_CHECK(net != NULL, "net");
    if (!net)
        return;
    nc_dataset *ds = quadrant_dataset(100, 3);
    nc_train_options o = nc_train_options_default(NC_TRAIN_BPTT);
    o.T = 64;
    o.batch_size = 50;
    double need = 0, need_small = 0;
    nc_error err = {0};
    NC_CHECK(nc_train_estimate(net, &o, &need, &err) == NC_OK, "estimate: %s", err.message);
    o.T = 4;
    nc_train_estimate(net, &o, &need_small, &err);
    NC_CHECK(need > 8 * need_small, "memory grows with T: T=64 %.0f B, T=4 %.0f B", need, need_small);
    o.T = 64;
    o.memory_budget = need / 2;
    nc_train_result r;
    nc_status s = nc_train(net, ds, &o, &r, &err);
    NC_CHECK(s == NC_ERR_MEMORY, "refused over budget, got %d", s);
    NC_CHECK(strstr(err.message, "GB") && strstr(err.message, "--batch"), "message says how much and what to do: %s",
             err.message);
    free_dataset(ds);
    nc_net_free(net);
}

static void test_untrainable_nodes_named(void)
{
    nc_net *net = learning_net(NC_NEURON_IF);
    NC_CHECK(net != NULL, "net");
    if (!net)
        return;
    net->nodes[nc_net_find(net, "pool2")].maxpool_strategy = NC_MAXPOOL_GATED;
    nc_train_options o = nc_train_options_default(NC_TRAIN_BPTT);
    nc_trainer *tr = NULL;
    nc_error err = {0};
    nc_status s = nc_trainer_new(net, &o, 4, &tr, &err);
    NC_CHECK(s == NC_ERR_UNSUPPORTED && strstr(err.message, "pool2") && strstr(err.message, "--maxpool"),
             "gated MaxPool refused by name: %s", err.message);
    nc_trainer_free(tr);
    net->nodes[nc_net_find(net, "pool2")].maxpool_strategy = NC_MAXPOOL_PRE_SPIKE;
    net->nodes[nc_net_find(net, "n1")].neuron.model = NC_NEURON_RELU;
    s = nc_trainer_new(net, &o, 4, &tr, &err);
    NC_CHECK(s == NC_ERR_UNSUPPORTED && strstr(err.message, "n1"), "ReLU in BPTT refused by name: %s",
             err.message);
    nc_trainer_free(tr);
    nc_net_free(net);
}

/* Horizons {2} with T = 4: the loss only sees the first 2 steps, so every
 * gradient equals that of a T = 2 run with the plain loss; horizons {T} equal
 * the plain loss exactly. */
static void gradients_of(nc_net *net, int T, int n_h, const int *h, float **out, int *count)
{
    nc_train_options o = nc_train_options_default(NC_TRAIN_BPTT);
    o.T = T;
    o.train_threshold = 1;
    o.n_horizons = n_h;
    for (int k = 0; k < n_h; k++)
        o.horizons[k] = h[k];
    nc_trainer *tr = NULL;
    nc_error err = {0};
    *count = 0;
    if (nc_trainer_new(net, &o, 8, &tr, &err) != NC_OK) {
        NC_CHECK(0, "trainer: %s", err.message);
        return;
    }
    nc_dataset *ds = quadrant_dataset(8, 5);
    NC_CHECK(nc_trainer_gradients(tr, ds->images, ds->labels, 8, NULL, NULL, &err) == NC_OK, "%s", err.message);
    int64_t total = 0;
    for (int k = 0; k < nc_trainer_param_count(tr); k++) {
        nc_train_param p;
        nc_trainer_param(tr, k, &p);
        memcpy(out[0] + total, p.grad, (size_t)p.count * sizeof(float));
        total += p.count;
    }
    *count = (int)total;
    free_dataset(ds);
    nc_trainer_free(tr);
}

static void test_loss_horizons(void)
{
    nc_net *net = learning_net(NC_NEURON_IF);
    NC_CHECK(net != NULL, "net");
    if (!net)
        return;
    float *a = calloc(4096, sizeof(float)), *b = calloc(4096, sizeof(float));
    int na, nb;
    int h2[1] = {2}, h4[1] = {4}, h24[2] = {2, 4};
    gradients_of(net, 2, 0, NULL, &a, &na);
    gradients_of(net, 4, 1, h2, &b, &nb);
    double worst = 0, scale = 0;
    for (int k = 0; k < na; k++)
        worst = fmax(worst, fabs(a[k] - b[k])), scale = fmax(scale, fabs(a[k]));
    NC_CHECK(na == nb && na > 0 && scale > 0 && worst <= 1e-5 * scale,
             "horizon {2} at T = 4 equals T = 2: max diff %.3g of %.3g", worst, scale);
    gradients_of(net, 4, 0, NULL, &a, &na);
    gradients_of(net, 4, 1, h4, &b, &nb);
    NC_CHECK(na == nb && memcmp(a, b, (size_t)na * sizeof(float)) == 0, "horizon {T} is the plain loss, bit for bit");
    gradients_of(net, 4, 2, h24, &b, &nb);
    worst = 0;
    for (int k = 0; k < na; k++)
        worst = fmax(worst, fabs(a[k] - b[k]));
    NC_CHECK(worst > 1e-6, "horizons {2, 4} change the gradients");
    free(a);
    free(b);
    nc_net_free(net);
}

/* ---- distillation ------------------------------------------------------------ */

/* The gradients and loss of one batch of 8 quadrant images under options o. */
static double batch_gradients(nc_net *net, const nc_train_options *o, float *out, int *count)
{
    nc_trainer *tr = NULL;
    nc_error err = {0};
    double loss = NAN;
    *count = 0;
    if (nc_trainer_new(net, o, 8, &tr, &err) != NC_OK) {
        NC_CHECK(0, "trainer: %s", err.message);
        return loss;
    }
    nc_dataset *ds = quadrant_dataset(8, 5);
    NC_CHECK(nc_trainer_gradients(tr, ds->images, ds->labels, 8, &loss, NULL, &err) == NC_OK, "%s", err.message);
    for (int k = 0; k < nc_trainer_param_count(tr); k++) {
        nc_train_param p;
        nc_trainer_param(tr, k, &p);
        memcpy(out + *count, p.grad, (size_t)p.count * sizeof(float));
        *count += (int)p.count;
    }
    free_dataset(ds);
    nc_trainer_free(tr);
    return loss;
}

/* Logits [8, 4] of the quadrant batch: the student (BPTT, mean over T) or the
 * teacher (QCFS mode on its ReLU net, i.e. the ANN). */
static void batch_logits(nc_net *net, nc_train_mode mode, int T, float *logits)
{
    nc_train_options o = nc_train_options_default(mode);
    o.T = T;
    nc_trainer *tr = NULL;
    nc_error err = {0};
    nc_dataset *ds = quadrant_dataset(8, 5);
    NC_CHECK(nc_trainer_new(net, &o, 8, &tr, &err) == NC_OK && nc_trainer_logits(tr, ds->images, 8, logits, &err) == NC_OK,
             "logits: %s", err.message);
    free_dataset(ds);
    nc_trainer_free(tr);
}

static void test_distillation(void)
{
    nc_net *net = learning_net(NC_NEURON_IF), *teacher = learning_net(NC_NEURON_RELU);
    NC_CHECK(net && teacher, "nets");
    if (!net || !teacher)
        return;
    nc_node *fc = &teacher->nodes[nc_net_find(teacher, "fc")];
    for (int64_t k = 0; k < nc_tensor_numel(fc->weight); k++) /* a teacher that disagrees */
        fc->weight->data[k] *= k % 3 == 0 ? -2.0f : 1.5f;
    float *a = calloc(4096, sizeof(float)), *b = calloc(4096, sizeof(float));
    int na, nb;
    nc_train_options o = nc_train_options_default(NC_TRAIN_BPTT);
    o.T = 4;
    o.train_threshold = 1;
    double plain = batch_gradients(net, &o, a, &na);
    o.teacher = teacher; /* off (α = 0) with a teacher given: today's behaviour, bit for bit */
    double off = batch_gradients(net, &o, b, &nb);
    NC_CHECK(na == nb && na > 0 && plain == off && memcmp(a, b, (size_t)na * sizeof(float)) == 0,
             "distillation off = the plain loss, bit for bit");
    o.distill_alpha = 0.7;
    o.distill_tau = 3.0;
    double on = batch_gradients(net, &o, b, &nb);
    float student[32], soft[32];
    int32_t labels[8];
    nc_dataset *ds = quadrant_dataset(8, 5);
    memcpy(labels, ds->labels, sizeof labels);
    free_dataset(ds);
    batch_logits(net, NC_TRAIN_BPTT, 4, student);
    batch_logits(teacher, NC_TRAIN_QCFS, 1, soft);
    double want = nc_distill_xent(8, 4, student, soft, labels, 0.7, 3.0, NULL, NULL);
    NC_CHECK_CLOSE(on, want, 1e-6, 1e-6, "trainer loss = nc_distill_xent of the student's and the ANN's logits");
    double worst = 0;
    for (int k = 0; k < na; k++)
        worst = fmax(worst, fabs(a[k] - b[k]));
    NC_CHECK(worst > 1e-6, "distillation changes the gradients (max diff %.3g)", worst);
    /* the teacher must give as many class scores as the student */
    nc_train_options bad = o;
    nc_net *wrong = learning_net(NC_NEURON_RELU);
    nc_node *wfc = &wrong->nodes[nc_net_find(wrong, "fc")];
    wfc->weight->shape[0] = 3, wfc->bias->shape[0] = 3;
    nc_error err = {0};
    nc_net_infer_shapes(wrong, &err);
    bad.teacher = wrong;
    nc_trainer *tr = NULL;
    NC_CHECK(nc_trainer_new(net, &bad, 8, &tr, &err) == NC_ERR_ARGUMENT && strstr(err.message, "class scores"),
             "a teacher with 3 classes is refused: %s", err.message);
    nc_trainer_free(tr);
    nc_net_free(wrong);
    free(a), free(b);
    nc_net_free(net);
    nc_net_free(teacher);
}

/* The CPU backend splits big conv and dense layers over the cores, each slice
 * with its own parameter-gradient buffer added in slice order: forward
 * outputs, input gradients and accumulated parameter gradients equal the
 * one-call kernels' (within float rounding: the sums are grouped by slice). */
static float *random_floats(size_t n, uint64_t *state, float scale)
{
    float *a = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        *state = *state * 6364136223846793005ull + 1442695040888963407ull;
        a[i] = scale * ((float)(*state >> 40) / (float)(1 << 24) * 2.0f - 1.0f);
    }
    return a;
}

/* Within 1e-5 of the largest |want| (sums of thousands of products cancel:
 * their rounding is relative to the terms, not to the result) or 1e-4 of
 * |want[i]|. */
static int close_to(const char *what, const float *got, const float *want, size_t n)
{
    size_t bad = 0;
    float scale = 0;
    for (size_t i = 0; i < n; i++)
        scale = fabsf(want[i]) > scale ? fabsf(want[i]) : scale;
    for (size_t i = 0; i < n; i++)
        if (!(fabsf(got[i] - want[i]) <= 1e-5f * scale + 1e-4f * fabsf(want[i])) && bad++ < 3)
            printf("# %s[%zu]: %.8g, expected %.8g\n", what, i, got[i], want[i]);
    return bad == 0;
}

static void test_cpu_backend_slices(void)
{
    nc_train_backend *b = NULL;
    nc_error err = {0};
    NC_CHECK(nc_train_backend_new("cpu", &b, &err) == NC_OK, "cpu backend: %s", err.message);
    if (!b)
        return;
    enum { ROWS = 37, CIN = 16, COUT = 24, H = 14, FIN = 300, FOUT = 70 };
    uint64_t state = 99;
    nc_window g = square_window(CIN, H, H, 3, 1, 1);
    size_t n_in = (size_t)ROWS * CIN * H * H, n_out = (size_t)ROWS * COUT * H * H, n_w = (size_t)COUT * CIN * 9;
    float *in = random_floats(n_in, &state, 1), *w = random_floats(n_w, &state, 0.2f);
    float *bias = random_floats(COUT, &state, 0.1f), *dout = random_floats(n_out, &state, 1);
    float *out = malloc(n_out * sizeof(float)), *ref = malloc(n_out * sizeof(float));
    float *din = malloc(n_in * sizeof(float)), *din_ref = malloc(n_in * sizeof(float));
    /* parameter gradients start non-zero: the backward passes accumulate */
    float *dw = random_floats(n_w, &state, 1), *dw_ref = malloc(n_w * sizeof(float));
    float *db = random_floats(COUT, &state, 1), *db_ref = malloc(COUT * sizeof(float));
    memcpy(dw_ref, dw, n_w * sizeof(float));
    memcpy(db_ref, db, COUT * sizeof(float));
    size_t work_floats = nc_conv2d_backward_work_floats(&g, COUT, 1, ROWS);
    if (nc_conv2d_work_floats(&g, COUT, 1, ROWS) > work_floats)
        work_floats = nc_conv2d_work_floats(&g, COUT, 1, ROWS);
    float *work = malloc(work_floats * sizeof(float));
    b->ops->conv2d(b, &g, COUT, 1, ROWS, in, w, bias, out);
    nc_conv2d(&g, COUT, 1, ROWS, in, w, bias, ref, work, work_floats);
    NC_CHECK(close_to("conv forward", out, ref, n_out), "conv forward in slices");
    b->ops->conv2d_backward(b, &g, COUT, 1, ROWS, in, w, dout, din, dw, db);
    nc_conv2d_backward(&g, COUT, 1, ROWS, in, w, dout, din_ref, dw_ref, db_ref, work, work_floats);
    NC_CHECK(close_to("conv din", din, din_ref, n_in) && close_to("conv dweight", dw, dw_ref, n_w) &&
                 close_to("conv dbias", db, db_ref, COUT),
             "conv backward in slices");
    /* dense */
    size_t n_dw = (size_t)FIN * FOUT;
    float *x = random_floats((size_t)ROWS * FIN, &state, 1), *wd = random_floats(n_dw, &state, 0.1f);
    float *dy = random_floats((size_t)ROWS * FOUT, &state, 1), *y = malloc((size_t)ROWS * FOUT * sizeof(float));
    float *y_ref = malloc((size_t)ROWS * FOUT * sizeof(float)), *dx = malloc((size_t)ROWS * FIN * sizeof(float));
    float *dx_ref = malloc((size_t)ROWS * FIN * sizeof(float));
    float *dwd = random_floats(n_dw, &state, 1), *dwd_ref = malloc(n_dw * sizeof(float));
    memcpy(dwd_ref, dwd, n_dw * sizeof(float));
    b->ops->dense(b, ROWS, FIN, FOUT, x, wd, NULL, y);
    nc_dense(ROWS, FIN, FOUT, x, wd, NULL, y_ref);
    b->ops->dense_backward(b, ROWS, FIN, FOUT, x, wd, dy, dx, dwd, NULL);
    nc_dense_backward(ROWS, FIN, FOUT, x, wd, dy, dx_ref, dwd_ref, NULL);
    NC_CHECK(close_to("dense forward", y, y_ref, (size_t)ROWS * FOUT) &&
                 close_to("dense din", dx, dx_ref, (size_t)ROWS * FIN) && close_to("dense dweight", dwd, dwd_ref, n_dw),
             "dense forward and backward in slices");
    NC_CHECK(b->ops->sync(b, &err) == NC_OK, "no failure recorded: %s", err.message);
    printf("# %d cores\n", nc_workers_count(0));
    free(in), free(w), free(bias), free(dout), free(out), free(ref), free(din), free(din_ref);
    free(dw), free(dw_ref), free(db), free(db_ref), free(work);
    free(x), free(wd), free(dy), free(y), free(y_ref), free(dx), free(dx_ref), free(dwd), free(dwd_ref);
    nc_train_backend_free(b);
}

/* ---- the CPU backend's step operations against the path they replaced ---- */

static void test_cpu_output_loss_is_the_host_loss(void)
{
    nc_train_backend *b = NULL;
    nc_error err = {0};
    NC_CHECK(nc_train_backend_new("cpu", &b, &err) == NC_OK, "cpu backend: %s", err.message);
    if (!b)
        return;
    enum { ROWS = 13, CLASSES = 7 };
    uint64_t state = 5;
    float *z = random_floats(ROWS * CLASSES, &state, 4), *t = random_floats(ROWS * CLASSES, &state, 6);
    float d[ROWS * CLASSES], ref[ROWS * CLASSES];
    int32_t labels[ROWS];
    for (int r = 0; r < ROWS; r++)
        labels[r] = r % CLASSES;
    labels[3] = CLASSES; /* out of range: no loss, no gradient */
    int32_t *dev_labels = b->ops->alloc_bytes(b, sizeof labels);
    double *sums = b->ops->alloc_bytes(b, 2 * sizeof(double)), host[2];
    b->ops->upload_bytes(b, dev_labels, labels, sizeof labels);
    static const double alphas[] = {0, 0.5, 1}, taus[] = {1, 4};
    for (int c = 0; c < 14; c++) { /* 2 plain, then α × τ × share */
        int teacher = c >= 2;
        double alpha = teacher ? alphas[(c - 2) / 4] : 0, tau = teacher ? taus[(c - 2) / 2 % 2] : 1;
        float share = c % 2 ? 0.375f : 1.0f;
        int64_t right = 0;
        double want = teacher ? nc_distill_xent(ROWS, CLASSES, z, t, labels, alpha, tau, ref, &right)
                              : nc_softmax_xent(ROWS, CLASSES, z, labels, ref, &right);
        for (int k = 0; share != 1.0f && k < ROWS * CLASSES; k++)
            ref[k] *= share; /* the trainer's scale_dlogits */
        b->ops->output_loss(b, ROWS, CLASSES, z, dev_labels, teacher ? t : NULL, alpha, tau, share, d, sums);
        b->ops->download_bytes(b, host, sums, sizeof host);
        NC_CHECK(b->ops->sync(b, &err) == NC_OK, "sync: %s", err.message);
        NC_CHECK(host[0] == want && host[1] == (double)right && memcmp(d, ref, sizeof d) == 0,
                 "case %d (teacher %d, α %g, τ %g, share %g): loss %.17g against %.17g, correct %g against %lld", c,
                 teacher, alpha, tau, (double)share, host[0], want, host[1], (long long)right);
    }
    b->ops->release_bytes(b, dev_labels);
    b->ops->release_bytes(b, sums);
    free(z), free(t);
    nc_train_backend_free(b);
}

static void test_cpu_optimizer_step_is_per_tensor(void)
{
    nc_train_backend *b = NULL;
    nc_error err = {0};
    NC_CHECK(nc_train_backend_new("cpu", &b, &err) == NC_OK, "cpu backend: %s", err.message);
    if (!b)
        return;
    enum { TENSORS = 4 };
    static const int64_t counts[TENSORS] = {1, 7, 1000, 300000};
    static const int decay[TENSORS] = {1, 0, 1, 1}, clamp[TENSORS] = {0, 1, 0, 1};
    uint64_t state = 17;
    for (int adam = 0; adam < 2; adam++) {
        float *a[TENSORS][4], *m[TENSORS][4]; /* value, grad, m, v: per-tensor path a, multi-tensor path m */
        for (int k = 0; k < TENSORS; k++)
            for (int q = 0; q < 4; q++) {
                a[k][q] = random_floats((size_t)counts[k], &state, q == 0 && clamp[k] ? 2e-4f : 1.0f);
                if (q == 3)
                    for (int64_t j = 0; j < counts[k]; j++)
                        a[k][q][j] = fabsf(a[k][q][j]); /* Adam's second moment */
                m[k][q] = malloc((size_t)counts[k] * sizeof(float));
                memcpy(m[k][q], a[k][q], (size_t)counts[k] * sizeof(float));
            }
        for (int step = 1; step <= 3; step++) {
            nc_opt_step st = {.adam = adam, .lr = adam ? 1e-3 : 0.01, .momentum = 0.9, .beta1 = 0.9, .beta2 = 0.999,
                              .epsilon = 1e-8, .weight_decay = 5e-4, .min_value = 1e-4f};
            st.c1 = 1.0 - pow(st.beta1, step), st.c2 = 1.0 - pow(st.beta2, step);
            nc_opt_tensor t[TENSORS];
            for (int k = 0; k < TENSORS; k++) {
                double wd = decay[k] ? st.weight_decay : 0.0;
                if (adam)
                    b->ops->adam_step(b, counts[k], a[k][0], a[k][1], a[k][2], a[k][3], st.lr, st.beta1, st.beta2,
                                      st.epsilon, st.c1, st.c2, wd, clamp[k], st.min_value);
                else
                    b->ops->sgd_step(b, counts[k], a[k][0], a[k][1], a[k][2], st.lr, st.momentum, wd, clamp[k],
                                     st.min_value);
                t[k] = (nc_opt_tensor){m[k][0], m[k][1], m[k][2], m[k][3], counts[k], decay[k], clamp[k]};
            }
            b->ops->optimizer_step(b, t, TENSORS, &st);
        }
        for (int k = 0; k < TENSORS; k++) {
            for (int q = 0; q < 4; q++)
                NC_CHECK(memcmp(a[k][q], m[k][q], (size_t)counts[k] * sizeof(float)) == 0,
                         "%s, tensor of %lld, buffer %d: optimizer_step is the per-tensor step, bit for bit",
                         adam ? "adam" : "sgd", (long long)counts[k], q);
            for (int q = 0; q < 4; q++)
                free(a[k][q]), free(m[k][q]);
        }
    }
    nc_train_backend_free(b);
}

int main(void)
{
    NC_RUN(test_qcfs_step_matches_pytorch);
    NC_RUN(test_bptt_step_matches_pytorch);
    NC_RUN(test_qcfs_run_learns);
    NC_RUN(test_bptt_run_learns);
    NC_RUN(test_cancel_keeps_the_net);
    NC_RUN(test_memory_budget_refuses);
    NC_RUN(test_untrainable_nodes_named);
    NC_RUN(test_loss_horizons);
    NC_RUN(test_distillation);
    NC_RUN(test_time_budget_stops);
    NC_RUN(test_trainer_reset_is_a_fresh_start);
    NC_RUN(test_step_bracket);
    NC_RUN(test_rollback_halves_the_rate);
    NC_RUN(test_cpu_backend_slices);
    NC_RUN(test_cpu_output_loss_is_the_host_loss);
    NC_RUN(test_cpu_optimizer_step_is_per_tensor);
    return nc_test_done();
}
