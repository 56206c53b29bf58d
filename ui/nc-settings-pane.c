/* nc-settings-pane.c — run settings bound to GSettings (see header). */
#include "nc-settings-pane.h"

#include <adwaita.h>

#include "../core/nc_dataset.h"
#include "../sim/nc_engine.h"

struct _NcSettingsPane {
    GtkWidget parent_instance;
    GtkWidget *page;
    AdwEntryRow *dataset_row, *mean_row, *std_row;
    GtkWidget *dataset_button, *images_spin, *per_channel_switch, *levels_spin, *calib_spin, *timesteps_spin;
    GtkWidget *batch_spin, *raster_spin;
    AdwComboRow *method_row, *maxpool_row, *encoding_row;
    AdwPreferencesGroup *conversion_group, *engine_group;
    GSettings *settings;
    GPtrArray *engine_rows;      /* AdwActionRow*, in engine_names order   */
    GPtrArray *engine_checks;    /* GtkCheckButton*                           */
    gboolean engine_ok[8];
    GtkFileChooserNative *chooser;
};

G_DEFINE_FINAL_TYPE(NcSettingsPane, nc_settings_pane, GTK_TYPE_WIDGET)

/* Every engine the project knows, compiled in or not, so that the user sees
 * why one is missing. */
static const char *const engine_names[] = {"cpu", "gpu", "loihi"};

typedef struct {
    const char *value, *label;
} Choice;

static const Choice method_choices[] = {{"max", "max (largest activation)"},
                                        {"p99", "99th percentile"},
                                        {"p99.9", "99.9th percentile"},
                                        {"p99.99", "99.99th percentile"},
                                        {"mmse", "mmse (least error)"},
                                        {NULL, NULL}};
static const Choice maxpool_choices[] = {{"avg", "AvgPool (approximate)"},
                                         {"pre-spike", "max of currents (exact)"},
                                         {"gated", "gated by rate"},
                                         {NULL, NULL}};
static const Choice encoding_choices[] = {{"direct", "direct (analog input)"}, {"poisson", "Poisson spikes"}, {NULL, NULL}};

static void fill_combo(AdwComboRow *row, const Choice *choices)
{
    GtkStringList *list = gtk_string_list_new(NULL);
    for (int i = 0; choices[i].value; i++)
        gtk_string_list_append(list, choices[i].label);
    adw_combo_row_set_model(row, G_LIST_MODEL(list));
    g_object_unref(list);
}

/* GSettings string ↔ combo row position. */
static gboolean choice_get(GValue *value, GVariant *variant, gpointer user_data)
{
    const Choice *choices = user_data;
    const char *text = g_variant_get_string(variant, NULL);
    for (guint i = 0; choices[i].value; i++)
        if (strcmp(choices[i].value, text) == 0) {
            g_value_set_uint(value, i);
            return TRUE;
        }
    return FALSE;
}

static GVariant *choice_set(const GValue *value, const GVariantType *type, gpointer user_data)
{
    const Choice *choices = user_data;
    guint i = g_value_get_uint(value), n = 0;
    while (choices[n].value)
        n++;
    return i < n ? g_variant_new_string(choices[i].value) : NULL;
}

static void bind_combo(NcSettingsPane *self, const char *key, AdwComboRow *row, const Choice *choices)
{
    fill_combo(row, choices);
    g_settings_bind_with_mapping(self->settings, key, row, "selected", G_SETTINGS_BIND_DEFAULT, choice_get, choice_set,
                                 (gpointer)choices, NULL);
}

/* ---- engines ------------------------------------------------------------------------ */

static void on_engine_toggled(GtkCheckButton *check, NcSettingsPane *self)
{
    if (!gtk_check_button_get_active(check))
        return;
    const char *name = g_object_get_data(G_OBJECT(check), "nc-engine");
    g_settings_set_string(self->settings, "engine", name);
}

