/* nc_train.c — the fine-tuning trainer: forward with saved activations,
 * backward in reverse node order, optimiser, epochs (see nc_train.h).
 *
 * Values: every node keeps its output of the current batch in val[i].  In
 * BPTT a value is either "constant" (rows = N: the same at every step, e.g.
 * the input and the layers before the first IF under direct encoding) or
 * time-varying (rows = T·N, time-major).  A constant value feeding a
 * time-varying consumer is expanded by the consumer; on the way back the
 * consumer's gradient (T·N rows) is summed over the steps into the constant
 * producer's gradient (N rows) — the chain rule for a value used T times.
 * In QCFS mode nothing is constant and rows = N. */
#include "nc_train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nc_allreduce.h"
#include "nc_config.h"
#include "nc_evaluate.h"
#include "nc_grad_ops.h"
#include "nc_train_backend.h"
#include "nc_engine_registry.h"

typedef struct train_value {
    float *data;       /* rows × numel, backend memory; owned unless `alias` */
    int alias;         /* flatten/output: data is the input's                */
    int constant;      /* BPTT: the same at every step (rows = N)            */
} train_value;

/* A node's parameters in backend memory: the working values (weight, bias,
 * threshold — also those not trained, which the kernels read) and the
 * gradients of the trained ones (NULL otherwise). */
typedef struct node_params {
    float *weight, *bias, *threshold;
    float *weight_grad, *bias_grad, *threshold_grad;
} node_params;

/* Data parallel (sim/nc_train_dp.h): the gradients of the nodes whose
 * backward pass is done, waiting to be summed across the ranks together. */
typedef struct grad_bucket {
    nc_allreduce *comm;   /* NULL: one rank, nothing to sum           */
    int rank;
    double share;         /* this rank's images / the batch's images  */
    int64_t cap;          /* floats that make a bucket full           */
    int n;
    int64_t floats;
    float *bufs[NC_ALLREDUCE_MAX_BUFFERS];
    int64_t counts[NC_ALLREDUCE_MAX_BUFFERS];
    nc_status status;     /* the first failed sum of this batch       */
    nc_error err;
} grad_bucket;

/* output_loss results kept per step: all T steps, then each horizon */
#define NC_TRAIN_LOSS_SLOTS (1 + (int)(sizeof(((nc_train_options *)0)->horizons) / sizeof(int)))

typedef struct opt_state {
    float *host;       /* the net's array: written by nc_trainer_sync_net */
    float *value;      /* backend: node_params' working value             */
    float *grad;       /* backend: node_params' gradient                  */
    float *m, *v;      /* backend: momentum / Adam moments                */
    float *host_value, *host_grad; /* nc_trainer_param's copies            */
    int64_t count;
    int decay;         /* weight decay applies      */
    int node;
    const char *what;
    int is_threshold;
} opt_state;

struct nc_trainer {
    nc_net *net;
    nc_train_options o;
    nc_train_backend *be;
    int max_batch;
    int T;                /* 1 in QCFS mode                    */
    int N;                /* images in the current batch       */
    int classes;
    nc_window *win;       /* per node: conv and pools          */
    train_value *val;
    float **saved;        /* IF: membranes; PRE_SPIKE max: running sums */
    float **grad;         /* dL/d value, rows like val         */
    int *grad_live;       /* grad[i] holds this batch's sum    */
    float *temp;          /* backend: two values of the largest node */
    float *logits_dev, *dlogits_dev;  /* backend [max_batch, classes] */
    int32_t *labels_dev;  /* backend [max_batch]: the batch's labels */
    /* backend: output_loss's {mean loss, correct} per loss evaluated in a
     * step (slot 0: after all T steps; slot 1 + h: horizon h), read at the
     * step's final sync into sums */
    double *sums_dev;
    double sums[2 * (NC_TRAIN_LOSS_SLOTS)];
    int loss_horizons;    /* horizons of the step's loss (0: one, slot 0) */
    int owns_be;          /* 0: on a backend it was given (a teacher: its student's) */
    node_params *np;
    opt_state *params;
    int n_params;
    nc_opt_tensor *opt;   /* params as optimizer_step's table (same order) */
    int64_t steps;        /* optimiser steps taken (Adam bias correction) */
    /* distillation: the teacher ANN (a clone) and its trainer, whose device
     * logits the loss reads */
    nc_net *teacher_net;
    nc_trainer *teacher;
    grad_bucket bucket;
};

/* ---- names and defaults --------------------------------------------------- */

const char *nc_train_mode_name(nc_train_mode m) { return m == NC_TRAIN_BPTT ? "bptt" : "qcfs"; }
const char *nc_optimizer_name(nc_optimizer o) { return o == NC_OPTIMIZER_SGD ? "sgd" : "adam"; }

int nc_train_horizons_parse(const char *text, nc_train_options *o)
{
    float values[8];
    int n = nc_parse_float_list(text, values, 8);
    for (int k = 0; k < n; k++)
        if (values[k] < 1 || values[k] > 4096 || values[k] != (float)(int)values[k])
            return -1;
    if (n < 1)
        return -1;
    for (int k = 0; k < n; k++)
        o->horizons[k] = (int)values[k];
    o->n_horizons = n;
    return 0;
}

int nc_train_distill_parse(const char *text, nc_train_options *o)
{
    float values[3];
    int n = nc_parse_float_list(text, values, 3);
    if (n < 1 || n > 2 || !(values[0] >= 0 && values[0] <= 1) || (n == 2 && !(values[1] > 0)))
        return -1;
    o->distill_alpha = values[0];
    if (n == 2)
        o->distill_tau = values[1];
    return 0;
}

int nc_optimizer_parse(const char *text, nc_optimizer *out)
{
    if (strcmp(text, "sgd") == 0)
        *out = NC_OPTIMIZER_SGD;
    else if (strcmp(text, "adam") == 0)
        *out = NC_OPTIMIZER_ADAM;
    else
        return -1;
    return 0;
}

nc_train_options nc_train_options_default(nc_train_mode mode)
{
    return (nc_train_options){.mode = mode, .epochs = 1, .batch_size = 64, .T = 8,
                              .optimizer = NC_OPTIMIZER_ADAM, .learning_rate = 0, .momentum = 0.9,
                              .weight_decay = 0, .beta1 = 0.9, .beta2 = 0.999, .epsilon = 1e-8,
                              .cosine = 1, .surrogate = NC_SURROGATE_TRIANGLE, .seed = 1};
}

/* ---- what can be trained ----------------------------------------------------- */

static nc_status node_refused(const nc_node *n, nc_error *err, const char *why)
{
    return nc_fail(err, NC_ERR_UNSUPPORTED, "node '%s' (%s) cannot be fine-tuned: %s", n->name,
                   nc_node_kind_name(n->kind), why);
}

