/* nc_cli_common.c — what the sub-commands share: loading models and data,
 * creating engines, reporting errors. */
#include "nc_cli.h"

#include <stdio.h>
#include <string.h>

#include "nc_engine_registry.h"
#include "nc_nir.h"
#include "nc_runner.h"
#include "nc_onnx.h"

int nc_cli_error(const nc_error *err)
{
    if (err->code == NC_ERR_CANCELLED && nc_cli_interrupted()) { /* Ctrl-C: see nc_cli_util.h */
        fprintf(stderr, "neurocuda: interrupted (Ctrl-C): %s; no output file was written (existing files are "
                        "left as they were)\n", err->message);
        return 130;
    }
    fprintf(stderr, "neurocuda: %s\n", err->message);
    return 1;
}

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static nc_nir_load_options nir_options;

void nc_cli_set_nir_options(const nc_nir_load_options *opts) { nir_options = *opts; }

/* A NIR graph, with how it was read and any warnings on stderr (stdout
 * stays for results and the JSON line). */
static nc_net *load_nir(const char *path)
{
    nc_error err = {0};
    nc_net *net = NULL;
    nc_nir_notes notes = {0};
    nc_status st = nc_nir_load(path, &nir_options, &net, &notes, &err);
    char text[8192];
    if (st == NC_OK && nc_nir_notes_count(&notes, NC_NIR_NOTE_WARNING) > 0)
        fprintf(stderr, "Warnings reading %s:\n%s", path,
                nc_nir_notes_format(&notes, NC_NIR_NOTE_WARNING, text, sizeof text));
    if (st == NC_OK && nc_nir_notes_count(&notes, NC_NIR_NOTE_INFO) > 0)
        fprintf(stderr, "How %s was read:\n%s", path, nc_nir_notes_format(&notes, NC_NIR_NOTE_INFO, text, sizeof text));
    nc_nir_notes_clear(&notes);
    if (st != NC_OK)
        nc_cli_error(&err);
    return st == NC_OK ? net : NULL;
}

nc_net *nc_cli_load_model(const char *path)
{
    nc_error err = {0};
    nc_net *net = NULL;
    nc_status st;
    if (has_suffix(path, ".ncsnn"))
        return nc_cli_load_model_pp(path, NULL, NULL);
    if (has_suffix(path, ".nir") || nc_nir_probe(path))
        return load_nir(path);
    if (has_suffix(path, ".onnx"))
        st = nc_onnx_load(path, NULL, &net, &err);
    else
        st = nc_fail(&err, NC_ERR_UNSUPPORTED,
                     "%s: unknown model format; give an ONNX model (.onnx), a converted project (.ncsnn) or a NIR "
                     "graph (.nir)",
                     path);
    if (st != NC_OK) {
        nc_cli_error(&err);
        return NULL;
    }
    return net;
}

void nc_cli_data_init(nc_cli_data *d)
{
    memset(d, 0, sizeof *d);
    d->spec = "fashion-mnist";
}

static int parse_list(const char *option, const char *arg, float *values, int *count)
{
    int n = nc_parse_float_list(arg, values, NC_MAX_CHANNELS);
    if (n < 1) {
        fprintf(stderr, "neurocuda: %s needs numbers separated by commas (at most %d), got '%s'\n", option,
                NC_MAX_CHANNELS, arg);
        return -1;
    }
    *count = n;
    return 1;
}

