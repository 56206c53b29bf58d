/* nc-application.c — the workbench application (see header). */
#include "nc-application.h"

#include <stdio.h>

#include "nc-data-dir.h"
#include "nc-frame-bench.h"
#include "nc-window.h"
#include "nc_config.h"

struct _NcApplication {
    AdwApplication parent_instance;
    GSettings *settings;
    gboolean print_loaded;   /* --print-loaded                          */
    int bench_seconds;       /* --bench-frames SECONDS, 0 when not asked */
    char *bench_screenshots; /* --bench-screenshots DIR, or NULL         */
    int exit_status;
};

G_DEFINE_FINAL_TYPE(NcApplication, nc_application, ADW_TYPE_APPLICATION)

GSettings *nc_application_get_settings(NcApplication *self) { return self->settings; }
int nc_application_get_exit_status(NcApplication *self) { return self->exit_status; }

/* ---- settings ------------------------------------------------------------------------- */

/* The installed schema, or the one beside a relocated install, or the one
 * compiled in the build tree, so that the workbench also runs from the build
 * directory without installing (nc-data-dir.h). */
static GSettings *make_settings(GError **error)
{
    g_autoptr(GSettingsSchemaSource) source = nc_data_dir_schema_source(NC_APP_ID);
    g_autoptr(GSettingsSchema) schema = source ? g_settings_schema_source_lookup(source, NC_APP_ID, TRUE) : NULL;
    if (!schema) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND,
                    "the GSettings schema %s is not installed; run `meson install` or start the workbench from "
                    "its build directory",
                    NC_APP_ID);
        return NULL;
    }
    return g_settings_new_full(schema, NULL, NULL);
}

static gboolean style_get(GValue *value, GVariant *variant, gpointer user_data)
{
    const char *s = g_variant_get_string(variant, NULL);
    g_value_set_enum(value, strcmp(s, "dark") == 0    ? ADW_COLOR_SCHEME_FORCE_DARK
                            : strcmp(s, "light") == 0 ? ADW_COLOR_SCHEME_FORCE_LIGHT
                                                      : ADW_COLOR_SCHEME_DEFAULT);
    return TRUE;
}

static GVariant *style_set(const GValue *value, const GVariantType *type, gpointer user_data)
{
    AdwColorScheme scheme = g_value_get_enum(value);
    return g_variant_new_string(scheme == ADW_COLOR_SCHEME_FORCE_DARK    ? "dark"
                                : scheme == ADW_COLOR_SCHEME_FORCE_LIGHT ? "light"
                                                                         : "follow");
}

/* ---- actions ------------------------------------------------------------------------------ */

static void action_about(GSimpleAction *a, GVariant *p, gpointer user_data)
{
    GtkWindow *parent = gtk_application_get_active_window(GTK_APPLICATION(user_data));
    g_autofree char *debug = g_strdup_printf("GTK %u.%u.%u (built against %d.%d.%d)\nlibadwaita %u.%u.%u\nCUDA engine: %s",
                                             gtk_get_major_version(), gtk_get_minor_version(), gtk_get_micro_version(),
                                             GTK_MAJOR_VERSION, GTK_MINOR_VERSION, GTK_MICRO_VERSION,
                                             adw_get_major_version(), adw_get_minor_version(), adw_get_micro_version(),
                                             NC_HAVE_CUDA ? "compiled in" : "not in this build");
    adw_show_about_window(parent, "application-name", "NeuroCUDA Workbench", "application-icon", NC_APP_ID,
                          "version", NC_VERSION, "developer-name", "The NeuroCUDA Workbench authors",
                          "license-type", GTK_LICENSE_GPL_3_0, "debug-info", debug, "comments",
                          "Converts trained networks into spiking neural networks of integrate-and-fire neurons, "
                          "simulates them and shows what the spikes do while it runs.",
                          NULL);
}

/* Quitting closes each window, so that a running job is cancelled and
 * waited for (nc_window_close_request) instead of killed mid-batch. */
static void action_quit(GSimpleAction *a, GVariant *p, gpointer user_data)
{
    GList *windows = g_list_copy(gtk_application_get_windows(GTK_APPLICATION(user_data)));
    for (GList *l = windows; l; l = l->next)
        gtk_window_close(l->data);
    g_list_free(windows);
}

static const GActionEntry app_entries[] = {
    {"about", action_about},
    {"quit", action_quit},
};

