/* nc_api_model.c — models of libneurocuda (neurocuda.h): open, describe,
 * save, export, bind to an engine, run one forward pass. */
#include "nc_api_private.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nc_convert.h"
#include "nc_engine_loihi.h"
#include "nc_loihi.h"
#include "nc_nir.h"
#include "nc_onnx.h"

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

/* The net of a file, by its extension and contents (as the CLI reads it). */
static nc_status load_file(const char *path, nc_net **net, nc_project **project, nc_error *err)
{
    if (has_suffix(path, ".ncsnn")) {
        nc_status st = nc_project_load(path, project, err);
        if (st == NC_OK)
            *net = (*project)->net; /* the project owns it */
        return st;
    }
    if (has_suffix(path, ".nir") || nc_nir_probe(path)) {
        nc_nir_notes notes = {0};
        nc_status st = nc_nir_load(path, NULL, net, &notes, err);
        nc_nir_notes_clear(&notes);
        return st;
    }
    if (has_suffix(path, ".onnx"))
        return nc_onnx_load(path, NULL, net, err);
    return nc_fail(err, NC_ERR_UNSUPPORTED,
                   "%s: unknown model format; give an ONNX model (.onnx), a converted project (.ncsnn) or a NIR "
                   "graph (.nir)", path);
}

int neurocuda_model_open(const char *path, neurocuda_model **out, neurocuda_error *err)
{
    *out = NULL;
    if (!path)
        return nc_api_fail(err, NC_ERR_ARGUMENT, "neurocuda_model_open: no path");
    neurocuda_model *m = calloc(1, sizeof *m);
    if (!m)
        return nc_api_fail(err, NC_ERR_MEMORY, "out of memory for a model");
    nc_error e = {0};
    nc_status st = load_file(path, &m->net, &m->project, &e);
    if (st != NC_OK) {
        neurocuda_model_free(m);
        return nc_api_error(err, &e, st);
    }
    snprintf(m->path, sizeof m->path, "%s", path);
    *out = m;
    return NEUROCUDA_OK;
}

void neurocuda_model_free(neurocuda_model *m)
{
    if (!m)
        return;
    nc_engine_free(m->engine);
    if (m->project)
        nc_project_free(m->project); /* and its net */
    else
        nc_net_free(m->net);
    free(m);
}

int neurocuda_model_is_spiking(const neurocuda_model *m) { return m && nc_runner_is_spiking(m->net); }

int neurocuda_model_input_shape(const neurocuda_model *m, int64_t dims[4])
{
    const nc_node *in = &m->net->nodes[m->net->input];
    for (int i = 0; i < in->ndim && i < 4; i++)
        dims[i] = in->shape[i];
    return in->ndim;
}

int64_t neurocuda_model_classes(const neurocuda_model *m)
{
    return nc_node_numel(&m->net->nodes[m->net->output]);
}


size_t neurocuda_model_report(const neurocuda_model *m, char *buf, size_t size)
{
    size_t used = 0;
    if (buf && size)
        buf[0] = 0;
    const nc_net *net = m->net;
    char shape[64];
    nc_api_append(buf, size, &used, "%s (%s): %d nodes, %lld parameters, %lld MACs per sample\n",
           m->path[0] ? m->path : "converted network", nc_runner_is_spiking(net) ? "spiking" : "ANN", net->n_nodes,
           (long long)nc_net_params(net), (long long)nc_net_macs(net));
    for (int i = 0; i < net->n_nodes; i++) {
        const nc_node *n = &net->nodes[i];
        nc_api_append(buf, size, &used, "  %-24s %-14s %s%s%s\n", n->name, nc_node_kind_name(n->kind),
               nc_shape_str(n->ndim, n->shape, shape, sizeof shape), n->kind == NC_NODE_NEURON ? "  " : "",
               n->kind == NC_NODE_NEURON ? nc_neuron_model_name(n->neuron.model) : "");
    }
    if (nc_runner_is_spiking(net)) {
        char *table = malloc(16384);
        if (table)
            nc_api_append(buf, size, &used, "%s", nc_convert_summary_text(net, NULL, table, 16384));
        free(table);
    }
    for (int i = 0; m->project && i < m->project->n_metrics; i++)
        nc_api_append(buf, size, &used, "  %s = %g\n", m->project->metrics[i].key, m->project->metrics[i].value);
    return used;
}

int neurocuda_model_save(const neurocuda_model *m, const char *path, neurocuda_error *err)
{
    nc_error e = {0};
    if (!m->project)
        return nc_api_fail(err, NC_ERR_ARGUMENT,
                           "%s is not a converted network: convert it first (a project file holds a conversion)",
                           m->path[0] ? m->path : "this model");
    nc_status st = nc_project_save(m->project, path, &e);
    return nc_api_error(err, &e, st);
}

static nc_status need_spiking(const neurocuda_model *m, nc_error *err)
{
    if (nc_runner_is_spiking(m->net))
        return NC_OK;
    return nc_fail(err, NC_ERR_ARGUMENT, "%s holds no spiking neurons; convert it first",
                   m->path[0] ? m->path : "the model");
}

