/* nc_cmd_run.c — `neurocuda run SNN`: describes the simulation of a
 * converted network over T steps to the pipeline runner (nc_runner.h) and
 * reports accuracy by step, firing rates and errors per layer. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "nc_cli.h"
#include "nc_cli_loihi.h"
#include "nc_cli_report.h"
#include "nc_nir.h"
#include "nc_runner.h"

static void usage(FILE *out)
{
    fputs("Usage: neurocuda run SNN [--data DATASET] [-T N] [--engine cpu] [--gpus N] [--encoding direct|poisson]\n"
          "                     [--seed N] [--limit N] [--batch B] [--record FILE.h5] [--plots DIR] [--json]\n"
          "\n"
          "Simulates the spiking network in SNN (a project written by `neurocuda convert`, or a NIR graph)\n"
          "for T steps on the test images, next to the ANN and the QCFS-ANN on the same images, and prints\n"
          "the accuracy\n"
          "after every step, the firing rates, the calibration error per layer (clipping, quantisation,\n"
          "unevenness) and the synaptic operations against the ANN's MACs.\n"
          "\n"
          "  --data DATASET   test split of this dataset (default fashion-mnist); the preprocessing saved\n"
          "                   in the project is used unless --mean/--std/--scale are given\n"
          "  -T N             timesteps (default 32)\n"
          "  --engine NAME    cpu (default) | gpu | loihi\n"
          "  --gpus N|all     gpu engine: deal the test images over N GPUs and merge the results (the\n"
          "                   same numbers as one GPU; several GPUs need NCCL)\n"
          "  --encoding E     direct (default: the analog image every step) | poisson (rate-coded spikes)\n"
          "  --seed N         Poisson seed (default 1)\n"
          "  --limit N        only the first N test images\n"
          "  --batch B        images per batch (default 32)\n"
          "  --record F.h5    save the recording (spike events, rates, errors, traces) as HDF5\n"
          "  --plots DIR      write the charts as PNG files into DIR\n"
          "  --dt S           NIR: seconds per step for continuous-time neurons (default 0.001,\n"
          "                   forward Euler as the NIR reference simulators)\n"
          "  --json           one JSON object as the last line: accuracy_by_step (index t-1),\n"
          "                   ann_accuracy, qcfs_accuracy, firing_rate_by_layer, calibration_error_by_layer\n",
          out);
    fputs(nc_cli_loihi_help, out);
}

typedef struct run_args {
    nc_cli_data data;
    nc_simulate_options sim;
    const char *engine, *record, *plots, *model;
    int json, data_given;
    nc_cli_loihi loihi;            /* --loihi-* */
    nc_engine_settings settings;   /* a loihi engine's: --engine-opt, then --loihi-* */
} run_args;

static int parse_run_option(run_args *a, int opt, const char *arg)
{
    long v;
    switch (opt) {
    case NC_OPT_ENGINE: a->engine = arg; return 1;
    case 'T':
        if ((v = nc_cli_parse_long("-T", arg, 1, 100000)) < 0)
            return -1;
        a->sim.T = (int)v;
        return 1;
    case NC_OPT_ENCODING: {
        static const char *const encodings[] = {"direct", "poisson"};
        int k = nc_cli_parse_choice("--encoding", arg, encodings, 2);
        if (k >= 0)
            a->sim.encoding = k ? NC_ENCODING_POISSON : NC_ENCODING_DIRECT;
        return k < 0 ? -1 : 1;
    }
    case NC_OPT_SEED:
        if ((v = nc_cli_parse_long("--seed", arg, 0, 1L << 62)) < 0)
            return -1;
        a->sim.seed = (uint64_t)v;
        return 1;
    case NC_OPT_BATCH:
        if ((v = nc_cli_parse_long("--batch", arg, 1, 1 << 16)) < 0)
            return -1;
        a->sim.batch_size = (int)v;
        return 1;
    case NC_OPT_RECORD: a->record = arg; return 1;
    case NC_OPT_DT: {
        nc_nir_load_options nir = {0};
        if (nc_cli_parse_double("--dt", arg, &nir.dt) != 0 || !(nir.dt > 0))
            return -1;
        nc_cli_set_nir_options(&nir);
        return 1;
    }
    case NC_OPT_PLOTS: a->plots = arg; return 1;
    case NC_OPT_JSON: a->json = 1; return 1;
    default: return 0;
    }
}

