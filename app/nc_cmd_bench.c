/* nc_cmd_bench.c — `neurocuda bench MODEL|SNN|builtin:NAME`: median time of
 * repeated forward passes after a warm-up, as a table.  On the GPU engine the
 * passes are timed with CUDA events on the device (input uploaded once,
 * output left on the device), and the effective TFLOP/s are also given as a
 * fraction of the device's measured GEMM peak in the same precision. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nc_cli.h"
#include "nc_engine_registry.h"
#include "nc_evaluate.h"
#include "nc_runner.h"
#include "nc_train.h"
#include "nc_train_dp.h"
#include "nc_ranks.h"

enum { OPT_PRECISION = 2000, OPT_NO_PEAK, OPT_TRAIN };

static void usage(FILE *out)
{
    fputs("Usage: neurocuda bench MODEL|SNN|builtin:NAME [--engine cpu|gpu] [--precision P] [--batch B] [-T N]\n"
          "                       [--repeats N] [--warmup N] [--threads N] [--data DATASET] [--no-peak] [--train]\n"
          "                       [--gpus N|all] [--json]\n"
          "\n"
          "Times the network on one batch of test images: the ANN forward pass and the SNN over T steps,\n"
          "the median of --repeats timed runs after --warmup untimed ones.  An ONNX model is converted\n"
          "first (p99.9 thresholds from 256 training images: speed does not depend on them).\n"
          "  ms/batch         median time of one forward pass of B images (gpu: CUDA events on the\n"
          "                   device, the input already there, the output left there)\n"
          "  images/s         B / (ms/batch)\n"
          "  neuron updates/s IF neurons × B × T / time\n"
          "  TFLOP/s          effective: 2 × MACs × B (× T for the SNN) / time, the dense work the\n"
          "                   network describes (the engine may do less, e.g. layer 1 once)\n"
          "  %peak            gpu: TFLOP/s over the device's measured peak, an 8192³ cuBLAS GEMM of\n"
          "                   random data in the same precision (--no-peak skips measuring it)\n"
          "\n"
          "  --precision P    gpu engine: fp32 (default; no TF32), tf32, bf16, split-bf16 (fp32-exact\n"
          "                   products on spikes from 3 bf16 GEMMs), split-bf16x2; also NC_GPU_PRECISION\n"
          "  builtin:NAME     a network built in, random weights (He init), converted on random images\n"
          "                   (no dataset needed): vgg-fmnist (convs 32-32-64-64, AvgPool, dense\n"
          "                   3136-256-10), cnn-fmnist (convs 16-32, MaxPool, dense 1568-128-10),\n"
          "                   vgg16-cifar (13 convs, AvgPool, 32x32x3 input, dense 512-10)\n"
          "  --train          also time one fine-tuning step (forward, backward, Adam update) of a\n"
          "                   batch: qcfs-step (the QCFS-ANN) and bptt-step (the SNN over T steps),\n"
          "                   on the trainer of --engine (cpu or gpu; in the gpu trainer --precision\n"
          "                   tf32 uses TF32, bf16 bf16 convolutions with fp32 weights, the others\n"
          "                   fp32); TFLOP/s count 3 × the forward\n"
          "                   MACs (forward + two backward GEMMs); the memory the step needs is shown\n"
          "  --gpus N|all     gpu engine, with --train: the steps are data-parallel over N GPUs, each\n"
          "                   taking B/N images of the same batch of B (NCCL sums the gradients); the\n"
          "                   ann and snn rows stay on one GPU\n"
          "  --batch B (default 64), -T N (default 8), --repeats N (default 20), --warmup N (default 3)\n"
          "  --engine-opt K=V set an option of the engine (repeatable; `neurocuda engines` lists them)\n",
          out);
}

typedef struct bench_args {
    const char *engine, *model, *precision;
    long batch, T, repeats, warmup, threads;
    int json, no_peak, train;
    int ranks;          /* --gpus: the training steps' GPUs */
    nc_cli_data data;
} bench_args;

