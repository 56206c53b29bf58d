/* nc_nir_export.c — network IR → NIR file (see nc_nir.h for the mapping and
 * docs/NIR.md for why). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nc_config.h"
#include "nc_nir.h"
#include "nc_nir_doc.h"

#define DIAG_MAX 4096 /* largest per-channel affine written as a diagonal matrix */

/* How the value of one IR node reaches NIR: the sum of the outputs of
 * `srcs` NIR nodes, divided by `amp` (per value; NULL = 1).  Our IF spikes
 * carry θ, NIR's carry 1: after an IF, amp = θ, and the weights that read
 * the value are multiplied by it. */
typedef struct rep {
    int n_srcs;
    char **srcs;
    float *amp;
} rep;

typedef struct exp_ctx {
    const nc_net *net;
    const nc_nir_export_options *opts;
    nc_nir_notes *diffs;
    nc_error *err;
    nir_node root;
    nir_graph *g;
    char (*nname)[NC_NAME_MAX]; /* per IR node: the NIR node carrying it, "" if none */
    rep *rep;
    int *absorbable;
    int n_used, cap_used;
    char **used; /* NIR names taken */
} exp_ctx;

#define node_fail(c, i, code, ...) nc_node_fail((c)->err, (code), "NIR export", &(c)->net->nodes[i], __VA_ARGS__)


static nc_status oom(exp_ctx *c) { return nc_fail(c->err, NC_ERR_MEMORY, "NIR export: out of memory"); }

/* ---- names -------------------------------------------------------------------- */

static int name_taken(const exp_ctx *c, const char *name)
{
    for (int k = 0; k < c->n_used; k++)
        if (strcmp(c->used[k], name) == 0)
            return 1;
    return 0;
}

static int take_name(exp_ctx *c, const char *name) { return nc_strings_add(&c->used, &c->n_used, &c->cap_used, name); }

/* A NIR node name from `base`: letters, digits, '_', '-' and '.' kept, any
 * other byte becomes '_', no leading '_' or '.', unique (base_2, ...). */
static int make_name(exp_ctx *c, const char *base, const char *fallback, char *out)
{
    char clean[NC_NAME_MAX - 16];
    size_t n = 0;
    for (const char *p = base; *p && n + 1 < sizeof clean; p++) {
        char ch = *p;
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
                 ch == '-' || ch == '.';
        ch = ok ? ch : '_';
        if (n == 0 && (ch == '_' || ch == '.'))
            continue;
        if (ch == '_' && n > 0 && clean[n - 1] == '_')
            continue;
        clean[n++] = ch;
    }
    while (n > 0 && (clean[n - 1] == '_' || clean[n - 1] == '.'))
        n--;
    clean[n] = 0;
    if (!n)
        snprintf(clean, sizeof clean, "%s", fallback);
    snprintf(out, NC_NAME_MAX, "%s", clean);
    for (int k = 2; name_taken(c, out); k++)
        snprintf(out, NC_NAME_MAX, "%s_%d", clean, k);
    return take_name(c, out);
}

/* ---- helpers ------------------------------------------------------------------ */

static const nc_node *node_at(const exp_ctx *c, int i) { return &c->net->nodes[i]; }
static int64_t numel_of(const exp_ctx *c, int i) { return nc_node_numel(node_at(c, i)); }

static int edges_from(exp_ctx *c, const rep *r, const char *to)
{
    for (int k = 0; k < r->n_srcs; k++)
        if (nir_graph_edge(c->g, r->srcs[k], to) != 0)
            return -1;
    return 0;
}

static int rep_set_single(rep *r, const char *name, float *amp)
{
    for (int k = 0; k < r->n_srcs; k++)
        free(r->srcs[k]);
    free(r->srcs);
    free(r->amp);
    r->srcs = malloc(sizeof(char *));
    r->n_srcs = 1;
    r->amp = amp;
    if (!r->srcs || !(r->srcs[0] = strdup(name))) {
        r->n_srcs = 0;
        return -1;
    }
    return 0;
}

static void rep_clear(rep *r)
{
    for (int k = 0; k < r->n_srcs; k++)
        free(r->srcs[k]);
    free(r->srcs);
    free(r->amp);
    memset(r, 0, sizeof *r);
}

/* The IR shape as int64 for NIR. */
static int shape_of(const nc_node *n, int64_t *out)
{
    for (int d = 0; d < n->ndim; d++)
        out[d] = n->shape[d];
    return n->ndim;
}

static nir_node *add_node(exp_ctx *c, const char *name, const char *type)
{
    return nir_graph_add(c->g, name, type);
}

/* A Scale node `base`.scale that multiplies a value (of IR node `i`'s
 * shape) by amp, so that what follows gets unit amplitude. */
static nc_status insert_scale(exp_ctx *c, int i, const char *base, rep *r)
{
    char name[NC_NAME_MAX], hint[NC_NAME_MAX + 8];
    snprintf(hint, sizeof hint, "%.*s.scale", NC_NAME_MAX - 8, base);
    if (make_name(c, hint, "scale", name) != 0)
        return oom(c);
    int64_t shape[4];
    int nd = shape_of(node_at(c, i), shape);
    nir_node *s = add_node(c, name, "Scale");
    if (!s || nir_set_floats(s, 0, "scale", nd, shape, r->amp) != 0 ||
        nir_add_string(s, 1, "inserted_by", "neurocuda: our IF spikes carry their threshold; NIR spikes are 1") == NULL ||
        edges_from(c, r, name) != 0 || rep_set_single(r, name, NULL) != 0)
        return oom(c);
    nir_note(c->diffs, NC_NIR_NOTE_INFO, node_at(c, i)->name,
             "a Scale node multiplies the spikes by their threshold before it (fewer tools read Scale)");
    return NC_OK;
}

/* A copy of the representation of IR node `from` (the input of a node). */
static nc_status rep_copy(exp_ctx *c, int from, rep *out)
{
    const rep *r = &c->rep[from];
    memset(out, 0, sizeof *out);
    out->srcs = calloc((size_t)(r->n_srcs ? r->n_srcs : 1), sizeof(char *));
    if (!out->srcs)
        return oom(c);
    for (int k = 0; k < r->n_srcs; k++)
        if (!(out->srcs[out->n_srcs++] = strdup(r->srcs[k])))
            return oom(c);
    if (r->amp) {
        size_t bytes = (size_t)numel_of(c, from) * sizeof(float);
        if (!(out->amp = malloc(bytes)))
            return oom(c);
        memcpy(out->amp, r->amp, bytes);
    }
    return NC_OK;
}

