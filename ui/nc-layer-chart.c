/* nc-layer-chart.c — per-layer bar charts (see nc-layer-chart.h). */
#include "nc-layer-chart.h"

#include <math.h>
#include <string.h>

struct _NcLayerChart {
    NcChart parent_instance;
    NcLayerChartKind kind;
    NcRunData *data;
    NcRunData *baseline;     /* ERROR: the run to compare with, or NULL       */
    char *stack_labels[2];   /* its legend keys: before, after                */
    int n_stacks;            /* 2 while the bars compare with the baseline    */
    int drill;               /* RATES: layer shown per channel, or −1        */
    /* the bars, rebuilt from the data off the draw path */
    int n_categories, n_groups;
    char **categories;       /* [n_categories]                               */
    double *values;          /* [n_categories][n_groups]                     */
    char title[160];
};

G_DEFINE_FINAL_TYPE(NcLayerChart, nc_layer_chart, NC_TYPE_CHART)

enum { SIGNAL_DRILL_CHANGED, N_SIGNALS };
static guint signals[N_SIGNALS];

static const char *const rate_groups[] = {"firing rate", "dead", "saturated"};
static const char *const error_groups[] = {"clipping", "quantisation", "unevenness"};
static const char *const sops_groups[] = {"SNN synaptic ops", "ANN MACs"};

static const char *const *group_labels(NcLayerChart *self)
{
    if (self->kind == NC_LAYER_CHART_ERROR)
        return error_groups;
    if (self->kind == NC_LAYER_CHART_SOPS)
        return sops_groups;
    return self->drill >= 0 ? NULL : rate_groups;
}

static void clear_bars(NcLayerChart *self)
{
    g_clear_pointer(&self->categories, g_strfreev);
    g_clear_pointer(&self->values, g_free);
    self->n_categories = 0;
    self->n_stacks = 1;
}

/* The baseline can be compared layer by layer: the same layers, recorded. */
static gboolean comparable(const NcRunData *d, const NcRunData *base)
{
    if (!base || !base->has_record || base->samples == 0 || base->n_layers != d->n_layers)
        return FALSE;
    for (int i = 0; i < d->n_layers; i++)
        if (base->layers[i].node != d->layers[i].node || strcmp(base->layers[i].name, d->layers[i].name) != 0)
            return FALSE;
    return TRUE;
}

static void fill_layer_values(NcLayerChart *self, const NcRunLayer *L, double *v)
{
    const nc_layer_stats *s = &L->stats;
    double per_image = self->data->samples > 0 ? 1.0 / (double)self->data->samples : 0;
    switch (self->kind) {
    case NC_LAYER_CHART_RATES:
        v[0] = s->firing_rate, v[1] = s->dead_fraction, v[2] = s->saturated_fraction;
        break;
    case NC_LAYER_CHART_ERROR:
        v[0] = s->clip.mean_abs, v[1] = s->quant.mean_abs, v[2] = s->uneven.mean_abs;
        break;
    case NC_LAYER_CHART_SOPS:
        v[0] = s->sops * per_image, v[1] = s->ann_macs * per_image;
        break;
    }
}

static void build_layer_bars(NcLayerChart *self)
{
    const NcRunData *d = self->data;
    self->n_groups = self->kind == NC_LAYER_CHART_SOPS ? 2 : 3;
    self->n_stacks = self->kind == NC_LAYER_CHART_ERROR && comparable(d, self->baseline) ? 2 : 1;
    self->n_categories = d->n_layers;
    self->categories = g_new0(char *, d->n_layers + 1);
    self->values = g_new0(double, (size_t)d->n_layers * self->n_stacks * self->n_groups);
    for (int i = 0; i < d->n_layers; i++) {
        self->categories[i] = g_strdup(d->layers[i].name);
        double *v = self->values + (size_t)i * self->n_stacks * self->n_groups;
        if (self->n_stacks == 2) /* before, then after: [layer][stack][part] */
            fill_layer_values(self, &self->baseline->layers[i], v), v += self->n_groups;
        fill_layer_values(self, &d->layers[i], v);
    }
    static const char *titles[] = {"Firing rate per layer (click a layer for its channels)",
                                   "Conversion error per layer, mean |e| (clip + quant + uneven = φ − ReLU(z))",
                                   "Synaptic operations per image: SNN against ANN"};
    if (self->kind == NC_LAYER_CHART_SOPS && isfinite(d->totals.sops_per_mac))
        g_snprintf(self->title, sizeof self->title, "Synaptic operations per image: %.3g SOPs per ANN MAC",
                   d->totals.sops_per_mac);
    else if (self->n_stacks == 2) /* named for what changed the net: "after: BPTT 1 ep" → "after BPTT 1 ep" */
        g_snprintf(self->title, sizeof self->title, "Conversion error per layer, mean |e|: before (faded) and after %s",
                   g_str_has_prefix(self->stack_labels[1], "after: ") ? self->stack_labels[1] + 7 : "fine-tuning");
    else
        g_strlcpy(self->title, titles[self->kind], sizeof self->title);
}

