/* nc_engine.c — the engine registry and the checked wrappers around the
 * nc_engine_ops vtable (see nc_engine.h). */
#include "nc_engine.h"
#include "nc_engine_loihi.h"

#include "nc_config.h"
#if NC_HAVE_CUDA
#include "../gpu/nc_gpu.h"
#endif

#include <stdlib.h>
#include <string.h>

/* Engines compiled into this build. */
#if NC_HAVE_CUDA
static const char *const engine_names[] = {"cpu", "gpu", "loihi", NULL};
#define NC_ENGINE_LIST "cpu, gpu, loihi"
#else
static const char *const engine_names[] = {"cpu", "loihi", NULL};
#define NC_ENGINE_LIST "cpu, loihi"
#endif

const char *const *nc_engine_names(void) { return engine_names; }

nc_status nc_engine_new(const char *name, nc_engine **out, nc_error *err)
{
    *out = NULL;
    if (!name)
        return nc_fail(err, NC_ERR_ARGUMENT, "no engine name given (engines in this build: " NC_ENGINE_LIST ")");
    if (strcmp(name, "cpu") == 0) {
        *out = nc_engine_cpu_new();
        return *out ? NC_OK : nc_fail(err, NC_ERR_MEMORY, "out of memory creating the cpu engine");
    }
    if (strcmp(name, "gpu") == 0) {
#if NC_HAVE_CUDA
        /* fails with nc_gpu_query's reason (no driver, no device) when unusable */
        return nc_engine_gpu_new(out, err);
#else
        return nc_fail(err, NC_ERR_UNSUPPORTED,
                       "the gpu engine is not compiled in: this build has no CUDA (rebuild with "
                       "-Dcuda=enabled where nvcc is installed); use --engine cpu");
#endif
    }
    if (strcmp(name, "loihi") == 0) { /* sim/engine_loihi.c: integer IF neurons, CPU */
        *out = nc_engine_loihi_new();
        return *out ? NC_OK : nc_fail(err, NC_ERR_MEMORY, "out of memory creating the loihi engine");
    }
    return nc_fail(err, NC_ERR_ARGUMENT, "unknown engine '%s' (engines in this build: " NC_ENGINE_LIST ")", name);
}

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
