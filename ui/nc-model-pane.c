/* nc-model-pane.c — layers of the network in a GtkColumnView (see header). */
#include "nc-model-pane.h"

#include <math.h>

#include "nc-layer-item.h"

struct _NcModelPane {
    GtkWidget parent_instance;
    GtkWidget *box, *summary, *scroller, *view;
    GtkWidget *stages_grid;  /* each stage's test accuracy, hidden when none  */
    int n_stages;
    NcStageAccuracy stages[NC_MAX_STAGES];
    GListStore *store;
    GtkSingleSelection *selection;
    gboolean quiet;          /* selecting from code: no ::node-selected       */
};

G_DEFINE_FINAL_TYPE(NcModelPane, nc_model_pane, GTK_TYPE_WIDGET)

enum { SIGNAL_NODE_SELECTED, N_SIGNALS };
static guint signals[N_SIGNALS];

/* ---- what the report says about a node ----------------------------------------------- */

/* The most notable support of the report entries that became or were folded
 * into `name`: unsupported > approximated > folded > removed > converted. */
static int node_support(const nc_net *net, const char *name, GString *reason)
{
    static const int rank[] = {[NC_SUPPORT_CONVERTED] = 0, [NC_SUPPORT_REMOVED] = 1, [NC_SUPPORT_FOLDED] = 2,
                               [NC_SUPPORT_APPROXIMATED] = 3, [NC_SUPPORT_UNSUPPORTED] = 4};
    int best = -1;
    for (int i = 0; i < net->report.count; i++) {
        const nc_report_entry *e = &net->report.entries[i];
        if (strcmp(e->target, name) != 0)
            continue;
        if (e->support != NC_SUPPORT_CONVERTED || e->reason[0]) {
            if (reason->len)
                g_string_append_c(reason, '\n');
            g_string_append_printf(reason, "%s %s (%s): %s", nc_support_name(e->support), e->source_name, e->op_type,
                                   e->reason[0] ? e->reason : "as it is");
        }
        if (best < 0 || rank[e->support] > rank[best])
            best = (int)e->support;
    }
    return best;
}

static char *format_count(int64_t n)
{
    if (n >= 1000000000)
        return g_strdup_printf("%.2f G", n / 1e9);
    if (n >= 1000000)
        return g_strdup_printf("%.2f M", n / 1e6);
    if (n >= 10000)
        return g_strdup_printf("%.1f k", n / 1e3);
    return n ? g_strdup_printf("%" G_GINT64_FORMAT, n) : g_strdup("");
}

static char *node_kind(const nc_node *node)
{
    if (node->kind == NC_NODE_NEURON)
        return g_strdup(nc_neuron_model_name(node->neuron.model));
    if (node->kind == NC_NODE_MAXPOOL)
        return g_strdup_printf("maxpool · %s", nc_maxpool_strategy_name(node->maxpool_strategy));
    return g_strdup(nc_node_kind_name(node->kind));
}

static char *node_threshold(const nc_node *node)
{
    const nc_neuron *n = &node->neuron;
    if (node->kind != NC_NODE_NEURON || n->n_threshold < 1)
        return g_strdup("");
    if (n->n_threshold == 1)
        return g_strdup_printf("%.3g", n->threshold[0]);
    float lo = n->threshold[0], hi = n->threshold[0];
    for (int c = 1; c < n->n_threshold; c++)
        lo = MIN(lo, n->threshold[c]), hi = MAX(hi, n->threshold[c]);
    return g_strdup_printf("%.3g–%.3g", lo, hi);
}

static NcLayerItem *item_for_node(const nc_net *net, int i)
{
    const nc_node *node = &net->nodes[i];
    char shape[64];
    nc_shape_str(node->ndim, node->shape, shape, sizeof shape);
    g_autoptr(GString) reason = g_string_new(NULL);
    int support = node_support(net, node->name, reason);
    g_autofree char *kind = node_kind(node), *macs = format_count(nc_node_macs(net, i));
    g_autofree char *theta = node_threshold(node);
    NcLayerItem *item = nc_layer_item_new(i, node->name, kind, shape, macs, support < 0 ? "" : nc_support_name(support),
                                          reason->str);
    nc_layer_item_set_threshold(item, theta);
    return item;
}

