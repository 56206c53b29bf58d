/* test_ui_charts.c — the chart geometry the workbench's widgets rely on,
 * without a display: axis ranges, data ↔ pixel mapping, hit-testing of the
 * lines, bars (also several stacks side by side, as before/after fine-tuning)
 * and raster, zoom/pan windows, subsampling, and a raster with a million
 * spikes drawn in well under a frame budget's worth of seconds. */
#include "nc_test.h"

#include <time.h>

#include "nc_plot.h"

static cairo_t *scratch(cairo_surface_t **surface, int w, int h)
{
    *surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, w, h);
    return cairo_create(*surface);
}

static void done(cairo_t *cr, cairo_surface_t *s)
{
    cairo_destroy(cr);
    cairo_surface_destroy(s);
}

/* A w×h scratch surface and a plot style (light, or dark): what the layout
 * and hit tests start from. */
typedef struct canvas {
    cairo_surface_t *surface;
    cairo_t *cr;
    nc_plot_style st;
} canvas;

static canvas canvas_new(int w, int h, int dark)
{
    canvas cv;
    cv.cr = scratch(&cv.surface, w, h);
    if (dark)
        nc_plot_style_dark(&cv.st);
    else
        nc_plot_style_light(&cv.st);
    return cv;
}

static void canvas_free(canvas *cv) { done(cv->cr, cv->surface); }

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- lines ---------------------------------------------------------------------------- */

static const double steps[5] = {1, 2, 3, 4, 5};
static const double acc_a[5] = {0.2, 0.5, 0.7, 0.8, 0.85};
static const double acc_b[5] = {0.1, 0.4, NAN, 0.75, 0.9};

static nc_plot_lines_spec lines_spec(nc_plot_series *series, nc_plot_hline *ann, int fixed)
{
    series[0] = (nc_plot_series){"p99.9", 5, steps, acc_a};
    series[1] = (nc_plot_series){"mmse", 5, steps, acc_b};
    *ann = (nc_plot_hline){"ANN", 0.92};
    return (nc_plot_lines_spec){.title = "Accuracy", .x_label = "t", .y_label = "accuracy", .fixed_y = fixed,
                                .y_min = 0, .y_max = 1, .n_series = 2, .series = series, .n_hlines = 1,
                                .hlines = ann};
}

/* The two-series chart of lines_spec (fixed y axis) laid out on a new w×h
 * canvas: what the lines tests start from.  Initialised in place (the spec
 * points into it). */
typedef struct lines_fixture {
    canvas cv;
    nc_plot_series series[2];
    nc_plot_hline ann;
    nc_plot_lines_spec spec;
    nc_plot_lines_geometry g;
} lines_fixture;

static void lines_fixture_init(lines_fixture *f, int w, int h, int dark)
{
    f->cv = canvas_new(w, h, dark);
    f->spec = lines_spec(f->series, &f->ann, 1);
    nc_plot_lines_layout(f->cv.cr, w, h, &f->cv.st, &f->spec, &f->g);
}

static void test_lines_axes(void)
{
    lines_fixture f;
    lines_fixture_init(&f, 800, 500, 0);
    NC_CHECK(f.g.x0 == 1 && f.g.x1 == 5, "x axis spans the steps: %g..%g", f.g.x0, f.g.x1);
    NC_CHECK(f.g.y0 == 0 && f.g.y1 == 1, "fixed y axis: %g..%g", f.g.y0, f.g.y1);
    NC_CHECK(f.g.frame.left > 0 && f.g.frame.right < 800 && f.g.frame.top > 0 && f.g.frame.bottom < 500,
             "frame inside");
    NC_CHECK(f.g.frame.right < 800 - 60, "room for the legend on the right (right = %g)", f.g.frame.right);
    f.spec.fixed_y = 0;
    nc_plot_lines_layout(f.cv.cr, 800, 500, &f.cv.st, &f.spec, &f.g);
    NC_CHECK(f.g.y0 < 0.1 && f.g.y0 > 0.0 && f.g.y1 > 0.92 && f.g.y1 < 1.0,
             "fitted y axis %g..%g covers data and ANN line", f.g.y0, f.g.y1);
    canvas_free(&f.cv);
}

