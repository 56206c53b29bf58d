/* nc_cmd_bench.c — `neurocuda bench MODEL|SNN`: median time of repeated
 * forward passes after a warm-up, as a table. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nc_cli.h"
#include "nc_evaluate.h"
#include "nc_pipeline.h"

static void usage(FILE *out)
{
    fputs("Usage: neurocuda bench MODEL|SNN [--engine cpu] [--batch B] [-T N] [--repeats N] [--warmup N]\n"
          "                       [--threads N] [--data DATASET] [--json]\n"
          "\n"
          "Times the network on one batch of test images: the ANN forward pass and the SNN over T steps,\n"
          "the median of --repeats timed runs after --warmup untimed ones.  An ONNX model is converted\n"
          "first (p99.9 thresholds from 256 training images: speed does not depend on them).\n"
          "  ms/batch         median wall time of one forward pass of B images\n"
          "  images/s         B / (ms/batch)\n"
          "  neuron updates/s IF neurons × B × T / time\n"
          "  GFLOP/s          effective: 2 × MACs × B (× T for the SNN) / time, the dense work the\n"
          "                   network describes (the engine may do less, e.g. layer 1 once)\n"
          "\n"
          "  --batch B (default 64), -T N (default 8), --repeats N (default 20), --warmup N (default 3)\n",
          out);
}

typedef struct bench_args {
    const char *engine, *model;
    long batch, T, repeats, warmup, threads;
    int json;
    nc_cli_data data;
} bench_args;

typedef struct bench_row {
    const char *mode;
    double ms, images_per_s, updates_per_s, gflops;
} bench_row;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int64_t if_neurons(const nc_net *net)
{
    int64_t n = 0;
    for (int i = 0; i < net->n_nodes; i++)
        if (net->nodes[i].kind == NC_NODE_NEURON && net->nodes[i].neuron.model == NC_NEURON_IF)
            n += nc_node_numel(&net->nodes[i]);
    return n;
}

/* Median seconds of one forward pass in `mode`. */
static nc_status time_mode(nc_engine *e, const nc_tensor *input, nc_mode mode, const bench_args *a,
                           double *median, nc_error *err)
{
    nc_run_options opts = {.mode = mode, .T = (int)a->T};
    double *times = calloc((size_t)a->repeats, sizeof *times);
    if (!times)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory");
    nc_status st = NC_OK;
    for (long r = -a->warmup; r < a->repeats && st == NC_OK; r++) {
        nc_tensor *out = NULL;
        double start = nc_now();
        st = nc_engine_forward(e, input, &opts, &out, err);
        if (r >= 0)
            times[r] = nc_now() - start;
        nc_tensor_free(out);
        if (nc_cli_interrupted())
            st = nc_fail(err, NC_ERR_CANCELLED, "benchmark interrupted");
    }
    qsort(times, (size_t)a->repeats, sizeof *times, cmp_double);
    *median = a->repeats % 2 ? times[a->repeats / 2] : 0.5 * (times[a->repeats / 2 - 1] + times[a->repeats / 2]);
    free(times);
    return st;
}

static nc_tensor *first_batch(const nc_net *net, const nc_dataset *ds, long batch)
{
    const nc_node *in = &net->nodes[net->input];
    int64_t shape[NC_MAX_DIMS] = {batch};
    for (int d = 0; d < in->ndim; d++)
        shape[d + 1] = in->shape[d];
    nc_tensor *t = nc_tensor_new(in->ndim + 1, shape);
    for (long i = 0; t && i < batch; i++) /* repeat the dataset if it is smaller than the batch */
        nc_dataset_batch(ds, i % ds->count, 1, t->data + i * nc_node_numel(in), NULL);
    return t;
}

static int convert_for_bench(nc_engine *e, nc_net *net, const bench_args *a)
{
    nc_cli_data train_spec = a->data;
    train_spec.limit = 256;
    nc_dataset *train = nc_cli_open_data(&train_spec, NC_SPLIT_TRAIN);
    if (!train)
        return 1;
    nc_pipeline_options o = nc_pipeline_options_default();
    o.calib_images = 256;
    nc_pipeline_result r = {0};
    nc_error err = {0};
    nc_status st = nc_pipeline_convert(e, net, train, &o, NULL, NULL, &r, &err);
    nc_pipeline_result_clear(&r);
    nc_dataset_free(train);
    return st == NC_OK ? 0 : nc_cli_error(&err);
}

