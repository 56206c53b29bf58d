/* nc_engine.c — the checked wrappers around the nc_engine_ops vtable (see
 * nc_engine.h).  Engines call these; the table of engines is
 * nc_engine_registry.c, which engines do not call. */
#include "nc_engine.h"

#include <stdlib.h>
#include <string.h>

void nc_engine_free(nc_engine *e)
{
    if (!e)
        return;
    if (e->ops && e->ops->destroy)
        e->ops->destroy(e);
    free(e);
}

nc_status nc_engine_check(nc_engine *e, const nc_net *net, nc_error *err)
{
    if (!e || !net)
        return nc_fail(err, NC_ERR_ARGUMENT, "nc_engine_check: no engine or no network");
    for (int i = 0; i < net->n_nodes; i++) {
        char why[512] = "";
        if (e->ops->supports(e, net, i, why, sizeof why))
            continue;
        const nc_node *n = &net->nodes[i];
        return nc_fail(err, NC_ERR_UNSUPPORTED, "the %s engine cannot run node '%s' (%s%s%s): %s",
                       e->ops->name, n->name, nc_node_kind_name(n->kind),
                       n->kind == NC_NODE_NEURON ? " " : "",
                       n->kind == NC_NODE_NEURON ? nc_neuron_model_name(n->neuron.model) : "",
                       why[0] ? why : "not supported");
    }
    return NC_OK;
}

nc_status nc_engine_load(nc_engine *e, const nc_net *net, nc_error *err)
{
    if (!e || !net)
        return nc_fail(err, NC_ERR_ARGUMENT, "nc_engine_load: no engine or no network");
    nc_status s = nc_engine_check(e, net, err);
    if (s == NC_OK)
        s = e->ops->load(e, net, err);
    if (s == NC_OK)
        e->net = net;
    return s;
}

nc_status nc_engine_forward(nc_engine *e, const nc_tensor *input, const nc_run_options *opts,
                            nc_tensor **out, nc_error *err)
{
    if (!e || !input || !out)
        return nc_fail(err, NC_ERR_ARGUMENT, "nc_engine_forward: no engine, input or output");
    *out = NULL;
    if (!e->net)
        return nc_fail(err, NC_ERR_ARGUMENT, "the %s engine has no network loaded", e->ops->name);
    nc_run_options defaults = {.mode = NC_MODE_ANN, .T = 1};
    if (!opts)
        opts = &defaults;
    if (opts->mode == NC_MODE_SNN && !(e->ops->caps & NC_CAP_SNN))
        return nc_fail(err, NC_ERR_UNSUPPORTED, "the %s engine cannot run SNN mode", e->ops->name);
    return e->ops->forward(e, input, opts, out, err);
}

nc_status nc_engine_check_options(const char *engine, const nc_run_options *o, nc_error *err)
{
    if (o->mode != NC_MODE_ANN && o->mode != NC_MODE_QCFS && o->mode != NC_MODE_SNN)
        return nc_fail(err, NC_ERR_ARGUMENT, "%s engine: unknown mode %d", engine, (int)o->mode);
    if (o->mode == NC_MODE_SNN && o->T < 1)
        return nc_fail(err, NC_ERR_ARGUMENT, "%s engine: SNN mode needs T >= 1 steps, got %d", engine, o->T);
    if (o->mode == NC_MODE_SNN && o->encoding != NC_ENCODING_DIRECT && o->encoding != NC_ENCODING_POISSON)
        return nc_fail(err, NC_ERR_ARGUMENT, "%s engine: unknown input encoding %d", engine, (int)o->encoding);
    return NC_OK;
}

nc_status nc_engine_check_input(const char *engine, const nc_net *net, const nc_tensor *input, int snn, int T,
                                int *seq, nc_error *err)
{
    const nc_node *in = &net->nodes[net->input];
    *seq = snn && input && input->ndim == in->ndim + 2 && input->shape[0] == T;
    int fits = input && input->ndim == in->ndim + 1 + *seq && input->shape[*seq] >= 1;
    for (int d = 0; fits && d < in->ndim; d++)
        fits = input->shape[d + 1 + *seq] == in->shape[d];
    if (fits)
        return NC_OK;
    char a[128], b[128] = "no tensor";
    nc_shape_str(in->ndim, in->shape, a, sizeof a);
    if (input)
        nc_shape_str(input->ndim, input->shape, b, sizeof b);
    return nc_fail(err, NC_ERR_SHAPE, "%s engine: input '%s' expects a batch of shape [N, %s%s, got %s", engine,
                   in->name, a + 1 /* drop '[' */, snn ? " (or a sequence [T, N, ...])" : "", b);
}

const char *nc_engine_window_misfit(const nc_node *n, const nc_node *in, int oh, int ow)
{
    int64_t cout = n->kind == NC_NODE_CONV2D ? (n->weight ? n->weight->shape[0] : -1) : in->shape[0];
    if (n->ndim != 3 || n->shape[0] != cout || n->shape[1] != oh || n->shape[2] != ow)
        return "stored output shape differs from the computed one; run shape inference";
    if (n->kind == NC_NODE_CONV2D) {
        const nc_tensor *w = n->weight;
        if (n->groups < 1 || w->ndim != 4 || in->shape[0] % n->groups || w->shape[0] % n->groups ||
            w->shape[1] * n->groups != in->shape[0] || w->shape[2] != n->kernel[0] ||
            w->shape[3] != n->kernel[1] || (n->bias && nc_tensor_numel(n->bias) != w->shape[0]))
            return "weight shape does not fit the input and groups";
    }
    return NULL;
}

nc_status nc_engine_make_output(const nc_output_value *v, nc_output_copy_fn copy, void *user, nc_tensor **out,
                                nc_error *err)
{
    int64_t shape[3] = {v->T, v->N, v->f}, step = v->N * v->f;
    int steps = v->snn ? v->T : 1;
    nc_tensor *t = v->snn ? nc_tensor_new(3, shape) : nc_tensor_new2(v->N, v->f);
    if (!t)
        return nc_fail(err, NC_ERR_MEMORY, "%s engine: out of memory for the output (%lld values)", v->engine,
                       (long long)(steps * step));
    nc_status s = copy(user, t->data, (v->constant ? 1 : steps) * step);
    if (s != NC_OK) {
        nc_tensor_free(t);
        return s;
    }
    for (int k = 1; v->constant && k < steps; k++)
        memcpy(t->data + k * step, t->data, (size_t)step * sizeof(float));
    *out = t;
    return NC_OK;
}