static void test_lines_mapping(void)
{
    lines_fixture f;
    lines_fixture_init(&f, 640, 400, 1);
    double px, py, x, y;
    nc_plot_lines_to_px(&f.g, 1, 0, &px, &py);
    NC_CHECK_CLOSE(px, f.g.frame.left, 1e-9, 0, "x0 at the left edge");
    NC_CHECK_CLOSE(py, f.g.frame.bottom, 1e-9, 0, "y0 at the bottom");
    nc_plot_lines_to_px(&f.g, 5, 1, &px, &py);
    NC_CHECK_CLOSE(px, f.g.frame.right, 1e-9, 0, "x1 at the right edge");
    NC_CHECK_CLOSE(py, f.g.frame.top, 1e-9, 0, "y1 at the top");
    nc_plot_lines_to_px(&f.g, 3.3, 0.42, &px, &py);
    nc_plot_lines_from_px(&f.g, px, py, &x, &y);
    NC_CHECK_CLOSE(x, 3.3, 1e-9, 0, "x round trip");
    NC_CHECK_CLOSE(y, 0.42, 1e-9, 0, "y round trip");
    f.g.log2_x = 1, f.g.x0 = 1, f.g.x1 = 64;
    nc_plot_lines_to_px(&f.g, 8, 0, &px, &py);
    NC_CHECK_CLOSE(px, f.g.frame.left + 0.5 * (f.g.frame.right - f.g.frame.left), 1e-9, 0,
                   "log2 axis: 8 halfway to 64");
    nc_plot_lines_from_px(&f.g, px, py, &x, &y);
    NC_CHECK_CLOSE(x, 8, 1e-9, 0, "log2 round trip");
    canvas_free(&f.cv);
}

static void test_lines_hit(void)
{
    lines_fixture f;
    lines_fixture_init(&f, 640, 400, 0);
    double px, py;
    int k = -1, i = -1;
    nc_plot_lines_to_px(&f.g, 4, 0.75, &px, &py);
    NC_CHECK(nc_plot_lines_nearest(&f.g, &f.spec, px + 2, py - 1, 10, &k, &i) && k == 1 && i == 3,
             "point (4, 0.75) of series 1 found: %d/%d", k, i);
    nc_plot_lines_to_px(&f.g, 3, 0.7, &px, &py);
    NC_CHECK(nc_plot_lines_nearest(&f.g, &f.spec, px, py, 10, &k, &i) && k == 0 && i == 2,
             "the NaN of series 1 at t = 3 is never hit: %d/%d", k, i);
    NC_CHECK(!nc_plot_lines_nearest(&f.g, &f.spec, f.g.frame.left + 3, f.g.frame.top + 3, 10, &k, &i),
             "nothing near the empty corner");
    canvas_free(&f.cv);
}

/* ---- bars ------------------------------------------------------------------------------- */

static const char *cats[3] = {"relu1", "relu2", "relu3"};
static const char *groups[3] = {"clip", "quant", "uneven"};
static const double values[9] = {0.1, 0.2, 0.05, 0.02, 0.3, 0.1, 0, 0.1, 0.4};

static nc_plot_bars_spec bars_spec(int stacked)
{
    return (nc_plot_bars_spec){"Error", "mean |e|", 3, cats, 3, groups, values, stacked};
}

static void test_bars_geometry(void)
{
    canvas cv = canvas_new(900, 500, 0);
    nc_plot_bars_spec spec = bars_spec(0);
    nc_plot_bars_geometry g;
    nc_plot_bars_layout(cv.cr, 900, 500, &cv.st, &spec, &g);
    NC_CHECK(g.lo == 0 && g.hi >= 0.4 && g.hi < 0.45, "grouped range 0..%g from the largest bar", g.hi);
    NC_CHECK_CLOSE(g.slot * 3, g.frame.right - g.frame.left, 1e-9, 0, "three equal slots");
    spec.stacked = 1;
    nc_plot_bars_layout(cv.cr, 900, 500, &cv.st, &spec, &g);
    NC_CHECK(g.hi >= 0.5 && g.hi < 0.55, "stacked range up to the tallest stack (0.5): %g", g.hi);
    canvas_free(&cv);
}

