/* nc-teach-view.c — the teaching view (see header). */
#include "nc-teach-view.h"

#include <math.h>

struct _NcTeachView {
    NcChart parent_instance;
    NcTeachData *teach;
    int layer, step;
    float *rate;             /* running rate of the layer up to `step`         */
    int map_c, map_h, map_w;
    char caption[256];
    /* playback */
    guint tick_id;
    gint64 last_frame;
    double speed, carry;
};

G_DEFINE_FINAL_TYPE(NcTeachView, nc_teach_view, NC_TYPE_CHART)

enum { SIGNAL_STEP_CHANGED, N_SIGNALS };
static guint signals[N_SIGNALS];

static const NcTeachLayer *current(NcTeachView *self)
{
    return self->teach && self->layer >= 0 && self->layer < self->teach->n_layers ? &self->teach->layers[self->layer]
                                                                                  : NULL;
}

/* The layer as [C, H, W]; a vector of F values as one near-square tile. */
static void map_shape(NcTeachView *self, const NcTeachLayer *L)
{
    if (L->ndim == 3) {
        self->map_c = (int)L->shape[0], self->map_h = (int)L->shape[1], self->map_w = (int)L->shape[2];
        return;
    }
    self->map_c = 1;
    self->map_w = (int)ceil(sqrt((double)L->neurons));
    self->map_h = (int)((L->neurons + self->map_w - 1) / self->map_w);
}

/* Spikes in steps 1..t over t, recomputed off the draw path when t changes. */
static void update_rate(NcTeachView *self)
{
    const NcTeachLayer *L = current(self);
    g_clear_pointer(&self->rate, g_free);
    if (!L)
        return;
    map_shape(self, L);
    self->rate = g_new0(float, L->neurons);
    for (int s = 0; s < self->step; s++)
        for (int64_t i = 0; i < L->neurons; i++)
            self->rate[i] += L->spikes[(size_t)s * L->neurons + i];
    int64_t fired = 0;
    for (int64_t i = 0; i < L->neurons; i++) {
        fired += L->spikes[(size_t)(self->step - 1) * L->neurons + i];
        self->rate[i] /= (float)self->step;
    }
    g_snprintf(self->caption, sizeof self->caption, "%s: %" G_GINT64_FORMAT " of %" G_GINT64_FORMAT " fire at t",
               L->name, fired, L->neurons);
}

static void teach_draw(NcChart *chart, cairo_t *cr, double w, double h, const nc_plot_style *st)
{
    NcTeachView *self = NC_TEACH_VIEW(chart);
    const NcTeachLayer *L = current(self);
    NcTeachData *t = self->teach;
    if (!L || !self->rate)
        return;
    nc_plot_teach_spec spec = {
        .title = "One image, step by step",
        .image_channels = t->channels, .image_height = t->height, .image_width = t->width, .image = t->image,
        .layer_caption = self->caption,
        .map_channels = self->map_c, .map_height = self->map_h, .map_width = self->map_w,
        .map_values = L->neurons, .spikes = L->spikes + (size_t)(self->step - 1) * L->neurons, .rate = self->rate,
        .n_classes = t->classes, .class_names = t->class_names,
        .evidence = t->evidence ? t->evidence + (size_t)(self->step - 1) * t->classes : NULL,
        .label = t->label, .step = self->step, .steps = t->T,
    };
    nc_plot_teach(cr, w, h, st, &spec);
}

static gboolean teach_has_data(NcChart *chart) { return current(NC_TEACH_VIEW(chart)) != NULL; }

static char *teach_query(NcChart *chart, double x, double y, double w, double h)
{
    return g_strdup("Bright: neurons that fire at step t. Tint: their rate so far (spikes / t).\n"
                    "Evidence of a class after t steps = Σ of its output over steps 1..t; the largest is the answer.");
}

/* ---- playback on the frame clock --------------------------------------------------------- */