int neurocuda_model_export_nir(const neurocuda_model *m, const char *path, int approx, neurocuda_error *err)
{
    nc_error e = {0};
    nc_nir_export_options opts = {.allow_approx = approx, .source = m->path[0] ? m->path : NULL};
    nc_nir_notes notes = {0};
    nc_status st = need_spiking(m, &e);
    if (st == NC_OK)
        st = nc_nir_export(m->net, path, &opts, &notes, &e);
    nc_nir_notes_clear(&notes);
    return nc_api_error(err, &e, st);
}

int neurocuda_model_export_lava(const neurocuda_model *m, const char *path, neurocuda_error *err)
{
    nc_error e = {0};
    nc_loihi_options lo = nc_loihi_options_default();
    nc_loihi_net *q = NULL;
    nc_loihi_notes notes = {0};
    nc_status st = need_spiking(m, &e);
    if (st == NC_OK)
        st = nc_loihi_quantise(m->net, &lo.quant, &q, &e);
    if (st == NC_OK) {
        nc_loihi_netx_options xo = {lo.reset, 32};
        st = nc_loihi_export_netx(q, path, &xo, &notes, &e);
    }
    nc_loihi_notes_clear(&notes);
    nc_loihi_net_free(q);
    return nc_api_error(err, &e, st);
}

int neurocuda_model_compile(neurocuda_model *m, const char *engine, const neurocuda_options *o,
                            neurocuda_error *err)
{
    nc_error e = {0};
    const nc_engine_info *info = engine ? nc_engine_find(engine) : NULL;
    if (!info)
        return nc_api_fail(err, NC_ERR_ARGUMENT, "unknown engine '%s'; the engines are cpu, gpu and loihi",
                           engine ? engine : "(none)");
    char why[512] = "";
    if (!info->available(why, sizeof why))
        return nc_api_fail(err, NC_ERR_DEVICE, "the %s engine cannot run here: %s", engine, why);
    nc_engine *e2 = NULL;
    nc_status st = nc_engine_new_with(engine, o ? &o->settings : NULL, &e2, &e);
    if (st == NC_OK) {
        e2->threads = o ? o->threads : 0;
        st = nc_engine_check(e2, m->net, &e);
    }
    if (st == NC_OK)
        st = nc_engine_load(e2, m->net, &e);
    if (st != NC_OK) {
        nc_engine_free(e2);
        return nc_api_error(err, &e, st);
    }
    nc_engine_free(m->engine);
    m->engine = e2;
    snprintf(m->engine_name, sizeof m->engine_name, "%s", engine);
    return NEUROCUDA_OK;
}

const char *neurocuda_model_engine(const neurocuda_model *m) { return m->engine_name[0] ? m->engine_name : "cpu"; }

nc_status nc_api_model_engine(neurocuda_model *m, nc_error *err)
{
    if (!m->engine) {
        nc_status st = nc_engine_new("cpu", &m->engine, err);
        if (st != NC_OK)
            return st;
        snprintf(m->engine_name, sizeof m->engine_name, "cpu");
    }
    return nc_engine_load(m->engine, m->net, err);
}

/* The input tensor [n, shape of the input node], values copied in. */
static nc_status make_input(const nc_net *net, const float *input, int64_t n, nc_tensor **out, nc_error *err)
{
    const nc_node *in = &net->nodes[net->input];
    int64_t shape[NC_MAX_DIMS] = {n};
    for (int i = 0; i < in->ndim; i++)
        shape[i + 1] = in->shape[i];
    nc_tensor *t = nc_tensor_new(in->ndim + 1, shape);
    if (!t)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for an input batch of %lld samples", (long long)n);
    memcpy(t->data, input, (size_t)nc_tensor_numel(t) * sizeof(float));
    for (int64_t i = 0; i < nc_tensor_numel(t); i++)
        if (!isfinite(t->data[i])) {
            nc_tensor_free(t);
            return nc_fail(err, NC_ERR_ARGUMENT, "the input holds NaN or infinity (sample %lld)",
                           (long long)(i / nc_node_numel(in)));
        }
    *out = t;
    return NC_OK;
}

int neurocuda_model_forward(neurocuda_model *m, const float *input, int64_t n, int T, float *out,
                            neurocuda_error *err)
{
    nc_error e = {0};
    int spiking = nc_runner_is_spiking(m->net);
    if (n < 1 || (spiking && T < 1))
        return nc_api_fail(err, NC_ERR_ARGUMENT, "a forward pass needs at least 1 sample%s", spiking ? " and T ≥ 1" : "");
    nc_tensor *x = NULL, *y = NULL;
    nc_status st = make_input(m->net, input, n, &x, &e);
    if (st == NC_OK)
        st = nc_api_model_engine(m, &e);
    nc_run_options ro = {.mode = spiking ? NC_MODE_SNN : NC_MODE_ANN, .T = spiking ? T : 1,
                         .encoding = NC_ENCODING_DIRECT, .seed = 1};
    if (st == NC_OK)
        st = nc_engine_forward(m->engine, x, &ro, &y, &e);
    if (st == NC_OK)
        memcpy(out, y->data, (size_t)nc_tensor_numel(y) * sizeof(float));
    nc_tensor_free(x);
    nc_tensor_free(y);
    return nc_api_error(err, &e, st);
}
