/* nc_plot.c — cairo charts shared by the workbench and the CLI. */
#include "nc_plot.h"

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A palette that stays readable for colour-blind viewers (Okabe–Ito order). */
static const nc_rgba palette[NC_PLOT_MAX_SERIES] = {
    {0.00, 0.45, 0.70, 1}, {0.90, 0.62, 0.00, 1}, {0.00, 0.62, 0.45, 1}, {0.80, 0.47, 0.65, 1},
    {0.34, 0.71, 0.91, 1}, {0.84, 0.37, 0.00, 1}, {0.60, 0.60, 0.60, 1}, {0.94, 0.89, 0.26, 1},
    {0.40, 0.30, 0.70, 1}, {0.20, 0.20, 0.20, 1}, {0.55, 0.75, 0.30, 1}, {0.70, 0.20, 0.30, 1}};

void nc_plot_style_light(nc_plot_style *s)
{
    s->background = (nc_rgba){1, 1, 1, 1};
    s->foreground = (nc_rgba){0.15, 0.15, 0.17, 1};
    s->grid = (nc_rgba){0.85, 0.85, 0.87, 1};
    memcpy(s->series, palette, sizeof palette);
    s->font_size = 12;
    s->pixel_scale = 1;
}

void nc_plot_style_dark(nc_plot_style *s)
{
    nc_plot_style_light(s);
    s->background = (nc_rgba){0.14, 0.14, 0.15, 1};
    s->foreground = (nc_rgba){0.92, 0.92, 0.93, 1};
    s->grid = (nc_rgba){0.28, 0.28, 0.30, 1};
}

static void set_color(cairo_t *cr, nc_rgba c) { cairo_set_source_rgba(cr, c.r, c.g, c.b, c.a); }

typedef struct frame {
    double left, top, right, bottom; /* plot area in device units */
} frame;

static void text_at(cairo_t *cr, double x, double y, const char *text, double align_x, double align_y)
{
    cairo_text_extents_t ext;
    cairo_text_extents(cr, text, &ext);
    cairo_move_to(cr, x - ext.width * align_x - ext.x_bearing, y - ext.height * align_y - ext.y_bearing);
    cairo_show_text(cr, text);
}

/* The plot area for a chart of size w × h: the margins leave room for the
 * title, the y label and tick labels, the x labels and a legend on the right.
 * Drawing and hit-testing both use it, so a click maps to what was drawn. */
static frame chart_frame(double w, double h, const nc_plot_style *st, double legend_width)
{
    frame f = {st->font_size * 5.5, st->font_size * 3.2, w - 16 - legend_width, h - st->font_size * 4.5};
    if (f.right < f.left + 40)
        f.right = f.left + 40;
    if (f.bottom < f.top + 40)
        f.bottom = f.top + 40;
    return f;
}

