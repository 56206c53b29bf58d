/* nc-self-test.c — the end-to-end test inside the application (see header).
 * A state machine polled every 100 ms: each step either waits, passes (and
 * the next one begins) or fails the test. */
#include "nc-self-test.h"

#include <adwaita.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>

#include "nc-accuracy-chart.h"
#include "nc-layer-chart.h"
#include "nc-raster-chart.h"
#include "nc-teach-view.h"
#include "nc-trace-chart.h"

typedef enum { WAIT, NEXT, FAIL } StepResult;

typedef struct SelfTest SelfTest;
typedef StepResult (*StepFn)(SelfTest *t);

struct SelfTest {
    GtkApplication *app;
    NcWindow *window;
    GSettings *settings;
    char *dir;
    guint step;
    gint64 step_start;
    gboolean step_begun;
    guint runs_before;
    int view;                    /* screenshot loop */
};

static int status;               /* the process exit status */

/* Sizes: small by default so the test is quick; NC_SELF_TEST_IMAGES and
 * NC_SELF_TEST_STEPS make longer runs (e.g. for documentation screenshots). */
static int env_int(const char *name, int fallback)
{
    const char *text = g_getenv(name);
    int value = text ? atoi(text) : 0;
    return value > 0 ? value : fallback;
}

static int test_images(void) { return env_int("NC_SELF_TEST_IMAGES", 64); }
static int test_steps(void) { return env_int("NC_SELF_TEST_STEPS", 16); }

int nc_self_test_status(void) { return status; }

static void say(const char *fmt, ...) G_GNUC_PRINTF(1, 2);
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *text = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_print("# self-test: %s\n", text);
}

static StepResult fail(const char *fmt, ...) G_GNUC_PRINTF(1, 2);
static StepResult fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *text = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_print("# self-test: FAILED: %s\n", text);
    return FAIL;
}

static void activate(SelfTest *t, const char *action, GVariant *target)
{
    g_action_group_activate_action(G_ACTION_GROUP(t->window), action, target);
}

static gboolean waited(SelfTest *t, double seconds)
{
    return (g_get_monotonic_time() - t->step_start) / 1e6 >= seconds;
}

/* ---- steps ------------------------------------------------------------------------------- */

static StepResult wait_for_model(SelfTest *t)
{
    if (nc_window_is_loading(t->window))
        return WAIT;
    if (!nc_window_has_model(t->window))
        return fail("the bundled model did not open: %s", nc_window_get_last_error(t->window));
    say("the model is open");
    /* small and quick: 200 calibration images, T = 16, batches of 16 */
    g_settings_set_int(t->settings, "calib-images", 200);
    g_settings_set_int(t->settings, "timesteps", test_steps());
    g_settings_set_int(t->settings, "batch-size", 16);
    g_settings_set_int(t->settings, "raster-neurons", 512);
    g_settings_set_string(t->settings, "threshold-method", "p99.9");
    g_settings_set_string(t->settings, "engine", "cpu");
    return NEXT;
}

static StepResult start_run(SelfTest *t, int images)
{
    g_settings_set_int(t->settings, "images", images);
    t->runs_before = nc_window_get_runs_finished(t->window);
    activate(t, "run", NULL);
    return nc_window_is_running(t->window) ? NEXT : fail("win.run did not start a run");
}

static StepResult run_to_cancel(SelfTest *t) { return start_run(t, 2000); }

static StepResult cancel_after_first_update(SelfTest *t)
{
    if (nc_window_get_live_updates(t->window) < 1)
        return nc_window_is_running(t->window) ? WAIT
                                               : fail("the run ended before any live update: %s",
                                                      nc_window_get_last_error(t->window));
    g_autofree char *path = g_strdup_printf("%s/window-running.png", t->dir);
    g_autoptr(GError) error = NULL;
    /* The first live update may arrive before the next frame has drawn the
     * window (a slow, e.g. sanitizer, build): try again on a later tick. */
    if (!nc_window_save_screenshot(t->window, path, &error))
        return nc_window_is_running(t->window) ? WAIT : fail("screenshot %s: %s", path, error->message);
    say("live update received during the run; cancelling");
    activate(t, "cancel", NULL);
    return NEXT;
}

static StepResult wait_for_end(SelfTest *t, NcRunOutcome expected)
{
    if (nc_window_is_running(t->window) || nc_window_get_runs_finished(t->window) == t->runs_before)
        return WAIT;
    NcRunOutcome got = nc_window_get_outcome(t->window);
    if (got != expected)
        return fail("the run ended with outcome %d, expected %d (%s)", got, expected,
                    nc_window_get_last_error(t->window));
    say("run ended as expected (outcome %d) after %u live updates", got, nc_window_get_live_updates(t->window));
    return NEXT;
}

