/* nc_cli_report.c — tables, JSON and plots of a simulation record. */
#include "nc_cli_report.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "nc_plot.h"

int nc_cli_table_steps(int T, int *steps, int max)
{
    int n = 0;
    for (int t = 1; t <= T && n < max; t *= 2)
        steps[n++] = t;
    if (n < max && steps[n - 1] != T)
        steps[n++] = T;
    return n;
}

void nc_cli_print_accuracy(const nc_record *rec)
{
    int steps[40], n = nc_cli_table_steps(nc_record_T(rec), steps, 40);
    printf("\nAccuracy by timestep (%lld images; the output accumulates over steps 1..t)\n",
           (long long)nc_record_samples(rec));
    printf("  %6s  %8s\n", "t", "accuracy");
    for (int i = 0; i < n; i++)
        printf("  %6d  %8.4f\n", steps[i], nc_record_accuracy(rec, steps[i]));
    printf("  %6s  %8.4f\n  %6s  %8.4f\n", "ANN", nc_record_ann_accuracy(rec), "QCFS", nc_record_qcfs_accuracy(rec));
}

void nc_cli_print_layers(const nc_record *rec)
{
    printf("\nPer layer (rate = spikes / (neurons × samples × steps); errors are mean squared, φ = θ·N/T;\n"
           "local = φ − ReLU(z) = clip + quant + uneven, z = mean input current; total = φ − a, a = ANN)\n");
    printf("  %-22s %9s %8s %8s %8s %10s %10s %10s %10s %10s %9s\n", "layer", "neurons", "rate", "dead", "satur.",
           "total", "local", "clip", "quant", "uneven", "SOPs/img");
    int64_t samples = nc_record_samples(rec);
    for (int l = 0; l < nc_record_layer_count(rec); l++) {
        nc_layer_stats s;
        nc_record_layer_stats(rec, l, &s);
        printf("  %-22.22s %9lld %8.4f %8.4f %8.4f %10.3g %10.3g %10.3g %10.3g %10.3g %9.3g\n", s.name,
               (long long)s.neurons, s.firing_rate, s.dead_fraction, s.saturated_fraction,
               s.has_ann ? s.total.mse : NAN, s.local.mse, s.clip.mse, s.quant.mse, s.uneven.mse,
               samples ? s.sops / (double)samples : NAN);
    }
    nc_record_totals t;
    nc_record_get_totals(rec, &t);
    printf("  synaptic operations: %.4g per image; the ANN spends %.4g MACs per image (SOPs/MACs = %.3f)\n",
           samples ? t.sops / (double)samples : NAN, samples ? t.ann_macs / (double)samples : NAN, t.sops_per_mac);
}

static void json_errors(nc_json *j, const char *key, const nc_error_stats *e)
{
    nc_json_open(j, key, '{');
    nc_json_number(j, "mean", e->mean);
    nc_json_number(j, "mse", e->mse);
    nc_json_number(j, "mean_abs", e->mean_abs);
    nc_json_close(j, '}');
}

