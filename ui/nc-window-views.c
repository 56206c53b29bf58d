/* nc-window-views.c — the view pages (a toolbar over each chart) and how a
 * run's snapshots reach them. */
#include "nc-window-private.h"

#include <math.h>

/* ---- building the pages ------------------------------------------------------------------ */

static GtkWidget *toolbar_new(void)
{
    GtkWidget *bar = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 8);
    gtk_widget_add_css_class(bar, "view-toolbar");
    return bar;
}

static GtkLabel *add_info(GtkWidget *bar, gboolean expand)
{
    GtkWidget *label = gtk_label_new(NULL);
    gtk_label_set_xalign(GTK_LABEL(label), 0);
    gtk_label_set_ellipsize(GTK_LABEL(label), PANGO_ELLIPSIZE_END);
    gtk_widget_set_hexpand(label, expand);
    gtk_widget_add_css_class(label, "dim-label");
    gtk_box_append(GTK_BOX(bar), label);
    return GTK_LABEL(label);
}

static void add_caption(GtkWidget *bar, const char *text)
{
    GtkWidget *label = gtk_label_new(text);
    gtk_box_append(GTK_BOX(bar), label);
}

static void add_page(NcWindow *self, const char *name, const char *title, const char *icon, GtkWidget *toolbar,
                     GtkWidget *chart)
{
    GtkWidget *box = gtk_box_new(GTK_ORIENTATION_VERTICAL, 0);
    gtk_box_append(GTK_BOX(box), toolbar);
    gtk_widget_add_css_class(chart, "chart-area");
    gtk_box_append(GTK_BOX(box), chart);
    AdwViewStackPage *page = adw_view_stack_add_titled(self->views, box, name, title);
    adw_view_stack_page_set_icon_name(page, icon);
}

static GtkDropDown *layer_dropdown(NcWindow *self)
{
    GtkWidget *dd = gtk_drop_down_new(G_LIST_MODEL(g_object_ref(self->layer_names)), NULL);
    gtk_widget_set_tooltip_text(dd, "Neuron layer");
    return GTK_DROP_DOWN(dd);
}

static void build_accuracy_page(NcWindow *self)
{
    GtkWidget *bar = toolbar_new();
    self->accuracy_info = add_info(bar, TRUE);
    gtk_label_set_text(self->accuracy_info, "The SNN curve is refined with every batch; earlier runs stay for comparison.");
    GtkWidget *clear = gtk_button_new_with_mnemonic("C_lear Earlier Runs");
    gtk_actionable_set_action_name(GTK_ACTIONABLE(clear), "win.clear-runs");
    gtk_box_append(GTK_BOX(bar), clear);
    self->accuracy = NC_ACCURACY_CHART(nc_accuracy_chart_new());
    add_page(self, "accuracy", "Accuracy", "nc-accuracy-symbolic", bar, GTK_WIDGET(self->accuracy));
}

static void on_drill_changed(NcLayerChart *chart, NcWindow *self)
{
    gboolean drilled = nc_layer_chart_get_drill_layer(chart) >= 0;
    gtk_widget_set_visible(self->rates_back, drilled);
    gtk_label_set_text(self->rates_hint, drilled ? "Per-channel rates: click the chart or press Esc to go back."
                                                 : "Mean rate, dead and saturated fractions; click a layer for its "
                                                   "channels.");
}

static void on_rates_back(GtkButton *button, NcWindow *self) { nc_layer_chart_set_drill_layer(self->rates, -1); }

static void build_rates_page(NcWindow *self)
{
    GtkWidget *bar = toolbar_new();
    self->rates_back = gtk_button_new_from_icon_name("go-previous-symbolic");
    gtk_widget_set_tooltip_text(self->rates_back, "Back to the Layers");
    gtk_widget_set_visible(self->rates_back, FALSE);
    g_signal_connect(self->rates_back, "clicked", G_CALLBACK(on_rates_back), self);
    gtk_box_append(GTK_BOX(bar), self->rates_back);
    self->rates_hint = add_info(bar, TRUE);
    self->rates = NC_LAYER_CHART(nc_layer_chart_new(NC_LAYER_CHART_RATES));
    g_signal_connect(self->rates, "drill-changed", G_CALLBACK(on_drill_changed), self);
    on_drill_changed(self->rates, self);
    add_page(self, "firing-rates", "Rates", "nc-rates-symbolic", bar, GTK_WIDGET(self->rates));
}

