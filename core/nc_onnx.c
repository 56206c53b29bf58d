/* nc_onnx.c — ONNX import: the driver and the public API.
 *
 * The import runs in one pass over the graph in topological order.  Every
 * ONNX value is either a constant (initializer, binding, folded subgraph),
 * kept as a `cval`, or data that an IR node computes (value->ir).  Values
 * carry their per-sample shape (no batch axis) so that Shape, Reshape and
 * SAME padding can be resolved at import.  Each ONNX node adds exactly one
 * report entry.
 *
 * The work is split by job: nc_onnx_read.c (file, tensors, external data),
 * nc_onnx_context.c (values, node context, IR nodes, attributes),
 * nc_onnx_fold.c (constant folding), nc_onnx_ops.c (ops → IR),
 * nc_onnx_report.c (the conversion report); this file parses the model,
 * links and sorts the graph, dispatches each node to its converter and
 * hands back the net. */
#include "nc_onnx_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ==== dispatch ============================================================== */

typedef struct op_def {
    const char *name;
    nc_status (*data)(nctx *);  /* when an input is computed at run time */
    nc_status (*konst)(nctx *); /* when every input is a constant          */
} op_def;

static const op_def OPS[] = {
    {"Conv", onnx_op_conv, NULL},
    {"Gemm", onnx_op_gemm, NULL},
    {"MatMul", onnx_op_matmul, NULL},
    {"Relu", onnx_op_relu, onnx_c_unary},
    {"Clip", onnx_op_clip, NULL},
    {"MaxPool", onnx_op_pool, NULL},
    {"AveragePool", onnx_op_pool, NULL},
    {"GlobalAveragePool", onnx_op_global_avgpool, NULL},
    {"ReduceMean", onnx_op_reduce_mean, NULL},
    {"BatchNormalization", onnx_op_batchnorm, NULL},
    {"Flatten", onnx_op_flatten, onnx_c_flatten},
    {"Reshape", onnx_op_reshape, onnx_c_reshape},
    {"Squeeze", onnx_op_squeeze, onnx_c_reshape},
    {"Unsqueeze", onnx_op_squeeze, onnx_c_reshape},
    {"Add", onnx_op_add, onnx_c_binary},
    {"Sub", onnx_op_sub, onnx_c_binary},
    {"Mul", onnx_op_mul, onnx_c_binary},
    {"Div", onnx_op_div, onnx_c_binary},
    {"Pow", NULL, onnx_c_binary},
    {"Concat", onnx_op_concat, onnx_c_concat},
    {"Dropout", onnx_op_dropout, onnx_c_unary},
    {"Identity", onnx_op_identity, onnx_c_unary},
    {"Pad", onnx_op_pad, NULL},
    {"Cast", onnx_op_cast, onnx_c_cast},
    {"Softmax", onnx_op_softmax, NULL},
    {"LogSoftmax", onnx_op_softmax, NULL},
    {"Constant", NULL, onnx_c_constant},
    {"Shape", onnx_op_shape, onnx_op_shape},
    {"Gather", NULL, onnx_c_gather},
    {"Slice", NULL, onnx_c_slice},
    {"Transpose", NULL, onnx_c_transpose},
    {"ConstantOfShape", NULL, onnx_c_constant_of_shape},
    {"Range", NULL, onnx_c_range},
    {"Neg", NULL, onnx_c_unary},
    {"Sqrt", NULL, onnx_c_unary},
    {"Reciprocal", NULL, onnx_c_unary},
    {"Floor", NULL, onnx_c_unary},
    {"Ceil", NULL, onnx_c_unary},
    {"Abs", NULL, onnx_c_unary},
};

static const op_def *find_op(const char *name)
{
    for (size_t k = 0; k < sizeof OPS / sizeof OPS[0]; k++)
        if (!strcmp(OPS[k].name, name))
            return &OPS[k];
    return NULL;
}

