/* nc_onnx_ops.c — ONNX import, translation of data ops to IR nodes: neurons
 * (ReLU, Clip, the QCFS chain), arithmetic with the data (BatchNorm and
 * affine ops folded into the layer before), layout ops, no-ops at inference,
 * and convolution, dense and pooling layers with their padding. */
#include "nc_onnx_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ==== data ops → IR nodes =================================================== */

/* New IR node for node c reading `n_in` data values; output 0 maps to it. */
static nc_status onnx_emit(nctx *c, nc_node_kind kind, int n_in, value *const *in, int ndim, const int64_t *dims,
                           int *out)
{
    int ins[16];
    if (n_in > 16)
        return onnx_node_fail(c, NC_ERR_UNSUPPORTED, "more than 16 inputs");
    for (int i = 0; i < n_in; i++)
        ins[i] = in[i]->ir;
    TRY(onnx_add_ir(c->imp, kind, c->name, n_in, ins, ndim, dims, out));
    value *o = onnx_out_value(c, 0);
    if (o)
        onnx_bind_value(c->imp, o, *out, ndim, dims);
    onnx_credit_node_constants(c, onnx_ir_node(c->imp, *out)->name);
    return onnx_report(c, NC_SUPPORT_CONVERTED, onnx_ir_node(c->imp, *out)->name, NULL);
}

/* Node c has no effect: output 0 is its data input x. */
static nc_status onnx_remove_node(nctx *c, value *x, const char *reason)
{
    onnx_alias_value(c->imp, onnx_out_value(c, 0), x);
    return onnx_report(c, NC_SUPPORT_REMOVED, x->ir >= 0 ? onnx_ir_node(c->imp, x->ir)->name : "", reason);
}

/* Input i as a data value (computed at run time). */
static nc_status data_in(nctx *c, size_t i, value **out)
{
    value *v = onnx_in_value(c, i);
    if (!v)
        return onnx_node_fail(c, NC_ERR_FORMAT, "input %zu is missing", i);
    if (v->c)
        return onnx_unsup(c, "input %zu ('%s') is a constant where the op needs the network's data", i, v->name);
    *out = v;
    return NC_OK;
}

static nc_status need_rank(nctx *c, const value *x, int ndim, const char *what)
{
    if (x->ndim == ndim)
        return NC_OK;
    if (x->ndim == 2 && ndim == 3)
        return onnx_unsup(c, "1-D %s (only 2-D is supported)", what);
    if (x->ndim == 4 && ndim == 3)
        return onnx_unsup(c, "3-D %s (only 2-D is supported)", what);
    char buf[96];
    return onnx_unsup(c, "%s on a %d-d input %s per sample (expected %d-d)", what, x->ndim,
                      onnx_dims_str(x->ndim, x->dims, buf, sizeof buf), ndim);
}

static float *float_array(int64_t n) { return calloc(n > 0 ? (size_t)n : 1, sizeof(float)); }

/* The constant k, broadcast against data x, as one value per channel (axis 0
 * of the per-sample shape); it may not vary along any other axis. */
static nc_status per_channel(nctx *c, const cval *k, const value *x, float **vec)
{
    char buf[96];
    int rank = x->ndim + 1, varies = 0;
    if (x->ndim < 1)
        return onnx_unsup(c, "the data has no channel axis (each sample is a scalar)");
    if (k->ndim > rank)
        return onnx_unsup(c, "a constant of shape %s has more dimensions than the data",
                          onnx_dims_str(k->ndim, k->dims, buf, 96));
    for (int d = 0; d < k->ndim; d++) {
        int axis = d + rank - k->ndim; /* right-aligned, as in ONNX broadcasting */
        if (k->dims[d] == 1)
            continue;
        if (axis != 1 || k->dims[d] != x->dims[0])
            return onnx_unsup(c, "a constant of shape %s varies %s; only per-channel constants (shape [C, 1, 1] or a "
                            "scalar) can be folded", onnx_dims_str(k->ndim, k->dims, buf, 96),
                         axis == 0 ? "along the batch axis" : "within a channel");
        varies = 1;
    }
    int64_t C = x->dims[0];
    float *v = float_array(C);
    if (!v)
        return onnx_oom(c->imp);
    for (int64_t ch = 0; ch < C; ch++)
        v[ch] = (float)onnx_cv_get(k, varies ? ch : 0);
    *vec = v;
    return NC_OK;
}

/* Folds y = scale·x + shift (per output channel) into the IR node that
 * computes x, when only this node reads it. */
static int fold_affine(importer *imp, const value *x, const float *scale, const float *shift)
{
    if (!onnx_sole_reader(imp, x))
        return 0;
    nc_node *n = onnx_ir_node(imp, x->ir);
    if (n->kind != NC_NODE_CONV2D && n->kind != NC_NODE_DENSE && n->kind != NC_NODE_AFFINE)
        return 0;
    int64_t C = n->weight->shape[0], per = nc_tensor_numel(n->weight) / (C ? C : 1);
    if (n->kind == NC_NODE_AFFINE)
        C = nc_tensor_numel(n->weight), per = 1;
    if (C != x->dims[0] || (!n->bias && !(n->bias = nc_tensor_new1(C))))
        return 0;
    for (int64_t o = 0; o < C; o++) {
        float s = scale ? scale[o] : 1.0f;
        for (int64_t j = 0; j < per; j++)
            n->weight->data[o * per + j] *= s;
        n->bias->data[o] = n->bias->data[o] * s + (shift ? shift[o] : 0.0f);
    }
    return 1;
}

/* y = scale·x + shift per channel: folded into the producer, else an AFFINE
 * node.  Takes ownership of scale and shift (either may be NULL). */
