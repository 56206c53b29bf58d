/* nc-chart.c — base widget of the charts (see nc-chart.h). */
#include "nc-chart.h"

#include <adwaita.h>

#include "nc-chart-render.h"

typedef struct {
    char *name, *empty_text;
    /* The drawing shown: the one made for (cache_generation, size, scale),
     * kept on screen while a newer one is rasterised in a worker. */
    GskRenderNode *cache;
    guint generation, cache_generation;  /* generation: bumped at every change */
    int cache_width, cache_height, cache_scale;
    gboolean building;                   /* a worker is rasterising            */
    gboolean pointer_inside;
    double pointer_x, pointer_y;
    guint draw_count, dropped_count;
} NcChartPrivate;

G_DEFINE_TYPE_WITH_PRIVATE(NcChart, nc_chart, GTK_TYPE_WIDGET)

enum { PROP_0, PROP_NAME, PROP_EMPTY_TEXT, N_PROPS };
static GParamSpec *props[N_PROPS];

static void drop_cache(NcChart *self)
{
    NcChartPrivate *priv = nc_chart_get_instance_private(self);
    g_clear_pointer(&priv->cache, gsk_render_node_unref);
}

void nc_chart_class_set_parts(NcChartClass *klass, void (*finalize)(GObject *object),
                              void (*draw)(NcChart *, cairo_t *, double, double, const nc_plot_style *),
                              gboolean (*has_data)(NcChart *), char *(*query)(NcChart *, double, double, double, double))
{
    G_OBJECT_CLASS(klass)->finalize = finalize;
    klass->draw = draw;
    klass->has_data = has_data;
    klass->query = query;
}

/* The drawing shown stays until its successor is made (see snapshot()). */
void nc_chart_changed(NcChart *self)
{
    g_return_if_fail(NC_IS_CHART(self));
    NcChartPrivate *priv = nc_chart_get_instance_private(self);
    priv->generation++;
    gtk_widget_queue_draw(GTK_WIDGET(self));
}

/* ---- theme colours ----------------------------------------------------------- */

static nc_rgba rgba_of(const GdkRGBA *c) { return (nc_rgba){c->red, c->green, c->blue, c->alpha}; }

static nc_rgba mix(nc_rgba a, nc_rgba b, double t)
{
    return (nc_rgba){a.r + (b.r - a.r) * t, a.g + (b.g - a.g) * t, a.b + (b.b - a.b) * t, 1};
}

/* gtk_widget_get_color() is GTK 4.10; on 4.8 the style context is the way,
 * and libadwaita's named colours (view_bg_color, accent_color) follow the
 * dark/light scheme and high contrast. */
void nc_chart_get_style(NcChart *self, nc_plot_style *st)
{
    if (adw_style_manager_get_dark(adw_style_manager_get_default()))
        nc_plot_style_dark(st);
    else
        nc_plot_style_light(st);
    GtkStyleContext *ctx = gtk_widget_get_style_context(GTK_WIDGET(self));
    GdkRGBA c;
    if (gtk_style_context_lookup_color(ctx, "view_bg_color", &c))
        st->background = rgba_of(&c);
    if (gtk_style_context_lookup_color(ctx, "view_fg_color", &c))
        st->foreground = rgba_of(&c);
    st->grid = mix(st->background, st->foreground, 0.13);
    if (gtk_style_context_lookup_color(ctx, "accent_color", &c))
        st->series[0] = rgba_of(&c);
    st->font_size = 12;
    st->pixel_scale = gtk_widget_get_scale_factor(GTK_WIDGET(self));
}

static void on_dark_changed(NcChart *self) { nc_chart_changed(self); }

/* ---- drawing ------------------------------------------------------------------------ */

static void draw_empty_text(NcChart *self, cairo_t *cr, double w, double h, const nc_plot_style *st)
{
    NcChartPrivate *priv = nc_chart_get_instance_private(self);
    cairo_set_source_rgba(cr, st->background.r, st->background.g, st->background.b, 1);
    cairo_paint(cr);
    PangoLayout *layout = gtk_widget_create_pango_layout(GTK_WIDGET(self), priv->empty_text);
    pango_layout_set_alignment(layout, PANGO_ALIGN_CENTER);
    pango_layout_set_width(layout, (int)(MAX(w - 40, 50) * PANGO_SCALE));
    pango_layout_set_wrap(layout, PANGO_WRAP_WORD);
    int lw, lh;
    pango_layout_get_pixel_size(layout, &lw, &lh);
    cairo_set_source_rgba(cr, st->foreground.r, st->foreground.g, st->foreground.b, 0.55);
    cairo_move_to(cr, (w - MAX(w - 40, 50)) / 2, (h - lh) / 2);
    pango_cairo_show_layout(cr, layout);
    g_object_unref(layout);
}