static frame begin_chart(cairo_t *cr, double w, double h, const nc_plot_style *st, const char *title,
                         const char *y_label, double legend_width)
{
    set_color(cr, st->background);
    cairo_paint(cr);
    cairo_select_font_face(cr, "Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, st->font_size);
    set_color(cr, st->foreground);
    if (title) {
        cairo_save(cr);
        cairo_set_font_size(cr, st->font_size * 1.2);
        text_at(cr, w / 2, 8, title, 0.5, 0);
        cairo_restore(cr);
    }
    if (y_label) {
        cairo_save(cr);
        cairo_translate(cr, 12, h / 2);
        cairo_rotate(cr, -M_PI / 2);
        text_at(cr, 0, 0, y_label, 0.5, 0.5);
        cairo_restore(cr);
    }
    return chart_frame(w, h, st, legend_width);
}

/* A "nice" tick step (1, 2 or 5 × 10^k) for a range split into about n parts. */
static double nice_step(double range, int n)
{
    double raw = range / n, mag = pow(10, floor(log10(raw)));
    double norm = raw / mag;
    return (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
}

/* Tick labels: large values with an SI prefix ("7 M", not "7e+06"). */
static void format_tick(char *buf, size_t size, double v, double step, double largest)
{
    static const char *prefix[] = {"", "k", "M", "G", "T"};
    int k = 0;
    while (k < 4 && largest >= 1e4 * pow(1000, k))
        k++;
    if (fabs(v) < step * 1e-6)
        v = 0;
    if (k == 0)
        snprintf(buf, size, "%g", v);
    else
        snprintf(buf, size, "%g %s", v / pow(1000, k), prefix[k]);
}

static void y_axis(cairo_t *cr, const frame *f, const nc_plot_style *st, double y0, double y1)
{
    double step = nice_step(y1 - y0, 5), largest = fmax(fabs(y0), fabs(y1));
    char label[32];
    cairo_set_line_width(cr, 1);
    for (double v = ceil(y0 / step) * step; v <= y1 + step * 1e-6; v += step) {
        double y = f->bottom - (v - y0) / (y1 - y0) * (f->bottom - f->top);
        set_color(cr, st->grid);
        cairo_move_to(cr, f->left, y);
        cairo_line_to(cr, f->right, y);
        cairo_stroke(cr);
        set_color(cr, st->foreground);
        format_tick(label, sizeof label, v, step, largest);
        text_at(cr, f->left - 6, y, label, 1, 0.5);
    }
}

/* Reference lines differ by dash pattern, so they stay apart in grey print. */
static void set_hline_dash(cairo_t *cr, int k)
{
    static const double patterns[3][2] = {{6, 3}, {2, 3}, {10, 4}};
    cairo_set_dash(cr, patterns[k % 3], 2, 0);
}

/* Lines are keyed by a line sample, bars (boxes = 1) by a filled square. */
static void legend(cairo_t *cr, const frame *f, const nc_plot_style *st, int n, const char *const *labels,
                   int dashed_from, int boxes, int colour_offset)
{
    double y = f->top + 4;
    for (int i = 0; i < n; i++, y += st->font_size * 1.5) {
        set_color(cr, i >= dashed_from ? st->foreground : st->series[(i + colour_offset) % NC_PLOT_MAX_SERIES]);
        if (boxes) {
            cairo_rectangle(cr, f->right + 14, y + st->font_size / 2 - 6, 12, 12);
            cairo_fill(cr);
            set_color(cr, st->foreground);
            text_at(cr, f->right + 36, y + st->font_size / 2, labels[i] ? labels[i] : "", 0, 0.5);
            continue;
        }
        if (i >= dashed_from)
            set_hline_dash(cr, i - dashed_from);
        cairo_set_line_width(cr, 2.5);
        cairo_move_to(cr, f->right + 10, y + st->font_size / 2);
        cairo_line_to(cr, f->right + 30, y + st->font_size / 2);
        cairo_stroke(cr);
        cairo_set_dash(cr, NULL, 0, 0);
        set_color(cr, st->foreground);
        text_at(cr, f->right + 36, y + st->font_size / 2, labels[i] ? labels[i] : "", 0, 0.5);
    }
}

static double legend_width(cairo_t *cr, const nc_plot_style *st, int n, const char *const *labels)
{
    double widest = 0;
    cairo_set_font_size(cr, st->font_size);
    for (int i = 0; i < n; i++) {
        cairo_text_extents_t ext;
        cairo_text_extents(cr, labels[i] ? labels[i] : "", &ext);
        widest = fmax(widest, ext.x_advance);
    }
    return n ? widest + 50 : 0;
}

static double map_x(double x, int log2_x, double x0, double x1, const frame *f)
{
    double t = log2_x ? (log2(x) - log2(x0)) / fmax(log2(x1) - log2(x0), 1e-9) : (x - x0) / fmax(x1 - x0, 1e-12);
    return f->left + t * (f->right - f->left);
}

static void lines_range(const nc_plot_lines_spec *s, double *x0, double *x1, double *y0, double *y1)
{
    *x0 = INFINITY, *x1 = -INFINITY, *y0 = INFINITY, *y1 = -INFINITY;
    for (int k = 0; k < s->n_series; k++)
        for (int i = 0; i < s->series[k].n; i++) {
            double x = s->series[k].x[i], y = s->series[k].y[i];
            if (!isfinite(x) || !isfinite(y) || (s->log2_x && x <= 0))
                continue;
            *x0 = fmin(*x0, x), *x1 = fmax(*x1, x), *y0 = fmin(*y0, y), *y1 = fmax(*y1, y);
        }
    for (int k = 0; k < s->n_hlines; k++)
        *y0 = fmin(*y0, s->hlines[k].y), *y1 = fmax(*y1, s->hlines[k].y);
    if (!isfinite(*x0))
        *x0 = 1, *x1 = 2;
    if (*x1 <= *x0)
        *x1 = *x0 + 1;
    if (s->fixed_y)
        *y0 = s->y_min, *y1 = s->y_max;
    if (!isfinite(*y0))
        *y0 = 0, *y1 = 1;
    if (*y1 - *y0 < 1e-9)
        *y0 -= 0.5, *y1 += 0.5;
    if (!s->fixed_y) { /* a little headroom so lines do not sit on the frame */
        double pad = (*y1 - *y0) * 0.04;
        *y0 -= pad, *y1 += pad;
    }
}

static void x_axis(cairo_t *cr, const frame *f, const nc_plot_style *st, const nc_plot_lines_spec *s, double x0,
                   double x1)
{
    char label[32];
    set_color(cr, st->foreground);
    if (s->log2_x) {
        for (double v = pow(2, ceil(log2(x0))); v <= x1 * 1.0001; v *= 2) {
            snprintf(label, sizeof label, "%g", v);
            text_at(cr, map_x(v, 1, x0, x1, f), f->bottom + 6, label, 0.5, 0);
        }
    } else {
        double step = nice_step(x1 - x0, 8);
        for (double v = ceil(x0 / step) * step; v <= x1 + step * 1e-6; v += step) {
            snprintf(label, sizeof label, "%g", v);
            text_at(cr, map_x(v, 0, x0, x1, f), f->bottom + 6, label, 0.5, 0);
        }
    }
    if (s->x_label)
        text_at(cr, (f->left + f->right) / 2, f->bottom + st->font_size * 2.2, s->x_label, 0.5, 0);
}

/* ---- lines --------------------------------------------------------------- */

/* The legend of a lines chart.  Up to NC_PLOT_MAX_SERIES series each have
 * an entry; beyond that, the newest NC_PLOT_MAX_SERIES − 1 do, the older
 * ones are drawn faded (FADED_SERIES_ALPHA) and one more line says how many
 * they are (*note).  Series k has colour k mod NC_PLOT_MAX_SERIES. */
#define FADED_SERIES_ALPHA 0.3

static int lines_first_keyed(const nc_plot_lines_spec *s)
{
    return s->n_series > NC_PLOT_MAX_SERIES ? s->n_series - (NC_PLOT_MAX_SERIES - 1) : 0;
}

static int lines_labels(const nc_plot_lines_spec *s, const char **labels, int *n_series, int *n_hl, char *note,
                        size_t note_size)
{
    int first = lines_first_keyed(s);
    *n_series = s->n_series - first;
    *n_hl = s->n_hlines < NC_PLOT_MAX_SERIES ? s->n_hlines : NC_PLOT_MAX_SERIES;
    for (int k = 0; k < *n_series; k++)
        labels[k] = s->series[first + k].label;
    for (int k = 0; k < *n_hl; k++)
        labels[*n_series + k] = s->hlines[k].label;
    note[0] = 0;
    if (first > 0)
        snprintf(note, note_size, "+ %d earlier (faded)", first);
    return *n_series + *n_hl;
}

void nc_plot_lines_layout(cairo_t *cr, double width, double height, const nc_plot_style *st,
                          const nc_plot_lines_spec *s, nc_plot_lines_geometry *g)
{
    const char *labels[2 * NC_PLOT_MAX_SERIES + 1];
    char note[64];
    int n_series, n_hl;
    int n = lines_labels(s, labels, &n_series, &n_hl, note, sizeof note);
    if (note[0])
        labels[n++] = note;
    cairo_save(cr);
    cairo_select_font_face(cr, "Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    double lw = legend_width(cr, st, n, labels);
    cairo_restore(cr);
    frame f = chart_frame(width, height, st, lw);
    g->frame = (nc_plot_rect){f.left, f.top, f.right, f.bottom};
    g->log2_x = s->log2_x;
    lines_range(s, &g->x0, &g->x1, &g->y0, &g->y1);
}

void nc_plot_lines_to_px(const nc_plot_lines_geometry *g, double x, double y, double *px, double *py)
{
    frame f = {g->frame.left, g->frame.top, g->frame.right, g->frame.bottom};
    *px = map_x(x, g->log2_x, g->x0, g->x1, &f);
    *py = f.bottom - (y - g->y0) / (g->y1 - g->y0) * (f.bottom - f.top);
}

void nc_plot_lines_from_px(const nc_plot_lines_geometry *g, double px, double py, double *x, double *y)
{
    const nc_plot_rect *f = &g->frame;
    double u = (px - f->left) / fmax(f->right - f->left, 1e-9);
    *x = g->log2_x ? exp2(log2(g->x0) + u * (log2(g->x1) - log2(g->x0))) : g->x0 + u * (g->x1 - g->x0);
    *y = g->y0 + (f->bottom - py) / fmax(f->bottom - f->top, 1e-9) * (g->y1 - g->y0);
}

int nc_plot_lines_nearest(const nc_plot_lines_geometry *g, const nc_plot_lines_spec *s, double px, double py,
                          double max_dist, int *series, int *index)
{
    double best = max_dist * max_dist;
    int found = 0;
    for (int k = 0; k < s->n_series; k++)
        for (int i = 0; i < s->series[k].n; i++) {
            double x = s->series[k].x[i], y = s->series[k].y[i], qx, qy;
            if (!isfinite(y) || (g->log2_x && x <= 0))
                continue;
            nc_plot_lines_to_px(g, x, y, &qx, &qy);
            double d = (qx - px) * (qx - px) + (qy - py) * (qy - py);
            if (d <= best)
                best = d, *series = k, *index = i, found = 1;
        }
    return found;
}

static void draw_hlines(cairo_t *cr, const nc_plot_lines_geometry *g, const nc_plot_style *st,
                        const nc_plot_lines_spec *s, int n_hl)
{
    for (int k = 0; k < n_hl; k++) {
        double px, y;
        nc_plot_lines_to_px(g, g->x0, s->hlines[k].y, &px, &y);
        set_color(cr, st->foreground);
        set_hline_dash(cr, k);
        cairo_set_line_width(cr, 1.5);
        cairo_move_to(cr, g->frame.left, y);
        cairo_line_to(cr, g->frame.right, y);
        cairo_stroke(cr);
        cairo_set_dash(cr, NULL, 0, 0);
    }
}

#define LINE_WIDTH 2.2

/* The pixel position of point i of series p; 0 when it is not drawn (past
 * the end, not finite, or x ≤ 0 on a log axis). */
static int point_px(const nc_plot_lines_geometry *g, const nc_plot_lines_spec *s, const nc_plot_series *p, int i,
                    double *x, double *y)
{
    if (i >= p->n || !isfinite(p->y[i]) || (s->log2_x && p->x[i] <= 0))
        return 0;
    nc_plot_lines_to_px(g, p->x[i], p->y[i], x, y);
    return 1;
}

/* One path per series; a non-finite value lifts the pen. */
static void draw_series(cairo_t *cr, const nc_plot_lines_geometry *g, const nc_plot_style *st,
                        const nc_plot_lines_spec *s, int k)
{
    const nc_plot_series *p = &s->series[k];
    nc_rgba c = st->series[k % NC_PLOT_MAX_SERIES];
    if (k < lines_first_keyed(s))
        c.a *= FADED_SERIES_ALPHA;
    set_color(cr, c);
    cairo_set_line_width(cr, LINE_WIDTH);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    int pen_down = 0;
    for (int i = 0; i < p->n; i++) {
        double x, y;
        int drawn = point_px(g, s, p, i, &x, &y);
        if (drawn && pen_down)
            cairo_line_to(cr, x, y);
        else if (drawn)
            cairo_move_to(cr, x, y);
        pen_down = drawn;
    }
    cairo_stroke(cr);
    if (p->n == 1 && isfinite(p->y[0])) { /* a lone point is invisible as a line */
        double x, y;
        nc_plot_lines_to_px(g, p->x[0], p->y[0], &x, &y);
        cairo_arc(cr, x, y, 3, 0, 2 * M_PI);
        cairo_fill(cr);
    }
}

static void stroke_frame(cairo_t *cr, const nc_plot_style *st, const frame *f)
{
    set_color(cr, st->foreground);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, f->left, f->top, f->right - f->left, f->bottom - f->top);
    cairo_stroke(cr);
}

/* ---- dense lines ----
 * A series with about one point per pixel column or more is drawn as what a
 * stroke of it covers, column by column: in each pixel column the line spans
 * from the lowest to the highest y it reaches there, widened by half the line
 * width, with fractional coverage at both ends.  Every such series goes into
 * one image, painted once: 20 curves of 1 000 points cost a few hundred
 * thousand pixel writes instead of 20 000 antialiased stroke segments (18 ms
 * for 8 curves in cairo 1.16, docs/BENCHMARKS.md).  Vector output (SVG, PDF)
 * keeps the strokes. */

static int series_is_dense(const nc_plot_series *p, double frame_width)
{
    return p->n >= 2 && p->n >= frame_width * 0.5;
}

static int vector_target(cairo_t *cr)
{
    cairo_surface_type_t type = cairo_surface_get_type(cairo_get_target(cr));
    return type == CAIRO_SURFACE_TYPE_SVG || type == CAIRO_SURFACE_TYPE_PDF || type == CAIRO_SURFACE_TYPE_PS;
}

static inline double dmin(double a, double b) { return a < b ? a : b; }
static inline double dmax(double a, double b) { return a > b ? a : b; }

/* The y range the segment (x0, y0)–(x1, y1) covers in each pixel column. */
static void span_segment(double x0, double y0, double x1, double y1, int width, float *lo, float *hi)
{
    if (x1 < x0) {
        double t = x0;
        x0 = x1, x1 = t, t = y0, y0 = y1, y1 = t;
    }
    if (x1 < 0 || x0 >= width)
        return;
    int c0 = x0 < 0 ? 0 : (int)x0, c1 = x1 >= width ? width - 1 : (int)x1;
    double slope = x1 > x0 ? (y1 - y0) / (x1 - x0) : 0;
    for (int c = c0; c <= c1; c++) {
        double xa = dmax(x0, c), xb = dmin(x1, c + 1.0);
        double ya = y0 + (xa - x0) * slope, yb = x1 > x0 ? y0 + (xb - x0) * slope : y1;
        float a = (float)dmin(ya, yb), b = (float)dmax(ya, yb);
        if (a < lo[c])
            lo[c] = a;
        if (b > hi[c])
            hi[c] = b;
    }
}

/* Premultiplied ARGB32, `over`: colour c (premultiplied r, g, b as
 * value·alpha·255·256, then alpha·256) at coverage cov (0..256). */
static inline void blend_pixel(uint32_t *px, const unsigned *c, unsigned cov)
{
    unsigned a = c[3] * cov >> 8; /* 0..256 */
    if (!a)
        return;
    uint32_t d = *px;
    unsigned keep = (256 - a) << 8;
    unsigned na = (a * 255 * 256 + (d >> 24) * keep) >> 16, nr = (c[0] * cov + ((d >> 16) & 255) * keep) >> 16,
             ng = (c[1] * cov + ((d >> 8) & 255) * keep) >> 16, nb = (c[2] * cov + (d & 255) * keep) >> 16;
    *px = (na > 255 ? 255u : na) << 24 | (nr > 255 ? 255u : nr) << 16 | (ng > 255 ? 255u : ng) << 8 |
          (nb > 255 ? 255u : nb);
}

/* Draws the dense series of s (those series_is_dense() picks) over the frame;
 * returns 0 when the image could not be made (the caller strokes them). */
static int draw_dense_series(cairo_t *cr, const nc_plot_lines_geometry *g, const nc_plot_style *st,
                             const nc_plot_lines_spec *s, const unsigned char *dense)
{
    double scale = st->pixel_scale > 0 ? st->pixel_scale : 1, pad = LINE_WIDTH;
    /* the image sits on whole device pixels: painted without resampling */
    double ox = floor(g->frame.left * scale), oy = floor((g->frame.top - pad) * scale);
    int width = (int)ceil(g->frame.right * scale - ox), height = (int)ceil((g->frame.bottom + pad) * scale - oy);
    if (width < 1 || height < 1)
        return 0;
    float *lo = malloc(2 * (size_t)width * sizeof(float));
    if (!lo)
        return 0;
    float *hi = lo + width;
    int first_keyed = lines_first_keyed(s);
    double half = LINE_WIDTH / 2 * scale;
    /* the spans of every series first, then one image just tall enough */
    int n_dense = 0;
    for (int k = 0; k < s->n_series; k++)
        n_dense += dense[k] != 0;
    float *spans = malloc((size_t)n_dense * 2 * (size_t)width * sizeof(float));
    if (!spans) {
        free(lo);
        return 0;
    }
    double top_row = height, bottom_row = 0;
    for (int k = 0, d = 0; k < s->n_series; k++) {
        if (!dense[k])
            continue;
        const nc_plot_series *p = &s->series[k];
        for (int x = 0; x < width; x++)
            lo[x] = INFINITY, hi[x] = -INFINITY;
        double px0 = 0, py0 = 0;
        int have_prev = 0;
        for (int i = 0; i < p->n; i++) {
            double px, py, next_x, next_y;
            if (!point_px(g, s, p, i, &px, &py)) {
                have_prev = 0;
                continue;
            }
            px = px * scale - ox, py = py * scale - oy;
            int next_ok = point_px(g, s, p, i + 1, &next_x, &next_y);
            if (have_prev)
                span_segment(px0, py0, px, py, width, lo, hi);
            else if (!next_ok) /* a lone point */
                span_segment(px, py, px, py, width, lo, hi);
            px0 = px, py0 = py, have_prev = 1;
        }
        float *out = spans + (size_t)d++ * 2 * width;
        for (int x = 0; x < width; x++) {
            out[2 * x] = lo[x] > hi[x] ? 1 : (float)dmax(lo[x] - half, 0);
            out[2 * x + 1] = lo[x] > hi[x] ? 0 : (float)dmin(hi[x] + half, height);
            if (out[2 * x] < out[2 * x + 1])
                top_row = dmin(top_row, out[2 * x]), bottom_row = dmax(bottom_row, out[2 * x + 1]);
        }
    }
    free(lo);
    int r0 = (int)top_row, r1 = (int)ceil(bottom_row);
    if (r1 <= r0) {
        free(spans);
        return 1;
    }
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, width, r1 - r0);
    if (cairo_surface_status(img) != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(img);
        free(spans);
        return 0;
    }
    cairo_surface_flush(img);
    unsigned char *data = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img);
    for (int k = 0, d = 0; k < s->n_series; k++) {
        if (!dense[k])
            continue;
        nc_rgba c = st->series[k % NC_PLOT_MAX_SERIES];
        if (k < first_keyed)
            c.a *= FADED_SERIES_ALPHA;
        unsigned colour[4] = {(unsigned)(c.r * c.a * 255 * 256 + 0.5), (unsigned)(c.g * c.a * 255 * 256 + 0.5),
                              (unsigned)(c.b * c.a * 255 * 256 + 0.5), (unsigned)(c.a * 256 + 0.5)};
        const float *span = spans + (size_t)d++ * 2 * width;
        for (int x = 0; x < width; x++) {
            float top = span[2 * x], bottom = span[2 * x + 1];
            for (int r = (int)top; r < bottom; r++) {
                double cov = dmin(r + 1.0, bottom) - dmax((double)r, top);
                blend_pixel((uint32_t *)(data + (size_t)(r - r0) * stride) + x, colour,
                            (unsigned)(cov * 256 + 0.5));
            }
        }
    }
    free(spans);
    cairo_surface_mark_dirty(img);
    cairo_surface_set_device_scale(img, scale, scale);
    cairo_set_source_surface(cr, img, ox / scale, (oy + r0) / scale);
    cairo_paint(cr);
    cairo_surface_destroy(img);
    return 1;
}