/* Why an op the importer does not know cannot be converted, and what to do. */
static const char *unknown_op_reason(const char *op)
{
    static const char *activations[] = {"Sigmoid", "Tanh", "Gelu", "Elu", "Selu", "LeakyRelu", "PRelu",
                                        "Softplus", "Softsign", "Mish", "HardSigmoid", "HardSwish", "Celu",
                                        "ThresholdedRelu", "Exp", "Log"};
    for (size_t k = 0; k < sizeof activations / sizeof activations[0]; k++)
        if (!strcmp(op, activations[k]))
            return "this activation has no integrate-and-fire equivalent; replace it with ReLU (or a clamp) "
                   "and fine-tune";
    if (!strcmp(op, "LSTM") || !strcmp(op, "GRU") || !strcmp(op, "RNN"))
        return "recurrent layers are not supported";
    if (!strncmp(op, "Quantize", 8) || !strncmp(op, "Dequantize", 10) || strstr(op, "Integer"))
        return "quantized ops are not supported; export the float model";
    return "this op has no spiking equivalent in the importer";
}

static int inputs_tainted(nctx *c)
{
    for (size_t i = 0; i < c->p->n_input; i++) {
        value *v = onnx_in_value(c, i);
        if (v && v->tainted)
            return 1;
    }
    return 0;
}

static int inputs_constant(nctx *c)
{
    for (size_t i = 0; i < c->p->n_input; i++) {
        value *v = onnx_in_value(c, i);
        if (v && !v->c)
            return 0;
    }
    return 1;
}

static nc_status run_op(nctx *c, const op_def *d)
{
    if (!d)
        return onnx_unsup(c, "%s", unknown_op_reason(c->op));
    if (inputs_constant(c) && d->konst) {
        TRY(d->konst(c));
        if (c->imp->handled[c->index])
            return NC_OK;
        return onnx_report(c, NC_SUPPORT_FOLDED, "", "constant: evaluated at import");
    }
    if (d->data)
        return d->data(c);
    if (!strcmp(c->op, "Floor"))
        return onnx_unsup(c, "Floor outside the QCFS chain Div(λ)→Clip(0,1)→Mul(L)→Add(0.5)→Floor→Div(L)→Mul(λ)");
    return onnx_unsup(c, "%s of a value computed at run time (only constant %s subgraphs are folded at import)",
                      c->op, c->op);
}

static nc_status convert_node(importer *imp, int k)
{
    nctx c;
    if (imp->handled[k])
        return NC_OK;
    onnx_nctx_init(&c, imp, k);
    if (!imp->live[k])
        return onnx_report(&c, NC_SUPPORT_REMOVED, "", "its result is never used");
    int tainted = inputs_tainted(&c);
    const char *domain = S(c.p->domain);
    nc_status st;
    if (domain[0] && strcmp(domain, "ai.onnx"))
        st = onnx_unsup(&c, "op from domain '%s' (a custom op or an exporter's local function; export with the "
                       "standard ONNX ops)", domain);
    else
        st = run_op(&c, find_op(c.op));
    if (st == NC_ERR_UNSUPPORTED) {
        const char *why = c.why[0] ? c.why : imp->err->message;
        return onnx_mark_unsupported(&c, why, 0);
    }
    if (st != NC_OK && tainted) { /* a guessed shape downstream of an unsupported node */
        return onnx_mark_unsupported(&c, "not checked: an input comes from an unsupported node", 1);
    }
    TRY(st);
    for (size_t i = 0; tainted && i < c.p->n_output; i++)
        if (onnx_out_value(&c, i))
            onnx_out_value(&c, i)->tainted = 1;
    return NC_OK;
}

/* ==== the graph ============================================================ */

static nc_status load_initializers(importer *imp)
{
    for (size_t k = 0; k < imp->graph->n_initializer; k++) {
        const Onnx__TensorProto *t = imp->graph->initializer[k];
        value *v;
        char what[NC_NAME_MAX + 32];
        TRY(onnx_get_value(imp, S(t->name), &v));
        if (v->defined)
            return onnx_ifail(imp, NC_ERR_FORMAT, "initializer '%s' appears twice", v->name);
        snprintf(what, sizeof what, "initializer '%s'", v->name);
        TRY(onnx_tensor_to_cval(&imp->L, t, what, &v->c));
        v->defined = 1;
    }
    return NC_OK;
}

