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
