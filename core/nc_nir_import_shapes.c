/* nc_nir_import_shapes.c — NIR import, reading and checking node fields:
 * parameters by name, neuron parameters, and the output shape of every node
 * inferred at the NIR level (conv and pool geometry included) and checked
 * against what the file declares. */
#include "nc_nir_import_internal.h"

#include <math.h>
#include <string.h>

/* ---- field access -------------------------------------------------------------- */

const nir_value *nirimp_field(const fnode *f, const char *name) { return f->nn ? nir_get(f->nn, 0, name) : NULL; }

static nc_status need_field(imp *c, const fnode *f, const char *name, const nir_value **out)
{
    *out = nirimp_field(f, name);
    if (!*out)
        return nirimp_node_fail(c, f, NC_ERR_FORMAT, "field '%s' is missing", name);
    if ((*out)->kind == NIR_STRING)
        return nirimp_node_fail(c, f, NC_ERR_FORMAT, "field '%s' must be numeric, not a string", name);
    return NC_OK;
}

double nirimp_value_at(const nir_value *v, int64_t k)
{
    return v->kind == NIR_FLOAT ? (double)v->f[k] : (double)v->i[k];
}

/* An integer field of `count` values (1 or 2): stored as a scalar, (1,) or
 * (count,), integer or integral float.  Missing: *out = dflt unless required. */
static nc_status get_ints(imp *c, const fnode *f, const char *name, int count, int required, int64_t dflt,
                          int64_t *out)
{
    const nir_value *v = nirimp_field(f, name);
    if (!v) {
        if (required)
            return nirimp_node_fail(c, f, NC_ERR_FORMAT, "field '%s' is missing", name);
        for (int k = 0; k < count; k++)
            out[k] = dflt;
        return NC_OK;
    }
    if (v->kind == NIR_STRING || v->ndim > 1 || (v->numel != 1 && v->numel != count))
        return nirimp_node_fail(c, f, NC_ERR_FORMAT, "field '%s' must be an integer or %d integers", name, count);
    for (int k = 0; k < count; k++) {
        double x = nirimp_value_at(v, v->numel == 1 ? 0 : k);
        if (x != floor(x) || fabs(x) > 1e9)
            return nirimp_node_fail(c, f, NC_ERR_FORMAT, "field '%s' holds %g, not a whole number", name, x);
        out[k] = (int64_t)x;
    }
    return NC_OK;
}

int nirimp_same_shape(int na, const int64_t *a, int nb, const int64_t *b)
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
        return nirimp_node_fail(c, f, NC_ERR_UNSUPPORTED,
                                "values of shape %s (%d dimensions) are not supported (1 to 4)",
                                nc_shape_str(ndim, s, buf, sizeof buf), ndim);
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

/* Each field a neuron type can carry, once: its name in the file, the
 * parameter row it fills, whether the file must hold it, and the value used
 * when it may be left out (w_in scales the input: 1 leaves it alone). */
static const param_spec field_r = {"r", NC_NPARAM_R, 1, 0};
static const param_spec field_tau = {"tau", NC_NPARAM_TAU, 1, 0};
static const param_spec field_tau_mem = {"tau_mem", NC_NPARAM_TAU, 1, 0};
static const param_spec field_tau_syn = {"tau_syn", NC_NPARAM_TAU_SYN, 1, 0};
static const param_spec field_v_leak = {"v_leak", NC_NPARAM_V_LEAK, 1, 0};
static const param_spec field_v_threshold = {"v_threshold", NC_NPARAM_V_THRESHOLD, 1, 0};
static const param_spec field_v_reset = {"v_reset", NC_NPARAM_V_RESET, 0, 0};
static const param_spec field_w_in = {"w_in", NC_NPARAM_W_IN, 0, 1};
static const param_spec field_threshold = {"threshold", NC_NPARAM_V_THRESHOLD, 1, 0};
static const param_spec field_delay = {"delay", NC_NPARAM_DELAY, 1, 0};

/* The fields of each neuron type, in the order they are checked (the
 * callers' arrays hold 8). */
