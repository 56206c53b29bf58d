/* nc_nir_import_build.c — NIR import, building the IR: one IR node (or a
 * short chain) per NIR node, neuron models with their parameters, and the
 * notes that say how the neurons were read. */
#include "nc_nir_import_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- building the IR ---------------------------------------------------------------------------- */

nc_tensor *nirimp_tensor_from(const nir_value *v, int ndim, const int64_t *shape)
{
    nc_tensor *t = nc_tensor_new(ndim, shape);
    if (!t)
        return NULL;
    for (int64_t k = 0; k < v->numel && k < nc_tensor_numel(t); k++)
        t->data[k] = (float)nirimp_value_at(v, k);
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

int nirimp_add_ir(imp *c, nc_node_kind kind, const char *base, int n_inputs, const int *inputs)
{
    char name[NC_NAME_MAX];
    unique_name(c->net, base, name);
    return nc_net_add_node(c->net, kind, name, n_inputs, inputs);
}

static int all_finite(const nir_value *v)
{
    for (int64_t k = 0; k < v->numel; k++)
        if (!isfinite(nirimp_value_at(v, k)))
            return 0;
    return 1;
}

/* The neuron node of f on IR input `in`. */
static nc_status build_neuron(imp *c, fnode *f, int in)
{
    param_spec spec[8];
    int n = nirimp_neuron_params(f->type, spec);
    int64_t numel = nc_shape_numel(f->ndim, f->shape);
    int64_t pshape[2] = {NC_NPARAM_COUNT, numel};
    nc_tensor *p = nc_tensor_new(2, pshape);
    if (!p)
        return nirimp_node_fail(c, f, NC_ERR_MEMORY, "out of memory for the parameters");
    for (int k = 0; k < n; k++) {
        const nir_value *v = nirimp_field(f, spec[k].name);
        float *row = p->data + (int64_t)spec[k].row * numel;
        if (v && !all_finite(v)) {
            nc_tensor_free(p);
            return nirimp_node_fail(c, f, NC_ERR_FORMAT, "field '%s' holds a value that is not finite", spec[k].name);
        }
        for (int64_t e = 0; e < numel; e++)
            row[e] = v ? (float)nirimp_value_at(v, v->numel == 1 ? 0 : e) : spec[k].dflt;
        if (!v && !spec[k].required && strcmp(spec[k].name, "v_reset") != 0)
            nir_note(c->notes, NC_NIR_NOTE_INFO, f->name, "field '%s' is missing; %g is used", spec[k].name,
                     spec[k].dflt);
        if (spec[k].row == NC_NPARAM_TAU || spec[k].row == NC_NPARAM_TAU_SYN)
            for (int64_t e = 0; e < numel; e++)
                if (!(row[e] > 0)) {
                    double bad = row[e];
                    nc_tensor_free(p);
                    return nirimp_node_fail(c, f, NC_ERR_FORMAT, "field '%s' holds %g; time constants must be positive",
                                     spec[k].name, bad);
                }
        if (spec[k].row == NC_NPARAM_DELAY)
            for (int64_t e = 0; e < numel; e++)
                if (!(row[e] >= 0) || row[e] / c->opts->dt > 100000) {
                    double bad = row[e];
                    nc_tensor_free(p);
                    return nirimp_node_fail(c, f, NC_ERR_UNSUPPORTED,
                                     "field 'delay' holds %g s: negative, or more than 100000 steps of dt = %g s", bad,
                                     c->opts->dt);
                }
    }
    int is_if = nirimp_is_type(f, "IF");
    int plain_if = is_if;
    if (is_if) {
        const float *r = p->data + NC_NPARAM_R * numel, *th = p->data + NC_NPARAM_V_THRESHOLD * numel;
        const float *vr = p->data + NC_NPARAM_V_RESET * numel;
        for (int64_t e = 0; e < numel && plain_if; e++)
            plain_if = r[e] == 1.0f && th[e] == 1.0f && vr[e] == 0.0f;
    }
    int i = nirimp_add_ir(c, NC_NODE_NEURON, f->name, 1, &in);
    if (i < 0) {
        nc_tensor_free(p);
        return nirimp_node_fail(c, f, NC_ERR_MEMORY, "out of memory");
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
        nr->model = is_if ? NC_NEURON_NIR_IF : nirimp_model_of(f->type);
        c->net->nodes[i].weight = p;
    }
    f->ir = i;
    return NC_OK;
}

/* conv2d for Conv1d/Conv2d. */
static nc_status build_conv(imp *c, fnode *f, int in)
{
    int dims = nirimp_is_type(f, "Conv2d") ? 2 : 1;
    conv_geom g;
    nc_status st = nirimp_conv_geometry(c, f, dims, &g);
    if (st != NC_OK)
        return st;
    const nir_value *w = nirimp_field(f, "weight"), *b = nirimp_field(f, "bias");
    int64_t ws[4] = {g.cout, g.cin_g, g.k[0], g.k[1]};
    int i = nirimp_add_ir(c, NC_NODE_CONV2D, f->name, 1, &in);
    if (i < 0)
        return nirimp_node_fail(c, f, NC_ERR_MEMORY, "out of memory");
    nc_node *n = &c->net->nodes[i];
    if (!all_finite(w) || (b && !all_finite(b)))
        return nirimp_node_fail(c, f, NC_ERR_FORMAT, "fields 'weight' or 'bias' hold values that are not finite");
    if (!(n->weight = nirimp_tensor_from(w, 4, ws)))
        return nirimp_node_fail(c, f, NC_ERR_MEMORY, "out of memory for the weight");
    if (b) {
        if (b->kind == NIR_STRING || b->numel != g.cout)
            return nirimp_node_fail(c, f, NC_ERR_SHAPE, "field 'bias' has %lld values for %lld output channels",
                             (long long)b->numel, (long long)g.cout);
        if (!(n->bias = nirimp_tensor_from(b, 1, &g.cout)))
            return nirimp_node_fail(c, f, NC_ERR_MEMORY, "out of memory for the bias");
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
    int i = nirimp_add_ir(c, NC_NODE_AFFINE, name, 1, &in);
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

nc_status nirimp_build_node(imp *c, fnode *f, int in)
{
    nc_status st = NC_OK;
    if (f->role == F_INPUT) {
        int i = nirimp_add_ir(c, NC_NODE_INPUT, f->name, 0, NULL);
        if (i < 0)
            return nirimp_node_fail(c, f, NC_ERR_MEMORY, "out of memory");
        c->net->nodes[i].ndim = f->ir_ndim;
        memcpy(c->net->nodes[i].shape, f->ir_shape, sizeof f->ir_shape);
        f->ir = i;
        return NC_OK;
    }
    if (f->role == F_OUTPUT) {
        f->ir = nirimp_add_ir(c, NC_NODE_OUTPUT, f->name, 1, &in);
        return f->ir < 0 ? nirimp_node_fail(c, f, NC_ERR_MEMORY, "out of memory") : NC_OK;
    }
    if (f->role == F_IDENT) {
        f->ir = in;
        return NC_OK;
    }
    if (nirimp_is_type(f, "Affine") || nirimp_is_type(f, "Linear")) {
        const nir_value *w = nirimp_field(f, "weight"), *b = nirimp_field(f, "bias");
        if (!all_finite(w) || (b && nirimp_is_type(f, "Affine") && !all_finite(b)))
            return nirimp_node_fail(c, f, NC_ERR_FORMAT, "fields 'weight' or 'bias' hold values that are not finite");
        int i = nirimp_add_ir(c, NC_NODE_DENSE, f->name, 1, &in);
        if (i < 0)
            return nirimp_node_fail(c, f, NC_ERR_MEMORY, "out of memory");
        nc_node *n = &c->net->nodes[i];
        n->weight = nirimp_tensor_from(w, 2, w->shape);
        if (nirimp_is_type(f, "Affine"))
            n->bias = nirimp_tensor_from(b, 1, &w->shape[0]);
        if (!n->weight || (nirimp_is_type(f, "Affine") && !n->bias))
            return nirimp_node_fail(c, f, NC_ERR_MEMORY, "out of memory for the weight");
        f->ir = i;
        return NC_OK;
    }
    if (nirimp_is_type(f, "Scale")) {
        const nir_value *v = nirimp_field(f, "scale");
        if (!all_finite(v))
            return nirimp_node_fail(c, f, NC_ERR_FORMAT, "field 'scale' holds values that are not finite");
        int ch = f->ir_ndim == 1 ? (int)f->ir_shape[0] : (int)f->ir_shape[0];
        int64_t numel = nc_shape_numel(f->ir_ndim, f->ir_shape), inner = numel / ch;
        float *per = malloc((size_t)ch * sizeof(float));
        if (!per)
            return nirimp_node_fail(c, f, NC_ERR_MEMORY, "out of memory");
        int uniform = 1;
        for (int64_t e = 0; e < numel && uniform; e++) {
            float s = (float)nirimp_value_at(v, v->numel == 1 ? 0 : e);
            if (e % inner == 0)
                per[e / inner] = s;
            else
                uniform = s == per[e / inner];
        }
        int i;
        if (uniform) { /* per channel (or per value of a vector): the affine node */
            i = add_channel_scale(c, f->name, in, ch, per);
        } else {
            i = nirimp_add_ir(c, NC_NODE_SCALE, f->name, 1, &in);
            if (i >= 0 && !(c->net->nodes[i].weight = nirimp_tensor_from(v, 1, &v->numel)))
                i = -1;
        }
        free(per);
        if (i < 0)
            return nirimp_node_fail(c, f, NC_ERR_MEMORY, "out of memory");
        f->ir = i;
        return NC_OK;
    }
    if (nirimp_is_type(f, "Conv1d") || nirimp_is_type(f, "Conv2d"))
        return build_conv(c, f, in);
    if (nirimp_is_type(f, "SumPool2d") || nirimp_is_type(f, "AvgPool2d")) {
        conv_geom g;
        if ((st = nirimp_pool_geometry(c, f, &g)) != NC_OK)
            return st;
        int i = nirimp_add_ir(c, NC_NODE_AVGPOOL, f->name, 1, &in);
        if (i < 0)
            return nirimp_node_fail(c, f, NC_ERR_MEMORY, "out of memory");
        nc_node *n = &c->net->nodes[i];
        for (int a = 0; a < 2; a++) {
            n->kernel[a] = (int)g.k[a];
            n->stride[a] = (int)g.s[a];
        }
        for (int a = 0; a < 4; a++)
            n->pad[a] = (int)g.pad[a];
        n->count_include_pad = 1; /* NIR: SumPool then 1/k² */
        f->ir = i;
        if (nirimp_is_type(f, "SumPool2d")) {
            int ch = (int)f->shape[0];
            float *k2 = malloc((size_t)ch * sizeof(float));
            char name[NC_NAME_MAX + 8];
            if (!k2)
                return nirimp_node_fail(c, f, NC_ERR_MEMORY, "out of memory");
            for (int k = 0; k < ch; k++)
                k2[k] = (float)(g.k[0] * g.k[1]);
            snprintf(name, sizeof name, "%.*s.sum", NC_NAME_MAX - 8, f->name);
            int j = add_channel_scale(c, name, i, ch, k2);
            free(k2);
            if (j < 0)
                return nirimp_node_fail(c, f, NC_ERR_MEMORY, "out of memory");
            f->ir = j;
            nir_note(c->notes, NC_NIR_NOTE_INFO, f->name,
                     "SumPool2d is run as an average pool times k² (an affine node '<name>.sum' after it)");
        }
        return NC_OK;
    }
    if (nirimp_is_type(f, "Flatten")) {
        f->ir = nirimp_add_ir(c, NC_NODE_FLATTEN, f->name, 1, &in);
        return f->ir < 0 ? nirimp_node_fail(c, f, NC_ERR_MEMORY, "out of memory") : NC_OK;
    }
    if (nirimp_is_neuron_type(f->type))
        return build_neuron(c, f, in);
    return nirimp_node_fail(c, f, NC_ERR_UNSUPPORTED, "this node type cannot be run");
}

/* ---- notes about how the neurons were read ------------------------------------------------------- */

void nirimp_neuron_notes(imp *c)
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
