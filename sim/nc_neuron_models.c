/* nc_neuron_models.c — per-step updates of the NIR neuron models and the
 * step-by-step reference simulator (see nc_neuron_models.h). */
#include "nc_neuron_models.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nc_cpu_ops.h"

nc_nm_params nc_nm_params_of(const nc_node *node)
{
    nc_nm_params p = {
        .model = node->neuron.model,
        .numel = nc_node_numel(node),
        .p = node->weight ? node->weight->data : NULL,
        .dt = node->neuron.dt,
        .reset = node->neuron.reset,
        .integrate_dt = node->neuron.integrate_dt,
    };
    return p;
}

int nc_nm_is_nir_model(nc_neuron_model m) { return m >= NC_NEURON_LIF && m <= NC_NEURON_DELAY; }

int nc_nm_is_spiking(nc_neuron_model m)
{
    return m == NC_NEURON_LIF || m == NC_NEURON_CUBA_LIF || m == NC_NEURON_NIR_IF || m == NC_NEURON_THRESHOLD;
}

/* Row k of the parameter array. */
static const float *row(const nc_nm_params *p, nc_neuron_param k) { return p->p + (int64_t)k * p->numel; }

static int64_t steps_of(float delay, float dt)
{
    double d = (double)delay / (double)dt;
    if (!(d > 0)) /* also NaN */
        return 0;
    return d > 1e9 ? (int64_t)1e9 : (int64_t)lrint(d);
}

int64_t nc_nm_delay_steps(const nc_nm_params *p)
{
    int64_t most = 0;
    const float *d = row(p, NC_NPARAM_DELAY);
    for (int64_t e = 0; e < p->numel; e++) {
        int64_t s = steps_of(d[e], p->dt);
        if (s > most)
            most = s;
    }
    return most;
}

int64_t nc_nm_state_floats(const nc_nm_params *p, int64_t n)
{
    size_t values, total;
    if (nc_mul_size((size_t)n, (size_t)p->numel, &values) != 0)
        return -1;
    switch (p->model) {
    case NC_NEURON_CUBA_LIF:
    case NC_NEURON_CUBA_LI:
        return nc_mul_size(values, 2, &total) ? -1 : (int64_t)total;
    case NC_NEURON_THRESHOLD: return 0;
    case NC_NEURON_DELAY: {
        /* a ring of D + 1 steps per value, plus the step counter in front */
        int64_t slots = nc_nm_delay_steps(p) + 1;
        if (nc_mul_size(values, (size_t)slots, &total) != 0 || nc_add_size(total, 1, &total) != 0)
            return -1;
        return (int64_t)total;
    }
    default: return (int64_t)values;
    }
}

void nc_nm_state_init(const nc_nm_params *p, int64_t n, float *state)
{
    int64_t k = nc_nm_state_floats(p, n);
    if (k > 0)
        memset(state, 0, (size_t)k * sizeof(float));
}

/* ---- the models --------------------------------------------------------------
 * One loop runs every element-wise model: steps outside, values inside,
 * one step of one value at a time (step_value).  The per-value
 * coefficients are recomputed per step (a division per value) rather than
 * cached, so that no workspace is needed. */

static inline float spike_reset(const nc_nm_params *p, float v, float th, float v_reset, float *out)
{
    if (v > th) {
        *out = 1.0f;
        return p->reset == NC_RESET_SUBTRACT ? v - th : v_reset;
    }
    *out = 0.0f;
    return v;
}

/* The input term of I and NIR-IF: r·x, or dt·r·x. */
static inline float integrate_term(const nc_nm_params *p, float r, float x)
{
    return p->integrate_dt ? p->dt * r * x : r * x;
}

/* The parameter rows (nc_nm_params: [NC_NPARAM_COUNT, numel]). */
typedef struct nm_rows {
    const float *tau, *tau_syn, *r, *leak, *th, *vr, *w;
} nm_rows;

static nm_rows rows_of(const nc_nm_params *p)
{
    nm_rows w = {row(p, NC_NPARAM_TAU),         row(p, NC_NPARAM_TAU_SYN),     row(p, NC_NPARAM_R),
                 row(p, NC_NPARAM_V_LEAK),      row(p, NC_NPARAM_V_THRESHOLD), row(p, NC_NPARAM_V_RESET),
                 row(p, NC_NPARAM_W_IN)};
    return w;
}