static gboolean has_data(NcChart *self)
{
    NcChartClass *klass = NC_CHART_GET_CLASS(self);
    return !klass->has_data || klass->has_data(self);
}

static void set_cache(NcChart *self, GskRenderNode *node, int w, int h, int scale)
{
    NcChartPrivate *priv = nc_chart_get_instance_private(self);
    drop_cache(self);
    priv->cache = node;
    priv->cache_generation = priv->generation;
    priv->cache_width = w, priv->cache_height = h, priv->cache_scale = scale;
    priv->draw_count++;
}

/* The empty-state text, on the main thread (it needs the widget's Pango
 * context; a few glyphs). */
static void build_empty_text(NcChart *self, int w, int h, const nc_plot_style *st)
{
    GtkSnapshot *sub = gtk_snapshot_new();
    cairo_t *cr = gtk_snapshot_append_cairo(sub, &GRAPHENE_RECT_INIT(0, 0, w, h));
    draw_empty_text(self, cr, w, h, st);
    cairo_destroy(cr);
    set_cache(self, gtk_snapshot_free_to_node(sub), w, h, st->pixel_scale);
}

typedef struct {
    NcChart *chart;
    const nc_plot_style *style;
} DrawCtx;

static void draw_chart(cairo_t *cr, double w, double h, gpointer user)
{
    DrawCtx *ctx = user;
    NC_CHART_GET_CLASS(ctx->chart)->draw(ctx->chart, cr, w, h, ctx->style);
}

/* A worker's picture arrives: shown when it is still what the chart looks
 * like now, dropped when the data, theme or size changed since. */
static void on_built(GObject *source, GAsyncResult *result, gpointer user_data)
{
    NcChart *self = NC_CHART(source);
    NcChartPrivate *priv = nc_chart_get_instance_private(self);
    NcChartRender *job = nc_chart_render_finish(result);
    priv->building = FALSE;
    int w = gtk_widget_get_width(GTK_WIDGET(self)), h = gtk_widget_get_height(GTK_WIDGET(self));
    int scale = gtk_widget_get_scale_factor(GTK_WIDGET(self));
    if (job && nc_chart_render_matches(job, priv->generation, w, h, scale))
        set_cache(self, nc_chart_render_get_node(job), w, h, scale);
    else
        priv->dropped_count++;
    nc_chart_render_free(job);
    gtk_widget_queue_draw(GTK_WIDGET(self)); /* show it, or start the newer one */
}

/* The data are read now (recorded); the pixels are made in a worker. */
static void build_cache_in_worker(NcChart *self, int w, int h, const nc_plot_style *st)
{
    NcChartPrivate *priv = nc_chart_get_instance_private(self);
    DrawCtx ctx = {self, st};
    NcChartRender *job = nc_chart_render_new(priv->generation, w, h, st->pixel_scale, draw_chart, &ctx);
    priv->building = TRUE;
    nc_chart_render_run_async(job, self, on_built, NULL);
}

static gboolean cache_is_current(NcChartPrivate *priv, int w, int h, int scale)
{
    return priv->cache && priv->cache_generation == priv->generation && priv->cache_width == w &&
           priv->cache_height == h && priv->cache_scale == scale;
}

static void nc_chart_snapshot(GtkWidget *widget, GtkSnapshot *snapshot)
{
    NcChart *self = NC_CHART(widget);
    NcChartPrivate *priv = nc_chart_get_instance_private(self);
    int w = gtk_widget_get_width(widget), h = gtk_widget_get_height(widget);
    if (w <= 0 || h <= 0)
        return;
    nc_plot_style st;
    nc_chart_get_style(self, &st);
    if (!cache_is_current(priv, w, h, st.pixel_scale)) {
        if (!has_data(self) && priv->empty_text)
            build_empty_text(self, w, h, &st);
        else if (!priv->building)
            build_cache_in_worker(self, w, h, &st);
    }
    /* until the worker's first drawing arrives: the chart's background */
    GdkRGBA background = {st.background.r, st.background.g, st.background.b, 1};
    gtk_snapshot_push_clip(snapshot, &GRAPHENE_RECT_INIT(0, 0, w, h)); /* an older drawing may be larger */
    if (priv->cache)
        gtk_snapshot_append_node(snapshot, priv->cache);
    else
        gtk_snapshot_append_color(snapshot, &background, &GRAPHENE_RECT_INIT(0, 0, w, h));
    gtk_snapshot_pop(snapshot);
    NcChartClass *klass = NC_CHART_GET_CLASS(self);
    if (klass->draw_overlay && priv->pointer_inside && has_data(self)) {
        cairo_t *cr = gtk_snapshot_append_cairo(snapshot, &GRAPHENE_RECT_INIT(0, 0, w, h));
        klass->draw_overlay(self, cr, w, h, &st, priv->pointer_x, priv->pointer_y);
        cairo_destroy(cr);
    }
}

