/* nc-settings-pane.c — run settings bound to GSettings (see header). */
#include "nc-settings-pane.h"

#include <adwaita.h>

#include "../core/nc_dataset.h"
#include "../sim/nc_engine_registry.h"

struct _NcSettingsPane {
    GtkWidget parent_instance;
    GtkWidget *page;
    AdwEntryRow *dataset_row, *mean_row, *std_row;
    GtkWidget *dataset_button, *images_spin, *per_channel_switch, *levels_spin, *calib_spin, *timesteps_spin;
    GtkWidget *batch_spin, *raster_spin, *raster_samples_spin, *raster_memory_spin;
    AdwComboRow *method_row, *maxpool_row, *encoding_row;
    AdwPreferencesGroup *conversion_group, *engine_group;
    /* fine-tuning */
    AdwPreferencesGroup *finetune_group;
    GtkWidget *qcfs_epochs_spin, *bptt_epochs_spin, *train_steps_spin, *lr_spin, *train_threshold_switch;
    GtkWidget *train_batch_spin, *augment_switch, *train_images_spin, *val_images_spin;
    AdwComboRow *optimizer_row, *surrogate_row;
    GtkWidget *train_steps_row, *lr_row, *train_threshold_row, *train_batch_row, *augment_row;
    GtkWidget *train_images_row, *val_images_row;
    GtkWidget *weight_decay_row, *weight_decay_spin, *surrogate_alpha_row, *surrogate_alpha_spin;
    AdwEntryRow *horizons_row;
    GtkWidget *target_T_spin, *time_budget_spin, *bias_T_spin;
    GSettings *settings;
    GPtrArray *engine_rows;      /* AdwActionRow*, in engine table order   */
    GPtrArray *engine_checks;    /* GtkCheckButton*                           */
    gboolean engine_ok[8];
    GtkFileChooserNative *chooser;
};

G_DEFINE_FINAL_TYPE(NcSettingsPane, nc_settings_pane, GTK_TYPE_WIDGET)

/* Every engine of the table (sim/nc_engine_registry.h), compiled in or not
 * (the table keeps an entry that says why), so that the user sees why
 * one is missing. */
static guint n_engines(void) { return (guint)MIN(nc_engine_count(), 8); }
static const char *engine_name(guint i) { return nc_engine_at((int)i)->name; }

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
static const Choice optimizer_choices[] = {{"adam", "Adam"}, {"sgd", "SGD (momentum 0.9)"}, {NULL, NULL}};
static const Choice surrogate_choices[] = {{"triangle", "triangle"},
                                           {"sigmoid", "sigmoid"},
                                           {"atan", "arctangent"},
                                           {"rect", "rectangle"},
                                           {NULL, NULL}};

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
    for (guint i = 0; i < n_engines(); i++) {
        GtkWidget *row = adw_action_row_new();
        GtkWidget *check = gtk_check_button_new();
        adw_preferences_row_set_title(ADW_PREFERENCES_ROW(row), engine_name(i));
        gtk_widget_set_valign(check, GTK_ALIGN_CENTER);
        gtk_check_button_set_group(GTK_CHECK_BUTTON(check), group);
        group = GTK_CHECK_BUTTON(check);
        g_object_set_data(G_OBJECT(check), "nc-engine", (gpointer)engine_name(i));
        g_signal_connect(check, "toggled", G_CALLBACK(on_engine_toggled), self);
        adw_action_row_add_prefix(ADW_ACTION_ROW(row), check);
        adw_action_row_set_activatable_widget(ADW_ACTION_ROW(row), check);
        adw_preferences_group_add(self->engine_group, row);
        g_ptr_array_add(self->engine_rows, row);
        g_ptr_array_add(self->engine_checks, check);
    }
}

/* The GPUs the gpu engine finds here (0 without one). */
static int gpus_found(void)
{
    const nc_engine_info *gpu = nc_engine_find("gpu");
    char why[256];
    if (!gpu || !gpu->device_count || (gpu->available && !gpu->available(why, sizeof why)))
        return 0;
    return gpu->device_count();
}

/* "GPUs": how many of those found a gpu run spreads over; 1 (and nothing
 * to choose) when the machine has one or none. */