static void build_error_page(NcWindow *self)
{
    GtkWidget *bar = toolbar_new();
    GtkLabel *info = add_info(bar, TRUE);
    gtk_label_set_text(info, "How far each layer's spike rate is from the ANN activation, and why: "
                             "clipping at θ, quantisation to T steps, uneven spike timing.");
    self->error = NC_LAYER_CHART(nc_layer_chart_new(NC_LAYER_CHART_ERROR));
    /* the loihi engine's quantisation error per layer, under it (loihi runs) */
    GtkWidget *pair = gtk_box_new(GTK_ORIENTATION_VERTICAL, 6);
    gtk_box_append(GTK_BOX(pair), GTK_WIDGET(self->error));
    self->quant = NC_QUANT_CHART(nc_quant_chart_new());
    gtk_widget_set_visible(GTK_WIDGET(self->quant), FALSE);
    gtk_box_append(GTK_BOX(pair), GTK_WIDGET(self->quant));
    add_page(self, "calibration-error", "Error", "nc-calib-symbolic", bar, pair);
}

static void on_raster_window(NcRasterChart *chart, NcWindow *self)
{
    g_autofree char *text = g_strdup_printf("%'" G_GINT64_FORMAT " spikes shown",
                                            nc_raster_chart_get_visible_spikes(chart));
    gtk_label_set_text(self->raster_info, text);
}

static void on_raster_layer(GtkDropDown *dd, GParamSpec *pspec, NcWindow *self)
{
    guint layer = gtk_drop_down_get_selected(dd);
    if (layer == GTK_INVALID_LIST_POSITION)
        return;
    nc_raster_chart_set_layer(self->raster, (int)layer);
    if (!self->trace_chosen)
        nc_trace_chart_pick_active(self->trace, (int)layer);
    else
        nc_trace_chart_set_neuron(self->trace, (int)layer, 0);
    gtk_spin_button_set_value(self->trace_neuron, nc_trace_chart_get_neuron(self->trace));
}

static void on_raster_sample(GtkDropDown *dd, GParamSpec *pspec, NcWindow *self)
{
    guint i = gtk_drop_down_get_selected(dd);
    if (i == GTK_INVALID_LIST_POSITION)
        return;
    int n = (int)g_list_model_get_n_items(gtk_drop_down_get_model(dd));
    nc_raster_chart_set_sample(self->raster, (int)i == n - 1 ? -1 : (int)i); /* the last entry is "all" */
}

static void on_neuron_activated(NcRasterChart *chart, int layer, int neuron, int sample, NcWindow *self)
{
    if (sample != 0)
        return; /* only sample 0 is traced */
    self->trace_chosen = TRUE;
    const NcLayerViews *v = &self->last_data->views->layers[layer];
    nc_trace_chart_show_index(self->trace, layer, v->raster_index[neuron]);
    gtk_spin_button_set_value(self->trace_neuron, nc_trace_chart_get_neuron(self->trace));
    adw_view_stack_set_visible_child_name(self->views, "membrane");
}

static void build_raster_page(NcWindow *self)
{
    GtkWidget *bar = toolbar_new();
    add_caption(bar, "Layer");
    self->raster_layer = layer_dropdown(self);
    gtk_box_append(GTK_BOX(bar), GTK_WIDGET(self->raster_layer));
    add_caption(bar, "Sample");
    self->raster_sample = GTK_DROP_DOWN(gtk_drop_down_new_from_strings((const char *[]){"0", NULL}));
    gtk_box_append(GTK_BOX(bar), GTK_WIDGET(self->raster_sample));
    self->raster_info = add_info(bar, TRUE);
    gtk_widget_set_tooltip_text(GTK_WIDGET(self->raster_info), "Scroll: zoom the neurons · Shift+scroll: zoom time · "
                                                                "drag: pan · double-click: reset · click: membrane");
    GtkWidget *reset = gtk_button_new_from_icon_name("zoom-original-symbolic");
    gtk_widget_set_tooltip_text(reset, "Reset the Zoom");
    gtk_box_append(GTK_BOX(bar), reset);
    self->raster = NC_RASTER_CHART(nc_raster_chart_new());
    g_signal_connect_swapped(reset, "clicked", G_CALLBACK(nc_raster_chart_reset_zoom), self->raster);
    g_signal_connect(self->raster, "window-changed", G_CALLBACK(on_raster_window), self);
    g_signal_connect(self->raster, "neuron-activated", G_CALLBACK(on_neuron_activated), self);
    g_signal_connect(self->raster_layer, "notify::selected", G_CALLBACK(on_raster_layer), self);
    g_signal_connect(self->raster_sample, "notify::selected", G_CALLBACK(on_raster_sample), self);
    add_page(self, "raster", "Raster", "nc-raster-symbolic", bar, GTK_WIDGET(self->raster));
}