enum { MAX_NEURON_FIELDS = 7 };
static const struct {
    const char *type;
    const param_spec *fields[MAX_NEURON_FIELDS]; /* up to the first NULL */
} neuron_fields[] = {
    {"IF", {&field_r, &field_v_threshold, &field_v_reset}},
    {"LIF", {&field_tau, &field_r, &field_v_leak, &field_v_threshold, &field_v_reset}},
    {"LI", {&field_tau, &field_r, &field_v_leak}},
    {"CubaLIF",
     {&field_tau_mem, &field_tau_syn, &field_r, &field_v_leak, &field_v_threshold, &field_v_reset, &field_w_in}},
    {"CubaLI", {&field_tau_mem, &field_tau_syn, &field_r, &field_v_leak, &field_w_in}},
    {"I", {&field_r}},
    {"Integrator", {&field_r}},
    {"Threshold", {&field_threshold}},
    {"Delay", {&field_delay}},
};

int nirimp_neuron_params(const char *type, param_spec *out)
{
    for (size_t t = 0; t < sizeof neuron_fields / sizeof neuron_fields[0]; t++) {
        if (strcmp(type, neuron_fields[t].type) != 0)
            continue;
        int n = 0;
        while (n < MAX_NEURON_FIELDS && neuron_fields[t].fields[n]) {
            out[n] = *neuron_fields[t].fields[n];
            n++;
        }
        return n;
    }
    return 0;
}

nc_neuron_model nirimp_model_of(const char *type)
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
    int n = nirimp_neuron_params(f->type, spec);
    const nir_value *first = NULL;
    *full = 0;
    for (int k = 0; k < n; k++) {
        const nir_value *v = nirimp_field(f, spec[k].name);
        if (!v) {
            if (spec[k].required)
                return nirimp_node_fail(c, f, NC_ERR_FORMAT, "field '%s' is missing", spec[k].name);
            continue;
        }
        if (v->kind == NIR_STRING)
            return nirimp_node_fail(c, f, NC_ERR_FORMAT, "field '%s' must be numeric, not a string", spec[k].name);
        if (v->numel == 0)
            return nirimp_node_fail(c, f, NC_ERR_FORMAT, "field '%s' is empty", spec[k].name);
        if (v->numel == 1 && v->ndim <= 1)
            continue; /* a scalar */
        if (!first) {
            first = v;
            continue;
        }
        if (!nirimp_same_shape(first->ndim, first->shape, v->ndim, v->shape)) {
            char a[128], b[128];
            return nirimp_node_fail(c, f, NC_ERR_SHAPE,
                                    "fields '%s' %s and '%s' %s differ in shape (they must be equal)", first->name,
                                    nc_shape_str(first->ndim, first->shape, a, sizeof a), v->name,
                                    nc_shape_str(v->ndim, v->shape, b, sizeof b));
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

/* Conv1d/Conv2d geometry (dims = 1 or 2) checked against the input shape. */
nc_status nirimp_conv_geometry(imp *c, const fnode *f, int dims, conv_geom *g)
{
    const nir_value *w;
    char buf[128];
    nc_status st = need_field(c, f, "weight", &w);
    if (st != NC_OK)
        return st;
    if (w->ndim != dims + 2)
        return nirimp_node_fail(c, f, NC_ERR_FORMAT, "field 'weight' must have %d dimensions, it has shape %s",
                                dims + 2, nc_shape_str(w->ndim, w->shape, buf, sizeof buf));
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
        return nirimp_node_fail(c, f, NC_ERR_FORMAT, "field 'groups' (%lld) does not divide the %lld output channels",
                         (long long)g->groups, (long long)g->cout);
    for (int a = 0; a < 2; a++)
        if (g->k[a] < 1 || g->s[a] < 1 || g->d[a] < 1)
            return nirimp_node_fail(c, f, NC_ERR_FORMAT,
                                    "kernel, field 'stride' and field 'dilation' must be at least 1");
    const nir_value *pv = nirimp_field(f, "padding");
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
            return nirimp_node_fail(c, f, NC_ERR_FORMAT, "field 'padding' is the string \"%s\"; only \"same\" and \"valid\" exist",
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
                return nirimp_node_fail(c, f, NC_ERR_FORMAT, "field 'padding' is negative");
    }
    return NC_OK;
}

nc_status nirimp_pool_geometry(imp *c, const fnode *f, conv_geom *g)
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
            return nirimp_node_fail(c, f, NC_ERR_FORMAT, "fields 'kernel_size' and 'stride' must be at least 1, 'padding' at least 0");
    }
    if (!nirimp_field(f, "stride"))
        nir_note(c->notes, NC_NIR_NOTE_WARNING, f->name, "field 'stride' is missing; the kernel size is used");
    return NC_OK;
}