int nc_cli_data_option(nc_cli_data *d, int opt, const char *arg)
{
    double v;
    switch (opt) {
    case NC_OPT_DATA: d->spec = arg; return 1;
    case NC_OPT_MEAN: return parse_list("--mean", arg, d->pp.mean, &d->pp.n_mean);
    case NC_OPT_STD:
        if (parse_list("--std", arg, d->pp.std, &d->pp.n_std) < 0)
            return -1;
        for (int i = 0; i < d->pp.n_std; i++)
            if (!(d->pp.std[i] > 0)) {
                fprintf(stderr, "neurocuda: --std values must be positive, got '%s'\n", arg);
                return -1;
            }
        return 1;
    case NC_OPT_SCALE:
        if (nc_cli_parse_double("--scale", arg, &v) != 0 || !(v > 0))
            return -1;
        d->pp.scale = (float)v;
        return 1;
    case NC_OPT_LIMIT:
        d->limit = nc_cli_parse_long("--limit", arg, 1, 1L << 40);
        return d->limit < 0 ? -1 : 1;
    case NC_OPT_ENGINE_OPT: {
        nc_error err = {0};
        return nc_engine_settings_add(&nc_cli_engine_settings, arg, &err) == NC_OK ? 1 : (nc_cli_error(&err), -1);
    }
    case NC_OPT_GPUS: { /* the gpu engine's option "gpus" (sim/nc_ranks.h checks it against the machine) */
        char setting[NC_ENGINE_OPTION_VALUE_MAX + 8];
        nc_error err = {0};
        snprintf(setting, sizeof setting, "gpus=%s", arg);
        return nc_engine_settings_add(&nc_cli_engine_settings, setting, &err) == NC_OK ? 1 : (nc_cli_error(&err), -1);
    }
    default: return 0;
    }
}

nc_dataset *nc_cli_open_data(const nc_cli_data *d, nc_split split)
{
    nc_error err = {0};
    nc_dataset *ds = NULL;
    if (nc_dataset_open(d->spec, split, &d->pp, d->limit, &ds, &err) != NC_OK) {
        nc_cli_error(&err);
        return NULL;
    }
    return ds;
}

nc_engine_settings nc_cli_engine_settings;

nc_runner_desc nc_cli_runner_desc(const nc_net *net, const char *model, const nc_cli_data *data, const char *engine,
                                  const nc_pipeline_options *opts)
{
    nc_runner_desc d = nc_runner_desc_default();
    d.source = net;
    d.source_path = model;
    d.dataset = data->spec;
    d.pp = data->pp;
    d.test_images = data->limit;
    d.engine = engine;
    d.engine_settings = &nc_cli_engine_settings;
    d.pipeline = *opts;
    return d;
}

nc_status nc_cli_run_job(const nc_runner_desc *d, const nc_runner_observer *obs, nc_runner **r, nc_error *err)
{
    nc_cli_install_sigint();
    nc_status st = nc_runner_new(d, r, err);
    return st == NC_OK ? nc_runner_run(*r, obs, err) : st;
}

nc_engine *nc_cli_engine(const char *name, const nc_net *net, int threads)
{
    nc_error err = {0};
    nc_engine *e = NULL;
    if (nc_engine_new_with(name, &nc_cli_engine_settings, &e, &err) != NC_OK) {
        nc_cli_error(&err);
        return NULL;
    }
    if (threads > 0) /* else --engine-opt threads=N (or all cores) holds */
        e->threads = threads;
    if (nc_engine_check(e, net, &err) != NC_OK || nc_engine_load(e, net, &err) != NC_OK) {
        nc_cli_error(&err);
        nc_engine_free(e);
        return NULL;
    }
    return e;
}

/* ---- models and conversion options ------------------------------------- */

#include "nc_pipeline.h"
#include "nc_project.h"

nc_net *nc_cli_load_model_pp(const char *path, nc_preprocess *pp, int *has_pp)
{
    if (has_pp)
        *has_pp = 0;
    if (!has_suffix(path, ".ncsnn"))
        return nc_cli_load_model(path);
    nc_error err = {0};
    nc_project *project = NULL;
    if (nc_project_load(path, &project, &err) != NC_OK) {
        nc_cli_error(&err);
        return NULL;
    }
    nc_net *net = project->net;
    project->net = NULL; /* the caller owns the net from here */
    if (pp && project->has_preprocess) {
        *pp = project->preprocess;
        if (has_pp)
            *has_pp = 1;
    }
    nc_project_free(project);
    return net;
}

int nc_cli_has_nir_models(const nc_net *net)
{
    for (int i = 0; i < net->n_nodes; i++)
        if (net->nodes[i].kind == NC_NODE_NEURON && net->nodes[i].neuron.model > NC_NEURON_IF)
            return 1;
    return 0;
}

