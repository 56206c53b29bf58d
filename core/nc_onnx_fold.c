/* nc_onnx_fold.c — ONNX import, constant folding and shape arithmetic:
 * ops whose inputs are all known at import (Constant, Shape, Gather, Concat,
 * Reshape, Slice, elementwise maths, ...) are evaluated here, so that the
 * Shape → Gather → Concat → Reshape chains exporters write become constants. */
#include "nc_onnx_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ==== constant folding ====================================================== */

static void const_what(nctx *c, char *buf, size_t size)
{
    snprintf(buf, size, "node '%s' (%s) output", c->name, c->op);
}

static nc_status new_out(nctx *c, int is_int, int ndim, const int64_t *dims, cval **out)
{
    char what[NC_NAME_MAX + 64];
    const_what(c, what, sizeof what);
    return onnx_cv_new(LD(c), is_int, ndim, dims, what, out);
}

/* Output i of node c becomes the constant k (owned by the value from now). */
static void set_const(nctx *c, size_t i, cval *k)
{
    value *o = onnx_out_value(c, i);
    if (!o) {
        onnx_cv_free(k);
        return;
    }
    onnx_cv_free(o->c);
    o->c = k;
}

/* A constant input that must be there. */
nc_status onnx_need_const(nctx *c, size_t i, cval **out)
{
    value *v = onnx_in_value(c, i);
    if (!v)
        return onnx_node_fail(c, NC_ERR_FORMAT, "input %zu is missing", i);
    if (!v->c)
        return onnx_unsup(c, "input %zu ('%s') is computed at run time; it must be a constant", i, v->name);
    *out = v->c;
    return NC_OK;
}

/* Normalises an axis into [0, rank); -1 when out of range. */
int onnx_norm_axis(int64_t axis, int rank)
{
    if (axis < 0)
        axis += rank;
    return axis >= 0 && axis < rank ? (int)axis : -1;
}

static void strides_of(int ndim, const int64_t *dims, int64_t *strides)
{
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = s;
        s *= dims[d];
    }
}

/* ---- elementwise ---- */

typedef enum { BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV, BIN_POW } bin_op;

static int bin_int(bin_op op, int64_t a, int64_t b, int64_t *r)
{
    switch (op) {
    case BIN_ADD: return __builtin_add_overflow(a, b, r) ? -1 : 0;
    case BIN_SUB: return __builtin_sub_overflow(a, b, r) ? -1 : 0;
    case BIN_MUL: return __builtin_mul_overflow(a, b, r) ? -1 : 0;
    case BIN_DIV:
        if (b == 0 || (a == INT64_MIN && b == -1))
            return -1;
        *r = a / b;
        return 0;
    case BIN_POW: {
        int64_t p = 1;
        for (int64_t k = 0; k < b; k++)
            if (__builtin_mul_overflow(p, a, &p))
                return -1;
        *r = b < 0 ? 0 : p;
        return 0;
    }
    }
    return -1;
}

static double bin_float(bin_op op, double a, double b)
{
    switch (op) {
    case BIN_ADD: return a + b;
    case BIN_SUB: return a - b;
    case BIN_MUL: return a * b;
    case BIN_DIV: return a / b;
    case BIN_POW: return pow(a, b);
    }
    return 0;
}

/* numpy broadcasting of two shapes; -1 when they do not broadcast. */
static int broadcast_dims(const cval *a, const cval *b, int *ndim, int64_t *dims)
{
    int n = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int d = 0; d < n; d++) {
        int da = d - (n - a->ndim), db = d - (n - b->ndim);
        int64_t x = da >= 0 ? a->dims[da] : 1, y = db >= 0 ? b->dims[db] : 1;
        if (x != y && x != 1 && y != 1)
            return -1;
        dims[d] = x == 1 ? y : x;
    }
    *ndim = n;
    return 0;
}

/* Strides of `c` seen through a broadcast to an n-d shape (0 on size-1 axes). */
static void broadcast_strides(const cval *c, int n, int64_t *out)
{
    int64_t own[CV_MAX_DIMS];
    strides_of(c->ndim, c->dims, own);
    for (int d = 0; d < n; d++) {
        int dc = d - (n - c->ndim);
        out[d] = dc >= 0 && c->dims[dc] != 1 ? own[dc] : 0;
    }
}