/* The leaky membrane of LIF, LI, CubaLIF and CubaLI: v + a·(v_leak − v + r·x), a = dt/τ. */
static inline float leak_step(const nc_nm_params *p, const nm_rows *w, int64_t e, float v, float x)
{
    float a = p->dt / w->tau[e];
    return v + a * (w->leak[e] - v + w->r[e] * x);
}

/* One step of value e of an element-wise model (the formulas at the top of
 * nc_neuron_models.h): x is its input, v its membrane, cur its synaptic
 * current (CubaLIF, CubaLI); returns its output. */
static inline float step_value(const nc_nm_params *p, const nm_rows *w, int64_t e, float x, float *v, float *cur)
{
    float o;
    switch (p->model) {
    case NC_NEURON_LIF:
        *v = spike_reset(p, leak_step(p, w, e, *v, x), w->th[e], w->vr[e], &o);
        return o;
    case NC_NEURON_CUBA_LIF:
    case NC_NEURON_CUBA_LI: {
        float b = p->dt / w->tau_syn[e];
        *cur = *cur + b * (w->w[e] * x - *cur);
        float vv = leak_step(p, w, e, *v, *cur); /* the new current */
        if (p->model == NC_NEURON_CUBA_LI)
            return *v = vv;
        *v = spike_reset(p, vv, w->th[e], w->vr[e], &o);
        return o;
    }
    case NC_NEURON_LI: return *v = leak_step(p, w, e, *v, x);
    case NC_NEURON_INTEGRATOR: return *v = *v + integrate_term(p, w->r[e], x);
    case NC_NEURON_NIR_IF:
        *v = spike_reset(p, *v + integrate_term(p, w->r[e], x), w->th[e], w->vr[e], &o);
        return o;
    case NC_NEURON_THRESHOLD: return x > w->th[e] ? 1.0f : 0.0f;
    default: return 0.0f;
    }
}

/* Every model but Delay.  The state is v (n·numel), then CubaLIF's and
 * CubaLI's current; Threshold has none. */
static void run_elementwise(const nc_nm_params *p, int T, int64_t n, const float *in, int64_t in_step, float *out,
                            int64_t out_step, float *state)
{
    nm_rows w = rows_of(p);
    int64_t m = p->numel, nm = n * m;
    float none = 0.0f; /* Threshold's: no state */
    for (int t = 0; t < T; t++) {
        const float *x = in + (int64_t)t * in_step;
        float *o = out + (int64_t)t * out_step;
        for (int64_t s = 0; s < n; s++)
            for (int64_t e = 0; e < m; e++) {
                int64_t k = s * m + e;
                float *v = state ? state + k : &none, *cur = state ? state + nm + k : &none;
                o[k] = step_value(p, &w, e, x[k], v, cur); /* x[k] read first: out may be in */
            }
    }
}

/* State: state[0] = steps done so far (a float: exact up to 2^24 steps),
 * then a ring of D + 1 slots of n·numel values; slot (t mod (D+1)) holds
 * the input of step t. */
static void run_delay(const nc_nm_params *p, int T, int64_t n, const float *in, int64_t in_step, float *out,
                      int64_t out_step, float *state)
{
    const float *d = row(p, NC_NPARAM_DELAY);
    int64_t m = p->numel, nm = n * m, slots = nc_nm_delay_steps(p) + 1;
    float *ring = state + 1;
    for (int t = 0; t < T; t++) {
        int64_t now = (int64_t)state[0];
        const float *x = in + (int64_t)t * in_step;
        float *o = out + (int64_t)t * out_step;
        float *slot = ring + (now % slots) * nm;
        memcpy(slot, x, (size_t)nm * sizeof(float)); /* before o is written: out may be in */
        for (int64_t s = 0; s < n; s++)
            for (int64_t e = 0; e < m; e++) {
                int64_t k = s * m + e, steps = steps_of(d[e], p->dt);
                o[k] = steps > now ? 0.0f : ring[((now - steps) % slots) * nm + k];
            }
        state[0] = (float)(now + 1);
    }
}

void nc_nm_run(const nc_nm_params *p, int T, int64_t n, const float *in, int64_t in_step, float *out,
               int64_t out_step, float *state)
{
    if (p->model == NC_NEURON_DELAY)
        run_delay(p, T, n, in, in_step, out, out_step, state);
    else if (nc_nm_is_nir_model(p->model))
        run_elementwise(p, T, n, in, in_step, out, out_step, p->model == NC_NEURON_THRESHOLD ? NULL : state);
}

/* ---- reference step-by-step simulator --------------------------------------- */

typedef struct ref_node {
    float *val;       /* [T, N, numel] */
    float *state;     /* neuron state (NIR models, IF)                 */
    nc_window win;    /* conv and pools                                */
} ref_node;