int nc_cli_is_snn(const nc_net *net)
{
    for (int i = 0; i < net->n_nodes; i++)
        if (net->nodes[i].kind == NC_NODE_NEURON && net->nodes[i].neuron.model == NC_NEURON_IF)
            return 1;
    return nc_cli_has_nir_models(net);
}

nc_net *nc_cli_load_snn(const char *path) { return nc_cli_load_snn_pp(path, NULL, NULL); }

nc_net *nc_cli_load_snn_pp(const char *path, nc_preprocess *pp, int *has_pp)
{
    nc_net *net = nc_cli_load_model_pp(path, pp, has_pp);
    if (net && !nc_cli_is_snn(net)) {
        fprintf(stderr, "neurocuda: %s holds no spiking neurons; convert it first: neurocuda convert %s -o "
                        "model.ncsnn\n", path, path);
        nc_net_free(net);
        net = NULL;
    }
    return net;
}

const char nc_cli_convert_help[] =
    "  --threshold M    max | p99 | p99.9 (default) | p99.99 | mmse: how λ is chosen from the\n"
    "                   activations of each ReLU layer (percentiles over non-zero activations)\n"
    "  --per-channel    one threshold per channel instead of one per layer\n"
    "  --L N            QCFS quantisation steps (default 8)\n"
    "  -T N             the timesteps mmse tunes the threshold for (default L)\n"
    "  --maxpool S      avg | pre-spike (default, exact) | gated: how MaxPool runs on spikes\n"
    "  --calib-images N training images used for calibration (default 2000)\n"
    "  --engine-opt K=V set an option of the engine (repeatable; `neurocuda engines` lists them)\n"
    "  --gpus N|all     gpu engine: spread the measurements and the fine-tuning over N GPUs of this\n"
    "                   machine (the engine's option gpus; several GPUs need NCCL)\n"
    "  --v0 F           initial membrane potential as a fraction of θ (default 0.5)\n"
    "  --reset R        subtract (default) | zero\n"
    "  --fire C         ge (v ≥ θ, default) | gt (v > θ)\n";

int nc_cli_convert_option(nc_pipeline_options *o, int opt, const char *arg)
{
    static const char *const resets[] = {"subtract", "zero"}, *const fires[] = {"ge", "gt"};
    long v;
    double d;
    int k;
    switch (opt) {
    case NC_OPT_THRESHOLD:
        return nc_cli_check_choice(nc_calib_method_parse(arg, &o->method) == 0, "--threshold",
                                   "max, p99, p99.9, p99.99 or mmse", arg);
    case NC_OPT_PER_CHANNEL: o->per_channel = 1; return 1;
    case NC_OPT_L:
        if ((v = nc_cli_parse_long("--L", arg, 1, 4096)) < 0)
            return -1;
        o->levels = (int)v;
        return 1;
    case 'T':
        if ((v = nc_cli_parse_long("-T", arg, 1, 100000)) < 0)
            return -1;
        o->target_T = (int)v;
        return 1;
    case NC_OPT_MAXPOOL:
        return nc_cli_check_choice(nc_maxpool_strategy_parse(arg, &o->maxpool) == 0, "--maxpool",
                                   "avg, pre-spike or gated", arg);
    case NC_OPT_CALIB_IMAGES:
        if ((v = nc_cli_parse_long("--calib-images", arg, 1, 1L << 30)) < 0)
            return -1;
        o->calib_images = v;
        return 1;
    case NC_OPT_V0:
        if (nc_cli_parse_double("--v0", arg, &d) != 0 || d < 0 || d > 1) {
            fprintf(stderr, "neurocuda: --v0 is a fraction of the threshold from 0 to 1\n");
            return -1;
        }
        o->snn.v0_fraction = (float)d;
        return 1;
    case NC_OPT_RESET:
        if ((k = nc_cli_parse_choice("--reset", arg, resets, 2)) < 0)
            return -1;
        o->snn.reset = k ? NC_RESET_ZERO : NC_RESET_SUBTRACT;
        return 1;
    case NC_OPT_FIRE:
        if ((k = nc_cli_parse_choice("--fire", arg, fires, 2)) < 0)
            return -1;
        o->snn.compare = k ? NC_FIRE_GT : NC_FIRE_GE;
        return 1;
    default: return 0;
    }
}
