/* nc-window-actions.c — the window's actions (open, run, cancel, exports),
 * file choosers and recent files.  Every write goes through a function that
 * writes a temporary file and renames it.  Opening a file, running and
 * cancelling go through the window's hooks (nc-window-private.h): this file
 * calls nothing of nc-window.c or nc-window-run.c. */
#include "nc-window-private.h"

#include "../core/nc_nir.h"
#include "../core/nc_project.h"

#define MAX_RECENT 8

/* ---- file choosers ------------------------------------------------------------------------ */

typedef void (*ChosenFn)(NcWindow *self, const char *path, const char *format);

typedef struct {
    NcWindow *self;
    ChosenFn chosen;
    char *format;
} Chooser;

static void on_chooser_response(GtkNativeDialog *dialog, int response, Chooser *c)
{
    if (response == GTK_RESPONSE_ACCEPT) {
        g_autoptr(GFile) file = gtk_file_chooser_get_file(GTK_FILE_CHOOSER(dialog));
        g_autofree char *path = file ? g_file_get_path(file) : NULL;
        if (path)
            c->chosen(c->self, path, c->format);
    }
    g_object_unref(c->self);
    g_free(c->format);
    g_free(c);
    g_object_unref(dialog);
}

static void add_filter(GtkFileChooser *chooser, const char *name, const char *const *patterns)
{
    GtkFileFilter *filter = gtk_file_filter_new();
    gtk_file_filter_set_name(filter, name);
    for (; *patterns; patterns++)
        gtk_file_filter_add_pattern(filter, *patterns);
    gtk_file_chooser_add_filter(chooser, filter);
    g_object_unref(filter);
}

/* GtkFileChooserNative: the portal's chooser where there is one (GtkFileDialog
 * is GTK 4.10). */
static void choose_file(NcWindow *self, GtkFileChooserAction action, const char *title, const char *suggested,
                        const char *format, ChosenFn chosen)
{
    GtkFileChooserNative *native = gtk_file_chooser_native_new(
        title, GTK_WINDOW(self), action, action == GTK_FILE_CHOOSER_ACTION_SAVE ? "_Save" : "_Open", "_Cancel");
    GtkFileChooser *chooser = GTK_FILE_CHOOSER(native);
    gtk_native_dialog_set_modal(GTK_NATIVE_DIALOG(native), TRUE);
    if (action == GTK_FILE_CHOOSER_ACTION_OPEN) {
        add_filter(chooser, "Models and Projects", (const char *[]){"*.onnx", "*.nir", "*.ncsnn", NULL});
        add_filter(chooser, "ONNX Models", (const char *[]){"*.onnx", NULL});
        add_filter(chooser, "NIR Graphs", (const char *[]){"*.nir", NULL});
        add_filter(chooser, "NeuroCUDA Projects", (const char *[]){"*.ncsnn", NULL});
    } else {
        gtk_file_chooser_set_current_name(chooser, suggested);
    }
    Chooser *c = g_new0(Chooser, 1);
    c->self = g_object_ref(self), c->chosen = chosen, c->format = g_strdup(format);
    g_signal_connect(native, "response", G_CALLBACK(on_chooser_response), c);
    gtk_native_dialog_show(GTK_NATIVE_DIALOG(native));
}

/* "fmnist_cnn" from the open model's path, for suggested file names. */
static char *model_stem(NcWindow *self)
{
    g_autofree char *base = g_path_get_basename(self->model ? self->model->path : "model");
    char *dot = strrchr(base, '.');
    if (dot)
        *dot = '\0';
    return g_strdup(base);
}

/* ---- exports ---------------------------------------------------------------------------------- */

static void report_saved(NcWindow *self, gboolean ok, const char *path, GError *error, const char *heading)
{
    if (ok) {
        g_autofree char *base = g_path_get_basename(path);
        g_autofree char *text = g_strdup_printf("Saved %s", base);
        nc_window_toast(self, text);
    } else {
        nc_window_show_error(self, heading, error->message);
    }
}

static void export_chart_to(NcWindow *self, const char *path, const char *format)
{
    g_autoptr(GError) error = NULL;
    NcChart *chart = nc_window_views_current_chart(self);
    gboolean ok = chart && nc_chart_export(chart, path, 1200, 700, &error);
    if (!chart)
        g_set_error(&error, G_IO_ERROR, G_IO_ERROR_FAILED, "Choose a chart first.");
    report_saved(self, ok, path, error, "Cannot Export the Chart");
}

gboolean nc_window_save_recording(NcWindow *self, const char *path, GError **error)
{
    nc_error err = {0};
    const nc_record *rec = self->last_job ? nc_job_get_record(self->last_job) : NULL;
    if (!rec) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED, "There is no recording yet: run a simulation first.");
        return FALSE;
    }
    if (nc_record_save(rec, path, &err) != NC_OK) {
        g_set_error(error, NC_JOB_ERROR, err.code, "%s", err.message);
        return FALSE;
    }
    return TRUE;
}

