/* nc-chart-render.c — a chart's picture, rasterised off the main thread (see header). */
#include "nc-chart-render.h"

struct NcChartRender {
    guint generation;
    int width, height, scale;
    cairo_surface_t *recording;   /* made on the main thread, replayed once */
    cairo_surface_t *image;       /* ARGB32, width·scale × height·scale     */
    GdkTexture *texture;
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
    g_clear_object(&job->texture);
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

/* The texture borrows the image's pixels (cairo's ARGB32 is GDK's default
 * memory format: premultiplied BGRA in memory on little-endian, ARGB on
 * big-endian); the bytes keep the surface alive. */
GdkTexture *nc_chart_render_get_texture(NcChartRender *job)
{
    g_return_val_if_fail(job->image, NULL);
    if (!job->texture) {
        cairo_surface_t *image = job->image;
        int stride = cairo_image_surface_get_stride(image), height = cairo_image_surface_get_height(image);
        GBytes *bytes = g_bytes_new_with_free_func(cairo_image_surface_get_data(image), (gsize)stride * height,
                                                   (GDestroyNotify)cairo_surface_destroy, cairo_surface_reference(image));
        job->texture = gdk_memory_texture_new(cairo_image_surface_get_width(image), height, GDK_MEMORY_DEFAULT, bytes,
                                              stride);
        g_bytes_unref(bytes);
    }
    return job->texture;
}

GskRenderNode *nc_chart_render_get_node(NcChartRender *job)
{
    return gsk_texture_node_new(nc_chart_render_get_texture(job), &GRAPHENE_RECT_INIT(0, 0, job->width, job->height));
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