/* Source nodes that did not become a node of the net (removed, unsupported). */
static void add_report_only_rows(NcModelPane *self, const nc_net *net)
{
    for (int i = 0; i < net->report.count; i++) {
        const nc_report_entry *e = &net->report.entries[i];
        if (e->target[0] && nc_net_find(net, e->target) >= 0)
            continue;
        g_autoptr(NcLayerItem) item = nc_layer_item_new(-1, e->source_name, e->op_type, "", "",
                                                        nc_support_name(e->support), e->reason);
        g_list_store_append(self->store, item);
    }
}

static void update_summary(NcModelPane *self, const nc_net *net)
{
    const nc_report *r = &net->report;
    g_autofree char *macs = format_count(nc_net_macs(net)), *params = format_count(nc_net_params(net));
    GString *text = g_string_new(NULL);
    g_string_append_printf(text, "%d nodes · %s parameters · %s MACs per image\nConversion report:", net->n_nodes,
                           params, macs);
    const char *sep = " ";
    for (int s = NC_SUPPORT_CONVERTED; s <= NC_SUPPORT_UNSUPPORTED; s++) {
        int n = nc_report_count(r, (nc_support)s);
        if (n == 0)
            continue;
        g_string_append_printf(text, "%s%d %s", sep, n, nc_support_name((nc_support)s));
        sep = " · ";
    }
    gtk_label_set_text(GTK_LABEL(self->summary), text->str);
    g_string_free(text, TRUE);
}

void nc_model_pane_set_net(NcModelPane *self, const nc_net *net)
{
    g_return_if_fail(NC_IS_MODEL_PANE(self));
    self->quiet = TRUE;
    g_list_store_remove_all(self->store);
    self->quiet = FALSE;
    if (!net) {
        gtk_label_set_text(GTK_LABEL(self->summary), "");
        return;
    }
    for (int i = 0; i < net->n_nodes; i++) {
        g_autoptr(NcLayerItem) item = item_for_node(net, i);
        g_list_store_append(self->store, item);
    }
    add_report_only_rows(self, net);
    update_summary(self, net);
    nc_model_pane_select_node(self, -1);
}

void nc_model_pane_update(NcModelPane *self, const NcRunData *data)
{
    guint n = g_list_model_get_n_items(G_LIST_MODEL(self->store));
    for (guint i = 0; i < n && data && data->has_record; i++) {
        g_autoptr(NcLayerItem) item = g_list_model_get_item(G_LIST_MODEL(self->store), i);
        int layer = nc_run_data_find_node(data, nc_layer_item_get_node(item));
        if (layer < 0 || data->samples == 0)
            continue;
        g_autofree char *rate = g_strdup_printf("%.3f", data->layers[layer].stats.firing_rate);
        nc_layer_item_set_rate(item, rate);
    }
}

/* ---- the stage table ---------------------------------------------------------------- */

static GtkWidget *grid_label(const char *text, float xalign, gboolean header)
{
    GtkWidget *label = gtk_label_new(text);
    gtk_label_set_xalign(GTK_LABEL(label), xalign);
    gtk_widget_add_css_class(label, "caption");
    gtk_widget_add_css_class(label, header ? "dim-label" : "numeric");
    if (header)
        gtk_widget_add_css_class(label, "heading");
    return label;
}

static char *percent(double v) { return isfinite(v) ? g_strdup_printf("%.1f%%", 100 * v) : g_strdup("–"); }