/* A metric the project does not hold yet: the runner's rows (the converted
 * net's "ann_accuracy") win over the shown run's summary. */
static void add_metric(nc_project *p, const char *key, double value)
{
    double held;
    if (!nc_project_get_metric(p, key, &held))
        nc_project_set_metric(p, key, value, NULL);
}

/* The shown run's summary. */
static void add_metrics(nc_project *p, const nc_record *rec)
{
    if (!rec || nc_record_samples(rec) == 0)
        return;
    add_metric(p, "ann_accuracy", nc_record_ann_accuracy(rec));
    add_metric(p, "qcfs_accuracy", nc_record_qcfs_accuracy(rec));
    add_metric(p, "snn_accuracy", nc_record_accuracy(rec, nc_record_T(rec)));
    add_metric(p, "snn_T", nc_record_T(rec));
}

gboolean nc_window_save_project(NcWindow *self, const char *path, GError **error)
{
    NcJob *job = self->last_job;
    nc_project *p = NULL;
    nc_error err = {0};
    nc_status st = nc_job_make_project(job, &p, &err);
    if (st == NC_OK) {
        add_metrics(p, nc_job_get_record(job));
        st = nc_project_save(p, path, &err);
    }
    nc_project_free(p);
    if (st != NC_OK)
        g_set_error(error, NC_JOB_ERROR, st, "%s", err.message);
    return st == NC_OK;
}

gboolean nc_window_export_nir(NcWindow *self, const char *path, int *differences, GError **error)
{
    const nc_net *net = self->last_job ? nc_job_get_net(self->last_job) : NULL;
    if (!net) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED, "Convert the model first (Convert & Run); NIR holds the "
                                                          "spiking network.");
        return FALSE;
    }
    /* MaxPool strategies NIR cannot say are written as average pools and
     * listed as differences, so that other tools can still read the file */
    nc_nir_export_options opts = {.allow_approx = 1, .source = nc_job_get_source_path(self->last_job)};
    nc_nir_notes notes = {0};
    nc_error err = {0};
    nc_status st = nc_nir_export(net, path, &opts, &notes, &err);
    *differences = nc_nir_notes_count(&notes, NC_NIR_NOTE_DIFFERENCE);
    nc_nir_notes_clear(&notes);
    if (st != NC_OK)
        g_set_error(error, NC_JOB_ERROR, st, "%s", err.message);
    return st == NC_OK;
}

static void export_nir_to(NcWindow *self, const char *path, const char *format)
{
    g_autoptr(GError) error = NULL;
    int differences = 0;
    if (!nc_window_export_nir(self, path, &differences, &error)) {
        nc_window_show_error(self, "Cannot Export to NIR", error->message);
        return;
    }
    g_autofree char *base = g_path_get_basename(path);
    g_autofree char *text = differences ? g_strdup_printf("Saved %s; %d parts read differently by other NIR tools",
                                                          base, differences)
                                        : g_strdup_printf("Saved %s", base);
    nc_window_toast(self, text);
}

static void save_recording_to(NcWindow *self, const char *path, const char *format)
{
    g_autoptr(GError) error = NULL;
    report_saved(self, nc_window_save_recording(self, path, &error), path, error, "Cannot Save the Recording");
}

static void save_project_to(NcWindow *self, const char *path, const char *format)
{
    g_autoptr(GError) error = NULL;
    report_saved(self, nc_window_save_project(self, path, &error), path, error, "Cannot Save the Project");
}

static void open_chosen(NcWindow *self, const char *path, const char *format)
{
    g_autoptr(GFile) file = g_file_new_for_path(path);
    self->hooks.open(self, file);
}

/* ---- action handlers ------------------------------------------------------------------------------ */

static void action_open(GSimpleAction *a, GVariant *p, gpointer user_data)
{
    choose_file(user_data, GTK_FILE_CHOOSER_ACTION_OPEN, "Open a Model", NULL, NULL, open_chosen);
}

static void action_open_recent(GSimpleAction *a, GVariant *p, gpointer user_data)
{
    open_chosen(user_data, g_variant_get_string(p, NULL), NULL);
}

static void action_run(GSimpleAction *a, GVariant *p, gpointer user_data)
{
    NcWindow *self = user_data;
    self->hooks.run_start(self);
}

static void action_cancel(GSimpleAction *a, GVariant *p, gpointer user_data)
{
    NcWindow *self = user_data;
    self->hooks.run_cancel(self);
}

static void action_export_chart(GSimpleAction *a, GVariant *p, gpointer user_data)
{
    NcWindow *self = user_data;
    const char *format = g_variant_get_string(p, NULL);
    NcChart *chart = nc_window_views_current_chart(self);
    g_autofree char *stem = model_stem(self);
    g_autofree char *name = g_strdup_printf("%s-%s.%s", stem, chart ? nc_chart_get_name(chart) : "chart", format);
    choose_file(self, GTK_FILE_CHOOSER_ACTION_SAVE, "Export the Chart", name, format, export_chart_to);
}