/* The defaults, before the command line. */
static void args_init(run_args *a)
{
    *a = (run_args){.engine = "cpu"};
    nc_cli_data_init(&a->data);
    nc_cli_loihi_init(&a->loihi);
    a->sim.T = 32;
    a->sim.seed = 1;
}

static int parse(int argc, char **argv, run_args *a)
{
    static const struct option options[] = {
        NC_CLI_DATA_LONG_OPTIONS,                           {"engine", required_argument, NULL, NC_OPT_ENGINE},
        {"encoding", required_argument, NULL, NC_OPT_ENCODING}, {"seed", required_argument, NULL, NC_OPT_SEED},
        {"batch", required_argument, NULL, NC_OPT_BATCH},   {"record", required_argument, NULL, NC_OPT_RECORD},
        {"plots", required_argument, NULL, NC_OPT_PLOTS},   {"json", no_argument, NULL, NC_OPT_JSON},
        {"dt", required_argument, NULL, NC_OPT_DT},
        NC_CLI_LOIHI_LONG_OPTIONS,
        {"help", no_argument, NULL, 'h'},                   {0}};
    args_init(a);
    int opt;
    while ((opt = getopt_long(argc, argv, "hT:", options, NULL)) != -1) {
        if (opt == NC_OPT_MEAN || opt == NC_OPT_STD || opt == NC_OPT_SCALE)
            a->data_given = 1;
        int used = nc_cli_data_option(&a->data, opt, optarg);
        if (used == 0)
            used = parse_run_option(a, opt, optarg);
        if (used == 0)
            used = nc_cli_loihi_option(&a->loihi, opt, optarg);
        if (used < 0)
            return 2;
        if (used)
            continue;
        return nc_cli_usage_exit(opt, usage);
    }
    a->model = nc_cli_operand(argc, argv, 1, "run: give exactly one SNN file (.ncsnn or .nir)", usage);
    return a->model ? -1 : 2;
}

static void print_json(const run_args *a, const char *engine, const nc_record *rec)
{
    nc_json j;
    nc_json_begin(&j, stdout);
    nc_json_string(&j, "model", a->model);
    nc_json_string(&j, "engine", engine);
    nc_json_string(&j, "encoding", a->sim.encoding == NC_ENCODING_POISSON ? "poisson" : "direct");
    nc_cli_json_record(&j, rec);
    if (a->record)
        nc_json_string(&j, "record", a->record);
    nc_json_end(&j);
}

/* The job: the net simulated as it is, its record kept (nc_runner.h plans
 * open → measure).  The engine gets --engine-opt and, for loihi, the
 * --loihi-* switches. */
static int describe(run_args *a, const nc_net *net, nc_runner_desc *d)
{
    nc_pipeline_options none = nc_pipeline_options_default();
    *d = nc_cli_runner_desc(net, a->model, &a->data, a->engine, &none);
    if (strcmp(a->engine, "loihi") == 0) {
        nc_error err = {0};
        if (nc_cli_loihi_settings(&a->loihi, &nc_cli_engine_settings, &a->settings, &err) != NC_OK)
            return nc_cli_error(&err);
        d->engine_settings = &a->settings;
    }
    d->keep_records = 1;
    d->T = a->sim.T;
    d->encoding = a->sim.encoding;
    d->seed = a->sim.seed;
    d->batch_size = a->sim.batch_size > 0 ? a->sim.batch_size : NC_SIMULATE_DEFAULT_BATCH;
    d->skip_ann = d->skip_qcfs = nc_cli_has_nir_models(net); /* LIF & co. have no ANN function */
    return 0;
}