static nc_status affine_op(nctx *c, value *x, float *scale, float *shift, const char *what)
{
    importer *imp = c->imp;
    nc_status st = NC_OK;
    if (fold_affine(imp, x, scale, shift)) {
        const char *target = onnx_ir_node(imp, x->ir)->name;
        char reason[REASON_MAX];
        snprintf(reason, sizeof reason, "%s folded into the weights and bias of '%s'", what, target);
        onnx_alias_value(imp, onnx_out_value(c, 0), x);
        onnx_credit_node_constants(c, target);
        st = onnx_report(c, NC_SUPPORT_FOLDED, target, reason);
    } else {
        int64_t C = x->dims[0];
        nc_tensor *w = nc_tensor_new1(C), *b = nc_tensor_new1(C);
        int ir;
        if (!w || !b) {
            nc_tensor_free(w);
            nc_tensor_free(b);
            st = onnx_oom(imp);
        } else {
            for (int64_t ch = 0; ch < C; ch++) {
                w->data[ch] = scale ? scale[ch] : 1.0f;
                b->data[ch] = shift ? shift[ch] : 0.0f;
            }
            st = onnx_emit(c, NC_NODE_AFFINE, 1, &x, x->ndim, x->dims, &ir);
            if (st == NC_OK) {
                onnx_ir_node(imp, ir)->weight = w;
                onnx_ir_node(imp, ir)->bias = b;
            } else {
                nc_tensor_free(w);
                nc_tensor_free(b);
            }
        }
    }
    free(scale);
    free(shift);
    return st;
}

/* ---- neurons ---- */

nc_status onnx_op_relu(nctx *c)
{
    value *x;
    int ir;
    TRY(data_in(c, 0, &x));
    TRY(onnx_emit(c, NC_NODE_NEURON, 1, &x, x->ndim, x->dims, &ir));
    onnx_ir_node(c->imp, ir)->neuron.model = NC_NEURON_RELU;
    return NC_OK;
}

/* Clip bounds: attributes before opset 11, then optional constant inputs. */
static nc_status clip_bounds(nctx *c, float *lo, float *hi)
{
    *lo = -INFINITY;
    *hi = INFINITY;
    if (c->imp->opset < 11) {
        *lo = onnx_attr_float(c, "min", -INFINITY);
        *hi = onnx_attr_float(c, "max", INFINITY);
        return NC_OK;
    }
    for (size_t i = 1; i <= 2; i++) {
        value *b = onnx_in_value(c, i);
        if (!b)
            continue;
        if (!b->c || b->c->n != 1)
            return onnx_unsup(c, "Clip bound '%s' is %s; it must be a constant scalar", b->name,
                              b->c ? "not a scalar" : "computed at run time");
        *(i == 1 ? lo : hi) = (float)onnx_cv_get(b->c, 0);
    }
    return NC_OK;
}

nc_status onnx_op_clip(nctx *c)
{
    value *x;
    float lo, hi;
    int ir;
    TRY(data_in(c, 0, &x));
    TRY(clip_bounds(c, &lo, &hi));
    TRY(onnx_emit(c, NC_NODE_NEURON, 1, &x, x->ndim, x->dims, &ir));
    nc_neuron *n = &onnx_ir_node(c->imp, ir)->neuron;
    n->model = NC_NEURON_CLIP;
    n->clip_min = lo;
    n->clip_max = hi;
    return NC_OK;
}

/* ---- the QCFS chain: Div(λ) → Clip(0,1) → Mul(L) → Add(φ) → Floor → Div(L) → Mul(λ) ---- */

/* The only reader of v, if it is an op_type node not yet handled. */
static int chain_next(importer *imp, const value *v, const char *op_type)
{
    if (v->n_consumers != 1 || v->is_output || v->consumer < 0 || imp->handled[v->consumer])
        return -1;
    const Onnx__NodeProto *p = imp->graph->node[v->consumer];
    if (strcmp(S(p->op_type), op_type) != 0 || (p->domain && p->domain[0] && strcmp(p->domain, "ai.onnx")))
        return -1;
    return v->consumer;
}

/* The constant operand of a binary chain node that reads v. */
static const cval *chain_const(nctx *cc, const value *v, int commutative)
{
    value *a = onnx_in_value(cc, 0), *b = onnx_in_value(cc, 1);
    if (a == v && b && b->c)
        return b->c;
    if (commutative && b == v && a && a->c)
        return a->c;
    return NULL;
}

static int same_const(const cval *a, const cval *b)
{
    if (a->n != b->n)
        return 0;
    for (int64_t k = 0; k < a->n; k++)
        if (onnx_cv_get(a, k) != onnx_cv_get(b, k))
            return 0;
    return 1;
}

typedef struct qcfs_match {
    int nodes[6];   /* Clip, Mul, Add, Floor, Div, Mul */
    int levels;
    float shift;
} qcfs_match;

/* One step of the chain: the node after *v of type op, with its constant. */
static int chain_step(importer *imp, value **v, const char *op, int commutative, nctx *cc, const cval **k)
{
    int n = chain_next(imp, *v, op);
    if (n < 0)
        return -1;
    onnx_nctx_init(cc, imp, n);
    *k = NULL;
    if (commutative >= 0 && !(*k = chain_const(cc, *v, commutative)))
        return -1;
    value *o = onnx_out_value(cc, 0);
    if (!o || cc->p->n_output != 1)
        return -1;
    *v = o;
    return n;
}

