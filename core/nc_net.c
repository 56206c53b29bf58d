/* nc_net.c — the network IR: construction, shape inference, costs, report. */
#include "nc_net.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

nc_net *nc_net_new(void)
{
    nc_net *net = calloc(1, sizeof *net);
    if (net) {
        net->input = -1;
        net->output = -1;
    }
    return net;
}

static void node_clear(nc_node *node)
{
    free(node->inputs);
    nc_tensor_free(node->weight);
    nc_tensor_free(node->bias);
    free(node->neuron.threshold);
    memset(node, 0, sizeof *node);
}

void nc_report_clear(nc_report *report)
{
    if (!report)
        return;
    free(report->entries);
    memset(report, 0, sizeof *report);
}

void nc_net_free(nc_net *net)
{
    if (!net)
        return;
    for (int i = 0; i < net->n_nodes; i++)
        node_clear(&net->nodes[i]);
    free(net->nodes);
    nc_report_clear(&net->report);
    free(net);
}

static int node_copy(nc_node *dst, const nc_node *src)
{
    *dst = *src;
    dst->inputs = NULL;
    dst->weight = dst->bias = NULL;
    dst->neuron.threshold = NULL;
    if (src->n_inputs) {
        dst->inputs = malloc((size_t)src->n_inputs * sizeof(int));
        if (!dst->inputs)
            return -1;
        memcpy(dst->inputs, src->inputs, (size_t)src->n_inputs * sizeof(int));
    }
    if (src->weight && !(dst->weight = nc_tensor_copy(src->weight)))
        return -1;
    if (src->bias && !(dst->bias = nc_tensor_copy(src->bias)))
        return -1;
    if (src->neuron.n_threshold) {
        size_t bytes = (size_t)src->neuron.n_threshold * sizeof(float);
        dst->neuron.threshold = malloc(bytes);
        if (!dst->neuron.threshold)
            return -1;
        memcpy(dst->neuron.threshold, src->neuron.threshold, bytes);
    }
    return 0;
}

nc_net *nc_net_clone(const nc_net *net)
{
    nc_net *c = nc_net_new();
    if (!c)
        return NULL;
    *c = *net;
    c->nodes = calloc((size_t)(net->n_nodes ? net->n_nodes : 1), sizeof(nc_node));
    c->capacity = net->n_nodes;
    c->report.entries = NULL;
    c->report.count = c->report.capacity = 0;
    if (!c->nodes) {
        free(c);
        return NULL;
    }
    for (int i = 0; i < net->n_nodes; i++) {
        if (node_copy(&c->nodes[i], &net->nodes[i]) != 0) {
            c->n_nodes = i + 1;
            nc_net_free(c);
            return NULL;
        }
    }
    if (net->report.count) {
        c->report.entries = malloc((size_t)net->report.count * sizeof(nc_report_entry));
        if (!c->report.entries) {
            nc_net_free(c);
            return NULL;
        }
        memcpy(c->report.entries, net->report.entries, (size_t)net->report.count * sizeof(nc_report_entry));
        c->report.count = c->report.capacity = net->report.count;
    }
    return c;
}

int nc_net_add_node(nc_net *net, nc_node_kind kind, const char *name, int n_inputs, const int *inputs)
{
    if (net->n_nodes == net->capacity) {
        int cap = net->capacity ? net->capacity * 2 : 16;
        nc_node *nodes = realloc(net->nodes, (size_t)cap * sizeof *nodes);
        if (!nodes)
            return -1;
        net->nodes = nodes;
        net->capacity = cap;
    }
    nc_node *node = &net->nodes[net->n_nodes];
    memset(node, 0, sizeof *node);
    if (n_inputs > 0) {
        node->inputs = malloc((size_t)n_inputs * sizeof(int));
        if (!node->inputs)
            return -1;
        memcpy(node->inputs, inputs, (size_t)n_inputs * sizeof(int));
    }
    node->n_inputs = n_inputs;
    node->kind = kind;
    snprintf(node->name, sizeof node->name, "%s", name ? name : "");
    node->stride[0] = node->stride[1] = 1;
    node->dilation[0] = node->dilation[1] = 1;
    node->groups = 1;
    node->maxpool_strategy = NC_MAXPOOL_PRE_SPIKE;
    node->neuron.levels = 8;
    node->neuron.shift = 0.5f;
    node->neuron.v0_fraction = 0.5f;
    node->neuron.clip_min = -INFINITY;
    node->neuron.clip_max = INFINITY;
    if (kind == NC_NODE_INPUT && net->input < 0)
        net->input = net->n_nodes;
    if (kind == NC_NODE_OUTPUT)
        net->output = net->n_nodes;
    return net->n_nodes++;
}

