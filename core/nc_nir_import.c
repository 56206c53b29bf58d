/* nc_nir_import.c — NIR file → network IR (see nc_nir.h for what is read
 * how; specs/nir.md for the format). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nc_nir.h"
#include "nc_nir_doc.h"

/* ---- the flattened graph ---------------------------------------------------- */

enum frole { F_NODE, F_INPUT, F_OUTPUT, F_IDENT };

typedef struct fnode {
    char name[NC_NAME_MAX];   /* dotted for nodes of nested graphs            */
    const nir_node *nn;       /* NULL for an implicit Input/Output           */
    char type[NIR_TYPE_MAX];
    int role;
    int shaped;               /* out shape known                               */
    int ndim;                 /* NIR output shape                              */
    int64_t shape[NIR_MAX_NDIM];
    int has_in;               /* NIR input shape known                         */
    int in_ndim;
    int64_t in_shape[NIR_MAX_NDIM];
    int ir_ndim;              /* the IR's output shape                         */
    int64_t ir_shape[4];
    int reach, done, order;
    int n_pred;               /* non-recurrent incoming edges                  */
    int ir;                   /* IR node holding its value                     */
    int prev_ir;              /* its RECURRENT node, −1 if none                */
} fnode;

typedef struct fedge {
    int from, to;
    int recurrent;
} fedge;

typedef struct imp {
    const nc_nir_load_options *opts;
    nc_nir_notes *notes;
    nc_error *err;
    fnode *n;
    int count, cap;
    fedge *e;
    int64_t ne, cape;
    int input, output;
    nc_net *net;
} imp;

static const char *const known_types[] = {"Input", "Output", "Affine", "Linear", "Scale", "Conv1d", "Conv2d",
                                          "SumPool2d", "AvgPool2d", "Flatten", "IF", "LIF", "LI", "CubaLIF",
                                          "CubaLI", "I", "Integrator", "Threshold", "Delay", "NIRGraph", NULL};

static int is_type(const fnode *f, const char *t) { return strcmp(f->type, t) == 0; }

static int is_neuron_type(const char *t)
{
    static const char *const list[] = {"IF", "LIF", "LI", "CubaLIF", "CubaLI", "I", "Integrator", "Threshold",
                                       "Delay", NULL};
    for (int k = 0; list[k]; k++)
        if (strcmp(t, list[k]) == 0)
            return 1;
    return 0;
}

/* Stateful nodes: the preferred place to cut a cycle (their output of the
 * previous step is what a recurrent connection means). */
static int is_stateful(const char *t) { return is_neuron_type(t) && strcmp(t, "Threshold") != 0; }