static int match_qcfs(importer *imp, value *v, const cval *lambda, qcfs_match *m)
{
    nctx cc;
    const cval *k;
    float lo, hi;
    if ((m->nodes[0] = chain_step(imp, &v, "Clip", -1, &cc, &k)) < 0 || clip_bounds(&cc, &lo, &hi) != NC_OK ||
        lo != 0.0f || hi != 1.0f)
        return 0;
    if ((m->nodes[1] = chain_step(imp, &v, "Mul", 1, &cc, &k)) < 0 || k->n != 1)
        return 0;
    double L = onnx_cv_get(k, 0);
    if ((m->nodes[2] = chain_step(imp, &v, "Add", 1, &cc, &k)) < 0 || k->n != 1)
        return 0;
    m->shift = (float)onnx_cv_get(k, 0);
    if ((m->nodes[3] = chain_step(imp, &v, "Floor", -1, &cc, &k)) < 0)
        return 0;
    if ((m->nodes[4] = chain_step(imp, &v, "Div", 0, &cc, &k)) < 0 || k->n != 1 || onnx_cv_get(k, 0) != L)
        return 0;
    if ((m->nodes[5] = chain_step(imp, &v, "Mul", 1, &cc, &k)) < 0 || !same_const(k, lambda))
        return 0;
    if (!(L >= 1 && L <= 1 << 20 && L == floor(L)))
        return 0;
    m->levels = (int)L;
    return 1;
}

/* Builds the QCFS neuron for the Div node c that heads a matched chain. */
static nc_status emit_qcfs(nctx *c, value *x, const cval *lambda, const qcfs_match *m)
{
    importer *imp = c->imp;
    float *th;
    int ir;
    TRY(per_channel(c, lambda, x, &th));
    int n = lambda->n == 1 ? 1 : (int)x->dims[0];
    nc_status st = onnx_emit(c, NC_NODE_NEURON, 1, &x, x->ndim, x->dims, &ir);
    nc_neuron *neuron = &onnx_ir_node(imp, ir)->neuron;
    if (st == NC_OK)
        st = nc_neuron_set_threshold(neuron, n, th, imp->err);
    free(th);
    TRY(st);
    neuron->model = NC_NEURON_QCFS;
    neuron->levels = m->levels;
    neuron->shift = m->shift;
    const char *target = onnx_ir_node(imp, ir)->name;
    value *last = NULL;
    for (int s = 0; s < 6; s++) {
        nctx cc;
        onnx_nctx_init(&cc, imp, m->nodes[s]);
        last = onnx_out_value(&cc, 0);
        onnx_credit_node_constants(&cc, target);
        TRY(onnx_report(&cc, NC_SUPPORT_FOLDED, target, "part of the QCFS chain Div→Clip→Mul→Add→Floor→Div→Mul"));
    }
    /* the chain's result is the neuron's output */
    imp->refs[ir] -= onnx_out_value(c, 0)->n_consumers;
    onnx_bind_value(imp, last, ir, x->ndim, x->dims);
    return NC_OK;
}

/* ---- arithmetic with the data ---- */

/* The two inputs of Add, Sub, Mul or Div. */
static nc_status two_inputs(nctx *c, value **a, value **b)
{
    *a = onnx_in_value(c, 0), *b = onnx_in_value(c, 1);
    return *a && *b ? NC_OK : onnx_node_fail(c, NC_ERR_FORMAT, "needs two inputs");
}

/* The computed input *x of a binary op with one constant input, and that
 * constant's value per channel of x in *k (a new array). */
static nc_status constant_side(nctx *c, value *a, value *b, value **x, float **k)
{
    *x = a->c ? b : a;
    return per_channel(c, (a->c ? a : b)->c, *x, k);
}

/* Sub and Mul: the computed input *x and the constant input's value per
 * channel in *k; *k_first says the constant is the first input.  Two
 * computed inputs are refused with `both`. */
static nc_status constant_operand(nctx *c, const char *both, value **x, float **k, int *k_first)
{
    value *a, *b;
    TRY(two_inputs(c, &a, &b));
    if (!a->c && !b->c)
        return onnx_unsup(c, "%s", both);
    *k_first = a->c != NULL;
    return constant_side(c, a, b, x, k);
}

nc_status onnx_op_add(nctx *c)
{
    value *a, *b, *x;
    char ba[96], bb[96];
    int ir;
    TRY(two_inputs(c, &a, &b));
    if (!a->c && !b->c) {
        value *in[2] = {a, b};
        int same = a->ndim == b->ndim && !memcmp(a->dims, b->dims, (size_t)a->ndim * sizeof(int64_t));
        if (!same)
            return onnx_unsup(c, "Add with broadcasting between two computed values (%s and %s)",
                              onnx_dims_str(a->ndim, a->dims, ba, 96), onnx_dims_str(b->ndim, b->dims, bb, 96));
        return onnx_emit(c, NC_NODE_ADD, 2, in, a->ndim, a->dims, &ir);
    }
    float *shift;
    TRY(constant_side(c, a, b, &x, &shift));
    return affine_op(c, x, NULL, shift, "the constant");
}

nc_status onnx_op_sub(nctx *c)
{
    value *x;
    float *shift, *scale = NULL;
    int k_first;
    TRY(constant_operand(c, "Sub of two computed values has no spiking equivalent", &x, &shift, &k_first));
    int64_t C = x->dims[0];
    if (k_first) { /* k − x */
        if (!(scale = float_array(C))) {
            free(shift);
            return onnx_oom(c->imp);
        }
        for (int64_t ch = 0; ch < C; ch++)
            scale[ch] = -1.0f;
    } else {
        for (int64_t ch = 0; ch < C; ch++)
            shift[ch] = -shift[ch];
    }
    return affine_op(c, x, scale, shift, "the constant");
}