typedef struct bench_row {
    const char *mode;
    double ms, images_per_s, updates_per_s, tflops, fraction;
    double train_bytes; /* training rows: the trainer's memory estimate */
} bench_row;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_of(double *times, long n);

static int64_t if_neurons(const nc_net *net)
{
    int64_t n = 0;
    for (int i = 0; i < net->n_nodes; i++)
        if (net->nodes[i].kind == NC_NODE_NEURON && net->nodes[i].neuron.model == NC_NEURON_IF)
            n += nc_node_numel(&net->nodes[i]);
    return n;
}

/* Median seconds of one forward pass in `mode`: CUDA events on the gpu
 * engine, the wall clock otherwise. */
static nc_status time_mode(nc_engine *e, const nc_tensor *input, nc_mode mode, const bench_args *a,
                           double *median, nc_error *err)
{
    nc_run_options opts = {.mode = mode, .T = (int)a->T};
    double *times = calloc((size_t)a->repeats, sizeof *times);
    if (!times)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory");
    nc_status st = NC_OK;
    const nc_engine_info *info = nc_engine_info_of(e);
    if (info && info->time_forward) { /* device engines time on the device */
        double ms = 0;
        st = info->time_forward(e, input, &opts, (int)a->warmup, (int)a->repeats, times, &ms, err);
        *median = 1e-3 * ms;
        free(times);
        return st;
    }
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
    *median = median_of(times, a->repeats);
    free(times);
    return st;
}

static double median_of(double *times, long n)
{
    qsort(times, (size_t)n, sizeof *times, cmp_double);
    return n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
}

/* Median seconds of one fine-tuning step in `mode` (gradients of the batch,
 * then an Adam update) on the trainer of the bench's engine; *bytes: the
 * memory the trainer estimates for it.  Works on a copy of the net. */