void nc_cli_json_record(nc_json *j, const nc_record *rec)
{
    int T = nc_record_T(rec);
    nc_json_int(j, "T", T);
    nc_json_int(j, "images", nc_record_samples(rec));
    nc_json_open(j, "accuracy_by_step", '[');
    for (int t = 1; t <= T; t++)
        nc_json_number(j, NULL, nc_record_accuracy(rec, t));
    nc_json_close(j, ']');
    nc_json_number(j, "accuracy", nc_record_accuracy(rec, T));
    nc_json_number(j, "ann_accuracy", nc_record_ann_accuracy(rec));
    nc_json_number(j, "qcfs_accuracy", nc_record_qcfs_accuracy(rec));
    int layers = nc_record_layer_count(rec);
    nc_json_open(j, "firing_rate_by_layer", '{');
    for (int l = 0; l < layers; l++) {
        nc_layer_stats s;
        nc_record_layer_stats(rec, l, &s);
        nc_json_number(j, s.name, s.firing_rate);
    }
    nc_json_close(j, '}');
    nc_json_open(j, "calibration_error_by_layer", '{');
    for (int l = 0; l < layers; l++) {
        nc_layer_stats s;
        nc_record_layer_stats(rec, l, &s);
        nc_json_open(j, s.name, '{');
        nc_json_number(j, "total_mse", s.has_ann ? s.total.mse : NAN);
        nc_json_number(j, "total_rel_l2", s.has_ann ? s.total.rel_l2 : NAN);
        nc_json_number(j, "local_mse", s.local.mse);
        json_errors(j, "clip", &s.clip);
        json_errors(j, "quant", &s.quant);
        json_errors(j, "uneven", &s.uneven);
        nc_json_number(j, "clipped_fraction", s.clipped_fraction);
        nc_json_number(j, "dead_fraction", s.dead_fraction);
        nc_json_number(j, "saturated_fraction", s.saturated_fraction);
        nc_json_close(j, '}');
    }
    nc_json_close(j, '}');
    nc_record_totals tot;
    nc_record_get_totals(rec, &tot);
    nc_json_number(j, "sops_per_mac", tot.sops_per_mac);
}

/* ---- plots --------------------------------------------------------------- */

typedef struct plot_job {
    const nc_record *rec;
    const char *label;
} plot_job;

static void draw_accuracy(cairo_t *cr, double w, double h, void *user)
{
    const plot_job *job = user;
    int T = nc_record_T(job->rec);
    double *x = malloc((size_t)T * sizeof *x), *y = malloc((size_t)T * sizeof *y);
    if (!x || !y) {
        free(x), free(y);
        return;
    }
    for (int t = 1; t <= T; t++)
        x[t - 1] = t, y[t - 1] = nc_record_accuracy(job->rec, t);
    nc_plot_series series = {job->label, T, x, y};
    nc_plot_hline lines[2] = {{"ANN", nc_record_ann_accuracy(job->rec)},
                              {"QCFS-ANN", nc_record_qcfs_accuracy(job->rec)}};
    int n_lines = isfinite(lines[1].y) ? 2 : isfinite(lines[0].y) ? 1 : 0;
    nc_plot_lines_spec spec = {.title = "Accuracy versus timesteps", .x_label = "timestep t",
                               .y_label = "accuracy", .log2_x = T >= 4, .n_series = 1, .series = &series,
                               .n_hlines = n_lines, .hlines = lines};
    nc_plot_style st;
    nc_plot_style_light(&st);
    nc_plot_lines(cr, w, h, &st, &spec);
    free(x), free(y);
}

/* Per-layer values of one kind, for the bar charts. */
typedef enum layer_chart { CHART_RATES, CHART_ERRORS, CHART_SOPS } layer_chart;

typedef struct bars_job {
    const nc_record *rec;
    layer_chart kind;
} bars_job;

static void fill_layer_values(const nc_record *rec, layer_chart kind, const char **names, double *values)
{
    double samples = (double)nc_record_samples(rec);
    for (int l = 0; l < nc_record_layer_count(rec); l++) {
        nc_layer_stats s;
        nc_record_layer_stats(rec, l, &s);
        names[l] = s.name;
        double *v = values + 3 * l;
        if (kind == CHART_RATES)
            v[0] = s.firing_rate, v[1] = s.dead_fraction, v[2] = s.saturated_fraction;
        else if (kind == CHART_ERRORS)
            v[0] = s.clip.mse, v[1] = s.quant.mse, v[2] = s.uneven.mse;
        else
            v[0] = s.sops / samples, v[1] = s.ann_macs / samples, v[2] = NAN;
    }
}