static const Onnx__TypeProto__Tensor *tensor_type(const Onnx__ValueInfoProto *vi)
{
    if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
        return NULL;
    return vi->type->tensor_type;
}

/* Declared dims of a graph input; -1 for symbolic ones.  Rank -1 = unknown. */
static int declared_dims(const Onnx__ValueInfoProto *vi, int64_t *dims, int max)
{
    const Onnx__TypeProto__Tensor *tt = tensor_type(vi);
    if (!tt || !tt->shape || (int)tt->shape->n_dim > max)
        return tt && tt->shape ? (int)tt->shape->n_dim : -1;
    for (size_t d = 0; d < tt->shape->n_dim; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        int known = dim && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        dims[d] = known ? dim->dim_value : -1;
    }
    return (int)tt->shape->n_dim;
}

static const nc_onnx_binding *find_binding(const importer *imp, const char *name)
{
    const nc_onnx_options *o = imp->opts;
    for (int k = 0; o && k < o->n_bindings; k++)
        if (o->bindings[k].name && !strcmp(o->bindings[k].name, name))
            return &o->bindings[k];
    return NULL;
}

/* A graph input bound by the caller becomes a constant of its declared type. */
static nc_status bind_input(importer *imp, value *v, const Onnx__ValueInfoProto *vi, const nc_tensor *t)
{
    int64_t dims[CV_MAX_DIMS];
    char a[96], b[96], what[NC_NAME_MAX + 32];
    if (!t)
        return onnx_ifail(imp, NC_ERR_ARGUMENT, "binding '%s' has no tensor", v->name);
    int rank = declared_dims(vi, dims, CV_MAX_DIMS);
    int fits = rank < 0 || rank == t->ndim;
    for (int d = 0; fits && rank > 0 && d < rank; d++)
        fits = dims[d] < 0 || dims[d] == t->shape[d];
    if (!fits)
        return onnx_ifail(imp, NC_ERR_SHAPE, "binding '%s' has shape %s, but the graph input is declared as %s",
                          v->name, onnx_dims_str(t->ndim, t->shape, a, 96), onnx_dims_str(rank, dims, b, 96));
    const Onnx__TypeProto__Tensor *tt = tensor_type(vi);
    int is_int = tt && tt->has_elem_type && !onnx_dtype_is_float(tt->elem_type);
    snprintf(what, sizeof what, "binding '%s'", v->name);
    TRY(onnx_cv_new(&imp->L, is_int, t->ndim, t->shape, what, &v->c));
    for (int64_t k = 0; k < v->c->n; k++)
        onnx_cv_set(v->c, k, t->data[k]);
    v->defined = 1;
    return NC_OK;
}

/* The one data input: an INPUT node with the declared shape minus the batch. */
static nc_status add_input_node(importer *imp, value *v, const Onnx__ValueInfoProto *vi)
{
    int64_t dims[NC_MAX_DIMS + 1];
    const Onnx__TypeProto__Tensor *tt = tensor_type(vi);
    if (!tt)
        return onnx_ifail(imp, NC_ERR_UNSUPPORTED, "input '%s' is not a tensor", v->name);
    int dt = tt->has_elem_type ? tt->elem_type : 0;
    if (!onnx_dtype_is_float(dt))
        return onnx_ifail(imp, NC_ERR_UNSUPPORTED, "input '%s' is %s; only float inputs are supported (%s input)",
                          v->name, onnx_dtype_name(dt), onnx_dtype_name(dt));
    int rank = declared_dims(vi, dims, NC_MAX_DIMS);
    if (rank < 0)
        return onnx_ifail(imp, NC_ERR_UNSUPPORTED, "input '%s' has no declared shape; export with a fixed input size",
                          v->name);
    if (rank < 2 || rank > NC_MAX_DIMS)
        return onnx_ifail(imp, NC_ERR_UNSUPPORTED,
                          "input '%s' has rank %d; a sample must have 1 to 4 dimensions after the batch axis (%s)",
                     v->name, rank, rank < 2 ? "each sample is a scalar" : "too many dimensions");
    for (int d = 1; d < rank; d++)
        if (dims[d] < 1)
            return onnx_ifail(imp, NC_ERR_UNSUPPORTED,
                              "input '%s' has a dynamic or empty dimension at axis %d; export with a fixed input size",
                         v->name, d);
    imp->batch = dims[0] >= 0 ? dims[0] : 1; /* a symbolic batch folds as 1 */
    v->elem_type = dt;
    v->defined = 1;
    int ir;
    TRY(onnx_add_ir(imp, NC_NODE_INPUT, v->name, 0, NULL, rank - 1, dims + 1, &ir));
    onnx_bind_value(imp, v, ir, rank - 1, dims + 1);
    return NC_OK;
}