/* 1 if amp (values of node `in`) is the same across each channel's values;
 * per_channel gets one value per channel.  NULL amp: all 1. */
static int channel_amp(const exp_ctx *c, int in, const float *amp, float *per_channel)
{
    const nc_node *n = node_at(c, in);
    int ch = nc_node_channels(n);
    int64_t numel = nc_node_numel(n), inner = numel / (ch > 0 ? ch : 1);
    for (int k = 0; k < ch; k++)
        per_channel[k] = amp ? amp[(int64_t)k * inner] : 1.0f;
    for (int64_t e = 0; amp && e < numel; e++)
        if (amp[e] != per_channel[e / inner])
            return 0;
    return 1;
}

/* The per-channel amplitudes of node from's spikes (r, ch channels) in a new
 * array *a, for the reader named `reader` to fold into its weights; where
 * they vary within a channel, a Scale node in front of the reader takes them
 * and *a holds ones.  *a is NULL only when out of memory. */
static nc_status input_amplitudes(exp_ctx *c, int from, const char *reader, rep *r, int64_t ch, float **a)
{
    *a = malloc((size_t)ch * sizeof(float));
    if (!*a)
        return oom(c);
    if (channel_amp(c, from, r->amp, *a))
        return NC_OK;
    for (int64_t k = 0; k < ch; k++)
        (*a)[k] = 1.0f;
    return insert_scale(c, from, reader, r);
}

/* The input of node i as a representation with unit amplitude (a Scale is
 * inserted when needed). */
static nc_status unit_input(exp_ctx *c, int i, rep *r)
{
    nc_status st = rep_copy(c, node_at(c, i)->inputs[0], r);
    if (st == NC_OK && r->amp)
        st = insert_scale(c, node_at(c, i)->inputs[0], node_at(c, i)->name, r);
    return st;
}

static int all_one(const float *v, int64_t n)
{
    for (int64_t k = 0; v && k < n; k++)
        if (v[k] != 1.0f)
            return 0;
    return 1;
}

/* ---- node writers ----------------------------------------------------------------- */

static nc_status write_conv(exp_ctx *c, int i)
{
    const nc_node *n = node_at(c, i);
    const nc_node *in = node_at(c, n->inputs[0]);
    rep r;
    nc_status st = rep_copy(c, n->inputs[0], &r);
    if (st != NC_OK)
        return st;
    if (n->pad[0] != n->pad[2] || n->pad[1] != n->pad[3]) {
        rep_clear(&r);
        return node_fail(c, i, NC_ERR_UNSUPPORTED,
                         "its padding (top %d, left %d, bottom %d, right %d) is not symmetric, which NIR's Conv2d "
                         "cannot say",
                         n->pad[0], n->pad[1], n->pad[2], n->pad[3]);
    }
    int ch = nc_node_channels(in);
    float *a;
    st = input_amplitudes(c, n->inputs[0], n->name, &r, ch, &a);
    if (!a) {
        rep_clear(&r);
        return st;
    }
    const nc_tensor *w = n->weight;
    nir_node *o = st == NC_OK ? add_node(c, c->nname[i], "Conv2d") : NULL;
    int folded = !all_one(a, ch);
    if (st == NC_OK) {
        int64_t cout = w->shape[0], cin_g = w->shape[1], kk = w->shape[2] * w->shape[3];
        int64_t cout_g = cout / n->groups;
        nir_value *wv = o ? nir_add_float(o, 0, "weight", 4, w->shape) : NULL;
        nir_value *bv = o ? nir_add_float(o, 0, "bias", 1, &cout) : NULL;
        int64_t two[2];
        if (!wv || !bv) {
            st = oom(c);
        } else {
            for (int64_t oc = 0; oc < cout; oc++)
                for (int64_t ci = 0; ci < cin_g; ci++) {
                    float s = a[(oc / cout_g) * cin_g + ci];
                    for (int64_t k = 0; k < kk; k++) {
                        int64_t e = (oc * cin_g + ci) * kk + k;
                        wv->f[e] = w->data[e] * s;
                    }
                }
            if (n->bias)
                memcpy(bv->f, n->bias->data, (size_t)cout * sizeof(float));
            two[0] = in->shape[1];
            two[1] = in->shape[2];
            int fail = nir_set_ints(o, 0, "input_shape", 2, two);
            two[0] = n->stride[0], two[1] = n->stride[1];
            fail |= nir_set_ints(o, 0, "stride", 2, two);
            two[0] = n->pad[0], two[1] = n->pad[1];
            fail |= nir_set_ints(o, 0, "padding", 2, two);
            two[0] = n->dilation[0], two[1] = n->dilation[1];
            fail |= nir_set_ints(o, 0, "dilation", 2, two);
            fail |= nir_set_int(o, 0, "groups", n->groups);
            if (folded)
                fail |= nir_set_floats(o, 1, "weight_unfolded", w->ndim, w->shape, w->data);
            if (!n->bias)
                fail |= nir_set_int(o, 1, "has_bias", 0);
            if (fail || edges_from(c, &r, c->nname[i]) != 0)
                st = oom(c);
        }
    }
    if (st == NC_OK && folded)
        nir_note(c->diffs, NC_NIR_NOTE_INFO, n->name,
                 "the thresholds of the spikes it reads are multiplied into its weights (NIR spikes are 1, ours "
                 "carry θ); the weights as trained are kept in its metadata");
    if (st == NC_OK && n->groups > 1)
        nir_note(c->diffs, NC_NIR_NOTE_DIFFERENCE, n->name,
                 "a grouped convolution: the official nir reader's type check rejects it (its inference takes "
                 "weight.shape[1] as the input channels); read it with nir.read(..., type_check=False)");
    if (st == NC_OK && n->kernel[0] != n->kernel[1])
        nir_note(c->diffs, NC_NIR_NOTE_DIFFERENCE, n->name,
                 "a non-square kernel: the official nir reader infers its output size from weight.shape[2] alone "
                 "and may reject the graph; read it with nir.read(..., type_check=False)");
    free(a);
    rep_clear(&r);
    if (st == NC_OK && rep_set_single(&c->rep[i], c->nname[i], NULL) != 0)
        st = oom(c);
    return st;
}

