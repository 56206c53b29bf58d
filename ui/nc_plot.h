/* nc_plot.h — the charts, drawn with cairo only, so that the same function
 * paints a GTK widget (the workbench) and a PNG/SVG/PDF file (the CLI).
 * Data is normalised by the caller; drawing never allocates per point.
 *
 * Charts:
 *   nc_plot_lines  — accuracy versus timesteps (one line per run, reference
 *                    lines for the ANN and QCFS-ANN accuracy);
 *   nc_plot_bars   — per-layer values, grouped or stacked (firing rates;
 *                    calibration error decomposed into clip/quant/uneven);
 *   nc_plot_raster — spikes of chosen neurons over time, one rectangle path. */
#ifndef NC_PLOT_H
#define NC_PLOT_H

#include <cairo.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nc_rgba {
    double r, g, b, a;
} nc_rgba;

#define NC_PLOT_MAX_SERIES 12

typedef struct nc_plot_style {
    nc_rgba background, foreground, grid;
    nc_rgba series[NC_PLOT_MAX_SERIES];
    double font_size;
} nc_plot_style;

void nc_plot_style_light(nc_plot_style *s);
void nc_plot_style_dark(nc_plot_style *s);

typedef struct nc_plot_series {
    const char *label;
    int n;
    const double *x, *y;
} nc_plot_series;

typedef struct nc_plot_hline {
    const char *label;
    double y;
} nc_plot_hline;

typedef struct nc_plot_lines_spec {
    const char *title, *x_label, *y_label;
    int log2_x;                  /* x axis in powers of two (timesteps)       */
    int fixed_y;                 /* 1: use y_min..y_max; 0: fit the data      */
    double y_min, y_max;
    int n_series;
    const nc_plot_series *series;
    int n_hlines;
    const nc_plot_hline *hlines; /* dashed reference lines (ANN accuracy ...) */
} nc_plot_lines_spec;

void nc_plot_lines(cairo_t *cr, double width, double height, const nc_plot_style *style,
                   const nc_plot_lines_spec *spec);

typedef struct nc_plot_bars_spec {
    const char *title, *y_label;
    int n_categories;              /* e.g. layers                              */
    const char *const *categories;
    int n_groups;                  /* values per category (series)             */
    const char *const *group_labels;
    const double *values;          /* [n_categories][n_groups]                 */
    int stacked;                   /* stack the groups instead of side by side */
} nc_plot_bars_spec;

void nc_plot_bars(cairo_t *cr, double width, double height, const nc_plot_style *style,
                  const nc_plot_bars_spec *spec);

typedef struct nc_plot_raster_spec {
    const char *title;
    int n_neurons, n_steps;
    const uint8_t *bits;           /* bit-packed [n_neurons][n_steps], bit t of neuron i at
                                      bits[(i*n_steps + t) / 8], mask 1 << ((i*n_steps + t) % 8) */
    int first_step, last_step;     /* visible time window [first, last)        */
    int first_neuron, last_neuron; /* visible neurons [first, last)           */
} nc_plot_raster_spec;

void nc_plot_raster(cairo_t *cr, double width, double height, const nc_plot_style *style,
                    const nc_plot_raster_spec *spec);

/* Writes a chart to `path` (.png, .svg or .pdf by extension) through a
 * temporary file and rename.  draw(cr, width, height, user) paints it.
 * Returns 0 on success, -1 with a message in errbuf otherwise. */
typedef void (*nc_plot_draw_fn)(cairo_t *cr, double width, double height, void *user);
int nc_plot_save(const char *path, int width, int height, nc_plot_draw_fn draw, void *user, char *errbuf,
                 size_t errsize);

#endif