static nc_status check_bindings(importer *imp)
{
    const nc_onnx_options *o = imp->opts;
    for (int k = 0; o && k < o->n_bindings; k++) {
        const char *name = o->bindings[k].name;
        int found = 0;
        for (size_t i = 0; name && i < imp->graph->n_input; i++)
            found |= !strcmp(S(imp->graph->input[i]->name), name);
        if (!found)
            return onnx_ifail(imp, NC_ERR_ARGUMENT, "binding '%s' does not name a graph input", S(name));
    }
    return NC_OK;
}

static nc_status setup_inputs(importer *imp)
{
    const Onnx__ValueInfoProto *data[2] = {NULL, NULL};
    char names[600] = "";
    int n_data = 0;
    TRY(check_bindings(imp));
    for (size_t i = 0; i < imp->graph->n_input; i++) {
        const Onnx__ValueInfoProto *vi = imp->graph->input[i];
        value *v;
        TRY(onnx_get_value(imp, S(vi->name), &v));
        if (v->defined && v->c && !find_binding(imp, v->name))
            continue; /* an initializer listed as an input (IR < 4) */
        const nc_onnx_binding *b = find_binding(imp, v->name);
        if (b) {
            onnx_cv_free(v->c);
            v->c = NULL;
            TRY(bind_input(imp, v, vi, b->value));
            continue;
        }
        if (n_data < 2)
            data[n_data] = vi;
        n_data++;
        size_t used = strlen(names);
        snprintf(names + used, sizeof names - used, "%s'%s'", used ? ", " : "", v->name);
    }
    if (n_data == 0)
        return onnx_ifail(imp, NC_ERR_FORMAT, "the graph has no data input");
    if (n_data > 1)
        return onnx_ifail(imp, NC_ERR_FORMAT,
                          "the graph has %d data inputs (%s); only one is supported: a weight listed as a graph input "
                     "needs an initializer (re-export with export_params=True) or a binding",
                     n_data, names);
    value *v;
    TRY(onnx_get_value(imp, S(data[0]->name), &v));
    return add_input_node(imp, v, data[0]);
}