static nc_status write_dense(exp_ctx *c, int i)
{
    const nc_node *n = node_at(c, i);
    const nc_node *in = node_at(c, n->inputs[0]);
    rep r;
    nc_status st = rep_copy(c, n->inputs[0], &r);
    if (st != NC_OK)
        return st;
    if (in->ndim != 1) {
        /* NIR's Affine reads a vector: a Flatten in front */
        char name[NC_NAME_MAX], hint[NC_NAME_MAX + 8];
        int64_t shape[4];
        int nd = shape_of(in, shape);
        snprintf(hint, sizeof hint, "%.*s.flatten", NC_NAME_MAX - 10, n->name);
        nir_node *f = make_name(c, hint, "flatten", name) == 0 ? add_node(c, name, "Flatten") : NULL;
        if (!f || nir_set_int(f, 0, "start_dim", 0) || nir_set_int(f, 0, "end_dim", -1) ||
            nir_set_ints(f, 0, "input_type", nd, shape) ||
            !nir_add_string(f, 1, "inserted_by", "neurocuda: NIR's Affine reads a vector") ||
            edges_from(c, &r, name) != 0) {
            rep_clear(&r);
            return oom(c);
        }
        float *amp = r.amp;
        r.amp = NULL;
        if (rep_set_single(&r, name, amp) != 0) {
            rep_clear(&r);
            return oom(c);
        }
    }
    const nc_tensor *w = n->weight;
    int64_t fout = w->shape[0], fin = w->shape[1];
    nir_node *o = add_node(c, c->nname[i], "Affine");
    nir_value *wv = o ? nir_add_float(o, 0, "weight", 2, w->shape) : NULL;
    nir_value *bv = o ? nir_add_float(o, 0, "bias", 1, &fout) : NULL;
    if (!wv || !bv) {
        rep_clear(&r);
        return oom(c);
    }
    for (int64_t a = 0; a < fout; a++)
        for (int64_t b = 0; b < fin; b++)
            wv->f[a * fin + b] = w->data[a * fin + b] * (r.amp ? r.amp[b] : 1.0f);
    if (n->bias)
        memcpy(bv->f, n->bias->data, (size_t)fout * sizeof(float));
    int folded = !all_one(r.amp, fin), fail = 0;
    if (folded)
        fail |= nir_set_floats(o, 1, "weight_unfolded", 2, w->shape, w->data);
    if (!n->bias)
        fail |= nir_set_int(o, 1, "has_bias", 0);
    if (fail || edges_from(c, &r, c->nname[i]) != 0 || rep_set_single(&c->rep[i], c->nname[i], NULL) != 0) {
        rep_clear(&r);
        return oom(c);
    }
    if (folded)
        nir_note(c->diffs, NC_NIR_NOTE_INFO, n->name,
                 "the thresholds of the spikes it reads are multiplied into its weights (NIR spikes are 1, ours "
                 "carry θ); the weights as trained are kept in its metadata");
    rep_clear(&r);
    return NC_OK;
}

static nc_status write_pool(exp_ctx *c, int i)
{
    const nc_node *n = node_at(c, i);
    const nc_node *in = node_at(c, n->inputs[0]);
    int global = n->kind == NC_NODE_GLOBAL_AVGPOOL;
    int64_t k[2], s[2], p[2];
    if (global) {
        k[0] = s[0] = in->shape[1];
        k[1] = s[1] = in->shape[2];
        p[0] = p[1] = 0;
    } else {
        if (n->kind == NC_NODE_MAXPOOL && n->maxpool_strategy != NC_MAXPOOL_AVG) {
            if (!c->opts->allow_approx)
                return node_fail(c, i, NC_ERR_UNSUPPORTED,
                                 "NIR has no max-pooling primitive, and this pool runs as a max (strategy %s). "
                                 "Convert with --maxpool avg (it becomes an average pool, which NIR has), or export "
                                 "with the approximation allowed to write it as an average pool",
                                 nc_maxpool_strategy_name(n->maxpool_strategy));
            nir_note(c->diffs, NC_NIR_NOTE_DIFFERENCE, n->name,
                     "a max pool written as an average pool (approximation asked for): other tools compute a "
                     "different function than our simulator");
        } else if (n->kind == NC_NODE_MAXPOOL) {
            nir_note(c->diffs, NC_NIR_NOTE_INFO, n->name,
                     "the ANN's max pool runs as an average pool in the SNN (strategy avg), and is written as one");
        }
        if (n->pad[0] != n->pad[2] || n->pad[1] != n->pad[3])
            return node_fail(c, i, NC_ERR_UNSUPPORTED, "its padding is not symmetric, which NIR's pools cannot say");
        if (n->dilation[0] != 1 || n->dilation[1] != 1)
            return node_fail(c, i, NC_ERR_UNSUPPORTED, "a dilated pool, which NIR cannot say");
        for (int a = 0; a < 2; a++) {
            k[a] = n->kernel[a];
            s[a] = n->stride[a];
            p[a] = n->pad[a];
        }
        if (n->ceil_mode) {
            int64_t oh = (in->shape[1] + 2 * p[0] - k[0]) / s[0] + 1, ow = (in->shape[2] + 2 * p[1] - k[1]) / s[1] + 1;
            if (oh != n->shape[1] || ow != n->shape[2])
                return node_fail(c, i, NC_ERR_UNSUPPORTED,
                                 "ceil_mode makes it %lldx%lld where NIR's floor rule gives %lldx%lld",
                                 (long long)n->shape[1], (long long)n->shape[2], (long long)oh, (long long)ow);
        }
        if ((p[0] || p[1]) && !n->count_include_pad) {
            if (!c->opts->allow_approx)
                return node_fail(c, i, NC_ERR_UNSUPPORTED,
                                 "it averages over the values inside the padding only (count_include_pad = 0); NIR's "
                                 "average pool divides by the whole window. Export with the approximation allowed "
                                 "to write it anyway");
            nir_note(c->diffs, NC_NIR_NOTE_DIFFERENCE, n->name,
                     "border windows are divided by the whole window in NIR (count_include_pad), by the values "
                     "inside here");
        }
    }
    rep r;
    nc_status st = rep_copy(c, n->inputs[0], &r);
    if (st != NC_OK)
        return st;
    int ch = nc_node_channels(in);
    int64_t numel = nc_node_numel(n), inner = numel / ch;
    float *amp = malloc((size_t)numel * sizeof(float)), *a = NULL;
    if (amp)
        st = input_amplitudes(c, n->inputs[0], n->name, &r, ch, &a);
    if (!a) {
        st = amp ? st : oom(c);
        free(amp);
        rep_clear(&r);
        return st;
    }
    int sum = c->absorbable[i];
    for (int64_t e = 0; e < numel; e++)
        amp[e] = sum ? a[e / inner] / (float)(k[0] * k[1]) : a[e / inner];
    nir_node *o = st == NC_OK ? add_node(c, c->nname[i], sum ? "SumPool2d" : "AvgPool2d") : NULL;
    int64_t pad4[4] = {n->pad[0], n->pad[1], n->pad[2], n->pad[3]};
    if (st == NC_OK &&
        (!o || nir_set_ints(o, 0, "kernel_size", 2, k) || nir_set_ints(o, 0, "stride", 2, s) ||
         nir_set_ints(o, 0, "padding", 2, p) || nir_set_int(o, 1, "count_include_pad", n->count_include_pad) ||
         nir_set_int(o, 1, "ceil_mode", n->ceil_mode) || nir_set_ints(o, 1, "pad", 4, pad4) ||
         !nir_add_string(o, 1, "pool_of", nc_node_kind_name(n->kind)) ||
         (n->kind == NC_NODE_MAXPOOL &&
          !nir_add_string(o, 1, "maxpool_strategy", nc_maxpool_strategy_name(n->maxpool_strategy))) ||
         !nir_add_string(o, 1, "written_as",
                         sum ? "SumPool2d: the 1/k^2 of the average is multiplied into the weights that read it"
                             : "AvgPool2d") ||
         edges_from(c, &r, c->nname[i]) != 0))
        st = oom(c);
    free(a);
    rep_clear(&r);
    if (st == NC_OK && all_one(amp, numel)) {
        free(amp);
        amp = NULL;
    }
    if (st == NC_OK && rep_set_single(&c->rep[i], c->nname[i], amp) != 0)
        st = oom(c);
    else if (st != NC_OK)
        free(amp);
    return st;
}