static void add_gpus_row(NcSettingsPane *self)
{
    int found = gpus_found();
    GtkWidget *row = adw_action_row_new();
    GtkWidget *spin = gtk_spin_button_new_with_range(1, MAX(found, 1), 1);
    adw_preferences_row_set_title(ADW_PREFERENCES_ROW(row), "GPUs");
    g_autofree char *subtitle =
        found > 1 ? g_strdup_printf("%d found: the test images are dealt over them and fine-tuning shares each "
                                    "batch (NCCL)", found)
                  : g_strdup(found == 1 ? "one GPU found" : "no GPU found");
    adw_action_row_set_subtitle(ADW_ACTION_ROW(row), subtitle);
    gtk_widget_set_valign(spin, GTK_ALIGN_CENTER);
    adw_action_row_add_suffix(ADW_ACTION_ROW(row), spin);
    adw_action_row_set_activatable_widget(ADW_ACTION_ROW(row), spin);
    gtk_widget_set_sensitive(row, found > 1);
    g_settings_bind(self->settings, "gpus", spin, "value", G_SETTINGS_BIND_DEFAULT);
    adw_preferences_group_add(self->engine_group, row);
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
    g_strlcpy(why, st == NC_OK ? nc_engine_find(name)->description : err.message, size);
    return st == NC_OK;
}

static void sync_engine_selection(NcSettingsPane *self)
{
    g_autofree char *current = g_settings_get_string(self->settings, "engine");
    int chosen = -1;
    for (guint i = 0; i < n_engines(); i++)
        if (strcmp(engine_name(i), current) == 0 && self->engine_ok[i])
            chosen = (int)i;
    if (chosen < 0) /* the remembered engine cannot run this net: the CPU can */
        chosen = 0;
    gtk_check_button_set_active(g_ptr_array_index(self->engine_checks, chosen), TRUE);
}

