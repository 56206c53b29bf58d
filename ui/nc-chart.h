/* nc-chart.h — the base widget of every chart in the workbench.
 *
 * A subclass only says how to draw (draw(), through ui/nc_plot.h, the same
 * code that writes PNG/SVG/PDF) and, optionally, what lies under the pointer
 * (query() for the tooltip, pressed() for clicks, draw_overlay() for a hover
 * mark).  The base class:
 *   - caches the drawn chart as one GskRenderNode and redraws it only when
 *     the data (nc_chart_changed), the size or the theme change — hovering
 *     and window drags cost a node append, not a chart; a redraw records the
 *     chart's cairo calls on the main thread and rasterises them into a
 *     texture in a worker (nc-chart-render.h), showing the older drawing
 *     until then (the first drawing and the empty-state text are made at
 *     once);
 *   - takes the colours from the theme (libadwaita's named colours, dark or
 *     light), and follows AdwStyleManager;
 *   - exports the chart (nc_chart_export) in the light style, for documents;
 *   - shows its empty-state text while has_data() is FALSE. */
#pragma once

#include <gtk/gtk.h>

#include "nc_plot.h"

G_BEGIN_DECLS

#define NC_TYPE_CHART (nc_chart_get_type())
G_DECLARE_DERIVABLE_TYPE(NcChart, nc_chart, NC, CHART, GtkWidget)

struct _NcChartClass {
    GtkWidgetClass parent_class;

    void (*draw)(NcChart *self, cairo_t *cr, double width, double height, const nc_plot_style *style);
    gboolean (*has_data)(NcChart *self);
    /* Tooltip markup for the point (x, y) of a width × height chart, or NULL. */
    char *(*query)(NcChart *self, double x, double y, double width, double height);
    void (*pressed)(NcChart *self, double x, double y, double width, double height, int n_press);
    /* Drawn over the cached chart every frame (hover marks); may be NULL. */
    void (*draw_overlay)(NcChart *self, cairo_t *cr, double width, double height, const nc_plot_style *style,
                         double pointer_x, double pointer_y);
};

/* What every chart class sets in its class_init: how an instance is freed,
 * drawn, whether it has data to draw, and its tooltips (the optional pressed
 * and draw_overlay stay for the class to set). */
void nc_chart_class_set_parts(NcChartClass *klass, void (*finalize)(GObject *object),
                              void (*draw)(NcChart *, cairo_t *, double, double, const nc_plot_style *),
                              gboolean (*has_data)(NcChart *), char *(*query)(NcChart *, double, double, double, double));

/* The data changed: drop the cached drawing and redraw on the next frame. */
void nc_chart_changed(NcChart *self);
/* The style a chart is drawn with on screen now (theme colours). */
void nc_chart_get_style(NcChart *self, nc_plot_style *style);
/* Writes the chart to path (.png, .svg, .pdf), width × height, light style,
 * atomically (nc_plot_save).  FALSE with a message that says what to do. */
gboolean nc_chart_export(NcChart *self, const char *path, int width, int height, GError **error);

/* A short name for files and menus ("accuracy", "raster", ...) and the text
 * shown while there is nothing to draw. */
const char *nc_chart_get_name(NcChart *self);
void nc_chart_set_name(NcChart *self, const char *name);
void nc_chart_set_empty_text(NcChart *self, const char *text);
/* The pointer position over the chart, or FALSE when it is outside. */
gboolean nc_chart_get_pointer(NcChart *self, double *x, double *y);
/* Number of drawings shown so far (tests: the views redraw), and of those
 * made in a worker and dropped because the chart changed again meanwhile. */
guint nc_chart_get_draw_count(NcChart *self);
guint nc_chart_get_dropped_count(NcChart *self);
/* TRUE when the drawing shown is of the chart's current data (no newer one
 * is being made). */
gboolean nc_chart_is_current(NcChart *self);

G_END_DECLS
