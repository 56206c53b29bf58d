/* nc_cmd_convert.c — `neurocuda convert MODEL -o OUT.ncsnn`: calibrate,
 * QCFS, IF neurons; prints each stage's accuracy and stores it in the project. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <math.h>

#include "nc_cli.h"
#include "nc_cli_finetune.h"
#include "nc_recipe.h"
#include "nc_runner.h"

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: neurocuda convert MODEL -o OUT.ncsnn [--data DATASET] [--mean M] [--std S]\n"
            "                         [--threshold M] [--per-channel] [--L N] [-T N] [--maxpool S]\n"
            "                         [--finetune-qcfs N] [--finetune-bptt N] [--train-T N] [--lr X]\n"
            "                         [--optimizer sgd|adam] [--surrogate S] [--train-threshold] [--batch N]\n"
            "                         [--calibrate-bias T] [--distill A[,TAU]] [--target-T N [--time-budget MIN]]\n"
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
            "The low-latency recipe:\n"
            "  --target-T N     choose everything for an N-step SNN by the rules of docs/FINETUNING.md\n"
            "                   (thresholds, L = N, QCFS, bias calibration, BPTT with distillation,\n"
            "                   keeping the best stage on held-out images); prints what and why.\n"
            "                   Conversion and fine-tuning options given with it win over its choices\n"
            "                   (e.g. --distill 0 turns distillation off)\n"
            "  --time-budget M  minutes for the whole recipe (default 5): training epochs fit into it\n"
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
    int target_T;         /* --target-T: the recipe (0: none) */
    double budget_minutes;
    nc_recipe recipe;
    /* the conversion and fine-tuning options as given, replayed over the
     * recipe's choices: what the user set wins */
    int n_given;
    struct { int opt; const char *arg; } given[64];
} convert_args;

/* The defaults, before the command line. */
static void args_init(convert_args *a)
{
    *a = (convert_args){.engine = "cpu"};
    nc_cli_data_init(&a->data);
    a->opts = nc_pipeline_options_default();
}

static int parse(int argc, char **argv, convert_args *a)
{
    static const struct option options[] = {NC_CLI_DATA_LONG_OPTIONS, NC_CLI_CONVERT_LONG_OPTIONS,
                                            NC_CLI_FINETUNE_LONG_OPTIONS,
                                            {"engine", required_argument, NULL, NC_OPT_ENGINE},
                                            {"output", required_argument, NULL, 'o'},
                                            {"json", no_argument, NULL, NC_OPT_JSON},
                                            {"target-T", required_argument, NULL, NC_OPT_TARGET_T},
                                            {"time-budget", required_argument, NULL, NC_OPT_TIME_BUDGET},
                                            {"help", no_argument, NULL, 'h'},
                                            {0}};
    args_init(a);
    int opt;
    while ((opt = getopt_long(argc, argv, "ho:T:", options, NULL)) != -1) {
        int used = nc_cli_data_option(&a->data, opt, optarg), pipeline = 0;
        if (used == 0) {
            if ((used = nc_cli_convert_option(&a->opts, opt, optarg)) == 0)
                used = nc_cli_finetune_option(&a->opts, &a->ft, opt, optarg);
            pipeline = used > 0;
        }
        if (used < 0)
            return 2;
        if (pipeline && a->n_given < 64) {
            a->given[a->n_given].opt = opt;
            a->given[a->n_given++].arg = optarg;
        }
        if (used)
            continue;
        switch (opt) {
        case NC_OPT_ENGINE: a->engine = optarg; break;
        case 'o': a->output = optarg; break;
        case NC_OPT_JSON: a->json = 1; break;
        case NC_OPT_TARGET_T:
            if ((a->target_T = (int)nc_cli_parse_long("--target-T", optarg, 1, 4096)) < 0)
                return 2;
            break;
        case NC_OPT_TIME_BUDGET:
            if (nc_cli_parse_double("--time-budget", optarg, &a->budget_minutes) != 0 || !(a->budget_minutes > 0)) {
                fprintf(stderr, "neurocuda: --time-budget needs minutes > 0, got '%s'\n", optarg);
                return 2;
            }
            break;
        default: return nc_cli_usage_exit(opt, usage);
        }
    }
    a->model = nc_cli_operand(argc, argv, a->output != NULL, "convert: give one MODEL and -o OUT.ncsnn", usage);
    return a->model ? -1 : 2; /* -1: go on */
}