static nc_status ref_fail(nc_error *err, const nc_node *n, nc_status code, const char *what)
{
    return nc_fail(err, code, "reference simulator, node '%s' (%s): %s", n->name, nc_node_kind_name(n->kind),
                   what);
}

static float *alloc_floats(int64_t count)
{
    size_t bytes;
    if (count < 0 || nc_mul_size((size_t)count, sizeof(float), &bytes) != 0)
        return NULL;
    return calloc(bytes ? bytes : 1, 1);
}

/* θ of value e (of a node with c channels of `inner` values) for IF. */
static float if_theta(const nc_neuron *nr, int c, int64_t inner, int64_t e)
{
    return nr->threshold[nr->n_threshold == c ? (e / inner) % c : 0];
}

static nc_status ref_prepare(const nc_net *net, int i, int T, int64_t N, ref_node *r, nc_error *err)
{
    const nc_node *n = &net->nodes[i];
    int64_t numel = nc_node_numel(n);
    if (n->ndim < 1 || numel < 1)
        return ref_fail(err, n, NC_ERR_SHAPE, "has no shape; run shape inference first");
    if (!(r->val = alloc_floats((int64_t)T * N * numel)))
        return ref_fail(err, n, NC_ERR_MEMORY, "out of memory for its values over all steps");
    if (n->kind == NC_NODE_CONV2D || n->kind == NC_NODE_AVGPOOL || n->kind == NC_NODE_MAXPOOL) {
        const nc_node *in = &net->nodes[n->inputs[0]];
        if (in->ndim != 3 || nc_window_init(&r->win, (int)in->shape[0], (int)in->shape[1], (int)in->shape[2],
                                            n->kernel, n->stride, n->pad, n->dilation, n->ceil_mode) != 0)
            return ref_fail(err, n, NC_ERR_SHAPE, "window does not fit its input");
        if (n->kind == NC_NODE_MAXPOOL && n->maxpool_strategy == NC_MAXPOOL_GATED)
            return ref_fail(err, n, NC_ERR_UNSUPPORTED, "the gated max-pool strategy is not simulated here");
    }
    if (n->kind == NC_NODE_NEURON) {
        const nc_neuron *nr = &n->neuron;
        if (nr->model == NC_NEURON_IF) {
            int c = nc_node_channels(n);
            int64_t inner = numel / (c > 0 ? c : 1);
            if (!nr->threshold || (nr->n_threshold != 1 && nr->n_threshold != c))
                return ref_fail(err, n, NC_ERR_SHAPE, "needs 1 threshold or one per channel");
            if (!(r->state = alloc_floats(N * numel)))
                return ref_fail(err, n, NC_ERR_MEMORY, "out of memory for the membrane");
            for (int64_t k = 0; k < N * numel; k++)
                r->state[k] = nr->v0_fraction * if_theta(nr, c, inner, k % numel);
        } else if (nc_nm_is_nir_model(nr->model)) {
            if (!n->weight || n->weight->ndim != 2 || n->weight->shape[0] != NC_NPARAM_COUNT ||
                n->weight->shape[1] != numel)
                return ref_fail(err, n, NC_ERR_SHAPE, "parameter array does not fit");
            nc_nm_params p = nc_nm_params_of(n);
            int64_t k = nc_nm_state_floats(&p, N);
            if (k < 0 || !(r->state = alloc_floats(k > 0 ? k : 1)))
                return ref_fail(err, n, NC_ERR_MEMORY, "out of memory for the neuron state");
            nc_nm_state_init(&p, N, r->state);
        }
    }
    return NC_OK;
}

