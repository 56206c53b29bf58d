/* nc-raster-chart.c — spike raster with zoom, pan and hover (see header). */
#include "nc-raster-chart.h"

#include <string.h>

/* What the chart says while it has no spikes to draw (NcChart's empty-state
 * text, its "empty-text" property). */
#define NO_SPIKES_YET "The spikes of the chosen layer appear after the first simulated batch."

struct _NcRasterChart {
    NcChart parent_instance;
    NcRunData *data;
    int layer, sample;
    /* what is drawn: rows × T bits, row-major (see nc_plot_raster_spec) */
    const uint8_t *bits;
    uint8_t *repacked;       /* owned when a sample's bits are not byte aligned */
    int rows, T;
    int t0, t1, n0, n1;      /* visible window                                   */
    int64_t visible_spikes;
    char title[256];
    /* dragging */
    int drag_t0, drag_n0;
};

G_DEFINE_FINAL_TYPE(NcRasterChart, nc_raster_chart, NC_TYPE_CHART)

enum { SIGNAL_NEURON_ACTIVATED, SIGNAL_WINDOW_CHANGED, N_SIGNALS };
static guint signals[N_SIGNALS];

static const NcLayerViews *views(NcRasterChart *self)
{
    if (!self->data || !self->data->views || self->layer < 0 || self->layer >= self->data->views->n_layers)
        return NULL;
    return &self->data->views->layers[self->layer];
}

static nc_plot_raster_spec make_spec(NcRasterChart *self)
{
    return (nc_plot_raster_spec){self->title, self->rows, self->T, self->bits, self->t0, self->t1, self->n0, self->n1};
}

static gboolean sample_on_disk(NcRasterChart *self)
{
    const NcLayerViews *v = views(self);
    return self->sample >= 0 && v && self->sample >= v->raster_samples;
}

static void update_title(NcRasterChart *self)
{
    const NcRunLayer *L = &self->data->layers[self->layer];
    const NcLayerViews *v = views(self);
    g_autofree char *which = self->sample < 0       ? g_strdup_printf("%d samples stacked", v->raster_samples)
                             : sample_on_disk(self) ? g_strdup_printf("sample %d (read from the disk)", self->sample)
                                                    : g_strdup_printf("sample %d", self->sample);
    g_snprintf(self->title, sizeof self->title, "Spikes of %s: %d of %" G_GINT64_FORMAT " neurons, %s", L->name,
               v->raster_neurons, L->stats.neurons, which);
}

/* A sample past those in memory, from the run's spill file (a read of
 * neurons × T bits; the file is written by the worker, never waited for). */
static void read_spilled(NcRasterChart *self, const NcLayerViews *v)
{
    g_autoptr(GError) error = NULL;
    self->repacked = g_malloc0(((size_t)v->raster_neurons * (size_t)v->T + 7) / 8);
    if (!nc_raster_spill_read(self->data->spill, self->layer, self->sample, self->repacked, &error)) {
        nc_chart_set_empty_text(NC_CHART(self), error->message);
        g_clear_pointer(&self->repacked, g_free);
        return;
    }
    self->bits = self->repacked, self->rows = v->raster_neurons;
}

/* The bits of one sample start at bit s·neurons·T of the record's raster; a
 * copy is needed only when that is not a whole byte. */