/* Producers, consumers and graph outputs; dangling names are format errors. */
static nc_status link_values(importer *imp)
{
    for (int k = 0; k < imp->n_nodes; k++) {
        const Onnx__NodeProto *p = imp->graph->node[k];
        char name[NC_NAME_MAX];
        for (size_t i = 0; i < p->n_output; i++) {
            value *v;
            if (!p->output[i] || !p->output[i][0])
                continue;
            TRY(onnx_get_value(imp, p->output[i], &v));
            if (v->defined || v->producer >= 0)
                return onnx_ifail(imp, NC_ERR_FORMAT, "node '%s' (%s) writes '%s', which is already defined",
                                  onnx_node_display_name(p, k, name, sizeof name), S(p->op_type), v->name);
            v->producer = k;
        }
    }
    for (int k = 0; k < imp->n_nodes; k++) {
        const Onnx__NodeProto *p = imp->graph->node[k];
        char name[NC_NAME_MAX];
        for (size_t i = 0; i < p->n_input; i++) {
            if (!p->input[i] || !p->input[i][0])
                continue;
            int vi = onnx_find_value(imp, p->input[i]);
            if (vi < 0 || (!imp->values[vi].defined && imp->values[vi].producer < 0))
                return onnx_ifail(imp, NC_ERR_FORMAT,
                                  "node '%s' (%s, opset %d) reads '%s', which is neither an initializer, a graph input "
                             "nor a node output (a missing initializer?); re-export the model",
                             onnx_node_display_name(p, k, name, sizeof name), S(p->op_type), imp->opset, p->input[i]);
        }
    }
    for (size_t i = 0; i < imp->graph->n_output; i++) {
        int vi = onnx_find_value(imp, S(imp->graph->output[i]->name));
        if (vi < 0 || (!imp->values[vi].defined && imp->values[vi].producer < 0))
            return onnx_ifail(imp, NC_ERR_FORMAT, "graph output '%s' is not computed by any node",
                              S(imp->graph->output[i]->name));
        imp->values[vi].is_output = 1;
        imp->values[vi].n_consumers++;
    }
    return NC_OK;
}

/* Marks the nodes that graph outputs depend on (reverse topological order)
 * and counts consumers among them only, so that a dead branch neither blocks
 * folding nor fails the import. */
static void find_live(importer *imp)
{
    for (int i = imp->n_nodes - 1; i >= 0; i--) {
        int k = imp->order[i];
        const Onnx__NodeProto *p = imp->graph->node[k];
        for (size_t o = 0; o < p->n_output && !imp->live[k]; o++) {
            int vi = p->output[o] && p->output[o][0] ? onnx_find_value(imp, p->output[o]) : -1;
            imp->live[k] = vi >= 0 && imp->values[vi].n_consumers > 0;
        }
        for (size_t in = 0; imp->live[k] && in < p->n_input; in++) {
            int vi = p->input[in] && p->input[in][0] ? onnx_find_value(imp, p->input[in]) : -1;
            if (vi >= 0) {
                imp->values[vi].n_consumers++;
                imp->values[vi].consumer = k;
            }
        }
    }
}

/* The node that produces input i of p, or -1 (initializer, graph input). */
static int input_producer(const importer *imp, const Onnx__NodeProto *p, size_t i)
{
    int vi = p->input[i] && p->input[i][0] ? onnx_find_value(imp, p->input[i]) : -1;
    return vi >= 0 ? imp->values[vi].producer : -1;
}

/* Node → node edges as adjacency lists: the readers of node k are
 * edges[start[k] .. start[k+1]). */
static nc_status build_edges(importer *imp, int **start_out, int **edges_out)
{
    int n = imp->n_nodes;
    int *start = calloc((size_t)n + 2, sizeof *start), *fill = calloc((size_t)n + 1, sizeof *fill), *edges = NULL;
    if (start && fill) {
        for (int k = 0; k < n; k++)
            for (size_t i = 0; i < imp->graph->node[k]->n_input; i++) {
                int from = input_producer(imp, imp->graph->node[k], i);
                if (from >= 0)
                    start[from + 1]++;
            }
        for (int k = 0; k < n; k++)
            start[k + 1] += start[k];
        edges = malloc(((size_t)start[n] + 1) * sizeof *edges);
    }
    if (!start || !fill || !edges) {
        free(start), free(fill), free(edges);
        return onnx_oom(imp);
    }
    for (int k = 0; k < n; k++)
        for (size_t i = 0; i < imp->graph->node[k]->n_input; i++) {
            int from = input_producer(imp, imp->graph->node[k], i);
            if (from >= 0)
                edges[start[from] + fill[from]++] = k;
        }
    free(fill);
    *start_out = start;
    *edges_out = edges;
    return NC_OK;
}

/* Kahn's algorithm (ONNX files should be sorted already, but need not be);
 * a node left over lies on a cycle. */