static void set_accels(GtkApplication *app)
{
    static const struct {
        const char *action;
        const char *accels[3];
    } accels[] = {
        {"win.open", {"<Control>o", NULL}},
        {"win.run", {"<Control>r", "F5", NULL}},
        {"win.cancel", {"Escape", NULL}},
        {"win.save-project", {"<Control>s", NULL}},
        {"win.export-recording", {"<Control><Shift>s", NULL}},
        {"win.export-chart::svg", {"<Control>e", NULL}},
        {"win.show-view::accuracy", {"<Alt>1", NULL}},
        {"win.show-view::firing-rates", {"<Alt>2", NULL}},
        {"win.show-view::calibration-error", {"<Alt>3", NULL}},
        {"win.show-view::raster", {"<Alt>4", NULL}},
        {"win.show-view::membrane", {"<Alt>5", NULL}},
        {"win.show-view::sops", {"<Alt>6", NULL}},
        {"win.show-view::teaching", {"<Alt>7", NULL}},
        {"win.show-side::model", {"<Control>1", NULL}},
        {"win.show-side::settings", {"<Control>2", NULL}},
        {"window.close", {"<Control>w", NULL}},
        {"app.quit", {"<Control>q", NULL}},
    };
    for (guint i = 0; i < G_N_ELEMENTS(accels); i++)
        gtk_application_set_accels_for_action(app, accels[i].action, accels[i].accels);
}

/* ---- scripted sessions: --print-loaded ---------------------------------------------------- */

/* Waits for the window to finish opening its model, prints what it shows
 * (or why it could not open it) and quits: a check, for scripts and tests,
 * that a model reaches the window. */
static gboolean print_when_loaded(gpointer user_data)
{
    NcWindow *window = user_data;
    if (nc_window_is_loading(window))
        return G_SOURCE_CONTINUE;
    NcApplication *self = NC_APPLICATION(gtk_window_get_application(GTK_WINDOW(window)));
    g_autofree char *loaded = nc_window_describe_model(window);
    if (loaded) {
        printf("loaded %s\n", loaded);
        fflush(stdout);
    } else {
        const char *why = nc_window_get_last_error(window);
        g_printerr("neurocuda-workbench: no model was loaded: %s\n", why ? why : "the bundled model is not installed");
        self->exit_status = 1;
    }
    g_application_quit(G_APPLICATION(self));
    return G_SOURCE_REMOVE;
}

/* The window has begun opening its model: start what the command line asked. */
static void start_script(NcApplication *self, NcWindow *window)
{
    if (self->print_loaded)
        g_timeout_add_full(G_PRIORITY_DEFAULT, 50, print_when_loaded, g_object_ref(window), g_object_unref);
    else if (self->bench_seconds > 0)
        nc_frame_bench_start(window, self->bench_seconds, self->bench_screenshots, &self->exit_status);
}

/* ---- lifecycle ----------------------------------------------------------------------------------- */

static void nc_application_startup(GApplication *app)
{
    NcApplication *self = NC_APPLICATION(app);
    G_APPLICATION_CLASS(nc_application_parent_class)->startup(app);
    g_settings_bind_with_mapping(self->settings, "style-variant", adw_style_manager_get_default(), "color-scheme",
                                 G_SETTINGS_BIND_DEFAULT, style_get, style_set, NULL, NULL);
    g_action_map_add_action_entries(G_ACTION_MAP(app), app_entries, G_N_ELEMENTS(app_entries), app);
    g_autoptr(GAction) style = g_settings_create_action(self->settings, "style-variant");
    g_action_map_add_action(G_ACTION_MAP(app), style);
    set_accels(GTK_APPLICATION(app));
    gtk_window_set_default_icon_name(NC_APP_ID);
}

static NcWindow *window_for(NcApplication *self)
{
    GtkWindow *active = gtk_application_get_active_window(GTK_APPLICATION(self));
    return active && NC_IS_WINDOW(active) ? NC_WINDOW(active) : nc_window_new(GTK_APPLICATION(self), self->settings);
}

static void nc_application_activate(GApplication *app)
{
    NcApplication *self = NC_APPLICATION(app);
    if (!self->settings)
        return;
    gboolean fresh = gtk_application_get_active_window(GTK_APPLICATION(app)) == NULL;
    NcWindow *window = window_for(self);
    gtk_window_present(GTK_WINDOW(window));
    if (fresh) {
        nc_window_open_default(window);
        start_script(self, window);
    }
}