static void test_bars_hit(void)
{
    canvas cv = canvas_new(900, 500, 0);
    nc_plot_bars_spec spec = bars_spec(0);
    nc_plot_bars_geometry g;
    nc_plot_bars_layout(cv.cr, 900, 500, &cv.st, &spec, &g);
    int c, k, ok = 1;
    for (int cat = 0; cat < 3; cat++)
        for (int grp = 0; grp < 3; grp++) {
            double bar_w = g.slot * 0.8 / 3;
            double x = g.frame.left + cat * g.slot + g.slot * 0.1 + (grp + 0.5) * bar_w;
            ok &= nc_plot_bars_hit(&g, &spec, x, g.frame.bottom - 1, &c, &k) && c == cat && k == grp;
        }
    NC_CHECK(ok, "the middle of every grouped bar hits (category, group)");
    NC_CHECK(nc_plot_bars_hit(&g, &spec, g.frame.left + g.slot * 0.05, g.frame.top + 5, &c, &k) && c == 0 && k == -1,
             "the gap before the first bar: category 0, no group (%d, %d)", c, k);
    NC_CHECK(!nc_plot_bars_hit(&g, &spec, g.frame.left - 5, g.frame.top + 5, &c, &k), "left of the frame: no hit");
    NC_CHECK(!nc_plot_bars_hit(&g, &spec, g.frame.right + 5, g.frame.top + 5, &c, &k), "legend: no hit");

    spec.stacked = 1;
    nc_plot_bars_layout(cv.cr, 900, 500, &cv.st, &spec, &g);
    double x = g.frame.left + 2 * g.slot + g.slot / 2, span = g.frame.bottom - g.frame.top;
    /* category 2 stacks 0 (clip), 0.1 (quant), 0.4 (uneven) */
    double y_quant = g.frame.bottom - 0.05 / g.hi * span, y_uneven = g.frame.bottom - 0.3 / g.hi * span;
    NC_CHECK(nc_plot_bars_hit(&g, &spec, x, y_quant, &c, &k) && c == 2 && k == 1, "stacked: quant segment (%d)", k);
    NC_CHECK(nc_plot_bars_hit(&g, &spec, x, y_uneven, &c, &k) && c == 2 && k == 2, "stacked: uneven segment (%d)", k);
    NC_CHECK(nc_plot_bars_hit(&g, &spec, x, g.frame.top + 2, &c, &k) && c == 2 && k == -1, "above the stack: none");
    canvas_free(&cv);
}

/* Two stacks per layer (before and after fine-tuning): [3 layers][2 stacks][3 parts]. */
static const char *stack_names[2] = {"before", "after"};
static const double stack_values[18] = {0.1, 0.2, 0.05, 0.05, 0.1, 0.02, /* relu1: 0.35 | 0.17 */
                                        0.02, 0.3, 0.1, 0.02, 0.1, 0.1,  /* relu2: 0.42 | 0.22 */
                                        0, 0.1, 0.5, 0.05, 0.05, 0.2};  /* relu3: 0.60 | 0.30 */

static nc_plot_bars_spec stacks_spec(void)
{
    return (nc_plot_bars_spec){.title = "Error", .y_label = "mean |e|", .n_categories = 3, .categories = cats,
                               .n_groups = 3, .group_labels = groups, .values = stack_values, .stacked = 1,
                               .n_stacks = 2, .stack_labels = stack_names};
}

static void test_bars_stacks_geometry(void)
{
    canvas cv = canvas_new(900, 500, 0);
    nc_plot_bars_spec spec = stacks_spec();
    nc_plot_bars_geometry g, single;
    nc_plot_bars_layout(cv.cr, 900, 500, &cv.st, &spec, &g);
    NC_CHECK(g.stacks == 2, "two stacks per category (%d)", g.stacks);
    NC_CHECK(g.lo == 0 && g.hi >= 0.6 && g.hi < 0.65, "range up to the tallest stack of any column (0.6): %g", g.hi);
    /* the stack keys make the legend wider than the groups alone */
    nc_plot_bars_spec plain = spec;
    plain.n_stacks = 1;
    plain.values = values;
    nc_plot_bars_layout(cv.cr, 900, 500, &cv.st, &plain, &single);
    NC_CHECK(single.stacks == 1 && g.frame.right <= single.frame.right, "legend room: %g vs %g", g.frame.right,
             single.frame.right);
    /* the two columns of a slot sit side by side, inside it, the same width */
    double x0, y0, w0, h0, x1, y1, w1, h1;
    int ok0 = nc_plot_bars_rect(&g, &spec, 1, 0, 0, &x0, &y0, &w0, &h0);
    int ok1 = nc_plot_bars_rect(&g, &spec, 1, 1, 0, &x1, &y1, &w1, &h1);
    NC_CHECK(ok0 && ok1 && x0 + w0 <= x1 && fabs(w0 - w1) < 1e-9, "before left of after: %g+%g ≤ %g", x0, w0, x1);
    NC_CHECK(x0 >= g.frame.left + g.slot && x1 + w1 <= g.frame.left + 2 * g.slot, "both inside slot 1");
    /* stacked within a column: part 1 starts where part 0 ended */
    double xa, ya, wa, ha;
    nc_plot_bars_rect(&g, &spec, 1, 1, 1, &xa, &ya, &wa, &ha);
    NC_CHECK_CLOSE(ya + ha, y1, 1e-9, 0, "part 1 sits on part 0");
    NC_CHECK_CLOSE(ha, 0.1 / g.hi * (g.frame.bottom - g.frame.top), 1e-9, 1e-12, "height ∝ value");
    /* a single stack keeps the old geometry (70 % of the slot) */
    nc_plot_bars_rect(&single, &plain, 0, 0, 0, &xa, &ya, &wa, &ha);
    NC_CHECK_CLOSE(wa, single.slot * 0.7, 1e-9, 0, "one stack: 70 %% of the slot");
    canvas_free(&cv);
}