void nc_model_pane_set_stages(NcModelPane *self, const NcStageAccuracy *stages, int n)
{
    g_return_if_fail(NC_IS_MODEL_PANE(self));
    n = CLAMP(n, 0, NC_MAX_STAGES);
    if (n == self->n_stages && (n == 0 || memcmp(stages, self->stages, (size_t)n * sizeof *stages) == 0))
        return;
    self->n_stages = n;
    if (n)
        memcpy(self->stages, stages, (size_t)n * sizeof *stages);
    GtkWidget *child;
    while ((child = gtk_widget_get_first_child(self->stages_grid)))
        gtk_grid_remove(GTK_GRID(self->stages_grid), child);
    gtk_widget_set_visible(self->stages_grid, n > 0);
    if (n == 0)
        return;
    g_autofree char *snn = g_strdup_printf("SNN T=%d", stages[n - 1].T);
    const char *headers[] = {"Test accuracy", "ANN", "QCFS-ANN", snn};
    for (int c = 0; c < 4; c++)
        gtk_grid_attach(GTK_GRID(self->stages_grid), grid_label(headers[c], c ? 1 : 0, TRUE), c, 0, 1, 1);
    for (int r = 0; r < n; r++) {
        const NcStageAccuracy *s = &stages[r];
        g_autofree char *ann = percent(s->ann), *qcfs = percent(s->qcfs), *spk = percent(s->snn);
        const char *cells[] = {s->name, ann, qcfs, spk};
        for (int c = 0; c < 4; c++)
            gtk_grid_attach(GTK_GRID(self->stages_grid), grid_label(cells[c], c ? 1 : 0, FALSE), c, r + 1, 1, 1);
    }
    g_autofree char *tip = g_strdup_printf(
        "Each stage's accuracy on the %" G_GINT64_FORMAT " test images simulated: the ANN (ReLU), the QCFS-ANN "
        "(clip-floor-shift activations, what the SNN approximates) and the SNN after T = %d steps. “–”: not "
        "measured (after BPTT the ANN reading of the weights is not what was trained).",
        stages[n - 1].images, stages[n - 1].T);
    gtk_widget_set_tooltip_text(self->stages_grid, tip);
}

int nc_model_pane_get_n_stages(NcModelPane *self) { return self->n_stages; }

const NcStageAccuracy *nc_model_pane_get_stage(NcModelPane *self, int i)
{
    return i >= 0 && i < self->n_stages ? &self->stages[i] : NULL;
}

void nc_model_pane_select_node(NcModelPane *self, int node)
{
    guint n = g_list_model_get_n_items(G_LIST_MODEL(self->store)), found = GTK_INVALID_LIST_POSITION;
    for (guint i = 0; i < n && node >= 0; i++) {
        g_autoptr(NcLayerItem) item = g_list_model_get_item(G_LIST_MODEL(self->store), i);
        if (nc_layer_item_get_node(item) == node)
            found = i;
    }
    self->quiet = TRUE;
    gtk_single_selection_set_selected(self->selection, found);
    self->quiet = FALSE;
}

guint nc_model_pane_get_n_rows(NcModelPane *self) { return g_list_model_get_n_items(G_LIST_MODEL(self->store)); }

static void on_selected(GtkSingleSelection *selection, GParamSpec *pspec, NcModelPane *self)
{
    NcLayerItem *item = gtk_single_selection_get_selected_item(selection);
    if (!self->quiet && item)
        g_signal_emit(self, signals[SIGNAL_NODE_SELECTED], 0, nc_layer_item_get_node(item));
}

/* ---- columns ------------------------------------------------------------------------ */

typedef enum { CELL_LAYER, CELL_TEXT, CELL_PILL } CellKind;

typedef struct {
    const char *title, *property;
    CellKind kind;
    gboolean expand;
} Column;

static GtkWidget *cell_label(float xalign, const char *css)
{
    GtkWidget *label = gtk_label_new(NULL);
    gtk_label_set_xalign(GTK_LABEL(label), xalign);
    if (css)
        gtk_widget_add_css_class(label, css);
    return label;
}

