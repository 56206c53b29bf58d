/* test_chart_render.c — a chart's picture made off the main thread
 * (ui/nc-chart-render.h, NcChart): the picture a worker rasterises, shown as
 * a node that keeps its image, is pixel for pixel what the chart drew before
 * in the main thread (its cairo calls
 * recorded into a GSK cairo node and drawn), for bars with text, a raster and
 * a HiDPI scale; a job knows the generation, size and scale it was made for;
 * and a chart that changes while a worker draws drops that stale picture and
 * shows the newer one.  Runs under a display (xvfb-run). */
#include "nc_test.h"

#include <gtk/gtk.h>

#include "nc-chart-render.h"
#include "nc-chart.h"

/* ---- what the pictures are of -------------------------------------------------------- */

static const char *categories[3] = {"relu1", "relu2", "relu3"};
static const char *groups[2] = {"SNN synaptic ops", "ANN MACs"};
static const double bar_values[6] = {3e5, 1e6, 2e5, 8e5, 0, 4e5};

static void draw_bars(cairo_t *cr, double w, double h, gpointer user)
{
    nc_plot_style st;
    nc_plot_style_light(&st);
    nc_plot_bars_spec spec = {.title = "Synaptic operations per image", .y_label = "operations per image",
                              .n_categories = 3, .categories = categories, .n_groups = 2, .group_labels = groups,
                              .values = bar_values};
    nc_plot_bars(cr, w, h, &st, &spec);
}

enum { ROWS = 300, STEPS = 64 };
static uint8_t raster_bits[ROWS * STEPS / 8];

static void draw_raster(cairo_t *cr, double w, double h, gpointer user)
{
    nc_plot_style st;
    nc_plot_style_dark(&st);
    nc_plot_raster_spec spec = {"Spikes", ROWS, STEPS, raster_bits, 0, STEPS, 0, ROWS};
    nc_plot_raster(cr, w, h, &st, &spec);
}

/* ---- the synchronous picture, as NcChart drew it before ---------------------------- */

/* `node` drawn as a renderer draws it, onto w·scale × h·scale pixels. */
static cairo_surface_t *draw_node(GskRenderNode *node, int w, int h, int scale)
{
    cairo_surface_t *image = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, w * scale, h * scale);
    cairo_t *cr = cairo_create(image);
    cairo_scale(cr, scale, scale);
    gsk_render_node_draw(node, cr);
    cairo_destroy(cr);
    cairo_surface_flush(image);
    return image;
}

/* draw() recorded into a GtkSnapshot cairo node, drawn by GSK onto an image
 * of w·scale × h·scale pixels. */
static cairo_surface_t *draw_as_before(NcChartRenderDraw draw, int w, int h, int scale)
{
    GtkSnapshot *snapshot = gtk_snapshot_new();
    cairo_t *cr = gtk_snapshot_append_cairo(snapshot, &GRAPHENE_RECT_INIT(0, 0, w, h));
    draw(cr, w, h, NULL);
    cairo_destroy(cr);
    GskRenderNode *node = gtk_snapshot_free_to_node(snapshot);
    cairo_surface_t *image = draw_node(node, w, h, scale);
    gsk_render_node_unref(node);
    return image;
}

/* ---- the worker's picture ---------------------------------------------------------- */

static void on_job_done(GObject *source, GAsyncResult *result, gpointer user_data)
{
    *(NcChartRender **)user_data = nc_chart_render_finish(result);
}

/* Runs the job in a worker, waiting on the main loop for its callback. */
static NcChartRender *run_in_worker(NcChartRender *job)
{
    NcChartRender *done = NULL;
    nc_chart_render_run_async(job, NULL, on_job_done, &done);
    while (!done)
        g_main_context_iteration(NULL, TRUE);
    return done;
}

/* The number of bytes in which two images of the same size differ (-1: the
 * sizes differ). */