/* Step t of node i. */
static nc_status ref_step(const nc_net *net, int i, int t, int T, int64_t N, const nc_tensor *input,
                          const nc_nm_run_options *o, ref_node *nodes, float **work, size_t *work_floats,
                          nc_error *err)
{
    const nc_node *n = &net->nodes[i];
    ref_node *r = &nodes[i];
    int64_t numel = nc_node_numel(n), step = N * numel;
    float *out = r->val + (int64_t)t * step;
    const float *x = NULL;
    int64_t in_numel = 0;
    if (n->n_inputs > 0) {
        in_numel = nc_node_numel(&net->nodes[n->inputs[0]]);
        x = nodes[n->inputs[0]].val + (int64_t)t * N * in_numel;
    }
    switch (n->kind) {
    case NC_NODE_INPUT:
        if (input->ndim == n->ndim + 2) /* a sequence [T, N, ...] */
            memcpy(out, input->data + (int64_t)t * step, (size_t)step * sizeof(float));
        else if (o->encoding == NC_ENCODING_POISSON)
            nc_poisson_encode(o->seed, t, 1, step, input->data, out);
        else
            memcpy(out, input->data, (size_t)step * sizeof(float));
        return NC_OK;
    case NC_NODE_CONV2D: {
        size_t need = nc_conv2d_work_floats(&r->win, (int)n->shape[0], n->groups, N);
        if (need > *work_floats) {
            float *w = realloc(*work, need * sizeof(float));
            if (!w)
                return ref_fail(err, n, NC_ERR_MEMORY, "out of memory for the im2col workspace");
            *work = w;
            *work_floats = need;
        }
        nc_conv2d(&r->win, (int)n->shape[0], n->groups, N, x, n->weight->data, n->bias ? n->bias->data : NULL,
                  out, *work, *work_floats);
        return NC_OK;
    }
    case NC_NODE_DENSE:
        nc_dense(N, (int)n->weight->shape[1], (int)n->weight->shape[0], x, n->weight->data,
                 n->bias ? n->bias->data : NULL, out);
        return NC_OK;
    case NC_NODE_AVGPOOL: nc_avgpool(&r->win, n->count_include_pad, N, x, out); return NC_OK;
    case NC_NODE_MAXPOOL:
        if (n->maxpool_strategy == NC_MAXPOOL_AVG)
            nc_avgpool(&r->win, n->count_include_pad, N, x, out);
        else
            nc_maxpool(&r->win, N, x, out);
        return NC_OK;
    case NC_NODE_GLOBAL_AVGPOOL: {
        int c = (int)n->shape[0];
        nc_global_avgpool(N, c, in_numel / c, x, out);
        return NC_OK;
    }
    case NC_NODE_FLATTEN:
    case NC_NODE_OUTPUT: memcpy(out, x, (size_t)step * sizeof(float)); return NC_OK;
    case NC_NODE_ADD:
    case NC_NODE_CONCAT: {
        enum { MAX_IN = 64 };
        if (n->n_inputs > MAX_IN)
            return ref_fail(err, n, NC_ERR_UNSUPPORTED, "more than 64 inputs");
        const float *ptr[MAX_IN];
        int64_t per_row[MAX_IN];
        for (int k = 0; k < n->n_inputs; k++) {
            per_row[k] = nc_node_numel(&net->nodes[n->inputs[k]]);
            ptr[k] = nodes[n->inputs[k]].val + (int64_t)t * N * per_row[k];
        }
        if (n->kind == NC_NODE_CONCAT) {
            nc_concat(N, n->n_inputs, ptr, per_row, out);
            return NC_OK;
        }
        memcpy(out, ptr[0], (size_t)step * sizeof(float));
        for (int k = 1; k < n->n_inputs; k++)
            nc_add(step, out, ptr[k], out);
        return NC_OK;
    }
    case NC_NODE_AFFINE: {
        int c = nc_node_channels(n);
        nc_affine(N, c, numel / c, n->weight->data, n->bias->data, x, out);
        return NC_OK;
    }
    case NC_NODE_SCALE: {
        const float *s = n->weight->data;
        int one = nc_tensor_numel(n->weight) == 1;
        for (int64_t k = 0; k < step; k++)
            out[k] = x[k] * s[one ? 0 : k % numel];
        return NC_OK;
    }
    case NC_NODE_RECURRENT:
        if (t == 0)
            memset(out, 0, (size_t)step * sizeof(float));
        else
            memcpy(out, nodes[n->recur_source].val + (int64_t)(t - 1) * step, (size_t)step * sizeof(float));
        return NC_OK;
    case NC_NODE_NEURON: {
        const nc_neuron *nr = &n->neuron;
        if (nr->model == NC_NEURON_IF) {
            /* the arithmetic of nc_if_run, one step with a carried membrane */
            int c = nc_node_channels(n);
            int64_t inner = numel / (c > 0 ? c : 1);
            for (int64_t k = 0; k < step; k++) {
                float th = if_theta(nr, c, inner, k % numel);
                float m = r->state[k] + x[k];
                int fire = nr->compare == NC_FIRE_GE ? m >= th : m > th;
                out[k] = fire ? th : 0.0f;
                r->state[k] = fire ? (nr->reset == NC_RESET_SUBTRACT ? m - th : 0.0f) : m;
            }
        } else if (nc_nm_is_nir_model(nr->model)) {
            nc_nm_params p = nc_nm_params_of(n);
            nc_nm_run(&p, 1, N, x, 0, out, 0, r->state);
        } else if (nr->model == NC_NEURON_CLIP) {
            nc_clip(step, nr->clip_min, nr->clip_max, x, out);
        } else { /* relu, qcfs: their ANN function in SNN mode, as the engine */
            nc_relu(step, x, out);
        }
        return NC_OK;
    }
    case NC_NODE_KIND_COUNT: break;
    }
    return ref_fail(err, n, NC_ERR_INTERNAL, "unknown node kind");
}