static void update_trace_info(NcWindow *self)
{
    int spikes = nc_trace_chart_get_spike_count(self->trace);
    g_autofree char *text = spikes < 0 ? g_strdup("")
                                       : g_strdup_printf("%d spikes · click a neuron in the raster to trace it", spikes);
    gtk_label_set_text(self->trace_info, text);
}

static void on_trace_neuron(GtkSpinButton *spin, NcWindow *self)
{
    int layer = (int)gtk_drop_down_get_selected(self->trace_layer);
    int neuron = gtk_spin_button_get_value_as_int(spin);
    if (neuron != nc_trace_chart_get_neuron(self->trace))
        self->trace_chosen = TRUE;
    nc_trace_chart_set_neuron(self->trace, layer, neuron);
    update_trace_info(self);
}

static void on_most_active(GtkButton *button, NcWindow *self)
{
    self->trace_chosen = FALSE;
    nc_trace_chart_pick_active(self->trace, (int)gtk_drop_down_get_selected(self->trace_layer));
    gtk_spin_button_set_value(self->trace_neuron, nc_trace_chart_get_neuron(self->trace));
    update_trace_info(self);
}

static void build_trace_page(NcWindow *self)
{
    GtkWidget *bar = toolbar_new();
    add_caption(bar, "Layer");
    self->trace_layer = layer_dropdown(self);
    gtk_box_append(GTK_BOX(bar), GTK_WIDGET(self->trace_layer));
    /* one layer choice for the raster and the membrane */
    g_object_bind_property(self->raster_layer, "selected", self->trace_layer, "selected",
                           G_BINDING_BIDIRECTIONAL | G_BINDING_SYNC_CREATE);
    add_caption(bar, "Neuron");
    self->trace_neuron = GTK_SPIN_BUTTON(gtk_spin_button_new_with_range(0, 0, 1));
    gtk_widget_set_tooltip_text(GTK_WIDGET(self->trace_neuron), "Row of the neuron in the raster");
    g_signal_connect(self->trace_neuron, "value-changed", G_CALLBACK(on_trace_neuron), self);
    gtk_box_append(GTK_BOX(bar), GTK_WIDGET(self->trace_neuron));
    self->trace_info = add_info(bar, TRUE);
    GtkWidget *active = gtk_button_new_with_mnemonic("_Most Active");
    gtk_widget_set_tooltip_text(active, "Trace the neuron whose spike count is nearest T/2");
    g_signal_connect(active, "clicked", G_CALLBACK(on_most_active), self);
    gtk_box_append(GTK_BOX(bar), active);
    self->trace = NC_TRACE_CHART(nc_trace_chart_new());
    add_page(self, "membrane", "Membrane", "nc-membrane-symbolic", bar, GTK_WIDGET(self->trace));
}

static void build_sops_page(NcWindow *self)
{
    GtkWidget *bar = toolbar_new();
    self->sops_info = add_info(bar, TRUE);
    gtk_label_set_text(self->sops_info, "SOPs = spikes × fan-out (synapses each spike drives); ANN MACs = fan-out × "
                                        "neurons.");
    self->sops = NC_LAYER_CHART(nc_layer_chart_new(NC_LAYER_CHART_SOPS));
    add_page(self, "sops", "SOPs", "nc-sops-symbolic", bar, GTK_WIDGET(self->sops));
}

/* ---- teaching view ---- */

static void on_teach_layer(GtkDropDown *dd, GParamSpec *pspec, NcWindow *self)
{
    guint layer = gtk_drop_down_get_selected(dd);
    if (layer != GTK_INVALID_LIST_POSITION)
        nc_teach_view_set_layer(self->teach, (int)layer);
}

static void on_teach_scale(GtkRange *range, NcWindow *self)
{
    nc_teach_view_set_step(self->teach, (int)lround(gtk_range_get_value(range)));
}