static void print_stages(const nc_stage_row *rows, int n, int64_t images)
{
    static const int steps[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
    int T = 0;
    for (int k = 0; k < n; k++)
        T = rows[k].T > T ? rows[k].T : T;
    printf("\nTest accuracy (%lld images)\n%-18s %8s %9s", (long long)images, "stage", "ANN", "QCFS-ANN");
    for (size_t j = 0; j < sizeof steps / sizeof steps[0] && steps[j] <= T; j++)
        printf("  SNN T=%-3d", steps[j]);
    printf("\n");
    for (int k = 0; k < n; k++) {
        const nc_stage_row *s = &rows[k];
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

/* A fine-tuned row: the epochs its stage ran and the one it kept (0: none
 * beat the net from before the stage). */
static void print_epochs_json(nc_json *j, const nc_runner *r, const nc_stage_row *row)
{
    nc_train_result res;
    int qcfs = strcmp(row->name, "QCFS fine-tuned") == 0, bptt = strcmp(row->name, "BPTT fine-tuned") == 0;
    if ((qcfs || bptt) && nc_runner_train_result(r, qcfs ? NC_TRAIN_QCFS : NC_TRAIN_BPTT, &res)) {
        nc_json_int(j, "epochs_run", res.epochs_run);
        nc_json_int(j, "kept_epoch", res.best_epoch);
        nc_json_int(j, "rollbacks", res.rollbacks);
    }
}

/* Every row: its accuracies, the time of the stage that made it and, with
 * the recipe, its held-out accuracy. */
static void print_stages_json(nc_json *j, const nc_runner *r, const nc_stage_row *rows, int n)
{
    nc_json_open(j, "stages", '[');
    for (int k = 0; k < n; k++) {
        nc_json_open(j, NULL, '{');
        nc_json_string(j, "stage", rows[k].name);
        if (nc_runner_row_seconds(r, k) > 0)
            nc_json_number(j, "seconds", nc_runner_row_seconds(r, k));
        print_epochs_json(j, r, &rows[k]);
        if (nc_runner_held_out_accuracy(r, k) >= 0)
            nc_json_number(j, "held_out_accuracy", nc_runner_held_out_accuracy(r, k));
        nc_json_number(j, "ann_accuracy", rows[k].ann);
        nc_json_number(j, "qcfs_accuracy", rows[k].qcfs);
        nc_json_open(j, "snn_accuracy_by_step", '[');
        for (int t = 0; t < rows[k].T; t++)
            nc_json_number(j, NULL, rows[k].snn[t]);
        nc_json_close(j, ']');
        nc_json_close(j, '}');
    }
    nc_json_close(j, ']');
}

static void print_finetune_header(const convert_args *a, const nc_runner *r, const nc_run_stage *s)
{
    nc_train_mode stage = s->mode;
    const nc_train_options *t = nc_runner_train_options(r);
    int epochs = stage == NC_TRAIN_QCFS ? a->opts.finetune_qcfs_epochs : a->opts.finetune_bptt_epochs;
    printf("\n%s fine-tuning on the %s: %d epoch%s on %s, batch %d%s, %s lr %g, %s\n",
           stage == NC_TRAIN_QCFS ? "QCFS" : "BPTT", strcmp(t->engine, "gpu") == 0 ? "GPU" : "CPU", epochs,
           epochs == 1 ? "" : "s", nc_runner_train_set(r)->path, t->batch_size,
           stage == NC_TRAIN_BPTT ? "" : " (QCFS-ANN)", nc_optimizer_name(t->optimizer),
           t->learning_rate > 0 ? t->learning_rate : (t->optimizer == NC_OPTIMIZER_SGD ? 1e-3 : 1e-4),
           stage == NC_TRAIN_BPTT ? nc_surrogate_name(t->surrogate) : "straight-through floor");
    if (stage == NC_TRAIN_BPTT)
        printf("  T = %d steps, thresholds %s\n", t->T, t->train_threshold ? "trained" : "fixed");
    if (t->distill_alpha > 0)
        printf("  distillation from the source ANN: weight %g, temperature %g\n", t->distill_alpha,
               t->distill_tau > 0 ? t->distill_tau : NC_TRAIN_DEFAULT_TAU);
    const nc_budget_plan *plan = nc_runner_budget_plan(r, (int)(s - nc_runner_stage(r, 0)));
    if (plan)
        printf("  %s\n", plan->reason);
    fflush(stdout);
}

static void print_converted(const convert_args *a, const nc_runner *r)
{
    const nc_pipeline_result *result = nc_runner_pipeline_result(r);
    char table[16384];
    printf("Converted %s (%s)\n", a->model, result->calibrated ? "calibrated" : "imported QCFS thresholds");
    printf("%s", nc_convert_summary_text(nc_runner_net(r),
                                         result->calibrated ? nc_calib_method_name(a->opts.method) : "imported",
                                         table, sizeof table));
    if (result->warnings[0])
        printf("Notes:\n%s\n", result->warnings);
    fflush(stdout);
}

static void print_bias_calibration(const nc_runner *r)
{
    const nc_bias_calib_result *b = nc_runner_bias_result(r);
    if (!b)
        return;
    const nc_net *net = nc_runner_net(r);
    printf("\nBias calibration for T = %d on %lld training images: mean error of the rate (φ − a) per layer\n",
           b->T, (long long)b->images);
    printf("%-24s %-24s %10s %10s\n", "layer", "bias of", "before", "after");
    for (int l = 0; l < b->n_layers; l++) {
        const nc_bias_layer *bl = &b->layers[l];
        printf("%-24s %-24s %10.4f %10.4f\n", net->nodes[bl->node].name,
               bl->carrier >= 0 ? net->nodes[bl->carrier].name : "(none)", bl->error_before, bl->error_after);
    }
    if (b->check_before >= 0)
        printf("held-out SNN accuracy at T = %d: %.4f → %.4f: %s\n", b->T, b->check_before, b->check_after,
               b->kept ? "kept" : "undone");
    if (b->notes[0])
        printf("Notes:\n%s", b->notes);
    fflush(stdout);
}

/* The runner's stages as they begin and end: what `convert` prints. */
static nc_status on_event(void *user, nc_runner *r, const nc_run_stage *stage, nc_runner_event ev, nc_error *err)
{
    (void)err;
    const convert_args *a = user;
    nc_train_result res;
    if (stage->kind == NC_RUN_CONVERT && ev == NC_RUNNER_STAGE_END)
        print_converted(a, r);
    else if (stage->kind == NC_RUN_FINETUNE && ev == NC_RUNNER_STAGE_BEGIN)
        print_finetune_header(a, r, stage);
    else if (stage->kind == NC_RUN_FINETUNE && ev == NC_RUNNER_STAGE_END && nc_runner_train_result(r, stage->mode, &res))
        printf("  kept epoch %d of %d (held-out accuracy %.4f, before %.4f; %d epochs undone), %.0f s, %.2f GB\n",
               res.best_epoch, res.epochs_run, res.best_val_accuracy, res.val_accuracy_before, res.rollbacks,
               res.seconds, res.memory_bytes / 1e9);
    else if (stage->kind == NC_RUN_CALIBRATE_BIAS && ev == NC_RUNNER_STAGE_END)
        print_bias_calibration(r);
    else if (stage->kind == NC_RUN_SAVE && ev == NC_RUNNER_STAGE_BEGIN)
        print_stages(nc_runner_row(r, 0), nc_runner_row_count(r), nc_runner_test_set(r)->count);
    else if (stage->kind == NC_RUN_SAVE && ev == NC_RUNNER_STAGE_END)
        printf("Saved %s\n", a->output);
    return NC_OK;
}

static void print_bias_json(nc_json *j, const nc_runner *r)
{
    const nc_bias_calib_result *b = nc_runner_bias_result(r);
    if (!b)
        return;
    nc_json_open(j, "bias_calibration", '{');
    nc_json_int(j, "T", b->T);
    nc_json_bool(j, "kept", b->kept);
    nc_json_number(j, "check_before", b->check_before >= 0 ? b->check_before : NAN);
    nc_json_number(j, "check_after", b->check_after >= 0 ? b->check_after : NAN);
    nc_json_open(j, "layers", '[');
    for (int l = 0; l < b->n_layers; l++) {
        nc_json_open(j, NULL, '{');
        nc_json_string(j, "layer", nc_runner_net(r)->nodes[b->layers[l].node].name);
        nc_json_number(j, "error_before", b->layers[l].error_before);
        nc_json_number(j, "error_after", b->layers[l].error_after);
        nc_json_close(j, '}');
    }
    nc_json_close(j, ']');
    nc_json_close(j, '}');
}

static void print_times_json(nc_json *j, const nc_runner *r)
{
    nc_json_open(j, "stage_seconds", '[');
    for (int i = 0; i < nc_runner_stage_count(r); i++) {
        nc_json_open(j, NULL, '{');
        nc_json_string(j, "stage", nc_runner_stage(r, i)->label);
        nc_json_number(j, "seconds", nc_runner_stage_seconds(r, i));
        const nc_budget_plan *plan = nc_runner_budget_plan(r, i);
        if (plan) {
            nc_json_number(j, "budget_seconds", plan->seconds);
            nc_json_number(j, "reserved_seconds", plan->reserve);
            nc_json_bool(j, "over_full", plan->over_full);
        }
        nc_json_close(j, '}');
    }
    nc_json_close(j, ']');
    int best = nc_runner_best_row(r);
    if (best >= 0) {
        nc_json_int(j, "target_T", nc_runner_get_desc(r)->keep_best_T);
        nc_json_string(j, "kept_stage", nc_runner_row(r, best)->name);
        nc_json_number(j, "kept_held_out_accuracy", nc_runner_held_out_accuracy(r, best));
    }
}

static void print_json(const convert_args *a, const nc_runner *r)
{
    int n = nc_runner_row_count(r);
    const nc_stage_row *rows = nc_runner_row(r, 0);
    nc_json j;
    nc_json_begin(&j, stdout);
    nc_json_string(&j, "model", a->model);
    nc_json_string(&j, "output", a->output);
    nc_json_string(&j, "threshold", nc_calib_method_name(a->opts.method));
    nc_json_bool(&j, "per_channel", a->opts.per_channel);
    nc_json_int(&j, "L", a->opts.levels);
    nc_json_number(&j, "ann_accuracy", rows[0].ann);
    nc_json_number(&j, "qcfs_accuracy", rows[n - 1].qcfs);
    nc_json_int(&j, "finetune_qcfs_epochs", a->opts.finetune_qcfs_epochs);
    nc_json_int(&j, "finetune_bptt_epochs", a->opts.finetune_bptt_epochs);
    if (a->opts.finetune_bptt_epochs > 0)
        nc_json_int(&j, "train_T", a->opts.train.T);
    print_stages_json(&j, r, rows, n);
    print_bias_json(&j, r);
    print_times_json(&j, r);
    nc_json_end(&j);
}

/* The job; with --target-T the recipe's plan is written into it. */
static nc_status describe(convert_args *a, const nc_net *net, nc_runner_desc *d, nc_error *err)
{
    *d = nc_cli_runner_desc(net, a->model, &a->data, a->engine, &a->opts);
    d->held_out = a->ft.val_images_set ? a->opts.train.val_count : -1;
    d->eval_T = a->ft.eval_T;
    d->output = a->output;
    if (a->target_T > 0) {
        nc_status st = nc_recipe_describe(net, a->target_T, a->budget_minutes, d, &a->recipe, err);
        nc_cli_finetune ignored = a->ft;
        for (int k = 0; k < a->n_given; k++) /* the user's options win over the recipe's */
            if (nc_cli_convert_option(&d->pipeline, a->given[k].opt, a->given[k].arg) == 0)
                nc_cli_finetune_option(&d->pipeline, &ignored, a->given[k].opt, a->given[k].arg);
        a->opts = d->pipeline; /* what the tables and the --json line report */
        return st;
    }
    if (a->budget_minutes > 0)
        return nc_fail(err, NC_ERR_ARGUMENT, "--time-budget is the budget of the --target-T recipe; give both");
    return NC_OK;
}

static void print_recipe(const convert_args *a)
{
    printf("Recipe for T = %d (docs/FINETUNING.md, \"The --target-T recipe\"):\n", a->target_T);
    if (a->n_given > 0)
        printf("  (the %d option%s given on the command line win over these)\n", a->n_given, a->n_given == 1 ? "" : "s");
    for (const char *line = a->recipe.reasons; *line;) {
        const char *end = strchr(line, '\n');
        int len = end ? (int)(end - line) : (int)strlen(line);
        printf("  %.*s\n", len, line);
        line += len + (end ? 1 : 0);
    }
    printf("\n");
    fflush(stdout);
}

/* Each stage's time, and with the recipe which stage the net comes from. */
static void print_stage_times(const nc_runner *r)
{
    double total = 0, budget = nc_runner_get_desc(r)->time_budget;
    printf("\nStage times:");
    for (int i = 0; i < nc_runner_stage_count(r); i++) {
        printf("%s %s %.1f s", i ? "," : "", nc_runner_stage(r, i)->label, nc_runner_stage_seconds(r, i));
        total += nc_runner_stage_seconds(r, i);
    }
    printf("\n");
    if (budget > 0)
        printf("Total %.1f s of the %.1f s time budget%s\n", total, budget, total > budget ? ": over it" : "");
    int best = nc_runner_best_row(r);
    if (best >= 0)
        printf("Kept: %s (held-out accuracy at T = %d: %.4f)\n", nc_runner_row(r, best)->name,
               nc_runner_get_desc(r)->keep_best_T, nc_runner_held_out_accuracy(r, best));
}

static int convert(convert_args *a, const nc_net *net)
{
    nc_runner_desc d;
    nc_runner_observer obs = {.user = a, .progress = nc_cli_progress, .train_progress = nc_cli_train_progress,
                              .event = on_event};
    nc_runner *r = NULL;
    nc_error err = {0};
    nc_status st = describe(a, net, &d, &err);
    if (st == NC_OK && a->target_T > 0)
        print_recipe(a);
    if (st == NC_OK)
        st = nc_cli_run_job(&d, &obs, &r, &err);
    if (st == NC_OK)
        print_stage_times(r);
    if (st == NC_OK && a->json)
        print_json(a, r);
    nc_runner_free(r);
    return st == NC_OK ? 0 : nc_cli_error(&err);
}

int nc_cli_convert_describe(int argc, char **argv, const nc_net *net, nc_runner_desc *out)
{
    static convert_args a; /* the description points into it */
    int rc = parse(argc, argv, &a);
    if (rc >= 0)
        return rc == 0 ? 2 : rc;
    nc_error err = {0};
    if (describe(&a, net, out, &err) != NC_OK)
        return nc_cli_error(&err);
    return 0;
}

int nc_cmd_convert(int argc, char **argv)
{
    convert_args a;
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
    rc = convert(&a, net);
    nc_net_free(net);
    return rc;
}
