/* nc-window.c — the workbench window: type, template, opening models, drag
 * and drop, closing (see nc-window-private.h for the other parts). */
#include "nc-data-dir.h"
#include "nc-paint-memory.h"
#include "nc-window-private.h"

#include <glib/gstdio.h>

#include "nc_config.h"

G_DEFINE_FINAL_TYPE(NcWindow, nc_window, ADW_TYPE_APPLICATION_WINDOW)

/* ---- opening models ------------------------------------------------------------------- */

static void show_model(NcWindow *self)
{
    g_autofree char *base = g_path_get_basename(self->model->path);
    g_autofree char *subtitle = g_strdup_printf("%s · %s", nc_net_is_snn(self->model->net) ? "spiking network, ready to run"
                                                                                           : "ANN, ready to convert",
                                                self->model->path);
    adw_window_title_set_title(self->window_title, base);
    adw_window_title_set_subtitle(self->window_title, subtitle);
    nc_model_pane_set_net(self->model_pane, self->model->net);
    nc_settings_pane_set_net(self->settings_pane, self->model->net);
    nc_window_views_clear(self);
    gtk_stack_set_visible_child_name(self->main_stack, "work");
    gtk_label_set_text(self->status_label, "Ready: press Convert & Run (Ctrl+R)");
}

/* A project stores its preprocessing; the settings follow it. */
static void apply_preprocessing(NcWindow *self, const nc_preprocess *pp)
{
    GString *mean = g_string_new(NULL), *std = g_string_new(NULL);
    for (int c = 0; c < pp->n_mean; c++)
        g_string_append_printf(mean, "%s%.4f", c ? "," : "", pp->mean[c]);
    for (int c = 0; c < pp->n_std; c++)
        g_string_append_printf(std, "%s%.4f", c ? "," : "", pp->std[c]);
    g_settings_set_string(self->settings, "mean", mean->str);
    g_settings_set_string(self->settings, "std", std->str);
    g_string_free(mean, TRUE), g_string_free(std, TRUE);
}