static nc_status check_node(const nc_net *net, int i, nc_train_mode mode, nc_error *err)
{
    const nc_node *n = &net->nodes[i];
    switch (n->kind) {
    case NC_NODE_SCALE:
    case NC_NODE_RECURRENT:
        return node_refused(n, err, "only feed-forward converted networks are trained (NIR imports with "
                                    "scale or recurrent nodes are not)");
    case NC_NODE_MAXPOOL:
        if (mode == NC_TRAIN_BPTT && n->maxpool_strategy == NC_MAXPOOL_GATED)
            return node_refused(n, err, "a gated MaxPool has no gradient; convert with --maxpool pre-spike "
                                        "or --maxpool avg");
        return NC_OK;
    case NC_NODE_NEURON: {
        nc_neuron_model m = n->neuron.model;
        if (mode == NC_TRAIN_BPTT && m != NC_NEURON_IF)
            return node_refused(n, err, "BPTT trains integrate-and-fire neurons; convert the network to an SNN "
                                        "first");
        if (mode == NC_TRAIN_QCFS && m != NC_NEURON_RELU && m != NC_NEURON_CLIP && m != NC_NEURON_QCFS &&
            m != NC_NEURON_IF)
            return node_refused(n, err, "this neuron model has no QCFS form");
        if ((m == NC_NEURON_QCFS || m == NC_NEURON_IF) &&
            (n->neuron.n_threshold < 1 || !n->neuron.threshold))
            return node_refused(n, err, "the neuron has no threshold; calibrate first");
        if (m == NC_NEURON_QCFS && n->neuron.levels < 1)
            return node_refused(n, err, "QCFS needs L ≥ 1");
        return NC_OK;
    }
    default:
        return NC_OK;
    }
}

static nc_status check_net(const nc_net *net, nc_train_mode mode, nc_error *err)
{
    if (net->n_nodes < 2 || net->nodes[net->output].ndim != 1)
        return nc_fail(err, NC_ERR_UNSUPPORTED,
                       "%s: fine-tuning needs a classifier whose output is a vector of class scores",
                       net->source_path);
    for (int i = 0; i < net->n_nodes; i++) {
        nc_status s = check_node(net, i, mode, err);
        if (s != NC_OK)
            return s;
    }
    return NC_OK;
}

/* A value is constant in BPTT when no IF lies upstream (direct encoding). */
static void mark_constants(const nc_net *net, nc_train_mode mode, int *constant)
{
    for (int i = 0; i < net->n_nodes; i++) {
        const nc_node *n = &net->nodes[i];
        int c = mode == NC_TRAIN_BPTT;
        for (int k = 0; k < n->n_inputs; k++)
            c &= constant[n->inputs[k]];
        if (n->kind == NC_NODE_NEURON)
            c = 0;
        constant[i] = n->kind == NC_NODE_INPUT ? mode == NC_TRAIN_BPTT : c;
    }
}

static int is_alias(const nc_node *n) { return n->kind == NC_NODE_FLATTEN || n->kind == NC_NODE_OUTPUT; }

/* Does node i keep a per-step buffer besides its value (IF membranes, the
 * running sums of a PRE_SPIKE MaxPool over time-varying input)?  Its size:
 * saved_floats(). */
static int needs_saved(const nc_net *net, int i, nc_train_mode mode, const int *constant)
{
    const nc_node *n = &net->nodes[i];
    if (mode != NC_TRAIN_BPTT)
        return 0;
    if (n->kind == NC_NODE_NEURON)
        return 1;
    return n->kind == NC_NODE_MAXPOOL && n->maxpool_strategy == NC_MAXPOOL_PRE_SPIKE &&
           !constant[n->inputs[0]];
}

static double saved_floats(const nc_net *net, int i, double rows)
{
    const nc_node *n = &net->nodes[i];
    int64_t numel = n->kind == NC_NODE_MAXPOOL ? nc_node_numel(&net->nodes[n->inputs[0]]) : nc_node_numel(n);
    return rows * (double)numel;
}

static nc_status window_of(const nc_net *net, int i, nc_window *g, nc_error *err)
{
    const nc_node *n = &net->nodes[i];
    const nc_node *src = &net->nodes[n->inputs[0]];
    if (src->ndim != 3 || nc_window_init(g, (int)src->shape[0], (int)src->shape[1], (int)src->shape[2],
                                         n->kernel, n->stride, n->pad, n->dilation, n->ceil_mode) != 0)
        return node_refused(n, err, "its window does not fit its input");
    return NC_OK;
}

/* ---- memory ------------------------------------------------------------------ */

/* Floats per value, membranes, gradients and workspace, for max_batch. */
typedef struct mem_plan {
    double value_floats, saved_floats, grad_floats, param_floats, largest, work;
} mem_plan;

static mem_plan plan_memory(const nc_net *net, const nc_train_options *o, int max_batch, const int *constant)
{
    mem_plan p = {0};
    int T = o->mode == NC_TRAIN_BPTT ? o->T : 1;
    for (int i = 0; i < net->n_nodes; i++) {
        const nc_node *n = &net->nodes[i];
        double rows = (double)max_batch * (constant[i] ? 1 : T);
        double floats = rows * (double)nc_node_numel(n);
        if (!is_alias(n))
            p.value_floats += floats;
        p.grad_floats += floats;
        if (needs_saved(net, i, o->mode, constant))
            p.saved_floats += saved_floats(net, i, rows);
        /* a constant input expanded for an IF or a merge: T·N rows */
        double expanded = (double)max_batch * T * (double)nc_node_numel(n);
        if (expanded > p.largest)
            p.largest = expanded;
        p.param_floats += (double)nc_node_params(net, i);
        if (n->kind == NC_NODE_CONV2D) {
            nc_window g;
            if (window_of(net, i, &g, NULL) == NC_OK) {
                int64_t rows_i = (int64_t)rows;
                double w = (double)nc_conv2d_work_floats(&g, (int)n->shape[0], n->groups, rows_i);
                double wb = (double)nc_conv2d_backward_work_floats(&g, (int)n->shape[0], n->groups, rows_i);
                p.work = fmax(p.work, fmax(w, wb));
            }
        }
    }
    return p;
}

static double plan_bytes(const mem_plan *p)
{
    /* parameters: value (in the net), gradient, two optimiser moments, a best copy */
    return 4.0 * (p->value_floats + p->saved_floats + p->grad_floats + 2 * p->largest + p->work +
                  4 * p->param_floats);
}

static int distills(const nc_train_options *o) { return o->teacher && o->distill_alpha > 0; }

/* The teacher runs forward only, as the ANN it is (QCFS mode, nothing trained). */
static nc_train_options teacher_options(const nc_train_options *o)
{
    nc_train_options to = nc_train_options_default(NC_TRAIN_QCFS);
    to.batch_size = o->batch_size;
    to.engine = o->engine;
    return to;
}

nc_status nc_train_estimate(const nc_net *net, const nc_train_options *o, double *bytes, nc_error *err)
{
    nc_status s = check_net(net, o->mode, err);
    if (s != NC_OK)
        return s;
    int *constant = calloc((size_t)net->n_nodes, sizeof(int));
    if (!constant)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory");
    mark_constants(net, o->mode, constant);
    mem_plan p = plan_memory(net, o, o->batch_size, constant);
    free(constant);
    *bytes = plan_bytes(&p);
    if (distills(o)) { /* the teacher's own activations and parameters */
        nc_train_options to = teacher_options(o);
        double teacher_bytes = 0;
        s = nc_train_estimate(o->teacher, &to, &teacher_bytes, err);
        if (s != NC_OK) {
            nc_error_prefix(err, "the distillation teacher");
            return s;
        }
        *bytes += teacher_bytes;
    }
    return NC_OK;
}

/* ---- trainer set-up ---------------------------------------------------------- */