nc_status onnx_op_mul(nctx *c)
{
    value *x;
    float *scale;
    int k_first;
    TRY(constant_operand(c, "the product of two computed values has no spiking equivalent", &x, &scale, &k_first));
    return affine_op(c, x, scale, NULL, "the constant factor");
}

nc_status onnx_op_div(nctx *c)
{
    value *a, *b;
    TRY(two_inputs(c, &a, &b));
    if (a->c || !b->c)
        return onnx_unsup(c, "division by a computed value has no spiking equivalent");
    value *o = onnx_out_value(c, 0);
    qcfs_match m;
    if (o && match_qcfs(c->imp, o, b->c, &m))
        return emit_qcfs(c, a, b->c, &m);
    float *scale;
    TRY(per_channel(c, b->c, a, &scale));
    for (int64_t ch = 0; ch < a->dims[0]; ch++)
        scale[ch] = 1.0f / scale[ch];
    return affine_op(c, a, scale, NULL, "the constant divisor");
}

nc_status onnx_op_batchnorm(nctx *c)
{
    value *x;
    cval *k[4]; /* scale, B, mean, var */
    TRY(data_in(c, 0, &x));
    if (onnx_attr_int(c, "training_mode", 0) || (c->imp->opset < 7 && !onnx_attr_int(c, "is_test", 1)) ||
        onnx_output_used(c, 1) || onnx_output_used(c, 2) || onnx_output_used(c, 3) || onnx_output_used(c, 4))
        return onnx_unsup(c, "training-mode BatchNormalization (batch statistics); export the model in eval() mode");
    if (c->imp->opset < 9 && !onnx_attr_int(c, "spatial", 1))
        return onnx_unsup(c, "BatchNormalization with spatial=0 (per-position statistics)");
    for (int i = 0; i < 4; i++)
        TRY(onnx_need_const(c, (size_t)i + 1, &k[i]));
    if (x->ndim < 1)
        return onnx_unsup(c, "the data has no channel axis");
    int64_t C = x->dims[0];
    for (int i = 0; i < 4; i++)
        if (k[i]->n != C)
            return onnx_node_fail(c, NC_ERR_SHAPE, "input %d has %lld values for %lld channels", i + 1,
                                  (long long)k[i]->n, (long long)C);
    double eps = onnx_attr_float(c, "epsilon", 1e-5f);
    float *scale = float_array(C), *shift = float_array(C);
    if (!scale || !shift) {
        free(scale);
        free(shift);
        return onnx_oom(c->imp);
    }
    for (int64_t ch = 0; ch < C; ch++) { /* y = γ(x − μ)/√(σ² + ε) + β */
        double s = onnx_cv_get(k[0], ch) / sqrt(onnx_cv_get(k[3], ch) + eps);
        scale[ch] = (float)s;
        shift[ch] = (float)(onnx_cv_get(k[1], ch) - onnx_cv_get(k[2], ch) * s);
    }
    return affine_op(c, x, scale, shift, "BatchNormalization");
}

/* ---- layout ---- */

/* A reshape of the data that keeps the batch axis: identity → removed, flat
 * → FLATTEN, anything else cannot be expressed in the IR. */
static nc_status relayout(nctx *c, value *x, int ndim, const int64_t *dims)
{
    char a[96], b[96];
    int ir;
    if (ndim == x->ndim && !memcmp(dims, x->dims, (size_t)ndim * sizeof(int64_t)))
        return onnx_remove_node(c, x, "does not change the per-sample layout");
    if (ndim == 1 && dims[0] == nc_shape_numel(x->ndim, x->dims)) {
        if (x->ndim == 1)
            return onnx_remove_node(c, x, "the data is already flat");
        return onnx_emit(c, NC_NODE_FLATTEN, 1, &x, 1, dims, &ir);
    }
    if (ndim <= NC_MAX_DIMS - 1) {
        c->guess_ndim = ndim;
        memcpy(c->guess, dims, (size_t)ndim * sizeof *dims);
    }
    return onnx_unsup(c, "%s changes the per-sample shape %s to %s; only flattening (to [N, -1]) is supported", c->op,
                      onnx_dims_str(x->ndim, x->dims, a, 96), onnx_dims_str(ndim, dims, b, 96));
}

nc_status onnx_op_flatten(nctx *c)
{
    value *x;
    TRY(data_in(c, 0, &x));
    int64_t axis = onnx_attr_int(c, "axis", 1), rank = x->ndim + 1;
    if (axis < 0)
        axis += rank;
    if (axis != 1)
        return onnx_unsup(c, "Flatten axis %lld mixes the batch axis with other axes; only axis=1 is supported",
                          (long long)onnx_attr_int(c, "axis", 1));
    int64_t n = nc_shape_numel(x->ndim, x->dims);
    return relayout(c, x, 1, &n);
}

nc_status onnx_op_reshape(nctx *c)
{
    value *x;
    int64_t full[NC_MAX_DIMS + 1], target[CV_MAX_DIMS];
    int n;
    char buf[96];
    TRY(data_in(c, 0, &x));
    if (onnx_in_value(c, 1) && !onnx_in_value(c, 1)->c)
        return onnx_unsup(c, "the target shape is computed at run time");
    int rank = onnx_full_shape(c->imp, x, full);
    TRY(onnx_reshape_target(c, rank, full, nc_shape_numel(rank, full), &n, target));
    if (n < 1 || target[0] != c->imp->batch)
        return onnx_unsup(c, "Reshape to %s mixes the batch axis (batch %lld) with the other axes",
                          onnx_dims_str(n, target, buf, 96), (long long)c->imp->batch);
    if (n - 1 > NC_MAX_DIMS - 1)
        return onnx_unsup(c, "Reshape to %d dimensions (a sample has at most 4)", n);
    return relayout(c, x, n - 1, target + 1);
}