static nc_status cv_binary(nctx *c, bin_op op, const cval *a, const cval *b, cval **out)
{
    int n;
    int64_t dims[CV_MAX_DIMS], sa[CV_MAX_DIMS], sb[CV_MAX_DIMS], idx[CV_MAX_DIMS] = {0};
    char ba[96], bb[96];
    if (broadcast_dims(a, b, &n, dims) != 0)
        return onnx_node_fail(c, NC_ERR_SHAPE, "shapes %s and %s do not broadcast",
                              onnx_dims_str(a->ndim, a->dims, ba, 96), onnx_dims_str(b->ndim, b->dims, bb, 96));
    cval *r;
    TRY(new_out(c, a->is_int && b->is_int, n, dims, &r));
    broadcast_strides(a, n, sa);
    broadcast_strides(b, n, sb);
    int64_t ia = 0, ib = 0;
    for (int64_t k = 0; k < r->n; k++) {
        if (r->is_int) {
            if (bin_int(op, a->i[ia], b->i[ib], &r->i[k]) != 0) {
                onnx_cv_free(r);
                return onnx_node_fail(c, NC_ERR_FORMAT, "integer overflow or division by zero in a constant");
            }
        } else {
            r->f[k] = (float)bin_float(op, onnx_cv_get(a, ia), onnx_cv_get(b, ib));
        }
        for (int d = n - 1; d >= 0; d--) { /* odometer step over the output index */
            ia += sa[d];
            ib += sb[d];
            if (++idx[d] < dims[d])
                break;
            ia -= sa[d] * dims[d];
            ib -= sb[d] * dims[d];
            idx[d] = 0;
        }
    }
    *out = r;
    return NC_OK;
}

nc_status onnx_c_binary(nctx *c)
{
    static const struct { const char *op; bin_op bin; } ops[] = {
        {"Add", BIN_ADD}, {"Sub", BIN_SUB}, {"Mul", BIN_MUL}, {"Div", BIN_DIV}, {"Pow", BIN_POW}};
    cval *a, *b, *r;
    TRY(onnx_need_const(c, 0, &a));
    TRY(onnx_need_const(c, 1, &b));
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        if (strcmp(c->op, ops[k].op) == 0) {
            TRY(cv_binary(c, ops[k].bin, a, b, &r));
            set_const(c, 0, r);
            return NC_OK;
        }
    }
    return onnx_unsup(c, "no constant evaluation for %s", c->op);
}

static double unary(const char *op, double x)
{
    if (!strcmp(op, "Neg")) return -x;
    if (!strcmp(op, "Sqrt")) return sqrt(x);
    if (!strcmp(op, "Reciprocal")) return 1.0 / x;
    if (!strcmp(op, "Floor")) return floor(x);
    if (!strcmp(op, "Ceil")) return ceil(x);
    if (!strcmp(op, "Abs")) return fabs(x);
    if (!strcmp(op, "Relu")) return x > 0 ? x : 0;
    return x; /* Identity, Dropout */
}

nc_status onnx_c_unary(nctx *c)
{
    cval *a, *r;
    TRY(onnx_need_const(c, 0, &a));
    TRY(new_out(c, a->is_int, a->ndim, a->dims, &r));
    for (int64_t k = 0; k < a->n; k++) {
        if (a->is_int && (!strcmp(c->op, "Identity") || !strcmp(c->op, "Dropout")))
            r->i[k] = a->i[k];
        else
            onnx_cv_set(r, k, unary(c->op, onnx_cv_get(a, k)));
    }
    set_const(c, 0, r);
    return NC_OK;
}

nc_status onnx_c_cast(nctx *c)
{
    cval *a, *r;
    TRY(onnx_need_const(c, 0, &a));
    int to = (int)onnx_attr_int(c, "to", DT_FLOAT);
    if (!onnx_dtype_size(to))
        return onnx_unsup(c, "cast to %s", onnx_dtype_name(to));
    TRY(new_out(c, !onnx_dtype_is_float(to), a->ndim, a->dims, &r));
    for (int64_t k = 0; k < a->n; k++) {
        if (to == DT_BOOL)
            r->i[k] = onnx_cv_get(a, k) != 0;
        else if (r->is_int && a->is_int)
            r->i[k] = a->i[k];
        else
            onnx_cv_set(r, k, onnx_cv_get(a, k));
    }
    set_const(c, 0, r);
    return NC_OK;
}