static void nc_application_open(GApplication *app, GFile **files, int n_files, const char *hint)
{
    NcApplication *self = NC_APPLICATION(app);
    if (!self->settings || n_files < 1)
        return;
    NcWindow *window = window_for(self);
    gtk_window_present(GTK_WINDOW(window));
    nc_window_open(window, files[0]);
    start_script(self, window);
}

static int nc_application_handle_local_options(GApplication *app, GVariantDict *options)
{
    NcApplication *self = NC_APPLICATION(app);
    if (g_variant_dict_contains(options, "version")) {
        printf("neurocuda-workbench %s\nGTK %u.%u.%u (built against %d.%d.%d), libadwaita %u.%u.%u, GLib %u.%u.%u\n",
               NC_VERSION, gtk_get_major_version(), gtk_get_minor_version(), gtk_get_micro_version(),
               GTK_MAJOR_VERSION, GTK_MINOR_VERSION, GTK_MICRO_VERSION, adw_get_major_version(),
               adw_get_minor_version(), adw_get_micro_version(), glib_major_version, glib_minor_version,
               glib_micro_version);
        return 0;
    }
    self->print_loaded = g_variant_dict_contains(options, "print-loaded");
    if (g_variant_dict_lookup(options, "bench-frames", "i", &self->bench_seconds) && self->bench_seconds < 1) {
        g_printerr("neurocuda-workbench: --bench-frames needs a number of seconds ≥ 1\n");
        return 1;
    }
    g_variant_dict_lookup(options, "bench-screenshots", "^ay", &self->bench_screenshots);
    if (self->bench_screenshots && self->bench_seconds < 1) {
        g_printerr("neurocuda-workbench: --bench-screenshots goes with --bench-frames\n");
        return 1;
    }
    if (self->print_loaded || self->bench_seconds > 0)  /* its own window, not one of a running workbench */
        g_application_set_flags(app, g_application_get_flags(app) | G_APPLICATION_NON_UNIQUE);
    g_autoptr(GError) error = NULL;
    self->settings = make_settings(&error);
    if (!self->settings) {
        g_printerr("neurocuda-workbench: %s\n", error->message);
        return 1;
    }
    return -1;
}

static void nc_application_finalize(GObject *object)
{
    NcApplication *self = NC_APPLICATION(object);
    g_clear_object(&self->settings);
    g_free(self->bench_screenshots);
    G_OBJECT_CLASS(nc_application_parent_class)->finalize(object);
}

static void nc_application_class_init(NcApplicationClass *klass)
{
    GApplicationClass *app_class = G_APPLICATION_CLASS(klass);
    G_OBJECT_CLASS(klass)->finalize = nc_application_finalize;
    app_class->startup = nc_application_startup;
    app_class->activate = nc_application_activate;
    app_class->open = nc_application_open;
    app_class->handle_local_options = nc_application_handle_local_options;
}

static const GOptionEntry options[] = {
    {"version", 'v', 0, G_OPTION_ARG_NONE, NULL, "Print the version and exit", NULL},
    {"print-loaded", 0, 0, G_OPTION_ARG_NONE, NULL,
     "Open MODEL, print what the window loaded (path, kind, input shape, classes, nodes) and quit", NULL},
    {"bench-frames", 0, 0, G_OPTION_ARG_INT, NULL,
     "Open MODEL, run it with the saved settings, and for SECONDS while the run streams measure GTK's frame clock "
     "(frame intervals, time per frame, each view in turn) and the peak memory; print a table and quit",
     "SECONDS"},
    {"bench-screenshots", 0, 0, G_OPTION_ARG_FILENAME, NULL,
     "With --bench-frames: save the window in each view as DIR/window-VIEW.png", "DIR"},
    {NULL},
};

static void nc_application_init(NcApplication *self)
{
    GApplication *app = G_APPLICATION(self);
    g_application_add_main_option_entries(app, options);
    g_application_set_option_context_parameter_string(app, "[MODEL]");
    g_application_set_option_context_summary(
        app, "Converts a trained network (ONNX) into a spiking neural network, simulates it and shows the spikes "
             "live.\nWith no MODEL, the bundled Fashion-MNIST model opens, ready to convert.");
}

NcApplication *nc_application_new(void)
{
    return g_object_new(NC_TYPE_APPLICATION, "application-id", NC_APP_ID, "flags", G_APPLICATION_HANDLES_OPEN,
                        "resource-base-path", "/io/github/neurocuda/Workbench", NULL);
}