nc_status nirimp_mismatch(imp *c, const fnode *from, const fnode *to, const char *field_name, int want_ndim,
                          const int64_t *want)
{
    char a[128], b[128];
    return nc_fail(c->err, NC_ERR_SHAPE,
                   "shape mismatch along the edge '%s' -> '%s': '%s' gives %s, but node '%s' (%s) takes %s (field '%s')",
                   from->name, to->name, from->name, nc_shape_str(from->ndim, from->shape, a, sizeof a), to->name,
                   to->type, nc_shape_str(want_ndim, want, b, sizeof b), field_name);
}

/* First non-recurrent predecessor of f (−1 if none). */
static int first_pred(const imp *c, int fi)
{
    for (int64_t k = 0; k < c->ne; k++)
        if (c->e[k].to == fi && !c->e[k].recurrent)
            return c->e[k].from;
    return -1;
}

/* The incoming shape: every non-recurrent edge into node fi must bring the
 * same shape as the first one, pi (their values are summed). */
static nc_status check_inputs_agree(imp *c, fnode *f, int fi, int pi)
{
    if (pi < 0)
        return NC_OK;
    const fnode *p = &c->n[pi];
    char buf[128], buf2[128];
    f->has_in = 1;
    f->in_ndim = p->ndim;
    memcpy(f->in_shape, p->shape, sizeof f->in_shape);
    for (int64_t k = 0; k < c->ne; k++) {
        const fedge *e = &c->e[k];
        if (e->to != fi || e->recurrent || e->from == pi)
            continue;
        const fnode *q = &c->n[e->from];
        if (!nirimp_same_shape(q->ndim, q->shape, p->ndim, p->shape))
            return nc_fail(c->err, NC_ERR_SHAPE,
                           "shape mismatch at node '%s' (%s): its inputs '%s' %s and '%s' %s are summed but differ "
                           "in shape",
                           f->name, f->type, p->name, nc_shape_str(p->ndim, p->shape, buf, sizeof buf),
                           q->name, nc_shape_str(q->ndim, q->shape, buf2, sizeof buf2));
    }
    return NC_OK;
}

/* The Input node: its shape is its field 'shape'. */
static nc_status infer_input(imp *c, fnode *f, const fnode *p)
{
    nc_status st = NC_OK;
    int irn = 0;
    int64_t irs[4] = {0};
    const nir_value *v = nirimp_field(f, "shape");
    int64_t s[NIR_MAX_NDIM];
    int n = 0;
    if (!v)
        return nirimp_node_fail(c, f, NC_ERR_FORMAT, "field 'shape' is missing");
    if (v->kind == NIR_STRING || v->ndim > 1 || v->numel < 1 || v->numel > 4)
        return nirimp_node_fail(c, f, NC_ERR_FORMAT, "field 'shape' must be 1 to 4 sizes");
    if (v->ndim == 0)
        nir_note(c->notes, NC_NIR_NOTE_WARNING, f->name,
                 "field 'shape' is a scalar, not a 1-d array (the official reader refuses that); read as [%g]",
                 nirimp_value_at(v, 0));
    for (int64_t k = 0; k < v->numel; k++) {
        double x = nirimp_value_at(v, k);
        if (!(x >= 1 && x <= 1e9) || x != floor(x))
            return nirimp_node_fail(c, f, NC_ERR_FORMAT, "field 'shape' holds %g, not a positive size", x);
        s[n++] = (int64_t)x;
    }
    set_out(f, n, s);
    if ((st = ir_shape_of(c, f, n, s, &irn, irs)) != NC_OK)
        return st;
    set_ir(f, irn, irs);
    return NC_OK;
}