static nc_status topo_sort(importer *imp)
{
    int n = imp->n_nodes, head = 0, tail = 0, *start = NULL, *edges = NULL;
    TRY(build_edges(imp, &start, &edges));
    int *indeg = calloc((size_t)n + 1, sizeof *indeg);
    if (!indeg) {
        free(start), free(edges);
        return onnx_oom(imp);
    }
    for (int e = 0; e < start[n]; e++)
        indeg[edges[e]]++;
    for (int k = 0; k < n; k++)
        if (!indeg[k])
            imp->order[tail++] = k;
    while (head < tail) {
        int k = imp->order[head++];
        for (int e = start[k]; e < start[k + 1]; e++)
            if (--indeg[edges[e]] == 0)
                imp->order[tail++] = edges[e];
    }
    nc_status st = NC_OK;
    if (tail < n) {
        int bad = 0;
        char name[NC_NAME_MAX];
        while (!indeg[bad])
            bad++;
        st = onnx_ifail(imp, NC_ERR_FORMAT, "the graph has a cycle through node '%s' (%s); ONNX graphs must be acyclic",
                        onnx_node_display_name(imp->graph->node[bad], bad, name, sizeof name),
                   S(imp->graph->node[bad]->op_type));
    }
    free(indeg), free(start), free(edges);
    return st;
}

static nc_status add_output_node(importer *imp)
{
    if (imp->graph->n_output != 1)
        return onnx_ifail(imp, NC_ERR_UNSUPPORTED, "the graph has %zu outputs; exactly one is supported",
                          imp->graph->n_output);
    value *v = &imp->values[onnx_find_value(imp, S(imp->graph->output[0]->name))];
    if (v->tainted)
        return NC_OK;
    if (v->c || v->ir < 0)
        return onnx_ifail(imp, NC_ERR_UNSUPPORTED, "graph output '%s' does not depend on the input", v->name);
    int ir;
    return onnx_add_ir(imp, NC_NODE_OUTPUT, v->name, 1, &v->ir, v->ndim, v->dims, &ir);
}

/* A node whose inputs are all constants already and whose op can be
 * evaluated at import. */
static int foldable_now(importer *imp, int k)
{
    nctx c;
    onnx_nctx_init(&c, imp, k);
    const op_def *d = find_op(c.op);
    const char *domain = S(c.p->domain);
    if (!imp->live[k] || !d || !d->konst || (domain[0] && strcmp(domain, "ai.onnx")))
        return 0;
    for (size_t i = 0; i < c.p->n_input; i++) {
        value *v = onnx_in_value(&c, i);
        if (v && !v->c)
            return 0;
    }
    return 1;
}

static nc_status convert_graph(importer *imp)
{
    /* constants first, so that patterns (QCFS) see the folded values of
     * Constant nodes that the exporter placed after their consumer's head */
    for (int i = 0; i < imp->n_nodes; i++)
        if (foldable_now(imp, imp->order[i]))
            TRY(convert_node(imp, imp->order[i]));
    for (int i = 0; i < imp->n_nodes; i++)
        TRY(convert_node(imp, imp->order[i]));
    TRY(onnx_sort_report(imp));
    if (imp->n_unsupported)
        return onnx_unsupported_message(imp);
    TRY(add_output_node(imp));
    nc_status st = nc_net_infer_shapes(imp->net, imp->err);
    if (st != NC_OK)
        nc_error_prefix(imp->err, "%s", imp->L.path);
    return st;
}

/* ==== public API ============================================================ */

static void model_folder(const char *path, char *dir)
{
    char copy[PATH_MAX];
    snprintf(copy, sizeof copy, "%s", path);
    char *slash = strrchr(copy, '/');
    if (slash == copy)
        slash[1] = 0;
    else if (slash)
        *slash = 0;
    else
        snprintf(copy, sizeof copy, ".");
    if (!realpath(copy, dir))
        dir[0] = 0; /* external data will be refused with a message */
}