static void on_model_loaded(GObject *source, GAsyncResult *result, gpointer user_data)
{
    g_autoptr(NcWindow) self = user_data;
    g_autoptr(GError) error = NULL;
    NcModelFile *file = nc_model_file_load_finish(result, &error);
    gtk_spinner_stop(self->loading_spinner);
    g_clear_object(&self->load_cancellable);
    if (!file) {
        if (g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
            return;
        gtk_stack_set_visible_child_name(self->main_stack, self->model ? "work" : "empty");
        g_free(self->last_error);
        self->last_error = g_strdup(error->message);
        nc_window_show_error(self, "Cannot Open the Model", error->message);
        nc_window_actions_update(self);
        return;
    }
    nc_model_file_free(self->model);
    self->model = file;
    if (file->has_pp)
        apply_preprocessing(self, &file->pp);
    nc_window_recent_add(self, file->path);
    show_model(self);
    nc_window_actions_update(self);
}

void nc_window_open(NcWindow *self, GFile *file)
{
    g_return_if_fail(NC_IS_WINDOW(self));
    g_autofree char *path = g_file_get_path(file);
    if (!path) {
        nc_window_show_error(self, "Cannot Open the Model", "Only local files can be opened; copy the model to a "
                                                            "folder on this computer first.");
        return;
    }
    nc_window_run_detach(self);
    if (self->load_cancellable)
        g_cancellable_cancel(self->load_cancellable);
    g_clear_object(&self->load_cancellable);
    self->load_cancellable = g_cancellable_new();
    g_autofree char *base = g_path_get_basename(path);
    g_autofree char *title = g_strdup_printf("Opening %s…", base);
    adw_status_page_set_title(self->loading_page, title);
    gtk_stack_set_visible_child_name(self->main_stack, "loading");
    gtk_spinner_start(self->loading_spinner);
    nc_model_file_load_async(path, self->load_cancellable, on_model_loaded, g_object_ref(self));
    nc_window_actions_update(self);
}

/* The bundled model: installed data dir first, then the source tree; the
 * small test model stands in while the bundled one is not in the tree. */
/* The bundled model where the data folder is (nc-data-dir.h: installed,
 * moved, unpacked or the build tree), else a small fixture of the source tree. */
static char *find_default_model(void)
{
    char *path = nc_data_dir_find("models/fmnist_cnn.onnx");
    if (!path && g_file_test(NC_SOURCE_DIR "/tests/fixtures/models/cnn_maxpool.onnx", G_FILE_TEST_IS_REGULAR))
        path = g_strdup(NC_SOURCE_DIR "/tests/fixtures/models/cnn_maxpool.onnx");
    return path;
}

void nc_window_open_default(NcWindow *self)
{
    g_autofree char *path = find_default_model();
    if (!path) {
        gtk_stack_set_visible_child_name(self->main_stack, "empty");
        return;
    }
    /* the bundled model was trained on Fashion-MNIST with this preprocessing */
    g_settings_set_string(self->settings, "dataset", "fashion-mnist");
    g_settings_set_string(self->settings, "mean", "0.2860");
    g_settings_set_string(self->settings, "std", "0.3530");
    g_autoptr(GFile) file = g_file_new_for_path(path);
    nc_window_open(self, file);
}

/* ---- drag and drop -------------------------------------------------------------------------- */

static gboolean on_drop(GtkDropTarget *target, const GValue *value, double x, double y, NcWindow *self)
{
    if (!G_VALUE_HOLDS(value, GDK_TYPE_FILE_LIST))
        return FALSE;
    GSList *files = g_value_get_boxed(value);
    for (GSList *l = files; l; l = l->next) {
        g_autofree char *path = g_file_get_path(l->data);
        if (path && nc_model_file_is_supported(path)) {
            nc_window_open(self, l->data);
            return TRUE;
        }
    }
    nc_window_show_error(self, "Cannot Open the Dropped File",
                         "Drop an ONNX model (.onnx), a NIR graph (.nir) or a NeuroCUDA project (.ncsnn).");
    return FALSE;
}

static void setup_drop(NcWindow *self)
{
    GtkDropTarget *target = gtk_drop_target_new(GDK_TYPE_FILE_LIST, GDK_ACTION_COPY);
    g_signal_connect(target, "drop", G_CALLBACK(on_drop), self);
    gtk_widget_add_controller(GTK_WIDGET(self), GTK_EVENT_CONTROLLER(target));
}

/* ---- size and closing ----------------------------------------------------------------------------- */

static void restore_size(NcWindow *self)
{
    /* the .ui position is lost when the paned is first allocated on 4.8 */
    gtk_paned_set_position(self->paned, g_settings_get_int(self->settings, "sidebar-width"));
    gtk_window_set_default_size(GTK_WINDOW(self), g_settings_get_int(self->settings, "window-width"),
                                g_settings_get_int(self->settings, "window-height"));
    if (g_settings_get_boolean(self->settings, "window-maximized"))
        gtk_window_maximize(GTK_WINDOW(self));
}

static void save_size(NcWindow *self)
{
    int w, h;
    gboolean maximized = gtk_window_is_maximized(GTK_WINDOW(self));
    g_settings_set_int(self->settings, "sidebar-width", CLAMP(gtk_paned_get_position(self->paned), 300, 1200));
    g_settings_set_boolean(self->settings, "window-maximized", maximized);
    if (maximized)
        return;
    gtk_window_get_default_size(GTK_WINDOW(self), &w, &h);
    if (w > 0 && h > 0) {
        g_settings_set_int(self->settings, "window-width", MAX(w, 360));
        g_settings_set_int(self->settings, "window-height", MAX(h, 300));
    }
}

/* Closing during a run cancels it and hides the window; the job's finish
 * callback destroys it once the worker has stopped (it still reads the net
 * and writes the record until then). */
static gboolean nc_window_close_request(GtkWindow *window)
{
    NcWindow *self = NC_WINDOW(window);
    save_size(self);
    if (self->load_cancellable)
        g_cancellable_cancel(self->load_cancellable);
    if (self->job) {
        self->close_after_job = TRUE;
        nc_window_run_cancel(self);
        gtk_widget_set_visible(GTK_WIDGET(self), FALSE);
        return TRUE;
    }
    return GTK_WINDOW_CLASS(nc_window_parent_class)->close_request(window);
}

/* ---- screenshot ------------------------------------------------------------------------------------- */

gboolean nc_window_save_screenshot(NcWindow *self, const char *path, GError **error)
{
    GtkWidget *widget = GTK_WIDGET(self);
    int w = gtk_widget_get_width(widget), h = gtk_widget_get_height(widget);
    GskRenderer *renderer = gtk_native_get_renderer(GTK_NATIVE(self));
    /* not realized or not laid out yet: there is nothing to render with */
    if (!renderer || w <= 0 || h <= 0 || !gtk_widget_get_mapped(widget)) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED, "the window has not been drawn yet");
        return FALSE;
    }
    GdkPaintable *paintable = gtk_widget_paintable_new(widget);
    GtkSnapshot *snapshot = gtk_snapshot_new();
    gdk_paintable_snapshot(paintable, snapshot, w, h);
    GskRenderNode *node = gtk_snapshot_free_to_node(snapshot);
    g_object_unref(paintable);
    if (!node) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED, "the window has not been drawn yet");
        return FALSE;
    }
    GdkTexture *texture = gsk_renderer_render_texture(renderer, node, &GRAPHENE_RECT_INIT(0, 0, w, h));
    gsk_render_node_unref(node);
    if (!texture) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED, "the renderer gave no image");
        return FALSE;
    }
    g_autofree char *tmp = g_strdup_printf("%s.tmp", path);
    gboolean ok = gdk_texture_save_to_png(texture, tmp) && g_rename(tmp, path) == 0;
    g_object_unref(texture);
    if (!ok) {
        g_unlink(tmp);
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED, "cannot write %s", path);
    }
    return ok;
}