static void test_bars_stacks_hit_and_draw(void)
{
    canvas cv = canvas_new(900, 500, 0);
    nc_plot_bars_spec spec = stacks_spec();
    nc_plot_bars_geometry g;
    nc_plot_bars_layout(cv.cr, 900, 500, &cv.st, &spec, &g);
    int ok = 1, c, b, k;
    for (int cat = 0; cat < 3; cat++)
        for (int stack = 0; stack < 2; stack++)
            for (int part = 0; part < 3; part++) {
                double x, y, w, h;
                if (!nc_plot_bars_rect(&g, &spec, cat, stack, part, &x, &y, &w, &h) || h < 2)
                    continue; /* a zero part cannot be hovered */
                ok &= nc_plot_bars_hit_stack(&g, &spec, x + w / 2, y + h / 2, &c, &b, &k) && c == cat &&
                      b == stack && k == part;
            }
    NC_CHECK(ok, "the middle of every segment hits (layer, stack, part)");
    double x0, y0, w0, h0, x1, y1, w1, h1;
    nc_plot_bars_rect(&g, &spec, 2, 0, 2, &x0, &y0, &w0, &h0);
    nc_plot_bars_rect(&g, &spec, 2, 1, 2, &x1, &y1, &w1, &h1);
    NC_CHECK(nc_plot_bars_hit_stack(&g, &spec, (x0 + w0 + x1) / 2, g.frame.bottom - 1, &c, &b, &k) && c == 2 &&
                 b == -1 && k == -1,
             "between the stacks: layer 2, no stack (%d, %d, %d)", c, b, k);
    NC_CHECK(nc_plot_bars_hit_stack(&g, &spec, x1 + w1 / 2, g.frame.top + 2, &c, &b, &k) && b == 1 && k == -1,
             "above the after stack: its column, no part (%d, %d)", b, k);
    NC_CHECK(nc_plot_bars_hit(&g, &spec, x1 + w1 / 2, y1 + h1 / 2, &c, &k) && c == 2 && k == 2,
             "the stack-less hit still names the part");
    /* drawn: the before column faded (paler over the white background) */
    nc_plot_bars(cv.cr, 900, 500, &cv.st, &spec);
    cairo_surface_flush(cv.surface);
    const unsigned char *px = cairo_image_surface_get_data(cv.surface);
    int stride = cairo_image_surface_get_stride(cv.surface);
    const uint32_t *before = (const uint32_t *)(px + (int)(y0 + h0 / 2) * stride) + (int)(x0 + w0 / 2);
    const uint32_t *after = (const uint32_t *)(px + (int)(y1 + h1 / 2) * stride) + (int)(x1 + w1 / 2);
    int before_green = (*before >> 8) & 0xff, after_green = (*after >> 8) & 0xff;
    NC_CHECK(cairo_status(cv.cr) == CAIRO_STATUS_SUCCESS, "drawn");
    NC_CHECK(after_green < 200 && before_green > after_green + 40,
             "after in the part's colour (green %d), before faded towards the background (%d)", after_green,
             before_green);
    canvas_free(&cv);
}

/* ---- raster ------------------------------------------------------------------------------- */

static uint8_t *make_bits(int neurons, int T, double density, int64_t *count)
{
    int64_t n = (int64_t)neurons * T;
    uint8_t *bits = calloc((size_t)(n + 7) / 8, 1);
    uint64_t x = 12345;
    *count = 0;
    for (int64_t b = 0; b < n; b++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        if ((double)(x >> 11) / 9007199254740992.0 < density)
            bits[b >> 3] |= (uint8_t)(1u << (b & 7)), ++*count;
    }
    return bits;
}