static const char *shape_text(int ndim, const int64_t *shape, char *buf, size_t size)
{
    size_t used = 0;
    used += (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < ndim && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}

static nc_status node_fail(imp *c, const fnode *f, nc_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static nc_status node_fail(imp *c, const fnode *f, nc_status code, const char *fmt, ...)
{
    char what[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return nc_fail(c->err, code, "node '%s' (%s): %s", f->name, f->type, what);
}

static int add_fnode(imp *c, const char *name, const nir_node *nn, const char *type, int role)
{
    if (c->count == c->cap) {
        int cap = c->cap ? 2 * c->cap : 32;
        fnode *grown = realloc(c->n, (size_t)cap * sizeof *grown);
        if (!grown)
            return -1;
        c->n = grown;
        c->cap = cap;
    }
    fnode *f = &c->n[c->count];
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    snprintf(f->type, sizeof f->type, "%s", type);
    f->nn = nn;
    f->role = role;
    f->ir = f->prev_ir = -1;
    return c->count++;
}

static int add_fedge(imp *c, int from, int to)
{
    if (c->ne == c->cape) {
        int64_t cap = c->cape ? 2 * c->cape : 64;
        fedge *grown = realloc(c->e, (size_t)cap * sizeof *grown);
        if (!grown)
            return -1;
        c->e = grown;
        c->cape = cap;
    }
    c->e[c->ne++] = (fedge){from, to, 0};
    return 0;
}

typedef struct local_name {
    const char *name;
    int index;
} local_name;

static int cmp_local(const void *a, const void *b)
{
    return strcmp(((const local_name *)a)->name, ((const local_name *)b)->name);
}

/* "input, lif1, lin, output" (at most 8) for messages. */
static const char *node_list(const nir_graph *g, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = 0;
    for (int k = 0; k < g->n_nodes && used + 1 < size; k++) {
        if (k == 8) {
            snprintf(buf + used, size - used, ", ...");
            break;
        }
        used += (size_t)snprintf(buf + used, size - used, "%s%s", k ? ", " : "", g->nodes[k].name);
    }
    return buf;
}

/* Adds the nodes and edges of graph g (nested: prefix "name.") to the flat
 * graph.  Nested: its Input and Output become identities, returned in
 * *entry and *exit. */
static nc_status flatten_graph(imp *c, const nir_graph *g, const char *prefix, const char *gname, int nested,
                               int *entry, int *exit)
{
    nc_status st = NC_OK;
    int n = g->n_nodes;
    int *first = malloc((size_t)(n ? n : 1) * sizeof(int)), *last = malloc((size_t)(n ? n : 1) * sizeof(int));
    local_name *names = malloc((size_t)(n ? n : 1) * sizeof *names);
    int inputs = 0, outputs = 0;
    *entry = *exit = -1;
    if (!first || !last || !names) {
        st = nc_fail(c->err, NC_ERR_MEMORY, "out of memory");
        goto done;
    }
    for (int k = 0; k < n && st == NC_OK; k++) {
        const nir_node *nn = &g->nodes[k];
        char full[NC_NAME_MAX];
        if ((size_t)snprintf(full, sizeof full, "%s%s", prefix, nn->name) >= sizeof full) {
            st = nc_fail(c->err, NC_ERR_UNSUPPORTED, "node '%s%s': the name is longer than %d bytes", prefix,
                         nn->name, NC_NAME_MAX - 1);
            break;
        }
        names[k] = (local_name){nn->name, k};
        int known = 0;
        for (int t = 0; known_types[t]; t++)
            known |= strcmp(nn->type, known_types[t]) == 0;
        if (!known) {
            st = nc_fail(c->err, NC_ERR_UNSUPPORTED,
                         "node '%s': field 'type' is '%s', which is not a NIR node type (known: Input, Output, "
                         "Affine, Linear, Scale, Conv1d, Conv2d, SumPool2d, AvgPool2d, Flatten, IF, LIF, LI, "
                         "CubaLIF, CubaLI, I, Threshold, Delay, NIRGraph)",
                         full, nn->type);
            break;
        }
        if (strcmp(nn->type, "NIRGraph") == 0) {
            char sub_prefix[NC_NAME_MAX];
            snprintf(sub_prefix, sizeof sub_prefix, "%s.", full);
            if (!nn->graph) {
                st = nc_fail(c->err, NC_ERR_FORMAT, "node '%s' (NIRGraph): has no nodes", full);
                break;
            }
            st = flatten_graph(c, nn->graph, sub_prefix, full, 1, &first[k], &last[k]);
            continue;
        }
        int role = F_NODE;
        if (strcmp(nn->type, "Input") == 0) {
            role = nested ? F_IDENT : F_INPUT;
            inputs++;
        } else if (strcmp(nn->type, "Output") == 0) {
            role = nested ? F_IDENT : F_OUTPUT;
            outputs++;
        }
        int idx = add_fnode(c, full, nn, nn->type, role);
        if (idx < 0) {
            st = nc_fail(c->err, NC_ERR_MEMORY, "out of memory");
            break;
        }
        first[k] = last[k] = idx;
        if (nested && role == F_IDENT && strcmp(nn->type, "Input") == 0)
            *entry = idx;
        if (nested && role == F_IDENT && strcmp(nn->type, "Output") == 0)
            *exit = idx;
    }
    if (st != NC_OK)
        goto done;
    if (nested && (inputs != 1 || outputs != 1)) {
        st = nc_fail(c->err, NC_ERR_UNSUPPORTED,
                     "node '%s' (NIRGraph): a nested graph needs exactly one Input and one Output node, it has %d "
                     "and %d",
                     gname, inputs, outputs);
        goto done;
    }
    qsort(names, (size_t)n, sizeof *names, cmp_local);
    for (int k = 1; k < n; k++)
        if (strcmp(names[k - 1].name, names[k].name) == 0) {
            st = nc_fail(c->err, NC_ERR_FORMAT, "graph '%s': two nodes are named '%s'", gname, names[k].name);
            goto done;
        }
    for (int64_t k = 0; k < g->n_edges; k++) {
        const char *a = g->edges[2 * k], *b = g->edges[2 * k + 1];
        local_name key = {a, 0}, *pa = bsearch(&key, names, (size_t)n, sizeof *names, cmp_local);
        key.name = b;
        local_name *pb = bsearch(&key, names, (size_t)n, sizeof *names, cmp_local);
        if (!pa || !pb) {
            char list[512];
            st = nc_fail(c->err, NC_ERR_FORMAT,
                         "graph '%s', field 'edges', edge %lld ('%s' -> '%s'): there is no node '%s' in this graph "
                         "(its nodes: %s)",
                         gname, (long long)k, a, b, pa ? b : a, node_list(g, list, sizeof list));
            goto done;
        }
        if (add_fedge(c, last[pa->index], first[pb->index]) != 0) {
            st = nc_fail(c->err, NC_ERR_MEMORY, "out of memory");
            goto done;
        }
    }
done:
    free(first);
    free(last);
    free(names);
    return st;
}

/* ---- field access -------------------------------------------------------------- */

static const nir_value *field(const fnode *f, const char *name) { return f->nn ? nir_get(f->nn, 0, name) : NULL; }

static nc_status need_field(imp *c, const fnode *f, const char *name, const nir_value **out)
{
    *out = field(f, name);
    if (!*out)
        return node_fail(c, f, NC_ERR_FORMAT, "field '%s' is missing", name);
    if ((*out)->kind == NIR_STRING)
        return node_fail(c, f, NC_ERR_FORMAT, "field '%s' must be numeric, not a string", name);
    return NC_OK;
}

static double value_at(const nir_value *v, int64_t k)
{
    return v->kind == NIR_FLOAT ? (double)v->f[k] : (double)v->i[k];
}

/* An integer field of `count` values (1 or 2): stored as a scalar, (1,) or
 * (count,), integer or integral float.  Missing: *out = dflt unless required. */
static nc_status get_ints(imp *c, const fnode *f, const char *name, int count, int required, int64_t dflt,
                          int64_t *out)
{
    const nir_value *v = field(f, name);
    if (!v) {
        if (required)
            return node_fail(c, f, NC_ERR_FORMAT, "field '%s' is missing", name);
        for (int k = 0; k < count; k++)
            out[k] = dflt;
        return NC_OK;
    }
    if (v->kind == NIR_STRING || v->ndim > 1 || (v->numel != 1 && v->numel != count))
        return node_fail(c, f, NC_ERR_FORMAT, "field '%s' must be an integer or %d integers", name, count);
    for (int k = 0; k < count; k++) {
        double x = value_at(v, v->numel == 1 ? 0 : k);
        if (x != floor(x) || fabs(x) > 1e9)
            return node_fail(c, f, NC_ERR_FORMAT, "field '%s' holds %g, not a whole number", name, x);
        out[k] = (int64_t)x;
    }
    return NC_OK;
}

static int same_shape(int na, const int64_t *a, int nb, const int64_t *b)
{
    if (na != nb)
        return 0;
    for (int d = 0; d < na; d++)
        if (a[d] != b[d])
            return 0;
    return 1;
}

static void set_out(fnode *f, int ndim, const int64_t *shape)
{
    f->ndim = ndim;
    for (int d = 0; d < ndim; d++)
        f->shape[d] = shape[d];
    f->shaped = 1;
}

static void set_ir(fnode *f, int ndim, const int64_t *shape)
{
    f->ir_ndim = ndim;
    for (int d = 0; d < 4; d++)
        f->ir_shape[d] = d < ndim ? shape[d] : 0;
}

/* The IR shape of a tensor of NIR shape s: 2-d (C, N) values (Conv1d's)
 * become [C, 1, N]; at most 4 dimensions. */
static nc_status ir_shape_of(imp *c, const fnode *f, int ndim, const int64_t *s, int *ir_ndim, int64_t *ir)
{
    if (ndim < 1 || ndim > 4) {
        char buf[128];
        return node_fail(c, f, NC_ERR_UNSUPPORTED, "values of shape %s (%d dimensions) are not supported (1 to 4)",
                         shape_text(ndim, s, buf, sizeof buf), ndim);
    }
    if (ndim == 2) {
        int64_t three[3] = {s[0], 1, s[1]};
        *ir_ndim = 3;
        memcpy(ir, three, sizeof three);
        return NC_OK;
    }
    *ir_ndim = ndim;
    for (int d = 0; d < ndim; d++)
        ir[d] = s[d];
    return NC_OK;
}

/* ---- neuron parameters ---------------------------------------------------------------- */

typedef struct param_spec {
    const char *name;
    nc_neuron_param row;
    int required;
    float dflt;
} param_spec;

/* The fields of each neuron type. */
static int neuron_params(const char *type, param_spec *out)
{
    int n = 0;
#define P(nm, rw, req, d) out[n++] = (param_spec){nm, rw, req, d}
    if (!strcmp(type, "IF")) {
        P("r", NC_NPARAM_R, 1, 0);
        P("v_threshold", NC_NPARAM_V_THRESHOLD, 1, 0);
        P("v_reset", NC_NPARAM_V_RESET, 0, 0);
    } else if (!strcmp(type, "LIF")) {
        P("tau", NC_NPARAM_TAU, 1, 0);
        P("r", NC_NPARAM_R, 1, 0);
        P("v_leak", NC_NPARAM_V_LEAK, 1, 0);
        P("v_threshold", NC_NPARAM_V_THRESHOLD, 1, 0);
        P("v_reset", NC_NPARAM_V_RESET, 0, 0);
    } else if (!strcmp(type, "LI")) {
        P("tau", NC_NPARAM_TAU, 1, 0);
        P("r", NC_NPARAM_R, 1, 0);
        P("v_leak", NC_NPARAM_V_LEAK, 1, 0);
    } else if (!strcmp(type, "CubaLIF")) {
        P("tau_mem", NC_NPARAM_TAU, 1, 0);
        P("tau_syn", NC_NPARAM_TAU_SYN, 1, 0);
        P("r", NC_NPARAM_R, 1, 0);
        P("v_leak", NC_NPARAM_V_LEAK, 1, 0);
        P("v_threshold", NC_NPARAM_V_THRESHOLD, 1, 0);
        P("v_reset", NC_NPARAM_V_RESET, 0, 0);
        P("w_in", NC_NPARAM_W_IN, 0, 1);
    } else if (!strcmp(type, "CubaLI")) {
        P("tau_mem", NC_NPARAM_TAU, 1, 0);
        P("tau_syn", NC_NPARAM_TAU_SYN, 1, 0);
        P("r", NC_NPARAM_R, 1, 0);
        P("v_leak", NC_NPARAM_V_LEAK, 1, 0);
        P("w_in", NC_NPARAM_W_IN, 0, 1);
    } else if (!strcmp(type, "I") || !strcmp(type, "Integrator")) {
        P("r", NC_NPARAM_R, 1, 0);
    } else if (!strcmp(type, "Threshold")) {
        P("threshold", NC_NPARAM_V_THRESHOLD, 1, 0);
    } else if (!strcmp(type, "Delay")) {
        P("delay", NC_NPARAM_DELAY, 1, 0);
    }
#undef P
    return n;
}

static nc_neuron_model model_of(const char *type)
{
    if (!strcmp(type, "LIF")) return NC_NEURON_LIF;
    if (!strcmp(type, "CubaLIF")) return NC_NEURON_CUBA_LIF;
    if (!strcmp(type, "LI")) return NC_NEURON_LI;
    if (!strcmp(type, "CubaLI")) return NC_NEURON_CUBA_LI;
    if (!strcmp(type, "I") || !strcmp(type, "Integrator")) return NC_NEURON_INTEGRATOR;
    if (!strcmp(type, "Threshold")) return NC_NEURON_THRESHOLD;
    if (!strcmp(type, "Delay")) return NC_NEURON_DELAY;
    return NC_NEURON_NIR_IF;
}

/* The parameter shape of a neuron node: the common shape of its fields
 * with more than one value (*full = 1), or none (*full = 0: all are 0-d or
 * one value, broadcast to the incoming shape). */
static nc_status neuron_shape(imp *c, const fnode *f, int *full, int *ndim, int64_t *shape, const char **pname)
{
    param_spec spec[8];
    int n = neuron_params(f->type, spec);
    const nir_value *first = NULL;
    *full = 0;
    for (int k = 0; k < n; k++) {
        const nir_value *v = field(f, spec[k].name);
        if (!v) {
            if (spec[k].required)
                return node_fail(c, f, NC_ERR_FORMAT, "field '%s' is missing", spec[k].name);
            continue;
        }
        if (v->kind == NIR_STRING)
            return node_fail(c, f, NC_ERR_FORMAT, "field '%s' must be numeric, not a string", spec[k].name);
        if (v->numel == 0)
            return node_fail(c, f, NC_ERR_FORMAT, "field '%s' is empty", spec[k].name);
        if (v->numel == 1 && v->ndim <= 1)
            continue; /* a scalar */
        if (!first) {
            first = v;
            continue;
        }
        if (!same_shape(first->ndim, first->shape, v->ndim, v->shape)) {
            char a[128], b[128];
            return node_fail(c, f, NC_ERR_SHAPE, "fields '%s' %s and '%s' %s differ in shape (they must be equal)",
                             first->name, shape_text(first->ndim, first->shape, a, sizeof a), v->name,
                             shape_text(v->ndim, v->shape, b, sizeof b));
        }
    }
    *pname = first ? first->name : "";
    if (first) {
        *full = 1;
        *ndim = first->ndim;
        memcpy(shape, first->shape, (size_t)first->ndim * sizeof(int64_t));
    } else {
        /* all scalars: a (1,)-shaped one still says "one neuron" */
        *ndim = 0;
    }
    return NC_OK;
}

/* ---- shape inference (NIR level) ------------------------------------------------------ */

/* Output size of a window along one axis (PyTorch, floor mode). */
static int64_t window_out(int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t d)
{
    int64_t span = in + p0 + p1 - (d * (k - 1) + 1);
    return span < 0 ? 0 : span / s + 1;
}

typedef struct conv_geom {
    int64_t cout, cin_g, groups, k[2], s[2], d[2], pad[4]; /* pad: top, left, bottom, right */
} conv_geom;

/* Conv1d/Conv2d geometry (dims = 1 or 2) checked against the input shape. */
static nc_status conv_geometry(imp *c, const fnode *f, int dims, conv_geom *g)
{
    const nir_value *w;
    char buf[128];
    nc_status st = need_field(c, f, "weight", &w);
    if (st != NC_OK)
        return st;
    if (w->ndim != dims + 2)
        return node_fail(c, f, NC_ERR_FORMAT, "field 'weight' must have %d dimensions, it has shape %s", dims + 2,
                         shape_text(w->ndim, w->shape, buf, sizeof buf));
    memset(g, 0, sizeof *g);
    g->cout = w->shape[0];
    g->cin_g = w->shape[1];
    g->k[0] = dims == 2 ? w->shape[2] : 1;
    g->k[1] = w->shape[dims + 1];
    int64_t groups[1];
    int64_t s[2], d[2];
    if ((st = get_ints(c, f, "groups", 1, 0, 1, groups)) != NC_OK ||
        (st = get_ints(c, f, "stride", dims, 0, 1, s)) != NC_OK ||
        (st = get_ints(c, f, "dilation", dims, 0, 1, d)) != NC_OK)
        return st;
    g->groups = groups[0];
    g->s[0] = dims == 2 ? s[0] : 1;
    g->s[1] = s[dims - 1];
    g->d[0] = dims == 2 ? d[0] : 1;
    g->d[1] = d[dims - 1];
    if (g->groups < 1 || g->cout < 1 || g->cin_g < 1 || g->cout % g->groups)
        return node_fail(c, f, NC_ERR_FORMAT, "field 'groups' (%lld) does not divide the %lld output channels",
                         (long long)g->groups, (long long)g->cout);
    for (int a = 0; a < 2; a++)
        if (g->k[a] < 1 || g->s[a] < 1 || g->d[a] < 1)
            return node_fail(c, f, NC_ERR_FORMAT, "kernel, field 'stride' and field 'dilation' must be at least 1");
    const nir_value *pv = field(f, "padding");
    if (pv && pv->kind == NIR_STRING) {
        const char *mode = pv->numel == 1 ? pv->s[0] : "";
        if (strcmp(mode, "valid") == 0) {
            /* zeros */
        } else if (strcmp(mode, "same") == 0) {
            for (int a = 0; a < 2; a++) {
                int64_t total = g->d[a] * (g->k[a] - 1);
                g->pad[a] = total / 2;          /* PyTorch puts the odd one at the end */
                g->pad[a + 2] = total - total / 2;
            }
            if (g->s[0] > 1 || g->s[1] > 1)
                nir_note(c->notes, NC_NIR_NOTE_WARNING, f->name,
                         "padding \"same\" with a stride above 1 (PyTorch refuses it): padded as for stride 1");
        } else {
            return node_fail(c, f, NC_ERR_FORMAT, "field 'padding' is the string \"%s\"; only \"same\" and \"valid\" exist",
                             mode);
        }
    } else {
        int64_t p[2];
        if ((st = get_ints(c, f, "padding", dims, 0, 0, p)) != NC_OK)
            return st;
        g->pad[0] = g->pad[2] = dims == 2 ? p[0] : 0;
        g->pad[1] = g->pad[3] = p[dims - 1];
        for (int a = 0; a < 4; a++)
            if (g->pad[a] < 0)
                return node_fail(c, f, NC_ERR_FORMAT, "field 'padding' is negative");
    }
    return NC_OK;
}

static nc_status pool_geometry(imp *c, const fnode *f, conv_geom *g)
{
    int64_t k[2], s[2], p[2];
    nc_status st;
    memset(g, 0, sizeof *g);
    if ((st = get_ints(c, f, "kernel_size", 2, 1, 0, k)) != NC_OK ||
        (st = get_ints(c, f, "stride", 2, 0, -1, s)) != NC_OK || (st = get_ints(c, f, "padding", 2, 0, 0, p)) != NC_OK)
        return st;
    for (int a = 0; a < 2; a++) {
        g->k[a] = k[a];
        g->s[a] = s[a] < 0 ? k[a] : s[a]; /* PyTorch's default stride is the kernel */
        g->d[a] = 1;
        g->pad[a] = g->pad[a + 2] = p[a];
        if (g->k[a] < 1 || g->s[a] < 1 || p[a] < 0)
            return node_fail(c, f, NC_ERR_FORMAT, "fields 'kernel_size' and 'stride' must be at least 1, 'padding' at least 0");
    }
    if (!field(f, "stride"))
        nir_note(c->notes, NC_NIR_NOTE_WARNING, f->name, "field 'stride' is missing; the kernel size is used");
    return NC_OK;
}

static nc_status mismatch(imp *c, const fnode *from, const fnode *to, const char *field_name, int want_ndim,
                          const int64_t *want)
{
    char a[128], b[128];
    return nc_fail(c->err, NC_ERR_SHAPE,
                   "shape mismatch along the edge '%s' -> '%s': '%s' gives %s, but node '%s' (%s) takes %s (field '%s')",
                   from->name, to->name, from->name, shape_text(from->ndim, from->shape, a, sizeof a), to->name,
                   to->type, shape_text(want_ndim, want, b, sizeof b), field_name);
}

/* First non-recurrent predecessor of f (−1 if none). */
static int first_pred(const imp *c, int fi)
{
    for (int64_t k = 0; k < c->ne; k++)
        if (c->e[k].to == fi && !c->e[k].recurrent)
            return c->e[k].from;
    return -1;
}

/* Infers f's output shape (NIR and IR) from its input shape (known when it
 * has a non-recurrent input; else from its own fields). */
static nc_status infer_fnode(imp *c, int fi)
{
    fnode *f = &c->n[fi];
    int pi = first_pred(c, fi);
    const fnode *p = pi >= 0 ? &c->n[pi] : NULL;
    char buf[128], buf2[128];
    nc_status st = NC_OK;
    /* the incoming shape: every non-recurrent edge must bring the same */
    if (p) {
        f->has_in = 1;
        f->in_ndim = p->ndim;
        memcpy(f->in_shape, p->shape, sizeof f->in_shape);
        for (int64_t k = 0; k < c->ne; k++) {
            const fedge *e = &c->e[k];
            if (e->to != fi || e->recurrent || e->from == pi)
                continue;
            const fnode *q = &c->n[e->from];
            if (!same_shape(q->ndim, q->shape, p->ndim, p->shape))
                return nc_fail(c->err, NC_ERR_SHAPE,
                               "shape mismatch at node '%s' (%s): its inputs '%s' %s and '%s' %s are summed but differ "
                               "in shape",
                               f->name, f->type, p->name, shape_text(p->ndim, p->shape, buf, sizeof buf), q->name,
                               shape_text(q->ndim, q->shape, buf2, sizeof buf2));
        }
    }
    int irn = 0;
    int64_t irs[4] = {0};
    if (f->role == F_INPUT) {
        const nir_value *v = field(f, "shape");
        int64_t s[NIR_MAX_NDIM];
        int n = 0;
        if (!v)
            return node_fail(c, f, NC_ERR_FORMAT, "field 'shape' is missing");
        if (v->kind == NIR_STRING || v->ndim > 1 || v->numel < 1 || v->numel > 4)
            return node_fail(c, f, NC_ERR_FORMAT, "field 'shape' must be 1 to 4 sizes");
        if (v->ndim == 0)
            nir_note(c->notes, NC_NIR_NOTE_WARNING, f->name,
                     "field 'shape' is a scalar, not a 1-d array (the official reader refuses that); read as [%g]",
                     value_at(v, 0));
        for (int64_t k = 0; k < v->numel; k++) {
            double x = value_at(v, k);
            if (!(x >= 1 && x <= 1e9) || x != floor(x))
                return node_fail(c, f, NC_ERR_FORMAT, "field 'shape' holds %g, not a positive size", x);
            s[n++] = (int64_t)x;
        }
        set_out(f, n, s);
        if ((st = ir_shape_of(c, f, n, s, &irn, irs)) != NC_OK)
            return st;
        set_ir(f, irn, irs);
        return NC_OK;
    }
    if (f->role == F_OUTPUT || f->role == F_IDENT || is_type(f, "Scale")) {
        if (!p)
            return node_fail(c, f, NC_ERR_FORMAT, "has no input edge");
        set_out(f, p->ndim, p->shape);
        set_ir(f, p->ir_ndim, p->ir_shape);
        if (f->role != F_NODE) {
            const nir_value *v = field(f, "shape");
            if (v && v->kind != NIR_STRING && v->ndim <= 1) {
                int64_t s[NIR_MAX_NDIM], numel = 1;
                int n = (int)(v->numel < NIR_MAX_NDIM ? v->numel : NIR_MAX_NDIM);
                for (int k = 0; k < n; k++)
                    numel *= (s[k] = (int64_t)value_at(v, k));
                if (!same_shape(n, s, p->ndim, p->shape)) {
                    if (numel != nc_shape_numel(p->ndim, p->shape))
                        return mismatch(c, p, f, "shape", n, s);
                    nir_note(c->notes, NC_NIR_NOTE_WARNING, f->name,
                             "field 'shape' %s differs from what arrives from '%s', %s (same number of values); the "
                             "arriving shape is used",
                             shape_text(n, s, buf, sizeof buf), p->name, shape_text(p->ndim, p->shape, buf2, sizeof buf2));
                }
            }
        }
        if (is_type(f, "Scale")) {
            const nir_value *v;
            if ((st = need_field(c, f, "scale", &v)) != NC_OK)
                return st;
            int64_t numel = nc_shape_numel(p->ndim, p->shape);
            if (v->numel != 1 && !(v->numel == numel && (same_shape(v->ndim, v->shape, p->ndim, p->shape) || v->ndim == 1)))
                return mismatch(c, p, f, "scale", v->ndim, v->shape);
        }
        return NC_OK;
    }
    if (is_type(f, "Affine") || is_type(f, "Linear")) {
        const nir_value *w, *b = NULL;
        if ((st = need_field(c, f, "weight", &w)) != NC_OK)
            return st;
        if (w->ndim != 2 || w->shape[0] < 1 || w->shape[1] < 1)
            return node_fail(c, f, NC_ERR_FORMAT, "field 'weight' must be a 2-d (out, in) array, it is %s",
                             shape_text(w->ndim, w->shape, buf, sizeof buf));
        if (is_type(f, "Affine")) {
            if ((st = need_field(c, f, "bias", &b)) != NC_OK)
                return st;
            if (b->numel != w->shape[0])
                return node_fail(c, f, NC_ERR_SHAPE, "field 'bias' has %lld values for %lld outputs",
                                 (long long)b->numel, (long long)w->shape[0]);
        }
        int64_t in = w->shape[1];
        if (p && nc_shape_numel(p->ndim, p->shape) != in)
            return mismatch(c, p, f, "weight", 1, &in);
        if (p && p->ndim != 1)
            nir_note(c->notes, NC_NIR_NOTE_WARNING, f->name,
                     "its input '%s' is %s, not 1-d; read as flattened (NIR's type check would refuse it)", p->name,
                     shape_text(p->ndim, p->shape, buf, sizeof buf));
        f->has_in = 1;
        f->in_ndim = 1;
        f->in_shape[0] = in;
        set_out(f, 1, &w->shape[0]);
        set_ir(f, 1, &w->shape[0]);
        return NC_OK;
    }
    if (is_type(f, "Conv1d") || is_type(f, "Conv2d")) {
        int dims = is_type(f, "Conv2d") ? 2 : 1;
        conv_geom g;
        if ((st = conv_geometry(c, f, dims, &g)) != NC_OK)
            return st;
        int64_t in[3] = {g.cin_g * g.groups, 0, 0};
        const nir_value *is = field(f, "input_shape");
        int64_t declared[2] = {0, 0};
        if (is) {
            if ((st = get_ints(c, f, "input_shape", dims, 1, 0, declared)) != NC_OK)
                return st;
        }
        if (p) {
            if (p->ndim != dims + 1 || p->shape[0] != in[0]) {
                int64_t want[3] = {in[0], is ? declared[0] : -1, is && dims == 2 ? declared[1] : -1};
                return mismatch(c, p, f, "weight", dims + 1, want);
            }
            for (int d = 0; d < dims; d++)
                in[1 + d] = p->shape[1 + d];
            if (is && (declared[0] != in[1] || (dims == 2 && declared[1] != in[2]))) {
                int64_t want[3] = {in[0], declared[0], declared[dims - 1]};
                return mismatch(c, p, f, "input_shape", dims + 1, want);
            }
        } else {
            if (!is)
                return node_fail(c, f, NC_ERR_FORMAT, "its input size is unknown (no field 'input_shape', no input edge)");
            in[1] = declared[0];
            in[2] = declared[dims - 1];
        }
        if (!is)
            nir_note(c->notes, NC_NIR_NOTE_INFO, f->name, "field 'input_shape' is missing; taken from the input");
        f->has_in = 1;
        f->in_ndim = dims + 1;
        memcpy(f->in_shape, in, sizeof in);
        int64_t ih = dims == 2 ? in[1] : 1, iw = dims == 2 ? in[2] : in[1];
        int64_t oh = window_out(ih, g.k[0], g.s[0], g.pad[0], g.pad[2], g.d[0]);
        int64_t ow = window_out(iw, g.k[1], g.s[1], g.pad[1], g.pad[3], g.d[1]);
        if (oh < 1 || ow < 1)
            return node_fail(c, f, NC_ERR_SHAPE, "the %lldx%lld kernel does not fit the input %s", (long long)g.k[0],
                             (long long)g.k[1], shape_text(dims + 1, in, buf, sizeof buf));
        int64_t out[3] = {g.cout, dims == 2 ? oh : ow, ow};
        set_out(f, dims + 1, out);
        int64_t ir3[3] = {g.cout, oh, ow};
        set_ir(f, 3, ir3);
        return NC_OK;
    }
    if (is_type(f, "SumPool2d") || is_type(f, "AvgPool2d")) {
        conv_geom g;
        if ((st = pool_geometry(c, f, &g)) != NC_OK)
            return st;
        if (!p)
            return node_fail(c, f, NC_ERR_FORMAT, "has no input edge");
        if (p->ndim != 3)
            return nc_fail(c->err, NC_ERR_SHAPE,
                           "shape mismatch along the edge '%s' -> '%s': '%s' gives %s, but node '%s' (%s) takes a "
                           "[C, H, W] input",
                           p->name, f->name, p->name, shape_text(p->ndim, p->shape, buf, sizeof buf), f->name, f->type);
        int64_t oh = window_out(p->shape[1], g.k[0], g.s[0], g.pad[0], g.pad[2], 1);
        int64_t ow = window_out(p->shape[2], g.k[1], g.s[1], g.pad[1], g.pad[3], 1);
        if (oh < 1 || ow < 1)
            return node_fail(c, f, NC_ERR_SHAPE, "field 'kernel_size' does not fit the input %s",
                             shape_text(p->ndim, p->shape, buf, sizeof buf));
        int64_t out[3] = {p->shape[0], oh, ow};
        set_out(f, 3, out);
        set_ir(f, 3, out);
        return NC_OK;
    }
    if (is_type(f, "Flatten")) {
        if (!p)
            return node_fail(c, f, NC_ERR_FORMAT, "has no input edge");
        int64_t sd[1], ed[1];
        if (!field(f, "start_dim"))
            nir_note(c->notes, NC_NIR_NOTE_WARNING, f->name,
                     "field 'start_dim' is missing; NIR's default 1 is used (0 flattens everything)");
        if ((st = get_ints(c, f, "start_dim", 1, 0, 1, sd)) != NC_OK || (st = get_ints(c, f, "end_dim", 1, 0, -1, ed)) != NC_OK)
            return st;
        int nd = p->ndim;
        int64_t s0 = sd[0] < 0 ? sd[0] + nd : sd[0], e0 = ed[0] < 0 ? ed[0] + nd : ed[0];
        if (s0 < 0 || e0 >= nd || s0 > e0)
            return node_fail(c, f, NC_ERR_SHAPE, "fields 'start_dim' %lld and 'end_dim' %lld do not fit its input %s",
                             (long long)sd[0], (long long)ed[0], shape_text(nd, p->shape, buf, sizeof buf));
        const nir_value *it = field(f, "input_type");
        if (it && it->kind != NIR_STRING && it->ndim == 1) {
            int64_t s[NIR_MAX_NDIM];
            int n = (int)(it->numel < NIR_MAX_NDIM ? it->numel : NIR_MAX_NDIM);
            for (int k = 0; k < n; k++)
                s[k] = (int64_t)value_at(it, k);
            if (!same_shape(n, s, p->ndim, p->shape))
                return mismatch(c, p, f, "input_type", n, s);
        }
        int64_t out[NIR_MAX_NDIM];
        int n = 0;
        for (int d = 0; d < s0; d++)
            out[n++] = p->shape[d];
        int64_t prod = 1;
        for (int64_t d = s0; d <= e0; d++)
            prod *= p->shape[d];
        out[n++] = prod;
        for (int64_t d = e0 + 1; d < nd; d++)
            out[n++] = p->shape[d];
        set_out(f, n, out);
        int64_t numel = nc_shape_numel(p->ndim, p->shape);
        set_ir(f, 1, &numel);
        return NC_OK;
    }
    if (is_neuron_type(f->type)) {
        int full = 0, pn = 0;
        int64_t ps[NIR_MAX_NDIM];
        const char *pname = "";
        if ((st = neuron_shape(c, f, &full, &pn, ps, &pname)) != NC_OK)
            return st;
        if (full && p) {
            if (nc_shape_numel(pn, ps) != nc_shape_numel(p->ndim, p->shape))
                return mismatch(c, p, f, pname, pn, ps);
            if (!same_shape(pn, ps, p->ndim, p->shape))
                nir_note(c->notes, NC_NIR_NOTE_WARNING, f->name,
                         "parameters of shape %s read values of shape %s (same number): the parameter shape is used",
                         shape_text(pn, ps, buf, sizeof buf), shape_text(p->ndim, p->shape, buf2, sizeof buf2));
        }
        if (!full && !p)
            return node_fail(c, f, NC_ERR_FORMAT,
                             "its size is unknown: its parameters are scalars and its only input is a recurrent edge");
        if (!full)
            nir_note(c->notes, NC_NIR_NOTE_INFO, f->name,
                     "scalar (0-d or one-value) parameters broadcast to the shape arriving");
        if (full) {
            set_out(f, pn, ps);
            if (p)
                set_ir(f, p->ir_ndim, p->ir_shape);
            else if ((st = ir_shape_of(c, f, pn, ps, &irn, irs)) == NC_OK)
                set_ir(f, irn, irs);
            if (!p) {
                f->has_in = 1;
                f->in_ndim = pn;
                memcpy(f->in_shape, ps, (size_t)pn * sizeof(int64_t));
            }
        } else {
            set_out(f, p->ndim, p->shape);
            set_ir(f, p->ir_ndim, p->ir_shape);
        }
        return st;
    }
    return node_fail(c, f, NC_ERR_UNSUPPORTED, "this node type cannot be read");
}

/* ---- graph structure: entry, exit, reachability, cycles, order ---------------------------- */

/* Adjacency (CSR) over the edges that are not recurrent. */
typedef struct adj {
    int *start; /* count + 1 */
    int *to;    /* edge targets                                              */
    int64_t *edge;
} adj;

static void adj_free(adj *a)
{
    free(a->start);
    free(a->to);
    free(a->edge);
    memset(a, 0, sizeof *a);
}

static int adj_build(const imp *c, adj *a)
{
    memset(a, 0, sizeof *a);
    a->start = calloc((size_t)c->count + 1, sizeof(int));
    a->to = malloc((size_t)(c->ne ? c->ne : 1) * sizeof(int));
    a->edge = malloc((size_t)(c->ne ? c->ne : 1) * sizeof(int64_t));
    if (!a->start || !a->to || !a->edge)
        return -1;
    for (int64_t k = 0; k < c->ne; k++)
        if (!c->e[k].recurrent)
            a->start[c->e[k].from + 1]++;
    for (int k = 0; k < c->count; k++)
        a->start[k + 1] += a->start[k];
    int *fill = calloc((size_t)c->count + 1, sizeof(int));
    if (!fill)
        return -1;
    for (int64_t k = 0; k < c->ne; k++) {
        if (c->e[k].recurrent)
            continue;
        int u = c->e[k].from, slot = a->start[u] + fill[u]++;
        a->to[slot] = c->e[k].to;
        a->edge[slot] = k;
    }
    free(fill);
    return 0;
}

/* Finds one cycle among the non-recurrent edges of nodes reachable from the
 * input, by an iterative DFS; marks one of its edges recurrent (preferably
 * one leaving a stateful node, the last such on the cycle).  Returns 1 if a
 * cycle was cut, 0 if none is left, −1 on out of memory. */
static int cut_one_cycle(imp *c, int64_t *cut_edge)
{
    adj a;
    int n = c->count, rc = 0;
    int *state = calloc((size_t)n, sizeof(int)); /* 0 new, 1 on stack, 2 done */
    int *stack = malloc((size_t)(n ? n : 1) * sizeof(int)), *pos = malloc((size_t)(n ? n : 1) * sizeof(int));
    int64_t *via = malloc((size_t)(n ? n : 1) * sizeof(int64_t)); /* edge into stack[d] */
    if (!state || !stack || !pos || !via || adj_build(c, &a) != 0) {
        rc = -1;
        goto done;
    }
    /* roots first (the input, nodes fed only by recurrent edges), then any
     * node not visited yet (a cycle entered only through a recurrent edge) */
    for (int root = 0; root < 2 * n && rc == 0; root++) {
        int r0 = root % n;
        if (state[r0] || (root < n && !(r0 == c->input || c->n[r0].n_pred == 0)))
            continue;
        int start = r0;
        int depth = 0;
        stack[0] = start;
        pos[0] = a.start[start];
        via[0] = -1;
        state[start] = 1;
        while (depth >= 0 && rc == 0) {
            int u = stack[depth];
            if (pos[depth] >= a.start[u + 1]) {
                state[u] = 2;
                depth--;
                continue;
            }
            int slot = pos[depth]++;
            int v = a.to[slot];
            if (state[v] == 0) {
                depth++;
                stack[depth] = v;
                pos[depth] = a.start[v];
                via[depth] = a.edge[slot];
                state[v] = 1;
            } else if (state[v] == 1) {
                /* cycle: stack[d..depth] then the edge back to v = stack[d] */
                int d = depth;
                while (stack[d] != v)
                    d--;
                int64_t best = a.edge[slot];
                if (!is_stateful(c->n[u].type)) {
                    for (int k = depth; k > d; k--) /* via[k] leaves stack[k-1] */
                        if (is_stateful(c->n[stack[k - 1]].type)) {
                            best = via[k];
                            break;
                        }
                }
                c->e[best].recurrent = 1;
                *cut_edge = best;
                rc = 1;
            }
        }
    }
done:
    adj_free(&a);
    free(state);
    free(stack);
    free(pos);
    free(via);
    return rc;
}

static void count_preds(imp *c)
{
    for (int k = 0; k < c->count; k++)
        c->n[k].n_pred = 0;
    for (int64_t k = 0; k < c->ne; k++)
        if (!c->e[k].recurrent)
            c->n[c->e[k].to].n_pred++;
}

/* Marks the nodes reachable from the input (through all edges). */
static nc_status mark_reachable(imp *c)
{
    int *queue = malloc((size_t)(c->count ? c->count : 1) * sizeof(int));
    if (!queue)
        return nc_fail(c->err, NC_ERR_MEMORY, "out of memory");
    int head = 0, tail = 0;
    queue[tail++] = c->input;
    c->n[c->input].reach = 1;
    while (head < tail) {
        int u = queue[head++];
        for (int64_t k = 0; k < c->ne; k++)
            if (c->e[k].from == u && !c->n[c->e[k].to].reach) {
                c->n[c->e[k].to].reach = 1;
                queue[tail++] = c->e[k].to;
            }
    }
    free(queue);
    for (int k = 0; k < c->count; k++)
        if (!c->n[k].reach)
            return nc_fail(c->err, NC_ERR_FORMAT,
                           "node '%s' (%s) cannot be reached from the Input node '%s' (a part of the graph, or a cycle, "
                           "that nothing feeds)",
                           c->n[k].name, c->n[k].type, c->n[c->input].name);
    return NC_OK;
}

/* Finds the Input and the Output, adding implicit ones where NIR would. */
static nc_status find_ends(imp *c)
{
    int inputs = 0, outputs = 0;
    c->input = c->output = -1;
    for (int k = 0; k < c->count; k++) {
        if (c->n[k].role == F_INPUT) {
            inputs++;
            c->input = k;
        } else if (c->n[k].role == F_OUTPUT) {
            outputs++;
            c->output = k;
        }
    }
    if (inputs > 1)
        return nc_fail(c->err, NC_ERR_UNSUPPORTED, "the graph has %d Input nodes; this program runs graphs with one input",
                       inputs);
    if (outputs > 1)
        return nc_fail(c->err, NC_ERR_UNSUPPORTED,
                       "the graph has %d Output nodes; this program runs graphs with one output", outputs);
    int *in_deg = calloc((size_t)c->count + 1, sizeof(int)), *out_deg = calloc((size_t)c->count + 1, sizeof(int));
    if (!in_deg || !out_deg) {
        free(in_deg);
        free(out_deg);
        return nc_fail(c->err, NC_ERR_MEMORY, "out of memory");
    }
    for (int64_t k = 0; k < c->ne; k++) {
        out_deg[c->e[k].from]++;
        in_deg[c->e[k].to]++;
    }
    nc_status st = NC_OK;
    if (c->input < 0) {
        /* NIR ≥ 1.0.6 adds an Input before a node that nothing feeds */
        int root = -1, roots = 0;
        for (int k = 0; k < c->count; k++)
            if (in_deg[k] == 0 && c->n[k].role != F_OUTPUT) {
                root = k;
                roots++;
            }
        if (roots == 0)
            st = nc_fail(c->err, NC_ERR_FORMAT,
                         "the graph has no Input node and every node has an incoming edge: it cannot start (a cycle "
                         "with no Input)");
        else if (roots > 1)
            st = nc_fail(c->err, NC_ERR_UNSUPPORTED,
                         "the graph has no Input node and %d nodes that nothing feeds ('%s', ...); add an Input node",
                         roots, c->n[root].name);
        else {
            int k = add_fnode(c, "input", NULL, "Input", F_INPUT);
            if (k < 0 || add_fedge(c, k, root) != 0)
                st = nc_fail(c->err, NC_ERR_MEMORY, "out of memory");
            else {
                c->input = k;
                nir_note(c->notes, NC_NIR_NOTE_WARNING, c->n[root].name,
                         "the graph has no Input node: one is added in front of this node");
            }
        }
    }
    if (st == NC_OK && c->output < 0) {
        int leaf = -1, leaves = 0;
        for (int k = 0; k < c->count; k++)
            if (out_deg[k] == 0 && c->n[k].role != F_INPUT && k != c->input) {
                leaf = k;
                leaves++;
            }
        if (leaves != 1)
            st = nc_fail(c->err, leaves ? NC_ERR_UNSUPPORTED : NC_ERR_FORMAT,
                         "the graph has no Output node and %d nodes that feed nothing; add an Output node", leaves);
        else {
            int k = add_fnode(c, "output", NULL, "Output", F_OUTPUT);
            if (k < 0 || add_fedge(c, leaf, k) != 0)
                st = nc_fail(c->err, NC_ERR_MEMORY, "out of memory");
            else {
                c->output = k;
                nir_note(c->notes, NC_NIR_NOTE_WARNING, c->n[leaf].name,
                         "the graph has no Output node: one is added after this node");
            }
        }
    }
    free(in_deg);
    free(out_deg);
    if (st != NC_OK)
        return st;
    for (int64_t k = 0; k < c->ne; k++) {
        if (c->e[k].to == c->input)
            return nc_fail(c->err, NC_ERR_FORMAT, "field 'edges': the edge '%s' -> '%s' leads into the Input node",
                           c->n[c->e[k].from].name, c->n[c->input].name);
        if (c->e[k].from == c->output)
            return nc_fail(c->err, NC_ERR_FORMAT, "field 'edges': the edge '%s' -> '%s' leaves the Output node",
                           c->n[c->output].name, c->n[c->e[k].to].name);
    }
    return NC_OK;
}

/* Kahn's order over non-recurrent edges; the output last.  order[] gets the
 * node indices. */
static nc_status topo_order(imp *c, int *order)
{
    adj a;
    int *deg = calloc((size_t)c->count, sizeof(int)), *queue = malloc((size_t)c->count * sizeof(int));
    if (!deg || !queue || adj_build(c, &a) != 0) {
        free(deg);
        free(queue);
        adj_free(&a);
        return nc_fail(c->err, NC_ERR_MEMORY, "out of memory");
    }
    for (int64_t k = 0; k < c->ne; k++)
        if (!c->e[k].recurrent)
            deg[c->e[k].to]++;
    int head = 0, tail = 0, n = 0;
    for (int k = 0; k < c->count; k++) /* the input first, then other roots in file order */
        if (k == c->input)
            queue[tail++] = k;
    for (int k = 0; k < c->count; k++)
        if (deg[k] == 0 && k != c->input && k != c->output)
            queue[tail++] = k;
    while (head < tail) {
        int u = queue[head++];
        order[n++] = u;
        for (int s = a.start[u]; s < a.start[u + 1]; s++) {
            int v = a.to[s];
            if (--deg[v] == 0 && v != c->output)
                queue[tail++] = v;
        }
    }
    nc_status st = NC_OK;
    if (deg[c->output] != 0 || n != c->count - 1)
        st = nc_fail(c->err, NC_ERR_INTERNAL, "NIR import: the graph could not be ordered after cutting its cycles");
    else
        order[n++] = c->output;
    adj_free(&a);
    free(deg);
    free(queue);
    return st;
}

/* ---- building the IR ---------------------------------------------------------------------------- */

static nc_tensor *tensor_from(const nir_value *v, int ndim, const int64_t *shape)
{
    nc_tensor *t = nc_tensor_new(ndim, shape);
    if (!t)
        return NULL;
    for (int64_t k = 0; k < v->numel && k < nc_tensor_numel(t); k++)
        t->data[k] = (float)value_at(v, k);
    return t;
}

/* A unique IR node name: base, or base#2, base#3, ... */
static void unique_name(const nc_net *net, const char *base, char *out)
{
    snprintf(out, NC_NAME_MAX, "%s", base);
    for (int k = 2; nc_net_find(net, out) >= 0; k++) {
        char suffix[16];
        int len = snprintf(suffix, sizeof suffix, "#%d", k);
        snprintf(out, NC_NAME_MAX, "%.*s%s", NC_NAME_MAX - 1 - len, base, suffix);
    }
}

static int add_ir(imp *c, nc_node_kind kind, const char *base, int n_inputs, const int *inputs)
{
    char name[NC_NAME_MAX];
    unique_name(c->net, base, name);
    return nc_net_add_node(c->net, kind, name, n_inputs, inputs);
}

static int all_finite(const nir_value *v)
{
    for (int64_t k = 0; k < v->numel; k++)
        if (!isfinite(value_at(v, k)))
            return 0;
    return 1;
}

/* The neuron node of f on IR input `in`. */
static nc_status build_neuron(imp *c, fnode *f, int in)
{
    param_spec spec[8];
    int n = neuron_params(f->type, spec);
    int64_t numel = nc_shape_numel(f->ndim, f->shape);
    int64_t pshape[2] = {NC_NPARAM_COUNT, numel};
    nc_tensor *p = nc_tensor_new(2, pshape);
    if (!p)
        return node_fail(c, f, NC_ERR_MEMORY, "out of memory for the parameters");
    for (int k = 0; k < n; k++) {
        const nir_value *v = field(f, spec[k].name);
        float *row = p->data + (int64_t)spec[k].row * numel;
        if (v && !all_finite(v)) {
            nc_tensor_free(p);
            return node_fail(c, f, NC_ERR_FORMAT, "field '%s' holds a value that is not finite", spec[k].name);
        }
        for (int64_t e = 0; e < numel; e++)
            row[e] = v ? (float)value_at(v, v->numel == 1 ? 0 : e) : spec[k].dflt;
        if (!v && !spec[k].required && strcmp(spec[k].name, "v_reset") != 0)
            nir_note(c->notes, NC_NIR_NOTE_INFO, f->name, "field '%s' is missing; %g is used", spec[k].name,
                     spec[k].dflt);
        if (spec[k].row == NC_NPARAM_TAU || spec[k].row == NC_NPARAM_TAU_SYN)
            for (int64_t e = 0; e < numel; e++)
                if (!(row[e] > 0)) {
                    double bad = row[e];
                    nc_tensor_free(p);
                    return node_fail(c, f, NC_ERR_FORMAT, "field '%s' holds %g; time constants must be positive",
                                     spec[k].name, bad);
                }
        if (spec[k].row == NC_NPARAM_DELAY)
            for (int64_t e = 0; e < numel; e++)
                if (!(row[e] >= 0) || row[e] / c->opts->dt > 100000) {
                    double bad = row[e];
                    nc_tensor_free(p);
                    return node_fail(c, f, NC_ERR_UNSUPPORTED,
                                     "field 'delay' holds %g s: negative, or more than 100000 steps of dt = %g s", bad,
                                     c->opts->dt);
                }
    }
    int is_if = is_type(f, "IF");
    int plain_if = is_if;
    if (is_if) {
        const float *r = p->data + NC_NPARAM_R * numel, *th = p->data + NC_NPARAM_V_THRESHOLD * numel;
        const float *vr = p->data + NC_NPARAM_V_RESET * numel;
        for (int64_t e = 0; e < numel && plain_if; e++)
            plain_if = r[e] == 1.0f && th[e] == 1.0f && vr[e] == 0.0f;
    }
    int i = add_ir(c, NC_NODE_NEURON, f->name, 1, &in);
    if (i < 0) {
        nc_tensor_free(p);
        return node_fail(c, f, NC_ERR_MEMORY, "out of memory");
    }
    nc_neuron *nr = &c->net->nodes[i].neuron;
    nr->reset = c->opts->reset_subtract ? NC_RESET_SUBTRACT : NC_RESET_ZERO;
    nr->dt = (float)c->opts->dt;
    nr->integrate_dt = c->opts->if_dt;
    if (plain_if && !c->opts->if_dt) {
        /* r = 1, θ = 1, v_reset = 0: our IF, whose spikes (θ = 1) are NIR's */
        float one = 1.0f;
        nc_tensor_free(p);
        nr->model = NC_NEURON_IF;
        nr->v0_fraction = 0.0f;
        nr->compare = NC_FIRE_GT;
        if (nc_neuron_set_threshold(nr, 1, &one, c->err) != NC_OK)
            return NC_ERR_MEMORY;
    } else {
        nr->model = is_if ? NC_NEURON_NIR_IF : model_of(f->type);
        c->net->nodes[i].weight = p;
    }
    f->ir = i;
    return NC_OK;
}

/* conv2d for Conv1d/Conv2d. */
static nc_status build_conv(imp *c, fnode *f, int in)
{
    int dims = is_type(f, "Conv2d") ? 2 : 1;
    conv_geom g;
    nc_status st = conv_geometry(c, f, dims, &g);
    if (st != NC_OK)
        return st;
    const nir_value *w = field(f, "weight"), *b = field(f, "bias");
    int64_t ws[4] = {g.cout, g.cin_g, g.k[0], g.k[1]};
    int i = add_ir(c, NC_NODE_CONV2D, f->name, 1, &in);
    if (i < 0)
        return node_fail(c, f, NC_ERR_MEMORY, "out of memory");
    nc_node *n = &c->net->nodes[i];
    if (!all_finite(w) || (b && !all_finite(b)))
        return node_fail(c, f, NC_ERR_FORMAT, "fields 'weight' or 'bias' hold values that are not finite");
    if (!(n->weight = tensor_from(w, 4, ws)))
        return node_fail(c, f, NC_ERR_MEMORY, "out of memory for the weight");
    if (b) {
        if (b->kind == NIR_STRING || b->numel != g.cout)
            return node_fail(c, f, NC_ERR_SHAPE, "field 'bias' has %lld values for %lld output channels",
                             (long long)b->numel, (long long)g.cout);
        if (!(n->bias = tensor_from(b, 1, &g.cout)))
            return node_fail(c, f, NC_ERR_MEMORY, "out of memory for the bias");
    } else {
        nir_note(c->notes, NC_NIR_NOTE_WARNING, f->name, "field 'bias' is missing (the official reader needs it); no bias is used");
    }
    for (int a = 0; a < 2; a++) {
        n->kernel[a] = (int)g.k[a];
        n->stride[a] = (int)g.s[a];
        n->dilation[a] = (int)g.d[a];
    }
    for (int a = 0; a < 4; a++)
        n->pad[a] = (int)g.pad[a];
    n->groups = (int)g.groups;
    f->ir = i;
    return NC_OK;
}

/* The affine node y = s·x per channel (shift 0) with the C values of s. */
static int add_channel_scale(imp *c, const char *name, int in, int channels, const float *s)
{
    int i = add_ir(c, NC_NODE_AFFINE, name, 1, &in);
    if (i < 0)
        return -1;
    nc_node *n = &c->net->nodes[i];
    int64_t ch = channels;
    n->weight = nc_tensor_new(1, &ch);
    n->bias = nc_tensor_new(1, &ch);
    if (!n->weight || !n->bias)
        return -1;
    memcpy(n->weight->data, s, (size_t)channels * sizeof(float));
    return i;
}

static nc_status build_node(imp *c, fnode *f, int in)
{
    nc_status st = NC_OK;
    if (f->role == F_INPUT) {
        int i = add_ir(c, NC_NODE_INPUT, f->name, 0, NULL);
        if (i < 0)
            return node_fail(c, f, NC_ERR_MEMORY, "out of memory");
        c->net->nodes[i].ndim = f->ir_ndim;
        memcpy(c->net->nodes[i].shape, f->ir_shape, sizeof f->ir_shape);
        f->ir = i;
        return NC_OK;
    }
    if (f->role == F_OUTPUT) {
        f->ir = add_ir(c, NC_NODE_OUTPUT, f->name, 1, &in);
        return f->ir < 0 ? node_fail(c, f, NC_ERR_MEMORY, "out of memory") : NC_OK;
    }
    if (f->role == F_IDENT) {
        f->ir = in;
        return NC_OK;
    }
    if (is_type(f, "Affine") || is_type(f, "Linear")) {
        const nir_value *w = field(f, "weight"), *b = field(f, "bias");
        if (!all_finite(w) || (b && is_type(f, "Affine") && !all_finite(b)))
            return node_fail(c, f, NC_ERR_FORMAT, "fields 'weight' or 'bias' hold values that are not finite");
        int i = add_ir(c, NC_NODE_DENSE, f->name, 1, &in);
        if (i < 0)
            return node_fail(c, f, NC_ERR_MEMORY, "out of memory");
        nc_node *n = &c->net->nodes[i];
        n->weight = tensor_from(w, 2, w->shape);
        if (is_type(f, "Affine"))
            n->bias = tensor_from(b, 1, &w->shape[0]);
        if (!n->weight || (is_type(f, "Affine") && !n->bias))
            return node_fail(c, f, NC_ERR_MEMORY, "out of memory for the weight");
        f->ir = i;
        return NC_OK;
    }
    if (is_type(f, "Scale")) {
        const nir_value *v = field(f, "scale");
        if (!all_finite(v))
            return node_fail(c, f, NC_ERR_FORMAT, "field 'scale' holds values that are not finite");
        int ch = f->ir_ndim == 1 ? (int)f->ir_shape[0] : (int)f->ir_shape[0];
        int64_t numel = nc_shape_numel(f->ir_ndim, f->ir_shape), inner = numel / ch;
        float *per = malloc((size_t)ch * sizeof(float));
        if (!per)
            return node_fail(c, f, NC_ERR_MEMORY, "out of memory");
        int uniform = 1;
        for (int64_t e = 0; e < numel && uniform; e++) {
            float s = (float)value_at(v, v->numel == 1 ? 0 : e);
            if (e % inner == 0)
                per[e / inner] = s;
            else
                uniform = s == per[e / inner];
        }
        int i;
        if (uniform) { /* per channel (or per value of a vector): the affine node */
            i = add_channel_scale(c, f->name, in, ch, per);
        } else {
            i = add_ir(c, NC_NODE_SCALE, f->name, 1, &in);
            if (i >= 0 && !(c->net->nodes[i].weight = tensor_from(v, 1, &v->numel)))
                i = -1;
        }
        free(per);
        if (i < 0)
            return node_fail(c, f, NC_ERR_MEMORY, "out of memory");
        f->ir = i;
        return NC_OK;
    }
    if (is_type(f, "Conv1d") || is_type(f, "Conv2d"))
        return build_conv(c, f, in);
    if (is_type(f, "SumPool2d") || is_type(f, "AvgPool2d")) {
        conv_geom g;
        if ((st = pool_geometry(c, f, &g)) != NC_OK)
            return st;
        int i = add_ir(c, NC_NODE_AVGPOOL, f->name, 1, &in);
        if (i < 0)
            return node_fail(c, f, NC_ERR_MEMORY, "out of memory");
        nc_node *n = &c->net->nodes[i];
        for (int a = 0; a < 2; a++) {
            n->kernel[a] = (int)g.k[a];
            n->stride[a] = (int)g.s[a];
        }
        for (int a = 0; a < 4; a++)
            n->pad[a] = (int)g.pad[a];
        n->count_include_pad = 1; /* NIR: SumPool then 1/k² */
        f->ir = i;
        if (is_type(f, "SumPool2d")) {
            int ch = (int)f->shape[0];
            float *k2 = malloc((size_t)ch * sizeof(float));
            char name[NC_NAME_MAX + 8];
            if (!k2)
                return node_fail(c, f, NC_ERR_MEMORY, "out of memory");
            for (int k = 0; k < ch; k++)
                k2[k] = (float)(g.k[0] * g.k[1]);
            snprintf(name, sizeof name, "%.*s.sum", NC_NAME_MAX - 8, f->name);
            int j = add_channel_scale(c, name, i, ch, k2);
            free(k2);
            if (j < 0)
                return node_fail(c, f, NC_ERR_MEMORY, "out of memory");
            f->ir = j;
            nir_note(c->notes, NC_NIR_NOTE_INFO, f->name,
                     "SumPool2d is run as an average pool times k² (an affine node '<name>.sum' after it)");
        }
        return NC_OK;
    }
    if (is_type(f, "Flatten")) {
        f->ir = add_ir(c, NC_NODE_FLATTEN, f->name, 1, &in);
        return f->ir < 0 ? node_fail(c, f, NC_ERR_MEMORY, "out of memory") : NC_OK;
    }
    if (is_neuron_type(f->type))
        return build_neuron(c, f, in);
    return node_fail(c, f, NC_ERR_UNSUPPORTED, "this node type cannot be run");
}

/* ---- notes about how the neurons were read ------------------------------------------------------- */

static void neuron_notes(imp *c)
{
    const nc_net *net = c->net;
    int have_ct = 0;
    for (int i = 0; i < net->n_nodes; i++) {
        const nc_node *n = &net->nodes[i];
        if (n->kind != NC_NODE_NEURON)
            continue;
        const nc_neuron *nr = &n->neuron;
        int64_t numel = nc_node_numel(n);
        const float *p = n->weight ? n->weight->data : NULL;
        switch (nr->model) {
        case NC_NEURON_IF:
            nir_note(c->notes, NC_NIR_NOTE_INFO, n->name,
                     "IF (r = 1, v_threshold = 1, v_reset = 0) runs as our IF neuron: v starts at 0, v += x each "
                     "step, a spike (1) when v > 1, then v %s",
                     nr->reset == NC_RESET_SUBTRACT ? "-= 1 (--reset subtract)" : "= 0");
            break;
        case NC_NEURON_NIR_IF:
        case NC_NEURON_INTEGRATOR:
            nir_note(c->notes, NC_NIR_NOTE_INFO, n->name,
                     "%s integrates v += %sr*x each step (%s), v starts at 0%s",
                     nr->model == NC_NEURON_NIR_IF ? "IF" : "I", nr->integrate_dt ? "dt*" : "",
                     nr->integrate_dt ? "the r = 1/dt convention of SpikingJelly"
                                      : "as sinabs, snnTorch, Norse and Lava read it; dt is not applied",
                     nr->model == NC_NEURON_NIR_IF
                         ? (nr->reset == NC_RESET_SUBTRACT ? "; spike when v > v_threshold, then v -= v_threshold"
                                                           : "; spike when v > v_threshold, then v = v_reset")
                         : "; outputs v");
            break;
        case NC_NEURON_LIF:
        case NC_NEURON_CUBA_LIF:
        case NC_NEURON_LI:
        case NC_NEURON_CUBA_LI: {
            have_ct = 1;
            float worst = 0, worst_tau = 0, r_at = 0;
            const char *which = "tau";
            for (int64_t e = 0; e < numel; e++) {
                float tau = p[NC_NPARAM_TAU * numel + e];
                if (nr->dt / tau > worst) {
                    worst = nr->dt / tau;
                    worst_tau = tau;
                    r_at = p[NC_NPARAM_R * numel + e];
                    which = nr->model == NC_NEURON_CUBA_LIF || nr->model == NC_NEURON_CUBA_LI ? "tau_mem" : "tau";
                }
                if (nr->model == NC_NEURON_CUBA_LIF || nr->model == NC_NEURON_CUBA_LI) {
                    float ts = p[NC_NPARAM_TAU_SYN * numel + e];
                    if (nr->dt / ts > worst) {
                        worst = nr->dt / ts;
                        worst_tau = ts;
                        which = "tau_syn";
                        r_at = p[NC_NPARAM_W_IN * numel + e];
                    }
                }
            }
            if (worst > 1.0f) {
                char hint[160] = "";
                double guess = r_at > 1 ? worst_tau / r_at : 0;
                if (guess > 0 && guess < worst_tau)
                    snprintf(hint, sizeof hint,
                             "; its r (or w_in) = tau/dt suggests it was written for dt = %.3g s (snnTorch, Lava and "
                             "SpikingJelly write that)",
                             guess);
                nir_note(c->notes, NC_NIR_NOTE_WARNING, n->name,
                         "dt/%s = %.3g at dt = %g s: forward Euler is unstable when dt is not below the time "
                         "constant; pass a smaller --dt%s",
                         which, worst, (double)nr->dt, hint);
            }
            if (nr->model == NC_NEURON_LIF || nr->model == NC_NEURON_CUBA_LIF)
                nir_note(c->notes, NC_NIR_NOTE_INFO, n->name, "spike (1) when v > v_threshold, then v %s",
                         nr->reset == NC_RESET_SUBTRACT ? "-= v_threshold (--reset subtract)"
                                                        : "= v_reset (NIR's rule; --reset subtract for files trained "
                                                          "with reset by subtraction)");
            break;
        }
        default: break;
        }
    }
    if (have_ct)
        nir_note(c->notes, NC_NIR_NOTE_INFO, "",
                 "continuous-time neurons are discretised with forward Euler at dt = %g s (pass --dt to change): "
                 "v += dt/tau*(v_leak - v + r*I), with I = the input (LIF, LI) or, for CubaLIF/CubaLI, "
                 "I += dt/tau_syn*(w_in*x - I) first; every state starts at 0",
                 c->opts->dt);
}

/* ---- restoring a net this program exported ------------------------------------------------------ */

/* Why our tables cannot be used (the file is then read by NIR's rules). */
typedef struct restore_ctx {
    const nir_node *root;
    const nc_nir_load_options *opts;
    nc_net *net;
    char why[300];
} restore_ctx;

static int refuse(restore_ctx *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int refuse(restore_ctx *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->why, sizeof r->why, fmt, ap);
    va_end(ap);
    return -1;
}

static const nir_value *meta_of(const nir_node *n, const char *name, nir_value_kind kind, int64_t numel)
{
    const nir_value *v = n ? nir_get(n, 1, name) : NULL;
    if (!v || v->kind != kind || (numel >= 0 && v->numel != numel))
        return NULL;
    return v;
}

static const nir_value *num_field(const nir_node *n, const char *name)
{
    const nir_value *v = n ? nir_get(n, 0, name) : NULL;
    return v && v->kind != NIR_STRING ? v : NULL;
}

/* A float tensor of v's own shape (1..4 dims). */
static nc_tensor *tensor_of(const nir_value *v)
{
    if (!v || v->kind == NIR_STRING || v->ndim < 1 || v->ndim > NC_MAX_DIMS)
        return NULL;
    return tensor_from(v, v->ndim, v->shape);
}

static int two_ints(const nir_node *n, const char *name, int *out)
{
    const nir_value *v = num_field(n, name);
    if (!v || (v->numel != 1 && v->numel != 2))
        return -1;
    for (int k = 0; k < 2; k++) {
        double x = value_at(v, v->numel == 1 ? 0 : k);
        if (x != floor(x) || x < 0 || x > 1e6)
            return -1;
        out[k] = (int)x;
    }
    return 0;
}

static int meta_int(const nir_node *n, const char *name, int dflt)
{
    const nir_value *v = meta_of(n, name, NIR_INT, 1);
    return v ? (int)v->i[0] : dflt;
}

static float meta_float(const nir_node *n, const char *name, float dflt)
{
    const nir_value *v = n ? nir_get(n, 1, name) : NULL;
    return v && v->kind != NIR_STRING && v->numel == 1 ? (float)value_at(v, 0) : dflt;
}

static const char *meta_str(const nir_node *n, const char *name)
{
    const nir_value *v = meta_of(n, name, NIR_STRING, 1);
    return v ? v->s[0] : "";
}

/* Weight (the unscaled copy when θ was multiplied in) and bias of a conv
 * or dense node. */
static int restore_weights(restore_ctx *r, nc_node *m, const nir_node *car, int wdims)
{
    const nir_value *w = meta_of(car, "weight_unfolded", NIR_FLOAT, -1);
    if (!w)
        w = num_field(car, "weight");
    if (!w || w->ndim != wdims || !(m->weight = tensor_of(w)))
        return refuse(r, "node '%s': no usable weight", m->name);
    if (meta_int(car, "has_bias", 1)) {
        const nir_value *b = num_field(car, "bias");
        if (!b || b->numel != w->shape[0] || !(m->bias = tensor_from(b, 1, &b->numel)))
            return refuse(r, "node '%s': no usable bias", m->name);
    }
    return 0;
}

static int restore_neuron(restore_ctx *r, nc_node *m, const nir_node *car)
{
    const char *model = meta_str(car, "model");
    nc_neuron *nr = &m->neuron;
    const char *reset = meta_str(car, "reset_mode");
    nr->reset = strcmp(reset, "subtract") == 0 ? NC_RESET_SUBTRACT : NC_RESET_ZERO;
    if (strcmp(model, "if") == 0) {
        const nir_value *t = meta_of(car, "threshold", NIR_FLOAT, -1);
        if (!t || t->numel < 1 || t->numel > (1 << 20) || !car || strcmp(car->type, "IF") != 0)
            return refuse(r, "node '%s': no thresholds", m->name);
        nr->model = NC_NEURON_IF;
        nr->v0_fraction = meta_float(car, "v0_fraction", 0.0f);
        nr->compare = strcmp(meta_str(car, "fire_when"), "v >= v_threshold") == 0 ? NC_FIRE_GE : NC_FIRE_GT;
        nr->levels = meta_int(car, "qcfs_levels", 8);
        nr->shift = meta_float(car, "qcfs_shift", 0.5f);
        nc_error ignored;
        return nc_neuron_set_threshold(nr, (int)t->numel, t->f, &ignored) == NC_OK ? 0 : refuse(r, "out of memory");
    }
    /* a NIR model (an import exported again): its NIR fields */
    static const struct {
        const char *name;
        nc_neuron_model model;
    } models[] = {{"lif", NC_NEURON_LIF},       {"cuba-lif", NC_NEURON_CUBA_LIF},     {"li", NC_NEURON_LI},
                  {"cuba-li", NC_NEURON_CUBA_LI}, {"integrator", NC_NEURON_INTEGRATOR}, {"nir-if", NC_NEURON_NIR_IF},
                  {"threshold", NC_NEURON_THRESHOLD}, {"delay", NC_NEURON_DELAY}};
    int found = -1;
    for (size_t k = 0; k < sizeof models / sizeof models[0]; k++)
        if (strcmp(model, models[k].name) == 0)
            found = (int)k;
    if (found < 0 || !car)
        return refuse(r, "node '%s': unknown neuron model '%s'", m->name, model);
    nr->model = models[found].model;
    nr->dt = meta_float(car, "dt", (float)r->opts->dt);
    nr->integrate_dt = meta_int(car, "integrate_dt", 0);
    param_spec spec[8];
    int n = neuron_params(strcmp(car->type, "IF") == 0 ? "IF" : car->type, spec);
    int64_t numel = nc_shape_numel(m->ndim, m->shape);
    int64_t pshape[2] = {NC_NPARAM_COUNT, numel};
    if (!n || numel < 1 || !(m->weight = nc_tensor_new(2, pshape)))
        return refuse(r, "node '%s': no parameters", m->name);
    for (int k = 0; k < n; k++) {
        const nir_value *v = num_field(car, spec[k].name);
        if (v && v->numel != numel && v->numel != 1)
            return refuse(r, "node '%s': field '%s' does not fit", m->name, spec[k].name);
        if (!v && spec[k].required)
            return refuse(r, "node '%s': field '%s' is missing", m->name, spec[k].name);
        float *row = m->weight->data + (int64_t)spec[k].row * numel;
        for (int64_t e = 0; e < numel; e++)
            row[e] = v ? (float)value_at(v, v->numel == 1 ? 0 : e) : spec[k].dflt;
    }
    return 0;
}

/* Builds r->net from our tables; −1 (with r->why) when they do not add up. */
static int restore_tables(restore_ctx *r)
{
    const nir_node *root = r->root;
    const nir_value *names = meta_of(root, NIR_META_NAMES, NIR_STRING, -1);
    int64_t n = names ? names->numel : 0;
    const nir_value *kinds = meta_of(root, NIR_META_KINDS, NIR_STRING, n);
    const nir_value *carriers = meta_of(root, NIR_META_CARRIERS, NIR_STRING, n);
    const nir_value *counts = meta_of(root, NIR_META_COUNTS, NIR_INT, n);
    const nir_value *inputs = meta_of(root, NIR_META_INPUTS, NIR_INT, -1);
    const nir_value *recur = meta_of(root, NIR_META_RECUR, NIR_INT, n);
    const nir_value *shapes = meta_of(root, NIR_META_SHAPES, NIR_INT, n * 5);
    if (!names || n < 2 || n > NIR_MAX_NODES || !kinds || !carriers || !counts || !inputs || !recur || !shapes)
        return refuse(r, "its tables are missing or do not agree in length");
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        int kind = -1;
        for (int k = 0; k < NC_NODE_KIND_COUNT; k++)
            if (strcmp(kinds->s[i], nc_node_kind_name((nc_node_kind)k)) == 0)
                kind = k;
        int64_t cnt = counts->i[i];
        if (kind < 0 || cnt < 0 || cnt > 64 || at + cnt > inputs->numel || strlen(names->s[i]) >= NC_NAME_MAX)
            return refuse(r, "entry %lld of its tables is not valid", (long long)i);
        int in[64];
        for (int64_t k = 0; k < cnt; k++) {
            int64_t v = inputs->i[at + k];
            if (v < 0 || v >= i)
                return refuse(r, "node '%s' reads a node that does not come before it", names->s[i]);
            in[k] = (int)v;
        }
        at += cnt;
        int idx = nc_net_add_node(r->net, (nc_node_kind)kind, names->s[i], (int)cnt, in);
        if (idx < 0)
            return refuse(r, "out of memory");
        nc_node *m = &r->net->nodes[idx];
        const int64_t *sh = shapes->i + i * 5;
        if (sh[0] < 1 || sh[0] > 4)
            return refuse(r, "node '%s' has no shape", m->name);
        m->ndim = (int)sh[0];
        for (int d = 0; d < 4; d++)
            m->shape[d] = d < m->ndim ? sh[1 + d] : 0;
        const char *cname = carriers->s[i];
        const nir_node *car = cname[0] ? nir_graph_find(root->graph, cname) : NULL;
        if (cname[0] && !car)
            return refuse(r, "node '%s': its NIR node '%s' is gone", m->name, cname);
        switch (m->kind) {
        case NC_NODE_INPUT:
        case NC_NODE_FLATTEN:
        case NC_NODE_ADD:
        case NC_NODE_CONCAT:
        case NC_NODE_OUTPUT:
        case NC_NODE_GLOBAL_AVGPOOL: break;
        case NC_NODE_CONV2D:
            if (restore_weights(r, m, car, 4) || two_ints(car, "stride", m->stride) ||
                two_ints(car, "dilation", m->dilation))
                return refuse(r, "node '%s': conv fields", m->name);
            m->groups = num_field(car, "groups") ? (int)value_at(num_field(car, "groups"), 0) : 1;
            m->kernel[0] = (int)m->weight->shape[2];
            m->kernel[1] = (int)m->weight->shape[3];
            {
                const nir_value *pad = meta_of(car, "pad", NIR_INT, 4);
                int p2[2];
                if (pad)
                    for (int k = 0; k < 4; k++)
                        m->pad[k] = (int)pad->i[k];
                else if (two_ints(car, "padding", p2) == 0) {
                    m->pad[0] = m->pad[2] = p2[0];
                    m->pad[1] = m->pad[3] = p2[1];
                } else
                    return refuse(r, "node '%s': padding", m->name);
            }
            break;
        case NC_NODE_DENSE:
            if (restore_weights(r, m, car, 2))
                return -1;
            break;
        case NC_NODE_AVGPOOL:
        case NC_NODE_MAXPOOL: {
            const nir_value *pad = meta_of(car, "pad", NIR_INT, 4);
            if (two_ints(car, "kernel_size", m->kernel) || two_ints(car, "stride", m->stride) || !pad)
                return refuse(r, "node '%s': pool fields", m->name);
            for (int k = 0; k < 4; k++)
                m->pad[k] = (int)pad->i[k];
            m->count_include_pad = meta_int(car, "count_include_pad", 1);
            m->ceil_mode = meta_int(car, "ceil_mode", 0);
            if (m->kind == NC_NODE_MAXPOOL &&
                nc_maxpool_strategy_parse(meta_str(car, "maxpool_strategy"), &m->maxpool_strategy) != 0)
                return refuse(r, "node '%s': max-pool strategy", m->name);
            break;
        }
        case NC_NODE_AFFINE: {
            const nir_value *sc = meta_of(car, "scale", NIR_FLOAT, -1), *sh2 = meta_of(car, "shift", NIR_FLOAT, -1);
            if (!sc || !sh2 || sc->numel != sh2->numel || !(m->weight = tensor_from(sc, 1, &sc->numel)) ||
                !(m->bias = tensor_from(sh2, 1, &sh2->numel)))
                return refuse(r, "node '%s': scale and shift", m->name);
            break;
        }
        case NC_NODE_NEURON:
            if (restore_neuron(r, m, car))
                return -1;
            break;
        case NC_NODE_SCALE: {
            const nir_value *sc = meta_of(car, "scale_unfolded", NIR_FLOAT, -1);
            if (!sc)
                sc = num_field(car, "scale");
            if (!sc || !(m->weight = tensor_from(sc, 1, &sc->numel)))
                return refuse(r, "node '%s': scale", m->name);
            break;
        }
        case NC_NODE_RECURRENT:
            if (recur->i[i] <= i || recur->i[i] >= n)
                return refuse(r, "node '%s': recurrent source", m->name);
            m->recur_source = (int)recur->i[i];
            break;
        case NC_NODE_KIND_COUNT: break;
        }
    }
    /* the shapes must come out as they were written */
    nc_error err;
    nc_net *check = nc_net_clone(r->net);
    if (!check)
        return refuse(r, "out of memory");
    int bad = nc_net_infer_shapes(check, &err) != NC_OK;
    for (int i = 0; !bad && i < check->n_nodes; i++)
        bad = check->nodes[i].ndim != r->net->nodes[i].ndim ||
              memcmp(check->nodes[i].shape, r->net->nodes[i].shape, sizeof check->nodes[i].shape) != 0;
    nc_net_free(check);
    if (bad)
        return refuse(r, "the network it describes does not fit together (%s)", err.message);
    return 0;
}

/* A file this program exported (graph metadata format and a fingerprint
 * that matches the content): *is_ours = 1 and *out the exact net that was
 * exported.  Otherwise *is_ours = 0 and NC_OK (read it by NIR's rules). */
static nc_status restore_ours(const nir_node *root, const nc_nir_load_options *opts, nc_net **out,
                              nc_nir_notes *notes, nc_error *err, int *is_ours)
{
    *is_ours = 0;
    const nir_value *fmt = meta_of(root, NIR_META_FORMAT, NIR_STRING, 1);
    if (!fmt || strcmp(fmt->s[0], NC_NIR_FORMAT) != 0)
        return NC_OK;
    const nir_value *print = meta_of(root, NIR_META_FINGERPRINT, NIR_STRING, 1);
    char hex[32];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)nir_fingerprint(root));
    if (meta_int(root, NIR_META_FORMAT_VERSION, 0) != 1) {
        nir_note(notes, NC_NIR_NOTE_WARNING, "",
                 "written by a newer neurocuda (format version %d): read by NIR's rules only",
                 meta_int(root, NIR_META_FORMAT_VERSION, 0));
        return NC_OK;
    }
    if (!print || strcmp(print->s[0], hex) != 0) {
        nir_note(notes, NC_NIR_NOTE_WARNING, "",
                 "written by neurocuda but changed since (its fingerprint differs): read by NIR's rules only, our "
                 "metadata (reset by subtraction, v0, per-channel thresholds) is not applied");
        return NC_OK;
    }
    restore_ctx r = {root, opts, nc_net_new(), ""};
    if (!r.net)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory");
    if (restore_tables(&r) != 0) {
        nir_note(notes, NC_NIR_NOTE_WARNING, "",
                 "written by neurocuda, but its network tables cannot be used (%s): read by NIR's rules only", r.why);
        nc_net_free(r.net);
        return NC_OK;
    }
    nc_status st = nc_net_infer_shapes(r.net, err);
    if (st != NC_OK) {
        nc_net_free(r.net);
        return st;
    }
    snprintf(r.net->source_format, sizeof r.net->source_format, "nir");
    nir_note(notes, NC_NIR_NOTE_INFO, "",
             "written by neurocuda: read back as the exact network that was exported, from its metadata (reset, "
             "v0, thresholds per channel, weights as trained); ignore_ours reads it by NIR's rules");
    *out = r.net;
    *is_ours = 1;
    return NC_OK;
}

