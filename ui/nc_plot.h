/* nc_plot.h — the charts, drawn with cairo only, so that the same function
 * paints a GTK widget (the workbench) and a PNG/SVG/PDF file (the CLI).
 * Data is normalised by the caller; drawing never allocates per point.
 *
 * Charts:
 *   nc_plot_lines  — accuracy versus timesteps (one line per run, reference
 *                    lines for the ANN and QCFS-ANN accuracy); series of
 *                    about a point per pixel column or more are drawn as
 *                    one image of per-column spans, not strokes (on
 *                    SVG/PDF surfaces: strokes); beyond NC_PLOT_MAX_SERIES
 *                    series the older ones are drawn faded;
 *   nc_plot_bars   — per-layer values, grouped or stacked (firing rates;
 *                    calibration error decomposed into clip/quant/uneven);
 *   nc_plot_raster — spikes of chosen neurons over time: one rectangle path,
 *                    or, when cells are smaller than a few pixels, the spikes
 *                    binned to one cell per pixel and drawn as one alpha mask
 *                    (a million spikes cost what a thousand do);
 *   nc_plot_trace  — the membrane potential of one neuron with θ and spikes;
 *   nc_plot_teach  — one image's input, feature-map spikes at a step and
 *                    running class evidence (the teaching view).
 * Geometry helpers (layout, hit-testing, zoom windows) follow the charts. */
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
    double pixel_scale;          /* device pixels per unit (2 on a HiDPI screen);
                                    what charts drawn as images are sized for */
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
    const double *values;          /* [n_categories][n_groups], or with stacks
                                      [n_categories][n_stacks][n_groups]       */
    int stacked;                   /* stack the groups instead of side by side */
    /* Stacked only: n_stacks > 1 stacks side by side in each category's slot
     * (e.g. a layer's error before and after fine-tuning), keyed in the
     * legend by stack_labels; every stack but the last is drawn faded
     * (NC_PLOT_FADED_ALPHA) and outlined.  0 or 1: one stack. */
    int n_stacks;
    const char *const *stack_labels;
} nc_plot_bars_spec;

#define NC_PLOT_MAX_STACKS 4
#define NC_PLOT_FADED_ALPHA 0.4

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

/* ---- geometry: where a chart puts things ---------------------------------
 * The drawing functions above and the widgets' hit-testing share these, so a
 * pointer position maps to exactly what was drawn.  The layouts that measure
 * legend text take a cairo_t (any surface will do, e.g. a 1×1 image). */

typedef struct nc_plot_rect {
    double left, top, right, bottom; /* the plot area, in the chart's units */
} nc_plot_rect;

typedef struct nc_plot_lines_geometry {
    nc_plot_rect frame;
    int log2_x;
    double x0, x1, y0, y1;           /* data values at the frame's edges */
} nc_plot_lines_geometry;

void nc_plot_lines_layout(cairo_t *cr, double width, double height, const nc_plot_style *style,
                          const nc_plot_lines_spec *spec, nc_plot_lines_geometry *out);
/* Data (x, y) to chart units and back. */
void nc_plot_lines_to_px(const nc_plot_lines_geometry *g, double x, double y, double *px, double *py);
void nc_plot_lines_from_px(const nc_plot_lines_geometry *g, double px, double py, double *x, double *y);
/* The data point nearest to (px, py) within max_dist chart units: 1 and
 * *series, *index; 0 when none is that close. */
int nc_plot_lines_nearest(const nc_plot_lines_geometry *g, const nc_plot_lines_spec *spec, double px,
                          double py, double max_dist, int *series, int *index);

typedef struct nc_plot_bars_geometry {
    nc_plot_rect frame;
    int groups;                      /* groups drawn (≤ NC_PLOT_MAX_SERIES)  */
    int stacks;                      /* stacks per category (1 unless stacked
                                        with n_stacks > 1; ≤ NC_PLOT_MAX_STACKS) */
    double lo, hi;                   /* values at the bottom and top         */
    double slot;                     /* width of one category                */
} nc_plot_bars_geometry;

void nc_plot_bars_layout(cairo_t *cr, double width, double height, const nc_plot_style *style,
                         const nc_plot_bars_spec *spec, nc_plot_bars_geometry *out);
/* 1 when (px, py) is over a category's slot (or its name below the frame):
 * *category, and *group = the bar under the pointer or −1 (between bars). */
int nc_plot_bars_hit(const nc_plot_bars_geometry *g, const nc_plot_bars_spec *spec, double px, double py,
                     int *category, int *group);
/* The same with stacks: *stack = the stack whose column is under the pointer
 * (its bar, or the space above it), −1 between stacks (then *group = −1). */