static nc_status parse_model(importer *imp)
{
    unsigned char *buf;
    size_t size;
    TRY(onnx_read_whole_file(&imp->L, &buf, &size));
    imp->model = onnx__model_proto__unpack(NULL, size, buf);
    free(buf);
    if (!imp->model || !imp->model->graph)
        return onnx_not_onnx(&imp->L);
    imp->graph = imp->model->graph;
    imp->opset = 1;
    for (size_t k = 0; k < imp->model->n_opset_import; k++) {
        const Onnx__OperatorSetIdProto *o = imp->model->opset_import[k];
        const char *d = S(o->domain);
        if ((!d[0] || !strcmp(d, "ai.onnx")) && o->has_version)
            imp->opset = o->version > INT_MAX ? INT_MAX : (int)o->version;
    }
    if (imp->graph->n_node > (size_t)INT_MAX / 4)
        return onnx_ifail(imp, NC_ERR_UNSUPPORTED, "the graph has too many nodes");
    imp->n_nodes = (int)imp->graph->n_node;
    size_t n = (size_t)imp->n_nodes + 1;
    imp->order = calloc(n, sizeof(int));
    imp->handled = calloc(n, sizeof(int));
    imp->entry = malloc(n * sizeof(int));
    imp->unchecked = calloc(n, sizeof(int));
    imp->live = calloc(n, sizeof(int));
    if (!imp->order || !imp->handled || !imp->entry || !imp->unchecked || !imp->live)
        return onnx_oom(imp);
    for (size_t k = 0; k < n; k++)
        imp->entry[k] = -1;
    for (int k = 0; k < imp->n_nodes; k++)
        if (!imp->graph->node[k])
            return onnx_not_onnx(&imp->L);
    return NC_OK;
}

static nc_status import_run(importer *imp)
{
    TRY(parse_model(imp));
    if (!(imp->net = nc_net_new()))
        return onnx_oom(imp);
    snprintf(imp->net->source_path, sizeof imp->net->source_path, "%s", imp->L.path);
    snprintf(imp->net->source_format, sizeof imp->net->source_format, "onnx");
    TRY(load_initializers(imp));
    TRY(setup_inputs(imp));
    TRY(link_values(imp));
    TRY(topo_sort(imp));
    find_live(imp);
    return convert_graph(imp);
}

static void importer_free(importer *imp)
{
    for (int v = 0; v < imp->n_values; v++)
        onnx_cv_free(imp->values[v].c);
    free(imp->values);
    free(imp->table);
    free(imp->order);
    free(imp->handled);
    free(imp->entry);
    free(imp->unchecked);
    free(imp->live);
    free(imp->refs);
    if (imp->model)
        onnx__model_proto__free_unpacked(imp->model, NULL);
}

nc_status nc_onnx_load_with_report(const char *path, const nc_onnx_options *opts, nc_net **out,
                                   nc_report *report_out, nc_error *err)
{
    if (report_out)
        memset(report_out, 0, sizeof *report_out);
    if (!out || !path)
        return nc_fail(err, NC_ERR_ARGUMENT, "nc_onnx_load: path and out must not be NULL");
    *out = NULL;
    nc_error local = {0};
    importer imp = {0};
    imp.err = &local;
    imp.opts = opts;
    imp.L.path = path;
    imp.L.err = &local;
    imp.L.limit = opts && opts->memory_budget ? opts->memory_budget : nc_memory_budget();
    model_folder(path, imp.L.dir);
    nc_status st = import_run(&imp);
    if (st == NC_OK && report_out && onnx_copy_report(&imp.report, report_out) != NC_OK)
        st = onnx_oom(&imp);
    if (st == NC_OK) {
        imp.net->report = imp.report;
        *out = imp.net;
    } else {
        if (report_out)
            *report_out = imp.report;
        else
            nc_report_clear(&imp.report);
        nc_net_free(imp.net);
        nc_fail(err, st, "%s", local.message);
    }
    importer_free(&imp);
    return st;
}

nc_status nc_onnx_load(const char *path, const nc_onnx_options *opts, nc_net **out, nc_error *err)
{
    return nc_onnx_load_with_report(path, opts, out, NULL, err);
}
