/* nc_cmd_sweep.c — `neurocuda sweep MODEL --threshold a,b,c`: one
 * calibration, several threshold choices, their accuracy-versus-T curves side
 * by side as a table and a PNG. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nc_cli.h"
#include "nc_cli_report.h"
#include "nc_plot.h"
#include "nc_runner.h"

#define MAX_METHODS 8 /* ≤ NC_RUNNER_MAX_ROWS */

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: neurocuda sweep MODEL --threshold M1,M2,... [--data DATASET] [--mean M] [--std S]\n"
            "                       [-T N] [--per-channel] [--L N] [--maxpool S] [--limit N]\n"
            "                       [--engine cpu] [--png FILE] [--json]\n"
            "\n"
            "Converts MODEL once per threshold choice (one shared calibration) and simulates each SNN for\n"
            "T steps on the test images: a table of accuracy by timestep, one column per choice, and with\n"
            "--png the curves side by side (also .svg or .pdf).\n"
            "\n"
            "  --threshold LIST comma-separated: max, p99, p99.9, p99.99, mmse (default p99.9,mmse)\n"
            "  -T N             timesteps (default 32; mmse is tuned for T)\n"
            "  --limit N        test images (default 1000)\n"
            "  --png FILE       write the chart\n"
            "%s",
            nc_cli_convert_help);
}

typedef struct sweep_args {
    nc_cli_data data;
    nc_pipeline_options opts;
    nc_calib_method methods[MAX_METHODS];
    int n_methods, T, json;
    const char *engine, *png, *model;
} sweep_args;

static int parse_methods(sweep_args *a, const char *list)
{
    char copy[256];
    snprintf(copy, sizeof copy, "%s", list);
    a->n_methods = 0;
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (a->n_methods == MAX_METHODS || nc_calib_method_parse(tok, &a->methods[a->n_methods]) != 0) {
            fprintf(stderr, "neurocuda: --threshold takes up to %d of max, p99, p99.9, p99.99, mmse; got '%s'\n",
                    MAX_METHODS, tok);
            return -1;
        }
        a->n_methods++;
    }
    return a->n_methods > 0 ? 1 : -1;
}

static int parse(int argc, char **argv, sweep_args *a)
{
    static const struct option options[] = {NC_CLI_DATA_LONG_OPTIONS, NC_CLI_CONVERT_LONG_OPTIONS,
                                            {"engine", required_argument, NULL, NC_OPT_ENGINE},
                                            {"png", required_argument, NULL, NC_OPT_PNG},
                                            {"json", no_argument, NULL, NC_OPT_JSON},
                                            {"help", no_argument, NULL, 'h'},
                                            {0}};
    int opt;
    while ((opt = getopt_long(argc, argv, "hT:", options, NULL)) != -1) {
        int used = opt == NC_OPT_THRESHOLD ? parse_methods(a, optarg) : nc_cli_data_option(&a->data, opt, optarg);
        if (used == 0 && opt == 'T') {
            long v = nc_cli_parse_long("-T", optarg, 1, 100000);
            a->T = (int)v;
            used = v < 0 ? -1 : 1;
        }
        if (used == 0)
            used = nc_cli_convert_option(&a->opts, opt, optarg);
        if (used < 0)
            return 2;
        if (used)
            continue;
        switch (opt) {
        case NC_OPT_ENGINE: a->engine = optarg; break;
        case NC_OPT_PNG: a->png = optarg; break;
        case NC_OPT_JSON: a->json = 1; break;
        default: return nc_cli_usage_exit(opt, usage);
        }
    }
    a->model = nc_cli_operand(argc, argv, 1, "sweep: give exactly one MODEL (.onnx)", usage);
    a->opts.target_T = a->T;
    return a->model ? -1 : 2;
}

typedef struct sweep_curves {
    int n, T;
    char labels[MAX_METHODS][32];
    double *acc[MAX_METHODS]; /* [T] each */
    double ann;
} sweep_curves;