static long differing_bytes(cairo_surface_t *image, cairo_surface_t *expected)
{
    int w = cairo_image_surface_get_width(expected), h = cairo_image_surface_get_height(expected);
    if (cairo_image_surface_get_width(image) != w || cairo_image_surface_get_height(image) != h) {
        printf("# picture %d × %d, expected %d × %d\n", cairo_image_surface_get_width(image),
               cairo_image_surface_get_height(image), w, h);
        return -1;
    }
    int stride = cairo_image_surface_get_stride(expected);
    const guchar *got = cairo_image_surface_get_data(image), *want = cairo_image_surface_get_data(expected);
    long differ = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < 4 * w; x++)
            differ += got[(size_t)y * stride + x] != want[(size_t)y * stride + x];
    return differ;
}

/* The node is a cairo node of the chart's size that keeps the worker's
 * image (drawn after the job was freed, and drawn twice: GTK's cairo renderer
 * draws a texture node by copying the texture into a new image at every
 * repaint, which the X server is sent again; see nc_chart_render_get_node). */
static void check_same_picture(const char *what, NcChartRenderDraw draw, int w, int h, int scale)
{
    NcChartRender *job = run_in_worker(nc_chart_render_new(7, w, h, scale, draw, NULL));
    GskRenderNode *node = nc_chart_render_get_node(job);
    nc_chart_render_free(job);
    cairo_surface_t *before = draw_as_before(draw, w, h, scale);
    for (int repaint = 0; repaint < 2; repaint++) {
        cairo_surface_t *shown = draw_node(node, w, h, scale);
        long differ = differing_bytes(shown, before);
        NC_CHECK(differ == 0, "%s at scale %d, draw %d: %ld bytes differ from the synchronous drawing", what, scale,
                 repaint + 1, differ);
        cairo_surface_destroy(shown);
    }
    graphene_rect_t bounds;
    gsk_render_node_get_bounds(node, &bounds);
    NC_CHECK(gsk_render_node_get_node_type(node) == GSK_CAIRO_NODE && bounds.size.width == w &&
                 bounds.size.height == h, "%s: a cairo node (not a texture node) of the chart's size in user units",
             what);
    gsk_render_node_unref(node);
    cairo_surface_destroy(before);
}

static void test_worker_picture_equals_synchronous(void)
{
    for (int i = 0; i < (int)sizeof raster_bits; i++)
        raster_bits[i] = (uint8_t)g_random_int();
    check_same_picture("bars", draw_bars, 420, 300, 1);
    check_same_picture("bars", draw_bars, 420, 300, 2);
    check_same_picture("raster", draw_raster, 500, 360, 1);
}

static void test_job_key(void)
{
    NcChartRender *job = nc_chart_render_new(3, 200, 100, 1, draw_bars, NULL);
    NC_CHECK(nc_chart_render_matches(job, 3, 200, 100, 1), "the key it was made for");
    NC_CHECK(!nc_chart_render_matches(job, 4, 200, 100, 1), "a newer generation");
    NC_CHECK(!nc_chart_render_matches(job, 3, 201, 100, 1) && !nc_chart_render_matches(job, 3, 200, 99, 1),
             "another size");
    NC_CHECK(!nc_chart_render_matches(job, 3, 200, 100, 2), "another scale");
    nc_chart_render_free(job);
    nc_chart_render_free(NULL);
}

/* ---- a chart that changes while its worker draws ------------------------------------- */

/* A chart that fills itself with one grey level: its data. */
#define TEST_TYPE_CHART (test_chart_get_type())
G_DECLARE_FINAL_TYPE(TestChart, test_chart, TEST, CHART, NcChart)
struct _TestChart {
    NcChart parent_instance;
    int level;
};
G_DEFINE_FINAL_TYPE(TestChart, test_chart, NC_TYPE_CHART)

static void test_chart_draw(NcChart *chart, cairo_t *cr, double w, double h, const nc_plot_style *st)
{
    double grey = TEST_CHART(chart)->level / 255.0;
    cairo_set_source_rgb(cr, grey, grey, grey);
    cairo_paint(cr);
}

static void test_chart_finalize(GObject *object) { G_OBJECT_CLASS(test_chart_parent_class)->finalize(object); }
static void test_chart_class_init(TestChartClass *klass)
{
    nc_chart_class_set_parts(NC_CHART_CLASS(klass), test_chart_finalize, test_chart_draw, NULL, NULL);
}
static void test_chart_init(TestChart *self) {}