/* ---- shapes and indexing ---- */

nc_status onnx_c_constant(nctx *c)
{
    const Onnx__AttributeProto *a = onnx_attr(c, "value");
    cval *r;
    char what[NC_NAME_MAX + 64];
    const_what(c, what, sizeof what);
    if (a && a->t)
        TRY(onnx_tensor_to_cval(LD(c), a->t, what, &r));
    else if ((a = onnx_attr(c, "value_float")) && a->has_f) {
        TRY(new_out(c, 0, 0, NULL, &r));
        r->f[0] = a->f;
    } else if ((a = onnx_attr(c, "value_int")) && a->has_i) {
        TRY(new_out(c, 1, 0, NULL, &r));
        r->i[0] = a->i;
    } else if ((a = onnx_attr(c, "value_floats"))) {
        int64_t n = (int64_t)a->n_floats;
        TRY(new_out(c, 0, 1, &n, &r));
        for (int64_t k = 0; k < n; k++)
            r->f[k] = a->floats[k];
    } else if ((a = onnx_attr(c, "value_ints"))) {
        int64_t n = (int64_t)a->n_ints;
        TRY(new_out(c, 1, 1, &n, &r));
        for (int64_t k = 0; k < n; k++)
            r->i[k] = a->ints[k];
    } else {
        return onnx_unsup(c, "a Constant without a numeric value (sparse or string constants are not supported)");
    }
    set_const(c, 0, r);
    return NC_OK;
}

/* Full shape of a value, batch axis included for data. */
int onnx_full_shape(const importer *imp, const value *v, int64_t *dims)
{
    if (v->c) {
        memcpy(dims, v->c->dims, (size_t)v->c->ndim * sizeof(int64_t));
        return v->c->ndim;
    }
    dims[0] = imp->batch;
    memcpy(dims + 1, v->dims, (size_t)v->ndim * sizeof(int64_t));
    return v->ndim + 1;
}

nc_status onnx_op_shape(nctx *c)
{
    value *x = onnx_in_value(c, 0);
    if (!x)
        return onnx_node_fail(c, NC_ERR_FORMAT, "input 0 is missing");
    int64_t dims[CV_MAX_DIMS + 1];
    int r = onnx_full_shape(c->imp, x, dims);
    int64_t start = onnx_attr_int(c, "start", 0), end = onnx_attr_int(c, "end", r);
    start = start < 0 ? start + r : start;
    end = end < 0 ? end + r : end;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < start ? start : end > r ? r : end;
    int64_t n = end - start;
    cval *out;
    TRY(new_out(c, 1, 1, &n, &out));
    memcpy(out->i, dims + start, (size_t)n * sizeof(int64_t));
    set_const(c, 0, out);
    onnx_credit_node_constants(c, "");
    return onnx_report(c, NC_SUPPORT_FOLDED, "", x->c ? "constant: evaluated at import"
                                                 : "the shape is known at import (batch as declared, or 1)");
}

nc_status onnx_c_gather(nctx *c)
{
    cval *data, *ind, *r;
    TRY(onnx_need_const(c, 0, &data));
    TRY(onnx_need_const(c, 1, &ind));
    int axis = onnx_norm_axis(onnx_attr_int(c, "axis", 0), data->ndim);
    if (axis < 0 || data->ndim - 1 + ind->ndim > CV_MAX_DIMS)
        return onnx_node_fail(c, NC_ERR_FORMAT, "bad axis for a %d-d tensor", data->ndim);
    int64_t dims[CV_MAX_DIMS], outer = 1, inner = 1, len = data->dims[axis];
    int n = 0;
    for (int d = 0; d < axis; d++)
        outer *= (dims[n++] = data->dims[d]);
    for (int d = 0; d < ind->ndim; d++)
        dims[n++] = ind->dims[d];
    for (int d = axis + 1; d < data->ndim; d++)
        inner *= (dims[n++] = data->dims[d]);
    TRY(new_out(c, data->is_int, n, dims, &r));
    int64_t k = 0;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t j = 0; j < ind->n; j++) {
            int64_t at = onnx_cv_geti(ind, j);
            at = at < 0 ? at + len : at;
            if (at < 0 || at >= len) {
                onnx_cv_free(r);
                return onnx_node_fail(c, NC_ERR_FORMAT, "index %lld is out of range [0, %lld)",
                                 (long long)onnx_cv_geti(ind, j), (long long)len);
            }
            for (int64_t i = 0; i < inner; i++, k++) {
                int64_t src = (o * len + at) * inner + i;
                if (r->is_int)
                    r->i[k] = data->i[src];
                else
                    r->f[k] = data->f[src];
            }
        }
    }
    set_const(c, 0, r);
    return NC_OK;
}