/* The layout of a raster on a width × height surface in the light style. */
static nc_plot_raster_geometry raster_layout(const nc_plot_raster_spec *spec, int width, int height)
{
    nc_plot_style st;
    nc_plot_style_light(&st);
    nc_plot_raster_geometry g;
    nc_plot_raster_layout(width, height, &st, spec, &g);
    return g;
}

static void test_raster_hit(void)
{
    int64_t count;
    uint8_t *bits = make_bits(100, 20, 0.3, &count);
    nc_plot_raster_spec spec = {"r", 100, 20, bits, 5, 15, 10, 60};
    nc_plot_raster_geometry g = raster_layout(&spec, 800, 600);
    NC_CHECK(g.t0 == 5 && g.t1 == 15 && g.n0 == 10 && g.n1 == 60, "window kept");
    NC_CHECK_CLOSE(g.cell_w * 10, g.frame.right - g.frame.left, 1e-9, 0, "10 steps across");
    NC_CHECK(g.grid_w == 10 && g.grid_h == 50, "fewer cells than pixels: one grid cell per cell");
    int n, t, ok = 1;
    for (int step = 5; step < 15; step++)
        for (int neuron = 10; neuron < 60; neuron += 7) {
            double x = g.frame.left + (step - 5 + 0.5) * g.cell_w, y = g.frame.top + (neuron - 10 + 0.5) * g.cell_h;
            ok &= nc_plot_raster_hit(&g, x, y, &n, &t) && n == neuron && t == step;
        }
    NC_CHECK(ok, "the centre of every cell maps to its (neuron, step)");
    NC_CHECK(!nc_plot_raster_hit(&g, g.frame.left - 1, g.frame.top + 5, &n, &t), "left of the plot: no hit");
    NC_CHECK(!nc_plot_raster_hit(&g, g.frame.left + 5, g.frame.bottom + 1, &n, &t), "below the plot: no hit");
    int64_t manual = 0;
    for (int i = 10; i < 60; i++)
        for (int s = 5; s < 15; s++) {
            int64_t b = (int64_t)i * 20 + s;
            manual += (bits[b >> 3] >> (b & 7)) & 1;
        }
    NC_CHECK(nc_plot_raster_count(&spec) == manual, "visible spikes counted: %lld vs %lld",
             (long long)nc_plot_raster_count(&spec), (long long)manual);
    free(bits);
}

static void test_raster_binning(void)
{
    int64_t count;
    uint8_t *bits = make_bits(5000, 3000, 0.01, &count);
    nc_plot_raster_spec spec = {"r", 5000, 3000, bits, 0, 3000, 0, 5000};
    nc_plot_raster_geometry g = raster_layout(&spec, 1000, 700);
    NC_CHECK(g.grid_w <= (int)(g.frame.right - g.frame.left) && g.grid_h <= (int)(g.frame.bottom - g.frame.top),
             "more cells than pixels: at most one grid cell per pixel (%d × %d)", g.grid_w, g.grid_h);
    NC_CHECK(g.cell_w < 1 && g.cell_h < 1, "cells smaller than a pixel");
    free(bits);
}

static void test_zoom_and_pan(void)
{
    int first = 0, last = 1000;
    nc_plot_window_zoom(&first, &last, 1000, 0.25, 2.0, 4);
    NC_CHECK(last - first == 500, "zoom ×2 halves the span (%d..%d)", first, last);
    NC_CHECK(abs((first + (int)(0.25 * 500)) - 250) <= 1, "the cell under the pointer (250) stays: %d..%d", first, last);
    nc_plot_window_zoom(&first, &last, 1000, 0.5, 1000.0, 4);
    NC_CHECK(last - first == 4, "never narrower than min_span: %d", last - first);
    nc_plot_window_zoom(&first, &last, 1000, 0.5, 0.0001, 4);
    NC_CHECK(first == 0 && last == 1000, "zooming out stops at the whole axis: %d..%d", first, last);
    first = 100, last = 200;
    nc_plot_window_pan(&first, &last, 1000, -500);
    NC_CHECK(first == 0 && last == 100, "pan clamps at 0: %d..%d", first, last);
    nc_plot_window_pan(&first, &last, 1000, 5000);
    NC_CHECK(first == 900 && last == 1000, "pan clamps at the end: %d..%d", first, last);
    first = 0, last = 10;
    nc_plot_window_zoom(&first, &last, 10, 1.0, 1.25, 2);
    NC_CHECK(first >= 0 && last <= 10 && last - first == 8, "zoom at the right edge stays inside: %d..%d", first, last);
}