static void on_teach_step(NcTeachView *view, int step, NcWindow *self)
{
    gtk_range_set_value(GTK_RANGE(self->teach_scale), step);
}

static void on_teach_play(GtkToggleButton *button, NcWindow *self)
{
    gboolean playing = gtk_toggle_button_get_active(button);
    nc_teach_view_set_playing(self->teach, playing);
    gtk_button_set_icon_name(GTK_BUTTON(button), playing ? "media-playback-pause-symbolic"
                                                         : "media-playback-start-symbolic");
}

static const double teach_speeds[] = {1, 4, 10, 25};

static void on_teach_speed(GtkDropDown *dd, GParamSpec *pspec, NcWindow *self)
{
    guint i = gtk_drop_down_get_selected(dd);
    if (i < G_N_ELEMENTS(teach_speeds))
        nc_teach_view_set_speed(self->teach, teach_speeds[i]);
}

static void build_teach_page(NcWindow *self)
{
    GtkWidget *bar = toolbar_new();
    add_caption(bar, "Layer");
    self->teach_layer = GTK_DROP_DOWN(gtk_drop_down_new_from_strings((const char *[]){NULL}));
    gtk_box_append(GTK_BOX(bar), GTK_WIDGET(self->teach_layer));
    self->teach_play = GTK_TOGGLE_BUTTON(gtk_toggle_button_new());
    gtk_button_set_icon_name(GTK_BUTTON(self->teach_play), "media-playback-start-symbolic");
    gtk_widget_set_tooltip_text(GTK_WIDGET(self->teach_play), "Play or Pause");
    gtk_box_append(GTK_BOX(bar), GTK_WIDGET(self->teach_play));
    self->teach_scale = GTK_SCALE(gtk_scale_new_with_range(GTK_ORIENTATION_HORIZONTAL, 1, 2, 1));
    gtk_scale_set_digits(self->teach_scale, 0);
    gtk_scale_set_draw_value(self->teach_scale, TRUE);
    gtk_scale_set_value_pos(self->teach_scale, GTK_POS_LEFT);
    gtk_widget_set_hexpand(GTK_WIDGET(self->teach_scale), TRUE);
    gtk_widget_set_tooltip_text(GTK_WIDGET(self->teach_scale), "Time step t");
    gtk_box_append(GTK_BOX(bar), GTK_WIDGET(self->teach_scale));
    self->teach_speed = GTK_DROP_DOWN(gtk_drop_down_new_from_strings(
        (const char *[]){"1 step/s", "4 steps/s", "10 steps/s", "25 steps/s", NULL}));
    gtk_drop_down_set_selected(self->teach_speed, 1);
    gtk_widget_set_tooltip_text(GTK_WIDGET(self->teach_speed), "Playback speed");
    gtk_box_append(GTK_BOX(bar), GTK_WIDGET(self->teach_speed));
    self->teach = NC_TEACH_VIEW(nc_teach_view_new());
    g_signal_connect(self->teach_layer, "notify::selected", G_CALLBACK(on_teach_layer), self);
    g_signal_connect(self->teach_scale, "value-changed", G_CALLBACK(on_teach_scale), self);
    g_signal_connect(self->teach, "step-changed", G_CALLBACK(on_teach_step), self);
    g_signal_connect(self->teach_play, "toggled", G_CALLBACK(on_teach_play), self);
    g_signal_connect(self->teach_speed, "notify::selected", G_CALLBACK(on_teach_speed), self);
    add_page(self, "teaching", "Teaching", "nc-teach-symbolic", bar, GTK_WIDGET(self->teach));
}

void nc_window_views_set_teach(NcWindow *self, NcTeachData *teach)
{
    nc_teach_view_set_data(self->teach, teach);
    const char **names = g_new0(const char *, (teach ? teach->n_layers : 0) + 1);
    for (int i = 0; teach && i < teach->n_layers; i++)
        names[i] = teach->layers[i].name;
    GtkStringList *list = gtk_string_list_new(names);
    gtk_drop_down_set_model(self->teach_layer, G_LIST_MODEL(list));
    g_object_unref(list);
    g_free(names);
    gtk_range_set_range(GTK_RANGE(self->teach_scale), 1, MAX(teach ? teach->T : 1, 2));
    gtk_range_set_value(GTK_RANGE(self->teach_scale), nc_teach_view_get_step(self->teach));
}