/* Backend memory for `floats` values (NULL for none, or on failure: the
 * backend records it and setup reports it through sync). */
static float *be_alloc(nc_trainer *tr, double floats)
{
    return floats <= 0 ? NULL : tr->be->ops->alloc(tr->be, (size_t)floats);
}

static float *be_upload(nc_trainer *tr, const float *host, int64_t count)
{
    float *p = be_alloc(tr, (double)count);
    if (p)
        tr->be->ops->upload(tr->be, p, host, (size_t)count);
    return p;
}

static int add_param(nc_trainer *tr, int node, const char *what, float *host, float *value, float *grad,
                     int64_t count, int decay, int is_threshold)
{
    opt_state *p = &tr->params[tr->n_params++];
    *p = (opt_state){.host = host, .value = value, .grad = grad, .count = count, .decay = decay, .node = node,
                     .what = what, .is_threshold = is_threshold};
    p->m = be_alloc(tr, (double)count);
    p->v = be_alloc(tr, (double)count);
    p->host_value = malloc((size_t)count * sizeof(float));
    p->host_grad = malloc((size_t)count * sizeof(float));
    return p->m && p->v && p->host_value && p->host_grad && value && grad ? 0 : -1;
}

/* The parameters as optimizer_step's table: built once, so that the GPU
 * backend sees the same set every step and keeps its uploaded copy. */
static nc_status setup_opt_table(nc_trainer *tr, nc_error *err)
{
    tr->opt = calloc((size_t)tr->n_params + 1, sizeof *tr->opt);
    if (!tr->opt)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for the optimiser");
    for (int k = 0; k < tr->n_params; k++) {
        const opt_state *p = &tr->params[k];
        tr->opt[k] = (nc_opt_tensor){.value = p->value, .grad = p->grad, .m = p->m, .v = p->v, .count = p->count,
                                     .decay = p->decay, .clamp = p->is_threshold};
    }
    return NC_OK;
}

/* Uploads every weight, bias and threshold; the trained ones also get a
 * gradient and optimiser state. */
static nc_status setup_params(nc_trainer *tr, nc_error *err)
{
    const nc_net *net = tr->net;
    tr->params = calloc((size_t)net->n_nodes * 3 + 1, sizeof(opt_state));
    if (!tr->params)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for the optimiser");
    for (int i = 0; i < net->n_nodes; i++) {
        nc_node *n = &net->nodes[i];
        node_params *np = &tr->np[i];
        int weighted = n->kind == NC_NODE_CONV2D || n->kind == NC_NODE_DENSE || n->kind == NC_NODE_AFFINE;
        int failed = 0;
        if (weighted && n->weight) {
            int64_t count = nc_tensor_numel(n->weight);
            np->weight = be_upload(tr, n->weight->data, count);
            np->weight_grad = be_alloc(tr, (double)count);
            failed |= add_param(tr, i, "weight", n->weight->data, np->weight, np->weight_grad, count,
                                n->kind != NC_NODE_AFFINE, 0);
        }
        if (weighted && n->bias) {
            int64_t count = nc_tensor_numel(n->bias);
            np->bias = be_upload(tr, n->bias->data, count);
            np->bias_grad = be_alloc(tr, (double)count);
            failed |= add_param(tr, i, "bias", n->bias->data, np->bias, np->bias_grad, count, 0, 0);
        }
        int thresholded = n->kind == NC_NODE_NEURON &&
                          (n->neuron.model == NC_NEURON_QCFS || n->neuron.model == NC_NEURON_IF);
        if (thresholded) {
            int count = n->neuron.n_threshold;
            np->threshold = be_upload(tr, n->neuron.threshold, count);
            failed |= !np->threshold;
            if (tr->o.train_threshold) {
                np->threshold_grad = be_alloc(tr, count);
                failed |= add_param(tr, i, "threshold", n->neuron.threshold, np->threshold, np->threshold_grad,
                                    count, 0, 1);
            }
        }
        if (failed) {
            nc_status s = tr->be->ops->sync(tr->be, err);
            return s != NC_OK ? s : nc_fail(err, NC_ERR_MEMORY, "out of memory for the parameters of '%s'", n->name);
        }
    }
    return setup_opt_table(tr, err);
}

static nc_status setup_buffers(nc_trainer *tr, const int *constant, const mem_plan *plan, nc_error *err)
{
    const nc_net *net = tr->net;
    for (int i = 0; i < net->n_nodes; i++) {
        const nc_node *n = &net->nodes[i];
        double rows = (double)tr->max_batch * (constant[i] ? 1 : tr->T);
        double floats = rows * (double)nc_node_numel(n);
        tr->val[i].constant = constant[i];
        tr->val[i].alias = is_alias(n);
        int failed = (!tr->val[i].alias && !(tr->val[i].data = be_alloc(tr, floats))) ||
                     !(tr->grad[i] = be_alloc(tr, floats)) ||
                     (needs_saved(net, i, tr->o.mode, constant) &&
                      !(tr->saved[i] = be_alloc(tr, saved_floats(net, i, rows))));
        if (failed) {
            nc_status s = tr->be->ops->sync(tr->be, err);
            return s != NC_OK ? s : nc_fail(err, NC_ERR_MEMORY, "out of memory for the activations of '%s'", n->name);
        }
        if ((n->kind == NC_NODE_CONV2D || n->kind == NC_NODE_AVGPOOL || n->kind == NC_NODE_MAXPOOL)) {
            nc_status s = window_of(net, i, &tr->win[i], err);
            if (s != NC_OK)
                return s;
        }
    }
    size_t per = (size_t)tr->max_batch * (size_t)tr->classes;
    tr->temp = be_alloc(tr, 2 * plan->largest);
    tr->logits_dev = be_alloc(tr, (double)per);
    tr->dlogits_dev = be_alloc(tr, (double)per);
    tr->labels_dev = tr->be->ops->alloc_bytes(tr->be, (size_t)tr->max_batch * sizeof(int32_t));
    tr->sums_dev = tr->be->ops->alloc_bytes(tr->be, sizeof tr->sums);
    if (!tr->temp || !tr->logits_dev || !tr->dlogits_dev || !tr->labels_dev || !tr->sums_dev) {
        nc_status s = tr->be->ops->sync(tr->be, err);
        return s != NC_OK ? s : nc_fail(err, NC_ERR_MEMORY, "out of memory for the training workspace");
    }
    return NC_OK;
}

void nc_trainer_free(nc_trainer *tr)
{
    if (!tr)
        return;
    nc_train_backend *be = tr->be;
    nc_trainer_free(tr->teacher); /* first: it may hold memory of this backend */
    nc_net_free(tr->teacher_net);
    void (*release)(nc_train_backend *, float *) = be ? be->ops->release : NULL;
    for (int i = 0; release && i < tr->net->n_nodes; i++) {
        if (tr->val && !tr->val[i].alias)
            release(be, tr->val[i].data);
        if (tr->grad)
            release(be, tr->grad[i]);
        if (tr->saved)
            release(be, tr->saved[i]);
        if (tr->np) {
            node_params *np = &tr->np[i];
            release(be, np->weight), release(be, np->bias), release(be, np->threshold);
            release(be, np->weight_grad), release(be, np->bias_grad), release(be, np->threshold_grad);
        }
    }
    for (int k = 0; k < tr->n_params; k++) {
        if (release) {
            release(be, tr->params[k].m);
            release(be, tr->params[k].v);
        }
        free(tr->params[k].host_value);
        free(tr->params[k].host_grad);
    }
    if (release) {
        release(be, tr->temp);
        release(be, tr->logits_dev);
        release(be, tr->dlogits_dev);
        be->ops->release_bytes(be, tr->labels_dev);
        be->ops->release_bytes(be, tr->sums_dev);
    }
    if (tr->owns_be)
        nc_train_backend_free(be);
    free(tr->opt);
    free(tr->params);
    free(tr->val);
    free(tr->grad);
    free(tr->grad_live);
    free(tr->saved);
    free(tr->np);
    free(tr->win);
    free(tr);
}