void nc_plot_lines(cairo_t *cr, double width, double height, const nc_plot_style *st, const nc_plot_lines_spec *s)
{
    const char *labels[2 * NC_PLOT_MAX_SERIES + 1];
    char note[64];
    int n_series, n_hl;
    lines_labels(s, labels, &n_series, &n_hl, note, sizeof note);
    nc_plot_lines_geometry g;
    nc_plot_lines_layout(cr, width, height, st, s, &g);
    begin_chart(cr, width, height, st, s->title, s->y_label, 0);
    frame f = {g.frame.left, g.frame.top, g.frame.right, g.frame.bottom};
    y_axis(cr, &f, st, g.y0, g.y1);
    x_axis(cr, &f, st, s, g.x0, g.x1);
    cairo_save(cr);
    cairo_rectangle(cr, f.left, f.top - 2, f.right - f.left, f.bottom - f.top + 4);
    cairo_clip(cr);
    draw_hlines(cr, &g, st, s, n_hl);
    unsigned char *dense = s->n_series > 0 ? calloc((size_t)s->n_series, 1) : NULL;
    int any_dense = 0;
    for (int k = 0; dense && !vector_target(cr) && k < s->n_series; k++)
        any_dense |= dense[k] = (unsigned char)series_is_dense(&s->series[k], f.right - f.left);
    if (any_dense && !draw_dense_series(cr, &g, st, s, dense))
        memset(dense, 0, (size_t)s->n_series);
    for (int k = 0; k < s->n_series; k++)
        if (!dense || !dense[k])
            draw_series(cr, &g, st, s, k);
    free(dense);
    cairo_restore(cr);
    stroke_frame(cr, st, &f);
    int first = lines_first_keyed(s);
    legend(cr, &f, st, n_series + n_hl, labels, n_series, 0, first);
    if (note[0]) {
        set_color(cr, st->foreground);
        text_at(cr, f.right + 10, f.top + 4 + (n_series + n_hl) * st->font_size * 1.5 + st->font_size / 2, note, 0,
                0.5);
    }
}