static nc_status write_flatten(exp_ctx *c, int i)
{
    const nc_node *n = node_at(c, i);
    rep r;
    nc_status st = rep_copy(c, n->inputs[0], &r);
    if (st != NC_OK)
        return st;
    int64_t shape[4];
    int nd = shape_of(node_at(c, n->inputs[0]), shape);
    nir_node *o = add_node(c, c->nname[i], "Flatten");
    if (!o || nir_set_int(o, 0, "start_dim", 0) || nir_set_int(o, 0, "end_dim", -1) ||
        nir_set_ints(o, 0, "input_type", nd, shape) || edges_from(c, &r, c->nname[i]) != 0) {
        rep_clear(&r);
        return oom(c);
    }
    float *amp = r.amp;
    r.amp = NULL;
    rep_clear(&r);
    return rep_set_single(&c->rep[i], c->nname[i], amp) == 0 ? NC_OK : oom(c);
}

/* add: no NIR node; NIR sums the edges that meet at its consumers. */
static nc_status write_add(exp_ctx *c, int i)
{
    const nc_node *n = node_at(c, i);
    int64_t numel = nc_node_numel(n);
    rep *out = &c->rep[i];
    int equal = 1;
    for (int k = 1; k < n->n_inputs && equal; k++) {
        const float *a = c->rep[n->inputs[0]].amp, *b = c->rep[n->inputs[k]].amp;
        equal = (!a && !b) || (a && b && memcmp(a, b, (size_t)numel * sizeof(float)) == 0);
    }
    for (int k = 0; k < n->n_inputs; k++) {
        rep r;
        nc_status st = rep_copy(c, n->inputs[k], &r);
        if (st == NC_OK && !equal && r.amp)
            st = insert_scale(c, n->inputs[k], n->name, &r);
        if (st != NC_OK) {
            rep_clear(&r);
            return st;
        }
        char **grown = realloc(out->srcs, (size_t)(out->n_srcs + r.n_srcs) * sizeof(char *));
        if (!grown) {
            rep_clear(&r);
            return oom(c);
        }
        out->srcs = grown;
        for (int q = 0; q < r.n_srcs; q++) {
            for (int z = 0; z < out->n_srcs; z++)
                if (strcmp(out->srcs[z], r.srcs[q]) == 0) {
                    rep_clear(&r);
                    return node_fail(c, i, NC_ERR_UNSUPPORTED,
                                     "it adds the output of '%s' more than once, which NIR's edges cannot say",
                                     r.srcs[q]);
                }
            out->srcs[out->n_srcs++] = r.srcs[q];
            r.srcs[q] = NULL;
        }
        if (k == 0 && equal) {
            out->amp = r.amp;
            r.amp = NULL;
        }
        rep_clear(&r);
    }
    return NC_OK;
}

/* Our per-channel affine: a 1×1 Conv2d (or an Affine on vectors) with a
 * diagonal weight. */
