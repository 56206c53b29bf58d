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

nc_tensor *nc_engine_output_tensor(const char *engine, int snn, int T, int64_t N, int64_t f, nc_error *err)
{
    int64_t shape[3] = {T, N, f};
    nc_tensor *t = snn ? nc_tensor_new(3, shape) : nc_tensor_new2(N, f);
    if (!t)
        nc_fail(err, NC_ERR_MEMORY, "%s engine: out of memory for the output (%lld values)", engine,
                (long long)((snn ? T : 1) * N * f));
    return t;
}