/* ---- bars ---------------------------------------------------------------- */

/* Stacks per category: several only when stacked. */
static int bars_stacks(const nc_plot_bars_spec *s)
{
    if (!s->stacked || s->n_stacks <= 1)
        return 1;
    return s->n_stacks < NC_PLOT_MAX_STACKS ? s->n_stacks : NC_PLOT_MAX_STACKS;
}

static double bar_value(const nc_plot_bars_spec *s, int stacks, int c, int stack, int k)
{
    return s->values[((size_t)c * stacks + stack) * s->n_groups + k];
}

static void bars_range(const nc_plot_bars_spec *s, int groups, int stacks, double *lo_out, double *hi_out)
{
    double lo = 0, hi = 0;
    for (int c = 0; c < s->n_categories; c++)
        for (int b = 0; b < stacks; b++) {
            double pos = 0, neg = 0;
            for (int g = 0; g < groups; g++) {
                double v = bar_value(s, stacks, c, b, g);
                if (!isfinite(v))
                    continue;
                if (s->stacked && v >= 0)
                    pos += v;
                else if (s->stacked)
                    neg += v;
                else
                    pos = fmax(pos, v), neg = fmin(neg, v);
            }
            hi = fmax(hi, pos), lo = fmin(lo, neg);
        }
    if (hi - lo < 1e-12)
        hi = lo + 1;
    hi += (hi - lo) * 0.05;
    *lo_out = lo, *hi_out = hi;
}

/* The legend's entries: the groups (when more than one), then the stacks. */
static int bars_legend_labels(const nc_plot_bars_spec *s, int groups, int stacks, const char **labels)
{
    int n = 0;
    for (int k = 0; groups > 1 && k < groups; k++)
        labels[n++] = s->group_labels ? s->group_labels[k] : NULL;
    for (int b = 0; stacks > 1 && b < stacks; b++)
        labels[n++] = s->stack_labels ? s->stack_labels[b] : NULL;
    return n;
}