nc_status onnx_op_squeeze(nctx *c)
{
    value *x;
    int64_t full[CV_MAX_DIMS], target[CV_MAX_DIMS];
    int n;
    TRY(data_in(c, 0, &x));
    int rank = onnx_full_shape(c->imp, x, full);
    full[0] = 2; /* a batch of 1 must not be squeezed away as if it were a unit axis */
    TRY(onnx_squeeze_shape(c, !strcmp(c->op, "Unsqueeze"), rank, full, &n, target));
    if (n < 1 || target[0] != 2)
        return onnx_unsup(c, "%s of the batch axis", c->op);
    if (n - 1 > NC_MAX_DIMS - 1)
        return onnx_unsup(c, "%s to %d dimensions", c->op, n);
    return relayout(c, x, n - 1, target + 1);
}

nc_status onnx_op_concat(nctx *c)
{
    value *in[16];
    int ir;
    size_t n = c->p->n_input;
    if (n < 1 || n > 16)
        return onnx_unsup(c, "Concat of %zu inputs (1 to 16 are supported)", n);
    for (size_t i = 0; i < n; i++) {
        if (onnx_in_value(c, i) && onnx_in_value(c, i)->c)
            return onnx_unsup(c, "Concat of the data with a constant (only computed values can be concatenated)");
        TRY(data_in(c, i, &in[i]));
        if (in[i]->ndim != in[0]->ndim)
            return onnx_node_fail(c, NC_ERR_SHAPE, "inputs differ in rank");
    }
    int64_t axis = onnx_attr_int(c, "axis", 1), rank = in[0]->ndim + 1;
    if (axis < 0)
        axis += rank;
    if (axis != 1)
        return onnx_unsup(c, "Concat along axis %lld; only the channel axis (1) is supported",
                          (long long)onnx_attr_int(c, "axis", 1));
    int64_t dims[NC_MAX_DIMS];
    memcpy(dims, in[0]->dims, sizeof dims);
    for (size_t i = 1; i < n; i++) {
        for (int d = 1; d < in[0]->ndim; d++)
            if (in[i]->dims[d] != dims[d])
                return onnx_node_fail(c, NC_ERR_SHAPE, "input %zu differs in a dimension other than channels", i);
        dims[0] += in[i]->dims[0];
    }
    return onnx_emit(c, NC_NODE_CONCAT, (int)n, in, in[0]->ndim, dims, &ir);
}

/* ---- nodes with no effect at inference ---- */

nc_status onnx_op_identity(nctx *c)
{
    value *x = NULL;
    TRY(data_in(c, 0, &x));
    return onnx_remove_node(c, x, "no effect at inference");
}

nc_status onnx_op_dropout(nctx *c)
{
    value *x, *mode = onnx_in_value(c, 2);
    TRY(data_in(c, 0, &x));
    if (onnx_output_used(c, 1))
        return onnx_unsup(c, "the Dropout mask output is used");
    if (mode && (!mode->c || (mode->c->n >= 1 && onnx_cv_get(mode->c, 0) != 0)))
        return onnx_unsup(c, "Dropout in training mode; export the model in eval() mode");
    return onnx_remove_node(c, x, "no effect at inference");
}

nc_status onnx_op_cast(nctx *c)
{
    value *x;
    TRY(data_in(c, 0, &x));
    int to = (int)onnx_attr_int(c, "to", 0);
    if (!onnx_dtype_is_float(to))
        return onnx_unsup(c, "Cast of the data to %s", onnx_dtype_name(to));
    return onnx_remove_node(c, x, "a cast between float types has no effect on float32 values");
}

nc_status onnx_op_softmax(nctx *c)
{
    value *x, *y = onnx_out_value(c, 0);
    TRY(data_in(c, 0, &x));
    if (!y || !y->is_output || y->n_consumers != 1)
        return onnx_unsup(c, "%s in the middle of the network: spiking neurons cannot compute it (only a final "
                        "Softmax, whose result is a graph output, is dropped)", c->op);
    return onnx_remove_node(c, x, "softmax does not change the argmax; the SNN output is the accumulated logits");
}

/* ---- convolution, dense, pooling ---- */

/* Padding [top, left, bottom, right] from `pads` or `auto_pad`, given the
 * input size, the (dilated) kernel and the strides. */
static nc_status window_pads(nctx *c, const value *x, const int *k, const int *s, const int *d, int *pad)
{
    char mode[32];
    size_t n;
    const int64_t *p = onnx_attr_ints(c, "pads", &n);
    onnx_attr_string(c, "auto_pad", mode, sizeof mode);
    memset(pad, 0, 4 * sizeof *pad);
    if (!mode[0] || !strcmp(mode, "NOTSET")) {
        if (p && n != 4)
            return onnx_node_fail(c, NC_ERR_FORMAT, "pads has %zu values, expected 4", n);
        for (size_t j = 0; p && j < 4; j++) {
            if (p[j] < 0 || p[j] > INT_MAX / 4)
                return onnx_node_fail(c, NC_ERR_FORMAT, "bad padding %lld", (long long)p[j]);
            pad[j] = (int)p[j];
        }
        return NC_OK;
    }
    if (!strcmp(mode, "VALID"))
        return NC_OK;
    if (strcmp(mode, "SAME_UPPER") && strcmp(mode, "SAME_LOWER"))
        return onnx_node_fail(c, NC_ERR_FORMAT, "unknown auto_pad '%s'", mode);
    for (int a = 0; a < 2; a++) { /* output = ceil(in / stride) */
        int64_t in = x->dims[1 + a], out = (in + s[a] - 1) / s[a];
        int64_t total = (out - 1) * s[a] + (int64_t)(k[a] - 1) * d[a] + 1 - in;
        total = total < 0 ? 0 : total > INT_MAX / 4 ? INT_MAX / 4 : total;
        int small = (int)(total / 2), large = (int)(total - total / 2);
        int upper = !strcmp(mode, "SAME_UPPER"); /* the extra pixel goes at the end */
        pad[a] = upper ? small : large;
        pad[a + 2] = upper ? large : small;
    }
    return NC_OK;
}

