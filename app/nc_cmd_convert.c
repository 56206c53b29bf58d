/* nc_cmd_convert.c — `neurocuda convert MODEL -o OUT.ncsnn`: calibrate,
 * QCFS, IF neurons; prints each stage's accuracy and stores it in the project. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "nc_cli.h"
#include "nc_evaluate.h"
#include "nc_pipeline.h"

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: neurocuda convert MODEL -o OUT.ncsnn [--data DATASET] [--mean M] [--std S]\n"
            "                         [--threshold M] [--per-channel] [--L N] [-T N] [--maxpool S]\n"
            "                         [--engine cpu] [--limit N] [--json]\n"
            "\n"
            "Converts the ANN in MODEL (.onnx) into a spiking network of integrate-and-fire neurons:\n"
            "calibrates a threshold λ per ReLU layer (or channel) on training images, replaces each ReLU\n"
            "by QCFS (clip-floor-shift with λ and L steps), then by IF neurons with θ = λ, v0 = θ/2 and\n"
            "reset by subtraction.  Prints the thresholds and the test accuracy of the ANN and of the\n"
            "QCFS-ANN, and saves everything in a project file (HDF5).\n"
            "\n"
            "  -o, --output F   the project file to write (.ncsnn; written atomically)\n"
            "  --data DATASET   calibration uses its training split, accuracy its test split\n"
            "                   (default fashion-mnist); --mean, --std, --scale as for eval\n"
            "%s"
            "  --engine NAME    cpu (default) | gpu\n"
            "  --limit N        test images for the accuracies (default: all)\n"
            "  --json           one JSON object as the last line\n",
            nc_cli_convert_help);
}

typedef struct convert_args {
    nc_cli_data data;
    nc_pipeline_options opts;
    const char *engine, *output, *model;
    int json;
} convert_args;

static int parse(int argc, char **argv, convert_args *a)
{
    static const struct option options[] = {NC_CLI_DATA_LONG_OPTIONS, NC_CLI_CONVERT_LONG_OPTIONS,
                                            {"engine", required_argument, NULL, NC_OPT_ENGINE},
                                            {"output", required_argument, NULL, 'o'},
                                            {"json", no_argument, NULL, NC_OPT_JSON},
                                            {"help", no_argument, NULL, 'h'},
                                            {0}};
    int opt;
    while ((opt = getopt_long(argc, argv, "ho:T:", options, NULL)) != -1) {
        int used = nc_cli_data_option(&a->data, opt, optarg);
        if (used == 0)
            used = nc_cli_convert_option(&a->opts, opt, optarg);
        if (used < 0)
            return 2;
        if (used)
            continue;
        switch (opt) {
        case NC_OPT_ENGINE: a->engine = optarg; break;
        case 'o': a->output = optarg; break;
        case NC_OPT_JSON: a->json = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc - 1 || !a->output) {
        fprintf(stderr, "neurocuda convert: give one MODEL and -o OUT.ncsnn\n");
        usage(stderr);
        return 2;
    }
    a->model = argv[optind];
    return -1; /* go on */
}

/* Accuracy of the converted net in ANN and QCFS mode on the test split. */
static int evaluate_stages(nc_engine *engine, const nc_dataset *test, double *ann, double *qcfs)
{
    nc_error err = {0};
    nc_eval_result r;
    if (nc_evaluate(engine, test, 100, NC_MODE_ANN, nc_cli_progress, NULL, &r, &err) != NC_OK)
        return nc_cli_error(&err);
    *ann = r.accuracy;
    if (nc_evaluate(engine, test, 100, NC_MODE_QCFS, nc_cli_progress, NULL, &r, &err) != NC_OK)
        return nc_cli_error(&err);
    *qcfs = r.accuracy;
    return 0;
}

static int convert(convert_args *a, nc_net *net, nc_dataset *train, nc_dataset *test)
{
    nc_engine *engine = nc_cli_engine(a->engine, net, 0);
    if (!engine)
        return 1;
    nc_error err = {0};
    nc_pipeline_result result = {0};
    nc_cli_install_sigint();
    nc_status st = nc_pipeline_convert(engine, net, train, &a->opts, nc_cli_progress, NULL, &result, &err);
    double ann = 0, qcfs = 0;
    int rc = st != NC_OK ? nc_cli_error(&err) : evaluate_stages(engine, test, &ann, &qcfs);
    nc_engine_free(engine);
    if (rc != 0) {
        nc_pipeline_result_clear(&result);
        nc_net_free(net);
        return rc;
    }
    char table[16384];
    printf("Converted %s (%s)\n", a->model, result.calibrated ? "calibrated" : "imported QCFS thresholds");
    printf("%s", nc_convert_summary_text(net, result.calibrated ? nc_calib_method_name(a->opts.method) : "imported",
                                         table, sizeof table));
    if (result.warnings[0])
        printf("Notes:\n%s\n", result.warnings);
    printf("\nTest accuracy (%lld images): ANN %.4f, QCFS-ANN (L = %d) %.4f\n", (long long)test->count, ann,
           a->opts.levels, qcfs);
    nc_project *project = NULL; /* takes the net, also when it fails */
    st = nc_pipeline_make_project(net, a->model, &a->data.pp, &a->opts, &result, &project, &err);
    nc_pipeline_result_clear(&result);
    if (st != NC_OK)
        return nc_cli_error(&err);
    nc_project_set_metric(project, "ann_accuracy", ann, &err);
    nc_project_set_metric(project, "qcfs_accuracy", qcfs, &err);
    nc_project_set_metric(project, "test_images", (double)test->count, &err);
    st = nc_project_save(project, a->output, &err);
    if (st == NC_OK) {
        printf("Saved %s\n", a->output);
        if (a->json) {
            nc_json j;
            nc_json_begin(&j, stdout);
            nc_json_string(&j, "model", a->model);
            nc_json_string(&j, "output", a->output);
            nc_json_string(&j, "threshold", nc_calib_method_name(a->opts.method));
            nc_json_bool(&j, "per_channel", a->opts.per_channel);
            nc_json_int(&j, "L", a->opts.levels);
            nc_json_number(&j, "ann_accuracy", ann);
            nc_json_number(&j, "qcfs_accuracy", qcfs);
            nc_json_end(&j);
        }
    }
    nc_project_free(project); /* frees the net too */
    return st == NC_OK ? 0 : nc_cli_error(&err);
}

int nc_cmd_convert(int argc, char **argv)
{
    convert_args a = {.engine = "cpu"};
    nc_cli_data_init(&a.data);
    a.opts = nc_pipeline_options_default();
    int rc = parse(argc, argv, &a);
    if (rc >= 0)
        return rc;
    nc_net *net = nc_cli_load_model(a.model);
    if (!net)
        return 1;
    if (nc_cli_is_snn(net)) {
        fprintf(stderr, "neurocuda: %s is already a spiking network; run it with `neurocuda run`\n", a.model);
        nc_net_free(net);
        return 1;
    }
    nc_cli_data train_spec = a.data;
    train_spec.limit = a.opts.calib_images;
    nc_dataset *train = nc_cli_open_data(&train_spec, NC_SPLIT_TRAIN);
    nc_dataset *test = train ? nc_cli_open_data(&a.data, NC_SPLIT_TEST) : NULL;
    if (!test) {
        nc_dataset_free(train);
        nc_net_free(net);
        return 1;
    }
    rc = convert(&a, net, train, test); /* takes the net */
    nc_dataset_free(train);
    nc_dataset_free(test);
    return rc;
}