static void draw_sweep(cairo_t *cr, double w, double h, void *user)
{
    const sweep_curves *c = user;
    double *x = malloc((size_t)c->T * sizeof *x);
    if (!x)
        return;
    for (int t = 0; t < c->T; t++)
        x[t] = t + 1;
    nc_plot_series series[MAX_METHODS];
    for (int k = 0; k < c->n; k++)
        series[k] = (nc_plot_series){c->labels[k], c->T, x, c->acc[k]};
    nc_plot_hline ann = {"ANN", c->ann};
    nc_plot_lines_spec spec = {.title = "SNN accuracy versus timesteps, by threshold choice",
                               .x_label = "timestep t", .y_label = "accuracy", .log2_x = c->T >= 4,
                               .n_series = c->n, .series = series, .n_hlines = isfinite(c->ann), .hlines = &ann};
    nc_plot_style st;
    nc_plot_style_light(&st);
    nc_plot_lines(cr, w, h, &st, &spec);
    free(x);
}

/* The curves of the runner's rows (one per method); they point into it. */
static int take_curves(const nc_runner *r, sweep_curves *c)
{
    for (int k = 0; k < c->n; k++) {
        const nc_stage_row *row = nc_runner_row(r, k);
        if (!row || row->T != c->T)
            return 0;
        c->acc[k] = row->snn;
        snprintf(c->labels[k], sizeof c->labels[k], "%s", row->name);
        c->ann = row->ann;
    }
    return 1;
}

static void print_curves(const sweep_args *a, const sweep_curves *c, const nc_dataset *test)
{
    int steps[40], n = nc_cli_table_steps(a->T, steps, 40);
    printf("\nSNN accuracy by timestep on %lld test images (ANN %.4f)\n  %6s", (long long)test->count, c->ann, "t");
    for (int k = 0; k < c->n; k++)
        printf("  %12s", c->labels[k]);
    printf("\n");
    for (int i = 0; i < n; i++) {
        printf("  %6d", steps[i]);
        for (int k = 0; k < c->n; k++)
            printf("  %12.4f", c->acc[k][steps[i] - 1]);
        printf("\n");
    }
    if (a->json) {
        nc_json j;
        nc_json_begin(&j, stdout);
        nc_json_string(&j, "model", a->model);
        nc_json_int(&j, "T", a->T);
        nc_json_number(&j, "ann_accuracy", c->ann);
        nc_json_open(&j, "accuracy_by_step", '{');
        for (int k = 0; k < c->n; k++) {
            nc_json_open(&j, c->labels[k], '[');
            for (int t = 0; t < a->T; t++)
                nc_json_number(&j, NULL, c->acc[k][t]);
            nc_json_close(&j, ']');
        }
        nc_json_close(&j, '}');
        nc_json_end(&j);
    }
}

/* One calibration, then each method converted and measured: the runner's
 * plan for a description with several methods. */
static nc_runner_desc describe(const sweep_args *a, const nc_net *net)
{
    nc_runner_desc d = nc_cli_runner_desc(net, a->model, &a->data, a->engine, &a->opts);
    d.n_methods = a->n_methods;
    memcpy(d.methods, a->methods, sizeof a->methods);
    d.eval_T = a->T;
    d.skip_qcfs = 1;
    return d;
}

static int sweep(sweep_args *a, const nc_net *net)
{
    nc_runner_desc d = describe(a, net);
    nc_runner_observer obs = {.progress = nc_cli_progress};
    nc_runner *r = NULL;
    nc_error err = {0};
    sweep_curves curves = {.n = a->n_methods, .T = a->T, .ann = NAN};
    nc_status st = nc_cli_run_job(&d, &obs, &r, &err);
    if (st == NC_OK && !take_curves(r, &curves))
        st = nc_fail(&err, NC_ERR_MEMORY, "the sweep measured fewer curves than methods");
    int rc = st == NC_OK ? 0 : nc_cli_error(&err);
    if (rc == 0) {
        print_curves(a, &curves, nc_runner_test_set(r));
        char msg[1024];
        if (a->png && nc_plot_save(a->png, 960, 540, draw_sweep, &curves, msg, sizeof msg) != 0) {
            fprintf(stderr, "neurocuda: %s\n", msg);
            rc = 1;
        } else if (a->png)
            printf("Chart written to %s\n", a->png);
    }
    nc_runner_free(r);
    return rc;
}

int nc_cmd_sweep(int argc, char **argv)
{
    sweep_args a = {.engine = "cpu", .T = 32};
    nc_cli_data_init(&a.data);
    a.data.limit = 1000;
    a.opts = nc_pipeline_options_default();
    parse_methods(&a, "p99.9,mmse");
    int rc = parse(argc, argv, &a);
    if (rc >= 0)
        return rc;
    nc_net *net = nc_cli_load_model(a.model);
    rc = net ? sweep(&a, net) : 1;
    nc_net_free(net);
    return rc;
}