/* ---- state --------------------------------------------------------------------------------------------- */

gboolean nc_window_has_model(NcWindow *self) { return self->model != NULL; }

char *nc_window_describe_model(NcWindow *self)
{
    if (!self->model)
        return NULL;
    const nc_net *net = self->model->net;
    const nc_node *in = &net->nodes[net->input];
    GString *shape = g_string_new(NULL);
    for (int d = 0; d < in->ndim; d++)
        g_string_append_printf(shape, "%s%" G_GINT64_FORMAT, d ? "x" : "", in->shape[d]);
    char *text = g_strdup_printf("%s: %s, input %s, %" G_GINT64_FORMAT " classes, %d nodes", self->model->path,
                                 nc_net_is_snn(net) ? "spiking network" : "ANN", shape->str,
                                 nc_node_numel(&net->nodes[net->output]), net->n_nodes);
    g_string_free(shape, TRUE);
    return text;
}
gboolean nc_window_is_loading(NcWindow *self) { return self->load_cancellable != NULL; }
gboolean nc_window_is_running(NcWindow *self) { return self->job != NULL; }
NcRunOutcome nc_window_get_outcome(NcWindow *self) { return self->outcome; }
guint nc_window_get_runs_finished(NcWindow *self) { return self->runs_finished; }
guint nc_window_get_live_updates(NcWindow *self) { return self->live_updates; }
const char *nc_window_get_last_error(NcWindow *self) { return self->last_error; }
const char *nc_window_get_run_stage(NcWindow *self) { return self->run_stage; }
GtkWidget *nc_window_get_model_pane(NcWindow *self) { return GTK_WIDGET(self->model_pane); }
GtkWidget *nc_window_get_settings_pane(NcWindow *self) { return GTK_WIDGET(self->settings_pane); }
const char *nc_window_get_status(NcWindow *self) { return gtk_label_get_text(self->status_label); }

gboolean nc_window_get_train_progress(NcWindow *self, int *epoch, gint64 *batch, gint64 *batches)
{
    if (!self->has_train)
        return FALSE;
    *epoch = self->train_progress.epoch, *batch = self->train_progress.batch;
    *batches = self->train_progress.batches;
    return TRUE;
}

/* ---- object ----------------------------------------------------------------------------------------------- */