static void add_engine_rows(NcSettingsPane *self)
{
    GtkCheckButton *group = NULL;
    for (guint i = 0; i < G_N_ELEMENTS(engine_names); i++) {
        GtkWidget *row = adw_action_row_new();
        GtkWidget *check = gtk_check_button_new();
        adw_preferences_row_set_title(ADW_PREFERENCES_ROW(row), engine_names[i]);
        gtk_widget_set_valign(check, GTK_ALIGN_CENTER);
        gtk_check_button_set_group(GTK_CHECK_BUTTON(check), group);
        group = GTK_CHECK_BUTTON(check);
        g_object_set_data(G_OBJECT(check), "nc-engine", (gpointer)engine_names[i]);
        g_signal_connect(check, "toggled", G_CALLBACK(on_engine_toggled), self);
        adw_action_row_add_prefix(ADW_ACTION_ROW(row), check);
        adw_action_row_set_activatable_widget(ADW_ACTION_ROW(row), check);
        adw_preferences_group_add(self->engine_group, row);
        g_ptr_array_add(self->engine_rows, row);
        g_ptr_array_add(self->engine_checks, check);
    }
}

static const char *engine_description(const char *name)
{
    if (strcmp(name, "cpu") == 0)
        return "float32 reference (OpenBLAS)";
    if (strcmp(name, "gpu") == 0)
        return "CUDA and cuBLAS";
    return "Loihi-2-style fixed point";
}

/* Can `name` run `net`?  The reason comes from the engine itself. */
static gboolean check_engine(const char *name, const nc_net *net, char *why, size_t size)
{
    nc_engine *engine = NULL;
    nc_error err = {0};
    nc_status st = nc_engine_new(name, &engine, &err);
    if (st == NC_OK && net)
        st = nc_engine_check(engine, net, &err);
    nc_engine_free(engine);
    g_strlcpy(why, st == NC_OK ? engine_description(name) : err.message, size);
    return st == NC_OK;
}

static void sync_engine_selection(NcSettingsPane *self)
{
    g_autofree char *current = g_settings_get_string(self->settings, "engine");
    int chosen = -1;
    for (guint i = 0; i < G_N_ELEMENTS(engine_names); i++)
        if (strcmp(engine_names[i], current) == 0 && self->engine_ok[i])
            chosen = (int)i;
    if (chosen < 0) /* the remembered engine cannot run this net: the CPU can */
        chosen = 0;
    gtk_check_button_set_active(g_ptr_array_index(self->engine_checks, chosen), TRUE);
}

void nc_settings_pane_set_net(NcSettingsPane *self, const nc_net *net)
{
    for (guint i = 0; i < G_N_ELEMENTS(engine_names); i++) {
        char why[NC_ERROR_MESSAGE_MAX];
        self->engine_ok[i] = check_engine(engine_names[i], net, why, sizeof why);
        GtkWidget *row = g_ptr_array_index(self->engine_rows, i);
        adw_action_row_set_subtitle(ADW_ACTION_ROW(row), why);
        gtk_widget_set_sensitive(row, self->engine_ok[i]);
        gtk_widget_set_tooltip_text(row, why);
    }
    sync_engine_selection(self);
    gboolean converts = net == NULL || !nc_net_is_snn(net);
    gtk_widget_set_sensitive(GTK_WIDGET(self->conversion_group), converts);
    adw_preferences_group_set_description(self->conversion_group,
                                          converts ? NULL
                                                   : "This network is already a spiking network (a project file): "
                                                     "it is simulated as it is, without calibration.");
}

gboolean nc_settings_pane_engine_available(NcSettingsPane *self, const char *name)
{
    for (guint i = 0; i < G_N_ELEMENTS(engine_names); i++)
        if (strcmp(engine_names[i], name) == 0)
            return self->engine_ok[i];
    return FALSE;
}

/* ---- dataset chooser ----------------------------------------------------------------- */