static void print_rows(const bench_args *a, const char *engine, const bench_row *rows, int n)
{
    printf("Benchmark: %s, engine %s, batch %ld, T %ld, median of %ld runs after %ld warm-up\n", a->model, engine,
           a->batch, a->T, a->repeats, a->warmup);
    printf("  %-6s %12s %12s %18s %10s\n", "mode", "ms/batch", "images/s", "neuron updates/s", "GFLOP/s");
    for (int i = 0; i < n; i++)
        printf("  %-6s %12.3f %12.1f %18.4g %10.2f\n", rows[i].mode, rows[i].ms, rows[i].images_per_s,
               rows[i].updates_per_s, rows[i].gflops);
    if (!a->json)
        return;
    nc_json j;
    nc_json_begin(&j, stdout);
    nc_json_string(&j, "model", a->model);
    nc_json_string(&j, "engine", engine);
    nc_json_int(&j, "batch", a->batch);
    nc_json_int(&j, "T", a->T);
    nc_json_int(&j, "repeats", a->repeats);
    for (int i = 0; i < n; i++) {
        nc_json_open(&j, rows[i].mode, '{');
        nc_json_number(&j, "ms_per_batch", rows[i].ms);
        nc_json_number(&j, "images_per_second", rows[i].images_per_s);
        nc_json_number(&j, "neuron_updates_per_second", rows[i].updates_per_s);
        nc_json_number(&j, "gflops", rows[i].gflops);
        nc_json_close(&j, '}');
    }
    nc_json_end(&j);
}

static int bench(const bench_args *a, nc_net *net)
{
    nc_engine *e = nc_cli_engine(a->engine, net, (int)a->threads);
    if (!e)
        return 1;
    int rc = nc_cli_is_snn(net) ? 0 : convert_for_bench(e, net, a);
    nc_dataset *ds = rc == 0 ? nc_cli_open_data(&a->data, NC_SPLIT_TEST) : NULL;
    nc_tensor *input = ds ? first_batch(net, ds, a->batch) : NULL;
    if (!input) {
        nc_dataset_free(ds);
        nc_engine_free(e);
        return 1;
    }
    nc_error err = {0};
    double ann_s = 0, snn_s = 0, macs = (double)nc_net_macs(net);
    nc_cli_install_sigint();
    nc_status st = time_mode(e, input, NC_MODE_ANN, a, &ann_s, &err);
    if (st == NC_OK)
        st = time_mode(e, input, NC_MODE_SNN, a, &snn_s, &err);
    if (st == NC_OK) {
        double B = (double)a->batch, T = (double)a->T;
        bench_row rows[2] = {
            {"ann", 1e3 * ann_s, B / ann_s, (double)if_neurons(net) * B / ann_s, 2e-9 * macs * B / ann_s},
            {"snn", 1e3 * snn_s, B / snn_s, (double)if_neurons(net) * B * T / snn_s, 2e-9 * macs * B * T / snn_s}};
        print_rows(a, e->ops->name, rows, 2);
    } else
        rc = nc_cli_error(&err);
    nc_tensor_free(input);
    nc_dataset_free(ds);
    nc_engine_free(e);
    return rc;
}

int nc_cmd_bench(int argc, char **argv)
{
    static const struct option options[] = {
        {"engine", required_argument, NULL, NC_OPT_ENGINE}, {"batch", required_argument, NULL, NC_OPT_BATCH},
        {"repeats", required_argument, NULL, NC_OPT_REPEATS}, {"warmup", required_argument, NULL, NC_OPT_WARMUP},
        {"threads", required_argument, NULL, NC_OPT_THREADS}, {"data", required_argument, NULL, NC_OPT_DATA},
        {"mean", required_argument, NULL, NC_OPT_MEAN},     {"std", required_argument, NULL, NC_OPT_STD},
        {"json", no_argument, NULL, NC_OPT_JSON},           {"help", no_argument, NULL, 'h'},
        {0}};
    bench_args a = {.engine = "cpu", .batch = 64, .T = 8, .repeats = 20, .warmup = 3};
    nc_cli_data_init(&a.data);
    int opt;
    while ((opt = getopt_long(argc, argv, "hT:", options, NULL)) != -1) {
        int used = nc_cli_data_option(&a.data, opt, optarg);
        if (used < 0)
            return 2;
        if (used)
            continue;
        long *target = opt == NC_OPT_BATCH ? &a.batch : opt == 'T' ? &a.T : opt == NC_OPT_REPEATS ? &a.repeats
                     : opt == NC_OPT_WARMUP ? &a.warmup : opt == NC_OPT_THREADS ? &a.threads : NULL;
        if (target) {
            *target = nc_cli_parse_long("option", optarg, opt == NC_OPT_WARMUP ? 0 : 1, 1 << 20);
            if (*target < 0)
                return 2;
        } else if (opt == NC_OPT_ENGINE)
            a.engine = optarg;
        else if (opt == NC_OPT_JSON)
            a.json = 1;
        else if (opt == 'h') {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc - 1) {
        fputs("neurocuda bench: give exactly one MODEL or SNN file\n", stderr);
        return 2;
    }
    a.model = argv[optind];
    nc_preprocess stored;
    int has_stored = 0;
    nc_net *net = nc_cli_load_model_pp(a.model, &stored, &has_stored);
    if (!net)
        return 1;
    if (has_stored && a.data.pp.n_mean == 0 && a.data.pp.n_std == 0)
        a.data.pp = stored;
    int rc = bench(&a, net);
    nc_net_free(net);
    return rc;
}