static void select_bits(NcRasterChart *self)
{
    nc_chart_set_empty_text(NC_CHART(self), NO_SPIKES_YET);
    g_clear_pointer(&self->repacked, g_free);
    self->bits = NULL, self->rows = 0;
    const NcLayerViews *v = views(self);
    if (!v || !v->raster_bits || v->raster_samples < 1)
        return;
    self->T = v->T;
    if (self->sample < 0) {
        self->bits = v->raster_bits, self->rows = v->raster_samples * v->raster_neurons;
        return;
    }
    if (sample_on_disk(self)) {
        if (self->sample < nc_run_data_raster_samples(self->data))
            read_spilled(self, v);
        return;
    }
    int s = MIN(self->sample, v->raster_samples - 1);
    int64_t first = (int64_t)s * v->raster_neurons * v->T, n = (int64_t)v->raster_neurons * v->T;
    self->rows = v->raster_neurons;
    if (first % 8 == 0) {
        self->bits = v->raster_bits + first / 8;
        return;
    }
    self->repacked = g_malloc0((size_t)(n + 7) / 8);
    for (int64_t b = 0; b < n; b++)
        if ((v->raster_bits[(first + b) >> 3] >> ((first + b) & 7)) & 1)
            self->repacked[b >> 3] |= (uint8_t)(1u << (b & 7));
    self->bits = self->repacked;
}

static void window_changed(NcRasterChart *self)
{
    nc_plot_raster_spec spec = make_spec(self);
    self->visible_spikes = self->bits ? nc_plot_raster_count(&spec) : 0;
    nc_chart_changed(NC_CHART(self));
    g_signal_emit(self, signals[SIGNAL_WINDOW_CHANGED], 0);
}

/* New data keeps the zoom when the shape did not change. */
static void refresh(NcRasterChart *self, gboolean keep_window)
{
    int old_rows = self->rows, old_T = self->T;
    select_bits(self);
    if (!self->bits) {
        self->rows = 0;
        window_changed(self);
        return;
    }
    update_title(self);
    if (!keep_window || old_rows != self->rows || old_T != self->T)
        self->t0 = 0, self->t1 = self->T, self->n0 = 0, self->n1 = self->rows;
    window_changed(self);
}

static void raster_draw(NcChart *chart, cairo_t *cr, double w, double h, const nc_plot_style *st)
{
    NcRasterChart *self = NC_RASTER_CHART(chart);
    nc_plot_raster_spec spec = make_spec(self);
    nc_plot_raster(cr, w, h, st, &spec);
}

static gboolean raster_has_data(NcChart *chart) { return NC_RASTER_CHART(chart)->bits != NULL; }

static void layout(NcRasterChart *self, double w, double h, nc_plot_raster_geometry *g)
{
    nc_plot_style st;
    nc_chart_get_style(NC_CHART(self), &st);
    nc_plot_raster_spec spec = make_spec(self);
    nc_plot_raster_layout(w, h, &st, &spec, g);
}

/* Row → (sample, chosen neuron j) → flat index → (channel, h, w). */
static char *describe_cell(NcRasterChart *self, int row, int step)
{
    const NcLayerViews *v = views(self);
    const NcRunLayer *L = &self->data->layers[self->layer];
    int s = self->sample < 0 ? row / v->raster_neurons : self->sample, j = row % v->raster_neurons;
    int64_t idx = v->raster_index[j];
    g_autofree char *where = NULL;
    if (L->ndim == 3) {
        int64_t hw = L->shape[1] * L->shape[2];
        where = g_strdup_printf("channel %" G_GINT64_FORMAT ", (h, w) = (%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT ")",
                                idx / hw, (idx % hw) / L->shape[2], idx % L->shape[2]);
    } else {
        where = g_strdup_printf("feature %" G_GINT64_FORMAT, idx);
    }
    int64_t bit = (int64_t)row * self->T + step; /* rows of self->bits: (sample,) neuron */
    gboolean spiked = (self->bits[bit >> 3] >> (bit & 7)) & 1;
    return g_strdup_printf("<b>neuron %" G_GINT64_FORMAT "</b> of %s (row %d)\n%s\nsample %d, t = %d: %s%s", idx,
                           L->name, j, where, s, step + 1, spiked ? "spike" : "no spike",
                           s < v->trace_samples ? "\nclick to see its membrane potential" : "");
}

static char *raster_query(NcChart *chart, double x, double y, double w, double h)
{
    NcRasterChart *self = NC_RASTER_CHART(chart);
    nc_plot_raster_geometry g;
    int row, step;
    layout(self, w, h, &g);
    if (!nc_plot_raster_hit(&g, x, y, &row, &step))
        return NULL;
    return describe_cell(self, row, step);
}