/* The axes of Squeeze/Unsqueeze: an attribute before opset 13, then input 1. */
nc_status onnx_axes_arg(nctx *c, int64_t *axes, int *n)
{
    size_t count = 0;
    const int64_t *a = onnx_attr_ints(c, "axes", &count);
    cval *in = NULL;
    if (!a && onnx_in_value(c, 1))
        TRY(onnx_need_const(c, 1, &in));
    if (in)
        count = (size_t)in->n;
    if (count > CV_MAX_DIMS)
        return onnx_node_fail(c, NC_ERR_FORMAT, "too many axes");
    for (size_t k = 0; k < count; k++)
        axes[k] = a ? a[k] : onnx_cv_geti(in, (int64_t)k);
    *n = (int)count;
    return NC_OK;
}

/* Output shape of Squeeze (unsq = 0) or Unsqueeze (unsq = 1) on a full shape. */
nc_status onnx_squeeze_shape(nctx *c, int unsq, int rank, const int64_t *dims, int *out_rank, int64_t *out)
{
    int64_t axes[CV_MAX_DIMS];
    int n_axes = 0, mark[CV_MAX_DIMS + 1] = {0};
    TRY(onnx_axes_arg(c, axes, &n_axes));
    int r = unsq ? rank + n_axes : rank;
    if (r > CV_MAX_DIMS)
        return onnx_unsup(c, "the result would have %d dimensions", r);
    for (int k = 0; k < n_axes; k++) {
        int a = onnx_norm_axis(axes[k], r);
        if (a < 0 || mark[a] || (!unsq && dims[a] != 1))
            return onnx_node_fail(c, NC_ERR_FORMAT, "axis %lld cannot be %s", (long long)axes[k],
                                  unsq ? "inserted" : "squeezed");
        mark[a] = 1;
    }
    int n = 0;
    for (int d = 0, src = 0; d < r; d++) {
        if (unsq && mark[d])
            out[n++] = 1;
        else if (unsq)
            out[n++] = dims[src++];
        else if (!(mark[d] || (n_axes == 0 && dims[d] == 1)))
            out[n++] = dims[d];
    }
    *out_rank = n;
    return NC_OK;
}

/* Same values, new shape (Reshape, Flatten, Squeeze, Unsqueeze on constants). */
static nc_status c_reshaped(nctx *c, const cval *a, int ndim, const int64_t *dims)
{
    cval *r;
    TRY(onnx_cv_copy(LD(c), a, "a reshaped constant", &r));
    if (nc_shape_numel(ndim, dims) != a->n) {
        onnx_cv_free(r);
        return onnx_node_fail(c, NC_ERR_SHAPE, "cannot reshape %lld values", (long long)a->n);
    }
    r->ndim = ndim;
    memcpy(r->dims, dims, (size_t)ndim * sizeof(int64_t));
    set_const(c, 0, r);
    return NC_OK;
}

nc_status onnx_c_flatten(nctx *c)
{
    cval *a;
    TRY(onnx_need_const(c, 0, &a));
    int axis = (int)onnx_attr_int(c, "axis", 1);
    axis = axis < 0 ? axis + a->ndim : axis;
    if (axis < 0 || axis > a->ndim)
        return onnx_node_fail(c, NC_ERR_FORMAT, "axis out of range");
    int64_t dims[2] = {1, 1};
    for (int d = 0; d < a->ndim; d++)
        dims[d >= axis] *= a->dims[d];
    return c_reshaped(c, a, 2, dims);
}