void nc_plot_bars_layout(cairo_t *cr, double width, double height, const nc_plot_style *st,
                         const nc_plot_bars_spec *s, nc_plot_bars_geometry *g)
{
    int groups = s->n_groups < NC_PLOT_MAX_SERIES ? s->n_groups : NC_PLOT_MAX_SERIES;
    int stacks = bars_stacks(s);
    const char *labels[NC_PLOT_MAX_SERIES + NC_PLOT_MAX_STACKS];
    int n_labels = bars_legend_labels(s, groups, stacks, labels);
    cairo_save(cr);
    cairo_select_font_face(cr, "Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    double lw = legend_width(cr, st, n_labels, labels);
    cairo_restore(cr);
    frame f = chart_frame(width, height, st, lw);
    f.bottom -= st->font_size * 2; /* room for slanted category names */
    g->frame = (nc_plot_rect){f.left, f.top, f.right, f.bottom};
    g->groups = groups;
    g->stacks = stacks;
    bars_range(s, groups, stacks, &g->lo, &g->hi);
    g->slot = (f.right - f.left) / (s->n_categories > 0 ? s->n_categories : 1);
}

/* Bar (c, b, k) as a rectangle; its value range is [from, to].  Stacked bars
 * start where the previous group of the same sign ended; stacks share 70 %
 * of the slot (one) or 80 % (several, side by side). */
int nc_plot_bars_rect(const nc_plot_bars_geometry *g, const nc_plot_bars_spec *s, int c, int b, int k, double *x,
                      double *y, double *w, double *h)
{
    double from = 0, v = bar_value(s, g->stacks, c, b, k);
    if (!isfinite(v))
        return 0;
    if (s->stacked)
        for (int j = 0; j < k; j++) {
            double u = bar_value(s, g->stacks, c, b, j);
            if (isfinite(u) && (u >= 0) == (v >= 0))
                from += u;
        }
    double to = from + v, span = g->frame.bottom - g->frame.top;
    double slot_x = g->frame.left + c * g->slot;
    if (!s->stacked) {
        double bar_w = g->slot * 0.8 / g->groups;
        *x = slot_x + g->slot * 0.1 + k * bar_w, *w = bar_w;
    } else if (g->stacks == 1) {
        *x = slot_x + g->slot * 0.15, *w = g->slot * 0.7;
    } else {
        double column = g->slot * 0.8 / g->stacks;
        *x = slot_x + g->slot * 0.1 + b * column + column * 0.05, *w = column * 0.9;
    }
    double ya = g->frame.bottom - (from - g->lo) / (g->hi - g->lo) * span;
    double yb = g->frame.bottom - (to - g->lo) / (g->hi - g->lo) * span;
    *y = fmin(ya, yb), *h = fabs(ya - yb);
    return 1;
}

int nc_plot_bars_hit_stack(const nc_plot_bars_geometry *g, const nc_plot_bars_spec *s, double px, double py,
                           int *category, int *stack, int *group)
{
    if (s->n_categories < 1 || px < g->frame.left || px >= g->frame.right || py < g->frame.top ||
        py > g->frame.bottom + 40)
        return 0;
    int c = (int)((px - g->frame.left) / g->slot);
    if (c >= s->n_categories)
        c = s->n_categories - 1;
    *category = c, *group = -1, *stack = -1;
    for (int b = 0; b < g->stacks; b++)
        for (int k = 0; k < g->groups; k++) {
            double x, y, w, h;
            if (!nc_plot_bars_rect(g, s, c, b, k, &x, &y, &w, &h) || px < x || px >= x + w)
                continue;
            *stack = b;
            /* grouped bars are told apart by x (a short bar is still easy to
             * hover); stacked ones by y */
            if (!s->stacked || (py >= y - 1 && py <= y + h + 1)) {
                *group = k;
                return 1;
            }
        }
    return 1;
}

int nc_plot_bars_hit(const nc_plot_bars_geometry *g, const nc_plot_bars_spec *s, double px, double py,
                     int *category, int *group)
{
    int stack;
    return nc_plot_bars_hit_stack(g, s, px, py, category, &stack, group);
}

/* The stacks' keys: a box in the foreground colour, faded and outlined for
 * every stack but the last, as the bars are drawn. */
static void stack_legend(cairo_t *cr, const frame *f, const nc_plot_style *st, int first_row, int stacks,
                         const char *const *labels)
{
    double y = f->top + 4 + first_row * st->font_size * 1.5;
    for (int b = 0; b < stacks; b++, y += st->font_size * 1.5) {
        nc_rgba c = st->foreground;
        int faded = b < stacks - 1;
        c.a *= faded ? NC_PLOT_FADED_ALPHA : 1;
        set_color(cr, c);
        cairo_rectangle(cr, f->right + 14, y + st->font_size / 2 - 6, 12, 12);
        cairo_fill(cr);
        if (faded) {
            set_color(cr, st->foreground);
            cairo_set_line_width(cr, 1);
            cairo_rectangle(cr, f->right + 14.5, y + st->font_size / 2 - 5.5, 11, 11);
            cairo_stroke(cr);
        }
        set_color(cr, st->foreground);
        text_at(cr, f->right + 36, y + st->font_size / 2, labels && labels[b] ? labels[b] : "", 0, 0.5);
    }
}

void nc_plot_bars(cairo_t *cr, double width, double height, const nc_plot_style *st, const nc_plot_bars_spec *s)
{
    nc_plot_bars_geometry g;
    nc_plot_bars_layout(cr, width, height, st, s, &g);
    begin_chart(cr, width, height, st, s->title, s->y_label, 0);
    frame f = {g.frame.left, g.frame.top, g.frame.right, g.frame.bottom};
    y_axis(cr, &f, st, g.lo, g.hi);
    for (int c = 0; c < s->n_categories; c++) {
        for (int b = 0; b < g.stacks; b++) {
            int faded = b < g.stacks - 1;
            double top = f.bottom, bottom = f.top, left = 0, right = 0;
            for (int k = 0; k < g.groups; k++) {
                double x, y, w, h;
                if (!nc_plot_bars_rect(&g, s, c, b, k, &x, &y, &w, &h))
                    continue;
                nc_rgba col = st->series[k % NC_PLOT_MAX_SERIES];
                col.a *= faded ? NC_PLOT_FADED_ALPHA : 1;
                set_color(cr, col);
                cairo_rectangle(cr, x, y, w, h);
                cairo_fill(cr);
                top = fmin(top, y), bottom = fmax(bottom, y + h), left = x, right = x + w;
            }
            if (faded && right > left && bottom > top) { /* outlined: told apart in grey print too */
                set_color(cr, st->foreground);
                cairo_set_line_width(cr, 1);
                cairo_rectangle(cr, floor(left) + 0.5, floor(top) + 0.5, floor(right - left), floor(bottom - top));
                cairo_stroke(cr);
            }
        }
        set_color(cr, st->foreground);
        cairo_save(cr);
        cairo_translate(cr, f.left + (c + 0.5) * g.slot, f.bottom + 6);
        cairo_rotate(cr, M_PI / 6);
        text_at(cr, 0, 0, s->categories[c] ? s->categories[c] : "", 0, 0);
        cairo_restore(cr);
    }
    stroke_frame(cr, st, &f);
    if (g.groups > 1)
        legend(cr, &f, st, g.groups, s->group_labels, g.groups, 1, 0);
    if (g.stacks > 1)
        stack_legend(cr, &f, st, g.groups > 1 ? g.groups : 0, g.stacks, s->stack_labels);
}

/* ---- raster -------------------------------------------------------------- */

void nc_plot_raster_layout(double width, double height, const nc_plot_style *st, const nc_plot_raster_spec *s,
                           nc_plot_raster_geometry *g)
{
    frame f = chart_frame(width, height, st, 0);
    g->frame = (nc_plot_rect){f.left, f.top, f.right, f.bottom};
    g->t0 = s->first_step, g->t1 = s->last_step > g->t0 ? s->last_step : g->t0 + 1;
    g->n0 = s->first_neuron, g->n1 = s->last_neuron > g->n0 ? s->last_neuron : g->n0 + 1;
    g->cell_w = (f.right - f.left) / (g->t1 - g->t0);
    g->cell_h = (f.bottom - f.top) / (g->n1 - g->n0);
    /* More cells than pixels: spikes are binned into one cell per pixel, so
     * the path never holds more rectangles than the plot has pixels. */
    int px_w = (int)fmax(1, floor(f.right - f.left)), px_h = (int)fmax(1, floor(f.bottom - f.top));
    g->grid_w = g->t1 - g->t0 < px_w ? g->t1 - g->t0 : px_w;
    g->grid_h = g->n1 - g->n0 < px_h ? g->n1 - g->n0 : px_h;
}

int nc_plot_raster_hit(const nc_plot_raster_geometry *g, double px, double py, int *neuron, int *step)
{
    if (px < g->frame.left || px >= g->frame.right || py < g->frame.top || py >= g->frame.bottom)
        return 0;
    *step = g->t0 + (int)((px - g->frame.left) / g->cell_w);
    *neuron = g->n0 + (int)((py - g->frame.top) / g->cell_h);
    if (*step >= g->t1)
        *step = g->t1 - 1;
    if (*neuron >= g->n1)
        *neuron = g->n1 - 1;
    return 1;
}

/* Set bits in [first, end) of a bit array, a byte at a time. */
static int64_t count_bits(const uint8_t *bits, int64_t first, int64_t end)
{
    int64_t count = 0;
    while (first < end) {
        int shift = (int)(first & 7), avail = 8 - shift;
        unsigned byte = (unsigned)bits[first >> 3] >> shift;
        if (avail > end - first) {
            avail = (int)(end - first);
            byte &= (1u << avail) - 1;
        }
        count += __builtin_popcount(byte);
        first += avail;
    }
    return count;
}

int64_t nc_plot_raster_count(const nc_plot_raster_spec *s)
{
    int64_t count = 0;
    int t0 = s->first_step < 0 ? 0 : s->first_step, n0 = s->first_neuron < 0 ? 0 : s->first_neuron;
    int t1 = s->last_step < s->n_steps ? s->last_step : s->n_steps;
    for (int i = n0; i < s->last_neuron && i < s->n_neurons && t1 > t0; i++)
        count += count_bits(s->bits, (int64_t)i * s->n_steps + t0, (int64_t)i * s->n_steps + t1);
    return count;
}

/* 64 bits of a bit array from bit `pos` on (LSB first); bits at or past
 * `end` read as 0. */
static inline uint64_t load_bits64(const uint8_t *bits, int64_t pos, int64_t end)
{
    int64_t n = end - pos;
    if (n <= 0)
        return 0;
    const uint8_t *p = bits + (pos >> 3);
    int shift = (int)(pos & 7), nbytes = (int)((shift + (n < 64 ? n : 64) + 7) >> 3);
    uint64_t lo = 0, hi = 0;
    for (int i = 0; i < nbytes && i < 8; i++)
        lo |= (uint64_t)p[i] << (8 * i);
    if (nbytes > 8)
        hi = p[8];
    uint64_t word = shift ? lo >> shift | hi << (64 - shift) : lo;
    return n < 64 ? word & ((UINT64_C(1) << n) - 1) : word;
}

/* Marks the grid cells that hold at least one spike: [grid_h][grid_w].
 * The neurons that share a grid row are OR-ed together 64 steps at a time,
 * then the set bits of that one row are spread over the grid's columns: the
 * cost follows the bytes and the grid, not the spikes (4 096 neurons on
 * ~600 pixel rows: 7 rows of bits per word of work). */
static void raster_fill_grid(const nc_plot_raster_spec *s, const nc_plot_raster_geometry *g, uint8_t *grid)
{
    int span_t = g->t1 - g->t0, span_n = g->n1 - g->n0;
    int t_begin = g->t0 < 0 ? 0 : g->t0, t_end = g->t1 < s->n_steps ? g->t1 : s->n_steps;
    if (t_end <= t_begin)
        return;
    int steps = t_end - t_begin, words = (steps + 63) / 64;
    int *column = malloc((size_t)steps * sizeof(int));
    uint64_t *acc = calloc((size_t)words, sizeof(uint64_t));
    if (!column || !acc) {
        free(column), free(acc);
        return;
    }
    for (int t = t_begin; t < t_end; t++)
        column[t - t_begin] = (int)((int64_t)(t - g->t0) * g->grid_w / span_t);
    int i_begin = g->n0 < 0 ? 0 : g->n0, i_end = g->n1 < s->n_neurons ? g->n1 : s->n_neurons;
    for (int i = i_begin; i < i_end;) {
        int r = (int)((int64_t)(i - g->n0) * g->grid_h / span_n);
        memset(acc, 0, (size_t)words * sizeof(uint64_t));
        for (; i < i_end && (int)((int64_t)(i - g->n0) * g->grid_h / span_n) == r; i++) {
            int64_t first = (int64_t)i * s->n_steps + t_begin, end = first + steps;
            for (int w = 0; w < words; w++)
                acc[w] |= load_bits64(s->bits, first + 64 * (int64_t)w, end);
        }
        uint8_t *row = grid + (size_t)r * g->grid_w;
        for (int w = 0; w < words; w++)
            for (uint64_t x = acc[w]; x; x &= x - 1)
                row[column[64 * w + __builtin_ctzll(x)]] = 1;
    }
    free(column);
    free(acc);
}

/* Adds one rectangle per run of marked cells in each grid row: a dense
 * raster costs as many rectangles as it has runs, not spikes. */
static void raster_path(cairo_t *cr, const nc_plot_raster_geometry *g, const uint8_t *grid)
{
    double gw = (g->frame.right - g->frame.left) / g->grid_w, gh = (g->frame.bottom - g->frame.top) / g->grid_h;
    /* cells of a few pixels get a gap so single spikes stay apart; wide
     * cells (few steps) get a narrow tick, not a bar that reads as duration */
    double mark_w = gw >= 3 ? fmin(gw * 0.8, 10) : gw;
    double mark_h = gh >= 3 ? gh * 0.8 : fmax(gh, 0.6);
    double offset = (gw - mark_w) / 2;
    for (int r = 0; r < g->grid_h; r++) {
        const uint8_t *row = grid + (size_t)r * g->grid_w;
        for (int c = 0; c < g->grid_w; c++) {
            if (!row[c])
                continue;
            int end = c + 1;
            if (gw < 3)
                while (end < g->grid_w && row[end])
                    end++;
            cairo_rectangle(cr, g->frame.left + c * gw + (end - c > 1 ? 0 : offset), g->frame.top + r * gh,
                            (end - c - 1) * gw + mark_w, mark_h);
            c = end - 1;
        }
    }
}

/* Binned to pixels, the grid is an image: one alpha mask (a byte per grid
 * cell) scaled onto the plot with nearest-neighbour sampling costs the same
 * for a thousand spikes as for ten million, where a path of as many
 * rectangles as runs would take a large part of a second. */
static void raster_mask(cairo_t *cr, const nc_plot_raster_geometry *g, const uint8_t *grid)
{
    cairo_surface_t *mask = cairo_image_surface_create(CAIRO_FORMAT_A8, g->grid_w, g->grid_h);
    if (cairo_surface_status(mask) != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(mask);
        return;
    }
    cairo_surface_flush(mask);
    unsigned char *data = cairo_image_surface_get_data(mask);
    int stride = cairo_image_surface_get_stride(mask);
    for (int r = 0; r < g->grid_h; r++)
        for (int c = 0; c < g->grid_w; c++)
            data[(size_t)r * stride + c] = grid[(size_t)r * g->grid_w + c] ? 255 : 0;
    cairo_surface_mark_dirty(mask);
    cairo_save(cr);
    cairo_translate(cr, g->frame.left, g->frame.top);
    cairo_scale(cr, (g->frame.right - g->frame.left) / g->grid_w, (g->frame.bottom - g->frame.top) / g->grid_h);
    cairo_pattern_t *pattern = cairo_pattern_create_for_surface(mask);
    cairo_pattern_set_filter(pattern, CAIRO_FILTER_NEAREST);
    cairo_mask(cr, pattern);
    cairo_pattern_destroy(pattern);
    cairo_restore(cr);
    cairo_surface_destroy(mask);
}

void nc_plot_raster(cairo_t *cr, double width, double height, const nc_plot_style *st,
                    const nc_plot_raster_spec *s)
{
    nc_plot_raster_geometry g;
    nc_plot_raster_layout(width, height, st, s, &g);
    begin_chart(cr, width, height, st, s->title, "neuron", 0);
    frame f = {g.frame.left, g.frame.top, g.frame.right, g.frame.bottom};
    uint8_t *grid = calloc((size_t)g.grid_w * (size_t)g.grid_h, 1);
    if (grid) {
        raster_fill_grid(s, &g, grid);
        set_color(cr, st->series[0]);
        /* narrow cells merge into runs anyway: the mask draws the same; wide
         * cells keep their gaps as a path unless there are very many */
        if (g.cell_w < 3 || (int64_t)g.grid_w * g.grid_h > 250000)
            raster_mask(cr, &g, grid);
        else {
            raster_path(cr, &g, grid);
            cairo_fill(cr);
        }
        free(grid);
    }
    set_color(cr, st->foreground);
    char label[32];
    snprintf(label, sizeof label, "t = %d", g.t0 + 1);
    text_at(cr, f.left, f.bottom + 6, label, 0, 0);
    snprintf(label, sizeof label, "t = %d", g.t1);
    text_at(cr, f.right, f.bottom + 6, label, 1, 0);
    snprintf(label, sizeof label, "%d", g.n0);
    text_at(cr, f.left - 6, f.top, label, 1, 0);
    snprintf(label, sizeof label, "%d", g.n1 - 1);
    text_at(cr, f.left - 6, f.bottom, label, 1, 1);
    stroke_frame(cr, st, &f);
}

/* ---- windows over an axis (zoom and pan) ----------------------------------- */

void nc_plot_subsample(int64_t total, int k, int64_t *out)
{
    for (int j = 0; j < k; j++)
        out[j] = (int64_t)((double)j * (double)total / k);
}

static void clamp_window(int *first, int *last, int total, int span)
{
    if (span > total)
        span = total;
    if (*first < 0)
        *first = 0;
    if (*first + span > total)
        *first = total - span;
    *last = *first + span;
}

void nc_plot_window_zoom(int *first, int *last, int total, double anchor, double factor, int min_span)
{
    int span = *last - *first;
    int new_span = (int)lround(span / factor);
    if (new_span < min_span)
        new_span = min_span;
    if (new_span > total)
        new_span = total;
    if (anchor < 0)
        anchor = 0;
    if (anchor > 1)
        anchor = 1;
    /* keep the data under the pointer where it is */
    double pivot = *first + anchor * span;
    int f = (int)lround(pivot - anchor * new_span);
    clamp_window(&f, last, total, new_span);
    *first = f;
}

void nc_plot_window_pan(int *first, int *last, int total, int delta)
{
    int span = *last - *first, f = *first + delta;
    clamp_window(&f, last, total, span);
    *first = f;
}

/* ---- membrane trace -------------------------------------------------------- */

static void trace_range(const nc_plot_trace_spec *s, double *lo, double *hi)
{
    *lo = fmin(0, -0.1 * s->threshold), *hi = s->threshold * 1.15;
    for (int t = 0; t <= s->T; t++) {
        double m = s->v[t];
        if (t > 0 && s->current)
            m = s->v[t - 1] + s->current[t - 1];
        if (isfinite(m))
            *lo = fmin(*lo, m), *hi = fmax(*hi, m);
        if (isfinite(s->v[t]))
            *lo = fmin(*lo, s->v[t]), *hi = fmax(*hi, s->v[t]);
    }
    if (*hi - *lo < 1e-9)
        *hi = *lo + 1;
}

void nc_plot_trace_layout(double width, double height, const nc_plot_style *st, const nc_plot_trace_spec *s,
                          nc_plot_lines_geometry *g)
{
    frame f = chart_frame(width, height, st, 0);
    g->frame = (nc_plot_rect){f.left, f.top, f.right, f.bottom};
    g->log2_x = 0;
    g->x0 = 0, g->x1 = s->T > 0 ? s->T : 1;
    trace_range(s, &g->y0, &g->y1);
}

/* The membrane rises to m_t = v_{t−1} + x_t and, when it fired, drops to
 * v_t in the same step: a saw-tooth that shows the spike reaching θ. */
static void trace_membrane(cairo_t *cr, const nc_plot_lines_geometry *g, const nc_plot_trace_spec *s)
{
    double x, y;
    nc_plot_lines_to_px(g, 0, s->v[0], &x, &y);
    cairo_move_to(cr, x, y);
    for (int t = 1; t <= s->T; t++) {
        if (s->current) {
            nc_plot_lines_to_px(g, t, s->v[t - 1] + s->current[t - 1], &x, &y);
            cairo_line_to(cr, x, y);
        }
        nc_plot_lines_to_px(g, t, s->v[t], &x, &y);
        cairo_line_to(cr, x, y);
    }
    cairo_stroke(cr);
}

static void trace_spikes(cairo_t *cr, const nc_plot_lines_geometry *g, const nc_plot_trace_spec *s)
{
    for (int t = 1; t <= s->T; t++) {
        if (!s->spike[t - 1])
            continue;
        double x, y;
        nc_plot_lines_to_px(g, t, s->threshold, &x, &y);
        cairo_move_to(cr, x, g->frame.top + 2);
        cairo_line_to(cr, x, g->frame.top + 14);
    }
    cairo_set_line_width(cr, 2.5);
    cairo_stroke(cr);
}

void nc_plot_trace(cairo_t *cr, double width, double height, const nc_plot_style *st, const nc_plot_trace_spec *s)
{
    nc_plot_lines_geometry g;
    nc_plot_trace_layout(width, height, st, s, &g);
    begin_chart(cr, width, height, st, s->title, "membrane potential", 0);
    frame f = {g.frame.left, g.frame.top, g.frame.right, g.frame.bottom};
    y_axis(cr, &f, st, g.y0, g.y1);
    nc_plot_lines_spec xs = {.x_label = "timestep t"};
    x_axis(cr, &f, st, &xs, g.x0, g.x1);
    cairo_save(cr);
    cairo_rectangle(cr, f.left, f.top, f.right - f.left, f.bottom - f.top);
    cairo_clip(cr);
    double x, y;
    nc_plot_lines_to_px(&g, 0, s->threshold, &x, &y);
    set_color(cr, st->series[5]);
    set_hline_dash(cr, 0);
    cairo_set_line_width(cr, 1.5);
    cairo_move_to(cr, f.left, y);
    cairo_line_to(cr, f.right, y);
    cairo_stroke(cr);
    cairo_set_dash(cr, NULL, 0, 0);
    text_at(cr, f.right - 6, y - 4, "θ", 1, 1);
    set_color(cr, st->series[0]);
    cairo_set_line_width(cr, 2);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    if (s->T > 0)
        trace_membrane(cr, &g, s);
    if (s->spike) {
        set_color(cr, st->foreground);
        trace_spikes(cr, &g, s);
    }
    cairo_restore(cr);
    stroke_frame(cr, st, &f);
}

/* ---- teaching view ------------------------------------------------------------- */

static uint32_t argb(nc_rgba c)
{
    return (uint32_t)(c.a * 255) << 24 | (uint32_t)(c.r * 255) << 16 | (uint32_t)(c.g * 255) << 8 |
           (uint32_t)(c.b * 255);
}

/* Paints an image surface into the box (x, y, w, h), keeping its aspect,
 * pixels kept sharp (nearest neighbour). */
static void paint_fitted(cairo_t *cr, cairo_surface_t *img, double x, double y, double w, double h)
{
    int iw = cairo_image_surface_get_width(img), ih = cairo_image_surface_get_height(img);
    double scale = fmin(w / iw, h / ih);
    cairo_save(cr);
    cairo_translate(cr, x + (w - iw * scale) / 2, y + (h - ih * scale) / 2);
    cairo_scale(cr, scale, scale);
    cairo_set_source_surface(cr, img, 0, 0);
    cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
    cairo_paint(cr);
    cairo_restore(cr);
}

static cairo_surface_t *input_image(const nc_plot_teach_spec *s)
{
    int H = s->image_height, W = s->image_width, C = s->image_channels;
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, W, H);
    if (cairo_surface_status(img) != CAIRO_STATUS_SUCCESS)
        return img;
    float lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < (int64_t)C * H * W; i++)
        lo = fminf(lo, s->image[i]), hi = fmaxf(hi, s->image[i]);
    float span = hi > lo ? hi - lo : 1;
    cairo_surface_flush(img);
    uint32_t *px = (uint32_t *)cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img) / 4;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            double v[3];
            for (int k = 0; k < 3; k++) /* grey for one channel, RGB for three */
                v[k] = (s->image[((C == 3 ? k : 0) * H + y) * W + x] - lo) / span;
            px[y * stride + x] = argb((nc_rgba){v[0], v[1], v[2], 1});
        }
    cairo_surface_mark_dirty(img);
    return img;
}