/* Output, identity and Scale nodes pass their input's shape on; a declared
 * 'shape' that differs is refused, or noted when only the layout differs. */
static nc_status infer_passthrough(imp *c, fnode *f, const fnode *p)
{
    char buf[128], buf2[128];
    nc_status st = NC_OK;
    if (!p)
        return nirimp_node_fail(c, f, NC_ERR_FORMAT, "has no input edge");
    set_out(f, p->ndim, p->shape);
    set_ir(f, p->ir_ndim, p->ir_shape);
    if (f->role != F_NODE) {
        const nir_value *v = nirimp_field(f, "shape");
        if (v && v->kind != NIR_STRING && v->ndim <= 1) {
            int64_t s[NIR_MAX_NDIM], numel = 1;
            int n = (int)(v->numel < NIR_MAX_NDIM ? v->numel : NIR_MAX_NDIM);
            for (int k = 0; k < n; k++)
                numel *= (s[k] = (int64_t)nirimp_value_at(v, k));
            if (!nirimp_same_shape(n, s, p->ndim, p->shape)) {
                if (numel != nc_shape_numel(p->ndim, p->shape))
                    return nirimp_mismatch(c, p, f, "shape", n, s);
                nir_note(c->notes, NC_NIR_NOTE_WARNING, f->name,
                         "field 'shape' %s differs from what arrives from '%s', %s (same number of values); the "
                         "arriving shape is used",
                         nc_shape_str(n, s, buf, sizeof buf), p->name, nc_shape_str(p->ndim, p->shape, buf2, sizeof buf2));
            }
        }
    }
    if (nirimp_is_type(f, "Scale")) {
        const nir_value *v;
        if ((st = need_field(c, f, "scale", &v)) != NC_OK)
            return st;
        int64_t numel = nc_shape_numel(p->ndim, p->shape);
        if (v->numel != 1 && !(v->numel == numel && (nirimp_same_shape(v->ndim, v->shape, p->ndim, p->shape) || v->ndim == 1)))
            return nirimp_mismatch(c, p, f, "scale", v->ndim, v->shape);
    }
    return NC_OK;
}

/* Affine and Linear: (out, in) weights read the flattened input. */
static nc_status infer_dense(imp *c, fnode *f, const fnode *p)
{
    char buf[128];
    nc_status st = NC_OK;
    const nir_value *w, *b = NULL;
    if ((st = need_field(c, f, "weight", &w)) != NC_OK)
        return st;
    if (w->ndim != 2 || w->shape[0] < 1 || w->shape[1] < 1)
        return nirimp_node_fail(c, f, NC_ERR_FORMAT, "field 'weight' must be a 2-d (out, in) array, it is %s",
                         nc_shape_str(w->ndim, w->shape, buf, sizeof buf));
    if (nirimp_is_type(f, "Affine")) {
        if ((st = need_field(c, f, "bias", &b)) != NC_OK)
            return st;
        if (b->numel != w->shape[0])
            return nirimp_node_fail(c, f, NC_ERR_SHAPE, "field 'bias' has %lld values for %lld outputs",
                             (long long)b->numel, (long long)w->shape[0]);
    }
    int64_t in = w->shape[1];
    if (p && nc_shape_numel(p->ndim, p->shape) != in)
        return nirimp_mismatch(c, p, f, "weight", 1, &in);
    if (p && p->ndim != 1)
        nir_note(c->notes, NC_NIR_NOTE_WARNING, f->name,
                 "its input '%s' is %s, not 1-d; read as flattened (NIR's type check would refuse it)", p->name,
                 nc_shape_str(p->ndim, p->shape, buf, sizeof buf));
    f->has_in = 1;
    f->in_ndim = 1;
    f->in_shape[0] = in;
    set_out(f, 1, &w->shape[0]);
    set_ir(f, 1, &w->shape[0]);
    return NC_OK;
}