/* Output [C, OH, OW] of a sliding window (the same rule as nc_net.c). */
static nc_status window_shape(nctx *c, const value *x, int64_t channels, const nc_node *n, int64_t *dims)
{
    dims[0] = channels;
    for (int a = 0; a < 2; a++) {
        int64_t span = x->dims[1 + a] + n->pad[a] + n->pad[a + 2] - ((int64_t)(n->kernel[a] - 1) * n->dilation[a] + 1);
        int64_t out = span < 0 ? 0 : n->ceil_mode ? (span + n->stride[a] - 1) / n->stride[a] + 1 : span / n->stride[a] + 1;
        if (n->ceil_mode && out > 0 && (out - 1) * n->stride[a] >= x->dims[1 + a] + n->pad[a])
            out--;
        if (out < 1)
            return onnx_node_fail(c, NC_ERR_SHAPE, "a %dx%d window does not fit the %lldx%lld input", n->kernel[0],
                                  n->kernel[1], (long long)x->dims[1], (long long)x->dims[2]);
        dims[1 + a] = out;
    }
    return NC_OK;
}

/* Fills kernel, stride, dilation and pads of a window node template. */
static nc_status window_params(nctx *c, const value *x, const int *kernel, nc_node *t)
{
    memset(t, 0, sizeof *t);
    t->kernel[0] = kernel[0];
    t->kernel[1] = kernel[1];
    TRY(onnx_attr_pair(c, "strides", 2, t->stride));
    TRY(onnx_attr_pair(c, "dilations", 2, t->dilation));
    return window_pads(c, x, t->kernel, t->stride, t->dilation, t->pad);
}

static nc_status conv_weights(nctx *c, const value *x, cval **w, cval **b, int *groups)
{
    TRY(onnx_need_const(c, 1, w));
    if ((*w)->ndim != 4)
        return onnx_unsup(c, "%d-D convolution (only 2-D is supported)", (*w)->ndim - 2);
    *b = NULL;
    if (onnx_in_value(c, 2))
        TRY(onnx_need_const(c, 2, b));
    int64_t g = onnx_attr_int(c, "group", 1), cout = (*w)->dims[0];
    if (g < 1 || g > INT_MAX || cout % g || (*w)->dims[1] * g != x->dims[0])
        return onnx_node_fail(c, NC_ERR_SHAPE, "weight %lldx%lld with group %lld does not fit %lld input channels",
                              (long long)cout, (long long)(*w)->dims[1], (long long)g, (long long)x->dims[0]);
    if (*b && (*b)->n != cout)
        return onnx_node_fail(c, NC_ERR_SHAPE, "bias has %lld values for %lld output channels", (long long)(*b)->n,
                              (long long)cout);
    if ((*w)->dims[2] > INT_MAX || (*w)->dims[3] > INT_MAX)
        return onnx_node_fail(c, NC_ERR_SHAPE, "kernel too large");
    *groups = (int)g;
    return NC_OK;
}

nc_status onnx_op_conv(nctx *c)
{
    value *x;
    cval *w, *b;
    int groups = 1, ir;
    nc_node t;
    int64_t dims[3];
    TRY(data_in(c, 0, &x));
    if (x->ndim != 3 && onnx_in_value(c, 1) && onnx_in_value(c, 1)->c && onnx_in_value(c, 1)->c->ndim != 4)
        return onnx_unsup(c, "%d-D convolution (only 2-D is supported)", onnx_in_value(c, 1)->c->ndim - 2);
    TRY(need_rank(c, x, 3, "convolution"));
    TRY(conv_weights(c, x, &w, &b, &groups));
    int kernel[2] = {(int)w->dims[2], (int)w->dims[3]};
    size_t nk;
    const int64_t *ks = onnx_attr_ints(c, "kernel_shape", &nk);
    if (ks && (nk != 2 || ks[0] != kernel[0] || ks[1] != kernel[1]))
        return onnx_node_fail(c, NC_ERR_SHAPE, "kernel_shape does not match the weight");
    TRY(window_params(c, x, kernel, &t));
    TRY(window_shape(c, x, w->dims[0], &t, dims));
    nc_tensor *wt = onnx_cv_to_tensor(w, 4, w->dims), *bt = b ? onnx_cv_to_tensor(b, 1, &w->dims[0]) : NULL;
    if (!wt || (b && !bt)) {
        nc_tensor_free(wt);
        nc_tensor_free(bt);
        return onnx_oom(c->imp);
    }
    nc_status st = onnx_emit(c, NC_NODE_CONV2D, 1, &x, 3, dims, &ir);
    if (st != NC_OK) {
        nc_tensor_free(wt);
        nc_tensor_free(bt);
        return st;
    }
    nc_node *n = onnx_ir_node(c->imp, ir);
    nc_node_copy_window(n, &t);
    n->groups = groups;
    n->weight = wt;
    n->bias = bt;
    return NC_OK;
}

/* A DENSE node with weight [out, in] = scale·W (transposed when `trans`:
 * W given as [in, out]) and bias [out] broadcast from `bias` times beta. */
