/* nc-accuracy-chart.c — accuracy versus timesteps (see nc-accuracy-chart.h). */
#include "nc-accuracy-chart.h"

#include <math.h>
#include <string.h>

typedef struct {
    char *label;
    int T;
    double *x, *y;           /* t = 1..T and accuracy(t)                      */
    double ann, qcfs;        /* NAN when unknown                              */
    int64_t samples;
} Run;

struct _NcAccuracyChart {
    NcChart parent_instance;
    GPtrArray *runs;         /* of Run*, oldest first                          */
};

G_DEFINE_FINAL_TYPE(NcAccuracyChart, nc_accuracy_chart, NC_TYPE_CHART)

static void run_free(Run *r)
{
    g_free(r->label), g_free(r->x), g_free(r->y);
    g_free(r);
}

static Run *newest(NcAccuracyChart *self)
{
    return self->runs->len ? g_ptr_array_index(self->runs, self->runs->len - 1) : NULL;
}

/* The plot spec and the storage it points to (series, reference lines and
 * their labels); the series point into the runs.  Filled in place by
 * build_spec, never copied. */
typedef struct {
    nc_plot_lines_spec spec;
    nc_plot_series series[NC_ACCURACY_CHART_MAX_RUNS];
    nc_plot_hline hlines[2];
    char labels[2][64];
} AccuracySpec;

static void build_spec(NcAccuracyChart *self, AccuracySpec *out)
{
    nc_plot_lines_spec *spec = &out->spec;
    nc_plot_series *series = out->series;
    nc_plot_hline *hlines = out->hlines;
    *spec = (nc_plot_lines_spec){.title = "Accuracy versus timesteps", .x_label = "timestep t",
                                 .y_label = "test accuracy", .fixed_y = 1, .y_min = 0, .y_max = 1,
                                 .series = series, .hlines = hlines};
    double lowest = 1;
    for (guint i = 0; i < self->runs->len; i++) {
        Run *r = g_ptr_array_index(self->runs, i);
        series[spec->n_series++] = (nc_plot_series){r->label, r->samples ? r->T : 0, r->x, r->y};
        for (int t = 0; r->samples && t < r->T; t++)
            if (isfinite(r->y[t]))
                lowest = fmin(lowest, r->y[t]);
    }
    /* from a tenth below the lowest point up to 1: curves that differ by a
     * few percent stay apart, and the top (100%) never moves while it runs */
    spec->y_min = fmax(0, floor((lowest - 0.05) * 10) / 10);
    Run *r = newest(self);
    if (r && isfinite(r->ann))
        spec->y_min = fmin(spec->y_min, fmax(0, floor((r->ann - 0.05) * 10) / 10));
    if (r && isfinite(r->ann)) {
        snprintf(out->labels[0], sizeof out->labels[0], "ANN %.1f%%", 100 * r->ann);
        hlines[spec->n_hlines++] = (nc_plot_hline){out->labels[0], r->ann};
    }
    if (r && isfinite(r->qcfs)) {
        snprintf(out->labels[1], sizeof out->labels[1], "QCFS-ANN %.1f%%", 100 * r->qcfs);
        hlines[spec->n_hlines++] = (nc_plot_hline){out->labels[1], r->qcfs};
    }
}

static void accuracy_draw(NcChart *chart, cairo_t *cr, double w, double h, const nc_plot_style *st)
{
    AccuracySpec s;
    build_spec(NC_ACCURACY_CHART(chart), &s);
    nc_plot_lines(cr, w, h, st, &s.spec);
}

static gboolean accuracy_has_data(NcChart *chart)
{
    Run *r = newest(NC_ACCURACY_CHART(chart));
    return r && r->samples > 0;
}

static char *accuracy_query(NcChart *chart, double x, double y, double w, double h)
{
    NcAccuracyChart *self = NC_ACCURACY_CHART(chart);
    AccuracySpec s;
    build_spec(self, &s);
    cairo_surface_t *surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 1, 1);
    cairo_t *cr = cairo_create(surface);
    nc_plot_style st;
    nc_chart_get_style(chart, &st);
    nc_plot_lines_geometry g;
    nc_plot_lines_layout(cr, w, h, &st, &s.spec, &g);
    cairo_destroy(cr);
    cairo_surface_destroy(surface);
    int k, i;
    if (!nc_plot_lines_nearest(&g, &s.spec, x, y, 12, &k, &i))
        return g_strdup("accuracy(t): fraction of test images whose output, summed over steps 1..t, "
                        "has its largest value at the label");
    Run *r = g_ptr_array_index(self->runs, k);
    g_autofree char *label = g_markup_escape_text(r->label, -1);
    return g_strdup_printf("<b>%s</b>\nt = %d: %.2f%% of %" G_GINT64_FORMAT " images", label, i + 1,
                           100 * r->y[i], r->samples);
}