static void on_node_selected(NcModelPane *pane, int node, NcWindow *self) { nc_window_views_select_node(self, node); }

static void nc_window_dispose(GObject *object)
{
    NcWindow *self = NC_WINDOW(object);
    if (self->load_cancellable)
        g_cancellable_cancel(self->load_cancellable);
    g_clear_object(&self->load_cancellable);
    nc_window_run_detach(self);
    g_clear_weak_pointer(&self->toast);
    gtk_widget_dispose_template(GTK_WIDGET(self), NC_TYPE_WINDOW);
    G_OBJECT_CLASS(nc_window_parent_class)->dispose(object);
}

static void nc_window_finalize(GObject *object)
{
    NcWindow *self = NC_WINDOW(object);
    nc_model_file_free(self->model);
    g_clear_object(&self->last_job);
    g_clear_pointer(&self->last_data, nc_run_data_unref);
    g_clear_object(&self->settings);
    g_clear_object(&self->recent_menu);
    g_clear_object(&self->layer_names);
    g_clear_object(&self->sample_list);
    g_free(self->last_error);
    g_free(self->before_label);
    g_free(self->after_label);
    G_OBJECT_CLASS(nc_window_parent_class)->finalize(object);
}

static void nc_window_class_init(NcWindowClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS(klass);
    GtkWidgetClass *widget_class = GTK_WIDGET_CLASS(klass);
    object_class->dispose = nc_window_dispose;
    object_class->finalize = nc_window_finalize;
    GTK_WINDOW_CLASS(klass)->close_request = nc_window_close_request;
    g_type_ensure(NC_TYPE_MODEL_PANE);
    g_type_ensure(NC_TYPE_SETTINGS_PANE);
    gtk_widget_class_set_template_from_resource(widget_class, "/io/github/neurocuda/Workbench/nc-window.ui");
#define CHILD(name) gtk_widget_class_bind_template_child(widget_class, NcWindow, name)
    CHILD(toast_overlay), CHILD(open_button), CHILD(window_title), CHILD(run_button), CHILD(export_button);
    CHILD(main_stack), CHILD(paned), CHILD(loading_page), CHILD(loading_spinner), CHILD(side_stack), CHILD(views);
    CHILD(model_pane), CHILD(settings_pane), CHILD(status_label), CHILD(eta_label), CHILD(progress_bar);
    CHILD(cancel_button);
#undef CHILD
}

/* Once the window has its renderer: keep the memory of its repaints touched
 * (GTK's cairo renderer only; nc-paint-memory.h). */
static void on_realize(GtkWidget *widget) { nc_paint_memory_prepare(widget); }

static void nc_window_init(NcWindow *self)
{
    gtk_widget_init_template(GTK_WIDGET(self));
    self->hooks = (NcWindowHooks){.open = nc_window_open, .run_start = nc_window_run_start,
                                  .run_cancel = nc_window_run_cancel, .state_changed = nc_window_actions_update};
    self->recent_menu = g_menu_new();
    adw_split_button_set_menu_model(self->open_button, G_MENU_MODEL(self->recent_menu));
    nc_window_views_init(self);
    nc_window_actions_init(self);
    setup_drop(self);
    g_signal_connect(self, "realize", G_CALLBACK(on_realize), NULL);
    g_signal_connect(self->model_pane, "node-selected", G_CALLBACK(on_node_selected), self);
    gtk_stack_set_visible_child_name(self->main_stack, "empty");
}

NcWindow *nc_window_new(GtkApplication *app, GSettings *settings)
{
    NcWindow *self = g_object_new(NC_TYPE_WINDOW, "application", app, NULL);
    self->settings = g_object_ref(settings);
    nc_settings_pane_bind(self->settings_pane, settings);
    nc_settings_pane_set_net(self->settings_pane, NULL);
    restore_size(self);
    nc_window_recent_rebuild(self);
    g_signal_connect_object(settings, "changed::recent-files", G_CALLBACK(nc_window_recent_rebuild), self,
                            G_CONNECT_SWAPPED);
    nc_window_actions_update(self);
    return self;
}