static nc_status trainer_make(nc_net *net, const nc_train_options *o, int max_batch, nc_train_backend *shared,
                              nc_trainer **out, nc_error *err);

/* A forward-only trainer on a clone of the teacher ANN, on the student's own
 * backend: its logits stay in that backend's memory (one GPU stream) for the
 * student's loss to read, with no copy and no sync between the two. */
static nc_status setup_teacher(nc_trainer *tr, nc_error *err)
{
    const nc_net *t = tr->o.teacher;
    if (t->n_nodes < 1 || nc_node_numel(&t->nodes[t->output]) != tr->classes)
        return nc_fail(err, NC_ERR_ARGUMENT, "the distillation teacher %s does not give %d class scores as %s does",
                       t->source_path, tr->classes, tr->net->source_path);
    if (!(tr->o.distill_alpha <= 1) || tr->o.distill_tau < 0)
        return nc_fail(err, NC_ERR_ARGUMENT, "distillation needs a weight α in [0, 1] and a temperature τ > 0 "
                                             "(got α = %g, τ = %g)", tr->o.distill_alpha, tr->o.distill_tau);
    if (tr->o.distill_tau == 0)
        tr->o.distill_tau = NC_TRAIN_DEFAULT_TAU;
    tr->teacher_net = nc_net_clone(t);
    if (!tr->teacher_net)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for the distillation teacher");
    nc_train_options to = teacher_options(&tr->o);
    nc_status s = trainer_make(tr->teacher_net, &to, tr->max_batch, tr->be, &tr->teacher, err);
    if (s != NC_OK)
        nc_error_prefix(err, "the distillation teacher");
    return s;
}

/* A trainer on its own backend (shared NULL) or on `shared`, which it then
 * neither frees nor owns. */
static nc_status trainer_make(nc_net *net, const nc_train_options *o, int max_batch, nc_train_backend *shared,
                              nc_trainer **out, nc_error *err)
{
    *out = NULL;
    if (max_batch < 1 || (o->mode == NC_TRAIN_BPTT && o->T < 1))
        return nc_fail(err, NC_ERR_ARGUMENT, "fine-tuning needs a batch of at least 1 image and T ≥ 1");
    nc_status s = check_net(net, o->mode, err);
    if (s != NC_OK)
        return s;
    nc_trainer *tr = calloc(1, sizeof *tr);
    if (!tr)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory");
    int n = net->n_nodes;
    tr->net = net;
    tr->o = *o;
    tr->max_batch = max_batch;
    tr->T = o->mode == NC_TRAIN_BPTT ? o->T : 1;
    tr->bucket.share = 1;
    tr->classes = (int)nc_node_numel(&net->nodes[net->output]);
    tr->be = shared;
    s = shared ? NC_OK : nc_train_backend_new(o->engine, &tr->be, err);
    if (s != NC_OK) {
        free(tr);
        return s;
    }
    tr->owns_be = !shared;
    tr->val = calloc((size_t)n, sizeof *tr->val);
    tr->grad = calloc((size_t)n, sizeof *tr->grad);
    tr->grad_live = calloc((size_t)n, sizeof *tr->grad_live);
    tr->saved = calloc((size_t)n, sizeof *tr->saved);
    tr->np = calloc((size_t)n, sizeof *tr->np);
    tr->win = calloc((size_t)n, sizeof *tr->win);
    int *constant = calloc((size_t)n, sizeof(int));
    if (!tr->val || !tr->grad || !tr->grad_live || !tr->saved || !tr->np || !tr->win || !constant) {
        free(constant);
        nc_trainer_free(tr);
        return nc_fail(err, NC_ERR_MEMORY, "out of memory");
    }
    mark_constants(net, o->mode, constant);
    mem_plan plan = plan_memory(net, o, max_batch, constant);
    s = setup_buffers(tr, constant, &plan, err);
    free(constant);
    if (s == NC_OK)
        s = setup_params(tr, err);
    if (s == NC_OK)
        s = tr->be->ops->sync(tr->be, err);
    if (s == NC_OK && distills(o))
        s = setup_teacher(tr, err);
    if (s != NC_OK) {
        nc_trainer_free(tr);
        return s;
    }
    *out = tr;
    return NC_OK;
}

nc_status nc_trainer_new(nc_net *net, const nc_train_options *o, int max_batch, nc_trainer **out,
                         nc_error *err)
{
    return trainer_make(net, o, max_batch, NULL, out, err);
}

nc_status nc_trainer_new_on(nc_net *net, const nc_train_options *o, int max_batch, nc_train_backend *backend,
                            nc_trainer **out, nc_error *err)
{
    return trainer_make(net, o, max_batch, backend, out, err);
}

/* ---- forward ------------------------------------------------------------------- */

static int64_t numel_of(const nc_trainer *tr, int i) { return nc_node_numel(&tr->net->nodes[i]); }
static int64_t rows_of(const nc_trainer *tr, int i) { return tr->val[i].constant ? tr->N : (int64_t)tr->T * tr->N; }

static void channel_split(const nc_node *n, int *c, int64_t *inner)
{
    *c = nc_node_channels(n);
    if (*c < 1)
        *c = 1;
    *inner = nc_node_numel(n) / *c;
}

/* The IF parameters with the threshold in backend memory. */
static nc_if_params if_params_of(const nc_trainer *tr, int i)
{
    const nc_node *n = &tr->net->nodes[i];
    return (nc_if_params){.threshold = tr->np[i].threshold, .n_threshold = n->neuron.n_threshold,
                          .v0_fraction = n->neuron.v0_fraction, .reset = n->neuron.reset,
                          .compare = n->neuron.compare};
}

/* The value of input k of node i over T·N rows: the value itself, or, for a
 * constant one, copied into `space` T times. */
static const float *expanded_input(nc_trainer *tr, int i, int k, float *space)
{
    int src = tr->net->nodes[i].inputs[k];
    if (!tr->val[src].constant || tr->T == 1)
        return tr->val[src].data;
    size_t step = (size_t)tr->N * (size_t)numel_of(tr, src);
    for (int t = 0; t < tr->T; t++)
        tr->be->ops->copy(tr->be, space + t * step, tr->val[src].data, step);
    return space;
}

/* PRE_SPIKE MaxPool over time-varying input, as sim/engine_cpu.c runs it:
 * the max of the running sums S(t), passed on as increments. */
