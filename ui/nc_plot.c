/* nc_plot.c — cairo charts shared by the workbench and the CLI. */
#include "nc_plot.h"

#include <cairo-pdf.h>
#include <cairo-svg.h>
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

static void y_axis(cairo_t *cr, const frame *f, const nc_plot_style *st, double y0, double y1)
{
    double step = nice_step(y1 - y0, 5);
    char label[32];
    cairo_set_line_width(cr, 1);
    for (double v = ceil(y0 / step) * step; v <= y1 + step * 1e-6; v += step) {
        double y = f->bottom - (v - y0) / (y1 - y0) * (f->bottom - f->top);
        set_color(cr, st->grid);
        cairo_move_to(cr, f->left, y);
        cairo_line_to(cr, f->right, y);
        cairo_stroke(cr);
        set_color(cr, st->foreground);
        snprintf(label, sizeof label, "%g", fabs(v) < step * 1e-6 ? 0.0 : v);
        text_at(cr, f->left - 6, y, label, 1, 0.5);
    }
}

/* Reference lines differ by dash pattern, so they stay apart in grey print. */
static void set_hline_dash(cairo_t *cr, int k)
{
    static const double patterns[3][2] = {{6, 3}, {2, 3}, {10, 4}};
    cairo_set_dash(cr, patterns[k % 3], 2, 0);
}

