/* test_plot.c — the cairo charts draw what they are given, to PNG, SVG and
 * PDF, and a bad path gives a message instead of a crash. */
#include "nc_test.h"

#include <unistd.h>

#include "nc_plot.h"

static const double steps[6] = {1, 2, 4, 8, 16, 32};
static const double accuracy[6] = {0.1, 0.3, 0.6, 0.8, 0.88, 0.9};

static void draw_lines(cairo_t *cr, double w, double h, void *user)
{
    nc_plot_style st;
    nc_plot_style_light(&st);
    nc_plot_series series = {"p99.9", 6, steps, accuracy};
    nc_plot_hline ann = {"ANN", 0.91};
    nc_plot_lines_spec spec = {.title = "Accuracy", .x_label = "T", .y_label = "accuracy", .log2_x = 1,
                               .fixed_y = 1, .y_min = 0, .y_max = 1, .n_series = 1, .series = &series,
                               .n_hlines = 1, .hlines = &ann};
    nc_plot_lines(cr, w, h, &st, &spec);
}

static int count_series_pixels(cairo_surface_t *s)
{
    /* the first series colour is (0, 0.45, 0.70): count clearly blue pixels */
    int count = 0, stride = cairo_image_surface_get_stride(s);
    unsigned char *data = cairo_image_surface_get_data(s);
    for (int y = 0; y < cairo_image_surface_get_height(s); y++)
        for (int x = 0; x < cairo_image_surface_get_width(s); x++) {
            unsigned char *p = data + y * stride + 4 * x; /* BGRA */
            count += p[0] > 150 && p[2] < 60 && p[1] > 80 && p[1] < 150;
        }
    return count;
}

static void test_lines_draw_the_series(void)
{
    cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 640, 400);
    cairo_t *cr = cairo_create(s);
    draw_lines(cr, 640, 400, NULL);
    cairo_destroy(cr);
    cairo_surface_flush(s);
    int pixels = count_series_pixels(s);
    NC_CHECK(pixels > 300, "the accuracy line is drawn (%d pixels)", pixels);
    cairo_surface_destroy(s);
}

static void draw_bars(cairo_t *cr, double w, double h, void *user)
{
    nc_plot_style st;
    nc_plot_style_dark(&st);
    const char *layers[3] = {"relu1", "relu2", "relu3"};
    const char *parts[3] = {"clip", "quant", "uneven"};
    double values[9] = {0.1, 0.2, 0.05, 0.02, 0.3, 0.1, 0, 0.1, 0.4};
    nc_plot_bars_spec spec = {"Error", "MSE", 3, layers, 3, parts, values, *(int *)user};
    nc_plot_bars(cr, w, h, &st, &spec);
}

static void draw_raster(cairo_t *cr, double w, double h, void *user)
{
    nc_plot_style st;
    nc_plot_style_light(&st);
    nc_plot_raster_spec spec = {"Raster", 16, 32, user, 0, 32, 0, 16};
    nc_plot_raster(cr, w, h, &st, &spec);
}

static void test_files_are_written(void)
{
    char dir[] = "/tmp/nc-plot-XXXXXX", path[256], err[512];
    NC_CHECK(mkdtemp(dir) != NULL, "temp dir");
    const char *ext[3] = {"png", "svg", "pdf"};
    for (int i = 0; i < 3; i++) {
        int stacked = i == 1;
        snprintf(path, sizeof path, "%s/bars.%s", dir, ext[i]);
        NC_CHECK(nc_plot_save(path, 500, 300, draw_bars, &stacked, err, sizeof err) == 0, "%s", err);
        NC_CHECK(access(path, R_OK) == 0, "%s exists", path);
        unlink(path);
    }
    unsigned char bits[16 * 32 / 8];
    for (size_t i = 0; i < sizeof bits; i++)
        bits[i] = (unsigned char)(i * 37);
    snprintf(path, sizeof path, "%s/raster.png", dir);
    NC_CHECK(nc_plot_save(path, 400, 300, draw_raster, bits, err, sizeof err) == 0, "%s", err);
    unlink(path);
    snprintf(path, sizeof path, "%s/plot.bmp", dir);
    NC_CHECK(nc_plot_save(path, 100, 100, draw_lines, NULL, err, sizeof err) == -1 && strstr(err, ".png"),
             "unknown format refused: %s", err);
    NC_CHECK(nc_plot_save("/nonexistent-dir/x.png", 100, 100, draw_lines, NULL, err, sizeof err) == -1 &&
                 strstr(err, "/nonexistent-dir/x.png"),
             "unwritable path reported: %s", err);
    rmdir(dir);
}

int main(void)
{
    NC_RUN(test_lines_draw_the_series);
    NC_RUN(test_files_are_written);
    return nc_test_done();
}