static void forward_prespike_max(nc_trainer *tr, int i)
{
    const nc_train_backend_ops *ops = tr->be->ops;
    const nc_node *n = &tr->net->nodes[i];
    int src = n->inputs[0];
    int64_t step = (int64_t)tr->N * numel_of(tr, src), out_step = (int64_t)tr->N * numel_of(tr, i);
    float *sums = tr->saved[i], *out = tr->val[i].data;
    const float *in = tr->val[src].data;
    ops->copy(tr->be, sums, in, (size_t)step);
    for (int t = 1; t < tr->T; t++)
        ops->add(tr->be, step, sums + (t - 1) * step, in + t * step, sums + t * step);
    ops->maxpool(tr->be, &tr->win[i], (int64_t)tr->T * tr->N, sums, out);
    for (int t = tr->T - 1; t >= 1; t--)
        ops->sub(tr->be, out_step, out + t * out_step, out + (t - 1) * out_step, out + t * out_step);
}

/* What the neuron kernels of node i read: its model, its input, and the
 * channel layout of its values. */
typedef struct neuron_site {
    const nc_neuron *nr;
    nc_if_params ifp; /* BPTT: the IF neuron's parameters */
    const float *in;  /* the input's values (one step; BPTT expands them) */
    int c;
    int64_t inner;
    int64_t total;   /* values of a batch */
} neuron_site;

static neuron_site neuron_site_of(const nc_trainer *tr, int i)
{
    const nc_node *n = &tr->net->nodes[i];
    neuron_site s = {.nr = &n->neuron, .in = tr->val[n->inputs[0]].data, .total = (int64_t)tr->N * numel_of(tr, i)};
    channel_split(n, &s.c, &s.inner);
    if (tr->o.mode == NC_TRAIN_BPTT)
        s.ifp = if_params_of(tr, i);
    return s;
}

static void forward_neuron(nc_trainer *tr, int i)
{
    const nc_train_backend_ops *ops = tr->be->ops;
    neuron_site s = neuron_site_of(tr, i);
    float *out = tr->val[i].data;
    if (tr->o.mode == NC_TRAIN_BPTT) {
        const float *in = expanded_input(tr, i, 0, tr->temp);
        ops->if_forward_train(tr->be, &s.ifp, tr->T, tr->N, s.c, s.inner, in, out, tr->saved[i]);
        return;
    }
    if (s.nr->model == NC_NEURON_RELU)
        ops->relu(tr->be, s.total, s.in, out);
    else if (s.nr->model == NC_NEURON_CLIP)
        ops->clip(tr->be, s.total, s.nr->clip_min, s.nr->clip_max, s.in, out);
    else
        ops->qcfs(tr->be, tr->N, s.c, s.inner, tr->np[i].threshold, s.nr->n_threshold, s.nr->levels, s.nr->shift,
                  s.in, out);
}

static void forward_merge(nc_trainer *tr, int i)
{
    const nc_train_backend_ops *ops = tr->be->ops;
    const nc_node *n = &tr->net->nodes[i];
    int steps = tr->val[i].constant ? 1 : tr->T;
    int64_t out_numel = numel_of(tr, i);
    for (int t = 0; t < steps; t++) {
        float *o = tr->val[i].data + (int64_t)t * tr->N * out_numel;
        int64_t offset = 0;
        for (int k = 0; k < n->n_inputs; k++) {
            int src = n->inputs[k];
            int64_t per_row = numel_of(tr, src);
            const float *x = tr->val[src].data + (tr->val[src].constant ? 0 : (int64_t)t * tr->N * per_row);
            if (n->kind == NC_NODE_CONCAT) {
                ops->copy_rows(tr->be, o + offset, out_numel, x, per_row, tr->N, per_row);
                offset += per_row;
            } else if (k == 0) {
                ops->copy(tr->be, o, x, (size_t)(tr->N * out_numel));
            } else {
                ops->add(tr->be, tr->N * out_numel, o, x, o);
            }
        }
    }
}

static void forward_node(nc_trainer *tr, int i)
{
    const nc_train_backend_ops *ops = tr->be->ops;
    nc_train_backend *be = tr->be;
    const nc_node *n = &tr->net->nodes[i];
    train_value *v = &tr->val[i];
    const node_params *np = &tr->np[i];
    int src = n->n_inputs > 0 ? n->inputs[0] : -1;
    int64_t rows = rows_of(tr, i);
    const float *in = src >= 0 ? tr->val[src].data : NULL;
    switch (n->kind) {
    case NC_NODE_INPUT: /* uploaded before the walk (upload_input) */
        break;
    case NC_NODE_CONV2D:
        ops->conv2d(be, &tr->win[i], (int)n->shape[0], n->groups, rows, in, np->weight, np->bias, v->data);
        break;
    case NC_NODE_DENSE:
        ops->dense(be, rows, (int)numel_of(tr, src), (int)numel_of(tr, i), in, np->weight, np->bias, v->data);
        break;
    case NC_NODE_AVGPOOL:
        ops->avgpool(be, &tr->win[i], n->count_include_pad, rows, in, v->data);
        break;
    case NC_NODE_MAXPOOL:
        if (tr->o.mode == NC_TRAIN_BPTT && n->maxpool_strategy == NC_MAXPOOL_AVG)
            ops->avgpool(be, &tr->win[i], n->count_include_pad, rows, in, v->data);
        else if (tr->saved[i])
            forward_prespike_max(tr, i);
        else
            ops->maxpool(be, &tr->win[i], rows, in, v->data);
        break;
    case NC_NODE_GLOBAL_AVGPOOL:
        ops->global_avgpool(be, rows, (int)n->shape[0], numel_of(tr, src) / n->shape[0], in, v->data);
        break;
    case NC_NODE_FLATTEN:
    case NC_NODE_OUTPUT:
        v->data = tr->val[src].data;
        break;
    case NC_NODE_ADD:
    case NC_NODE_CONCAT:
        forward_merge(tr, i);
        break;
    case NC_NODE_AFFINE: {
        int c;
        int64_t inner;
        channel_split(n, &c, &inner);
        ops->affine(be, rows, c, inner, np->weight, np->bias, in, v->data);
        break;
    }
    case NC_NODE_NEURON:
        forward_neuron(tr, i);
        break;
    default: /* refused by check_net */
        break;
    }
}

/* Logits [N, classes] into logits_dev: the output, averaged over the steps
 * in BPTT (queued: no download, no sync). */
static void make_logits(nc_trainer *tr)
{
    int out = tr->net->output;
    int64_t per = (int64_t)tr->N * tr->classes;
    const float *y = tr->val[out].data;
    if (tr->val[out].constant || tr->T == 1)
        tr->be->ops->copy(tr->be, tr->logits_dev, y, (size_t)per);
    else
        tr->be->ops->mean_steps(tr->be, tr->T, per, y, tr->logits_dev);
}

/* The batch's size, checked and set. */
static nc_status set_batch(nc_trainer *tr, int n, nc_error *err)
{
    if (n < 1 || n > tr->max_batch)
        return nc_fail(err, NC_ERR_ARGUMENT, "batch of %d images; the trainer was made for 1 to %d", n,
                       tr->max_batch);
    tr->N = n;
    return NC_OK;
}

/* The batch's images into the input node's value: before the walk, so that
 * the walk itself never waits for the host (a step may be recorded). */
static void upload_input(nc_trainer *tr, const float *images)
{
    int x = tr->net->input;
    tr->be->ops->upload(tr->be, tr->val[x].data, images, (size_t)(tr->N * numel_of(tr, x)));
}