int nc_net_find(const nc_net *net, const char *name)
{
    for (int i = 0; i < net->n_nodes; i++)
        if (strcmp(net->nodes[i].name, name) == 0)
            return i;
    return -1;
}

nc_status nc_neuron_set_threshold(nc_neuron *neuron, int n, const float *values, nc_error *err)
{
    if (n < 1)
        return nc_fail(err, NC_ERR_ARGUMENT, "a neuron needs at least one threshold value");
    float *copy = malloc((size_t)n * sizeof(float));
    if (!copy)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for %d thresholds", n);
    memcpy(copy, values, (size_t)n * sizeof(float));
    free(neuron->threshold);
    neuron->threshold = copy;
    neuron->n_threshold = n;
    return NC_OK;
}

void nc_node_copy_window(nc_node *dst, const nc_node *src)
{
    memcpy(dst->kernel, src->kernel, sizeof src->kernel);
    memcpy(dst->stride, src->stride, sizeof src->stride);
    memcpy(dst->dilation, src->dilation, sizeof src->dilation);
    memcpy(dst->pad, src->pad, sizeof src->pad);
    dst->ceil_mode = src->ceil_mode;
    dst->count_include_pad = src->count_include_pad;
}

int64_t nc_node_numel(const nc_node *node) { return nc_shape_numel(node->ndim, node->shape); }

int nc_node_channels(const nc_node *node) { return node->ndim > 0 ? (int)node->shape[0] : 1; }

/* ---- shape inference ---------------------------------------------------- */

static void set_shape(nc_node *node, int ndim, const int64_t *shape)
{
    node->ndim = ndim;
    for (int i = 0; i < 4; i++)
        node->shape[i] = i < ndim ? shape[i] : 0;
}