/* Resolves a Reshape target (0 = copy, unless allowzero; -1 = inferred). */
nc_status onnx_reshape_target(nctx *c, int rank, const int64_t *in, int64_t numel, int *out_rank,
                              int64_t *out)
{
    cval *shape = NULL;
    size_t n_attr;
    const int64_t *from_attr = onnx_attr_ints(c, "shape", &n_attr); /* opset < 5 */
    if (!from_attr)
        TRY(onnx_need_const(c, 1, &shape));
    int n = from_attr ? (int)n_attr : (int)shape->n;
    if (n > CV_MAX_DIMS)
        return onnx_unsup(c, "a %d-d target shape", n);
    int infer = -1, allowzero = (int)onnx_attr_int(c, "allowzero", 0);
    int64_t known = 1;
    for (int d = 0; d < n; d++) {
        int64_t v = from_attr ? from_attr[d] : onnx_cv_geti(shape, d);
        if (v == 0 && !allowzero && d < rank)
            v = in[d];
        if (v == -1 && infer < 0)
            infer = d;
        else if (v < 0)
            return onnx_node_fail(c, NC_ERR_FORMAT, "bad target dimension %lld", (long long)v);
        else if (__builtin_mul_overflow(known, v, &known))
            return onnx_node_fail(c, NC_ERR_FORMAT, "target shape overflows");
        out[d] = v;
    }
    if (infer >= 0)
        out[infer] = known ? numel / known : 0;
    if (nc_shape_numel(n, out) != numel)
        return onnx_node_fail(c, NC_ERR_SHAPE, "cannot reshape %lld values into the target shape", (long long)numel);
    *out_rank = n;
    return NC_OK;
}

/* Reshape, Squeeze and Unsqueeze of a constant: its values in a new shape. */
nc_status onnx_c_reshape(nctx *c)
{
    cval *a;
    int n;
    int64_t dims[CV_MAX_DIMS];
    TRY(onnx_need_const(c, 0, &a));
    if (!strcmp(c->op, "Reshape"))
        TRY(onnx_reshape_target(c, a->ndim, a->dims, a->n, &n, dims));
    else
        TRY(onnx_squeeze_shape(c, !strcmp(c->op, "Unsqueeze"), a->ndim, a->dims, &n, dims));
    return c_reshaped(c, a, n, dims);
}

nc_status onnx_c_concat(nctx *c)
{
    cval *first, *r;
    TRY(onnx_need_const(c, 0, &first));
    int axis = onnx_norm_axis(onnx_attr_int(c, "axis", 0), first->ndim);
    if (axis < 0)
        return onnx_node_fail(c, NC_ERR_FORMAT, "axis out of range");
    int64_t dims[CV_MAX_DIMS], outer = 1;
    memcpy(dims, first->dims, sizeof dims);
    dims[axis] = 0;
    for (size_t i = 0; i < c->p->n_input; i++) {
        cval *a;
        TRY(onnx_need_const(c, i, &a));
        int fits = a->ndim == first->ndim;
        for (int d = 0; fits && d < a->ndim; d++)
            fits = d == axis || a->dims[d] == first->dims[d];
        if (!fits)
            return onnx_node_fail(c, NC_ERR_SHAPE, "input %zu does not fit the others", i);
        dims[axis] += a->dims[axis];
    }
    for (int d = 0; d < axis; d++)
        outer *= dims[d];
    TRY(new_out(c, first->is_int, first->ndim, dims, &r));
    int64_t k = 0;
    for (int64_t o = 0; o < outer; o++) {
        for (size_t i = 0; i < c->p->n_input; i++) {
            const cval *a = onnx_in_value(c, i)->c;
            int64_t chunk = a->n / (outer ? outer : 1);
            for (int64_t j = 0; j < chunk; j++, k++) {
                if (r->is_int)
                    r->i[k] = onnx_cv_geti(a, o * chunk + j);
                else
                    r->f[k] = (float)onnx_cv_get(a, o * chunk + j);
            }
        }
    }
    set_const(c, 0, r);
    return NC_OK;
}

