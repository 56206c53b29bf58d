/* nc_cmd_convert.c — `neurocuda convert MODEL -o OUT.ncsnn`: calibrate,
 * QCFS, IF neurons; prints each stage's accuracy and stores it in the project. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <math.h>

#include "nc_cli.h"
#include "nc_cli_finetune.h"
#include "nc_evaluate.h"
#include "nc_pipeline.h"
#include "nc_simulate.h"

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: neurocuda convert MODEL -o OUT.ncsnn [--data DATASET] [--mean M] [--std S]\n"
            "                         [--threshold M] [--per-channel] [--L N] [-T N] [--maxpool S]\n"
            "                         [--finetune-qcfs N] [--finetune-bptt N] [--train-T N] [--lr X]\n"
            "                         [--optimizer sgd|adam] [--surrogate S] [--train-threshold] [--batch N]\n"
            "                         [--engine cpu] [--limit N] [--json]\n"
            "\n"
            "Converts the ANN in MODEL (.onnx) into a spiking network of integrate-and-fire neurons:\n"
            "calibrates a threshold λ per ReLU layer (or channel) on training images, replaces each ReLU\n"
            "by QCFS (clip-floor-shift with λ and L steps), then by IF neurons with θ = λ, v0 = θ/2 and\n"
            "reset by subtraction; then optionally fine-tunes (QCFS, then BPTT).  Prints the thresholds and\n"
            "each stage's test accuracy (ANN, QCFS-ANN, SNN by step), and saves everything in a project\n"
            "file (HDF5), the stage accuracies included.\n"
            "\n"
            "  -o, --output F   the project file to write (.ncsnn; written atomically)\n"
            "  --data DATASET   calibration uses its training split, accuracy its test split\n"
            "                   (default fashion-mnist); --mean, --std, --scale as for eval\n"
            "%s"
            "%s"
            "  --engine NAME    cpu (default) | gpu: calibration and evaluation\n"
            "  --limit N        test images for the accuracies (default: all)\n"
            "  --json           one JSON object as the last line\n",
            nc_cli_convert_help, nc_cli_finetune_help);
}

typedef struct convert_args {
    nc_cli_data data;
    nc_pipeline_options opts;
    nc_cli_finetune ft;
    const char *engine, *output, *model;
    int json;
} convert_args;

static int parse(int argc, char **argv, convert_args *a)
{
    static const struct option options[] = {NC_CLI_DATA_LONG_OPTIONS, NC_CLI_CONVERT_LONG_OPTIONS,
                                            NC_CLI_FINETUNE_LONG_OPTIONS,
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
        if (used == 0)
            used = nc_cli_finetune_option(&a->opts, &a->ft, opt, optarg);
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

/* What each stage of the pipeline reached on the test split. */
#define MAX_EVAL_T 4096
typedef struct stage_accuracy {
    const char *name;         /* "converted", "QCFS fine-tuned", "BPTT fine-tuned" */
    double ann, qcfs;         /* NAN when not measured                              */
    int T;                    /* SNN steps measured (0 = none)                      */
    double snn[MAX_EVAL_T];   /* accuracy after step t + 1                          */
} stage_accuracy;

static int evaluate_mode(nc_engine *engine, const nc_dataset *test, nc_mode mode, double *accuracy)
{
    nc_error err = {0};
    nc_eval_result r;
    if (nc_evaluate(engine, test, 100, mode, nc_cli_progress, NULL, &r, &err) != NC_OK)
        return nc_cli_error(&err);
    *accuracy = r.accuracy;
    return 0;
}

/* SNN test accuracy after every step up to T. */
static int evaluate_snn(nc_engine *engine, const nc_net *net, const nc_dataset *test, int T, stage_accuracy *acc)
{
    nc_simulate_options so = {.T = T, .skip_ann = 1, .skip_qcfs = 1};
    nc_record *rec = NULL;
    nc_error err = {0};
    nc_status st = nc_simulate(engine, net, test, &so, nc_cli_progress, NULL, &rec, &err);
    if (st == NC_OK) {
        acc->T = T;
        for (int t = 1; t <= T; t++)
            acc->snn[t - 1] = nc_record_accuracy(rec, t);
    }
    nc_record_free(rec);
    return st == NC_OK ? 0 : nc_cli_error(&err);
}