nc_status nc_node_fail(nc_error *err, nc_status code, const char *where, const nc_node *node, const char *fmt, ...)
{
    char what[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return nc_fail(err, code, "%s%snode '%s' (%s): %s", where ? where : "", where ? ", " : "", node->name,
                   nc_node_kind_name(node->kind), what);
}

static nc_status node_fail(nc_error *err, nc_status code, const nc_node *node, const char *what)
{
    return nc_node_fail(err, code, NULL, node, "%s", what);
}

/* Output length of a sliding window along one axis (ONNX/PyTorch rule: with
 * ceil_mode, a last window that would start inside the right padding is dropped). */
static int64_t window_out(int64_t in, int k, int s, int pad_begin, int pad_end, int d, int ceil_mode)
{
    int64_t span = in + pad_begin + pad_end - ((int64_t)(k - 1) * d + 1);
    if (span < 0)
        return 0;
    int64_t out = ceil_mode ? (span + s - 1) / s + 1 : span / s + 1;
    if (ceil_mode && (out - 1) * s >= in + pad_begin)
        out--;
    return out;
}

static nc_status infer_window(nc_node *node, const nc_node *in, int64_t out_channels, nc_error *err)
{
    char buf[96], msg[256];
    if (in->ndim != 3) {
        snprintf(msg, sizeof msg, "needs a [C, H, W] input, got %s", nc_shape_str(in->ndim, in->shape, buf, sizeof buf));
        return node_fail(err, NC_ERR_SHAPE, node, msg);
    }
    if (node->kernel[0] < 1 || node->kernel[1] < 1 || node->stride[0] < 1 || node->stride[1] < 1 ||
        node->dilation[0] < 1 || node->dilation[1] < 1)
        return node_fail(err, NC_ERR_SHAPE, node, "kernel, stride and dilation must be at least 1");
    for (int i = 0; i < 4; i++)
        if (node->pad[i] < 0)
            return node_fail(err, NC_ERR_SHAPE, node, "negative padding");
    int64_t oh = window_out(in->shape[1], node->kernel[0], node->stride[0], node->pad[0], node->pad[2],
                            node->dilation[0], node->ceil_mode);
    int64_t ow = window_out(in->shape[2], node->kernel[1], node->stride[1], node->pad[1], node->pad[3],
                            node->dilation[1], node->ceil_mode);
    if (oh < 1 || ow < 1) {
        snprintf(msg, sizeof msg, "a %dx%d window does not fit the input %s", node->kernel[0], node->kernel[1],
                 nc_shape_str(in->ndim, in->shape, buf, sizeof buf));
        return node_fail(err, NC_ERR_SHAPE, node, msg);
    }
    int64_t shape[3] = {out_channels, oh, ow};
    set_shape(node, 3, shape);
    return NC_OK;
}

/* The node has a weight of `ndim` dimensions (`layout` names them), each in
 * 1..NC_MAX_DIM (a zero dimension would let the others be anything). */
static nc_status check_weight(nc_node *node, int ndim, const char *layout, nc_error *err)
{
    const nc_tensor *w = node->weight;
    if (!w || w->ndim != ndim) {
        char msg[128];
        snprintf(msg, sizeof msg, "needs a %d-d weight %s", ndim, layout);
        return node_fail(err, NC_ERR_SHAPE, node, msg);
    }
    for (int i = 0; i < w->ndim; i++)
        if (w->shape[i] < 1 || w->shape[i] > NC_MAX_DIM)
            return node_fail(err, NC_ERR_SHAPE, node, "weight has an empty or oversized dimension");
    return NC_OK;
}

static nc_status infer_conv(nc_node *node, const nc_node *in, nc_error *err)
{
    nc_status st = check_weight(node, 4, "[Cout, Cin/groups, KH, KW]", err);
    if (st != NC_OK)
        return st;
    const nc_tensor *w = node->weight;
    if (node->groups < 1 || w->shape[0] % node->groups != 0)
        return node_fail(err, NC_ERR_SHAPE, node, "output channels are not divisible by groups");
    if (in->ndim == 3 && w->shape[1] * node->groups != in->shape[0]) {
        char msg[256];
        snprintf(msg, sizeof msg, "weight expects %lld input channels (groups %d), input has %lld",
                 (long long)(w->shape[1] * node->groups), node->groups, (long long)in->shape[0]);
        return node_fail(err, NC_ERR_SHAPE, node, msg);
    }
    if (node->bias && nc_tensor_numel(node->bias) != w->shape[0])
        return node_fail(err, NC_ERR_SHAPE, node, "bias length differs from the output channels");
    node->kernel[0] = (int)w->shape[2];
    node->kernel[1] = (int)w->shape[3];
    return infer_window(node, in, w->shape[0], err);
}

static nc_status infer_dense(nc_node *node, const nc_node *in, nc_error *err)
{
    nc_status st = check_weight(node, 2, "[Fout, Fin]", err);
    if (st != NC_OK)
        return st;
    const nc_tensor *w = node->weight;
    if (nc_node_numel(in) != w->shape[1]) {
        char msg[256];
        snprintf(msg, sizeof msg, "weight expects %lld inputs, '%s' gives %lld", (long long)w->shape[1], in->name,
                 (long long)nc_node_numel(in));
        return node_fail(err, NC_ERR_SHAPE, node, msg);
    }
    if (node->bias && nc_tensor_numel(node->bias) != w->shape[0])
        return node_fail(err, NC_ERR_SHAPE, node, "bias length differs from the outputs");
    set_shape(node, 1, &w->shape[0]);
    return NC_OK;
}

static int same_shape(const nc_node *a, const nc_node *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return 0;
    return 1;
}

static nc_status infer_add(nc_node *node, const nc_net *net, nc_error *err)
{
    const nc_node *first = &net->nodes[node->inputs[0]];
    for (int i = 1; i < node->n_inputs; i++) {
        const nc_node *other = &net->nodes[node->inputs[i]];
        if (!same_shape(first, other)) {
            char a[96], b[96], msg[300];
            snprintf(msg, sizeof msg, "inputs '%s' %s and '%s' %s differ in shape", first->name,
                     nc_shape_str(first->ndim, first->shape, a, sizeof a), other->name,
                     nc_shape_str(other->ndim, other->shape, b, sizeof b));
            return node_fail(err, NC_ERR_SHAPE, node, msg);
        }
    }
    set_shape(node, first->ndim, first->shape);
    return NC_OK;
}

static nc_status infer_concat(nc_node *node, const nc_net *net, nc_error *err)
{
    const nc_node *first = &net->nodes[node->inputs[0]];
    int64_t shape[4];
    memcpy(shape, first->shape, sizeof shape);
    for (int i = 1; i < node->n_inputs; i++) {
        const nc_node *other = &net->nodes[node->inputs[i]];
        int fits = other->ndim == first->ndim;
        for (int d = 1; fits && d < first->ndim; d++)
            fits = other->shape[d] == first->shape[d];
        if (!fits)
            return node_fail(err, NC_ERR_SHAPE, node, "inputs differ in a dimension other than channels");
        shape[0] += other->shape[0];
    }
    set_shape(node, first->ndim, shape);
    return NC_OK;
}

static nc_status infer_per_channel(nc_node *node, const nc_node *in, int count, const char *what, nc_error *err)
{
    if (count != 1 && count != nc_node_channels(in)) {
        char msg[256];
        snprintf(msg, sizeof msg, "%d %s values for %d channels", count, what, nc_node_channels(in));
        return node_fail(err, NC_ERR_SHAPE, node, msg);
    }
    set_shape(node, in->ndim, in->shape);
    return NC_OK;
}

/* NIR neuron models: weight is [NC_NPARAM_COUNT, numel of the input]. */
static nc_status infer_nir_neuron(nc_node *node, const nc_node *in, nc_error *err)
{
    const nc_tensor *p = node->weight;
    if (node->neuron.model > NC_NEURON_DELAY)
        return node_fail(err, NC_ERR_ARGUMENT, node, "unknown neuron model");
    if (!p || p->ndim != 2 || p->shape[0] != NC_NPARAM_COUNT || p->shape[1] != nc_node_numel(in))
        return node_fail(err, NC_ERR_SHAPE, node, "needs a [parameters, values] array with one column per input value");
    if (!(node->neuron.dt > 0) || !isfinite(node->neuron.dt))
        return node_fail(err, NC_ERR_ARGUMENT, node, "needs a positive time step dt");
    set_shape(node, in->ndim, in->shape);
    return NC_OK;
}

static nc_status infer_node(nc_net *net, int index, nc_error *err)
{
    nc_node *node = &net->nodes[index];
    int needs_inputs = node->kind != NC_NODE_INPUT && node->kind != NC_NODE_RECURRENT;
    if (needs_inputs && node->n_inputs < 1)
        return node_fail(err, NC_ERR_FORMAT, node, "has no input");
    for (int i = 0; i < node->n_inputs; i++)
        if (node->inputs[i] < 0 || node->inputs[i] >= index)
            return node_fail(err, NC_ERR_FORMAT, node, "reads a node that does not come before it");
    const nc_node *in = needs_inputs ? &net->nodes[node->inputs[0]] : NULL;
    switch (node->kind) {
    case NC_NODE_INPUT:
        if (node->ndim < 1 || nc_node_numel(node) < 1)
            return node_fail(err, NC_ERR_SHAPE, node, "input shape is empty");
        return NC_OK;
    case NC_NODE_CONV2D: return infer_conv(node, in, err);
    case NC_NODE_DENSE: return infer_dense(node, in, err);
    case NC_NODE_AVGPOOL:
    case NC_NODE_MAXPOOL: return infer_window(node, in, in->ndim == 3 ? in->shape[0] : 0, err);
    case NC_NODE_GLOBAL_AVGPOOL: {
        if (in->ndim != 3)
            return node_fail(err, NC_ERR_SHAPE, node, "needs a [C, H, W] input");
        int64_t shape[3] = {in->shape[0], 1, 1};
        set_shape(node, 3, shape);
        return NC_OK;
    }
    case NC_NODE_FLATTEN: {
        int64_t n = nc_node_numel(in);
        set_shape(node, 1, &n);
        return NC_OK;
    }
    case NC_NODE_ADD: return infer_add(node, net, err);
    case NC_NODE_CONCAT: return infer_concat(node, net, err);
    case NC_NODE_AFFINE:
        if (!node->weight || !node->bias || nc_tensor_numel(node->weight) != nc_tensor_numel(node->bias))
            return node_fail(err, NC_ERR_SHAPE, node, "needs scale and shift of equal length");
        return infer_per_channel(node, in, (int)nc_tensor_numel(node->weight), "scale", err);
    case NC_NODE_NEURON:
        if (node->neuron.model == NC_NEURON_QCFS || node->neuron.model == NC_NEURON_IF) {
            if (node->neuron.n_threshold < 1)
                return node_fail(err, NC_ERR_SHAPE, node, "has no threshold");
            for (int i = 0; i < node->neuron.n_threshold; i++)
                if (!(node->neuron.threshold[i] > 0) || !isfinite(node->neuron.threshold[i]))
                    return node_fail(err, NC_ERR_ARGUMENT, node, "thresholds must be positive and finite");
            if (node->neuron.model == NC_NEURON_QCFS && node->neuron.levels < 1)
                return node_fail(err, NC_ERR_ARGUMENT, node, "QCFS needs L ≥ 1");
            return infer_per_channel(node, in, node->neuron.n_threshold, "threshold", err);
        }
        if (node->neuron.model >= NC_NEURON_LIF) /* NIR models: per-value parameters */
            return infer_nir_neuron(node, in, err);
        set_shape(node, in->ndim, in->shape);
        return NC_OK;
    case NC_NODE_OUTPUT:
        set_shape(node, in->ndim, in->shape);
        return NC_OK;
    case NC_NODE_SCALE:
        if (!node->weight || (nc_tensor_numel(node->weight) != 1 && nc_tensor_numel(node->weight) != nc_node_numel(in)))
            return node_fail(err, NC_ERR_SHAPE, node, "needs a scale of 1 value or one per input value");
        set_shape(node, in->ndim, in->shape);
        return NC_OK;
    case NC_NODE_RECURRENT:
        if (node->n_inputs != 0 || node->recur_source <= index || node->recur_source >= net->n_nodes)
            return node_fail(err, NC_ERR_FORMAT, node, "must have no inputs and delay a node that comes after it");
        if (node->ndim < 1 || nc_node_numel(node) < 1)
            return node_fail(err, NC_ERR_SHAPE, node, "has no shape");
        return NC_OK;
    case NC_NODE_KIND_COUNT: break;
    }
    return node_fail(err, NC_ERR_INTERNAL, node, "unknown node kind");
}

nc_status nc_net_infer_shapes(nc_net *net, nc_error *err)
{
    if (net->n_nodes < 2 || net->input != 0 || net->nodes[0].kind != NC_NODE_INPUT)
        return nc_fail(err, NC_ERR_FORMAT, "the network must start with an input node");
    if (net->output != net->n_nodes - 1)
        return nc_fail(err, NC_ERR_FORMAT, "the network must end with an output node");
    for (int i = 0; i < net->n_nodes; i++) {
        nc_status st = infer_node(net, i, err);
        if (st != NC_OK)
            return st;
        const nc_node *node = &net->nodes[i];
        int fits = node->ndim >= 1 && node->ndim <= 4;
        for (int d = 0; fits && d < node->ndim; d++)
            fits = node->shape[d] >= 1 && node->shape[d] <= NC_MAX_DIM;
        if (!fits || nc_node_numel(node) > NC_MAX_NODE_NUMEL) {
            char buf[96], msg[256];
            snprintf(msg, sizeof msg, "shape %s is empty or larger than this program handles (each dimension "
                     "1..%lld, at most %lld values per sample)", nc_shape_str(node->ndim, node->shape, buf, sizeof buf),
                     (long long)NC_MAX_DIM, (long long)NC_MAX_NODE_NUMEL);
            return node_fail(err, NC_ERR_SHAPE, node, msg);
        }
    }
    for (int i = 0; i < net->n_nodes; i++) { /* a recurrent node has its source's shape */
        const nc_node *r = &net->nodes[i];
        if (r->kind == NC_NODE_RECURRENT && !same_shape(r, &net->nodes[r->recur_source]))
            return node_fail(err, NC_ERR_SHAPE, r, "shape differs from the node it delays");
    }
    return NC_OK;
}

/* ---- costs ---------------------------------------------------------------- */

/* a·b (and a+b), saturating at INT64_MAX; negative operands count as 0. */
static int64_t sat_mul(int64_t a, int64_t b)
{
    int64_t r;
    if (a <= 0 || b <= 0)
        return 0;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

static int64_t sat_add(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

int64_t nc_node_macs(const nc_net *net, int index)
{
    const nc_node *node = &net->nodes[index];
    switch (node->kind) {
    case NC_NODE_CONV2D:
        if (!node->weight || node->weight->ndim != 4)
            return 0;
        return sat_mul(sat_mul(nc_node_numel(node), node->weight->shape[1]),
                       sat_mul(node->kernel[0], node->kernel[1]));
    case NC_NODE_DENSE:
        if (!node->weight || node->weight->ndim != 2)
            return 0;
        return sat_mul(node->weight->shape[0], node->weight->shape[1]);
    case NC_NODE_AVGPOOL:
        return sat_mul(nc_node_numel(node), sat_mul(node->kernel[0], node->kernel[1]));
    case NC_NODE_GLOBAL_AVGPOOL:
        return nc_node_numel(&net->nodes[node->inputs[0]]);
    case NC_NODE_AFFINE:
    case NC_NODE_SCALE:
        return nc_node_numel(node);
    default:
        return 0;
    }
}

int64_t nc_node_params(const nc_net *net, int index)
{
    const nc_node *node = &net->nodes[index];
    int64_t n = node->neuron.n_threshold;
    if (node->weight)
        n = sat_add(n, nc_tensor_numel(node->weight));
    if (node->bias)
        n = sat_add(n, nc_tensor_numel(node->bias));
    return n;
}

int64_t nc_net_macs(const nc_net *net)
{
    int64_t total = 0;
    for (int i = 0; i < net->n_nodes; i++)
        total = sat_add(total, nc_node_macs(net, i));
    return total;
}

int64_t nc_net_params(const nc_net *net)
{
    int64_t total = 0;
    for (int i = 0; i < net->n_nodes; i++)
        total = sat_add(total, nc_node_params(net, i));
    return total;
}

int nc_net_consumers(const nc_net *net, int index)
{
    int count = 0;
    for (int i = index + 1; i < net->n_nodes; i++)
        for (int k = 0; k < net->nodes[i].n_inputs; k++)
            count += net->nodes[i].inputs[k] == index;
    return count;
}

/* Synapses driven by one value of `index`, averaged over its values: a conv or
 * dense consumer has MACs / input-values synapses per input value; layers that
 * only move or pool values pass the question on to their own consumers. */
/* What one value of node c passes on to each of its inputs' values, given
 * c's own fan-out fan_c (see nc_node_fanout). */
static double fanout_through(const nc_net *net, int c_index, double fan_c, const nc_node *in)
{
    const nc_node *c = &net->nodes[c_index];
    switch (c->kind) {
    case NC_NODE_CONV2D:
    case NC_NODE_DENSE: {
        double numel = (double)nc_node_numel(in);
        return numel > 0 ? (double)nc_node_macs(net, c_index) / numel : 0;
    }
    case NC_NODE_OUTPUT:
        return 0;
    case NC_NODE_AVGPOOL:
    case NC_NODE_MAXPOOL: /* each value reaches k²/s² windows */
        return fan_c * ((double)c->kernel[0] * (double)c->kernel[1]) /
               ((double)c->stride[0] * (double)c->stride[1]);
    default: /* flatten, add, concat, affine, neurons: one value each */
        return fan_c;
    }
}

double nc_node_fanout(const nc_net *net, int index)
{
    /* One pass from the last node back: when node c is reached, every node
     * after it has already added its share to c, so fan[c] is final (linear
     * in the edges, where following every path would be exponential). */
    if (index < 0 || index >= net->n_nodes)
        return 0;
    int n = net->n_nodes - index;
    double *fan = calloc((size_t)n, sizeof *fan);
    if (!fan)
        return 0;
    for (int c = net->n_nodes - 1; c > index; c--) {
        const nc_node *node = &net->nodes[c];
        for (int k = 0; k < node->n_inputs; k++) {
            int j = node->inputs[k];
            if (j >= index && j < c)
                fan[j - index] += fanout_through(net, c, fan[c - index], &net->nodes[j]);
        }
    }
    double total = fan[0];
    free(fan);
    return total;
}

/* ---- names ---------------------------------------------------------------- */

/* names[v] of a table of n names, one per value of an enum from 0; "unknown"
 * for a value outside it. */
static const char *name_of(const char *const *names, size_t n, int v)
{
    return v >= 0 && (size_t)v < n ? names[v] : "unknown";
}

#define NAME_OF(names, v) name_of(names, sizeof names / sizeof *names, (int)(v))

const char *nc_node_kind_name(nc_node_kind kind)
{
    static const char *const names[] = {"input",  "conv2d", "dense",  "avgpool", "maxpool", "global-avgpool", "flatten",
                                        "add",    "concat", "affine", "neuron",  "output",  "scale",          "recurrent"};
    _Static_assert(sizeof names / sizeof *names == NC_NODE_KIND_COUNT, "a name per node kind");
    return NAME_OF(names, kind);
}

const char *nc_neuron_model_name(nc_neuron_model m)
{
    static const char *const names[] = {"relu", "clip",    "qcfs",       "if",     "lif",       "cuba-lif",
                                        "li",   "cuba-li", "integrator", "nir-if", "threshold", "delay"};
    _Static_assert(sizeof names / sizeof *names == NC_NEURON_DELAY + 1, "a name per neuron model");
    return NAME_OF(names, m);
}

const char *nc_support_name(nc_support s)
{
    static const char *const names[] = {"converted", "folded", "removed", "approximated", "unsupported"};
    _Static_assert(sizeof names / sizeof *names == NC_SUPPORT_UNSUPPORTED + 1, "a name per support level");
    return NAME_OF(names, s);
}

const char *nc_maxpool_strategy_name(nc_maxpool_strategy s)
{
    static const char *const names[] = {"avg", "pre-spike", "gated"};
    _Static_assert(sizeof names / sizeof *names == NC_MAXPOOL_GATED + 1, "a name per MaxPool strategy");
    return NAME_OF(names, s);
}

int nc_maxpool_strategy_parse(const char *text, nc_maxpool_strategy *out)
{
    static const nc_maxpool_strategy all[] = {NC_MAXPOOL_AVG, NC_MAXPOOL_PRE_SPIKE, NC_MAXPOOL_GATED};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (strcmp(text, nc_maxpool_strategy_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    }
    return -1;
}

/* ---- report ---------------------------------------------------------------- */

nc_report_entry *nc_report_add(nc_report *report, const char *source_name, const char *op_type, int opset,
                               nc_support support, const char *target, const char *reason_fmt, ...)
{
    if (report->count == report->capacity) {
        int cap = report->capacity ? report->capacity * 2 : 32;
        nc_report_entry *entries = realloc(report->entries, (size_t)cap * sizeof *entries);
        if (!entries)
            return NULL;
        report->entries = entries;
        report->capacity = cap;
    }
    nc_report_entry *e = &report->entries[report->count++];
    memset(e, 0, sizeof *e);
    snprintf(e->source_name, sizeof e->source_name, "%s", source_name ? source_name : "");
    snprintf(e->op_type, sizeof e->op_type, "%s", op_type ? op_type : "");
    e->opset = opset;
    e->support = support;
    snprintf(e->target, sizeof e->target, "%s", target ? target : "");
    if (reason_fmt) {
        va_list ap;
        va_start(ap, reason_fmt);
        vsnprintf(e->reason, sizeof e->reason, reason_fmt, ap);
        va_end(ap);
    }
    return e;
}

int nc_report_count(const nc_report *report, nc_support support)
{
    int n = 0;
    for (int i = 0; i < report->count; i++)
        n += report->entries[i].support == support;
    return n;
}

int nc_neuron_model_is_nir(nc_neuron_model m)
{
    return m == NC_NEURON_LIF || m == NC_NEURON_CUBA_LIF || m == NC_NEURON_LI || m == NC_NEURON_CUBA_LI ||
           m == NC_NEURON_INTEGRATOR || m == NC_NEURON_NIR_IF || m == NC_NEURON_THRESHOLD ||
           m == NC_NEURON_DELAY;
}

static const char *check_merge(const nc_net *net, const nc_node *n)
{
    int64_t numel = nc_node_numel(n), sum = 0;
    for (int k = 0; k < n->n_inputs; k++) {
        int64_t in = nc_node_numel(&net->nodes[n->inputs[k]]);
        if (n->kind == NC_NODE_ADD && in != numel)
            return "adds inputs of different sizes";
        sum += in;
    }
    return n->kind == NC_NODE_CONCAT && sum != numel ? "the inputs do not add up to the output" : NULL;
}

static const char *check_neuron(const nc_node *n, int64_t in_numel)
{
    const nc_neuron *nr = &n->neuron;
    int64_t numel = nc_node_numel(n);
    int ch = nc_node_channels(n);
    int thresholded = nr->model == NC_NEURON_QCFS || nr->model == NC_NEURON_IF;
    if (in_numel != numel)
        return "changes the number of values";
    if (nc_neuron_model_is_nir(nr->model) && (!n->weight || n->weight->ndim != 2 ||
                                              n->weight->shape[0] != NC_NPARAM_COUNT || n->weight->shape[1] != numel))
        return "needs its parameters as a [NC_NPARAM_COUNT, values] weight";
    if (thresholded && (!nr->threshold || (nr->n_threshold != 1 && nr->n_threshold != ch)))
        return "needs 1 threshold or one per channel";
    if (thresholded && nr->levels < 1)
        return "needs QCFS levels L >= 1";
    return NULL;
}

const char *nc_node_check(const nc_net *net, int i)
{
    const nc_node *n = &net->nodes[i];
    if ((unsigned)n->kind >= NC_NODE_KIND_COUNT)
        return "unknown node kind";
    if (n->ndim < 1 || n->ndim > 4 || nc_node_numel(n) < 1)
        return "has no output shape; run shape inference first";
    for (int k = 0; k < n->n_inputs; k++)
        if (n->inputs[k] < 0 || n->inputs[k] >= i)
            return "reads a node that does not come before it";
    if (n->kind != NC_NODE_INPUT && n->kind != NC_NODE_RECURRENT && n->n_inputs < 1)
        return "has no input";
    int64_t numel = nc_node_numel(n), in_numel = n->n_inputs ? nc_node_numel(&net->nodes[n->inputs[0]]) : 0;
    int ch = nc_node_channels(n);
    switch (n->kind) {
    case NC_NODE_ADD:
    case NC_NODE_CONCAT: return check_merge(net, n);
    case NC_NODE_SCALE:
        if (in_numel != numel || !n->weight || (nc_tensor_numel(n->weight) != numel && nc_tensor_numel(n->weight) != 1))
            return "needs one weight per value, or one for all";
        return NULL;
    case NC_NODE_RECURRENT: {
        int src = n->recur_source;
        if (n->n_inputs != 0 || src <= i || src >= net->n_nodes || nc_node_numel(&net->nodes[src]) != numel)
            return "must delay a later node of its own size and read nothing else";
        return NULL;
    }
    case NC_NODE_CONV2D: return n->weight ? NULL : "has no weight";
    case NC_NODE_DENSE:
        if (!n->weight || n->weight->ndim != 2 || n->weight->shape[1] != in_numel || n->weight->shape[0] != numel ||
            (n->bias && nc_tensor_numel(n->bias) != n->shape[0]))
            return "weight [Fout, Fin] does not fit the input and output";
        return NULL;
    case NC_NODE_AFFINE:
        if (in_numel != numel || !n->weight || !n->bias || nc_tensor_numel(n->weight) != ch ||
            nc_tensor_numel(n->bias) != ch)
            return "needs a scale and a shift per channel";
        return NULL;
    case NC_NODE_NEURON: return check_neuron(n, in_numel);
    case NC_NODE_GLOBAL_AVGPOOL:
        if (net->nodes[n->inputs[0]].ndim != 3 || n->shape[0] != net->nodes[n->inputs[0]].shape[0])
            return "needs a [C, H, W] input";
        return NULL;
    case NC_NODE_FLATTEN:
    case NC_NODE_OUTPUT: return in_numel != numel ? "changes the number of values" : NULL;
    default: return NULL;
    }
}