void nc_window_views_init(NcWindow *self)
{
    self->layer_names = gtk_string_list_new(NULL);
    self->sample_list = nc_sample_list_new();
    build_accuracy_page(self);
    build_rates_page(self);
    build_error_page(self);
    build_raster_page(self);
    build_trace_page(self);
    build_sops_page(self);
    build_teach_page(self);
}

/* ---- charts by name --------------------------------------------------------------------------- */

static const char *const chart_names[] = {"accuracy", "firing-rates", "calibration-error", "raster", "membrane",
                                          "sops", "teaching", NULL};

const char *const *nc_window_get_chart_names(NcWindow *self) { return chart_names; }

GtkWidget *nc_window_get_chart(NcWindow *self, const char *name)
{
    GtkWidget *charts[] = {GTK_WIDGET(self->accuracy), GTK_WIDGET(self->rates), GTK_WIDGET(self->error),
                           GTK_WIDGET(self->raster),   GTK_WIDGET(self->trace), GTK_WIDGET(self->sops),
                           GTK_WIDGET(self->teach)};
    for (guint i = 0; chart_names[i]; i++)
        if (g_strcmp0(chart_names[i], name) == 0)
            return charts[i];
    return NULL;
}

void nc_window_show_chart(NcWindow *self, const char *name) { adw_view_stack_set_visible_child_name(self->views, name); }

NcChart *nc_window_views_current_chart(NcWindow *self)
{
    GtkWidget *chart = nc_window_get_chart(self, adw_view_stack_get_visible_child_name(self->views));
    return chart ? NC_CHART(chart) : NULL;
}

/* ---- updates ------------------------------------------------------------------------------------ */

/* The layer names change only when a run of another network starts.  Both
 * dropdowns get a new list (not a splice of a shared one: GTK 4.8's dropdowns
 * re-enter each other through the selection binding while the model is
 * still announcing the change). */
static void set_layer_names(NcWindow *self, const char *const *names)
{
    GtkStringList *list = gtk_string_list_new(names);
    g_set_object(&self->layer_names, list);
    gtk_drop_down_set_model(self->raster_layer, G_LIST_MODEL(list));
    gtk_drop_down_set_model(self->trace_layer, G_LIST_MODEL(list));
    g_object_unref(list);
    gtk_drop_down_set_selected(self->raster_layer, 0);
}

static void sync_layer_names(NcWindow *self, const NcRunData *d)
{
    guint n = g_list_model_get_n_items(G_LIST_MODEL(self->layer_names));
    gboolean same = n == (guint)d->n_layers;
    for (guint i = 0; same && i < n; i++)
        same = strcmp(gtk_string_list_get_string(self->layer_names, i), d->layers[i].name) == 0;
    if (same)
        return;
    const char **names = g_new0(const char *, d->n_layers + 1);
    for (int i = 0; i < d->n_layers; i++)
        names[i] = d->layers[i].name;
    set_layer_names(self, names);
    g_free(names);
}

/* One entry per viewable sample (those past the memory budget come from the
 * spill file and say so), then "all" (the samples in memory, stacked).  A
 * list that grows keeps the chosen entry: the new entries are announced
 * alone, so the dropdown's selection and the raster's drawing stay (a list
 * rebuilt per snapshot cost the main loop time that grew with the run). */
static void sync_samples(NcWindow *self, const NcRunData *d)
{
    int samples = (int)MIN(nc_run_data_raster_samples(d), G_MAXINT - 1);
    int in_memory = d->views && d->views->n_layers ? d->views->layers[0].raster_samples : 0;
    int old = self->n_raster_samples;
    if (samples == old)
        return;
    guint chosen = gtk_drop_down_get_selected(self->raster_sample);
    gboolean was_all = old > 0 && chosen == (guint)old;
    self->n_raster_samples = samples;
    gboolean listed = gtk_drop_down_get_model(self->raster_sample) == G_LIST_MODEL(self->sample_list);
    if (nc_sample_list_set(self->sample_list, samples, in_memory) && listed && old > 0)
        return;
    if (!listed)
        gtk_drop_down_set_model(self->raster_sample, G_LIST_MODEL(self->sample_list));
    gboolean keep = samples > old && old > 0 && chosen != GTK_INVALID_LIST_POSITION;
    gtk_drop_down_set_selected(self->raster_sample, !keep ? 0 : was_all ? (guint)samples : chosen);
}