/* ---- the foreign path ----------------------------------------------------------------------------- */

static nc_status import_graph(imp *c, const nir_node *root)
{
    int entry, exit;
    nc_status st = flatten_graph(c, root->graph, "", "node", 0, &entry, &exit);
    if (st != NC_OK)
        return st;
    if ((st = find_ends(c)) != NC_OK)
        return st;
    if ((st = mark_reachable(c)) != NC_OK)
        return st;
    /* cut the cycles */
    for (;;) {
        count_preds(c);
        int64_t cut = -1;
        int rc = cut_one_cycle(c, &cut);
        if (rc < 0)
            return nc_fail(c->err, NC_ERR_MEMORY, "out of memory");
        if (rc == 0)
            break;
        const fedge *e = &c->e[cut];
        nir_note(c->notes, NC_NIR_NOTE_INFO, c->n[e->to].name,
                 "the edge '%s' -> '%s' closes a cycle: '%s' reads the output of '%s' from the previous step (0 at "
                 "the first)",
                 c->n[e->from].name, c->n[e->to].name, c->n[e->to].name, c->n[e->from].name);
    }
    count_preds(c);
    int *order = malloc((size_t)c->count * sizeof(int));
    if (!order)
        return nc_fail(c->err, NC_ERR_MEMORY, "out of memory");
    if ((st = topo_order(c, order)) != NC_OK) {
        free(order);
        return st;
    }
    /* shapes, in order; then every edge, recurrent ones too */
    for (int k = 0; k < c->count && st == NC_OK; k++)
        st = infer_fnode(c, order[k]);
    for (int64_t k = 0; k < c->ne && st == NC_OK; k++) {
        const fedge *e = &c->e[k];
        const fnode *a = &c->n[e->from], *b = &c->n[e->to];
        if (b->has_in && nc_shape_numel(a->ndim, a->shape) != nc_shape_numel(b->in_ndim, b->in_shape))
            st = mismatch(c, a, b, "input", b->in_ndim, b->in_shape);
        else if (e->recurrent && b->has_in && !same_shape(a->ndim, a->shape, b->in_ndim, b->in_shape) &&
                 !(is_type(b, "Affine") || is_type(b, "Linear")))
            st = mismatch(c, a, b, "input", b->in_ndim, b->in_shape);
    }
    /* the IR: input, recurrent nodes, then everything in order */
    for (int k = 0; k < c->count && st == NC_OK; k++) {
        fnode *f = &c->n[order[k]];
        if (order[k] == c->input) {
            st = build_node(c, f, -1);
            for (int64_t j = 0; j < c->ne && st == NC_OK; j++) {
                fnode *s = &c->n[c->e[j].from];
                if (!c->e[j].recurrent || s->prev_ir >= 0)
                    continue;
                char name[NC_NAME_MAX + 8];
                snprintf(name, sizeof name, "%.*s.prev", NC_NAME_MAX - 8, s->name);
                int r = add_ir(c, NC_NODE_RECURRENT, name, 0, NULL);
                if (r < 0) {
                    st = nc_fail(c->err, NC_ERR_MEMORY, "out of memory");
                    break;
                }
                c->net->nodes[r].ndim = s->ir_ndim;
                memcpy(c->net->nodes[r].shape, s->ir_shape, sizeof s->ir_shape);
                s->prev_ir = r;
            }
            continue;
        }
        int inputs[64], n_in = 0;
        for (int64_t j = 0; j < c->ne && st == NC_OK; j++) {
            const fedge *e = &c->e[j];
            if (e->to != order[k])
                continue;
            if (n_in == 64) {
                st = node_fail(c, f, NC_ERR_UNSUPPORTED, "more than 64 incoming edges");
                break;
            }
            inputs[n_in++] = e->recurrent ? c->n[e->from].prev_ir : c->n[e->from].ir;
        }
        if (st != NC_OK)
            break;
        int in = inputs[0];
        if (n_in > 1) {
            char name[NC_NAME_MAX + 8];
            snprintf(name, sizeof name, "%.*s.sum", NC_NAME_MAX - 8, f->name);
            in = add_ir(c, NC_NODE_ADD, name, n_in, inputs);
            if (in < 0) {
                st = nc_fail(c->err, NC_ERR_MEMORY, "out of memory");
                break;
            }
            nir_note(c->notes, NC_NIR_NOTE_INFO, f->name, "%d edges meet here: their sum is its input (an add node)",
                     n_in);
        }
        st = build_node(c, f, in);
    }
    free(order);
    if (st != NC_OK)
        return st;
    for (int k = 0; k < c->count; k++)
        if (c->n[k].prev_ir >= 0)
            c->net->nodes[c->n[k].prev_ir].recur_source = c->n[k].ir;
    for (int k = 0; k < c->count; k++) {
        const fnode *f = &c->n[k];
        if (f->prev_ir >= 0 && f->ir <= f->prev_ir)
            return nc_fail(c->err, NC_ERR_UNSUPPORTED,
                           "node '%s': a recurrent edge leaves a node that is only an alias of an earlier one", f->name);
    }
    return NC_OK;
}