int nc_plot_bars_hit_stack(const nc_plot_bars_geometry *g, const nc_plot_bars_spec *spec, double px, double py,
                           int *category, int *stack, int *group);
/* Where bar (category, stack, group) is drawn (x, y its top-left corner, w,
 * h its size); 0 when the value is not finite (nothing drawn). */
int nc_plot_bars_rect(const nc_plot_bars_geometry *g, const nc_plot_bars_spec *spec, int category, int stack,
                      int group, double *x, double *y, double *w, double *h);

typedef struct nc_plot_raster_geometry {
    nc_plot_rect frame;
    int t0, t1, n0, n1;              /* visible window [t0, t1) × [n0, n1)   */
    double cell_w, cell_h;           /* size of one (step, neuron) cell       */
    int grid_w, grid_h;              /* cells drawn: at most one per pixel    */
} nc_plot_raster_geometry;

void nc_plot_raster_layout(double width, double height, const nc_plot_style *style,
                           const nc_plot_raster_spec *spec, nc_plot_raster_geometry *out);
/* 1 when (px, py) is inside the plot: the neuron (row) and step under it. */
int nc_plot_raster_hit(const nc_plot_raster_geometry *g, double px, double py, int *neuron, int *step);
/* Spikes inside the spec's visible window. */
int64_t nc_plot_raster_count(const nc_plot_raster_spec *spec);

/* k evenly spaced indices out of total: out[j] = ⌊j·total/k⌋ (the rule
 * core/nc_record.h uses to choose raster neurons). */
void nc_plot_subsample(int64_t total, int k, int64_t *out);
/* A visible window [*first, *last) of an axis of `total` cells, zoomed by
 * `factor` (> 1 zooms in) around `anchor` (0..1 across the window) so that
 * the cell under the pointer stays put; never narrower than min_span nor
 * outside [0, total). */
void nc_plot_window_zoom(int *first, int *last, int total, double anchor, double factor, int min_span);
/* The window moved by delta cells, kept inside [0, total). */
void nc_plot_window_pan(int *first, int *last, int total, int delta);

/* ---- membrane trace ----------------------------------------------------- */

typedef struct nc_plot_trace_spec {
    const char *title;
    int T;
    const float *v;                /* membrane after each step, [T + 1], v_0 first */
    const float *current;          /* input current x_t, [T]; NULL: no rise drawn  */
    const uint8_t *spike;          /* s_t, [T] (0/1); NULL: no spike marks          */
    double threshold;              /* θ, a dashed line                               */
} nc_plot_trace_spec;

/* The membrane of one IF neuron over time: it rises by x_t to v_{t−1} + x_t
 * and drops by θ where it fired (marked at the top), with θ dashed. */
void nc_plot_trace(cairo_t *cr, double width, double height, const nc_plot_style *style,
                   const nc_plot_trace_spec *spec);
/* Its axes (x: t = 0..T, y: the membrane's range and θ). */
void nc_plot_trace_layout(double width, double height, const nc_plot_style *style, const nc_plot_trace_spec *spec,
                          nc_plot_lines_geometry *out);

/* ---- teaching view ------------------------------------------------------ */

typedef struct nc_plot_teach_spec {
    const char *title;
    int image_channels, image_height, image_width;
    const float *image;            /* [C, H, W], shown from its min to its max     */
    const char *layer_caption;
    int map_channels, map_height, map_width; /* the layer as [C, H, W]; a vector
                                              of F values as [1, H, W], H·W ≥ F */
    int64_t map_values;            /* values in spikes / rate (≤ C·H·W)             */
    const uint8_t *spikes;         /* [map_values] at step t, 0 or 1                */
    const float *rate;             /* [map_values] spikes in steps 1..t / t, or NULL */
    int n_classes;
    const char *const *class_names;/* or NULL: the class numbers                    */
    const double *evidence;        /* [n_classes]: Σ of the output over steps 1..t  */
    int label;                     /* the image's class, or −1                      */
    int step, steps;               /* t and T                                       */
} nc_plot_teach_spec;

/* Three panels: the input image; the layer's feature maps, one tile per
 * channel, spikes of step t bright over the running rate; the output's
 * evidence per class, the leader highlighted and the label marked. */
void nc_plot_teach(cairo_t *cr, double width, double height, const nc_plot_style *style,
                   const nc_plot_teach_spec *spec);

/* Writes a chart to `path` (.png, .svg or .pdf by extension) through a
 * temporary file and rename.  draw(cr, width, height, user) paints it.
 * Returns 0 on success, -1 with a message in errbuf otherwise. */
typedef void (*nc_plot_draw_fn)(cairo_t *cr, double width, double height, void *user);
int nc_plot_save(const char *path, int width, int height, nc_plot_draw_fn draw, void *user, char *errbuf,
                 size_t errsize);

#endif