static void update_trace(NcWindow *self, NcRunData *d)
{
    int layer = (int)gtk_drop_down_get_selected(self->trace_layer);
    nc_trace_chart_set_data(self->trace, d);
    if (!self->trace_chosen)
        nc_trace_chart_pick_active(self->trace, layer);
    int n = nc_trace_chart_get_n_neurons(self->trace);
    gtk_spin_button_set_range(self->trace_neuron, 0, MAX(n - 1, 0));
    gtk_spin_button_set_value(self->trace_neuron, nc_trace_chart_get_neuron(self->trace));
    update_trace_info(self);
}

/* A loihi run's converted network: its quantisation error goes under the
 * calibration error (the engine's default options, as the job uses). */
static void update_quant(NcWindow *self, const NcRunData *d)
{
    if (!d->converted)
        return;
    const NcJobSettings *s = self->job ? nc_job_get_settings(self->job) : NULL;
    gboolean loihi = s && g_strcmp0(s->engine, "loihi") == 0;
    nc_quant_chart_set_net(self->quant, loihi ? d->converted : NULL);
    gtk_widget_set_visible(GTK_WIDGET(self->quant), loihi);
}

/* After fine-tuning, the error chart sets each layer's error before it
 * (the converted net's complete run) beside the error after it. */
static void update_error_baseline(NcWindow *self, const NcRunData *d)
{
    const NcJobSettings *s = self->job ? nc_job_get_settings(self->job) : NULL;
    g_autofree char *ft = s ? nc_job_settings_describe_finetune(s) : NULL;
    g_autofree char *after = g_strdup_printf("after: %s", ft ? ft : "fine-tuned");
    nc_layer_chart_set_baseline(self->error, d->finetuned ? d->baseline : NULL, "before: converted", after);
}

void nc_window_views_update(NcWindow *self, NcRunData *d)
{
    if (self->last_data != d) {
        nc_run_data_ref(d);
        g_clear_pointer(&self->last_data, nc_run_data_unref);
        self->last_data = d;
    }
    sync_layer_names(self, d);
    sync_samples(self, d);
    nc_accuracy_chart_update(self->accuracy, d);
    nc_layer_chart_set_data(self->rates, d);
    update_error_baseline(self, d);
    nc_layer_chart_set_data(self->error, d);
    update_quant(self, d);
    nc_layer_chart_set_data(self->sops, d);
    nc_raster_chart_set_data(self->raster, d);
    update_trace(self, d);
    nc_model_pane_update(self->model_pane, d);
}

void nc_window_views_clear(NcWindow *self)
{
    g_clear_pointer(&self->last_data, nc_run_data_unref);
    nc_layer_chart_set_data(self->rates, NULL);
    nc_layer_chart_set_baseline(self->error, NULL, NULL, NULL);
    nc_layer_chart_set_data(self->error, NULL);
    nc_model_pane_set_stages(self->model_pane, NULL, 0);
    nc_quant_chart_set_net(self->quant, NULL);
    gtk_widget_set_visible(GTK_WIDGET(self->quant), FALSE);
    nc_layer_chart_set_data(self->sops, NULL);
    nc_raster_chart_set_data(self->raster, NULL);
    nc_trace_chart_set_data(self->trace, NULL);
    nc_window_views_set_teach(self, NULL);
    set_layer_names(self, NULL);
}

/* A row of the model pane selects its layer in the raster and membrane views. */
void nc_window_views_select_node(NcWindow *self, int node)
{
    int layer = nc_run_data_find_node(self->last_data, node);
    if (layer >= 0)
        gtk_drop_down_set_selected(self->raster_layer, (guint)layer);
}

gint64 nc_window_get_raster_samples(NcWindow *self, gint64 *in_memory, gint64 *spill_bytes)
{
    const NcRunData *d = self->last_data;
    *in_memory = d && d->views && d->views->n_layers ? d->views->layers[0].raster_samples : 0;
    *spill_bytes = d && d->spill ? nc_raster_spill_bytes(d->spill) : 0;
    return nc_run_data_raster_samples(d);
}

void nc_window_show_raster_sample(NcWindow *self, int sample)
{
    if (sample >= 0 && sample < self->n_raster_samples)
        gtk_drop_down_set_selected(self->raster_sample, (guint)sample);
}