static StepResult wait_cancelled(SelfTest *t) { return wait_for_end(t, NC_RUN_CANCELLED); }
static StepResult wait_finished(SelfTest *t) { return wait_for_end(t, NC_RUN_FINISHED); }
static StepResult run_p999(SelfTest *t) { return start_run(t, test_images()); }

static StepResult check_live(SelfTest *t)
{
    guint n = nc_window_get_live_updates(t->window);
    return n >= 2 ? NEXT : fail("only %u live updates reached the views during a run of several batches", n);
}

static StepResult run_mmse(SelfTest *t)
{
    g_settings_set_string(t->settings, "threshold-method", "mmse");
    return start_run(t, test_images());
}

static StepResult check_views(SelfTest *t)
{
    NcAccuracyChart *acc = NC_ACCURACY_CHART(nc_window_get_chart(t->window, "accuracy"));
    guint runs = nc_accuracy_chart_get_n_runs(acc);
    if (runs < 3)
        return fail("the accuracy chart holds %u curves, expected 3 (cancelled, p99.9, mmse)", runs);
    for (guint r = 1; r < runs; r++)
        if (nc_accuracy_chart_get_n_points(acc, r) != test_steps())
            return fail("curve %u has %d points, expected T = %d", r, nc_accuracy_chart_get_n_points(acc, r),
                        test_steps());
    const char *bars[] = {"firing-rates", "calibration-error", "sops"};
    for (guint i = 0; i < G_N_ELEMENTS(bars); i++)
        if (nc_layer_chart_get_n_layers(NC_LAYER_CHART(nc_window_get_chart(t->window, bars[i]))) < 1)
            return fail("the %s chart has no layers", bars[i]);
    NcRasterChart *raster = NC_RASTER_CHART(nc_window_get_chart(t->window, "raster"));
    if (nc_raster_chart_get_visible_spikes(raster) < 1)
        return fail("the raster shows no spikes");
    NcTraceChart *trace = NC_TRACE_CHART(nc_window_get_chart(t->window, "membrane"));
    if (nc_trace_chart_get_spike_count(trace) < 0)
        return fail("the membrane view has no trace");
    /* a click on raster row 5 of sample 0 traces that neuron */
    g_signal_emit_by_name(raster, "neuron-activated", 0, 5, 0);
    if (nc_trace_chart_get_neuron(trace) != 5)
        return fail("clicking raster row 5 traced neuron %d", nc_trace_chart_get_neuron(trace));
    /* a click on a layer's rate shows its channels */
    NcLayerChart *rates = NC_LAYER_CHART(nc_window_get_chart(t->window, "firing-rates"));
    nc_layer_chart_set_drill_layer(rates, 0);
    gboolean drilled = nc_layer_chart_get_drill_layer(rates) == 0;
    nc_layer_chart_set_drill_layer(rates, -1);
    if (!drilled)
        return fail("the per-channel rates of layer 0 did not open");
    NcTeachView *teach = NC_TEACH_VIEW(nc_window_get_chart(t->window, "teaching"));
    NcTeachData *td = nc_teach_view_get_data(teach);
    if (!td || td->n_layers < 1 || !td->evidence)
        return fail("the teaching view has no data");
    nc_teach_view_set_step(teach, td->T / 2);
    say("views: %u accuracy curves, %" G_GINT64_FORMAT " raster spikes, traced neuron fired %d times", runs,
        nc_raster_chart_get_visible_spikes(raster), nc_trace_chart_get_spike_count(trace));
    return NEXT;
}

static gboolean file_ok(const char *path)
{
    GStatBuf st;
    return g_stat(path, &st) == 0 && st.st_size > 0;
}

static StepResult export_all(SelfTest *t)
{
    static const char *formats[] = {"png", "svg", "pdf"};
    for (const char *const *name = nc_window_get_chart_names(t->window); *name; name++)
        for (guint f = 0; f < G_N_ELEMENTS(formats); f++) {
            g_autofree char *path = g_strdup_printf("%s/%s.%s", t->dir, *name, formats[f]);
            g_autoptr(GError) error = NULL;
            if (!nc_chart_export(NC_CHART(nc_window_get_chart(t->window, *name)), path, 1000, 600, &error) ||
                !file_ok(path))
                return fail("export %s: %s", path, error ? error->message : "empty file");
        }
    g_autofree char *rec = g_build_filename(t->dir, "recording.h5", NULL);
    g_autofree char *project = g_build_filename(t->dir, "model.ncsnn", NULL);
    g_autoptr(GError) error = NULL;
    if (!nc_window_save_recording(t->window, rec, &error) || !file_ok(rec))
        return fail("recording: %s", error ? error->message : "empty");
    if (!nc_window_save_project(t->window, project, &error) || !file_ok(project))
        return fail("project: %s", error ? error->message : "empty");
    g_autofree char *nir = g_build_filename(t->dir, "network.nir", NULL);
    int differences = 0;
    if (!nc_window_export_nir(t->window, nir, &differences, &error) || !file_ok(nir))
        return fail("NIR: %s", error ? error->message : "empty");
    say("exported every chart (PNG, SVG, PDF), the recording, the project and NIR (%d differences)", differences);
    return NEXT;
}