static nc_status emit_dense(nctx *c, value *x, const cval *w, int trans, double scale, const cval *bias,
                            double beta)
{
    int64_t out = trans ? w->dims[1] : w->dims[0], in = trans ? w->dims[0] : w->dims[1];
    int ir;
    if (in != x->dims[0])
        return onnx_node_fail(c, NC_ERR_SHAPE, "the weight expects %lld inputs, the data has %lld", (long long)in,
                              (long long)x->dims[0]);
    nc_tensor *wt = nc_tensor_new2(out, in), *bt = bias ? nc_tensor_new1(out) : NULL;
    if (!wt || (bias && !bt)) {
        nc_tensor_free(wt);
        nc_tensor_free(bt);
        return onnx_oom(c->imp);
    }
    for (int64_t o = 0; o < out; o++)
        for (int64_t i = 0; i < in; i++)
            wt->data[o * in + i] = (float)(scale * onnx_cv_get(w, trans ? i * out + o : o * in + i));
    for (int64_t o = 0; bt && o < out; o++)
        bt->data[o] = (float)(beta * onnx_cv_get(bias, bias->n == 1 ? 0 : o));
    nc_status st = onnx_emit(c, NC_NODE_DENSE, 1, &x, 1, &out, &ir);
    if (st != NC_OK) {
        nc_tensor_free(wt);
        nc_tensor_free(bt);
        return st;
    }
    onnx_ir_node(c->imp, ir)->weight = wt;
    onnx_ir_node(c->imp, ir)->bias = bt;
    return NC_OK;
}

nc_status onnx_op_gemm(nctx *c)
{
    value *a = onnx_in_value(c, 0);
    cval *b, *bias = NULL;
    char buf[96];
    if (!a)
        return onnx_node_fail(c, NC_ERR_FORMAT, "input A is missing");
    if (a->c)
        return onnx_unsup(c, "A is a constant and B the data; only data × constant weights is supported");
    if (onnx_attr_int(c, "transA", 0))
        return onnx_unsup(c, "transA=1: A is the data, so it cannot be transposed");
    TRY(onnx_need_const(c, 1, &b));
    if (onnx_in_value(c, 2))
        TRY(onnx_need_const(c, 2, &bias));
    TRY(need_rank(c, a, 1, "Gemm"));
    if (b->ndim != 2)
        return onnx_node_fail(c, NC_ERR_SHAPE, "B must be 2-d");
    int64_t out = onnx_attr_int(c, "transB", 0) ? b->dims[0] : b->dims[1];
    if (bias) { /* C broadcasts against [N, out]; it may only vary along out */
        int ok = bias->ndim <= 2 && (bias->n == 1 || bias->n == out) &&
                 (bias->ndim < 2 || bias->dims[0] == 1);
        if (!ok)
            return onnx_unsup(c, "the bias C of shape %s varies along the batch axis; only a bias of [out] or [1, out] "
                            "is supported", onnx_dims_str(bias->ndim, bias->dims, buf, 96));
    }
    return emit_dense(c, a, b, !onnx_attr_int(c, "transB", 0), onnx_attr_float(c, "alpha", 1.0f), bias,
                      onnx_attr_float(c, "beta", 1.0f));
}

nc_status onnx_op_matmul(nctx *c)
{
    value *a = onnx_in_value(c, 0);
    cval *b;
    if (!a)
        return onnx_node_fail(c, NC_ERR_FORMAT, "input A is missing");
    if (a->c)
        return onnx_unsup(c, "the data is the second operand; only data × constant weights is supported");
    TRY(onnx_need_const(c, 1, &b));
    if (a->ndim != 1)
        return onnx_unsup(c, "MatMul on a %d-D input; only [N, K] × [K, M] with constant weights is supported",
                          a->ndim + 1);
    if (b->ndim != 2)
        return onnx_unsup(c, "MatMul with a %d-d weight; only a 2-d [K, M] weight is supported", b->ndim);
    return emit_dense(c, a, b, 1, 1.0, NULL, 1.0);
}

/* Kernel of a 2-D pool; 1-D and 3-D pools are unsupported. */
static nc_status pool_kernel(nctx *c, const value *x, int *kernel)
{
    size_t n;
    const int64_t *k = onnx_attr_ints(c, "kernel_shape", &n);
    if (!k)
        return onnx_node_fail(c, NC_ERR_FORMAT, "kernel_shape is missing");
    if (n != 2)
        return onnx_unsup(c, "%zu-D pooling (only 2-D is supported)", n);
    TRY(need_rank(c, x, 3, "pooling"));
    for (int a = 0; a < 2; a++) {
        if (k[a] < 1 || k[a] > INT_MAX)
            return onnx_node_fail(c, NC_ERR_FORMAT, "bad kernel size %lld", (long long)k[a]);
        kernel[a] = (int)k[a];
    }
    return NC_OK;
}

nc_status onnx_op_pool(nctx *c)
{
    value *x;
    int kernel[2], ir, is_max = !strcmp(c->op, "MaxPool");
    nc_node t;
    int64_t dims[3];
    TRY(data_in(c, 0, &x));
    if (is_max && onnx_output_used(c, 1))
        return onnx_unsup(c, "MaxPool with a second output (Indices)");
    TRY(pool_kernel(c, x, kernel));
    TRY(window_params(c, x, kernel, &t));
    if (!is_max && (t.dilation[0] != 1 || t.dilation[1] != 1))
        return onnx_unsup(c, "AveragePool with dilations");
    t.ceil_mode = (int)onnx_attr_int(c, "ceil_mode", 0) != 0;
    t.count_include_pad = (int)onnx_attr_int(c, "count_include_pad", 0) != 0;
    TRY(window_shape(c, x, x->dims[0], &t, dims));
    TRY(onnx_emit(c, is_max ? NC_NODE_MAXPOOL : NC_NODE_AVGPOOL, 1, &x, 3, dims, &ir));
    nc_node_copy_window(onnx_ir_node(c->imp, ir), &t);
    return NC_OK;
}