/* Slice parameters: attributes before opset 10, then inputs 1..4. */
static nc_status slice_args(nctx *c, int rank, int64_t *start, int64_t *end, int64_t *step)
{
    for (int d = 0; d < rank; d++)
        start[d] = 0, step[d] = 1;
    int64_t s[CV_MAX_DIMS], e[CV_MAX_DIMS], ax[CV_MAX_DIMS], st[CV_MAX_DIMS];
    size_t n = 0, ne = 0, na = 0;
    const int64_t *a;
    cval *k;
    if ((a = onnx_attr_ints(c, "starts", &n))) {
        memcpy(s, a, (n > CV_MAX_DIMS ? CV_MAX_DIMS : n) * sizeof *s);
        if ((a = onnx_attr_ints(c, "ends", &ne)))
            memcpy(e, a, (ne > CV_MAX_DIMS ? CV_MAX_DIMS : ne) * sizeof *e);
        if ((a = onnx_attr_ints(c, "axes", &na)))
            memcpy(ax, a, (na > CV_MAX_DIMS ? CV_MAX_DIMS : na) * sizeof *ax);
    } else {
        TRY(onnx_need_const(c, 1, &k));
        n = (size_t)k->n;
        for (size_t j = 0; j < n && j < CV_MAX_DIMS; j++)
            s[j] = onnx_cv_geti(k, (int64_t)j);
        TRY(onnx_need_const(c, 2, &k));
        ne = (size_t)k->n;
        for (size_t j = 0; j < ne && j < CV_MAX_DIMS; j++)
            e[j] = onnx_cv_geti(k, (int64_t)j);
        if (onnx_in_value(c, 3)) {
            TRY(onnx_need_const(c, 3, &k));
            na = (size_t)k->n;
            for (size_t j = 0; j < na && j < CV_MAX_DIMS; j++)
                ax[j] = onnx_cv_geti(k, (int64_t)j);
        }
    }
    if (n > (size_t)rank || ne != n || (na && na != n))
        return onnx_node_fail(c, NC_ERR_FORMAT, "starts, ends and axes differ in length");
    for (size_t j = 0; j < n; j++)
        st[j] = 1;
    if (onnx_in_value(c, 4)) {
        TRY(onnx_need_const(c, 4, &k));
        for (size_t j = 0; j < n && j < (size_t)k->n; j++)
            st[j] = onnx_cv_geti(k, (int64_t)j);
    }
    for (size_t j = 0; j < n; j++) {
        int d = na ? onnx_norm_axis(ax[j], rank) : (int)j;
        if (d < 0 || st[j] == 0)
            return onnx_node_fail(c, NC_ERR_FORMAT, "bad axis or zero step");
        start[d] = s[j], end[d] = e[j], step[d] = st[j];
    }
    return NC_OK;
}

/* Clamps a slice to a dimension the way numpy does; returns its length. */
static int64_t slice_clamp(int64_t dim, int64_t *start, int64_t *end, int64_t step)
{
    int64_t s = *start, e = *end;
    s = s < 0 ? s + dim : s;
    e = e < 0 ? (e < -dim ? -1 : e + dim) : e;
    if (step > 0) {
        s = s < 0 ? 0 : s > dim ? dim : s;
        e = e < 0 ? 0 : e > dim ? dim : e;
        *start = s;
        return e > s ? (e - s + step - 1) / step : 0;
    }
    s = s < 0 ? -1 : s > dim - 1 ? dim - 1 : s;
    e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
    *start = s;
    return s > e ? (s - e + (-step) - 1) / (-step) : 0;
}

/* Fills r, in its own row-major order, from a strided view of a: element
 * idx of r is a's element base + sum(idx[d] * view[d]).  Slice and Transpose
 * are such views. */
static void copy_view(const cval *a, int64_t base, const int64_t *view, cval *r)
{
    int64_t idx[CV_MAX_DIMS] = {0};
    for (int64_t k = 0; k < r->n; k++) {
        int64_t src = base;
        for (int d = 0; d < r->ndim; d++)
            src += idx[d] * view[d];
        if (r->is_int)
            r->i[k] = a->i[src];
        else
            r->f[k] = a->f[src];
        for (int d = r->ndim - 1; d >= 0 && ++idx[d] == r->dims[d]; d--)
            idx[d] = 0;
    }
}