static void nc_chart_css_changed(GtkWidget *widget, GtkCssStyleChange *change)
{
    GTK_WIDGET_CLASS(nc_chart_parent_class)->css_changed(widget, change);
    NcChartPrivate *priv = nc_chart_get_instance_private(NC_CHART(widget));
    priv->generation++; /* theme colours may have changed */
}

/* ---- pointer ------------------------------------------------------------------------- */

static void on_motion(GtkEventControllerMotion *motion, double x, double y, NcChart *self)
{
    NcChartPrivate *priv = nc_chart_get_instance_private(self);
    priv->pointer_inside = TRUE, priv->pointer_x = x, priv->pointer_y = y;
    if (NC_CHART_GET_CLASS(self)->draw_overlay)
        gtk_widget_queue_draw(GTK_WIDGET(self));
}

static void on_leave(GtkEventControllerMotion *motion, NcChart *self)
{
    NcChartPrivate *priv = nc_chart_get_instance_private(self);
    priv->pointer_inside = FALSE;
    if (NC_CHART_GET_CLASS(self)->draw_overlay)
        gtk_widget_queue_draw(GTK_WIDGET(self));
}

gboolean nc_chart_get_pointer(NcChart *self, double *x, double *y)
{
    NcChartPrivate *priv = nc_chart_get_instance_private(self);
    *x = priv->pointer_x, *y = priv->pointer_y;
    return priv->pointer_inside;
}

static gboolean on_query_tooltip(GtkWidget *widget, int x, int y, gboolean keyboard, GtkTooltip *tooltip,
                                 gpointer user_data)
{
    NcChart *self = NC_CHART(widget);
    NcChartClass *klass = NC_CHART_GET_CLASS(self);
    if (!klass->query || !has_data(self))
        return FALSE;
    char *markup = klass->query(self, x, y, gtk_widget_get_width(widget), gtk_widget_get_height(widget));
    if (!markup)
        return FALSE;
    gtk_tooltip_set_markup(tooltip, markup);
    g_free(markup);
    return TRUE;
}

static void on_pressed(GtkGestureClick *gesture, int n_press, double x, double y, NcChart *self)
{
    NcChartClass *klass = NC_CHART_GET_CLASS(self);
    GtkWidget *w = GTK_WIDGET(self);
    if (klass->pressed && has_data(self))
        klass->pressed(self, x, y, gtk_widget_get_width(w), gtk_widget_get_height(w), n_press);
}

/* ---- export ---------------------------------------------------------------------------- */

typedef struct {
    NcChart *chart;
    nc_plot_style style;
} ExportCtx;

static void export_draw(cairo_t *cr, double w, double h, void *user)
{
    ExportCtx *ctx = user;
    NC_CHART_GET_CLASS(ctx->chart)->draw(ctx->chart, cr, w, h, &ctx->style);
}

gboolean nc_chart_export(NcChart *self, const char *path, int width, int height, GError **error)
{
    g_return_val_if_fail(NC_IS_CHART(self), FALSE);
    ExportCtx ctx = {self};
    nc_plot_style_light(&ctx.style);
    char message[1024];
    if (nc_plot_save(path, width, height, export_draw, &ctx, message, sizeof message) != 0) {
        g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_FAILED, message);
        return FALSE;
    }
    return TRUE;
}

/* ---- object ------------------------------------------------------------------------------- */

const char *nc_chart_get_name(NcChart *self)
{
    NcChartPrivate *priv = nc_chart_get_instance_private(self);
    return priv->name ? priv->name : "chart";
}