static void set_level(TestChart *chart, int level)
{
    chart->level = level;
    nc_chart_changed(NC_CHART(chart));
}

static gboolean give_up(gpointer user_data)
{
    *(gboolean *)user_data = TRUE;
    return G_SOURCE_REMOVE;
}

/* Iterates the main loop until the chart shows its current data (FALSE
 * after 30 s: something never came). */
static gboolean wait_until_current(NcChart *chart)
{
    gboolean late = FALSE;
    guint watchdog = g_timeout_add_seconds(30, give_up, &late);
    while (!nc_chart_is_current(chart) && !late)
        g_main_context_iteration(NULL, TRUE);
    if (!late)
        g_source_remove(watchdog);
    return !late;
}

/* The chart as the window would draw it now (its snapshot, which starts a
 * worker when the drawing is not current): its grey level at the centre. */
static int shown_level(GtkWidget *chart)
{
    int w = gtk_widget_get_width(chart), h = gtk_widget_get_height(chart);
    GtkSnapshot *snapshot = gtk_snapshot_new();
    GTK_WIDGET_GET_CLASS(chart)->snapshot(chart, snapshot);
    GskRenderNode *node = gtk_snapshot_free_to_node(snapshot);
    cairo_surface_t *image = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, w, h);
    cairo_t *cr = cairo_create(image);
    if (node)
        gsk_render_node_draw(node, cr);
    cairo_destroy(cr);
    cairo_surface_flush(image);
    int level = cairo_image_surface_get_data(image)[(h / 2) * cairo_image_surface_get_stride(image) + 4 * (w / 2) + 1];
    cairo_surface_destroy(image);
    g_clear_pointer(&node, gsk_render_node_unref);
    return level;
}

static void test_stale_picture_is_dropped(void)
{
    GtkWidget *window = gtk_window_new();
    TestChart *chart = g_object_new(TEST_TYPE_CHART, NULL);
    gtk_window_set_default_size(GTK_WINDOW(window), 400, 300);
    gtk_window_set_child(GTK_WINDOW(window), GTK_WIDGET(chart));
    set_level(chart, 40);
    gtk_window_present(GTK_WINDOW(window));
    NC_CHECK(wait_until_current(NC_CHART(chart)), "the first drawing arrives");
    NC_CHECK(shown_level(GTK_WIDGET(chart)) == 40, "it shows level 40, not %d", shown_level(GTK_WIDGET(chart)));
    guint drawn = nc_chart_get_draw_count(NC_CHART(chart)), dropped = nc_chart_get_dropped_count(NC_CHART(chart));
    /* level 80 goes to a worker (this snapshot starts it), then the data
     * change again before the main loop can take the worker's picture */
    set_level(chart, 80);
    NC_CHECK(shown_level(GTK_WIDGET(chart)) == 40, "the older drawing stays while the worker draws");
    set_level(chart, 120);
    NC_CHECK(wait_until_current(NC_CHART(chart)), "the newest drawing arrives");
    NC_CHECK(nc_chart_get_dropped_count(NC_CHART(chart)) == dropped + 1, "level 80's picture was dropped (%u)",
             nc_chart_get_dropped_count(NC_CHART(chart)) - dropped);
    NC_CHECK(nc_chart_get_draw_count(NC_CHART(chart)) == drawn + 1, "one drawing shown since (%u)",
             nc_chart_get_draw_count(NC_CHART(chart)) - drawn);
    NC_CHECK(shown_level(GTK_WIDGET(chart)) == 120, "it shows level 120, not %d", shown_level(GTK_WIDGET(chart)));
    gtk_window_destroy(GTK_WINDOW(window));
}

int main(void)
{
    if (!gtk_init_check()) {
        nc_test_report("a display (run under xvfb-run)", 0, "no display");
        return nc_test_done();
    }
    NC_RUN(test_worker_picture_equals_synchronous);
    NC_RUN(test_job_key);
    NC_RUN(test_stale_picture_is_dropped);
    return nc_test_done();
}
