/* nc_onnx_context.c — ONNX import, the importer's working state: the table
 * of ONNX values by name, the per-node context the op converters receive,
 * adding IR nodes for data values, and reading node attributes. */
#include "nc_onnx_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ==== the importer ========================================================= */
/* The message "<file>: <where><text>". */
static nc_status fail_at(importer *imp, nc_status code, const char *where, const char *fmt, va_list ap)
{
    char text[NC_ERROR_MESSAGE_MAX];
    vsnprintf(text, sizeof text, fmt, ap);
    return nc_fail(imp->err, code, "%s: %s%s", imp->L.path, where, text);
}

nc_status onnx_ifail(importer *imp, nc_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    nc_status st = fail_at(imp, code, "", fmt, ap);
    va_end(ap);
    return st;
}

nc_status onnx_node_fail(nctx *c, nc_status code, const char *fmt, ...)
{
    char where[NC_ERROR_MESSAGE_MAX];
    snprintf(where, sizeof where, "node '%s' (%s, opset %d): ", c->name, c->op, c->imp->opset);
    va_list ap;
    va_start(ap, fmt);
    nc_status st = fail_at(c->imp, code, where, fmt, ap);
    va_end(ap);
    return st;
}
nc_status onnx_unsup(nctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof c->why, fmt, ap);
    va_end(ap);
    return NC_ERR_UNSUPPORTED;
}

nc_status onnx_oom(importer *imp) { return onnx_ifail(imp, NC_ERR_MEMORY, "out of memory"); }