static nc_status write_affine(exp_ctx *c, int i)
{
    const nc_node *n = node_at(c, i);
    const nc_node *in = node_at(c, n->inputs[0]);
    int64_t ch = nc_node_channels(n);
    if (!(in->ndim == 3 || in->ndim == 1))
        return node_fail(c, i, NC_ERR_UNSUPPORTED, "a per-channel affine on %d-d values, which NIR cannot say",
                         in->ndim);
    if (ch > DIAG_MAX)
        return node_fail(c, i, NC_ERR_UNSUPPORTED,
                         "a per-channel affine of %lld channels would be a %lld x %lld matrix in NIR (at most %d)",
                         (long long)ch, (long long)ch, (long long)ch, DIAG_MAX);
    rep r;
    nc_status st = rep_copy(c, n->inputs[0], &r);
    if (st != NC_OK)
        return st;
    float *a;
    st = input_amplitudes(c, n->inputs[0], n->name, &r, ch, &a);
    if (!a) {
        rep_clear(&r);
        return st;
    }
    int conv = in->ndim == 3;
    nir_node *o = st == NC_OK ? add_node(c, c->nname[i], conv ? "Conv2d" : "Affine") : NULL;
    int64_t ws[4] = {ch, ch, 1, 1};
    nir_value *wv = o ? nir_add_float(o, 0, "weight", conv ? 4 : 2, ws) : NULL;
    nir_value *bv = o ? nir_add_float(o, 0, "bias", 1, &ch) : NULL;
    if (st == NC_OK && (!wv || !bv))
        st = oom(c);
    if (st == NC_OK) {
        for (int64_t q = 0; q < ch; q++) {
            wv->f[q * ch + q] = n->weight->data[q] * a[q];
            bv->f[q] = n->bias->data[q];
        }
        int fail = nir_set_floats(o, 1, "scale", 1, &ch, n->weight->data) ||
                   nir_set_floats(o, 1, "shift", 1, &ch, n->bias->data) ||
                   !nir_add_string(o, 1, "written_as", "a per-channel affine (scale, shift) as a diagonal weight");
        if (conv) {
            int64_t two[2] = {in->shape[1], in->shape[2]}, one[2] = {1, 1}, zero[2] = {0, 0};
            fail |= nir_set_ints(o, 0, "input_shape", 2, two) || nir_set_ints(o, 0, "stride", 2, one) ||
                    nir_set_ints(o, 0, "padding", 2, zero) || nir_set_ints(o, 0, "dilation", 2, one) ||
                    nir_set_int(o, 0, "groups", 1);
        }
        if (fail || edges_from(c, &r, c->nname[i]) != 0 || rep_set_single(&c->rep[i], c->nname[i], NULL) != 0)
            st = oom(c);
    }
    free(a);
    rep_clear(&r);
    return st;
}

static nc_status write_scale(exp_ctx *c, int i)
{
    const nc_node *n = node_at(c, i);
    rep r;
    nc_status st = rep_copy(c, n->inputs[0], &r);
    if (st != NC_OK)
        return st;
    int64_t shape[4], numel = nc_node_numel(n);
    int nd = shape_of(n, shape);
    nir_node *o = add_node(c, c->nname[i], "Scale");
    nir_value *v = o ? nir_add_float(o, 0, "scale", nd, shape) : NULL;
    if (!v) {
        rep_clear(&r);
        return oom(c);
    }
    int one = nc_tensor_numel(n->weight) == 1;
    for (int64_t e = 0; e < numel; e++)
        v->f[e] = n->weight->data[one ? 0 : e] * (r.amp ? r.amp[e] : 1.0f);
    int fail = 0;
    if (!all_one(r.amp, numel) || one)
        fail = nir_set_floats(o, 1, "scale_unfolded", n->weight->ndim, n->weight->shape, n->weight->data);
    if (fail || edges_from(c, &r, c->nname[i]) != 0 || rep_set_single(&c->rep[i], c->nname[i], NULL) != 0)
        st = oom(c);
    rep_clear(&r);
    return st;
}

/* θ of each value of an IF node. */
static float *if_amp(const nc_node *n)
{
    int64_t numel = nc_node_numel(n);
    int ch = nc_node_channels(n);
    int64_t inner = numel / (ch > 0 ? ch : 1);
    float *amp = malloc((size_t)numel * sizeof(float));
    if (!amp)
        return NULL;
    for (int64_t e = 0; e < numel; e++)
        amp[e] = n->neuron.threshold[n->neuron.n_threshold == ch ? e / inner : 0];
    return amp;
}

static nc_status write_if(exp_ctx *c, int i)
{
    const nc_node *n = node_at(c, i);
    const nc_neuron *nr = &n->neuron;
    rep r;
    nc_status st = unit_input(c, i, &r);
    if (st != NC_OK) {
        rep_clear(&r);
        return st;
    }
    int64_t shape[4], numel = nc_node_numel(n);
    int nd = shape_of(n, shape);
    float *amp = if_amp(n);
    nir_node *o = amp ? add_node(c, c->nname[i], "IF") : NULL;
    nir_value *rv = o ? nir_add_float(o, 0, "r", nd, shape) : NULL;
    nir_value *tv = o ? nir_add_float(o, 0, "v_threshold", nd, shape) : NULL;
    int64_t nt = nr->n_threshold;
    if (!rv || !tv || nir_set_floats(o, 1, "threshold", 1, &nt, nr->threshold) ||
        !nir_add_string(o, 1, "model", "if") ||
        !nir_add_string(o, 1, "reset_mode", nr->reset == NC_RESET_SUBTRACT ? "subtract" : "zero") ||
        nir_set_float(o, 1, "v0_fraction", nr->v0_fraction) ||
        !nir_add_string(o, 1, "fire_when", nr->compare == NC_FIRE_GE ? "v >= v_threshold" : "v > v_threshold") ||
        nir_set_int(o, 1, "qcfs_levels", nr->levels) || nir_set_float(o, 1, "qcfs_shift", nr->shift) ||
        !nir_add_string(o, 1, "spike_value",
                        "1 in this file; the thresholds are multiplied into the weights that read the spikes") ||
        edges_from(c, &r, c->nname[i]) != 0) {
        free(amp);
        rep_clear(&r);
        return oom(c);
    }
    for (int64_t e = 0; e < numel; e++) {
        rv->f[e] = 1.0f;
        tv->f[e] = amp[e];
    }
    rep_clear(&r);
    if (nr->reset == NC_RESET_SUBTRACT)
        nir_note(c->diffs, NC_NIR_NOTE_DIFFERENCE, n->name,
                 "resets by subtracting the threshold after a spike; NIR's IF resets to v_reset = 0, as snnTorch, "
                 "Norse, Lava and SpikingJelly run it (sinabs subtracts, like us); metadata reset_mode");
    if (nr->v0_fraction != 0.0f)
        nir_note(c->diffs, NC_NIR_NOTE_DIFFERENCE, n->name,
                 "starts at v = %g x threshold; NIR neurons start at v = 0 (metadata v0_fraction)",
                 (double)nr->v0_fraction);
    if (nr->compare == NC_FIRE_GE)
        nir_note(c->diffs, NC_NIR_NOTE_DIFFERENCE, n->name,
                 "fires when v >= threshold; NIR's IF fires when v > threshold (metadata fire_when)");
    if (all_one(amp, numel)) {
        free(amp);
        amp = NULL;
    }
    return rep_set_single(&c->rep[i], c->nname[i], amp) == 0 ? NC_OK : oom(c);
}