void nc_chart_set_name(NcChart *self, const char *name)
{
    NcChartPrivate *priv = nc_chart_get_instance_private(self);
    if (g_strcmp0(priv->name, name) == 0)
        return;
    g_free(priv->name);
    priv->name = g_strdup(name);
    gtk_accessible_update_property(GTK_ACCESSIBLE(self), GTK_ACCESSIBLE_PROPERTY_LABEL, name, -1);
    g_object_notify_by_pspec(G_OBJECT(self), props[PROP_NAME]);
}

void nc_chart_set_empty_text(NcChart *self, const char *text)
{
    NcChartPrivate *priv = nc_chart_get_instance_private(self);
    g_free(priv->empty_text);
    priv->empty_text = g_strdup(text);
    nc_chart_changed(self);
}

guint nc_chart_get_draw_count(NcChart *self)
{
    NcChartPrivate *priv = nc_chart_get_instance_private(self);
    return priv->draw_count;
}

guint nc_chart_get_dropped_count(NcChart *self)
{
    NcChartPrivate *priv = nc_chart_get_instance_private(self);
    return priv->dropped_count;
}

gboolean nc_chart_is_current(NcChart *self)
{
    NcChartPrivate *priv = nc_chart_get_instance_private(self);
    return priv->cache && priv->cache_generation == priv->generation && !priv->building;
}

static void nc_chart_get_property(GObject *object, guint id, GValue *value, GParamSpec *pspec)
{
    NcChartPrivate *priv = nc_chart_get_instance_private(NC_CHART(object));
    switch (id) {
    case PROP_NAME: g_value_set_string(value, priv->name); break;
    case PROP_EMPTY_TEXT: g_value_set_string(value, priv->empty_text); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
    }
}

static void nc_chart_set_property(GObject *object, guint id, const GValue *value, GParamSpec *pspec)
{
    NcChart *self = NC_CHART(object);
    switch (id) {
    case PROP_NAME: nc_chart_set_name(self, g_value_get_string(value)); break;
    case PROP_EMPTY_TEXT: nc_chart_set_empty_text(self, g_value_get_string(value)); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
    }
}

static void nc_chart_dispose(GObject *object)
{
    NcChart *self = NC_CHART(object);
    NcChartPrivate *priv = nc_chart_get_instance_private(self);
    drop_cache(self);
    g_clear_pointer(&priv->name, g_free);
    g_clear_pointer(&priv->empty_text, g_free);
    G_OBJECT_CLASS(nc_chart_parent_class)->dispose(object);
}

static void nc_chart_class_init(NcChartClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS(klass);
    GtkWidgetClass *widget_class = GTK_WIDGET_CLASS(klass);
    object_class->dispose = nc_chart_dispose;
    object_class->get_property = nc_chart_get_property;
    object_class->set_property = nc_chart_set_property;
    widget_class->snapshot = nc_chart_snapshot;
    widget_class->css_changed = nc_chart_css_changed;
    props[PROP_NAME] = g_param_spec_string("name", NULL, NULL, NULL, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);
    props[PROP_EMPTY_TEXT] =
        g_param_spec_string("empty-text", NULL, NULL, NULL, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);
    g_object_class_install_properties(object_class, N_PROPS, props);
    gtk_widget_class_set_css_name(widget_class, "ncchart");
    gtk_widget_class_set_accessible_role(widget_class, GTK_ACCESSIBLE_ROLE_IMG);
}

static void nc_chart_init(NcChart *self)
{
    GtkWidget *w = GTK_WIDGET(self);
    gtk_widget_set_hexpand(w, TRUE);
    gtk_widget_set_vexpand(w, TRUE);
    gtk_widget_set_size_request(w, 320, 220);
    gtk_widget_set_has_tooltip(w, TRUE);
    g_signal_connect(w, "query-tooltip", G_CALLBACK(on_query_tooltip), NULL);
    GtkEventController *motion = gtk_event_controller_motion_new();
    g_signal_connect(motion, "motion", G_CALLBACK(on_motion), self);
    g_signal_connect(motion, "leave", G_CALLBACK(on_leave), self);
    gtk_widget_add_controller(w, motion);
    GtkGesture *click = gtk_gesture_click_new();
    /* "released" (not "pressed") so that a drag that pans is not also a click */
    g_signal_connect(click, "released", G_CALLBACK(on_pressed), self);
    gtk_widget_add_controller(w, GTK_EVENT_CONTROLLER(click));
    g_signal_connect_object(adw_style_manager_get_default(), "notify::dark", G_CALLBACK(on_dark_changed), self,
                            G_CONNECT_SWAPPED);
}