static nc_status time_train(const nc_net *net, const nc_tensor *input, const nc_dataset *ds, nc_train_mode mode,
                            const bench_args *a, double *median, double *bytes, nc_error *err)
{
    nc_train_options o = nc_train_options_default(mode);
    o.T = (int)a->T;
    o.batch_size = (int)a->batch;
    o.engine = strcmp(a->engine, "gpu") == 0 ? "gpu" : "cpu";
    nc_net *copy = nc_net_clone(net);
    double *times = calloc((size_t)a->repeats, sizeof *times);
    int32_t *labels = malloc((size_t)a->batch * sizeof *labels);
    nc_trainer *tr = NULL;
    nc_train_group *group = NULL;
    nc_status st = copy && times && labels ? NC_OK : nc_fail(err, NC_ERR_MEMORY, "out of memory");
    for (long i = 0; st == NC_OK && i < a->batch; i++)
        labels[i] = ds->labels ? ds->labels[i % ds->count] : (int32_t)(i % 10);
    nc_train_options per_gpu = o; /* the memory of one GPU's share */
    per_gpu.batch_size = (int)((a->batch + a->ranks - 1) / a->ranks);
    if (st == NC_OK)
        st = nc_train_estimate(copy, &per_gpu, bytes, err);
    if (st == NC_OK && a->ranks > 1)
        st = nc_train_group_new(copy, &o, a->ranks, (int)a->batch, 0, &group, err);
    else if (st == NC_OK)
        st = nc_trainer_new(copy, &o, (int)a->batch, &tr, err);
    if (group)
        tr = nc_train_group_trainer(group, 0);
    for (long r = -a->warmup; r < a->repeats && st == NC_OK; r++) {
        double start = nc_now();
        if (group) /* small steps: the net stays what it was */
            st = nc_train_group_step(group, input->data, labels, (int)a->batch, 1e-5, NULL, NULL, err);
        else if ((st = nc_trainer_gradients(tr, input->data, labels, (int)a->batch, NULL, NULL, err)) == NC_OK)
            nc_trainer_apply(tr, 1e-5);
        if (r >= 0)
            times[r] = nc_now() - start;
        if (st == NC_OK && nc_cli_interrupted())
            st = nc_fail(err, NC_ERR_CANCELLED, "benchmark interrupted");
    }
    if (st == NC_OK)
        st = nc_trainer_sync_net(tr, err); /* reports an error the backend recorded */
    char how[1024];
    if (st == NC_OK && (nc_trainer_describe(tr, how, sizeof how), how[0])) /* stderr: JSON stays on stdout */
        fprintf(stderr, "%s steps: %s", nc_train_mode_name(mode), how);
    if (st == NC_OK)
        *median = median_of(times, a->repeats);
    if (group)
        nc_train_group_free(group);
    else
        nc_trainer_free(tr);
    nc_net_free(copy);
    free(labels);
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

/* Converts *net (p99.9 thresholds from up to 256 images of `train`) as a
 * job of the pipeline runner on the bench's engine, and replaces *net with
 * the converted net, loaded on the engine. */
static int convert_with(nc_engine *e, nc_net **net, const nc_dataset *train)
{
    nc_runner_desc d = nc_runner_desc_default();
    d.source = *net, d.source_path = (*net)->source_path;
    d.dataset = NULL, d.train_data = train; /* no test split: nothing is measured */
    d.engine_instance = e;
    d.pipeline.calib_images = train->count < 256 ? train->count : 256;
    nc_runner *r = NULL;
    nc_error err = {0};
    nc_status st = nc_runner_new(&d, &r, &err);
    if (st == NC_OK)
        st = nc_runner_run(r, NULL, &err);
    nc_net *converted = st == NC_OK ? nc_net_clone(nc_runner_net(r)) : NULL;
    if (st == NC_OK && !converted)
        st = nc_fail(&err, NC_ERR_MEMORY, "out of memory for a copy of the converted network");
    nc_runner_free(r);
    if (st == NC_OK) { /* the engine held the runner's copy: it loads the one we keep */
        nc_net_free(*net);
        *net = converted;
        st = nc_engine_load(e, *net, &err);
    }
    return st == NC_OK ? 0 : nc_cli_error(&err);
}

static int convert_for_bench(nc_engine *e, nc_net **net, const bench_args *a)
{
    nc_cli_data train_spec = a->data;
    train_spec.limit = 256;
    nc_dataset *train = nc_cli_open_data(&train_spec, NC_SPLIT_TRAIN);
    if (!train)
        return 1;
    int rc = convert_with(e, net, train);
    nc_dataset_free(train);
    return rc;
}

/* ---- built-in networks (random weights) ----------------------------------------- */

static uint64_t bench_rng = 0x853c49e6748fea9bull;

static float bench_uniform(void) /* [0, 1) */
{
    bench_rng = bench_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)(uint32_t)(bench_rng >> 40) / 16777216.0f;
}

static nc_tensor *he_tensor(int ndim, const int64_t *shape, int64_t fan_in)
{
    nc_tensor *t = nc_tensor_new(ndim, shape);
    float a = sqrtf(6.0f / (float)(fan_in > 0 ? fan_in : 1));
    for (int64_t i = 0; t && i < nc_tensor_numel(t); i++)
        t->data[i] = (2.0f * bench_uniform() - 1.0f) * a;
    return t;
}

static int b_conv(nc_net *net, int in, int cin, int cout)
{
    char name[32];
    snprintf(name, sizeof name, "conv%d", net->n_nodes);
    int i = nc_net_add_node(net, NC_NODE_CONV2D, name, 1, &in);
    if (i < 0)
        return -1;
    nc_node *n = &net->nodes[i];
    int64_t ws[4] = {cout, cin, 3, 3}, bs[1] = {cout};
    n->weight = he_tensor(4, ws, cin * 9);
    n->bias = nc_tensor_new(1, bs);
    n->kernel[0] = n->kernel[1] = 3;
    n->pad[0] = n->pad[1] = n->pad[2] = n->pad[3] = 1;
    snprintf(name, sizeof name, "relu%d", net->n_nodes);
    int r = nc_net_add_node(net, NC_NODE_NEURON, name, 1, &i);
    if (r >= 0)
        net->nodes[r].neuron.model = NC_NEURON_RELU;
    return r;
}