/* LIF, CubaLIF, LI, CubaLI, I, NIR-IF, Threshold, Delay from a NIR import. */
static nc_status write_nir_neuron(exp_ctx *c, int i)
{
    const nc_node *n = node_at(c, i);
    const nc_neuron *nr = &n->neuron;
    static const struct {
        nc_neuron_model model;
        const char *type;
        const char *fields[8];
        nc_neuron_param rows[8];
    } table[] = {
        {NC_NEURON_LIF, "LIF", {"tau", "r", "v_leak", "v_threshold", "v_reset"},
         {NC_NPARAM_TAU, NC_NPARAM_R, NC_NPARAM_V_LEAK, NC_NPARAM_V_THRESHOLD, NC_NPARAM_V_RESET}},
        {NC_NEURON_CUBA_LIF, "CubaLIF", {"tau_mem", "tau_syn", "r", "v_leak", "v_threshold", "v_reset", "w_in"},
         {NC_NPARAM_TAU, NC_NPARAM_TAU_SYN, NC_NPARAM_R, NC_NPARAM_V_LEAK, NC_NPARAM_V_THRESHOLD, NC_NPARAM_V_RESET,
          NC_NPARAM_W_IN}},
        {NC_NEURON_LI, "LI", {"tau", "r", "v_leak"}, {NC_NPARAM_TAU, NC_NPARAM_R, NC_NPARAM_V_LEAK}},
        {NC_NEURON_CUBA_LI, "CubaLI", {"tau_mem", "tau_syn", "r", "v_leak", "w_in"},
         {NC_NPARAM_TAU, NC_NPARAM_TAU_SYN, NC_NPARAM_R, NC_NPARAM_V_LEAK, NC_NPARAM_W_IN}},
        {NC_NEURON_INTEGRATOR, "I", {"r"}, {NC_NPARAM_R}},
        {NC_NEURON_NIR_IF, "IF", {"r", "v_threshold", "v_reset"},
         {NC_NPARAM_R, NC_NPARAM_V_THRESHOLD, NC_NPARAM_V_RESET}},
        {NC_NEURON_THRESHOLD, "Threshold", {"threshold"}, {NC_NPARAM_V_THRESHOLD}},
        {NC_NEURON_DELAY, "Delay", {"delay"}, {NC_NPARAM_DELAY}},
    };
    int t = -1;
    for (size_t k = 0; k < sizeof table / sizeof table[0]; k++)
        if (table[k].model == nr->model)
            t = (int)k;
    if (t < 0 || !n->weight)
        return node_fail(c, i, NC_ERR_INTERNAL, "unknown neuron model");
    rep r;
    nc_status st = unit_input(c, i, &r);
    if (st != NC_OK) {
        rep_clear(&r);
        return st;
    }
    int64_t shape[4], numel = nc_node_numel(n);
    int nd = shape_of(n, shape);
    nir_node *o = add_node(c, c->nname[i], table[t].type);
    int fail = !o;
    for (int k = 0; !fail && k < 8 && table[t].fields[k]; k++) {
        const float *row = n->weight->data + (int64_t)table[t].rows[k] * numel;
        if (table[t].rows[k] == NC_NPARAM_V_RESET) {
            int zero = 1;
            for (int64_t e = 0; e < numel && zero; e++)
                zero = row[e] == 0.0f;
            if (zero)
                continue; /* v_reset only when it is not 0 (specs/nir.md §3) */
        }
        fail = nir_set_floats(o, 0, table[t].fields[k], nd, shape, row) != 0;
    }
    if (!fail)
        fail = !nir_add_string(o, 1, "model", nc_neuron_model_name(nr->model)) ||
               nir_set_float(o, 1, "dt", nr->dt) || nir_set_int(o, 1, "integrate_dt", nr->integrate_dt) ||
               !nir_add_string(o, 1, "reset_mode", nr->reset == NC_RESET_SUBTRACT ? "subtract" : "zero");
    if (fail || edges_from(c, &r, c->nname[i]) != 0 || rep_set_single(&c->rep[i], c->nname[i], NULL) != 0) {
        rep_clear(&r);
        return oom(c);
    }
    rep_clear(&r);
    if (nr->reset == NC_RESET_SUBTRACT &&
        (nr->model == NC_NEURON_LIF || nr->model == NC_NEURON_CUBA_LIF || nr->model == NC_NEURON_NIR_IF))
        nir_note(c->diffs, NC_NIR_NOTE_DIFFERENCE, n->name,
                 "resets by subtracting v_threshold; NIR resets to v_reset (metadata reset_mode)");
    return NC_OK;
}

static nc_status write_neuron(exp_ctx *c, int i)
{
    const nc_node *n = node_at(c, i);
    switch (n->neuron.model) {
    case NC_NEURON_IF: return write_if(c, i);
    case NC_NEURON_RELU:
    case NC_NEURON_CLIP:
    case NC_NEURON_QCFS:
        return node_fail(c, i, NC_ERR_UNSUPPORTED,
                         "a %s neuron is an ANN activation; NIR describes spiking networks. Convert the model to an "
                         "SNN first (neurocuda convert), then export the .ncsnn project",
                         nc_neuron_model_name(n->neuron.model));
    default: return write_nir_neuron(c, i);
    }
}

static nc_status write_output(exp_ctx *c, int i)
{
    const nc_node *n = node_at(c, i);
    rep r;
    nc_status st = unit_input(c, i, &r);
    if (st == NC_OK) {
        int64_t shape[4];
        int nd = shape_of(n, shape);
        nir_node *o = add_node(c, c->nname[i], "Output");
        if (!o || nir_set_ints(o, 0, "shape", nd, shape) || edges_from(c, &r, c->nname[i]) != 0)
            st = oom(c);
    }
    rep_clear(&r);
    return st;
}