/* The layer cell has two lines: the node's name, and its type and shape. */
static void setup_cell(GtkSignalListItemFactory *f, GtkListItem *li, const Column *col)
{
    if (col->kind == CELL_LAYER) {
        GtkWidget *box = gtk_box_new(GTK_ORIENTATION_VERTICAL, 1);
        GtkWidget *name = cell_label(0, NULL), *detail = cell_label(0, "dim-label");
        gtk_label_set_ellipsize(GTK_LABEL(name), PANGO_ELLIPSIZE_MIDDLE);
        gtk_label_set_ellipsize(GTK_LABEL(detail), PANGO_ELLIPSIZE_END);
        gtk_widget_add_css_class(detail, "caption");
        gtk_box_append(GTK_BOX(box), name);
        gtk_box_append(GTK_BOX(box), detail);
        gtk_list_item_set_child(li, box);
    } else if (col->kind == CELL_PILL) {
        GtkWidget *label = cell_label(0.5, "pill");
        gtk_widget_set_halign(label, GTK_ALIGN_START);
        gtk_list_item_set_child(li, label);
    } else {
        gtk_list_item_set_child(li, cell_label(1, "numeric"));
    }
}

static void bind_layer_cell(GtkWidget *box, NcLayerItem *item)
{
    g_autofree char *name = NULL, *kind = NULL, *shape = NULL;
    g_object_get(item, "name", &name, "kind", &kind, "shape", &shape, NULL);
    g_autofree char *detail = *shape ? g_strdup_printf("%s · %s", kind, shape) : g_strdup(kind);
    gtk_label_set_text(GTK_LABEL(gtk_widget_get_first_child(box)), name);
    gtk_label_set_text(GTK_LABEL(gtk_widget_get_last_child(box)), detail);
}

/* A row's tooltip is the conversion reason, on every cell of that row.
 * Threshold and rate change during a run: they are bound, the rest is set. */
static void bind_cell(GtkSignalListItemFactory *f, GtkListItem *li, const Column *col)
{
    GtkWidget *child = gtk_list_item_get_child(li);
    NcLayerItem *item = gtk_list_item_get_item(li);
    g_autofree char *reason = NULL, *status = NULL;
    g_object_get(item, "reason", &reason, "status", &status, NULL);
    gtk_widget_set_tooltip_text(child, reason && *reason ? reason : NULL);
    if (col->kind == CELL_LAYER) {
        bind_layer_cell(child, item);
    } else if (col->kind == CELL_PILL) {
        gtk_label_set_text(GTK_LABEL(child), status);
        gtk_widget_set_css_classes(child, (const char *[]){"pill", status ? status : "", NULL});
        gtk_widget_set_visible(child, status && *status);
    } else {
        GBinding *binding = g_object_bind_property(item, col->property, child, "label", G_BINDING_SYNC_CREATE);
        g_object_set_data(G_OBJECT(child), "nc-binding", binding);
    }
}

static void unbind_cell(GtkSignalListItemFactory *f, GtkListItem *li, const Column *col)
{
    GtkWidget *child = gtk_list_item_get_child(li);
    GBinding *binding = g_object_get_data(G_OBJECT(child), "nc-binding");
    if (binding)
        g_binding_unbind(binding);
    g_object_set_data(G_OBJECT(child), "nc-binding", NULL);
}

static const Column columns[] = {
    {"Layer", NULL, CELL_LAYER, TRUE},     {"MACs", "macs", CELL_TEXT, FALSE},
    {"θ", "threshold", CELL_TEXT, FALSE},  {"Rate", "rate", CELL_TEXT, FALSE},
    {"Status", NULL, CELL_PILL, FALSE},
};