static void raster_overlay(NcChart *chart, cairo_t *cr, double w, double h, const nc_plot_style *st, double x,
                           double y)
{
    NcRasterChart *self = NC_RASTER_CHART(chart);
    nc_plot_raster_geometry g;
    int row, step;
    layout(self, w, h, &g);
    if (!nc_plot_raster_hit(&g, x, y, &row, &step))
        return;
    /* highlight the row and the column under the pointer */
    double cx = g.frame.left + (step - g.t0) * g.cell_w, cy = g.frame.top + (row - g.n0) * g.cell_h;
    cairo_set_source_rgba(cr, st->foreground.r, st->foreground.g, st->foreground.b, 0.10);
    cairo_rectangle(cr, cx, g.frame.top, MAX(g.cell_w, 1), g.frame.bottom - g.frame.top);
    cairo_rectangle(cr, g.frame.left, cy, g.frame.right - g.frame.left, MAX(g.cell_h, 1));
    cairo_fill(cr);
}

static void raster_pressed(NcChart *chart, double x, double y, double w, double h, int n_press)
{
    NcRasterChart *self = NC_RASTER_CHART(chart);
    nc_plot_raster_geometry g;
    int row, step;
    if (n_press == 2) {
        nc_raster_chart_reset_zoom(self);
        return;
    }
    layout(self, w, h, &g);
    if (!nc_plot_raster_hit(&g, x, y, &row, &step))
        return;
    const NcLayerViews *v = views(self);
    int s = self->sample < 0 ? row / v->raster_neurons : self->sample;
    g_signal_emit(self, signals[SIGNAL_NEURON_ACTIVATED], 0, self->layer, row % v->raster_neurons, s);
}

/* ---- zoom and pan --------------------------------------------------------------- */

static gboolean on_scroll(GtkEventControllerScroll *scroll, double dx, double dy, NcRasterChart *self)
{
    if (!self->bits || dy == 0)
        return FALSE;
    GtkWidget *w = GTK_WIDGET(self);
    double px, py;
    nc_plot_raster_geometry g;
    layout(self, gtk_widget_get_width(w), gtk_widget_get_height(w), &g);
    nc_chart_get_pointer(NC_CHART(self), &px, &py);
    double factor = dy < 0 ? 1.25 : 0.8;
    GdkModifierType mods = gtk_event_controller_get_current_event_state(GTK_EVENT_CONTROLLER(scroll));
    if (mods & GDK_SHIFT_MASK) {
        double anchor = (px - g.frame.left) / (g.frame.right - g.frame.left);
        nc_plot_window_zoom(&self->t0, &self->t1, self->T, anchor, factor, 2);
    } else {
        double anchor = (py - g.frame.top) / (g.frame.bottom - g.frame.top);
        nc_plot_window_zoom(&self->n0, &self->n1, self->rows, anchor, factor, 4);
    }
    window_changed(self);
    return TRUE;
}

static void on_drag_begin(GtkGestureDrag *drag, double x, double y, NcRasterChart *self)
{
    self->drag_t0 = self->t0, self->drag_n0 = self->n0;
}

static void on_drag_update(GtkGestureDrag *drag, double dx, double dy, NcRasterChart *self)
{
    if (!self->bits)
        return;
    GtkWidget *w = GTK_WIDGET(self);
    nc_plot_raster_geometry g;
    layout(self, gtk_widget_get_width(w), gtk_widget_get_height(w), &g);
    int t0 = self->drag_t0, t1 = t0 + (self->t1 - self->t0), n0 = self->drag_n0, n1 = n0 + (self->n1 - self->n0);
    nc_plot_window_pan(&t0, &t1, self->T, -(int)(dx / g.cell_w));
    nc_plot_window_pan(&n0, &n1, self->rows, -(int)(dy / g.cell_h));
    if (t0 == self->t0 && n0 == self->n0)
        return;
    self->t0 = t0, self->t1 = t1, self->n0 = n0, self->n1 = n1;
    window_changed(self);
}