/* Every node after the input, then the logits (queued). */
static void queue_forward(nc_trainer *tr)
{
    for (int i = 0; i < tr->net->n_nodes; i++)
        forward_node(tr, i);
    make_logits(tr);
}

static nc_status forward_batch(nc_trainer *tr, const float *images, int n, nc_error *err)
{
    nc_status s = set_batch(tr, n, err);
    if (s != NC_OK)
        return s;
    upload_input(tr, images);
    queue_forward(tr);
    return NC_OK;
}

nc_status nc_trainer_logits(nc_trainer *tr, const float *images, int n, float *logits, nc_error *err)
{
    nc_status s = forward_batch(tr, images, n, err);
    if (s != NC_OK)
        return s;
    tr->be->ops->download(tr->be, logits, tr->logits_dev, (size_t)n * (size_t)tr->classes);
    return tr->be->ops->sync(tr->be, err);
}

/* ---- backward ------------------------------------------------------------------ */

/* Adds d (d_rows rows of node src's numel) into grad[src]; a T·N-row d for a
 * constant src is summed over the steps. */
static void accumulate(nc_trainer *tr, int src, const float *d, int64_t d_rows)
{
    int64_t numel = numel_of(tr, src), src_rows = rows_of(tr, src);
    int64_t count = src_rows * numel;
    float *g = tr->grad[src];
    if (!tr->grad_live[src]) {
        tr->be->ops->zero(tr->be, g, (size_t)count);
        tr->grad_live[src] = 1;
    }
    for (int64_t part = 0; part < d_rows / src_rows; part++)
        tr->be->ops->add(tr->be, count, g, d + part * count, g);
}

/* Where node i's gradient for input k is written: grad[src] itself when it
 * holds nothing yet and the rows match (no copy), else the temp buffer that
 * finish_input_grad adds in. */
static float *input_grad_target(nc_trainer *tr, int src, int64_t d_rows)
{
    if (!tr->grad_live[src] && d_rows == rows_of(tr, src)) {
        tr->grad_live[src] = 1;
        return tr->grad[src];
    }
    return tr->temp;
}

static void finish_input_grad(nc_trainer *tr, int src, float *target, int64_t d_rows)
{
    if (target == tr->temp)
        accumulate(tr, src, target, d_rows);
}

static int wants_grad(const nc_trainer *tr, int src) { return tr->net->nodes[src].kind != NC_NODE_INPUT; }

static void backward_prespike_max(nc_trainer *tr, int i, const float *dout, float *din)
{
    const nc_train_backend_ops *ops = tr->be->ops;
    int src = tr->net->nodes[i].inputs[0];
    int64_t step = (int64_t)tr->N * numel_of(tr, src), out_step = (int64_t)tr->N * numel_of(tr, i);
    float *dmax = tr->temp + (int64_t)tr->T * step; /* one step of pooled gradient */
    /* out(t) = P(t) − P(t−1): dP(t) = dout(t) − dout(t+1) */
    for (int t = 0; t < tr->T; t++) {
        if (t + 1 < tr->T)
            ops->sub(tr->be, out_step, dout + t * out_step, dout + (t + 1) * out_step, dmax);
        else
            ops->copy(tr->be, dmax, dout + t * out_step, (size_t)out_step);
        ops->maxpool_backward(tr->be, &tr->win[i], tr->N, tr->saved[i] + t * step, dmax, din + t * step);
    }
    /* S(t) = Σ_{τ≤t} x(τ): dx(τ) = Σ_{t≥τ} dS(t) */
    for (int t = tr->T - 2; t >= 0; t--)
        ops->add(tr->be, step, din + t * step, din + (t + 1) * step, din + t * step);
}

static void backward_neuron(nc_trainer *tr, int i, const float *dout, float *din)
{
    const nc_train_backend_ops *ops = tr->be->ops;
    neuron_site s = neuron_site_of(tr, i);
    float *dth = tr->np[i].threshold_grad;
    if (tr->o.mode == NC_TRAIN_BPTT) {
        float alpha = tr->o.surrogate_alpha > 0 ? tr->o.surrogate_alpha : nc_surrogate_default_alpha(tr->o.surrogate);
        ops->if_backward(tr->be, &s.ifp, tr->o.surrogate, alpha, tr->T, tr->N, s.c, s.inner, tr->saved[i], dout, din,
                         dth);
        return;
    }
    if (s.nr->model == NC_NEURON_RELU)
        ops->relu_backward(tr->be, s.total, s.in, dout, din);
    else if (s.nr->model == NC_NEURON_CLIP)
        ops->clip_backward(tr->be, s.total, s.nr->clip_min, s.nr->clip_max, s.in, dout, din);
    else
        ops->qcfs_backward(tr->be, tr->N, s.c, s.inner, tr->np[i].threshold, s.nr->n_threshold, s.nr->levels, s.nr->shift,
                           s.in, dout, din, dth);
}

static void backward_merge(nc_trainer *tr, int i, const float *dout)
{
    const nc_train_backend_ops *ops = tr->be->ops;
    const nc_node *n = &tr->net->nodes[i];
    int steps = tr->val[i].constant ? 1 : tr->T;
    int64_t out_numel = numel_of(tr, i), offset = 0;
    for (int k = 0; k < n->n_inputs; k++) {
        int src = n->inputs[k];
        int64_t per_row = numel_of(tr, src);
        if (!wants_grad(tr, src)) {
            offset += per_row;
            continue;
        }
        int64_t d_rows = (int64_t)steps * tr->N;
        float *target = input_grad_target(tr, src, d_rows);
        if (n->kind == NC_NODE_ADD)
            ops->copy(tr->be, target, dout, (size_t)(d_rows * out_numel));
        else
            ops->copy_rows(tr->be, target, per_row, dout + offset, out_numel, d_rows, per_row);
        finish_input_grad(tr, src, target, d_rows);
        offset += per_row;
    }
}