nc_status onnx_op_global_avgpool(nctx *c)
{
    value *x;
    int ir;
    TRY(data_in(c, 0, &x));
    TRY(need_rank(c, x, 3, "global pooling"));
    int64_t dims[3] = {x->dims[0], 1, 1};
    return onnx_emit(c, NC_NODE_GLOBAL_AVGPOOL, 1, &x, 3, dims, &ir);
}

/* ReduceMean over H and W (how some exporters write adaptive average
 * pooling to 1×1): a global average pool, flattened when keepdims=0. */
nc_status onnx_op_reduce_mean(nctx *c)
{
    value *x;
    int64_t axes[CV_MAX_DIMS];
    int n = 0, seen[4] = {0}, ir;
    TRY(data_in(c, 0, &x));
    TRY(onnx_axes_arg(c, axes, &n));
    for (int k = 0; k < n; k++) {
        int a = onnx_norm_axis(axes[k], x->ndim + 1);
        if (a >= 0 && a < 4)
            seen[a] = 1;
    }
    if (x->ndim != 3 || n != 2 || !seen[2] || !seen[3])
        return onnx_unsup(c, "ReduceMean other than over the spatial axes (2, 3) of an [N, C, H, W] input");
    int64_t pooled[3] = {x->dims[0], 1, 1};
    TRY(onnx_emit(c, NC_NODE_GLOBAL_AVGPOOL, 1, &x, 3, pooled, &ir));
    if (onnx_attr_int(c, "keepdims", 1))
        return NC_OK;
    char name[NC_NAME_MAX + 16];
    snprintf(name, sizeof name, "%.*s_flatten", NC_NAME_MAX - 16, onnx_ir_node(c->imp, ir)->name);
    value *o = onnx_out_value(c, 0);
    int flat;
    TRY(onnx_add_ir(c->imp, NC_NODE_FLATTEN, name, 1, &ir, 1, pooled, &flat));
    if (o) { /* the flattened node computes the output now */
        c->imp->refs[ir] -= o->n_consumers;
        c->imp->refs[ir] += 1;
        onnx_bind_value(c->imp, o, flat, 1, pooled);
    }
    return NC_OK;
}

/* Pad: all-zero pads do nothing (the TorchScript exporter writes one before
 * every AvgPool2d).  Zero-valued constant padding of H and W becomes a 1×1
 * average pool with that padding and count_include_pad = 1: it copies the
 * input and puts zeros around it, exactly, with no new node kind. */
static nc_status pad_amounts(nctx *c, const value *x, int64_t *pads, int *n)
{
    value *p = onnx_in_value(c, 1);
    size_t count = 0;
    const int64_t *attr_pads = onnx_attr_ints(c, "pads", &count);
    if (p && p->name && p->name[0]) {
        if (!p->c)
            return onnx_unsup(c, "Pad with pads computed at run time");
        count = (size_t)p->c->n;
        for (size_t j = 0; j < count && j < 2 * CV_MAX_DIMS; j++)
            pads[j] = onnx_cv_geti(p->c, (int64_t)j);
    } else if (attr_pads) {
        for (size_t j = 0; j < count && j < 2 * CV_MAX_DIMS; j++)
            pads[j] = attr_pads[j];
    }
    if (count != (size_t)(2 * (x->ndim + 1)))
        return onnx_node_fail(c, NC_ERR_FORMAT, "pads has %zu values for a %d-d input", count, x->ndim + 1);
    *n = (int)count;
    return NC_OK;
}

nc_status onnx_op_pad(nctx *c)
{
    value *x, *fill = onnx_in_value(c, 2);
    char mode[32];
    int64_t pads[2 * CV_MAX_DIMS] = {0};
    int n = 0, ir, rank;
    TRY(data_in(c, 0, &x));
    TRY(pad_amounts(c, x, pads, &n));
    rank = n / 2;
    int all_zero = 1;
    for (int j = 0; j < n; j++)
        all_zero &= pads[j] == 0;
    if (all_zero)
        return onnx_remove_node(c, x, "all pads are zero");
    onnx_attr_string(c, "mode", mode, sizeof mode);
    if (mode[0] && strcmp(mode, "constant"))
        return onnx_unsup(c, "Pad mode '%s' (only constant zero padding is supported)", mode);
    if (fill && fill->name && fill->name[0] && (!fill->c || (fill->c->n > 0 && onnx_cv_get(fill->c, 0) != 0)))
        return onnx_unsup(c, "Pad with a non-zero value");
    if (rank != 4 || pads[0] || pads[1] || pads[4] || pads[5])
        return onnx_unsup(c, "Pad of axes other than H and W of an [N, C, H, W] input");
    for (int j = 0; j < n; j++)
        if (pads[j] < 0 || pads[j] > INT_MAX / 4)
            return onnx_unsup(c, "negative padding (cropping)");
    nc_node t;
    memset(&t, 0, sizeof t);
    t.kernel[0] = t.kernel[1] = t.stride[0] = t.stride[1] = t.dilation[0] = t.dilation[1] = 1;
    t.pad[0] = (int)pads[2], t.pad[1] = (int)pads[3], t.pad[2] = (int)pads[6], t.pad[3] = (int)pads[7];
    t.count_include_pad = 1;
    int64_t dims[3];
    TRY(window_shape(c, x, x->dims[0], &t, dims));
    TRY(onnx_emit(c, NC_NODE_AVGPOOL, 1, &x, 3, dims, &ir));
    nc_node_copy_window(onnx_ir_node(c->imp, ir), &t);
    return NC_OK;
}