static nc_status write_recurrent(exp_ctx *c, int i)
{
    const nc_node *n = node_at(c, i);
    int src = n->recur_source;
    if (src <= i || src >= c->net->n_nodes || !c->nname[src][0])
        return node_fail(c, i, NC_ERR_UNSUPPORTED,
                         "a recurrent edge from '%s', which has no NIR node of its own (an add or another "
                         "recurrent node)",
                         src > i && src < c->net->n_nodes ? node_at(c, src)->name : "?");
    const nc_node *s = node_at(c, src);
    float *amp = NULL;
    if (s->kind == NC_NODE_NEURON && s->neuron.model == NC_NEURON_IF) {
        if (!(amp = if_amp(s)))
            return oom(c);
        if (all_one(amp, nc_node_numel(s))) {
            free(amp);
            amp = NULL;
        }
    } else if (s->kind != NC_NODE_NEURON && s->kind != NC_NODE_CONV2D && s->kind != NC_NODE_DENSE &&
               s->kind != NC_NODE_SCALE && s->kind != NC_NODE_AFFINE) {
        return node_fail(c, i, NC_ERR_UNSUPPORTED,
                         "a recurrent edge from a %s node; only neurons and weighted layers are written as cycles",
                         nc_node_kind_name(s->kind));
    }
    /* NIR says "recurrent" with a cycle: the edge from the source goes
     * straight to the consumers of this node (the one-step delay is implied) */
    return rep_set_single(&c->rep[i], c->nname[src], amp) == 0 ? NC_OK : oom(c);
}

static nc_status write_ir_node(exp_ctx *c, int i)
{
    const nc_node *n = node_at(c, i);
    switch (n->kind) {
    case NC_NODE_INPUT: {
        int64_t shape[4];
        int nd = shape_of(n, shape);
        nir_node *o = add_node(c, c->nname[i], "Input");
        if (!o || nir_set_ints(o, 0, "shape", nd, shape) || rep_set_single(&c->rep[i], c->nname[i], NULL) != 0)
            return oom(c);
        return NC_OK;
    }
    case NC_NODE_CONV2D: return write_conv(c, i);
    case NC_NODE_DENSE: return write_dense(c, i);
    case NC_NODE_AVGPOOL:
    case NC_NODE_MAXPOOL:
    case NC_NODE_GLOBAL_AVGPOOL: return write_pool(c, i);
    case NC_NODE_FLATTEN: return write_flatten(c, i);
    case NC_NODE_ADD: return write_add(c, i);
    case NC_NODE_CONCAT:
        return node_fail(c, i, NC_ERR_UNSUPPORTED,
                         "NIR has no concatenation node, so this network cannot be written as NIR");
    case NC_NODE_AFFINE: return write_affine(c, i);
    case NC_NODE_NEURON: return write_neuron(c, i);
    case NC_NODE_OUTPUT: return write_output(c, i);
    case NC_NODE_SCALE: return write_scale(c, i);
    case NC_NODE_RECURRENT: return write_recurrent(c, i);
    case NC_NODE_KIND_COUNT: break;
    }
    return node_fail(c, i, NC_ERR_INTERNAL, "unknown node kind");
}

/* absorbable[i]: every path out of node i reaches a node with weights
 * (conv, dense, affine, scale) through nodes that pass amplitudes on (pools,
 * flatten, add, recurrent), so a pool there may be written as a SumPool2d. */
static int compute_absorbable(exp_ctx *c)
{
    const nc_net *net = c->net;
    int n = net->n_nodes;
    for (int i = 0; i < n; i++)
        c->absorbable[i] = 1;
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 0; i < n; i++) {
            if (!c->absorbable[i])
                continue;
            int ok = 1, consumers = 0;
            for (int j = 0; j < n && ok; j++) {
                const nc_node *m = &net->nodes[j];
                int reads = m->kind == NC_NODE_RECURRENT && m->recur_source == i;
                for (int k = 0; k < m->n_inputs && !reads; k++)
                    reads = m->inputs[k] == i;
                if (!reads)
                    continue;
                consumers++;
                switch (m->kind) {
                case NC_NODE_CONV2D:
                case NC_NODE_DENSE:
                case NC_NODE_AFFINE:
                case NC_NODE_SCALE: break;
                case NC_NODE_AVGPOOL:
                case NC_NODE_MAXPOOL:
                case NC_NODE_GLOBAL_AVGPOOL:
                case NC_NODE_FLATTEN:
                case NC_NODE_ADD:
                case NC_NODE_RECURRENT: ok = c->absorbable[j]; break;
                default: ok = 0; break;
                }
            }
            if (!ok || !consumers) {
                c->absorbable[i] = 0;
                changed = 1;
            }
        }
    }
    return 0;
}

/* The tables nc_nir_load rebuilds this exact net from (nc_nir_doc.h). */
static nc_status write_tables(exp_ctx *c)
{
    const nc_net *net = c->net;
    int n = net->n_nodes;
    nir_node *g = &c->root;
    const char **names = calloc((size_t)n, sizeof *names), **kinds = calloc((size_t)n, sizeof *kinds);
    const char **carriers = calloc((size_t)n, sizeof *carriers);
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        total += net->nodes[i].n_inputs;
    int64_t *counts = calloc((size_t)n, sizeof *counts), *inputs = calloc((size_t)(total ? total : 1), sizeof *inputs);
    int64_t *recur = calloc((size_t)n, sizeof *recur), *shapes = calloc((size_t)n * 5, sizeof *shapes);
    nc_status st = NC_OK;
    if (!names || !kinds || !carriers || !counts || !inputs || !recur || !shapes)
        st = oom(c);
    for (int i = 0, at = 0; st == NC_OK && i < n; i++) {
        const nc_node *m = &net->nodes[i];
        names[i] = m->name;
        kinds[i] = nc_node_kind_name(m->kind);
        carriers[i] = c->nname[i];
        counts[i] = m->n_inputs;
        for (int k = 0; k < m->n_inputs; k++)
            inputs[at++] = m->inputs[k];
        recur[i] = m->kind == NC_NODE_RECURRENT ? m->recur_source : -1;
        shapes[i * 5] = m->ndim;
        for (int d = 0; d < 4; d++)
            shapes[i * 5 + 1 + d] = m->shape[d];
    }
    int64_t nn = n, shape5[2] = {n, 5};
    if (st == NC_OK) {
        nir_value *sv;
        if (nir_set_strings(g, 1, NIR_META_NAMES, nn, names) || nir_set_strings(g, 1, NIR_META_KINDS, nn, kinds) ||
            nir_set_strings(g, 1, NIR_META_CARRIERS, nn, carriers) ||
            nir_set_ints(g, 1, NIR_META_COUNTS, n, counts) ||
            !(sv = nir_add_int(g, 1, NIR_META_INPUTS, 1, &total)) ||
            (memcpy(sv->i, inputs, (size_t)total * sizeof(int64_t)), 0) ||
            nir_set_ints(g, 1, NIR_META_RECUR, n, recur) ||
            !(sv = nir_add_int(g, 1, NIR_META_SHAPES, 2, shape5)) ||
            (memcpy(sv->i, shapes, (size_t)n * 5 * sizeof(int64_t)), 0))
            st = oom(c);
    }
    free(names);
    free(kinds);
    free(carriers);
    free(counts);
    free(inputs);
    free(recur);
    free(shapes);
    return st;
}

