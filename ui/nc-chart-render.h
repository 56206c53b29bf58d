/* nc-chart-render.h — a chart's picture, rasterised off the main thread.
 *
 * The main thread records what a chart draws (its cairo calls, into a
 * recording surface: the chart's data is read there and nowhere else); a
 * worker replays the recording into an image of the chart's pixel size; the
 * main thread shows that image as one node that paints it (a cairo node that
 * keeps the image: not a texture node, which GTK 4.8's cairo renderer copies
 * and uploads to the X server again at every repaint; see get_node).  A chart recorded into a cairo node instead is replayed by GTK's
 * renderer on the main thread every time the window repaints it (through
 * XRender on X11: 4–10 ms of the main thread per changed chart, the raster
 * the most), which is what late frames were made of.
 *
 * A job keeps the key it was made for — the chart's generation (bumped at
 * every change of its data or theme), its size and scale — so that a result
 * that arrives after the chart changed again is recognised as stale. */
#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

typedef struct NcChartRender NcChartRender;

/* Draws the chart into cr, width × height (user units: the widget's). */
typedef void (*NcChartRenderDraw)(cairo_t *cr, double width, double height, gpointer user);

/* Records draw(user) now (main thread), for a width × height chart at
 * `scale` device pixels per unit, made for `generation`. */
NcChartRender *nc_chart_render_new(guint generation, int width, int height, int scale, NcChartRenderDraw draw,
                                   gpointer user);
void nc_chart_render_free(NcChartRender *job);

/* TRUE when the job was made for this generation, size and scale. */
gboolean nc_chart_render_matches(const NcChartRender *job, guint generation, int width, int height, int scale);

/* Replays the recording into the job's image (any thread; once). */
void nc_chart_render_run(NcChartRender *job);
/* The image after nc_chart_render_run (width·scale × height·scale pixels) as
 * a node of the chart's size in user units, which keeps the image: the job
 * may be freed afterwards. */
GskRenderNode *nc_chart_render_get_node(NcChartRender *job);

/* Runs the job in a worker thread and calls back on the caller's main
 * context; the job belongs to the task until nc_chart_render_finish hands
 * it back (the caller frees it). */
void nc_chart_render_run_async(NcChartRender *job, gpointer source_object, GAsyncReadyCallback callback,
                               gpointer user_data);
NcChartRender *nc_chart_render_finish(GAsyncResult *result);

G_END_DECLS
