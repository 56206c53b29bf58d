/* nc-quant-chart.c — the loihi quantisation error per layer (see header). */
#include "nc-quant-chart.h"

#include "../core/nc_loihi.h"

struct _NcQuantChart {
    NcChart parent_instance;
    int n_layers;
    char **categories;     /* [n_layers] the driven neurons' names          */
    char **tooltips;       /* [n_layers]                                    */
    double *values;        /* [n_layers][3] weights, biases, thresholds (%) */
    char title[200];
};

G_DEFINE_FINAL_TYPE(NcQuantChart, nc_quant_chart, NC_TYPE_CHART)

static const char *const quant_groups[] = {"weights (8-bit)", "biases (13-bit)", "thresholds (17-bit)"};

static void clear(NcQuantChart *self)
{
    g_clear_pointer(&self->categories, g_strfreev);
    g_clear_pointer(&self->tooltips, g_strfreev);
    g_clear_pointer(&self->values, g_free);
    self->n_layers = 0;
}

static nc_plot_bars_spec make_spec(NcQuantChart *self)
{
    return (nc_plot_bars_spec){
        .title = self->title,
        .y_label = "relative RMS error (%)",
        .n_categories = self->n_layers,
        .categories = (const char *const *)self->categories,
        .n_groups = 3,
        .group_labels = quant_groups,
        .values = self->values,
    };
}

static void quant_draw(NcChart *chart, cairo_t *cr, double w, double h, const nc_plot_style *st)
{
    nc_plot_bars_spec spec = make_spec(NC_QUANT_CHART(chart));
    nc_plot_bars(cr, w, h, st, &spec);
}

static gboolean quant_has_data(NcChart *chart) { return NC_QUANT_CHART(chart)->n_layers > 0; }

static char *quant_query(NcChart *chart, double x, double y, double w, double h)
{
    NcQuantChart *self = NC_QUANT_CHART(chart);
    nc_plot_bars_spec spec = make_spec(self);
    cairo_surface_t *surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 1, 1);
    cairo_t *cr = cairo_create(surface);
    nc_plot_style st;
    nc_chart_get_style(chart, &st);
    nc_plot_bars_geometry g;
    nc_plot_bars_layout(cr, w, h, &st, &spec, &g);
    cairo_destroy(cr);
    cairo_surface_destroy(surface);
    int c, group;
    return nc_plot_bars_hit(&g, &spec, x, y, &c, &group) ? g_strdup(self->tooltips[c]) : NULL;
}

static void nc_quant_chart_finalize(GObject *object)
{
    clear(NC_QUANT_CHART(object));
    G_OBJECT_CLASS(nc_quant_chart_parent_class)->finalize(object);
}

static void nc_quant_chart_class_init(NcQuantChartClass *klass)
{
    nc_chart_class_set_parts(NC_CHART_CLASS(klass), nc_quant_chart_finalize, quant_draw, quant_has_data, quant_query);
}

static void nc_quant_chart_init(NcQuantChart *self) {}

GtkWidget *nc_quant_chart_new(void)
{
    NcQuantChart *self = g_object_new(NC_TYPE_QUANT_CHART, NULL);
    nc_chart_set_name(NC_CHART(self), "loihi-quantisation");
    nc_chart_set_empty_text(NC_CHART(self), "The loihi engine's quantisation error per layer appears once the "
                                             "network is converted.");
    return GTK_WIDGET(self);
}

static char *layer_tooltip(const nc_net *net, const nc_loihi_layer *L)
{
    return g_strdup_printf("<b>%s</b> → <b>%s</b> (errors in thresholds of the target)\n"
                           "weights: 8-bit, exponent %d, threshold mantissa %d (θ = %d·2^6)\n"
                           "  largest |w̃| %.4g, rel. RMS error %.3f%%, max error %.3g, %" G_GINT64_FORMAT
                           " rounded to 0, %" G_GINT64_FORMAT " clipped\n"
                           "biases: 13-bit mantissa, exponent %d, rel. RMS error %.3f%%, %" G_GINT64_FORMAT
                           " clipped\nthresholds: exact (the layer is scaled to them); v(0) error %.2g",
                           net->nodes[L->node].name, net->nodes[L->target].name, L->weight_exp, L->vth_mant,
                           L->vth_mant, L->weights.max_ref, 100 * L->weights.rms_rel, L->weights.max_abs,
                           (gint64)L->weights.zeroed, (gint64)L->weights.clipped, L->bias_exp,
                           100 * L->biases.rms_rel, (gint64)L->biases.clipped, L->v0_error);
}

void nc_quant_chart_set_net(NcQuantChart *self, const nc_net *net)
{
    g_return_if_fail(NC_IS_QUANT_CHART(self));
    clear(self);
    nc_loihi_net *q = NULL;
    nc_error err = {0};
    if (net && nc_loihi_quantise(net, NULL, &q, &err) != NC_OK) {
        g_autofree char *text = g_strdup_printf("The loihi engine cannot quantise this network: %s", err.message);
        nc_chart_set_empty_text(NC_CHART(self), text);
    }
    if (q) {
        int64_t clipped = 0;
        self->n_layers = q->n_layers;
        self->categories = g_new0(char *, q->n_layers + 1);
        self->tooltips = g_new0(char *, q->n_layers + 1);
        self->values = g_new0(double, (size_t)q->n_layers * 3);
        for (int l = 0; l < q->n_layers; l++) {
            const nc_loihi_layer *L = &q->layers[l];
            self->categories[l] = g_strdup(net->nodes[L->target].name);
            self->tooltips[l] = layer_tooltip(net, L);
            self->values[l * 3 + 0] = 100 * L->weights.rms_rel;
            self->values[l * 3 + 1] = 100 * L->biases.rms_rel;
            self->values[l * 3 + 2] = 100 * L->thresholds.rms_rel;
            clipped += L->weights.clipped + L->biases.clipped + L->thresholds.clipped;
        }
        g_snprintf(self->title, sizeof self->title,
                   "Loihi quantisation error per layer (relative RMS, %%): %" G_GINT64_FORMAT " values clipped",
                   (gint64)clipped);
        nc_loihi_net_free(q);
    }
    nc_chart_changed(NC_CHART(self));
}

int nc_quant_chart_get_n_layers(NcQuantChart *self) { return self->n_layers; }
