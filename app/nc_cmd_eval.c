/* nc_cmd_eval.c — `neurocuda eval MODEL`: test-set accuracy of the ANN, a
 * measure-only job of the pipeline runner (nc_runner.h). */
#include <getopt.h>
#include <stdio.h>
#include <unistd.h>

#include "nc_cli.h"
#include "nc_runner.h"

static void usage(FILE *out)
{
    fputs("Usage: neurocuda eval MODEL [--data DATASET] [--mean M[,M..]] [--std S[,S..]] [--scale X]\n"
          "                      [--limit N] [--engine cpu] [--gpus N] [--batch B] [--threads N] [--json]\n"
          "\n"
          "Test-set accuracy and speed of the network in MODEL, run as the original ANN.\n"
          "\n"
          "  --data DATASET   fashion-mnist (default: Debian's dataset-fashion-mnist), a folder of IDX\n"
          "                   files, an IDX images file, a .npy images file, or an HDF5 file with x and y\n"
          "  --mean, --std    per-channel normalisation after scaling: x = (raw*scale - mean) / std\n"
          "  --scale X        raw value multiplier (default 1/255 for 8-bit data, 1 for float data)\n"
          "  --limit N        only the first N test images\n"
          "  --engine NAME    cpu (default), gpu, loihi — see `neurocuda engines`\n"
          "  --gpus N|all     gpu engine: deal the test images over N GPUs (several GPUs need NCCL)\n"
          "  --batch B        images per forward pass (default 64)\n"
          "  --threads N      CPU threads (default: all cores)\n"
          "  --json           print one JSON object as the last line, with \"accuracy\" and \"images\"\n",
          out);
}

/* The measured row as `eval` has always printed it. */
static int report(const nc_net *net, const nc_dataset *ds, const char *engine, const nc_stage_row *row, long batch,
                  int json)
{
    printf("Model:    %s\nDataset:  %s (%s, %lld images)\nEngine:   %s\n", net->source_path, ds->path, ds->format,
           (long long)ds->count, engine);
    printf("Accuracy: %.4f (%lld / %lld)\nSpeed:    %.1f images/s (batch %ld)\n", row->ann,
           (long long)row->ann_correct, (long long)row->images, row->ann_images_per_second, batch);
    if (!json)
        return 0;
    nc_json j;
    nc_json_begin(&j, stdout);
    nc_json_string(&j, "model", net->source_path);
    nc_json_string(&j, "dataset", ds->path);
    nc_json_string(&j, "engine", engine);
    nc_json_number(&j, "accuracy", row->ann);
    nc_json_int(&j, "images", row->images);
    nc_json_int(&j, "correct", row->ann_correct);
    nc_json_number(&j, "images_per_second", row->ann_images_per_second);
    nc_json_int(&j, "batch", batch);
    nc_json_end(&j);
    return 0;
}

/* The runner measures the net as it is (a measure-only job: open →
 * measure, ANN accuracy only); the exit code. */
static int evaluate(const nc_net *net, const char *model, const nc_dataset *ds, const char *engine, int threads,
                    long batch, int json)
{
    nc_runner_desc d = nc_runner_desc_default();
    d.source = net, d.source_path = model;
    d.dataset = NULL, d.test_data = ds;
    d.engine = engine, d.engine_settings = &nc_cli_engine_settings, d.threads = threads;
    d.batch_size = (int)batch;
    d.measure_only = 1, d.skip_qcfs = 1;
    nc_runner_observer obs = {.progress = nc_cli_progress};
    nc_runner *r = NULL;
    nc_error err = {0};
    nc_status st = nc_cli_run_job(&d, &obs, &r, &err);
    int rc = st != NC_OK ? nc_cli_error(&err)
                         : report(net, ds, nc_runner_engine(r)->ops->name, nc_runner_row(r, 0), batch, json);
    nc_runner_free(r);
    return rc;
}

int nc_cmd_eval(int argc, char **argv)
{
    static const struct option options[] = {
        NC_CLI_DATA_LONG_OPTIONS,                           {"engine", required_argument, NULL, NC_OPT_ENGINE},
        {"batch", required_argument, NULL, NC_OPT_BATCH},   {"threads", required_argument, NULL, NC_OPT_THREADS},
        {"json", no_argument, NULL, NC_OPT_JSON},           {"help", no_argument, NULL, 'h'},
        {0}};
    nc_cli_data data;
    nc_cli_data_init(&data);
    const char *engine_name = "cpu";
    long batch = 64, threads = 0;
    int json = 0, opt;
    while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (opt) {
        case NC_OPT_ENGINE: engine_name = optarg; break;
        case NC_OPT_BATCH:
            if ((batch = nc_cli_parse_long("--batch", optarg, 1, 1 << 20)) < 0)
                return 2;
            break;
        case NC_OPT_THREADS:
            if ((threads = nc_cli_parse_long("--threads", optarg, 1, 1024)) < 0)
                return 2;
            break;
        case NC_OPT_JSON: json = 1; break;
        default: { /* --data and the preprocessing, else not an option of eval */
            int used = nc_cli_data_option(&data, opt, optarg);
            if (used <= 0)
                return used < 0 ? 2 : nc_cli_usage_exit(opt, usage);
        }
        }
    }
    const char *model = nc_cli_operand(argc, argv, 1, "eval: give exactly one MODEL file", usage);
    if (!model)
        return 2;
    nc_net *net = nc_cli_load_model(model);
    if (!net)
        return 1;
    nc_dataset *ds = nc_cli_open_data(&data, NC_SPLIT_TEST);
    int rc = ds ? evaluate(net, model, ds, engine_name, (int)threads, batch, json) : 1;
    nc_dataset_free(ds);
    nc_net_free(net);
    return rc;
}