/* Channels as tiles in a grid, a one-pixel gap between them. */
static cairo_surface_t *feature_maps(const nc_plot_teach_spec *s, const nc_plot_style *st, int cols)
{
    int C = s->map_channels, H = s->map_height, W = s->map_width, rows = (C + cols - 1) / cols;
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, cols * (W + 1) - 1, rows * (H + 1) - 1);
    if (cairo_surface_status(img) != CAIRO_STATUS_SUCCESS)
        return img;
    cairo_surface_flush(img);
    uint32_t *px = (uint32_t *)cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img) / 4;
    nc_rgba base = {st->background.r * 0.85 + st->foreground.r * 0.15, st->background.g * 0.85 + st->foreground.g * 0.15,
                    st->background.b * 0.85 + st->foreground.b * 0.15, 1};
    for (int64_t i = 0; i < (int64_t)C * H * W; i++) {
        int c = (int)(i / ((int64_t)H * W)), y = (int)(i / W % H), x = (int)(i % W);
        nc_rgba col = base;
        if (i < s->map_values && s->spikes[i])
            col = st->series[0];
        else if (i < s->map_values && s->rate) { /* the running rate tints the tile */
            double r = fmin(1, s->rate[i]) * 0.6;
            col = (nc_rgba){base.r + (st->series[0].r - base.r) * r, base.g + (st->series[0].g - base.g) * r,
                            base.b + (st->series[0].b - base.b) * r, 1};
        } else if (i >= s->map_values)
            col = st->background;
        px[((c / cols) * (H + 1) + y) * stride + (c % cols) * (W + 1) + x] = argb(col);
    }
    cairo_surface_mark_dirty(img);
    return img;
}