static nc_status check_net(const nc_net *net, nc_error *err)
{
    if (!net || net->n_nodes < 2 || net->input != 0 || net->output != net->n_nodes - 1 ||
        net->nodes[0].kind != NC_NODE_INPUT || net->nodes[net->n_nodes - 1].kind != NC_NODE_OUTPUT)
        return nc_fail(err, NC_ERR_ARGUMENT,
                       "NIR export: the network must start with its input node and end with its output node");
    nc_net *copy = nc_net_clone(net);
    if (!copy)
        return nc_fail(err, NC_ERR_MEMORY, "NIR export: out of memory");
    nc_status st = nc_net_infer_shapes(copy, err); /* also checks the parameters the writers read */
    for (int i = 0; st == NC_OK && i < net->n_nodes; i++) {
        const nc_node *a = &net->nodes[i], *b = &copy->nodes[i];
        if (a->ndim != b->ndim || memcmp(a->shape, b->shape, sizeof a->shape) != 0)
            st = nc_fail(err, NC_ERR_ARGUMENT, "NIR export, node '%s': its stored shape is stale; infer the shapes first",
                         a->name);
    }
    nc_net_free(copy);
    if (st != NC_OK && err)
        nc_error_prefix(err, "NIR export");
    return st;
}

nc_status nc_nir_export(const nc_net *net, const char *path, const nc_nir_export_options *opts_in,
                        nc_nir_notes *diffs, nc_error *err)
{
    nc_nir_export_options opts = {0};
    if (opts_in)
        opts = *opts_in;
    nc_status st = check_net(net, err);
    if (st != NC_OK)
        return st;
    exp_ctx c = {.net = net, .opts = &opts, .diffs = diffs, .err = err};
    int n = net->n_nodes;
    c.nname = calloc((size_t)n, sizeof *c.nname);
    c.rep = calloc((size_t)n, sizeof *c.rep);
    c.absorbable = calloc((size_t)n, sizeof *c.absorbable);
    c.g = nir_graph_new();
    snprintf(c.root.name, sizeof c.root.name, "node");
    snprintf(c.root.type, sizeof c.root.type, "NIRGraph");
    c.root.graph = c.g;
    if (!c.nname || !c.rep || !c.absorbable || !c.g)
        st = oom(&c);
    /* names first: a recurrent edge names a node written later */
    if (st == NC_OK && (take_name(&c, "input") || take_name(&c, "output")))
        st = oom(&c);
    for (int i = 0; st == NC_OK && i < n; i++) {
        const nc_node *m = &net->nodes[i];
        if (m->kind == NC_NODE_INPUT)
            snprintf(c.nname[i], NC_NAME_MAX, "input");
        else if (m->kind == NC_NODE_OUTPUT)
            snprintf(c.nname[i], NC_NAME_MAX, "output");
        else if (m->kind != NC_NODE_ADD && m->kind != NC_NODE_RECURRENT &&
                 make_name(&c, m->name, nc_node_kind_name(m->kind), c.nname[i]) != 0)
            st = oom(&c);
    }
    if (st == NC_OK)
        compute_absorbable(&c);
    for (int i = 0; st == NC_OK && i < n; i++)
        st = write_ir_node(&c, i);
    /* metadata: what NIR cannot say, for people and for our reader */
    if (st == NC_OK) {
        char writer[64];
        snprintf(writer, sizeof writer, "neurocuda %s", NC_VERSION);
        const char *source = opts.source ? opts.source : net->source_path;
        if (!nir_add_string(&c.root, 1, "writer", writer) ||
            (source && source[0] && !nir_add_string(&c.root, 1, "source", source)) ||
            !nir_add_string(&c.root, 1, "input_encoding",
                            "direct: the input (an image) is the input current at every step; a Poisson rate code "
                            "is a run option") ||
            !nir_add_string(&c.root, 1, "output_accumulator",
                            "the values of the output node are summed over the steps; the class is the argmax of "
                            "the sum (the output node does not spike)") ||
            !nir_add_string(&c.root, 1, "time",
                            "discrete steps: IF neurons add their input once per step (r = 1, no dt)") ||
            !nir_add_string(&c.root, 1, NIR_META_FORMAT, NC_NIR_FORMAT) ||
            nir_set_int(&c.root, 1, NIR_META_FORMAT_VERSION, 1))
            st = oom(&c);
    }
    if (st == NC_OK)
        st = write_tables(&c);
    if (st == NC_OK) {
        char hex[32];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)nir_fingerprint(&c.root));
        if (!nir_add_string(&c.root, 1, NIR_META_FINGERPRINT, hex))
            st = oom(&c);
    }
    if (st == NC_OK) {
        char writer[64];
        snprintf(writer, sizeof writer, "neurocuda %s", NC_VERSION);
        const char *attrs[] = {"writer", writer, "format", NC_NIR_FORMAT " 1", NULL, NULL};
        st = nir_write_file(path, &c.root, NC_NIR_VERSION, attrs, err);
    }
    if (st == NC_OK) {
        nir_note(diffs, NC_NIR_NOTE_DIFFERENCE, "",
                 "the input is a constant current at every step here (direct encoding); tools that feed events or "
                 "rates see another input (metadata input_encoding)");
        nir_note(diffs, NC_NIR_NOTE_DIFFERENCE, "",
                 "the class is the argmax of the output node's values summed over the steps; NIR says nothing about "
                 "read-out (metadata output_accumulator)");
    }
    for (int i = 0; c.rep && i < n; i++)
        rep_clear(&c.rep[i]);
    free(c.rep);
    free(c.nname);
    free(c.absorbable);
    nc_strings_free(c.used, c.n_used);
    nir_node_clear(&c.root);
    return st;
}