static StepResult open_project(SelfTest *t)
{
    g_autofree char *project = g_build_filename(t->dir, "model.ncsnn", NULL);
    g_autoptr(GFile) file = g_file_new_for_path(project);
    nc_window_open(t->window, file);
    return NEXT;
}

static StepResult run_project(SelfTest *t)
{
    if (nc_window_is_loading(t->window))
        return WAIT;
    if (!nc_window_has_model(t->window))
        return fail("the saved project did not open: %s", nc_window_get_last_error(t->window));
    say("the saved project opened; simulating it without conversion");
    return start_run(t, 32);
}

static const char *const shot_views[] = {"accuracy", "firing-rates", "calibration-error", "raster", "membrane",
                                         "sops", "teaching", NULL};

/* One screenshot per view, each after the view had time to draw. */
static StepResult screenshots(SelfTest *t)
{
    if (!t->step_begun) {
        t->step_begun = TRUE;
        t->view = -1;
        nc_window_dismiss_toast(t->window);
    }
    if (!waited(t, 0.4))
        return WAIT;
    if (t->view >= 0) {
        g_autofree char *path = g_strdup_printf("%s/window-%s.png", t->dir, shot_views[t->view]);
        g_autoptr(GError) error = NULL;
        if (!nc_window_save_screenshot(t->window, path, &error))
            return fail("screenshot %s: %s", path, error->message);
    }
    if (!shot_views[++t->view]) {
        say("saved %d screenshots", t->view);
        return NEXT;
    }
    nc_window_show_chart(t->window, shot_views[t->view]);
    t->step_start = g_get_monotonic_time();
    return WAIT;
}

static StepResult dark_mode(SelfTest *t)
{
    if (!t->step_begun) {
        t->step_begun = TRUE;
        g_settings_set_string(t->settings, "style-variant", "dark");
        nc_window_show_chart(t->window, "raster");
        return WAIT;
    }
    if (!waited(t, 0.5))
        return WAIT;
    g_autofree char *path = g_strdup_printf("%s/window-dark.png", t->dir);
    g_autoptr(GError) error = NULL;
    if (!nc_window_save_screenshot(t->window, path, &error))
        return fail("screenshot %s: %s", path, error->message);
    g_settings_set_string(t->settings, "style-variant", "follow");
    return NEXT;
}

/* A mean that is not a number: no run, a dialog that says what to fix. */
static StepResult bad_settings(SelfTest *t)
{
    g_settings_set_string(t->settings, "mean", "abc");
    activate(t, "run", NULL);
    gboolean running = nc_window_is_running(t->window);
    g_settings_set_string(t->settings, "mean", "0.2860");
    if (running)
        return fail("a run started with the mean “abc”");
    GListModel *toplevels = gtk_window_get_toplevels();
    gboolean found = FALSE;
    for (guint i = 0; i < g_list_model_get_n_items(toplevels) && !found; i++) {
        g_autoptr(GObject) w = g_list_model_get_item(toplevels, i);
        if (ADW_IS_MESSAGE_DIALOG(w) && strstr(adw_message_dialog_get_body(ADW_MESSAGE_DIALOG(w)), "Settings")) {
            say("error dialog: %s", adw_message_dialog_get_body(ADW_MESSAGE_DIALOG(w)));
            gtk_window_destroy(GTK_WINDOW(w));
            found = TRUE;
        }
    }
    return found ? NEXT : fail("no error dialog pointing to the settings");
}

/* The first toplevel of `type`, or NULL. */
static GtkWindow *find_toplevel(GType type)
{
    GListModel *toplevels = gtk_window_get_toplevels();
    for (guint i = 0; i < g_list_model_get_n_items(toplevels); i++) {
        g_autoptr(GObject) w = g_list_model_get_item(toplevels, i);
        if (G_TYPE_CHECK_INSTANCE_TYPE(w, type))
            return GTK_WINDOW(w);
    }
    return NULL;
}