static void action_export_recording(GSimpleAction *a, GVariant *p, gpointer user_data)
{
    g_autofree char *stem = model_stem(user_data);
    g_autofree char *name = g_strdup_printf("%s-recording.h5", stem);
    choose_file(user_data, GTK_FILE_CHOOSER_ACTION_SAVE, "Export the Recording", name, "h5", save_recording_to);
}

static void action_save_project(GSimpleAction *a, GVariant *p, gpointer user_data)
{
    g_autofree char *stem = model_stem(user_data);
    g_autofree char *name = g_strdup_printf("%s.ncsnn", stem);
    choose_file(user_data, GTK_FILE_CHOOSER_ACTION_SAVE, "Save the Project", name, "ncsnn", save_project_to);
}

static void action_export_nir(GSimpleAction *a, GVariant *p, gpointer user_data)
{
    g_autofree char *stem = model_stem(user_data);
    g_autofree char *name = g_strdup_printf("%s.nir", stem);
    choose_file(user_data, GTK_FILE_CHOOSER_ACTION_SAVE, "Export the Network to NIR", name, "nir", export_nir_to);
}

static void action_clear_runs(GSimpleAction *a, GVariant *p, gpointer user_data)
{
    NcWindow *self = user_data;
    nc_accuracy_chart_clear_history(self->accuracy);
}

static void action_show_view(GSimpleAction *a, GVariant *p, gpointer user_data)
{
    NcWindow *self = user_data;
    adw_view_stack_set_visible_child_name(self->views, g_variant_get_string(p, NULL));
}

static void action_show_side(GSimpleAction *a, GVariant *p, gpointer user_data)
{
    NcWindow *self = user_data;
    adw_view_stack_set_visible_child_name(self->side_stack, g_variant_get_string(p, NULL));
}

static const GActionEntry entries[] = {
    {"open", action_open},
    {"open-recent", action_open_recent, "s"},
    {"run", action_run},
    {"cancel", action_cancel},
    {"export-chart", action_export_chart, "s"},
    {"export-recording", action_export_recording},
    {"save-project", action_save_project},
    {"export-nir", action_export_nir},
    {"clear-runs", action_clear_runs},
    {"show-view", action_show_view, "s"},
    {"show-side", action_show_side, "s"},
};

void nc_window_actions_init(NcWindow *self)
{
    g_action_map_add_action_entries(G_ACTION_MAP(self), entries, G_N_ELEMENTS(entries), self);
}

static void enable(NcWindow *self, const char *name, gboolean enabled)
{
    GAction *action = g_action_map_lookup_action(G_ACTION_MAP(self), name);
    g_simple_action_set_enabled(G_SIMPLE_ACTION(action), enabled);
}

void nc_window_actions_update(NcWindow *self)
{
    gboolean busy = self->job != NULL || self->load_cancellable != NULL;
    gboolean recorded = self->last_job && nc_job_get_record(self->last_job);
    enable(self, "run", self->model && !busy);
    enable(self, "cancel", self->job != NULL);
    enable(self, "export-chart", self->model != NULL);
    enable(self, "export-recording", recorded && !self->job);
    enable(self, "save-project", recorded && !self->job);
    enable(self, "export-nir", recorded && !self->job);
}

/* ---- recent files ----------------------------------------------------------------------------------- */

void nc_window_recent_add(NcWindow *self, const char *path)
{
    g_auto(GStrv) old = g_settings_get_strv(self->settings, "recent-files");
    GPtrArray *list = g_ptr_array_new();
    g_ptr_array_add(list, (gpointer)path);
    for (guint i = 0; old[i] && list->len < MAX_RECENT; i++)
        if (strcmp(old[i], path) != 0)
            g_ptr_array_add(list, old[i]);
    g_ptr_array_add(list, NULL);
    g_settings_set_strv(self->settings, "recent-files", (const char *const *)list->pdata);
    g_ptr_array_free(list, TRUE);
}

void nc_window_recent_rebuild(NcWindow *self)
{
    g_auto(GStrv) paths = g_settings_get_strv(self->settings, "recent-files");
    g_menu_remove_all(self->recent_menu);
    for (guint i = 0; paths[i]; i++) {
        g_autofree char *base = g_path_get_basename(paths[i]), *dir = g_path_get_dirname(paths[i]);
        g_autofree char *text = g_strdup_printf("%s  (%s)", base, dir);
        /* menu labels take mnemonics: "fmnist_cnn" must not underline 'c' */
        g_auto(GStrv) parts = g_strsplit(text, "_", -1);
        g_autofree char *label = g_strjoinv("__", parts);
        GMenuItem *item = g_menu_item_new(label, NULL);
        g_menu_item_set_action_and_target_value(item, "win.open-recent", g_variant_new_string(paths[i]));
        g_menu_append_item(self->recent_menu, item);
        g_object_unref(item);
    }
}