static int b_pool(nc_net *net, int in, nc_node_kind kind)
{
    char name[32];
    snprintf(name, sizeof name, "pool%d", net->n_nodes);
    int i = nc_net_add_node(net, kind, name, 1, &in);
    if (i >= 0) {
        net->nodes[i].kernel[0] = net->nodes[i].kernel[1] = 2;
        net->nodes[i].stride[0] = net->nodes[i].stride[1] = 2;
    }
    return i;
}

static int b_dense(nc_net *net, int in, int fin, int fout, int relu)
{
    char name[32];
    snprintf(name, sizeof name, "fc%d", net->n_nodes);
    int i = nc_net_add_node(net, NC_NODE_DENSE, name, 1, &in);
    if (i < 0)
        return -1;
    int64_t ws[2] = {fout, fin}, bs[1] = {fout};
    net->nodes[i].weight = he_tensor(2, ws, fin);
    net->nodes[i].bias = nc_tensor_new(1, bs);
    if (!relu)
        return i;
    snprintf(name, sizeof name, "relu%d", net->n_nodes);
    int r = nc_net_add_node(net, NC_NODE_NEURON, name, 1, &i);
    if (r >= 0)
        net->nodes[r].neuron.model = NC_NEURON_RELU;
    return r;
}

/* The networks of the "Done when" (docs: issue 4). */
static nc_net *builtin_net(const char *name)
{
    nc_net *net = nc_net_new();
    if (!net)
        return NULL;
    int vgg16 = strcmp(name, "vgg16-cifar") == 0;
    int64_t xs[3] = {vgg16 ? 3 : 1, vgg16 ? 32 : 28, vgg16 ? 32 : 28};
    int x = nc_net_add_node(net, NC_NODE_INPUT, "input", 0, NULL);
    net->nodes[x].ndim = 3;
    memcpy(net->nodes[x].shape, xs, sizeof xs);
    int h = x, ok = 1;
    if (strcmp(name, "vgg-fmnist") == 0) {
        h = b_conv(net, h, 1, 32);
        h = b_conv(net, h, 32, 32);
        h = b_pool(net, h, NC_NODE_AVGPOOL);
        h = b_conv(net, h, 32, 64);
        h = b_conv(net, h, 64, 64);
        h = b_pool(net, h, NC_NODE_AVGPOOL);
        h = nc_net_add_node(net, NC_NODE_FLATTEN, "flatten", 1, &h);
        h = b_dense(net, h, 3136, 256, 1);
        h = b_dense(net, h, 256, 10, 0);
    } else if (strcmp(name, "cnn-fmnist") == 0) {
        h = b_conv(net, h, 1, 16);
        h = b_pool(net, h, NC_NODE_MAXPOOL);
        h = b_conv(net, h, 16, 32);
        h = b_pool(net, h, NC_NODE_MAXPOOL);
        h = nc_net_add_node(net, NC_NODE_FLATTEN, "flatten", 1, &h);
        h = b_dense(net, h, 1568, 128, 1);
        h = b_dense(net, h, 128, 10, 0);
    } else if (vgg16) {
        static const int cfg[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0};
        int c = 3;
        for (size_t k = 0; k < sizeof cfg / sizeof *cfg && h >= 0; k++) {
            if (cfg[k] == 0)
                h = b_pool(net, h, NC_NODE_AVGPOOL);
            else {
                h = b_conv(net, h, c, cfg[k]);
                c = cfg[k];
            }
        }
        h = nc_net_add_node(net, NC_NODE_FLATTEN, "flatten", 1, &h);
        h = b_dense(net, h, 512, 10, 0);
    } else {
        ok = 0;
    }
    if (ok && h >= 0)
        h = nc_net_add_node(net, NC_NODE_OUTPUT, "logits", 1, &h);
    nc_error err = {0};
    if (!ok || h < 0 || nc_net_infer_shapes(net, &err) != NC_OK) {
        fprintf(stderr, "neurocuda bench: %s%s\n", ok ? "cannot build builtin:" : "unknown builtin network: ",
                ok ? err.message : name);
        if (!ok)
            fputs("  known: builtin:vgg-fmnist, builtin:cnn-fmnist, builtin:vgg16-cifar\n", stderr);
        nc_net_free(net);
        return NULL;
    }
    snprintf(net->source_path, sizeof net->source_path, "builtin:%s", name);
    return net;
}