static void backward_node(nc_trainer *tr, int i)
{
    const nc_train_backend_ops *ops = tr->be->ops;
    nc_train_backend *be = tr->be;
    const nc_node *n = &tr->net->nodes[i];
    if (!tr->grad_live[i] || n->kind == NC_NODE_INPUT)
        return;
    if (n->kind == NC_NODE_ADD || n->kind == NC_NODE_CONCAT) {
        backward_merge(tr, i, tr->grad[i]);
        return;
    }
    const float *dout = tr->grad[i];
    int src = n->inputs[0];
    int64_t rows = rows_of(tr, i);
    /* an IF reads its constant input T times: its input gradient has T·N rows */
    int64_t d_rows = n->kind == NC_NODE_NEURON ? (int64_t)tr->T * tr->N : rows;
    float *din = wants_grad(tr, src) ? input_grad_target(tr, src, d_rows) : NULL;
    const float *in = tr->val[src].data;
    node_params *np = &tr->np[i];
    switch (n->kind) {
    case NC_NODE_CONV2D:
        ops->conv2d_backward(be, &tr->win[i], (int)n->shape[0], n->groups, rows, in, np->weight, dout, din,
                             np->weight_grad, np->bias_grad);
        break;
    case NC_NODE_DENSE:
        ops->dense_backward(be, rows, (int)numel_of(tr, src), (int)numel_of(tr, i), in, np->weight, dout, din,
                            np->weight_grad, np->bias_grad);
        break;
    case NC_NODE_AVGPOOL:
        if (din)
            ops->avgpool_backward(be, &tr->win[i], n->count_include_pad, rows, dout, din);
        break;
    case NC_NODE_MAXPOOL:
        if (!din)
            break;
        if (tr->o.mode == NC_TRAIN_BPTT && n->maxpool_strategy == NC_MAXPOOL_AVG)
            ops->avgpool_backward(be, &tr->win[i], n->count_include_pad, rows, dout, din);
        else if (tr->saved[i])
            backward_prespike_max(tr, i, dout, din);
        else
            ops->maxpool_backward(be, &tr->win[i], rows, in, dout, din);
        break;
    case NC_NODE_GLOBAL_AVGPOOL:
        if (din)
            ops->global_avgpool_backward(be, rows, (int)n->shape[0], numel_of(tr, src) / n->shape[0], dout, din);
        break;
    case NC_NODE_FLATTEN:
    case NC_NODE_OUTPUT:
        if (din)
            ops->copy(be, din, dout, (size_t)(rows * numel_of(tr, i)));
        break;
    case NC_NODE_AFFINE: {
        int c;
        int64_t inner;
        channel_split(n, &c, &inner);
        ops->affine_backward(be, rows, c, inner, np->weight, in, dout, din, np->weight_grad, np->bias_grad);
        break;
    }
    case NC_NODE_NEURON: {
        /* the neuron kernels need a din even for the input node */
        float *target = din ? din : tr->temp;
        backward_neuron(tr, i, dout, target);
        break;
    }
    default:
        break;
    }
    if (din)
        finish_input_grad(tr, src, din, d_rows);
}

static void zero_param_grads(nc_trainer *tr)
{
    for (int k = 0; k < tr->n_params; k++)
        tr->be->ops->zero(tr->be, tr->params[k].grad, (size_t)tr->params[k].count);
}

/* The loss of `logits` (backend) against the batch's labels, and the
 * teacher's logits when distilling and `teacher` is set, into sums slot
 * `slot`; dlogits (may be NULL) gets its gradient.  A rank of a data-parallel
 * run holds `share` of the batch: its mean loss enters the batch's mean with
 * that weight, and so does its gradient (scaled here). */
static void queue_loss(nc_trainer *tr, const float *logits, float *dlogits, int slot, int teacher)
{
    const float *t = teacher && tr->teacher ? tr->teacher->logits_dev : NULL;
    tr->be->ops->output_loss(tr->be, tr->N, tr->classes, logits, tr->labels_dev, t, tr->o.distill_alpha,
                             tr->o.distill_tau, (float)tr->bucket.share, dlogits, tr->sums_dev + 2 * slot);
}

/* The step's loss horizons, checked (each within 1..T), into loss_horizons:
 * 0 for one loss over all T steps. */
static nc_status set_horizons(nc_trainer *tr, nc_error *err)
{
    int64_t steps = rows_of(tr, tr->net->output) / tr->N;
    tr->loss_horizons = 0;
    if (tr->o.n_horizons <= 0 || steps == 1)
        return NC_OK;
    for (int h = 0; h < tr->o.n_horizons; h++)
        if (tr->o.horizons[h] < 1 || tr->o.horizons[h] > steps)
            return nc_fail(err, NC_ERR_ARGUMENT, "loss horizon %d is outside 1..T = %lld", tr->o.horizons[h],
                           (long long)steps);
    tr->loss_horizons = tr->o.n_horizons;
    return NC_OK;
}

/* The loss and dL/d(output) into grad[output], queued on the backend (the
 * loss is read by read_loss after the step's final sync).  One horizon
 * (k = T): the logits are the mean over T steps and each step gets
 * dlogits / T.  Several horizons k (set_horizons): loss = mean over k of
 * CE(mean of the first k steps), so step t gets Σ_{k > t} dlogits_k / (k·H). */
static void output_gradient(nc_trainer *tr)
{
    const nc_train_backend_ops *ops = tr->be->ops;
    int out = tr->net->output, n = tr->N;
    int64_t per = (int64_t)n * tr->classes, steps = rows_of(tr, out) / n;
    tr->grad_live[out] = 1;
    if (tr->loss_horizons == 0) {
        queue_loss(tr, tr->logits_dev, tr->dlogits_dev, 0, 1);
        ops->broadcast_steps(tr->be, (int)steps, per, tr->dlogits_dev, 1.0f / (float)steps, tr->grad[out]);
        return;
    }
    int H = tr->loss_horizons;
    /* accuracy as the run will be judged: after all T steps (slot 0; then
     * logits_dev is reused for each horizon's logits) */
    queue_loss(tr, tr->logits_dev, NULL, 0, 0);
    ops->zero(tr->be, tr->grad[out], (size_t)(steps * per));
    for (int h = 0; h < H; h++) {
        int k = tr->o.horizons[h];
        ops->mean_steps(tr->be, k, per, tr->val[out].data, tr->logits_dev);
        queue_loss(tr, tr->logits_dev, tr->dlogits_dev, 1 + h, 1);
        ops->broadcast_steps(tr->be, k, per, tr->dlogits_dev, 1.0f / (float)(k * H), tr->temp);
        ops->add(tr->be, k * per, tr->grad[out], tr->temp, tr->grad[out]);
    }
}

/* The step's loss and correct count from tr->sums (downloaded at the final
 * sync); horizons are averaged in the order the host loss always used. */
static void read_loss(const nc_trainer *tr, double *loss, int64_t *correct)
{
    const double *sums = tr->sums;
    double total = sums[0];
    if (tr->loss_horizons > 0) {
        total = 0;
        for (int h = 0; h < tr->loss_horizons; h++)
            total += sums[2 * (1 + h)] / tr->loss_horizons;
    }
    if (loss)
        *loss = total;
    if (correct)
        *correct = (int64_t)sums[1];
}

/* ---- data parallel: gradients summed across the ranks, bucket by bucket ---- */

void nc_trainer_set_reducer(nc_trainer *tr, nc_allreduce *comm, int rank, int64_t bucket_floats)
{
    tr->bucket.comm = comm;
    tr->bucket.rank = rank;
    tr->bucket.cap = bucket_floats > 0 ? bucket_floats : NC_TRAIN_BUCKET_FLOATS;
}

void nc_trainer_set_share(nc_trainer *tr, double share) { tr->bucket.share = share; }

/* Sums the bucket across the ranks (started; bucket_finish waits). */
static void bucket_flush(nc_trainer *tr)
{
    grad_bucket *b = &tr->bucket;
    if (b->n > 0 && b->status == NC_OK)
        b->status = b->comm->ops->sum(b->comm, b->rank, tr->be, b->bufs, b->counts, b->n, &b->err);
    b->n = 0;
    b->floats = 0;
}

static void bucket_add(nc_trainer *tr, float *grad, int64_t count)
{
    grad_bucket *b = &tr->bucket;
    if (!grad)
        return;
    if (b->n == NC_ALLREDUCE_MAX_BUFFERS)
        bucket_flush(tr);
    b->bufs[b->n] = grad;
    b->counts[b->n++] = count;
    b->floats += count;
    if (b->floats >= b->cap)
        bucket_flush(tr);
}

/* Node i's backward pass is done: its parameter gradients are final (no
 * other node adds to them), so they may be summed while the rest runs. */