/* Channel names: every k-th one, so that at most ~48 labels share the axis. */
static void build_channel_bars(NcLayerChart *self)
{
    const NcRunLayer *L = &self->data->layers[self->drill];
    int every = MAX(1, (L->channels + 47) / 48);
    self->n_groups = 1;
    self->n_categories = L->channels;
    self->categories = g_new0(char *, L->channels + 1);
    self->values = g_new0(double, L->channels);
    for (int c = 0; c < L->channels; c++) {
        self->categories[c] = c % every == 0 ? g_strdup_printf("%d", c) : g_strdup("");
        self->values[c] = L->channel_rate[c];
    }
    g_snprintf(self->title, sizeof self->title, "Firing rate per channel of %s (click to go back)", L->name);
}

static void rebuild(NcLayerChart *self)
{
    clear_bars(self);
    if (self->data && self->data->has_record && self->data->samples > 0) {
        if (self->drill >= self->data->n_layers)
            self->drill = -1;
        if (self->kind == NC_LAYER_CHART_RATES && self->drill >= 0)
            build_channel_bars(self);
        else
            build_layer_bars(self);
    }
    nc_chart_changed(NC_CHART(self));
}

static nc_plot_bars_spec make_spec(NcLayerChart *self)
{
    static const char *y_labels[] = {"fraction", "mean |error| (activation units)", "operations per image"};
    return (nc_plot_bars_spec){
        .title = self->title,
        .y_label = self->drill >= 0 ? "spikes per neuron per step" : y_labels[self->kind],
        .n_categories = self->n_categories,
        .categories = (const char *const *)self->categories,
        .n_groups = self->n_groups,
        .group_labels = group_labels(self),
        .values = self->values,
        .stacked = self->kind == NC_LAYER_CHART_ERROR,
        .n_stacks = self->n_stacks,
        .stack_labels = (const char *const *)self->stack_labels,
    };
}

static void layer_draw(NcChart *chart, cairo_t *cr, double w, double h, const nc_plot_style *st)
{
    NcLayerChart *self = NC_LAYER_CHART(chart);
    nc_plot_bars_spec spec = make_spec(self);
    nc_plot_bars(cr, w, h, st, &spec);
}

static gboolean layer_has_data(NcChart *chart) { return NC_LAYER_CHART(chart)->n_categories > 0; }

static gboolean hit(NcLayerChart *self, double x, double y, double w, double h, int *category, int *stack,
                    int *group)
{
    nc_plot_bars_spec spec = make_spec(self);
    cairo_surface_t *surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 1, 1);
    cairo_t *cr = cairo_create(surface);
    nc_plot_style st;
    nc_chart_get_style(NC_CHART(self), &st);
    nc_plot_bars_geometry g;
    nc_plot_bars_layout(cr, w, h, &st, &spec, &g);
    cairo_destroy(cr);
    cairo_surface_destroy(surface);
    return nc_plot_bars_hit_stack(&g, &spec, x, y, category, stack, group);
}

static char *rates_tooltip(const NcRunLayer *L)
{
    const nc_layer_stats *s = &L->stats;
    g_autofree char *theta = L->theta_max > L->theta_min
                                 ? g_strdup_printf("θ %.4g … %.4g (per channel)", L->theta_min, L->theta_max)
                                 : g_strdup_printf("θ %.4g", L->theta_min);
    return g_strdup_printf("<b>%s</b>: %" G_GINT64_FORMAT " neurons, %d channels, %s\n"
                           "firing rate %.4f = spikes / (neurons × samples × steps)\n"
                           "dead %.1f%% (no spike in T steps), saturated %.1f%% (a spike every step)",
                           L->name, s->neurons, s->channels, theta, s->firing_rate, 100 * s->dead_fraction,
                           100 * s->saturated_fraction);
}