void nc_settings_pane_set_net(NcSettingsPane *self, const nc_net *net)
{
    for (guint i = 0; i < n_engines(); i++) {
        char why[NC_ERROR_MESSAGE_MAX];
        self->engine_ok[i] = check_engine(engine_name(i), net, why, sizeof why);
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
    /* fine-tuning follows a conversion */
    gtk_widget_set_sensitive(GTK_WIDGET(self->finetune_group), converts);
}

void nc_settings_pane_show_finetuning(NcSettingsPane *self)
{
    GtkWidget *group = GTK_WIDGET(self->finetune_group);
    GtkWidget *scroller = gtk_widget_get_ancestor(group, GTK_TYPE_SCROLLED_WINDOW);
    GtkWidget *content = scroller ? gtk_scrolled_window_get_child(GTK_SCROLLED_WINDOW(scroller)) : NULL;
    graphene_point_t top;
    if (!content || !gtk_widget_compute_point(group, content, &GRAPHENE_POINT_INIT(0, 0), &top))
        return;
    GtkAdjustment *adj = gtk_scrolled_window_get_vadjustment(GTK_SCROLLED_WINDOW(scroller));
    gtk_adjustment_set_value(adj, MAX(top.y - 12, 0));
}

gboolean nc_settings_pane_engine_available(NcSettingsPane *self, const char *name)
{
    for (guint i = 0; i < n_engines(); i++)
        if (strcmp(engine_name(i), name) == 0)
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

/* The loss horizons: empty = none (the loss after T steps only). */
static gboolean parse_horizons(GSettings *settings, nc_train_options *t, GError **error)
{
    g_autofree char *text = g_settings_get_string(settings, "train-horizons");
    t->n_horizons = 0;
    if (!g_strstrip(text)[0] || nc_train_horizons_parse(text, t) == 0)
        return TRUE;
    g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                "The loss horizons “%s” are not 1 to 8 whole step counts like 4,8. Fix them in Settings → "
                "Fine-tuning, or leave them empty for the loss after T steps only.",
                text);
    return FALSE;
}

/* The trainer's options (sim/nc_train.h); the job sizes the held-out set
 * and the crop padding's fill from the dataset and preprocessing. */
static gboolean read_finetune(GSettings *s, nc_pipeline_options *p, GError **error)
{
    nc_train_options *t = &p->train;
    p->calibrate_bias_T = g_settings_get_int(s, "calibrate-bias");
    p->finetune_qcfs_epochs = g_settings_get_int(s, "finetune-qcfs-epochs");
    p->finetune_bptt_epochs = g_settings_get_int(s, "finetune-bptt-epochs");
    t->T = g_settings_get_int(s, "train-timesteps");
    t->learning_rate = g_settings_get_double(s, "learning-rate");
    t->optimizer = parse_choice(s, "optimizer", optimizer_choices) == 1 ? NC_OPTIMIZER_SGD : NC_OPTIMIZER_ADAM;
    nc_surrogate_parse(surrogate_choices[parse_choice(s, "surrogate", surrogate_choices)].value, &t->surrogate);
    t->train_threshold = g_settings_get_boolean(s, "train-threshold");
    t->batch_size = g_settings_get_int(s, "train-batch-size");
    gboolean augment = g_settings_get_boolean(s, "augment");
    t->crop_padding = augment ? 2 : 0;
    t->flip = augment;
    t->train_count = g_settings_get_int(s, "train-images");
    t->val_count = g_settings_get_int(s, "val-images");
    t->weight_decay = g_settings_get_double(s, "weight-decay");
    t->surrogate_alpha = (float)g_settings_get_double(s, "surrogate-alpha");
    return parse_horizons(s, t, error);
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
    out->gpus = CLAMP(g_settings_get_int(s, "gpus"), 1, MAX(gpus_found(), 1)); /* a setting from a bigger machine */
    out->images = g_settings_get_int(s, "images");
    out->T = g_settings_get_int(s, "timesteps");
    out->batch_size = g_settings_get_int(s, "batch-size");
    out->raster_neurons = g_settings_get_int(s, "raster-neurons");
    out->raster_samples = g_settings_get_int(s, "raster-samples");
    out->raster_memory_mb = g_settings_get_int(s, "raster-memory-mb");
    out->encoding = parse_choice(s, "encoding", encoding_choices) ? NC_ENCODING_POISSON : NC_ENCODING_DIRECT;
    out->pipeline = nc_pipeline_options_default();
    nc_calib_method_parse(method_choices[parse_choice(s, "threshold-method", method_choices)].value,
                          &out->pipeline.method);
    nc_maxpool_strategy_parse(maxpool_choices[parse_choice(s, "maxpool", maxpool_choices)].value,
                              &out->pipeline.maxpool);
    out->pipeline.per_channel = g_settings_get_boolean(s, "per-channel");
    out->pipeline.levels = g_settings_get_int(s, "levels");
    out->pipeline.calib_images = g_settings_get_int(s, "calib-images");
    out->target_T = g_settings_get_int(s, "target-timesteps");
    out->time_budget_minutes = g_settings_get_double(s, "time-budget");
    if (read_finetune(s, &out->pipeline, error))
        return TRUE;
    nc_job_settings_clear(out); /* the caller gets nothing to free on failure */
    return FALSE;
}

/* ---- binding ------------------------------------------------------------------------------- */

static void on_engine_setting(GSettings *settings, const char *key, NcSettingsPane *self)
{
    sync_engine_selection(self);
}

/* The training options matter only when a stage is on; T and the surrogate
 * only for BPTT. */
static void on_epochs_setting(GSettings *settings, const char *key, NcSettingsPane *self)
{
    int qcfs = g_settings_get_int(settings, "finetune-qcfs-epochs");
    int bptt = g_settings_get_int(settings, "finetune-bptt-epochs");
    GtkWidget *rows[] = {self->lr_row, GTK_WIDGET(self->optimizer_row), self->train_threshold_row,
                         self->train_batch_row, self->augment_row, self->train_images_row, self->val_images_row,
                         self->weight_decay_row};
    for (guint i = 0; i < G_N_ELEMENTS(rows); i++)
        gtk_widget_set_sensitive(rows[i], qcfs > 0 || bptt > 0);
    GtkWidget *bptt_rows[] = {self->train_steps_row, GTK_WIDGET(self->surrogate_row), self->surrogate_alpha_row,
                              GTK_WIDGET(self->horizons_row)};
    for (guint i = 0; i < G_N_ELEMENTS(bptt_rows); i++)
        gtk_widget_set_sensitive(bptt_rows[i], bptt > 0);
}

/* The learning rate and the surrogate's α read "default" at 0 and in %g
 * otherwise (1e-4, not 0.000100). */
static gboolean on_default_output(GtkSpinButton *spin, gpointer user_data)
{
    double v = gtk_adjustment_get_value(gtk_spin_button_get_adjustment(spin));
    char text[32];
    if (v <= 0)
        g_strlcpy(text, "default", sizeof text);
    else
        g_snprintf(text, sizeof text, "%g", v);
    if (g_strcmp0(gtk_editable_get_text(GTK_EDITABLE(spin)), text) != 0)
        gtk_editable_set_text(GTK_EDITABLE(spin), text);
    return TRUE;
}

static int on_default_input(GtkSpinButton *spin, double *value, gpointer user_data)
{
    const char *text = gtk_editable_get_text(GTK_EDITABLE(spin));
    while (g_ascii_isspace(*text))
        text++;
    if (!*text || g_ascii_strncasecmp(text, "default", 7) == 0) {
        *value = 0;
        return TRUE;
    }
    char *end = NULL;
    double v = g_ascii_strtod(text, &end);
    while (end && g_ascii_isspace(*end))
        end++;
    double upper = gtk_adjustment_get_upper(gtk_spin_button_get_adjustment(spin));
    if (!end || end == text || *end || !(v >= 0 && v <= upper))
        return GTK_INPUT_ERROR;
    *value = v;
    return TRUE;
}

void nc_settings_pane_bind(NcSettingsPane *self, GSettings *settings)
{
    g_return_if_fail(self->settings == NULL);
    self->settings = g_object_ref(settings);
    /* each setting and the widget property that shows it */
    const struct {
        const char *key;
        gpointer widget;
        const char *property;
    } binds[] = {
        {"dataset", self->dataset_row, "text"},
        {"mean", self->mean_row, "text"},
        {"std", self->std_row, "text"},
        {"images", self->images_spin, "value"},
        {"per-channel", self->per_channel_switch, "active"},
        {"levels", self->levels_spin, "value"},
        {"calib-images", self->calib_spin, "value"},
        {"timesteps", self->timesteps_spin, "value"},
        {"batch-size", self->batch_spin, "value"},
        {"raster-neurons", self->raster_spin, "value"},
        {"raster-samples", self->raster_samples_spin, "value"},
        {"raster-memory-mb", self->raster_memory_spin, "value"},
        {"finetune-qcfs-epochs", self->qcfs_epochs_spin, "value"},
        {"finetune-bptt-epochs", self->bptt_epochs_spin, "value"},
        {"train-timesteps", self->train_steps_spin, "value"},
        {"learning-rate", self->lr_spin, "value"},
        {"train-threshold", self->train_threshold_switch, "active"},
        {"train-batch-size", self->train_batch_spin, "value"},
        {"augment", self->augment_switch, "active"},
        {"train-images", self->train_images_spin, "value"},
        {"val-images", self->val_images_spin, "value"},
        {"weight-decay", self->weight_decay_spin, "value"},
        {"surrogate-alpha", self->surrogate_alpha_spin, "value"},
        {"train-horizons", self->horizons_row, "text"},
        {"target-timesteps", self->target_T_spin, "value"},
        {"time-budget", self->time_budget_spin, "value"},
        {"calibrate-bias", self->bias_T_spin, "value"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(binds); i++)
        g_settings_bind(settings, binds[i].key, binds[i].widget, binds[i].property, G_SETTINGS_BIND_DEFAULT);
    bind_combo(self, "threshold-method", self->method_row, method_choices);
    bind_combo(self, "maxpool", self->maxpool_row, maxpool_choices);
    bind_combo(self, "encoding", self->encoding_row, encoding_choices);
    bind_combo(self, "optimizer", self->optimizer_row, optimizer_choices);
    bind_combo(self, "surrogate", self->surrogate_row, surrogate_choices);
    g_signal_connect_object(settings, "changed::finetune-qcfs-epochs", G_CALLBACK(on_epochs_setting), self, 0);
    g_signal_connect_object(settings, "changed::finetune-bptt-epochs", G_CALLBACK(on_epochs_setting), self, 0);
    on_epochs_setting(settings, NULL, self);
    g_signal_connect_object(settings, "changed::engine", G_CALLBACK(on_engine_setting), self, 0);
    add_gpus_row(self);
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
    CHILD(raster_spin), CHILD(raster_samples_spin), CHILD(raster_memory_spin), CHILD(method_row), CHILD(maxpool_row);
    CHILD(encoding_row), CHILD(conversion_group);
    CHILD(engine_group);
    CHILD(finetune_group), CHILD(qcfs_epochs_spin), CHILD(bptt_epochs_spin), CHILD(train_steps_spin), CHILD(lr_spin);
    CHILD(train_threshold_switch), CHILD(train_batch_spin), CHILD(augment_switch), CHILD(train_images_spin);
    CHILD(val_images_spin), CHILD(optimizer_row), CHILD(surrogate_row), CHILD(train_steps_row), CHILD(lr_row);
    CHILD(train_threshold_row), CHILD(train_batch_row), CHILD(augment_row), CHILD(train_images_row);
    CHILD(val_images_row), CHILD(weight_decay_row), CHILD(weight_decay_spin), CHILD(surrogate_alpha_row);
    CHILD(surrogate_alpha_spin), CHILD(horizons_row), CHILD(target_T_spin), CHILD(time_budget_spin);
    CHILD(bias_T_spin);
#undef CHILD
}

static void nc_settings_pane_init(NcSettingsPane *self)
{
    gtk_widget_init_template(GTK_WIDGET(self));
    self->engine_rows = g_ptr_array_new();
    self->engine_checks = g_ptr_array_new();
    add_engine_rows(self);
    g_signal_connect(self->dataset_button, "clicked", G_CALLBACK(on_dataset_button), self);
    g_signal_connect(self->lr_spin, "output", G_CALLBACK(on_default_output), NULL);
    g_signal_connect(self->lr_spin, "input", G_CALLBACK(on_default_input), NULL);
    g_signal_connect(self->surrogate_alpha_spin, "output", G_CALLBACK(on_default_output), NULL);
    g_signal_connect(self->surrogate_alpha_spin, "input", G_CALLBACK(on_default_input), NULL);
}
