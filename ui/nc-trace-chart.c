/* nc-trace-chart.c — membrane potential of one neuron (see header). */
#include "nc-trace-chart.h"

#include <stdlib.h>

struct _NcTraceChart {
    NcChart parent_instance;
    NcRunData *data;
    int layer, neuron;
    char title[256];
};

G_DEFINE_FINAL_TYPE(NcTraceChart, nc_trace_chart, NC_TYPE_CHART)

static const NcLayerViews *views(NcTraceChart *self)
{
    if (!self->data || !self->data->views || self->layer < 0 || self->layer >= self->data->views->n_layers)
        return NULL;
    const NcLayerViews *v = &self->data->views->layers[self->layer];
    return v->trace_samples > 0 && v->trace_v && self->neuron < v->trace_neurons ? v : NULL;
}

static gboolean make_spec(NcTraceChart *self, nc_plot_trace_spec *spec)
{
    const NcLayerViews *v = views(self);
    if (!v)
        return FALSE;
    int j = self->neuron, T = v->T; /* sample 0: offsets are j·T and j·(T + 1) */
    *spec = (nc_plot_trace_spec){self->title, T, v->trace_v + (size_t)j * (T + 1), v->trace_current + (size_t)j * T,
                                 v->trace_spike + (size_t)j * T, v->trace_theta[j]};
    return TRUE;
}

static void update_title(NcTraceChart *self)
{
    const NcLayerViews *v = views(self);
    if (!v)
        return;
    const NcRunLayer *L = &self->data->layers[self->layer];
    int64_t idx = v->trace_index[self->neuron];
    if (L->ndim == 3) {
        int64_t hw = L->shape[1] * L->shape[2];
        g_snprintf(self->title, sizeof self->title,
                   "Membrane of %s neuron %" G_GINT64_FORMAT " (channel %" G_GINT64_FORMAT ", h %" G_GINT64_FORMAT
                   ", w %" G_GINT64_FORMAT "), sample 0",
                   L->name, idx, idx / hw, (idx % hw) / L->shape[2], idx % L->shape[2]);
    } else {
        g_snprintf(self->title, sizeof self->title, "Membrane of %s neuron %" G_GINT64_FORMAT ", sample 0", L->name,
                   idx);
    }
}

static void trace_draw(NcChart *chart, cairo_t *cr, double w, double h, const nc_plot_style *st)
{
    nc_plot_trace_spec spec;
    if (make_spec(NC_TRACE_CHART(chart), &spec))
        nc_plot_trace(cr, w, h, st, &spec);
}

static gboolean trace_has_data(NcChart *chart) { return views(NC_TRACE_CHART(chart)) != NULL; }

static char *trace_query(NcChart *chart, double x, double y, double w, double h)
{
    NcTraceChart *self = NC_TRACE_CHART(chart);
    nc_plot_trace_spec spec;
    nc_plot_style st;
    nc_plot_lines_geometry g;
    if (!make_spec(self, &spec))
        return NULL;
    nc_chart_get_style(chart, &st);
    nc_plot_trace_layout(w, h, &st, &spec, &g);
    double t, v;
    nc_plot_lines_from_px(&g, x, y, &t, &v);
    int step = (int)(t + 0.5);
    if (x < g.frame.left || x > g.frame.right || step < 1 || step > spec.T)
        return g_strdup("v_t = v_{t−1} + x_t − s_t·θ (reset by subtraction), v_0 = θ/2");
    return g_strdup_printf("t = %d\ninput current x_t = %.4g\nmembrane v_t = %.4g (θ = %.4g)\n%s", step,
                           spec.current[step - 1], spec.v[step], spec.threshold,
                           spec.spike[step - 1] ? "<b>spike</b>" : "no spike");
}

static void nc_trace_chart_finalize(GObject *object)
{
    g_clear_pointer(&NC_TRACE_CHART(object)->data, nc_run_data_unref);
    G_OBJECT_CLASS(nc_trace_chart_parent_class)->finalize(object);
}

static void nc_trace_chart_class_init(NcTraceChartClass *klass)
{
    nc_chart_class_set_parts(NC_CHART_CLASS(klass), nc_trace_chart_finalize, trace_draw, trace_has_data, trace_query);
}

static void nc_trace_chart_init(NcTraceChart *self)
{
    nc_chart_set_name(NC_CHART(self), "membrane");
    nc_chart_set_empty_text(NC_CHART(self),
                             "The membrane potential of a neuron appears after the first simulated batch; "
                             "click a neuron in the raster to choose it.");
}

GtkWidget *nc_trace_chart_new(void) { return g_object_new(NC_TYPE_TRACE_CHART, NULL); }

void nc_trace_chart_set_data(NcTraceChart *self, NcRunData *data)
{
    if (data)
        nc_run_data_ref(data);
    g_clear_pointer(&self->data, nc_run_data_unref);
    self->data = data;
    update_title(self);
    nc_chart_changed(NC_CHART(self));
}

void nc_trace_chart_set_neuron(NcTraceChart *self, int layer, int neuron)
{
    self->layer = layer, self->neuron = MAX(neuron, 0);
    update_title(self);
    nc_chart_changed(NC_CHART(self));
}

int nc_trace_chart_get_neuron(NcTraceChart *self) { return self->neuron; }

int nc_trace_chart_get_n_neurons(NcTraceChart *self)
{
    if (!self->data || !self->data->views || self->layer < 0 || self->layer >= self->data->views->n_layers)
        return 0;
    return self->data->views->layers[self->layer].trace_neurons;
}

int nc_trace_chart_get_spike_count(NcTraceChart *self)
{
    nc_plot_trace_spec spec;
    if (!make_spec(self, &spec))
        return -1;
    int n = 0;
    for (int t = 0; t < spec.T; t++)
        n += spec.spike[t];
    return n;
}

void nc_trace_chart_pick_active(NcTraceChart *self, int layer)
{
    int best = 0, best_gap = G_MAXINT;
    self->layer = layer, self->neuron = 0;
    const NcLayerViews *v = views(self);
    for (int j = 0; v && j < v->trace_neurons; j++) {
        int n = 0;
        for (int t = 0; t < v->T; t++)
            n += v->trace_spike[(size_t)j * v->T + t];
        int gap = ABS(2 * n - v->T);
        if (n > 0 && gap < best_gap)
            best = j, best_gap = gap;
    }
    nc_trace_chart_set_neuron(self, layer, best);
}

void nc_trace_chart_show_index(NcTraceChart *self, int layer, int64_t index)
{
    int best = 0;
    self->layer = layer;
    if (self->data && self->data->views && layer >= 0 && layer < self->data->views->n_layers) {
        const NcLayerViews *v = &self->data->views->layers[layer];
        for (int j = 1; j < v->trace_neurons; j++)
            if (llabs(v->trace_index[j] - index) < llabs(v->trace_index[best] - index))
                best = j;
    }
    nc_trace_chart_set_neuron(self, layer, best);
}