nc_status nc_nir_load(const char *path, const nc_nir_load_options *opts_in, nc_net **out, nc_nir_notes *notes,
                      nc_error *err)
{
    nc_nir_load_options opts = {.dt = 1e-3};
    if (opts_in)
        opts = *opts_in;
    if (!(opts.dt > 0) || !isfinite(opts.dt))
        opts.dt = 1e-3;
    *out = NULL;
    nir_node root;
    char version[64];
    nc_status st = nir_read_file(path, &root, version, sizeof version, notes, err);
    if (st != NC_OK)
        return st;
    int ours = 0;
    if (!opts.ignore_ours) {
        st = restore_ours(&root, &opts, out, notes, err, &ours);
        if (ours || st != NC_OK) {
            nir_node_clear(&root);
            if (st != NC_OK)
                nc_error_prefix(err, "%s", path);
            else
                snprintf((*out)->source_path, sizeof (*out)->source_path, "%s", path);
            return st;
        }
    }
    imp c = {.opts = &opts, .notes = notes, .err = err};
    if (!(c.net = nc_net_new())) {
        nir_node_clear(&root);
        return nc_fail(err, NC_ERR_MEMORY, "out of memory");
    }
    st = import_graph(&c, &root);
    if (st == NC_OK) {
        st = nc_net_infer_shapes(c.net, err);
        if (st != NC_OK)
            nc_error_prefix(err, "NIR import");
    }
    if (st == NC_OK) {
        neuron_notes(&c);
        snprintf(c.net->source_path, sizeof c.net->source_path, "%s", path);
        snprintf(c.net->source_format, sizeof c.net->source_format, "nir");
        if (version[0])
            nir_note(notes, NC_NIR_NOTE_INFO, "", "NIR file version %s, %d nodes read into %d network nodes", version,
                     c.count, c.net->n_nodes);
        *out = c.net;
        c.net = NULL;
    } else {
        nc_error_prefix(err, "%s", path);
    }
    nc_net_free(c.net);
    free(c.n);
    free(c.e);
    nir_node_clear(&root);
    return st;
}