static void evidence_bars(cairo_t *cr, const nc_plot_style *st, const nc_plot_teach_spec *s, double x, double y,
                          double w, double h)
{
    int best = 0;
    double top = 1e-12;
    for (int k = 0; k < s->n_classes; k++) {
        top = fmax(top, fabs(s->evidence[k]));
        if (s->evidence[k] > s->evidence[best])
            best = k;
    }
    /* rows no taller than a few lines of text, centred in the panel */
    double row = fmin(h / (s->n_classes > 0 ? s->n_classes : 1), st->font_size * 2.6);
    double names = w * 0.42, bar = w - names - 8;
    y += (h - row * s->n_classes) / 2;
    for (int k = 0; k < s->n_classes; k++) {
        char label[64];
        if (s->class_names)
            snprintf(label, sizeof label, "%s%s", s->class_names[k], k == s->label ? " ✓" : "");
        else
            snprintf(label, sizeof label, "class %d%s", k, k == s->label ? " ✓" : "");
        double cy = y + (k + 0.5) * row, v = fmax(0, s->evidence[k]) / top;
        set_color(cr, k == best ? st->series[1] : st->grid);
        cairo_rectangle(cr, x + names + 8, cy - row * 0.35, fmax(v * bar, 1), row * 0.7);
        cairo_fill(cr);
        set_color(cr, st->foreground);
        text_at(cr, x + names, cy, label, 1, 0.5);
    }
}