static void on_dataset_chosen(GtkNativeDialog *dialog, int response, NcSettingsPane *self)
{
    if (response == GTK_RESPONSE_ACCEPT) {
        g_autoptr(GFile) file = gtk_file_chooser_get_file(GTK_FILE_CHOOSER(dialog));
        g_autofree char *path = g_file_get_path(file);
        if (path)
            g_settings_set_string(self->settings, "dataset", path);
    }
    g_clear_object(&self->chooser);
}

static void on_dataset_button(GtkButton *button, NcSettingsPane *self)
{
    GtkRoot *root = gtk_widget_get_root(GTK_WIDGET(self));
    self->chooser = gtk_file_chooser_native_new("Choose a Dataset", GTK_WINDOW(root), GTK_FILE_CHOOSER_ACTION_OPEN,
                                                "_Open", "_Cancel");
    GtkFileFilter *filter = gtk_file_filter_new();
    gtk_file_filter_set_name(filter, "Datasets (IDX, NumPy, HDF5)");
    for (const char *const *p = (const char *const[]){"*idx3-ubyte*", "*.npy", "*.h5", "*.hdf5", NULL}; *p; p++)
        gtk_file_filter_add_pattern(filter, *p);
    gtk_file_chooser_add_filter(GTK_FILE_CHOOSER(self->chooser), filter);
    g_object_unref(filter);
    g_signal_connect(self->chooser, "response", G_CALLBACK(on_dataset_chosen), self);
    gtk_native_dialog_show(GTK_NATIVE_DIALOG(self->chooser));
}

/* ---- reading ----------------------------------------------------------------------------- */

static gboolean parse_list(GSettings *settings, const char *key, const char *what, float *values, int *n,
                           GError **error)
{
    g_autofree char *text = g_settings_get_string(settings, key);
    *n = g_strstrip(text)[0] ? nc_parse_float_list(text, values, NC_MAX_CHANNELS) : 0;
    if (*n >= 0)
        return TRUE;
    g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                "The %s “%s” is not a number or a comma-separated list of numbers. Fix it in Settings → Dataset "
                "(Fashion-MNIST uses mean 0.2860 and std 0.3530).",
                what, text);
    return FALSE;
}

static int parse_choice(GSettings *settings, const char *key, const Choice *choices)
{
    g_autofree char *text = g_settings_get_string(settings, key);
    for (int i = 0; choices[i].value; i++)
        if (strcmp(choices[i].value, text) == 0)
            return i;
    return 0;
}

gboolean nc_settings_pane_read(NcSettingsPane *self, NcJobSettings *out, GError **error)
{
    GSettings *s = self->settings;
    memset(out, 0, sizeof *out);
    if (!parse_list(s, "mean", "mean", out->pp.mean, &out->pp.n_mean, error) ||
        !parse_list(s, "std", "standard deviation", out->pp.std, &out->pp.n_std, error))
        return FALSE;
    for (int c = 0; c < out->pp.n_std; c++)
        if (out->pp.std[c] <= 0) {
            g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                        "A standard deviation must be positive. Fix it in Settings → Dataset.");
            return FALSE;
        }
    out->dataset = g_settings_get_string(s, "dataset");
    out->engine = g_settings_get_string(s, "engine");
    out->images = g_settings_get_int(s, "images");
    out->T = g_settings_get_int(s, "timesteps");
    out->batch_size = g_settings_get_int(s, "batch-size");
    out->raster_neurons = g_settings_get_int(s, "raster-neurons");
    out->encoding = parse_choice(s, "encoding", encoding_choices) ? NC_ENCODING_POISSON : NC_ENCODING_DIRECT;
    out->pipeline = nc_pipeline_options_default();
    nc_calib_method_parse(method_choices[parse_choice(s, "threshold-method", method_choices)].value,
                          &out->pipeline.method);
    nc_maxpool_strategy_parse(maxpool_choices[parse_choice(s, "maxpool", maxpool_choices)].value,
                              &out->pipeline.maxpool);
    out->pipeline.per_channel = g_settings_get_boolean(s, "per-channel");
    out->pipeline.levels = g_settings_get_int(s, "levels");
    out->pipeline.calib_images = g_settings_get_int(s, "calib-images");
    return TRUE;
}