/* The engine is made and loaded: what `run` says about it first. */
static nc_status on_event(void *user, nc_runner *r, const nc_run_stage *stage, nc_runner_event ev, nc_error *err)
{
    (void)err;
    const run_args *a = user;
    nc_engine *engine = nc_runner_engine(r);
    if (stage->kind != NC_RUN_OPEN || ev != NC_RUNNER_STAGE_END)
        return NC_OK;
    if (nc_engine_is_loihi(engine))
        nc_cli_loihi_print_setup(engine, &a->loihi, a->sim.T, stdout);
    else if (a->loihi.given)
        fprintf(stderr, "note: the --loihi-* options apply to --engine loihi only\n");
    return NC_OK;
}

/* Prints the run (also the finished batches of an interrupted one) and
 * writes its files (only after a complete one). */
static int report(run_args *a, const nc_runner *r, nc_status st, nc_error *err)
{
    const nc_record *rec = nc_runner_record(r, 0);
    nc_engine *engine = nc_runner_engine((nc_runner *)r);
    int rc = st == NC_OK ? 0 : nc_cli_error(err); /* 130 after Ctrl-C, with "interrupted" */
    if (st == NC_ERR_CANCELLED && rec) {
        fprintf(stderr, "neurocuda: showing the %lld images finished%s%s%s\n", (long long)nc_record_samples(rec),
                a->record || a->plots ? "; not written: " : "", a->record ? a->record : "",
                a->plots ? (a->record ? " and the plots" : "the plots") : "");
        a->record = a->plots = NULL;
    }
    if (!rec || nc_record_samples(rec) == 0 || (st != NC_OK && st != NC_ERR_CANCELLED))
        return rc;
    printf("SNN %s on %s (%s engine, T = %d, %s encoding)\n", a->model, nc_runner_test_set(r)->path,
           engine->ops->name, a->sim.T, a->sim.encoding == NC_ENCODING_POISSON ? "Poisson" : "direct");
    nc_cli_print_accuracy(rec);
    nc_cli_print_layers(rec);
    if (nc_engine_is_loihi(engine))
        nc_cli_loihi_print_stats(engine, a->sim.T, stdout);
    if (a->record && nc_record_save(rec, a->record, err) != NC_OK)
        rc = nc_cli_error(err);
    else if (a->record)
        printf("Recording saved to %s\n", a->record);
    if (a->plots && nc_cli_write_plots(rec, "SNN", a->plots) != 0)
        rc = 1;
    if (a->json)
        print_json(a, engine->ops->name, rec);
    return rc;
}

static int simulate(run_args *a, const nc_net *net, const nc_dataset *ds)
{
    nc_runner_desc d;
    int rc = describe(a, net, &d);
    if (rc != 0)
        return rc;
    d.test_data = ds;
    nc_runner_observer obs = {.user = a, .progress = nc_cli_progress, .event = on_event};
    nc_runner *r = NULL;
    nc_error err = {0};
    nc_status st = nc_cli_run_job(&d, &obs, &r, &err);
    rc = r ? report(a, r, st, &err) : nc_cli_error(&err);
    nc_runner_free(r);
    return rc;
}

int nc_cli_run_describe(int argc, char **argv, const nc_net *net, nc_runner_desc *out)
{
    static run_args a; /* the description points into it */
    int rc = parse(argc, argv, &a);
    if (rc >= 0)
        return rc == 0 ? 2 : rc;
    return describe(&a, net, out);
}

int nc_cmd_run(int argc, char **argv)
{
    run_args a;
    int rc = parse(argc, argv, &a);
    if (rc >= 0)
        return rc;
    nc_preprocess stored;
    int has_stored = 0;
    nc_net *net = nc_cli_load_snn_pp(a.model, &stored, &has_stored);
    if (!net)
        return 1;
    if (has_stored && !a.data_given)
        a.data.pp = stored;
    if (nc_cli_has_nir_models(net))
        fprintf(stderr, "note: %s holds NIR neuron models: no ANN or QCFS-ANN reference is run\n", a.model);
    nc_dataset *ds = nc_cli_open_data(&a.data, NC_SPLIT_TEST);
    rc = ds ? simulate(&a, net, ds) : 1;
    nc_dataset_free(ds);
    nc_net_free(net);
    return rc;
}