static void test_subsample(void)
{
    int64_t idx[7];
    nc_plot_subsample(100, 7, idx);
    int ok = idx[0] == 0;
    for (int j = 1; j < 7; j++)
        ok &= idx[j] > idx[j - 1] && idx[j] == (int64_t)(j * 100 / 7) && idx[j] < 100;
    NC_CHECK(ok, "⌊j·total/k⌋, increasing, inside the layer");
    int64_t all[5];
    nc_plot_subsample(5, 5, all);
    NC_CHECK(all[0] == 0 && all[4] == 4, "k = total keeps every neuron");
}

/* A million spikes: one path of merged runs, drawn within the budget. */
static void test_raster_million_spikes(void)
{
    nc_plot_style st;
    nc_plot_style_dark(&st);
    int64_t count;
    uint8_t *bits = make_bits(4096, 1024, 0.25, &count);
    NC_CHECK(count > 1000000, "%lld spikes", (long long)count);
    nc_plot_raster_spec spec = {"1M spikes", 4096, 1024, bits, 0, 1024, 0, 4096};
    NC_CHECK(nc_plot_raster_count(&spec) == count, "all visible");
    cairo_surface_t *s;
    cairo_t *cr = scratch(&s, 1400, 900);
    double t0 = now();
    nc_plot_raster(cr, 1400, 900, &st, &spec);
    cairo_surface_flush(s);
    double seconds = now() - t0;
    printf("# raster of %lld spikes drawn in %.3f s\n", (long long)count, seconds);
    NC_CHECK(seconds < 0.25, "a million spikes draw in %.3f s (binned per pixel: one mask)", seconds);
    /* the plot area is mostly painted: binning keeps dense regions dense */
    unsigned char *data = cairo_image_surface_get_data(s);
    int stride = cairo_image_surface_get_stride(s), lit = 0, total = 0;
    for (int y = 200; y < 700; y += 7)
        for (int x = 200; x < 1200; x += 7, total++) {
            unsigned char *p = data + y * stride + 4 * x;
            lit += p[0] > 150; /* the series colour is light blue on dark */
        }
    NC_CHECK(lit > total / 2, "dense raster: %d of %d sampled pixels lit", lit, total);
    done(cr, s);
    free(bits);
}

/* ---- membrane trace -------------------------------------------------------------------------- */

static void test_trace_layout(void)
{
    nc_plot_style st;
    nc_plot_style_light(&st);
    float v[9] = {0.5f, 0.9f, 0.3f, 0.7f, 0.1f, 0.5f, 0.9f, 0.3f, 0.7f};
    float x[8] = {0.4f, 0.4f, 0.4f, 0.4f, 0.4f, 0.4f, 0.4f, 0.4f};
    uint8_t sp[8] = {0, 1, 0, 1, 0, 0, 1, 0};
    nc_plot_trace_spec spec = {"trace", 8, v, x, sp, 1.0};
    nc_plot_lines_geometry g;
    nc_plot_trace_layout(600, 300, &st, &spec, &g);
    NC_CHECK(g.x0 == 0 && g.x1 == 8, "x axis 0..T");
    NC_CHECK(g.y0 <= 0 && g.y1 >= 1.3 - 1e-6, "y axis covers v, the rise v + x (1.3) and θ: %g..%g", g.y0, g.y1);
    cairo_surface_t *s;
    cairo_t *cr = scratch(&s, 600, 300);
    nc_plot_trace(cr, 600, 300, &st, &spec);
    NC_CHECK(cairo_status(cr) == CAIRO_STATUS_SUCCESS, "drawn");
    done(cr, s);
}

int main(void)
{
    NC_RUN(test_lines_axes);
    NC_RUN(test_lines_mapping);
    NC_RUN(test_lines_hit);
    NC_RUN(test_bars_geometry);
    NC_RUN(test_bars_hit);
    NC_RUN(test_bars_stacks_geometry);
    NC_RUN(test_bars_stacks_hit_and_draw);
    NC_RUN(test_raster_hit);
    NC_RUN(test_raster_binning);
    NC_RUN(test_zoom_and_pan);
    NC_RUN(test_subsample);
    NC_RUN(test_raster_million_spikes);
    NC_RUN(test_trace_layout);
    return nc_test_done();
}