/* n random images of the net's input shape, normalised like Fashion-MNIST. */
static nc_dataset *random_images(const nc_net *net, int64_t n)
{
    const nc_node *in = &net->nodes[net->input];
    int64_t per = nc_node_numel(in);
    nc_dataset *ds = calloc(1, sizeof *ds);
    if (!ds)
        return NULL;
    ds->images = malloc((size_t)(n * per) * sizeof(float));
    ds->labels = calloc((size_t)n, sizeof *ds->labels);
    if (!ds->images || !ds->labels) {
        nc_dataset_free(ds);
        return NULL;
    }
    for (int64_t i = 0; i < n * per; i++)
        ds->images[i] = (bench_uniform() - 0.286f) / 0.353f;
    ds->count = n;
    ds->channels = in->ndim == 3 ? (int)in->shape[0] : 1;
    ds->height = in->ndim == 3 ? (int)in->shape[1] : 1;
    ds->width = in->ndim == 3 ? (int)in->shape[2] : (int)per;
    ds->num_classes = 10;
    snprintf(ds->path, sizeof ds->path, "random images");
    snprintf(ds->format, sizeof ds->format, "random");
    return ds;
}

/* ---- output ------------------------------------------------------------------------ */

static void print_rows(const bench_args *a, const char *engine, const char *precision, double peak,
                       const bench_row *rows, int n)
{
    printf("Benchmark: %s, engine %s%s%s, batch %ld, T %ld, median of %ld runs after %ld warm-up%s\n", a->model,
           engine, precision ? ", precision " : "", precision ? precision : "", a->batch, a->T, a->repeats,
           a->warmup, precision ? " (CUDA events)" : "");
    if (peak > 0)
        printf("Device peak (cuBLAS GEMM, %s): %.1f TFLOP/s\n", precision, peak);
    if (a->ranks > 1 && a->train)
        printf("Training steps data-parallel over %d GPUs (%ld images each of the batch of %ld)\n", a->ranks,
               (a->batch + a->ranks - 1) / a->ranks, a->batch);
    printf("  %-9s %12s %12s %18s %10s %8s %10s\n", "mode", "ms/batch", "images/s", "neuron updates/s", "TFLOP/s",
           "%peak", "memory");
    for (int i = 0; i < n; i++) {
        char frac[32] = "-", mem[32] = "-";
        if (rows[i].fraction > 0)
            snprintf(frac, sizeof frac, "%.1f", 100.0 * rows[i].fraction);
        if (rows[i].train_bytes > 0)
            snprintf(mem, sizeof mem, "%.0f MiB", rows[i].train_bytes / (1 << 20));
        printf("  %-9s %12.3f %12.1f %18.4g %10.3f %8s %10s\n", rows[i].mode, rows[i].ms, rows[i].images_per_s,
               rows[i].updates_per_s, rows[i].tflops, frac, mem);
    }
    if (!a->json)
        return;
    nc_json j;
    nc_json_begin(&j, stdout);
    nc_json_string(&j, "model", a->model);
    nc_json_string(&j, "engine", engine);
    if (precision) {
        nc_json_string(&j, "precision", precision);
        nc_json_string(&j, "timing", "cuda-events");
        if (peak > 0)
            nc_json_number(&j, "peak_tflops", peak);
    } else
        nc_json_string(&j, "timing", "wall-clock");
    nc_json_int(&j, "batch", a->batch);
    nc_json_int(&j, "T", a->T);
    nc_json_int(&j, "repeats", a->repeats);
    nc_json_int(&j, "gpus", a->ranks);
    for (int i = 0; i < n; i++) {
        nc_json_open(&j, rows[i].mode, '{');
        nc_json_number(&j, "ms_per_batch", rows[i].ms);
        nc_json_number(&j, "images_per_second", rows[i].images_per_s);
        nc_json_number(&j, "neuron_updates_per_second", rows[i].updates_per_s);
        nc_json_number(&j, "gflops", 1e3 * rows[i].tflops);
        nc_json_number(&j, "tflops", rows[i].tflops);
        if (rows[i].fraction > 0)
            nc_json_number(&j, "fraction_of_peak", rows[i].fraction);
        if (rows[i].train_bytes > 0)
            nc_json_number(&j, "memory_bytes", rows[i].train_bytes);
        nc_json_close(&j, '}');
    }
    nc_json_end(&j);
}