static void nc_accuracy_chart_finalize(GObject *object)
{
    g_ptr_array_unref(NC_ACCURACY_CHART(object)->runs);
    G_OBJECT_CLASS(nc_accuracy_chart_parent_class)->finalize(object);
}

static void nc_accuracy_chart_class_init(NcAccuracyChartClass *klass)
{
    nc_chart_class_set_parts(NC_CHART_CLASS(klass), nc_accuracy_chart_finalize,
                             accuracy_draw, accuracy_has_data, accuracy_query);
}

static void nc_accuracy_chart_init(NcAccuracyChart *self)
{
    self->runs = g_ptr_array_new_with_free_func((GDestroyNotify)run_free);
    nc_chart_set_name(NC_CHART(self), "accuracy");
    nc_chart_set_empty_text(NC_CHART(self), "Convert and run the model to see the accuracy grow with the timesteps.");
}

GtkWidget *nc_accuracy_chart_new(void) { return g_object_new(NC_TYPE_ACCURACY_CHART, NULL); }

void nc_accuracy_chart_begin_run(NcAccuracyChart *self, const char *label)
{
    g_return_if_fail(NC_IS_ACCURACY_CHART(self));
    if (self->runs->len >= NC_ACCURACY_CHART_MAX_RUNS)
        g_ptr_array_remove_index(self->runs, 0);
    Run *r = g_new0(Run, 1);
    r->label = g_strdup(label);
    r->ann = r->qcfs = NAN;
    g_ptr_array_add(self->runs, r);
    nc_chart_changed(NC_CHART(self));
}

void nc_accuracy_chart_update(NcAccuracyChart *self, const NcRunData *data)
{
    g_return_if_fail(NC_IS_ACCURACY_CHART(self));
    Run *r = newest(self);
    if (!r || !data->has_record)
        return;
    if (r->T != data->T) {
        r->T = data->T;
        r->x = g_renew(double, r->x, r->T);
        r->y = g_renew(double, r->y, r->T);
        for (int t = 0; t < r->T; t++)
            r->x[t] = t + 1;
    }
    memcpy(r->y, data->accuracy, (size_t)r->T * sizeof(double));
    /* after fine-tuning the ANN line stays the source ANN's (the converted
     * net's ANN reading); the QCFS-ANN line is the fine-tuned net's */
    r->ann = data->finetuned && data->baseline ? data->baseline->ann_accuracy : data->ann_accuracy;
    r->qcfs = data->qcfs_accuracy;
    r->samples = data->samples;
    nc_chart_changed(NC_CHART(self));
}

void nc_accuracy_chart_end_run(NcAccuracyChart *self, const char *note)
{
    Run *r = newest(self);
    if (!r || !note)
        return;
    char *label = g_strdup_printf("%s (%s)", r->label, note);
    g_free(r->label);
    r->label = label;
    nc_chart_changed(NC_CHART(self));
}

void nc_accuracy_chart_clear_history(NcAccuracyChart *self)
{
    if (self->runs->len > 1)
        g_ptr_array_remove_range(self->runs, 0, self->runs->len - 1);
    nc_chart_changed(NC_CHART(self));
}

guint nc_accuracy_chart_get_n_runs(NcAccuracyChart *self) { return self->runs->len; }

double nc_accuracy_chart_get_accuracy(NcAccuracyChart *self, guint run, int t)
{
    if (run >= self->runs->len)
        return NAN;
    Run *r = g_ptr_array_index(self->runs, run);
    return r->samples && t >= 1 && t <= r->T ? r->y[t - 1] : NAN;
}

const char *nc_accuracy_chart_get_label(NcAccuracyChart *self, guint run)
{
    return run < self->runs->len ? ((Run *)g_ptr_array_index(self->runs, run))->label : NULL;
}

int nc_accuracy_chart_get_n_points(NcAccuracyChart *self, guint run)
{
    if (run >= self->runs->len)
        return 0;
    Run *r = g_ptr_array_index(self->runs, run);
    int n = 0;
    for (int t = 0; r->samples && t < r->T; t++)
        n += isfinite(r->y[t]);
    return n;
}