static int has_membrane(const nc_node *n)
{
    return n->kind == NC_NODE_NEURON &&
           (n->neuron.model == NC_NEURON_IF ||
            (nc_nm_is_nir_model(n->neuron.model) && n->neuron.model != NC_NEURON_THRESHOLD &&
             n->neuron.model != NC_NEURON_DELAY));
}

nc_status nc_nm_reference_run(const nc_net *net, const nc_tensor *input, const nc_nm_run_options *opts,
                              nc_tensor **out, nc_error *err)
{
    *out = NULL;
    if (!net || net->n_nodes < 2 || net->input != 0 || net->output != net->n_nodes - 1)
        return nc_fail(err, NC_ERR_ARGUMENT, "reference simulator: the net must start with its input and end with its output");
    if (!opts || opts->T < 1)
        return nc_fail(err, NC_ERR_ARGUMENT, "reference simulator: needs T >= 1 steps");
    int T = opts->T;
    const nc_node *in = &net->nodes[0];
    int seq = input && input->ndim == in->ndim + 2;
    int fits = input && (input->ndim == in->ndim + 1 || seq) && (!seq || input->shape[0] == T);
    for (int d = 0; fits && d < in->ndim; d++)
        fits = input->shape[d + 1 + seq] == in->shape[d];
    if (!fits || input->shape[seq] < 1) {
        char buf[96];
        return nc_fail(err, NC_ERR_SHAPE, "reference simulator: the input must be [N, %s or [T = %d, N, %s",
                       nc_shape_str(in->ndim, in->shape, buf, sizeof buf) + 1, T, buf + 1);
    }
    int64_t N = input->shape[seq];
    ref_node *nodes = calloc((size_t)net->n_nodes, sizeof *nodes);
    if (!nodes)
        return nc_fail(err, NC_ERR_MEMORY, "reference simulator: out of memory");
    nc_status st = NC_OK;
    for (int i = 0; i < net->n_nodes && st == NC_OK; i++) {
        const nc_node *n = &net->nodes[i];
        for (int k = 0; k < n->n_inputs && st == NC_OK; k++)
            if (n->inputs[k] < 0 || n->inputs[k] >= i)
                st = ref_fail(err, n, NC_ERR_FORMAT, "reads a node that does not come before it");
        if (st == NC_OK && n->kind == NC_NODE_RECURRENT &&
            (n->recur_source <= i || n->recur_source >= net->n_nodes ||
             nc_node_numel(&net->nodes[n->recur_source]) != nc_node_numel(n)))
            st = ref_fail(err, n, NC_ERR_FORMAT, "does not delay a later node of its size");
        if (st == NC_OK)
            st = ref_prepare(net, i, T, N, &nodes[i], err);
    }
    float *work = NULL;
    size_t work_floats = 0;
    for (int t = 0; t < T && st == NC_OK; t++)
        for (int i = 0; i < net->n_nodes && st == NC_OK; i++) {
            st = ref_step(net, i, t, T, N, input, opts, nodes, &work, &work_floats, err);
            if (st == NC_OK && opts->step) {
                int64_t numel = nc_node_numel(&net->nodes[i]);
                opts->step(opts->user, i, t, nodes[i].val + (int64_t)t * N * numel,
                           has_membrane(&net->nodes[i]) ? nodes[i].state : NULL, N, numel);
            }
        }
    if (st == NC_OK) {
        int64_t f = nc_node_numel(&net->nodes[net->output]);
        int64_t shape[3] = {T, N, f};
        nc_tensor *o = nc_tensor_new(3, shape);
        if (!o)
            st = nc_fail(err, NC_ERR_MEMORY, "reference simulator: out of memory for the output");
        else {
            memcpy(o->data, nodes[net->output].val, (size_t)(T * N * f) * sizeof(float));
            *out = o;
        }
    }
    free(work);
    for (int i = 0; i < net->n_nodes; i++) {
        free(nodes[i].val);
        free(nodes[i].state);
    }
    free(nodes);
    return st;
}