nc_status onnx_c_slice(nctx *c)
{
    cval *a, *r;
    TRY(onnx_need_const(c, 0, &a));
    int64_t start[CV_MAX_DIMS], end[CV_MAX_DIMS], step[CV_MAX_DIMS], dims[CV_MAX_DIMS];
    for (int d = 0; d < a->ndim; d++)
        end[d] = a->dims[d];
    TRY(slice_args(c, a->ndim, start, end, step));
    for (int d = 0; d < a->ndim; d++)
        dims[d] = slice_clamp(a->dims[d], &start[d], &end[d], step[d]);
    TRY(new_out(c, a->is_int, a->ndim, dims, &r));
    int64_t strides[CV_MAX_DIMS], view[CV_MAX_DIMS], base = 0;
    strides_of(a->ndim, a->dims, strides);
    for (int d = 0; d < a->ndim; d++) {
        base += start[d] * strides[d];
        view[d] = step[d] * strides[d];
    }
    copy_view(a, base, view, r);
    set_const(c, 0, r);
    return NC_OK;
}

nc_status onnx_c_transpose(nctx *c)
{
    cval *a, *r;
    TRY(onnx_need_const(c, 0, &a));
    size_t n;
    const int64_t *perm = onnx_attr_ints(c, "perm", &n);
    int p[CV_MAX_DIMS], seen[CV_MAX_DIMS] = {0};
    if (perm && (int)n != a->ndim)
        return onnx_node_fail(c, NC_ERR_FORMAT, "perm has %zu entries for a %d-d tensor", n, a->ndim);
    for (int d = 0; d < a->ndim; d++) {
        p[d] = perm ? onnx_norm_axis(perm[d], a->ndim) : a->ndim - 1 - d;
        if (p[d] < 0 || seen[p[d]]++)
            return onnx_node_fail(c, NC_ERR_FORMAT, "perm is not a permutation");
    }
    int64_t dims[CV_MAX_DIMS], strides[CV_MAX_DIMS], view[CV_MAX_DIMS];
    for (int d = 0; d < a->ndim; d++)
        dims[d] = a->dims[p[d]];
    strides_of(a->ndim, a->dims, strides);
    for (int d = 0; d < a->ndim; d++)
        view[d] = strides[p[d]];
    TRY(new_out(c, a->is_int, a->ndim, dims, &r));
    copy_view(a, 0, view, r);
    set_const(c, 0, r);
    return NC_OK;
}

nc_status onnx_c_constant_of_shape(nctx *c)
{
    cval *shape, *r, *fill = NULL;
    TRY(onnx_need_const(c, 0, &shape));
    if (shape->n > CV_MAX_DIMS)
        return onnx_unsup(c, "a %lld-d result", (long long)shape->n);
    int64_t dims[CV_MAX_DIMS];
    for (int64_t d = 0; d < shape->n; d++)
        dims[d] = onnx_cv_geti(shape, d);
    const Onnx__AttributeProto *a = onnx_attr(c, "value");
    if (a && a->t)
        TRY(onnx_tensor_to_cval(LD(c), a->t, "ConstantOfShape value", &fill));
    nc_status st = new_out(c, fill ? fill->is_int : 0, (int)shape->n, dims, &r);
    if (st == NC_OK && fill && fill->n >= 1)
        for (int64_t k = 0; k < r->n; k++)
            onnx_cv_set(r, k, onnx_cv_get(fill, 0));
    onnx_cv_free(fill);
    if (st == NC_OK)
        set_const(c, 0, r);
    return st;
}

nc_status onnx_c_range(nctx *c)
{
    cval *s, *l, *d, *r;
    TRY(onnx_need_const(c, 0, &s));
    TRY(onnx_need_const(c, 1, &l));
    TRY(onnx_need_const(c, 2, &d));
    if (s->n != 1 || l->n != 1 || d->n != 1 || onnx_cv_get(d, 0) == 0)
        return onnx_node_fail(c, NC_ERR_FORMAT, "start, limit and delta must be scalars, delta non-zero");
    double start = onnx_cv_get(s, 0), delta = onnx_cv_get(d, 0);
    double count = ceil((onnx_cv_get(l, 0) - start) / delta);
    int64_t n = count > 0 ? (count < 1e15 ? (int64_t)count : INT64_MAX / 16) : 0;
    TRY(new_out(c, s->is_int, 1, &n, &r));
    for (int64_t k = 0; k < n; k++)
        onnx_cv_set(r, k,
                    s->is_int ? (double)(onnx_cv_geti(s, 0) + k * onnx_cv_geti(d, 0)) : start + (double)k * delta);
    set_const(c, 0, r);
    return NC_OK;
}