static gboolean on_tick(GtkWidget *widget, GdkFrameClock *clock, gpointer user_data)
{
    NcTeachView *self = NC_TEACH_VIEW(widget);
    gint64 now = gdk_frame_clock_get_frame_time(clock);
    if (self->last_frame && self->teach) {
        self->carry += (now - self->last_frame) / 1e6 * self->speed;
        int advance = (int)self->carry;
        self->carry -= advance;
        if (advance > 0)
            nc_teach_view_set_step(self, (self->step + advance - 1) % self->teach->T + 1);
    }
    self->last_frame = now;
    return G_SOURCE_CONTINUE;
}

void nc_teach_view_set_playing(NcTeachView *self, gboolean playing)
{
    if (playing == (self->tick_id != 0))
        return;
    if (playing) {
        self->last_frame = 0, self->carry = 0;
        self->tick_id = gtk_widget_add_tick_callback(GTK_WIDGET(self), on_tick, NULL, NULL);
    } else {
        gtk_widget_remove_tick_callback(GTK_WIDGET(self), self->tick_id);
        self->tick_id = 0;
    }
}

gboolean nc_teach_view_get_playing(NcTeachView *self) { return self->tick_id != 0; }
void nc_teach_view_set_speed(NcTeachView *self, double steps_per_second) { self->speed = steps_per_second; }

/* ---- object -------------------------------------------------------------------------------- */

static void nc_teach_view_dispose(GObject *object)
{
    nc_teach_view_set_playing(NC_TEACH_VIEW(object), FALSE);
    G_OBJECT_CLASS(nc_teach_view_parent_class)->dispose(object);
}

static void nc_teach_view_finalize(GObject *object)
{
    NcTeachView *self = NC_TEACH_VIEW(object);
    g_clear_pointer(&self->teach, nc_teach_data_unref);
    g_clear_pointer(&self->rate, g_free);
    G_OBJECT_CLASS(nc_teach_view_parent_class)->finalize(object);
}

static void nc_teach_view_class_init(NcTeachViewClass *klass)
{
    G_OBJECT_CLASS(klass)->dispose = nc_teach_view_dispose;
    nc_chart_class_set_parts(NC_CHART_CLASS(klass), nc_teach_view_finalize, teach_draw, teach_has_data, teach_query);
    /* The step changed (by playback or a call); the window moves its slider. */
    signals[SIGNAL_STEP_CHANGED] = g_signal_new("step-changed", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL,
                                                NULL, NULL, G_TYPE_NONE, 1, G_TYPE_INT);
}

static void nc_teach_view_init(NcTeachView *self)
{
    self->step = 1, self->speed = 4;
    nc_chart_set_name(NC_CHART(self), "teaching");
    nc_chart_set_empty_text(NC_CHART(self), "Convert & Run: the first test image is simulated with every spike "
                                             "kept, to be stepped through or played here.");
}

GtkWidget *nc_teach_view_new(void) { return g_object_new(NC_TYPE_TEACH_VIEW, NULL); }

void nc_teach_view_set_data(NcTeachView *self, NcTeachData *teach)
{
    if (teach)
        nc_teach_data_ref(teach);
    g_clear_pointer(&self->teach, nc_teach_data_unref);
    self->teach = teach;
    self->layer = 0;
    if (!teach)
        nc_teach_view_set_playing(self, FALSE);
    self->step = teach ? CLAMP(self->step, 1, teach->T) : 1;
    update_rate(self);
    nc_chart_changed(NC_CHART(self));
}

NcTeachData *nc_teach_view_get_data(NcTeachView *self) { return self->teach; }

void nc_teach_view_set_layer(NcTeachView *self, int layer)
{
    self->layer = layer;
    update_rate(self);
    nc_chart_changed(NC_CHART(self));
}

void nc_teach_view_set_step(NcTeachView *self, int step)
{
    if (!self->teach)
        return;
    step = CLAMP(step, 1, self->teach->T);
    if (step == self->step && self->rate)
        return;
    self->step = step;
    update_rate(self);
    nc_chart_changed(NC_CHART(self));
    g_signal_emit(self, signals[SIGNAL_STEP_CHANGED], 0, step);
}

int nc_teach_view_get_step(NcTeachView *self) { return self->step; }
