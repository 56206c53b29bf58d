/* nc_cmd_eval.c — `neurocuda eval MODEL`: test-set accuracy of the ANN. */
#include <getopt.h>
#include <stdio.h>
#include <unistd.h>

#include "nc_cli.h"
#include "nc_evaluate.h"
#include "nc_shard.h"

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

/* The ANN's accuracy, dealt over the GPUs that --gpus asks for. */
static nc_status evaluate(const char *name, nc_engine *e, const nc_dataset *ds, int batch, int *ranks,
                          nc_eval_result *r, nc_error *err)
{
    nc_status st = nc_ranks_for(name, &nc_cli_engine_settings, 0, ranks, err);
    if (st != NC_OK || *ranks == 1)
        return st != NC_OK ? st : nc_evaluate(e, ds, batch, NC_MODE_ANN, nc_cli_progress, NULL, r, err);
    nc_rank_pool *pool = NULL;
    nc_engine *engines[NC_RANKS_MAX] = {0};
    st = nc_rank_pool_new(name, *ranks, &pool, err);
    if (st == NC_OK)
        st = nc_shard_engines_new(pool, name, &nc_cli_engine_settings, e->threads, e, engines, err);
    if (st == NC_OK)
        st = nc_shard_engines_load(pool, engines, e->net, err);
    if (st == NC_OK)
        st = nc_evaluate_sharded(pool, engines, ds, batch, NC_MODE_ANN, nc_cli_progress, NULL, r, err);
    if (pool)
        nc_shard_engines_free(pool, engines);
    nc_rank_pool_free(pool);
    return st;
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
        int used = nc_cli_data_option(&data, opt, optarg);
        if (used < 0)
            return 2;
        if (used)
            continue;
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
        default: return nc_cli_usage_exit(opt, usage);
        }
    }
    const char *model = nc_cli_operand(argc, argv, 1, "eval: give exactly one MODEL file", usage);
    if (!model)
        return 2;
    nc_net *net = nc_cli_load_model(model);
    if (!net)
        return 1;
    int rc = 1;
    nc_dataset *ds = nc_cli_open_data(&data, NC_SPLIT_TEST);
    int ranks = 1;
    nc_error ranks_err = {0};
    if (nc_ranks_for(engine_name, &nc_cli_engine_settings, 0, &ranks, &ranks_err) != NC_OK) {
        nc_dataset_free(ds); /* the machine cannot do what --gpus asks: say so before anything runs */
        ds = NULL;
        nc_cli_error(&ranks_err);
    }
    nc_engine *engine = ds ? nc_cli_engine(engine_name, net, (int)threads) : NULL;
    if (engine) {
        nc_error err = {0};
        nc_eval_result r;
        nc_cli_install_sigint();
        nc_status st = evaluate(engine_name, engine, ds, (int)batch, &ranks, &r, &err);
        if (st != NC_OK) {
            rc = nc_cli_error(&err);
        } else {
            printf("Model:    %s\nDataset:  %s (%s, %lld images)\nEngine:   %s", net->source_path, ds->path,
                   ds->format, (long long)ds->count, engine->ops->name);
            if (ranks > 1)
                printf(" (%d GPUs)", ranks);
            printf("\n");
            printf("Accuracy: %.4f (%lld / %lld)\nSpeed:    %.1f images/s (batch %ld)\n", r.accuracy,
                   (long long)r.correct, (long long)r.images, r.images_per_second, batch);
            if (json) {
                nc_json j;
                nc_json_begin(&j, stdout);
                nc_json_string(&j, "model", net->source_path);
                nc_json_string(&j, "dataset", ds->path);
                nc_json_string(&j, "engine", engine->ops->name);
                nc_json_number(&j, "accuracy", r.accuracy);
                nc_json_int(&j, "images", r.images);
                nc_json_int(&j, "correct", r.correct);
                nc_json_number(&j, "images_per_second", r.images_per_second);
                nc_json_int(&j, "batch", batch);
                nc_json_end(&j);
            }
            rc = 0;
        }
    }
    nc_engine_free(engine);
    nc_dataset_free(ds);
    nc_net_free(net);
    return rc;
}