static void add_columns(NcModelPane *self)
{
    for (guint i = 0; i < G_N_ELEMENTS(columns); i++) {
        GtkListItemFactory *factory = gtk_signal_list_item_factory_new();
        g_signal_connect(factory, "setup", G_CALLBACK(setup_cell), (gpointer)&columns[i]);
        g_signal_connect(factory, "bind", G_CALLBACK(bind_cell), (gpointer)&columns[i]);
        g_signal_connect(factory, "unbind", G_CALLBACK(unbind_cell), (gpointer)&columns[i]);
        GtkColumnViewColumn *column = gtk_column_view_column_new(columns[i].title, factory);
        gtk_column_view_column_set_expand(column, columns[i].expand);
        gtk_column_view_column_set_resizable(column, TRUE);
        gtk_column_view_append_column(GTK_COLUMN_VIEW(self->view), column);
        g_object_unref(column);
    }
}

/* ---- object --------------------------------------------------------------------------- */

static void nc_model_pane_dispose(GObject *object)
{
    NcModelPane *self = NC_MODEL_PANE(object);
    g_clear_pointer(&self->box, gtk_widget_unparent);
    g_clear_object(&self->store);
    G_OBJECT_CLASS(nc_model_pane_parent_class)->dispose(object);
}

static void nc_model_pane_class_init(NcModelPaneClass *klass)
{
    G_OBJECT_CLASS(klass)->dispose = nc_model_pane_dispose;
    gtk_widget_class_set_layout_manager_type(GTK_WIDGET_CLASS(klass), GTK_TYPE_BIN_LAYOUT);
    /* The user selected the row of node `node` (−1 for a report-only row). */
    signals[SIGNAL_NODE_SELECTED] = g_signal_new("node-selected", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0,
                                                 NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_INT);
}

static void nc_model_pane_init(NcModelPane *self)
{
    self->box = gtk_box_new(GTK_ORIENTATION_VERTICAL, 0);
    gtk_widget_set_parent(self->box, GTK_WIDGET(self));
    self->summary = gtk_label_new(NULL);
    gtk_label_set_xalign(GTK_LABEL(self->summary), 0);
    gtk_label_set_wrap(GTK_LABEL(self->summary), TRUE);
    gtk_widget_add_css_class(self->summary, "dim-label");
    gtk_widget_add_css_class(self->summary, "caption");
    gtk_widget_set_margin_start(self->summary, 12);
    gtk_widget_set_margin_end(self->summary, 12);
    gtk_widget_set_margin_top(self->summary, 8);
    gtk_widget_set_margin_bottom(self->summary, 8);
    gtk_box_append(GTK_BOX(self->box), self->summary);
    self->stages_grid = gtk_grid_new();
    gtk_grid_set_column_spacing(GTK_GRID(self->stages_grid), 12);
    gtk_grid_set_row_spacing(GTK_GRID(self->stages_grid), 2);
    gtk_widget_set_margin_start(self->stages_grid, 12);
    gtk_widget_set_margin_end(self->stages_grid, 12);
    gtk_widget_set_margin_bottom(self->stages_grid, 8);
    gtk_widget_set_visible(self->stages_grid, FALSE);
    gtk_box_append(GTK_BOX(self->box), self->stages_grid);
    self->store = g_list_store_new(NC_TYPE_LAYER_ITEM);
    self->selection = gtk_single_selection_new(G_LIST_MODEL(g_object_ref(self->store)));
    gtk_single_selection_set_autoselect(self->selection, FALSE);
    gtk_single_selection_set_can_unselect(self->selection, TRUE);
    g_signal_connect(self->selection, "notify::selected", G_CALLBACK(on_selected), self);
    self->view = gtk_column_view_new(GTK_SELECTION_MODEL(self->selection));
    gtk_widget_add_css_class(self->view, "layer-list");
    gtk_column_view_set_show_row_separators(GTK_COLUMN_VIEW(self->view), TRUE);
    add_columns(self);
    self->scroller = gtk_scrolled_window_new();
    gtk_scrolled_window_set_child(GTK_SCROLLED_WINDOW(self->scroller), self->view);
    gtk_widget_set_vexpand(self->scroller, TRUE);
    gtk_box_append(GTK_BOX(self->box), self->scroller);
}