static double total_error(const NcRunLayer *L)
{
    return L->stats.clip.mean_abs + L->stats.quant.mean_abs + L->stats.uneven.mean_abs;
}

static char *error_tooltip(const NcRunLayer *L)
{
    const nc_layer_stats *s = &L->stats;
    return g_strdup_printf("<b>%s</b> (z = mean input current, θ = threshold, φ = θ·spikes/T)\n"
                           "clipping   clip(z,0,θ) − ReLU(z): mean |e| %.4g, MSE %.4g\n"
                           "quantisation q_T(z) − clip(z,0,θ): mean |e| %.4g, MSE %.4g\n"
                           "unevenness φ − q_T(z): mean |e| %.4g, MSE %.4g\n"
                           "clipped %.2f%% of (neuron, sample) pairs; local rel. L2 %.3g",
                           L->name, s->clip.mean_abs, s->clip.mse, s->quant.mean_abs, s->quant.mse, s->uneven.mean_abs,
                           s->uneven.mse, 100 * s->clipped_fraction, s->local.rel_l2);
}

static char *sops_tooltip(const NcRunLayer *L, int64_t samples)
{
    const nc_layer_stats *s = &L->stats;
    double n = samples > 0 ? (double)samples : 1;
    return g_strdup_printf("<b>%s</b>\nSOPs = spikes × fan-out = %.4g per image (fan-out %.3g)\n"
                           "ANN MACs on its outputs = fan-out × neurons = %.4g per image\nratio %.3g",
                           L->name, s->sops / n, s->fanout, s->ann_macs / n, s->ann_macs > 0 ? s->sops / s->ann_macs : 0);
}

/* Before and after: the stack under the pointer in full, and the change. */
static char *compare_tooltip(NcLayerChart *self, int c, int stack)
{
    const NcRunLayer *before = &self->baseline->layers[c], *after = &self->data->layers[c];
    g_autofree char *which = g_markup_escape_text(self->stack_labels[stack == 0 ? 0 : 1], -1);
    g_autofree char *detail = error_tooltip(stack == 0 ? before : after);
    double b = total_error(before), a = total_error(after);
    return g_strdup_printf("%s\n%s\nclip + quant + uneven: %.4g before → %.4g after fine-tuning (%+.1f%%)", which,
                           detail, b, a, b > 0 ? 100 * (a - b) / b : 0.0);
}

static char *layer_query(NcChart *chart, double x, double y, double w, double h)
{
    NcLayerChart *self = NC_LAYER_CHART(chart);
    int c, g, stack;
    if (!hit(self, x, y, w, h, &c, &stack, &g))
        return NULL;
    if (self->n_stacks == 2)
        return compare_tooltip(self, c, stack);
    if (self->drill >= 0) {
        const NcRunLayer *L = &self->data->layers[self->drill];
        return g_strdup_printf("<b>%s</b>, channel %d\nrate %.4f = spikes in channel / (neurons × samples × steps)",
                               L->name, c, L->channel_rate[c]);
    }
    const NcRunLayer *L = &self->data->layers[c];
    if (self->kind == NC_LAYER_CHART_RATES)
        return rates_tooltip(L);
    if (self->kind == NC_LAYER_CHART_ERROR)
        return error_tooltip(L);
    return sops_tooltip(L, self->data->samples);
}

static void layer_pressed(NcChart *chart, double x, double y, double w, double h, int n_press)
{
    NcLayerChart *self = NC_LAYER_CHART(chart);
    int c, g, stack;
    if (self->kind != NC_LAYER_CHART_RATES)
        return;
    if (self->drill >= 0)
        nc_layer_chart_set_drill_layer(self, -1);
    else if (hit(self, x, y, w, h, &c, &stack, &g))
        nc_layer_chart_set_drill_layer(self, c);
}

static gboolean on_escape(GtkWidget *widget, GVariant *args, gpointer user_data)
{
    NcLayerChart *self = NC_LAYER_CHART(widget);
    if (self->drill < 0)
        return FALSE;
    nc_layer_chart_set_drill_layer(self, -1);
    return TRUE;
}