/* ---- binding ------------------------------------------------------------------------------- */

static void on_engine_setting(GSettings *settings, const char *key, NcSettingsPane *self)
{
    sync_engine_selection(self);
}

void nc_settings_pane_bind(NcSettingsPane *self, GSettings *settings)
{
    g_return_if_fail(self->settings == NULL);
    self->settings = g_object_ref(settings);
    GSettingsBindFlags flags = G_SETTINGS_BIND_DEFAULT;
    g_settings_bind(settings, "dataset", self->dataset_row, "text", flags);
    g_settings_bind(settings, "mean", self->mean_row, "text", flags);
    g_settings_bind(settings, "std", self->std_row, "text", flags);
    g_settings_bind(settings, "images", self->images_spin, "value", flags);
    g_settings_bind(settings, "per-channel", self->per_channel_switch, "active", flags);
    g_settings_bind(settings, "levels", self->levels_spin, "value", flags);
    g_settings_bind(settings, "calib-images", self->calib_spin, "value", flags);
    g_settings_bind(settings, "timesteps", self->timesteps_spin, "value", flags);
    g_settings_bind(settings, "batch-size", self->batch_spin, "value", flags);
    g_settings_bind(settings, "raster-neurons", self->raster_spin, "value", flags);
    bind_combo(self, "threshold-method", self->method_row, method_choices);
    bind_combo(self, "maxpool", self->maxpool_row, maxpool_choices);
    bind_combo(self, "encoding", self->encoding_row, encoding_choices);
    g_signal_connect_object(settings, "changed::engine", G_CALLBACK(on_engine_setting), self, 0);
    sync_engine_selection(self);
}

/* ---- object ---------------------------------------------------------------------------------- */

static void nc_settings_pane_dispose(GObject *object)
{
    NcSettingsPane *self = NC_SETTINGS_PANE(object);
    if (self->chooser)
        gtk_native_dialog_destroy(GTK_NATIVE_DIALOG(self->chooser));
    g_clear_object(&self->chooser);
    gtk_widget_dispose_template(GTK_WIDGET(self), NC_TYPE_SETTINGS_PANE);
    g_clear_object(&self->settings);
    g_clear_pointer(&self->engine_rows, g_ptr_array_unref);
    g_clear_pointer(&self->engine_checks, g_ptr_array_unref);
    G_OBJECT_CLASS(nc_settings_pane_parent_class)->dispose(object);
}

static void nc_settings_pane_class_init(NcSettingsPaneClass *klass)
{
    GtkWidgetClass *widget_class = GTK_WIDGET_CLASS(klass);
    G_OBJECT_CLASS(klass)->dispose = nc_settings_pane_dispose;
    gtk_widget_class_set_layout_manager_type(widget_class, GTK_TYPE_BIN_LAYOUT);
    gtk_widget_class_set_template_from_resource(widget_class, "/io/github/neurocuda/Workbench/nc-settings-pane.ui");
#define CHILD(name) gtk_widget_class_bind_template_child(widget_class, NcSettingsPane, name)
    CHILD(page), CHILD(dataset_row), CHILD(mean_row), CHILD(std_row), CHILD(dataset_button), CHILD(images_spin);
    CHILD(per_channel_switch), CHILD(levels_spin), CHILD(calib_spin), CHILD(timesteps_spin), CHILD(batch_spin);
    CHILD(raster_spin), CHILD(method_row), CHILD(maxpool_row), CHILD(encoding_row), CHILD(conversion_group);
    CHILD(engine_group);
#undef CHILD
}

static void nc_settings_pane_init(NcSettingsPane *self)
{
    gtk_widget_init_template(GTK_WIDGET(self));
    self->engine_rows = g_ptr_array_new();
    self->engine_checks = g_ptr_array_new();
    add_engine_rows(self);
    g_signal_connect(self->dataset_button, "clicked", G_CALLBACK(on_dataset_button), self);
}