/* --precision is the engine option "precision" (checked by the registry
 * when the engine is made); an engine without it computes in fp32. */
static int apply_precision(const bench_args *a)
{
    if (!a->precision)
        return 0;
    if (!nc_engine_option_find(nc_engine_find(a->engine), "precision")) {
        if (strcmp(a->precision, "fp32") == 0)
            return 0;
        fprintf(stderr, "neurocuda bench: --precision %s needs --engine gpu (the %s engine computes in fp32)\n",
                a->precision, a->engine);
        return 2;
    }
    char setting[160];
    nc_error err = {0};
    snprintf(setting, sizeof setting, "precision=%s", a->precision);
    return nc_engine_settings_add(&nc_cli_engine_settings, setting, &err) == NC_OK ? 0 : nc_cli_error(&err);
}

/* The arithmetic in use on a device engine, NULL on another. */
static const char *precision_of(const nc_engine *e)
{
    const nc_engine_info *info = nc_engine_info_of(e);
    return info && info->precision ? info->precision(e) : NULL;
}

static int bench(bench_args *a, nc_net **netp, int builtin)
{
    nc_net *net = *netp;
    nc_error ranks_err = {0};
    if (nc_ranks_for(a->engine, &nc_cli_engine_settings, 0, &a->ranks, &ranks_err) != NC_OK)
        return nc_cli_error(&ranks_err);
    int rc = apply_precision(a);
    nc_engine *e = rc == 0 ? nc_cli_engine(a->engine, net, (int)a->threads) : NULL;
    if (!e)
        return rc ? rc : 1;
    const char *precision = precision_of(e);
    nc_dataset *ds = NULL;
    if (rc == 0 && builtin) {
        ds = random_images(net, 256);
        if (!ds) {
            fputs("neurocuda bench: out of memory for the random images\n", stderr);
            rc = 1;
        } else if (!nc_cli_is_snn(net))
            rc = convert_with(e, netp, ds);
    } else if (rc == 0) {
        rc = nc_cli_is_snn(net) ? 0 : convert_for_bench(e, netp, a);
        ds = rc == 0 ? nc_cli_open_data(&a->data, NC_SPLIT_TEST) : NULL;
    }
    net = *netp; /* the converted net */
    nc_tensor *input = ds && rc == 0 ? first_batch(net, ds, a->batch) : NULL;
    if (!input) {
        nc_dataset_free(ds);
        nc_engine_free(e);
        return rc ? rc : 1;
    }
    nc_error err = {0};
    double ann_s = 0, snn_s = 0, macs = (double)nc_net_macs(net), peak = 0;
    nc_cli_install_sigint();
    nc_status st = time_mode(e, input, NC_MODE_ANN, a, &ann_s, &err);
    if (st == NC_OK)
        st = time_mode(e, input, NC_MODE_SNN, a, &snn_s, &err);
    const nc_engine_info *info = nc_engine_info_of(e);
    if (st == NC_OK && info && info->measure_peak && !a->no_peak && info->measure_peak(e, &peak, &err) != NC_OK) {
        fprintf(stderr, "neurocuda bench: could not measure the peak: %s\n", err.message);
        peak = 0;
    }
    double qcfs_s = 0, bptt_s = 0, qcfs_bytes = 0, bptt_bytes = 0;
    if (st == NC_OK && a->train)
        st = time_train(net, input, ds, NC_TRAIN_QCFS, a, &qcfs_s, &qcfs_bytes, &err);
    if (st == NC_OK && a->train)
        st = time_train(net, input, ds, NC_TRAIN_BPTT, a, &bptt_s, &bptt_bytes, &err);
    if (st == NC_OK) {
        double B = (double)a->batch, T = (double)a->T, neurons = (double)if_neurons(net);
        double ann_tf = 2e-12 * macs * B / ann_s, snn_tf = 2e-12 * macs * B * T / snn_s;
        bench_row rows[4] = {
            {"ann", 1e3 * ann_s, B / ann_s, neurons * B / ann_s, ann_tf, peak > 0 ? ann_tf / peak : 0},
            {"snn", 1e3 * snn_s, B / snn_s, neurons * B * T / snn_s, snn_tf, peak > 0 ? snn_tf / peak : 0}};
        if (a->train) {
            double q_tf = 6e-12 * macs * B / qcfs_s, b_tf = 6e-12 * macs * B * T / bptt_s;
            rows[2] = (bench_row){"qcfs-step", 1e3 * qcfs_s, B / qcfs_s, neurons * B / qcfs_s, q_tf,
                                  peak > 0 ? q_tf / peak : 0, qcfs_bytes};
            rows[3] = (bench_row){"bptt-step", 1e3 * bptt_s, B / bptt_s, neurons * B * T / bptt_s, b_tf,
                                  peak > 0 ? b_tf / peak : 0, bptt_bytes};
        }
        print_rows(a, e->ops->name, precision, peak, rows, a->train ? 4 : 2);
        const nc_engine_info *info = nc_engine_info_of(e);
        if (info && info->describe_kernels) { /* stderr: the JSON line stays last on stdout */
            char kernels[4096];
            info->describe_kernels(e, kernels, sizeof kernels);
            fputs(kernels, stderr);
        }
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
        {"precision", required_argument, NULL, OPT_PRECISION}, {"no-peak", no_argument, NULL, OPT_NO_PEAK},
        {"train", no_argument, NULL, OPT_TRAIN},            {"engine-opt", required_argument, NULL, NC_OPT_ENGINE_OPT},
        {"gpus", required_argument, NULL, NC_OPT_GPUS},
        {"json", no_argument, NULL, NC_OPT_JSON},           {"help", no_argument, NULL, 'h'},
        {0}};
    bench_args a = {.engine = "cpu", .batch = 64, .T = 8, .repeats = 20, .warmup = 3, .ranks = 1};
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
        else if (opt == OPT_PRECISION)
            a.precision = optarg;
        else if (opt == OPT_NO_PEAK)
            a.no_peak = 1;
        else if (opt == OPT_TRAIN)
            a.train = 1;
        else if (opt == NC_OPT_JSON)
            a.json = 1;
        else
            return nc_cli_usage_exit(opt, usage);
    }
    a.model = nc_cli_operand(argc, argv, 1, "bench: give exactly one MODEL or SNN file, or builtin:NAME", NULL);
    if (!a.model)
        return 2;
    int builtin = strncmp(a.model, "builtin:", 8) == 0;
    nc_preprocess stored;
    int has_stored = 0;
    nc_net *net = builtin ? builtin_net(a.model + 8) : nc_cli_load_model_pp(a.model, &stored, &has_stored);
    if (!net)
        return 1;
    if (has_stored && a.data.pp.n_mean == 0 && a.data.pp.n_std == 0)
        a.data.pp = stored;
    int rc = bench(&a, &net, builtin);
    nc_net_free(net);
    return rc;
}