static void nc_layer_chart_finalize(GObject *object)
{
    NcLayerChart *self = NC_LAYER_CHART(object);
    clear_bars(self);
    g_clear_pointer(&self->data, nc_run_data_unref);
    g_clear_pointer(&self->baseline, nc_run_data_unref);
    g_free(self->stack_labels[0]), g_free(self->stack_labels[1]);
    G_OBJECT_CLASS(nc_layer_chart_parent_class)->finalize(object);
}

static void nc_layer_chart_class_init(NcLayerChartClass *klass)
{
    NcChartClass *chart_class = NC_CHART_CLASS(klass);
    nc_chart_class_set_parts(chart_class, nc_layer_chart_finalize, layer_draw, layer_has_data, layer_query);
    chart_class->pressed = layer_pressed;
    gtk_widget_class_add_binding(GTK_WIDGET_CLASS(klass), GDK_KEY_Escape, 0, on_escape, NULL);
    /* The per-channel view was opened or closed (the window updates its hint). */
    signals[SIGNAL_DRILL_CHANGED] = g_signal_new("drill-changed", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0,
                                                 NULL, NULL, NULL, G_TYPE_NONE, 0);
}

static void nc_layer_chart_init(NcLayerChart *self)
{
    self->drill = -1;
    self->n_stacks = 1;
    gtk_widget_set_focusable(GTK_WIDGET(self), TRUE);
}

GtkWidget *nc_layer_chart_new(NcLayerChartKind kind)
{
    NcLayerChart *self = g_object_new(NC_TYPE_LAYER_CHART, NULL);
    static const char *names[] = {"firing-rates", "calibration-error", "sops"};
    static const char *empty_texts[] = {
        "Firing rates per layer appear after the first simulated batch.",
        "The conversion error of each layer, split into clipping, quantisation and unevenness, "
        "appears after the first simulated batch.",
        "Synaptic operations per layer, against the ANN's multiply-accumulates, appear after the first batch."};
    self->kind = kind;
    nc_chart_set_name(NC_CHART(self), names[kind]);
    nc_chart_set_empty_text(NC_CHART(self), empty_texts[kind]);
    return GTK_WIDGET(self);
}

void nc_layer_chart_set_data(NcLayerChart *self, NcRunData *data)
{
    g_return_if_fail(NC_IS_LAYER_CHART(self));
    if (data)
        nc_run_data_ref(data);
    g_clear_pointer(&self->data, nc_run_data_unref);
    self->data = data;
    rebuild(self);
}

void nc_layer_chart_set_baseline(NcLayerChart *self, NcRunData *baseline, const char *before, const char *after)
{
    g_return_if_fail(NC_IS_LAYER_CHART(self));
    if (baseline == self->baseline && (!baseline || (g_strcmp0(before, self->stack_labels[0]) == 0 &&
                                                     g_strcmp0(after, self->stack_labels[1]) == 0)))
        return;
    if (baseline)
        nc_run_data_ref(baseline);
    g_clear_pointer(&self->baseline, nc_run_data_unref);
    self->baseline = baseline;
    g_free(self->stack_labels[0]), g_free(self->stack_labels[1]);
    self->stack_labels[0] = g_strdup(before ? before : "before");
    self->stack_labels[1] = g_strdup(after ? after : "after");
    rebuild(self);
}

gboolean nc_layer_chart_get_compared(NcLayerChart *self) { return self->n_categories > 0 && self->n_stacks == 2; }
const char *nc_layer_chart_get_stack_label(NcLayerChart *self, int stack)
{
    return self->baseline && (stack == 0 || stack == 1) ? self->stack_labels[stack] : NULL;
}

double nc_layer_chart_get_value(NcLayerChart *self, int layer, int stack, int group)
{
    if (layer < 0 || layer >= self->n_categories || stack < 0 || stack >= self->n_stacks || group < 0 ||
        group >= self->n_groups || self->drill >= 0)
        return NAN;
    return self->values[((size_t)layer * self->n_stacks + stack) * self->n_groups + group];
}

int nc_layer_chart_get_drill_layer(NcLayerChart *self) { return self->drill; }

void nc_layer_chart_set_drill_layer(NcLayerChart *self, int layer)
{
    if (self->drill == layer)
        return;
    self->drill = layer;
    rebuild(self);
    g_signal_emit(self, signals[SIGNAL_DRILL_CHANGED], 0);
}

int nc_layer_chart_get_n_layers(NcLayerChart *self) { return self->data && self->n_categories ? self->data->n_layers : 0; }