static void bucket_node(nc_trainer *tr, int i)
{
    if (!tr->bucket.comm)
        return;
    const nc_node *n = &tr->net->nodes[i];
    const node_params *np = &tr->np[i];
    if (np->weight_grad)
        bucket_add(tr, np->weight_grad, nc_tensor_numel(n->weight));
    if (np->bias_grad)
        bucket_add(tr, np->bias_grad, nc_tensor_numel(n->bias));
    if (np->threshold_grad)
        bucket_add(tr, np->threshold_grad, n->neuron.n_threshold);
}

static nc_status bucket_finish(nc_trainer *tr, nc_error *err)
{
    grad_bucket *b = &tr->bucket;
    if (!b->comm)
        return NC_OK;
    bucket_flush(tr);
    nc_status s = b->status;
    if (s == NC_OK)
        s = b->comm->ops->wait(b->comm, b->rank, &b->err);
    b->status = NC_OK;
    return s == NC_OK ? NC_OK : nc_fail(err, s, "%s", b->err.message);
}

/* A rank whose share of the batch is empty still takes part in every sum,
 * with zero gradients. */
static nc_status empty_share(nc_trainer *tr, double *loss, int64_t *correct, nc_error *err)
{
    zero_param_grads(tr);
    for (int i = tr->net->n_nodes - 1; i >= 0; i--)
        bucket_node(tr, i);
    if (loss)
        *loss = 0;
    if (correct)
        *correct = 0;
    nc_status s = bucket_finish(tr, err);
    return s == NC_OK ? tr->be->ops->sync(tr->be, err) : s;
}

/* The device work of a step after its inputs are uploaded: the forward
 * (and the teacher's), the loss and the backward pass. */
static void queue_step(nc_trainer *tr)
{
    queue_forward(tr);
    if (tr->teacher) /* the same backend: its logits are ready where the loss reads them */
        queue_forward(tr->teacher);
    zero_param_grads(tr);
    memset(tr->grad_live, 0, (size_t)tr->net->n_nodes * sizeof(int));
    output_gradient(tr);
    for (int i = tr->net->n_nodes - 1; i >= 0; i--) {
        backward_node(tr, i);
        bucket_node(tr, i);
    }
}

/* queue_step, recorded once per batch size and replayed after that where
 * the backend can (sim/nc_train_backend.h, step_begin): the work and its
 * memory are the same at every step of a size.  Not in a data-parallel run,
 * whose sums wait on the other ranks in the middle of the backward pass. */
static void queue_step_recorded(nc_trainer *tr)
{
    const nc_train_backend_ops *ops = tr->be->ops;
    int mode = ops->step_begin && !tr->bucket.comm ? ops->step_begin(tr->be, (uintptr_t)tr, tr->N) : NC_STEP_RUN;
    if (mode != NC_STEP_REPLAY)
        queue_step(tr);
    if (mode != NC_STEP_RUN && ops->step_end(tr->be) != 0)
        queue_step(tr); /* it could not be recorded: as usual */
}

nc_status nc_trainer_gradients(nc_trainer *tr, const float *images, const int32_t *labels, int n,
                               double *loss, int64_t *correct, nc_error *err)
{
    if (n == 0 && tr->bucket.comm)
        return empty_share(tr, loss, correct, err);
    for (int k = 0; k < n; k++)
        if (labels[k] < 0 || labels[k] >= tr->classes)
            return nc_fail(err, NC_ERR_ARGUMENT, "label %d of image %d is outside the model's %d classes",
                           (int)labels[k], k, tr->classes);
    nc_status s = set_batch(tr, n, err);
    if (s == NC_OK && tr->teacher)
        s = set_batch(tr->teacher, n, err);
    if (s == NC_OK)
        s = set_horizons(tr, err);
    if (s != NC_OK)
        return s;
    /* the inputs before the step's work: their waits hold up nothing */
    tr->be->ops->upload_bytes(tr->be, tr->labels_dev, labels, (size_t)n * sizeof(int32_t));
    upload_input(tr, images);
    if (tr->teacher)
        upload_input(tr->teacher, images);
    queue_step_recorded(tr);
    s = bucket_finish(tr, err);
    if (s != NC_OK)
        return s;
    tr->be->ops->download_bytes(tr->be, tr->sums, tr->sums_dev, sizeof tr->sums);
    s = tr->be->ops->sync(tr->be, err);
    if (s == NC_OK)
        read_loss(tr, loss, correct);
    return s;
}

/* ---- optimiser ------------------------------------------------------------------- */

/* Thresholds stay positive: they divide in QCFS and fire the IF. */
#define MIN_THRESHOLD 1e-4f

void nc_trainer_apply(nc_trainer *tr, double lr)
{
    const nc_train_options *o = &tr->o;
    tr->steps++;
    double c1 = 1.0 - pow(o->beta1, (double)tr->steps), c2 = 1.0 - pow(o->beta2, (double)tr->steps);
    nc_opt_step step = {.adam = o->optimizer != NC_OPTIMIZER_SGD, .lr = lr, .momentum = o->momentum,
                        .beta1 = o->beta1, .beta2 = o->beta2, .epsilon = o->epsilon, .c1 = c1, .c2 = c2,
                        .weight_decay = o->weight_decay, .min_value = MIN_THRESHOLD};
    /* every tensor in one call (one kernel on the GPU) */
    tr->be->ops->optimizer_step(tr->be, tr->opt, tr->n_params, &step);
}

void nc_trainer_reset(nc_trainer *tr, const float *const *values)
{
    for (int k = 0; k < tr->n_params; k++) {
        opt_state *p = &tr->params[k];
        tr->be->ops->upload(tr->be, p->value, values[k], (size_t)p->count);
        tr->be->ops->zero(tr->be, p->m, (size_t)p->count);
        tr->be->ops->zero(tr->be, p->v, (size_t)p->count);
    }
    tr->steps = 0;
}

nc_status nc_trainer_sync_net(nc_trainer *tr, nc_error *err)
{
    for (int k = 0; k < tr->n_params; k++)
        tr->be->ops->download(tr->be, tr->params[k].host_value, tr->params[k].value, (size_t)tr->params[k].count);
    nc_status s = tr->be->ops->sync(tr->be, err);
    if (s != NC_OK)
        return s;
    for (int k = 0; k < tr->n_params; k++)
        memcpy(tr->params[k].host, tr->params[k].host_value, (size_t)tr->params[k].count * sizeof(float));
    return NC_OK;
}

int nc_trainer_param_count(const nc_trainer *tr) { return tr->n_params; }

void nc_trainer_describe(const nc_trainer *tr, char *buf, size_t size)
{
    if (size == 0)
        return;
    buf[0] = 0;
    if (tr->be->ops->describe)
        tr->be->ops->describe(tr->be, buf, size);
}

void nc_trainer_param(const nc_trainer *tr, int k, nc_train_param *out)
{
    const opt_state *p = &tr->params[k];
    tr->be->ops->download(tr->be, p->host_value, p->value, (size_t)p->count);
    tr->be->ops->download(tr->be, p->host_grad, p->grad, (size_t)p->count);
    tr->be->ops->sync(tr->be, NULL);
    *out = (nc_train_param){.node = p->node, .what = p->what, .value = p->host_value, .grad = p->host_grad,
                            .count = p->count};
}