static void teach_caption(cairo_t *cr, const nc_plot_style *st, double x, double y, const char *text)
{
    set_color(cr, st->foreground);
    text_at(cr, x, y, text, 0.5, 0);
}

void nc_plot_teach(cairo_t *cr, double width, double height, const nc_plot_style *st, const nc_plot_teach_spec *s)
{
    char title[256];
    snprintf(title, sizeof title, "%s — t = %d of %d", s->title ? s->title : "", s->step, s->steps);
    begin_chart(cr, width, height, st, title, NULL, 0);
    double top = st->font_size * 3.2, bottom = height - st->font_size * 3, h = bottom - top;
    double in_w = width * 0.22, maps_w = width * 0.45, ev_x = 16 + in_w + maps_w + 24, ev_w = width - ev_x - 16;
    cairo_surface_t *img = input_image(s);
    paint_fitted(cr, img, 16, top, in_w, h);
    cairo_surface_destroy(img);
    teach_caption(cr, st, 16 + in_w / 2, bottom + 6, "input image");
    int cols = (int)ceil(sqrt(s->map_channels * (maps_w / h) * s->map_height / fmax(s->map_width, 1)));
    cols = cols < 1 ? 1 : cols > s->map_channels ? s->map_channels : cols;
    cairo_surface_t *maps = feature_maps(s, st, cols);
    paint_fitted(cr, maps, 16 + in_w + 12, top, maps_w, h);
    cairo_surface_destroy(maps);
    teach_caption(cr, st, 16 + in_w + 12 + maps_w / 2, bottom + 6, s->layer_caption ? s->layer_caption : "");
    if (s->n_classes > 0 && s->evidence)
        evidence_bars(cr, st, s, ev_x, top, ev_w, h);
    teach_caption(cr, st, ev_x + ev_w / 2, bottom + 6, "output evidence so far");
}

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

/* fsync: the new file must be on disk before the rename replaces the old one
 * (a full disk or a crash then leaves the old plot as it was). */
static int sync_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int rc = fd >= 0 ? fsync(fd) : -1;
    if (fd >= 0)
        close(fd);
    return rc;
}

int nc_plot_save(const char *path, int width, int height, nc_plot_draw_fn draw, void *user, char *errbuf,
                 size_t errsize)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path, (long)getpid());
    cairo_surface_t *surface;
    int png = 0;
    if (has_suffix(path, ".svg"))
        surface = cairo_svg_surface_create(tmp, width, height);
    else if (has_suffix(path, ".pdf"))
        surface = cairo_pdf_surface_create(tmp, width, height);
    else if (has_suffix(path, ".png"))
        surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, width, height), png = 1;
    else {
        snprintf(errbuf, errsize, "%s: unknown plot format; use .png, .svg or .pdf", path);
        return -1;
    }
    cairo_t *cr = cairo_create(surface);
    draw(cr, width, height, user);
    cairo_destroy(cr);
    cairo_status_t status = png ? cairo_surface_write_to_png(surface, tmp) : CAIRO_STATUS_SUCCESS;
    cairo_surface_finish(surface);
    if (status == CAIRO_STATUS_SUCCESS)
        status = cairo_surface_status(surface);
    cairo_surface_destroy(surface);
    if (status != CAIRO_STATUS_SUCCESS || sync_file(tmp) != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        snprintf(errbuf, errsize, "%s: cannot write the plot (%s); check that the folder exists and is writable",
                 path, status != CAIRO_STATUS_SUCCESS ? cairo_status_to_string(status) : strerror(errno));
        return -1;
    }
    return 0;
}