/* The shortcuts window and the about window open (their .ui parse). */
static StepResult help_and_about(SelfTest *t)
{
    activate(t, "show-help-overlay", NULL);
    GtkWindow *help = find_toplevel(GTK_TYPE_SHORTCUTS_WINDOW);
    g_action_group_activate_action(G_ACTION_GROUP(t->app), "about", NULL);
    GtkWindow *about = find_toplevel(ADW_TYPE_ABOUT_WINDOW);
    if (!help || !about)
        return fail("the shortcuts window (%p) or the about window (%p) did not open", (void *)help, (void *)about);
    gtk_window_destroy(help);
    gtk_window_destroy(about);
    say("the shortcuts and about windows open");
    return NEXT;
}

static StepResult settings_shot(SelfTest *t)
{
    if (!t->step_begun) {
        t->step_begun = TRUE;
        activate(t, "show-side", g_variant_new_string("settings"));
        return WAIT;
    }
    if (!waited(t, 0.4))
        return WAIT;
    g_autofree char *path = g_strdup_printf("%s/window-settings.png", t->dir);
    g_autoptr(GError) error = NULL;
    if (!nc_window_save_screenshot(t->window, path, &error))
        return fail("screenshot %s: %s", path, error->message);
    activate(t, "show-side", g_variant_new_string("model"));
    return NEXT;
}

static gboolean watchdog(gpointer user_data)
{
    g_print("# self-test: FAILED: the window did not close within 60 s of a close during a run\n");
    status = 1;
    g_application_quit(G_APPLICATION(user_data));
    return G_SOURCE_REMOVE;
}

/* Closing the window during a run cancels the run, waits for the worker and
 * then closes: the application exits by itself (the watchdog says if not). */
static StepResult close_during_run(SelfTest *t)
{
    if (!t->step_begun) {
        t->step_begun = TRUE;
        return start_run(t, 2000) == NEXT ? WAIT : FAIL;
    }
    if (nc_window_get_live_updates(t->window) < 1)
        return nc_window_is_running(t->window) ? WAIT : fail("the last run ended before any live update");
    say("closing the window during a run");
    status = 0;
    g_print("# self-test: passed\n");
    g_timeout_add_seconds(60, watchdog, t->app);
    gtk_window_close(GTK_WINDOW(t->window));
    return NEXT;
}

static const StepFn steps[] = {
    wait_for_model, bad_settings, help_and_about, run_to_cancel, cancel_after_first_update, wait_cancelled, run_p999, wait_finished, check_live,
    run_mmse, wait_finished, check_views, screenshots, settings_shot, dark_mode, export_all, open_project, run_project,
    wait_finished, close_during_run,
};

/* ---- driver --------------------------------------------------------------------------------- */

static void finish(SelfTest *t, gboolean ok)
{
    status = ok ? 0 : 1;
    g_print("# self-test: %s\n", ok ? "passed" : "FAILED");
    g_application_quit(G_APPLICATION(t->app));
}

static gboolean tick(gpointer user_data)
{
    SelfTest *t = user_data;
    if ((g_get_monotonic_time() - t->step_start) / 1e6 > 300) {
        fail("step %u timed out after 300 s", t->step);
        finish(t, FALSE);
        return G_SOURCE_REMOVE;
    }
    StepResult r = steps[t->step](t);
    if (r == FAIL) {
        finish(t, FALSE);
        return G_SOURCE_REMOVE;
    }
    if (r == NEXT) {
        t->step++;
        t->step_start = g_get_monotonic_time();
        t->step_begun = FALSE;
        if (t->step == G_N_ELEMENTS(steps)) /* the window closes; the application ends with it */
            return G_SOURCE_REMOVE;
    }
    return G_SOURCE_CONTINUE;
}

static void self_test_free(gpointer data)
{
    SelfTest *t = data;
    g_object_unref(t->window);
    g_object_unref(t->settings);
    g_free(t->dir);
    g_free(t);
}

void nc_self_test_start(GtkApplication *app, NcWindow *window, GSettings *settings, const char *dir)
{
    static gboolean started;
    if (started)
        return;
    started = TRUE;
    status = 1; /* until it passes */
    SelfTest *t = g_new0(SelfTest, 1);
    t->app = app;
    t->window = g_object_ref(window);
    t->settings = g_object_ref(settings);
    t->dir = g_strdup(dir);
    t->step_start = g_get_monotonic_time();
    g_mkdir_with_parents(dir, 0755);
    say("writing into %s", dir);
    g_timeout_add_full(G_PRIORITY_DEFAULT, 100, tick, t, self_test_free);
}