static size_t hash_name(const char *s)
{
    size_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

int onnx_find_value(const importer *imp, const char *name)
{
    if (!imp->table_size)
        return -1;
    size_t mask = imp->table_size - 1;
    for (size_t h = hash_name(name) & mask;; h = (h + 1) & mask) {
        int slot = imp->table[h];
        if (!slot)
            return -1;
        if (strcmp(imp->values[slot - 1].name, name) == 0)
            return slot - 1;
    }
}

static nc_status grow_table(importer *imp)
{
    size_t size = imp->table_size ? imp->table_size * 2 : 256;
    int *table = calloc(size, sizeof *table);
    if (!table)
        return onnx_oom(imp);
    for (int v = 0; v < imp->n_values; v++) {
        size_t h = hash_name(imp->values[v].name) & (size - 1);
        while (table[h])
            h = (h + 1) & (size - 1);
        table[h] = v + 1;
    }
    free(imp->table);
    imp->table = table;
    imp->table_size = size;
    return NC_OK;
}

/* The value called `name`, created (undefined) when new. */
nc_status onnx_get_value(importer *imp, const char *name, value **out)
{
    int v = onnx_find_value(imp, name);
    if (v < 0) {
        if ((size_t)(imp->n_values + 1) * 2 > imp->table_size)
            TRY(grow_table(imp));
        if (imp->n_values == imp->cap_values) {
            int cap = imp->cap_values ? imp->cap_values * 2 : 64;
            value *values = realloc(imp->values, (size_t)cap * sizeof *values);
            if (!values)
                return onnx_oom(imp);
            imp->values = values;
            imp->cap_values = cap;
        }
        v = imp->n_values++;
        value *nv = &imp->values[v];
        memset(nv, 0, sizeof *nv);
        nv->name = name;
        nv->ir = -1;
        nv->producer = -1;
        nv->consumer = -1;
        size_t h = hash_name(name) & (imp->table_size - 1);
        while (imp->table[h])
            h = (h + 1) & (imp->table_size - 1);
        imp->table[h] = v + 1;
    }
    *out = &imp->values[v];
    return NC_OK;
}

/* Input i of the node, or NULL when absent (ONNX marks skipped optional
 * inputs with an empty name).  Every present input is defined: the graph
 * checks run before conversion. */
value *onnx_in_value(nctx *c, size_t i)
{
    if (i >= c->p->n_input || !c->p->input[i] || !c->p->input[i][0])
        return NULL;
    int v = onnx_find_value(c->imp, c->p->input[i]);
    return v < 0 ? NULL : &c->imp->values[v];
}

value *onnx_out_value(nctx *c, size_t i)
{
    if (i >= c->p->n_output || !c->p->output[i] || !c->p->output[i][0])
        return NULL;
    int v = onnx_find_value(c->imp, c->p->output[i]);
    return v < 0 ? NULL : &c->imp->values[v];
}

/* An output that something reads (a node or the graph outputs). */
int onnx_output_used(nctx *c, size_t i)
{
    value *v = onnx_out_value(c, i);
    return v && v->n_consumers > 0;
}

const char *onnx_node_display_name(const Onnx__NodeProto *p, int index, char *buf, size_t size)
{
    if (p->name && p->name[0])
        snprintf(buf, size, "%s", p->name);
    else
        snprintf(buf, size, "%s_%d", S(p->op_type), index);
    return buf;
}

void onnx_nctx_init(nctx *c, importer *imp, int index)
{
    memset(c, 0, sizeof *c);
    c->imp = imp;
    c->index = index;
    c->p = imp->graph->node[index];
    c->op = S(c->p->op_type);
    c->guess_ndim = -1;
    onnx_node_display_name(c->p, index, c->name, sizeof c->name);
}

/* ==== IR construction ====================================================== */

static nc_status ensure_refs(importer *imp, int n)
{
    if (n <= imp->cap_refs)
        return NC_OK;
    int cap = imp->cap_refs ? imp->cap_refs * 2 : 64;
    while (cap < n)
        cap *= 2;
    int *refs = realloc(imp->refs, (size_t)cap * sizeof *refs);
    if (!refs)
        return onnx_oom(imp);
    memset(refs + imp->cap_refs, 0, (size_t)(cap - imp->cap_refs) * sizeof *refs);
    imp->refs = refs;
    imp->cap_refs = cap;
    return NC_OK;
}

/* A name not yet used in the net: base, or base_2, base_3, ... */
static void unique_name(const nc_net *net, const char *base, char *out)
{
    snprintf(out, NC_NAME_MAX, "%s", base[0] ? base : "node");
    for (int n = 2; nc_net_find(net, out) >= 0; n++) {
        char suffix[16];
        int len = snprintf(suffix, sizeof suffix, "_%d", n);
        snprintf(out, NC_NAME_MAX, "%.*s%s", NC_NAME_MAX - 1 - len, base, suffix);
    }
}

void onnx_set_dims(int *ndim, int64_t *dims, int n, const int64_t *src)
{
    *ndim = n;
    for (int d = 0; d < n; d++)
        dims[d] = src[d];
}

/* Appends an IR node named after `base`; returns its index in *out. */
nc_status onnx_add_ir(importer *imp, nc_node_kind kind, const char *base, int n_in, const int *in, int ndim,
                      const int64_t *dims, int *out)
{
    char name[NC_NAME_MAX];
    unique_name(imp->net, base, name);
    int k = nc_net_add_node(imp->net, kind, name, n_in, in);
    if (k < 0)
        return onnx_oom(imp);
    TRY(ensure_refs(imp, k + 1));
    imp->refs[k] = 0;
    nc_node *node = &imp->net->nodes[k];
    node->ndim = ndim > 4 ? 4 : ndim;
    for (int d = 0; d < node->ndim; d++)
        node->shape[d] = dims[d];
    *out = k;
    return NC_OK;
}

/* The value now stands for IR node `ir` with the given per-sample shape. */
void onnx_bind_value(importer *imp, value *v, int ir, int ndim, const int64_t *dims)
{
    v->ir = ir;
    onnx_set_dims(&v->ndim, v->dims, ndim, dims);
    if (ir >= 0)
        imp->refs[ir] += v->n_consumers;
}

/* Output `out` becomes another name for data value `in` (Identity, folds):
 * the edge in → this node goes away, out's consumers read in's IR node. */
void onnx_alias_value(importer *imp, value *out, const value *in)
{
    if (!out)
        return;
    onnx_bind_value(imp, out, in->ir, in->ndim, in->dims);
    if (in->ir >= 0)
        imp->refs[in->ir] -= 1;
}

/* True when the value's IR node is read by this one consumer only, so that
 * changing its weights cannot affect anything else. */
int onnx_sole_reader(const importer *imp, const value *v)
{
    return v->ir >= 0 && !v->tainted && imp->refs[v->ir] == 1;
}

nc_node *onnx_ir_node(importer *imp, int ir) { return &imp->net->nodes[ir]; }

/* ==== attributes ============================================================ */

const Onnx__AttributeProto *onnx_attr(const nctx *c, const char *name)
{
    for (size_t k = 0; k < c->p->n_attribute; k++)
        if (c->p->attribute[k] && strcmp(S(c->p->attribute[k]->name), name) == 0)
            return c->p->attribute[k];
    return NULL;
}

int64_t onnx_attr_int(const nctx *c, const char *name, int64_t fallback)
{
    const Onnx__AttributeProto *a = onnx_attr(c, name);
    return a && a->has_i ? a->i : fallback;
}

float onnx_attr_float(const nctx *c, const char *name, float fallback)
{
    const Onnx__AttributeProto *a = onnx_attr(c, name);
    return a && a->has_f ? a->f : fallback;
}

/* The ints of an attribute, or NULL (count 0) when absent. */
const int64_t *onnx_attr_ints(const nctx *c, const char *name, size_t *count)
{
    const Onnx__AttributeProto *a = onnx_attr(c, name);
    *count = a ? a->n_ints : 0;
    return a && a->n_ints ? a->ints : NULL;
}

/* A string attribute into buf ("" when absent). */
const char *onnx_attr_string(const nctx *c, const char *name, char *buf, size_t size)
{
    const Onnx__AttributeProto *a = onnx_attr(c, name);
    size_t n = a && a->has_s ? a->s.len : 0;
    if (n >= size)
        n = size - 1;
    if (n)
        memcpy(buf, a->s.data, n);
    buf[n] = 0;
    return buf;
}

/* Exactly `want` positive ints (strides, dilations), default 1 each. */
nc_status onnx_attr_pair(nctx *c, const char *name, int want, int *out)
{
    size_t n;
    const int64_t *v = onnx_attr_ints(c, name, &n);
    for (int k = 0; k < want; k++)
        out[k] = 1;
    if (!v)
        return NC_OK;
    if ((int)n != want)
        return onnx_node_fail(c, NC_ERR_FORMAT, "attribute '%s' has %zu values, expected %d", name, n, want);
    for (int k = 0; k < want; k++) {
        if (v[k] < 1 || v[k] > INT_MAX)
            return onnx_node_fail(c, NC_ERR_FORMAT, "attribute '%s' has a bad value %lld", name, (long long)v[k]);
        out[k] = (int)v[k];
    }
    return NC_OK;
}