static void legend(cairo_t *cr, const frame *f, const nc_plot_style *st, int n, const char *const *labels,
                   int dashed_from)
{
    double y = f->top + 4;
    for (int i = 0; i < n; i++, y += st->font_size * 1.5) {
        set_color(cr, i >= dashed_from ? st->foreground : st->series[i % NC_PLOT_MAX_SERIES]);
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

void nc_plot_lines(cairo_t *cr, double width, double height, const nc_plot_style *st, const nc_plot_lines_spec *s)
{
    const char *labels[2 * NC_PLOT_MAX_SERIES];
    int n_series = s->n_series < NC_PLOT_MAX_SERIES ? s->n_series : NC_PLOT_MAX_SERIES;
    int n_hl = s->n_hlines < NC_PLOT_MAX_SERIES ? s->n_hlines : NC_PLOT_MAX_SERIES;
    for (int k = 0; k < n_series; k++)
        labels[k] = s->series[k].label;
    for (int k = 0; k < n_hl; k++)
        labels[n_series + k] = s->hlines[k].label;
    double lw = legend_width(cr, st, n_series + n_hl, labels);
    frame f = begin_chart(cr, width, height, st, s->title, s->y_label, lw);
    double x0, x1, y0, y1;
    lines_range(s, &x0, &x1, &y0, &y1);
    y_axis(cr, &f, st, y0, y1);
    x_axis(cr, &f, st, s, x0, x1);
    cairo_save(cr);
    cairo_rectangle(cr, f.left, f.top - 2, f.right - f.left, f.bottom - f.top + 4);
    cairo_clip(cr);
    for (int k = 0; k < n_hl; k++) {
        double y = f.bottom - (s->hlines[k].y - y0) / (y1 - y0) * (f.bottom - f.top);
        set_color(cr, st->foreground);
        set_hline_dash(cr, k);
        cairo_set_line_width(cr, 1.5);
        cairo_move_to(cr, f.left, y);
        cairo_line_to(cr, f.right, y);
        cairo_stroke(cr);
        cairo_set_dash(cr, NULL, 0, 0);
    }
    for (int k = 0; k < n_series; k++) {
        const nc_plot_series *p = &s->series[k];
        set_color(cr, st->series[k % NC_PLOT_MAX_SERIES]);
        cairo_set_line_width(cr, 2.2);
        int pen_down = 0;
        for (int i = 0; i < p->n; i++) {
            if (!isfinite(p->y[i]) || (s->log2_x && p->x[i] <= 0)) {
                pen_down = 0;
                continue;
            }
            double x = map_x(p->x[i], s->log2_x, x0, x1, &f);
            double y = f.bottom - (p->y[i] - y0) / (y1 - y0) * (f.bottom - f.top);
            if (pen_down)
                cairo_line_to(cr, x, y);
            else
                cairo_move_to(cr, x, y);
            pen_down = 1;
        }
        cairo_stroke(cr);
    }
    cairo_restore(cr);
    set_color(cr, st->foreground);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, f.left, f.top, f.right - f.left, f.bottom - f.top);
    cairo_stroke(cr);
    legend(cr, &f, st, n_series + n_hl, labels, n_series);
}

void nc_plot_bars(cairo_t *cr, double width, double height, const nc_plot_style *st, const nc_plot_bars_spec *s)
{
    int groups = s->n_groups < NC_PLOT_MAX_SERIES ? s->n_groups : NC_PLOT_MAX_SERIES;
    double lw = legend_width(cr, st, groups > 1 ? groups : 0, s->group_labels);
    frame f = begin_chart(cr, width, height, st, s->title, s->y_label, lw);
    f.bottom -= st->font_size * 2; /* room for slanted category names */
    double lo = 0, hi = 0;
    for (int c = 0; c < s->n_categories; c++) {
        double pos = 0, neg = 0;
        for (int g = 0; g < groups; g++) {
            double v = s->values[c * s->n_groups + g];
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
    y_axis(cr, &f, st, lo, hi);
    double slot = (f.right - f.left) / (s->n_categories > 0 ? s->n_categories : 1);
    for (int c = 0; c < s->n_categories; c++) {
        double base_pos = 0, base_neg = 0;
        for (int g = 0; g < groups; g++) {
            double v = s->values[c * s->n_groups + g];
            if (!isfinite(v))
                continue;
            double bar_w = s->stacked ? slot * 0.7 : slot * 0.8 / groups;
            double x = f.left + c * slot + (s->stacked ? slot * 0.15 : slot * 0.1 + g * bar_w);
            double from = s->stacked ? (v >= 0 ? base_pos : base_neg) : 0, to = from + v;
            if (s->stacked && v >= 0)
                base_pos = to;
            else if (s->stacked)
                base_neg = to;
            double ya = f.bottom - (from - lo) / (hi - lo) * (f.bottom - f.top);
            double yb = f.bottom - (to - lo) / (hi - lo) * (f.bottom - f.top);
            set_color(cr, st->series[g % NC_PLOT_MAX_SERIES]);
            cairo_rectangle(cr, x, fmin(ya, yb), bar_w, fabs(ya - yb));
            cairo_fill(cr);
        }
        set_color(cr, st->foreground);
        cairo_save(cr);
        cairo_translate(cr, f.left + (c + 0.5) * slot, f.bottom + 6);
        cairo_rotate(cr, M_PI / 6);
        text_at(cr, 0, 0, s->categories[c] ? s->categories[c] : "", 0, 0);
        cairo_restore(cr);
    }
    set_color(cr, st->foreground);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, f.left, f.top, f.right - f.left, f.bottom - f.top);
    cairo_stroke(cr);
    if (groups > 1)
        legend(cr, &f, st, groups, s->group_labels, groups);
}

/* Spikes become one path of small rectangles, filled once: thousands of cairo
 * calls per frame would be far slower than one fill. */
void nc_plot_raster(cairo_t *cr, double width, double height, const nc_plot_style *st,
                    const nc_plot_raster_spec *s)
{
    frame f = begin_chart(cr, width, height, st, s->title, "neuron", 0);
    int t0 = s->first_step, t1 = s->last_step > t0 ? s->last_step : t0 + 1;
    int n0 = s->first_neuron, n1 = s->last_neuron > n0 ? s->last_neuron : n0 + 1;
    double cw = (f.right - f.left) / (t1 - t0), ch = (f.bottom - f.top) / (n1 - n0);
    double mark_w = fmax(cw * 0.8, 0.6), mark_h = fmax(ch * 0.8, 0.6);
    for (int i = n0; i < n1 && i < s->n_neurons; i++) {
        for (int t = t0; t < t1 && t < s->n_steps; t++) {
            int64_t bit = (int64_t)i * s->n_steps + t;
            if (s->bits[bit >> 3] & (1u << (bit & 7)))
                cairo_rectangle(cr, f.left + (t - t0) * cw, f.top + (i - n0) * ch, mark_w, mark_h);
        }
    }
    set_color(cr, st->series[0]);
    cairo_fill(cr);
    set_color(cr, st->foreground);
    char label[32];
    snprintf(label, sizeof label, "t = %d", t0 + 1);
    text_at(cr, f.left, f.bottom + 6, label, 0, 0);
    snprintf(label, sizeof label, "t = %d", t1);
    text_at(cr, f.right, f.bottom + 6, label, 1, 0);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, f.left, f.top, f.right - f.left, f.bottom - f.top);
    cairo_stroke(cr);
}

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcasecmp(s + n - m, suffix) == 0;
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
    if (status != CAIRO_STATUS_SUCCESS || rename(tmp, path) != 0) {
        unlink(tmp);
        snprintf(errbuf, errsize, "%s: cannot write the plot (%s); check that the folder exists and is writable",
                 path, status != CAIRO_STATUS_SUCCESS ? cairo_status_to_string(status) : "rename failed");
        return -1;
    }
    return 0;
}
