/* nc-chart-render.c — a chart's picture, rasterised off the main thread (see header). */
#include "nc-chart-render.h"

struct NcChartRender {
    guint generation;
    int width, height, scale;
    cairo_surface_t *recording;   /* made on the main thread, replayed once */
    cairo_surface_t *image;       /* ARGB32, width·scale × height·scale     */
};

NcChartRender *nc_chart_render_new(guint generation, int width, int height, int scale, NcChartRenderDraw draw,
                                   gpointer user)
{
    NcChartRender *job = g_new0(NcChartRender, 1);
    job->generation = generation;
    job->width = MAX(width, 1), job->height = MAX(height, 1), job->scale = MAX(scale, 1);
    cairo_rectangle_t extents = {0, 0, job->width, job->height};
    job->recording = cairo_recording_surface_create(CAIRO_CONTENT_COLOR_ALPHA, &extents);
    cairo_t *cr = cairo_create(job->recording);
    draw(cr, job->width, job->height, user);
    cairo_destroy(cr);
    return job;
}

void nc_chart_render_free(NcChartRender *job)
{
    if (!job)
        return;
    g_clear_pointer(&job->recording, cairo_surface_destroy);
    g_clear_pointer(&job->image, cairo_surface_destroy);
    g_free(job);
}

gboolean nc_chart_render_matches(const NcChartRender *job, guint generation, int width, int height, int scale)
{
    return job->generation == generation && job->width == width && job->height == height && job->scale == scale;
}

void nc_chart_render_run(NcChartRender *job)
{
    g_return_if_fail(job->recording && !job->image);
    job->image = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, job->width * job->scale, job->height * job->scale);
    cairo_t *cr = cairo_create(job->image);
    cairo_scale(cr, job->scale, job->scale);
    cairo_set_source_surface(cr, job->recording, 0, 0);
    cairo_paint(cr);
    cairo_destroy(cr);
    cairo_surface_flush(job->image);
    g_clear_pointer(&job->recording, cairo_surface_destroy);
}

/* A cairo node that paints the image, not a texture node.  GTK 4.8's cairo
 * renderer turns a texture into a new cairo image at every draw of its node
 * (a copy), which cairo-xlib then uploads to the X server again: a repaint of
 * a 1300 × 850 chart cost 7 ms of the main thread on the idle dev machine and
 * 20–26 ms with the engine on both cores (the late paints of BENCHMARKS §9 run
 * I).  The cairo node's recording keeps this image itself (a snapshot of it,
 * which takes over its pixels without a copy when the job is freed), and
 * cairo-xlib keeps the pixmap it uploaded with that image, so the upload is
 * made at the first draw and later repaints composite it in the X server
 * (1.4 ms for the same chart). */
GskRenderNode *nc_chart_render_get_node(NcChartRender *job)
{
    g_return_val_if_fail(job->image, NULL);
    GskRenderNode *node = gsk_cairo_node_new(&GRAPHENE_RECT_INIT(0, 0, job->width, job->height));
    cairo_t *cr = gsk_cairo_node_get_draw_context(node);
    cairo_scale(cr, 1.0 / job->scale, 1.0 / job->scale); /* the image has scale pixels per unit */
    cairo_set_source_surface(cr, job->image, 0, 0);
    cairo_paint(cr);
    cairo_destroy(cr);
    return node;
}

static void run_in_worker(GTask *task, gpointer source, gpointer job, GCancellable *cancellable)
{
    nc_chart_render_run(job);
    g_task_return_pointer(task, job, (GDestroyNotify)nc_chart_render_free);
}

void nc_chart_render_run_async(NcChartRender *job, gpointer source_object, GAsyncReadyCallback callback,
                               gpointer user_data)
{
    GTask *task = g_task_new(source_object, NULL, callback, user_data);
    g_task_set_source_tag(task, nc_chart_render_run_async);
    g_task_set_task_data(task, job, NULL);
    g_task_run_in_thread(task, run_in_worker);
    g_object_unref(task);
}

NcChartRender *nc_chart_render_finish(GAsyncResult *result)
{
    GTask *task = G_TASK(result);
    g_return_val_if_fail(g_task_get_source_tag(task) == nc_chart_render_run_async, NULL);
    return g_task_propagate_pointer(task, NULL);
}