static void draw_layer_bars(cairo_t *cr, double w, double h, void *user)
{
    const bars_job *job = user;
    int layers = nc_record_layer_count(job->rec);
    const char **names = calloc((size_t)layers + 1, sizeof *names);
    double *values = calloc((size_t)layers * 3 + 1, sizeof *values);
    if (!names || !values) {
        free(names), free(values);
        return;
    }
    fill_layer_values(job->rec, job->kind, names, values);
    static const char *rate_groups[3] = {"firing rate", "dead fraction", "saturated fraction"};
    static const char *error_groups[3] = {"clipping", "quantisation", "unevenness"};
    static const char *sops_groups[3] = {"SNN synaptic ops", "ANN MACs", ""};
    nc_plot_bars_spec spec = {.n_categories = layers, .categories = names, .n_groups = 3, .values = values};
    if (job->kind == CHART_RATES)
        spec.title = "Firing rate per layer", spec.y_label = "fraction", spec.group_labels = rate_groups;
    else if (job->kind == CHART_ERRORS)
        spec.title = "Calibration error per layer (MSE, stacked)", spec.y_label = "mean squared error",
        spec.group_labels = error_groups, spec.stacked = 1;
    else
        spec.title = "Synaptic operations vs ANN MACs per image", spec.y_label = "operations per image",
        spec.group_labels = sops_groups, spec.n_groups = 2;
    if (job->kind == CHART_SOPS) { /* two values per layer: repack [l][3] → [l][2] */
        for (int l = 0; l < layers; l++)
            values[2 * l] = values[3 * l], values[2 * l + 1] = values[3 * l + 1];
    }
    nc_plot_style st;
    nc_plot_style_light(&st);
    nc_plot_bars(cr, w, h, &st, &spec);
    free(names), free(values);
}

/* The raster of the first layer's first sample, repacked per neuron. */
static void draw_raster(cairo_t *cr, double w, double h, void *user)
{
    const nc_record *rec = user;
    nc_raster r;
    nc_record_raster(rec, 0, &r);
    int T = r.T, neurons = r.neurons;
    uint8_t *bits = calloc(((size_t)neurons * T + 7) / 8 + 1, 1);
    if (!bits)
        return;
    for (int j = 0; j < neurons; j++)
        for (int t = 0; t < T; t++)
            if (r.samples > 0 && nc_raster_spike(&r, 0, j, t)) {
                int64_t b = (int64_t)j * T + t;
                bits[b >> 3] |= (uint8_t)(1u << (b & 7));
            }
    nc_layer_stats s;
    nc_record_layer_stats(rec, 0, &s);
    char title[300];
    snprintf(title, sizeof title, "Spike raster: layer %s, sample 0, %d neurons evenly chosen", s.name, neurons);
    nc_plot_raster_spec spec = {title, neurons, T, bits, 0, T, 0, neurons};
    nc_plot_style st;
    nc_plot_style_light(&st);
    nc_plot_raster(cr, w, h, &st, &spec);
    free(bits);
}

static int save_plot(const char *dir, const char *name, nc_plot_draw_fn draw, void *user)
{
    char path[4096], err[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (nc_plot_save(path, 960, 540, draw, user, err, sizeof err) != 0) {
        fprintf(stderr, "neurocuda: %s\n", err);
        return -1;
    }
    printf("  wrote %s\n", path);
    return 0;
}

int nc_cli_write_plots(const nc_record *rec, const char *label, const char *dir)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "neurocuda: %s: cannot create the folder (%s)\n", dir, strerror(errno));
        return -1;
    }
    plot_job acc = {rec, label};
    bars_job rates = {rec, CHART_RATES}, errors = {rec, CHART_ERRORS}, sops = {rec, CHART_SOPS};
    int rc = save_plot(dir, "accuracy.png", draw_accuracy, &acc);
    if (nc_record_layer_count(rec) > 0) {
        rc |= save_plot(dir, "firing_rates.png", draw_layer_bars, &rates);
        rc |= save_plot(dir, "calibration_error.png", draw_layer_bars, &errors);
        rc |= save_plot(dir, "sops.png", draw_layer_bars, &sops);
        rc |= save_plot(dir, "raster.png", draw_raster, (void *)rec);
    }
    return rc;
}