/* Conv1d and Conv2d: the input comes from the edge, else from
 * 'input_shape'; the output from the kernel geometry. */
static nc_status infer_conv(imp *c, fnode *f, const fnode *p)
{
    char buf[128];
    nc_status st = NC_OK;
    int dims = nirimp_is_type(f, "Conv2d") ? 2 : 1;
    conv_geom g;
    if ((st = nirimp_conv_geometry(c, f, dims, &g)) != NC_OK)
        return st;
    int64_t in[3] = {g.cin_g * g.groups, 0, 0};
    const nir_value *is = nirimp_field(f, "input_shape");
    int64_t declared[2] = {0, 0};
    if (is) {
        if ((st = get_ints(c, f, "input_shape", dims, 1, 0, declared)) != NC_OK)
            return st;
    }
    if (p) {
        if (p->ndim != dims + 1 || p->shape[0] != in[0]) {
            int64_t want[3] = {in[0], is ? declared[0] : -1, is && dims == 2 ? declared[1] : -1};
            return nirimp_mismatch(c, p, f, "weight", dims + 1, want);
        }
        for (int d = 0; d < dims; d++)
            in[1 + d] = p->shape[1 + d];
        if (is && (declared[0] != in[1] || (dims == 2 && declared[1] != in[2]))) {
            int64_t want[3] = {in[0], declared[0], declared[dims - 1]};
            return nirimp_mismatch(c, p, f, "input_shape", dims + 1, want);
        }
    } else {
        if (!is)
            return nirimp_node_fail(c, f, NC_ERR_FORMAT, "its input size is unknown (no field 'input_shape', no input edge)");
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
        return nirimp_node_fail(c, f, NC_ERR_SHAPE, "the %lldx%lld kernel does not fit the input %s",
                                (long long)g.k[0], (long long)g.k[1],
                                nc_shape_str(dims + 1, in, buf, sizeof buf));
    int64_t out[3] = {g.cout, dims == 2 ? oh : ow, ow};
    set_out(f, dims + 1, out);
    int64_t ir3[3] = {g.cout, oh, ow};
    set_ir(f, 3, ir3);
    return NC_OK;
}

/* SumPool2d and AvgPool2d over a [C, H, W] input. */
static nc_status infer_pool(imp *c, fnode *f, const fnode *p)
{
    char buf[128];
    nc_status st = NC_OK;
    conv_geom g;
    if ((st = nirimp_pool_geometry(c, f, &g)) != NC_OK)
        return st;
    if (!p)
        return nirimp_node_fail(c, f, NC_ERR_FORMAT, "has no input edge");
    if (p->ndim != 3)
        return nc_fail(c->err, NC_ERR_SHAPE,
                       "shape mismatch along the edge '%s' -> '%s': '%s' gives %s, but node '%s' (%s) takes a "
                       "[C, H, W] input",
                       p->name, f->name, p->name, nc_shape_str(p->ndim, p->shape, buf, sizeof buf), f->name,
                       f->type);
    int64_t oh = window_out(p->shape[1], g.k[0], g.s[0], g.pad[0], g.pad[2], 1);
    int64_t ow = window_out(p->shape[2], g.k[1], g.s[1], g.pad[1], g.pad[3], 1);
    if (oh < 1 || ow < 1)
        return nirimp_node_fail(c, f, NC_ERR_SHAPE, "field 'kernel_size' does not fit the input %s",
                         nc_shape_str(p->ndim, p->shape, buf, sizeof buf));
    int64_t out[3] = {p->shape[0], oh, ow};
    set_out(f, 3, out);
    set_ir(f, 3, out);
    return NC_OK;
}

/* Flatten from start_dim to end_dim (NIR's defaults 1 and -1). */
static nc_status infer_flatten(imp *c, fnode *f, const fnode *p)
{
    char buf[128];
    nc_status st = NC_OK;
    if (!p)
        return nirimp_node_fail(c, f, NC_ERR_FORMAT, "has no input edge");
    int64_t sd[1], ed[1];
    if (!nirimp_field(f, "start_dim"))
        nir_note(c->notes, NC_NIR_NOTE_WARNING, f->name,
                 "field 'start_dim' is missing; NIR's default 1 is used (0 flattens everything)");
    if ((st = get_ints(c, f, "start_dim", 1, 0, 1, sd)) != NC_OK || (st = get_ints(c, f, "end_dim", 1, 0, -1, ed)) != NC_OK)
        return st;
    int nd = p->ndim;
    int64_t s0 = sd[0] < 0 ? sd[0] + nd : sd[0], e0 = ed[0] < 0 ? ed[0] + nd : ed[0];
    if (s0 < 0 || e0 >= nd || s0 > e0)
        return nirimp_node_fail(
            c, f, NC_ERR_SHAPE, "fields 'start_dim' %lld and 'end_dim' %lld do not fit its input %s",
            (long long)sd[0], (long long)ed[0], nc_shape_str(nd, p->shape, buf, sizeof buf));
    const nir_value *it = nirimp_field(f, "input_type");
    if (it && it->kind != NIR_STRING && it->ndim == 1) {
        int64_t s[NIR_MAX_NDIM];
        int n = (int)(it->numel < NIR_MAX_NDIM ? it->numel : NIR_MAX_NDIM);
        for (int k = 0; k < n; k++)
            s[k] = (int64_t)nirimp_value_at(it, k);
        if (!nirimp_same_shape(n, s, p->ndim, p->shape))
            return nirimp_mismatch(c, p, f, "input_type", n, s);
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

/* Neurons: the shape of their parameters, or (scalar parameters) the
 * shape arriving. */
static nc_status infer_neuron(imp *c, fnode *f, const fnode *p)
{
    char buf[128], buf2[128];
    nc_status st = NC_OK;
    int irn = 0;
    int64_t irs[4] = {0};
    int full = 0, pn = 0;
    int64_t ps[NIR_MAX_NDIM];
    const char *pname = "";
    if ((st = neuron_shape(c, f, &full, &pn, ps, &pname)) != NC_OK)
        return st;
    if (full && p) {
        if (nc_shape_numel(pn, ps) != nc_shape_numel(p->ndim, p->shape))
            return nirimp_mismatch(c, p, f, pname, pn, ps);
        if (!nirimp_same_shape(pn, ps, p->ndim, p->shape))
            nir_note(c->notes, NC_NIR_NOTE_WARNING, f->name,
                     "parameters of shape %s read values of shape %s (same number): the parameter shape is used",
                     nc_shape_str(pn, ps, buf, sizeof buf),
                     nc_shape_str(p->ndim, p->shape, buf2, sizeof buf2));
    }
    if (!full && !p)
        return nirimp_node_fail(c, f, NC_ERR_FORMAT,
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

/* Infers f's output shape (NIR and IR) from its input shape (known when it
 * has a non-recurrent input; else from its own fields). */
nc_status nirimp_infer_fnode(imp *c, int fi)
{
    fnode *f = &c->n[fi];
    int pi = first_pred(c, fi);
    const fnode *p = pi >= 0 ? &c->n[pi] : NULL;
    nc_status st = check_inputs_agree(c, f, fi, pi);
    if (st != NC_OK)
        return st;
    if (f->role == F_INPUT)
        return infer_input(c, f, p);
    if (f->role == F_OUTPUT || f->role == F_IDENT || nirimp_is_type(f, "Scale"))
        return infer_passthrough(c, f, p);
    if (nirimp_is_type(f, "Affine") || nirimp_is_type(f, "Linear"))
        return infer_dense(c, f, p);
    if (nirimp_is_type(f, "Conv1d") || nirimp_is_type(f, "Conv2d"))
        return infer_conv(c, f, p);
    if (nirimp_is_type(f, "SumPool2d") || nirimp_is_type(f, "AvgPool2d"))
        return infer_pool(c, f, p);
    if (nirimp_is_type(f, "Flatten"))
        return infer_flatten(c, f, p);
    if (nirimp_is_neuron_type(f->type))
        return infer_neuron(c, f, p);
    return nirimp_node_fail(c, f, NC_ERR_UNSUPPORTED, "this node type cannot be read");
}
