/* nc_nir_restore.c — NIR import of a file this program exported: the net
 * is restored exactly from the tables we keep in the file's metadata; when
 * they cannot be used, the reason is noted and the file is read by NIR's
 * rules instead. */
#include "nc_nir_import_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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
    return nirimp_tensor_from(v, v->ndim, v->shape);
}

static int two_ints(const nir_node *n, const char *name, int *out)
{
    const nir_value *v = num_field(n, name);
    if (!v || (v->numel != 1 && v->numel != 2))
        return -1;
    for (int k = 0; k < 2; k++) {
        double x = nirimp_value_at(v, v->numel == 1 ? 0 : k);
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
    return v && v->kind != NIR_STRING && v->numel == 1 ? (float)nirimp_value_at(v, 0) : dflt;
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
        if (!b || b->numel != w->shape[0] || !(m->bias = nirimp_tensor_from(b, 1, &b->numel)))
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
    int n = nirimp_neuron_params(strcmp(car->type, "IF") == 0 ? "IF" : car->type, spec);
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
            row[e] = v ? (float)nirimp_value_at(v, v->numel == 1 ? 0 : e) : spec[k].dflt;
    }
    return 0;
}

static int restore_conv(restore_ctx *r, nc_node *m, const nir_node *car)
{
    if (restore_weights(r, m, car, 4) || two_ints(car, "stride", m->stride) || two_ints(car, "dilation", m->dilation))
        return refuse(r, "node '%s': conv fields", m->name);
    m->groups = num_field(car, "groups") ? (int)nirimp_value_at(num_field(car, "groups"), 0) : 1;
    m->kernel[0] = (int)m->weight->shape[2];
    m->kernel[1] = (int)m->weight->shape[3];
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
    return 0;
}

static int restore_pool(restore_ctx *r, nc_node *m, const nir_node *car)
{
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
    return 0;
}

/* The fields of node m (the i-th of n) from its carrier, the NIR node that
 * holds its weights and our metadata; `source` is its recurrent source.
 * Returns 0, or -1 with r->why set. */
static int restore_fields(restore_ctx *r, nc_node *m, const nir_node *car, int64_t source, int64_t i, int64_t n)
{
    switch (m->kind) {
    case NC_NODE_INPUT:
    case NC_NODE_FLATTEN:
    case NC_NODE_ADD:
    case NC_NODE_CONCAT:
    case NC_NODE_OUTPUT:
    case NC_NODE_GLOBAL_AVGPOOL: break;
    case NC_NODE_CONV2D:
        return restore_conv(r, m, car);
    case NC_NODE_DENSE:
        if (restore_weights(r, m, car, 2))
            return -1;
        break;
    case NC_NODE_AVGPOOL:
    case NC_NODE_MAXPOOL:
        return restore_pool(r, m, car);
    case NC_NODE_AFFINE: {
        const nir_value *sc = meta_of(car, "scale", NIR_FLOAT, -1), *sh2 = meta_of(car, "shift", NIR_FLOAT, -1);
        if (!sc || !sh2 || sc->numel != sh2->numel || !(m->weight = nirimp_tensor_from(sc, 1, &sc->numel)) ||
            !(m->bias = nirimp_tensor_from(sh2, 1, &sh2->numel)))
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
        if (!sc || !(m->weight = nirimp_tensor_from(sc, 1, &sc->numel)))
            return refuse(r, "node '%s': scale", m->name);
        break;
    }
    case NC_NODE_RECURRENT:
        if (source <= i || source >= n)
            return refuse(r, "node '%s': recurrent source", m->name);
        m->recur_source = (int)source;
        break;
    case NC_NODE_KIND_COUNT: break;
    }
    return 0;
}

/* The shapes must come out as they were written. */
static int check_shapes(restore_ctx *r)
{
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
        if (restore_fields(r, m, car, recur->i[i], i, n))
            return -1;
    }
    return check_shapes(r);
}

/* A file this program exported (graph metadata format and a fingerprint
 * that matches the content): *is_ours = 1 and *out the exact net that was
 * exported.  Otherwise *is_ours = 0 and NC_OK (read it by NIR's rules). */
nc_status nirimp_restore_ours(const nir_node *root, const nc_nir_load_options *opts, nc_net **out,
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