static void print_stages(const stage_accuracy *stages, int n, int64_t images)
{
    static const int steps[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
    int T = 0;
    for (int k = 0; k < n; k++)
        T = stages[k].T > T ? stages[k].T : T;
    printf("\nTest accuracy (%lld images)\n%-18s %8s %9s", (long long)images, "stage", "ANN", "QCFS-ANN");
    for (size_t j = 0; j < sizeof steps / sizeof steps[0] && steps[j] <= T; j++)
        printf("  SNN T=%-3d", steps[j]);
    printf("\n");
    for (int k = 0; k < n; k++) {
        const stage_accuracy *s = &stages[k];
        printf("%-18s ", s->name);
        if (isnan(s->ann))
            printf("%8s ", "-");
        else
            printf("%8.4f ", s->ann);
        if (isnan(s->qcfs))
            printf("%9s", "-");
        else
            printf("%9.4f", s->qcfs);
        for (size_t j = 0; j < sizeof steps / sizeof steps[0] && steps[j] <= T; j++)
            if (steps[j] <= s->T)
                printf("  %9.4f", s->snn[steps[j] - 1]);
            else
                printf("  %9s", "-");
        printf("\n");
    }
}

static void print_stages_json(nc_json *j, const stage_accuracy *stages, int n)
{
    nc_json_open(j, "stages", '[');
    for (int k = 0; k < n; k++) {
        nc_json_open(j, NULL, '{');
        nc_json_string(j, "stage", stages[k].name);
        nc_json_number(j, "ann_accuracy", stages[k].ann);
        nc_json_number(j, "qcfs_accuracy", stages[k].qcfs);
        nc_json_open(j, "snn_accuracy_by_step", '[');
        for (int t = 0; t < stages[k].T; t++)
            nc_json_number(j, NULL, stages[k].snn[t]);
        nc_json_close(j, ']');
        nc_json_close(j, '}');
    }
    nc_json_close(j, ']');
}

/* Metrics "<prefix>ann_accuracy", "<prefix>qcfs_accuracy", "<prefix>snn_accuracy_t<t>". */
static void store_stage(nc_project *p, const char *prefix, const stage_accuracy *s)
{
    char key[96];
    nc_error err = {0};
    if (!isnan(s->ann)) {
        snprintf(key, sizeof key, "%sann_accuracy", prefix);
        nc_project_set_metric(p, key, s->ann, &err);
    }
    if (!isnan(s->qcfs)) {
        snprintf(key, sizeof key, "%sqcfs_accuracy", prefix);
        nc_project_set_metric(p, key, s->qcfs, &err);
    }
    for (int t = 1; t <= s->T; t++) {
        snprintf(key, sizeof key, "%ssnn_accuracy_t%d", prefix, t);
        nc_project_set_metric(p, key, s->snn[t - 1], &err);
    }
}

typedef struct finetune_run {
    stage_accuracy stages[3];
    int n_stages;
    nc_train_result qcfs, bptt;
} finetune_run;

/* One fine-tuning stage; the engine is reloaded with the new weights. */
static int finetune_stage(convert_args *a, nc_engine *engine, nc_net *net, const nc_dataset *train,
                          nc_train_mode stage, nc_train_result *res)
{
    nc_error err = {0};
    int epochs = stage == NC_TRAIN_QCFS ? a->opts.finetune_qcfs_epochs : a->opts.finetune_bptt_epochs;
    printf("\n%s fine-tuning on the %s: %d epoch%s on %s, batch %d%s, %s lr %g, %s\n",
           stage == NC_TRAIN_QCFS ? "QCFS" : "BPTT", strcmp(a->opts.train.engine, "gpu") == 0 ? "GPU" : "CPU",
           epochs, epochs == 1 ? "" : "s", train->path,
           a->opts.train.batch_size, stage == NC_TRAIN_BPTT ? "" : " (QCFS-ANN)",
           nc_optimizer_name(a->opts.train.optimizer),
           a->opts.train.learning_rate > 0 ? a->opts.train.learning_rate
                                           : (a->opts.train.optimizer == NC_OPTIMIZER_SGD ? 1e-3 : 1e-4),
           stage == NC_TRAIN_BPTT ? nc_surrogate_name(a->opts.train.surrogate) : "straight-through floor");
    if (stage == NC_TRAIN_BPTT)
        printf("  T = %d steps, thresholds %s\n", a->opts.train.T, a->opts.train.train_threshold ? "trained" : "fixed");
    fflush(stdout);
    nc_pipeline_options o = a->opts;
    o.train.progress = nc_cli_train_progress;
    nc_status st = nc_pipeline_finetune(net, stage, train, &o, res, &err);
    if (st == NC_OK)
        st = nc_engine_load(engine, net, &err);
    if (st != NC_OK)
        return nc_cli_error(&err);
    printf("  kept epoch %d of %d (held-out accuracy %.4f, before %.4f), %.0f s, %.2f GB\n", res->best_epoch,
           res->epochs_run, res->best_val_accuracy, res->val_accuracy_before, res->seconds, res->memory_bytes / 1e9);
    return 0;
}

static stage_accuracy *next_stage(finetune_run *run, const char *name)
{
    stage_accuracy *s = &run->stages[run->n_stages++];
    *s = (stage_accuracy){.name = name, .ann = NAN, .qcfs = NAN};
    return s;
}

/* converted → [QCFS fine-tune] → [BPTT fine-tune], each stage measured. */
static int run_stages(convert_args *a, nc_engine *engine, nc_net *net, const nc_dataset *train,
                      const nc_dataset *test, finetune_run *run)
{
    int eval_T = a->ft.eval_T;
    if (eval_T == 0 && (a->opts.finetune_qcfs_epochs > 0 || a->opts.finetune_bptt_epochs > 0))
        eval_T = 32;
    stage_accuracy *s = next_stage(run, "converted");
    int rc = evaluate_mode(engine, test, NC_MODE_ANN, &s->ann);
    if (rc == 0)
        rc = evaluate_mode(engine, test, NC_MODE_QCFS, &s->qcfs);
    if (rc == 0 && a->opts.finetune_qcfs_epochs > 0) {
        rc = finetune_stage(a, engine, net, train, NC_TRAIN_QCFS, &run->qcfs);
        s = next_stage(run, "QCFS fine-tuned");
        if (rc == 0)
            rc = evaluate_mode(engine, test, NC_MODE_ANN, &s->ann);
        if (rc == 0)
            rc = evaluate_mode(engine, test, NC_MODE_QCFS, &s->qcfs);
    }
    if (rc == 0 && eval_T > 0)
        rc = evaluate_snn(engine, net, test, eval_T, s);
    if (rc == 0 && a->opts.finetune_bptt_epochs > 0) {
        rc = finetune_stage(a, engine, net, train, NC_TRAIN_BPTT, &run->bptt);
        s = next_stage(run, "BPTT fine-tuned");
        if (rc == 0)
            rc = evaluate_mode(engine, test, NC_MODE_QCFS, &s->qcfs);
        if (rc == 0 && eval_T > 0)
            rc = evaluate_snn(engine, net, test, eval_T, s);
    }
    return rc;
}

static void store_run(nc_project *p, const convert_args *a, const finetune_run *run, int64_t images)
{
    static const char *prefixes[3] = {"", "qcfs_finetuned_", "bptt_finetuned_"};
    nc_error err = {0};
    for (int k = 0; k < run->n_stages; k++) {
        const char *name = run->stages[k].name;
        store_stage(p, strcmp(name, "converted") == 0 ? prefixes[0]
                       : strcmp(name, "QCFS fine-tuned") == 0 ? prefixes[1] : prefixes[2], &run->stages[k]);
    }
    /* the final network's accuracies under plain names too, for readers */
    const stage_accuracy *last = &run->stages[run->n_stages - 1];
    if (run->n_stages > 1)
        store_stage(p, "final_", last);
    nc_project_set_metric(p, "test_images", (double)images, &err);
    nc_project_set_metric(p, "finetune_qcfs_epochs", a->opts.finetune_qcfs_epochs, &err);
    nc_project_set_metric(p, "finetune_bptt_epochs", a->opts.finetune_bptt_epochs, &err);
    if (a->opts.finetune_qcfs_epochs > 0)
        nc_project_set_metric(p, "finetune_qcfs_seconds", run->qcfs.seconds, &err);
    if (a->opts.finetune_bptt_epochs > 0) {
        nc_project_set_metric(p, "finetune_bptt_seconds", run->bptt.seconds, &err);
        nc_project_set_metric(p, "finetune_train_T", a->opts.train.T, &err);
    }
}

static void print_json(const convert_args *a, const finetune_run *run)
{
    nc_json j;
    nc_json_begin(&j, stdout);
    nc_json_string(&j, "model", a->model);
    nc_json_string(&j, "output", a->output);
    nc_json_string(&j, "threshold", nc_calib_method_name(a->opts.method));
    nc_json_bool(&j, "per_channel", a->opts.per_channel);
    nc_json_int(&j, "L", a->opts.levels);
    nc_json_number(&j, "ann_accuracy", run->stages[0].ann);
    nc_json_number(&j, "qcfs_accuracy", run->stages[run->n_stages - 1].qcfs);
    nc_json_int(&j, "finetune_qcfs_epochs", a->opts.finetune_qcfs_epochs);
    nc_json_int(&j, "finetune_bptt_epochs", a->opts.finetune_bptt_epochs);
    if (a->opts.finetune_bptt_epochs > 0)
        nc_json_int(&j, "train_T", a->opts.train.T);
    print_stages_json(&j, run->stages, run->n_stages);
    nc_json_end(&j);
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
    int rc = st != NC_OK ? nc_cli_error(&err) : 0;
    if (rc == 0) {
        char table[16384];
        printf("Converted %s (%s)\n", a->model, result.calibrated ? "calibrated" : "imported QCFS thresholds");
        printf("%s", nc_convert_summary_text(net, result.calibrated ? nc_calib_method_name(a->opts.method) : "imported",
                                             table, sizeof table));
        if (result.warnings[0])
            printf("Notes:\n%s\n", result.warnings);
        fflush(stdout);
    }
    static finetune_run run; /* large (the by-step arrays): not on the stack */
    memset(&run, 0, sizeof run);
    if (rc == 0)
        rc = run_stages(a, engine, net, train, test, &run);
    nc_engine_free(engine);
    if (rc != 0) {
        nc_pipeline_result_clear(&result);
        nc_net_free(net);
        return rc;
    }
    print_stages(run.stages, run.n_stages, test->count);
    nc_project *project = NULL; /* takes the net, also when it fails */
    st = nc_pipeline_make_project(net, a->model, &a->data.pp, &a->opts, &result, &project, &err);
    nc_pipeline_result_clear(&result);
    if (st != NC_OK)
        return nc_cli_error(&err);
    store_run(project, a, &run, test->count);
    st = nc_project_save(project, a->output, &err);
    if (st == NC_OK) {
        printf("Saved %s\n", a->output);
        if (a->json)
            print_json(a, &run);
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
    /* calibration reads the first --calib-images training images; fine-tuning
     * all of them */
    int finetune = a.opts.finetune_qcfs_epochs > 0 || a.opts.finetune_bptt_epochs > 0;
    nc_cli_data train_spec = a.data;
    train_spec.limit = finetune ? 0 : a.opts.calib_images;
    nc_dataset *train = nc_cli_open_data(&train_spec, NC_SPLIT_TRAIN);
    nc_dataset *test = train ? nc_cli_open_data(&a.data, NC_SPLIT_TEST) : NULL;
    if (!test) {
        nc_dataset_free(train);
        nc_net_free(net);
        return 1;
    }
    if (!a.opts.train.engine) /* the trainer follows --engine unless told */
        a.opts.train.engine = strcmp(a.engine, "gpu") == 0 ? "gpu" : "cpu";
    if (finetune && !a.ft.val_images_set)
        a.opts.train.val_count = train->count >= 50000 ? 5000 : train->count / 10;
    /* padding of random crops: a black pixel after the preprocessing */
    const nc_preprocess *pp = &a.data.pp;
    a.opts.train.crop_fill = pp->n_std > 0 && pp->std[0] != 0 ? (0.0f - (pp->n_mean > 0 ? pp->mean[0] : 0)) / pp->std[0]
                                                              : 0.0f;
    rc = convert(&a, net, train, test); /* takes the net */
    nc_dataset_free(train);
    nc_dataset_free(test);
    return rc;
}