/* ---- object ------------------------------------------------------------------------ */

static void nc_raster_chart_finalize(GObject *object)
{
    NcRasterChart *self = NC_RASTER_CHART(object);
    g_clear_pointer(&self->repacked, g_free);
    g_clear_pointer(&self->data, nc_run_data_unref);
    G_OBJECT_CLASS(nc_raster_chart_parent_class)->finalize(object);
}

static void nc_raster_chart_class_init(NcRasterChartClass *klass)
{
    NcChartClass *chart_class = NC_CHART_CLASS(klass);
    nc_chart_class_set_parts(chart_class, nc_raster_chart_finalize, raster_draw, raster_has_data, raster_query);
    chart_class->pressed = raster_pressed;
    chart_class->draw_overlay = raster_overlay;
    /* (layer, chosen neuron j, sample) was clicked. */
    signals[SIGNAL_NEURON_ACTIVATED] = g_signal_new("neuron-activated", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST,
                                                    0, NULL, NULL, NULL, G_TYPE_NONE, 3, G_TYPE_INT, G_TYPE_INT,
                                                    G_TYPE_INT);
    /* The visible window or the data changed (the window shows the spike count). */
    signals[SIGNAL_WINDOW_CHANGED] = g_signal_new("window-changed", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0,
                                                  NULL, NULL, NULL, G_TYPE_NONE, 0);
}

static void nc_raster_chart_init(NcRasterChart *self)
{
    self->sample = 0;
    nc_chart_set_name(NC_CHART(self), "raster");
    nc_chart_set_empty_text(NC_CHART(self), NO_SPIKES_YET);
    GtkEventController *scroll = gtk_event_controller_scroll_new(GTK_EVENT_CONTROLLER_SCROLL_VERTICAL);
    g_signal_connect(scroll, "scroll", G_CALLBACK(on_scroll), self);
    gtk_widget_add_controller(GTK_WIDGET(self), scroll);
    GtkGesture *drag = gtk_gesture_drag_new();
    g_signal_connect(drag, "drag-begin", G_CALLBACK(on_drag_begin), self);
    g_signal_connect(drag, "drag-update", G_CALLBACK(on_drag_update), self);
    gtk_widget_add_controller(GTK_WIDGET(self), GTK_EVENT_CONTROLLER(drag));
}

GtkWidget *nc_raster_chart_new(void) { return g_object_new(NC_TYPE_RASTER_CHART, NULL); }

void nc_raster_chart_set_data(NcRasterChart *self, NcRunData *data)
{
    g_return_if_fail(NC_IS_RASTER_CHART(self));
    /* once recorded, the raster stays the same for the rest of the run (the
     * snapshots share their views): keep the drawing and the count */
    gboolean same = self->data && data && self->data->views && self->data->views == data->views;
    if (data)
        nc_run_data_ref(data);
    g_clear_pointer(&self->data, nc_run_data_unref);
    self->data = data;
    if (!same)
        refresh(self, TRUE);
}

void nc_raster_chart_set_layer(NcRasterChart *self, int layer)
{
    if (self->layer == layer)
        return;
    self->layer = layer;
    refresh(self, FALSE);
}

void nc_raster_chart_set_sample(NcRasterChart *self, int sample)
{
    if (self->sample == sample)
        return;
    self->sample = sample;
    refresh(self, FALSE);
}

int nc_raster_chart_get_layer(NcRasterChart *self) { return self->layer; }

void nc_raster_chart_reset_zoom(NcRasterChart *self)
{
    self->t0 = 0, self->t1 = self->T, self->n0 = 0, self->n1 = self->rows;
    window_changed(self);
}

int64_t nc_raster_chart_get_visible_spikes(NcRasterChart *self) { return self->visible_spikes; }
int nc_raster_chart_get_rows(NcRasterChart *self) { return self->rows; }
