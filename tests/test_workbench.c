/* test_workbench.c — the workbench's end-to-end test: the real application
 * and window (linked from the ui library, not part of the installed
 * workbench), driven from inside their main loop.  `test_workbench DIR
 * [MODEL]`, run under Xvfb by tests/test_workbench_xvfb.sh:
 *
 *   1. wait for the bundled model to open; a setting that is not a number
 *      must refuse to run and show a dialog that says what to fix;
 *   2. start a run and cancel it after its first live update;
 *   3. run p99.9 to the end, then mmse: two curves on one accuracy chart;
 *   4. check that every view received data while the runs went on;
 *   5. export every chart as PNG, SVG and PDF, the recording, the project
 *      and the network as NIR into DIR; open the saved project and
 *      simulate it;
 *   6. save screenshots of the window (each view, light and dark, one while
 *      a run goes on) into DIR;
 *   6b. fine-tuning: a BPTT run cancelled in the middle of its epoch (the
 *      converted net and its run are kept), then one BPTT epoch on a few
 *      training images: two curves (before, after), the calibration error
 *      before and after side by side, the stage table; screenshots
 *      window-finetune-{calibration-error,accuracy}.png;
 *   6b'. training-free bias calibration alone: the calibration-error view
 *      shows each layer before and after it, named for it; screenshot
 *      window-bias-calibration-error.png;
 *   6c. a run that keeps 40 images' rasters within 1 MB: the images past
 *      the budget go to the spill file and one of them is shown from it;
 *   7. start a long run and close the window during it: the run is
 *      cancelled, the worker stops and the application exits by itself.
 * The exit status is 0 only if every check passed.  NC_SELF_TEST_IMAGES and
 * NC_SELF_TEST_STEPS (default 64 and 16) size the compared runs,
 * NC_SELF_TEST_TRAIN_IMAGES (default 320) the fine-tuning epoch.
 * NC_SELF_TEST_ONLY=bias runs step 6b' alone (after the model opened) and
 * quits: tools/screenshot-bias-calibration.sh makes the README's screenshot
 * with it on the VGG-style fixture.
 * Every step prints a "# self-test: ..." line; small sizes keep it short.
 *
 * The test is a state machine polled every 100 ms: each step either waits,
 * passes (and the next one begins) or fails the test. */
#include <adwaita.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nc-accuracy-chart.h"
#include "nc-application.h"
#include "nc-layer-chart.h"
#include "nc-model-pane.h"
#include "nc-settings-pane.h"
#include "nc-raster-chart.h"
#include "nc-teach-view.h"
#include "nc-trace-chart.h"
#include "nc-window.h"

#include "../core/nc_project.h"

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
    guint curves_before;         /* accuracy curves before a fine-tuning run */
    gboolean scrolled;           /* the settings pane shows fine-tuning      */
    gint64 cancelled_at;
    int live_retries;            /* longer runs that check_live started      */
    const StepFn *steps;         /* the steps this run takes, and how many   */
    guint n_steps;
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
/* training images per epoch of the fine-tuning run */
static int test_train_images(void) { return env_int("NC_SELF_TEST_TRAIN_IMAGES", 320); }

static void say(const char *fmt, ...) G_GNUC_PRINTF(1, 2);
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *text = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_print("# self-test: %s\n", text);
}

/* Says why a step failed and fails it (the format is a string literal). */
#define fail(...) (say("FAILED: " __VA_ARGS__), FAIL)

static void activate(SelfTest *t, const char *action, GVariant *target)
{
    g_action_group_activate_action(G_ACTION_GROUP(t->window), action, target);
}

static gboolean waited(SelfTest *t, double seconds)
{
    return (g_get_monotonic_time() - t->step_start) / 1e6 >= seconds;
}

/* ---- steps ------------------------------------------------------------------------------- */

/* WAIT while the window loads a file, FAIL when it holds no model after
 * it (`what` did not open), else NEXT after saying `said`. */
static StepResult opened(SelfTest *t, const char *what, const char *said)
{
    if (nc_window_is_loading(t->window))
        return WAIT;
    if (!nc_window_has_model(t->window))
        return fail("%s did not open: %s", what, nc_window_get_last_error(t->window));
    say("%s", said);
    return NEXT;
}

static StepResult wait_for_model(SelfTest *t)
{
    StepResult r = opened(t, "the bundled model", "the model is open");
    if (r != NEXT)
        return r;
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

/* Several batches' snapshots must reach the views.  The views take the
 * newest snapshot whenever the main loop runs (an unseen one is replaced) and
 * the job sends at most 20 a second, so on a loaded machine a run of a few
 * batches can show only its last: then the run again with 4× the images,
 * twice at most. */
static StepResult check_live(SelfTest *t)
{
    if (t->live_retries > 0) {
        StepResult r = wait_for_end(t, NC_RUN_FINISHED);
        if (r != NEXT)
            return r;
    }
    guint n = nc_window_get_live_updates(t->window);
    int images = test_images() << (2 * t->live_retries);
    if (n >= 2)
        return NEXT;
    if (t->live_retries == 2)
        return fail("only %u live updates reached the views during a run of %d images in %d batches", n, images,
                    images / 16);
    t->live_retries++;
    say("%u live update in a run of %d images; again with %d", n, images, images * 4);
    StepResult r = start_run(t, images * 4);
    return r == NEXT ? WAIT : r;
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
    StepResult r = opened(t, "the saved project", "the saved project opened; simulating it without conversion");
    return r == NEXT ? start_run(t, 32) : r;
}

/* 40 images' rasters kept, every neuron, 1 MB of memory: the bundled
 * network's 37 760 neurons × T = 16 steps take 75 KB per image, so 13 stay
 * in memory and the other 27 go to the spill file (nc-raster-spill.h); a
 * smaller network or T keeps more in memory, still fewer than 30. */
static StepResult run_spilled(SelfTest *t)
{
    g_settings_set_int(t->settings, "raster-neurons", 1048576);
    g_settings_set_int(t->settings, "raster-samples", 40);
    g_settings_set_int(t->settings, "raster-memory-mb", 1);
    return start_run(t, 64);
}

/* A sample past the memory budget is shown from the file, whole. */
static StepResult check_spilled(SelfTest *t)
{
    NcRasterChart *raster = NC_RASTER_CHART(nc_window_get_chart(t->window, "raster"));
    nc_window_show_chart(t->window, "raster");
    nc_raster_chart_set_layer(raster, 0);
    nc_raster_chart_set_sample(raster, 0);
    int in_memory_rows = nc_raster_chart_get_rows(raster);
    nc_raster_chart_set_sample(raster, 30);
    int rows = nc_raster_chart_get_rows(raster);
    gint64 spikes = nc_raster_chart_get_visible_spikes(raster);
    g_settings_reset(t->settings, "raster-samples");
    g_settings_reset(t->settings, "raster-memory-mb");
    g_settings_set_int(t->settings, "raster-neurons", 512);
    nc_raster_chart_set_sample(raster, 0);
    if (rows < 1 || rows != in_memory_rows || spikes < 1)
        return fail("sample 30 (on disk) shows %d rows and %" G_GINT64_FORMAT " spikes, expected %d rows (as "
                    "sample 0) with spikes", rows, spikes, in_memory_rows);
    say("sample 30 of the raster read back from the spill file: %d neurons, %" G_GINT64_FORMAT " spikes", rows,
        spikes);
    return NEXT;
}

static const char *const shot_views[] = {"accuracy", "firing-rates", "calibration-error", "raster", "membrane",
                                         "sops", "teaching", NULL};

/* Saves the window as DIR/window-<name>.png: NEXT, or FAIL with the reason. */
static StepResult save_window_png(SelfTest *t, const char *name)
{
    g_autofree char *path = g_strdup_printf("%s/window-%s.png", t->dir, name);
    g_autoptr(GError) error = NULL;
    if (!nc_window_save_screenshot(t->window, path, &error))
        return fail("screenshot %s: %s", path, error->message);
    return NEXT;
}

/* The first call of a screenshot loop over views: no view shown yet, and no
 * toast in front of the window. */
static void begin_view_loop(SelfTest *t)
{
    if (t->step_begun)
        return;
    t->step_begun = TRUE;
    t->view = -1;
    nc_window_dismiss_toast(t->window);
}

/* One screenshot per view, each after the view had time to draw. */
static StepResult screenshots(SelfTest *t)
{
    begin_view_loop(t);
    if (!waited(t, 0.4))
        return WAIT;
    if (t->view >= 0 && save_window_png(t, shot_views[t->view]) == FAIL)
        return FAIL;
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
    if (save_window_png(t, "dark") == FAIL)
        return FAIL;
    g_settings_set_string(t->settings, "style-variant", "follow");
    return NEXT;
}

/* ---- fine-tuning ---- */

/* The error view's layers, before (stack 0) and after (stack 1): how many
 * changed, and the summed errors; FALSE with *bad = the layer when one of
 * its values is not a number. */
static gboolean compare_error_stacks(NcLayerChart *error, int *changed, double *before, double *after, int *bad)
{
    *changed = 0, *before = 0, *after = 0;
    for (int l = 0; l < nc_layer_chart_get_n_layers(error); l++) {
        double b = 0, a = 0;
        for (int k = 0; k < 3; k++) {
            b += nc_layer_chart_get_value(error, l, 0, k);
            a += nc_layer_chart_get_value(error, l, 1, k);
        }
        if (!isfinite(a) || !isfinite(b)) {
            *bad = l;
            return FALSE;
        }
        *changed += fabs(a - b) > 1e-9;
        *before += b, *after += a;
    }
    return TRUE;
}

/* One BPTT epoch on `images` training images, small batches; `held_out`
 * images pick the best epoch (0: the epoch is kept, so the net changes). */
static StepResult start_finetune(SelfTest *t, const char *method, int images, int held_out)
{
    NcAccuracyChart *acc = NC_ACCURACY_CHART(nc_window_get_chart(t->window, "accuracy"));
    g_settings_set_string(t->settings, "threshold-method", method);
    g_settings_set_int(t->settings, "finetune-qcfs-epochs", 0);
    g_settings_set_int(t->settings, "finetune-bptt-epochs", 1);
    g_settings_set_int(t->settings, "train-timesteps", MIN(test_steps(), 8));
    g_settings_set_int(t->settings, "train-batch-size", 16);
    g_settings_set_int(t->settings, "train-images", images);
    g_settings_set_int(t->settings, "val-images", held_out);
    t->curves_before = nc_accuracy_chart_get_n_runs(acc);
    return start_run(t, test_images());
}

/* Long enough (250 batches) to be cancelled in the middle of the epoch. */
static StepResult run_finetune_to_cancel(SelfTest *t) { return start_finetune(t, "p99.9", 4000, 100); }

static StepResult cancel_mid_epoch(SelfTest *t)
{
    int epoch;
    gint64 batch, batches;
    /* a dozen batches in: the status bar has an ETA by then */
    if (!nc_window_get_train_progress(t->window, &epoch, &batch, &batches) || epoch < 1 || batch < 12)
        return nc_window_is_running(t->window) ? WAIT
                                               : fail("the run ended before fine-tuning reached batch 12: %s",
                                                      nc_window_get_last_error(t->window));
    if (batch >= batches)
        return fail("the epoch ended (batch %" G_GINT64_FORMAT " of %" G_GINT64_FORMAT ") before the cancel", batch,
                    batches);
    g_autofree char *path = g_strdup_printf("%s/window-finetune-running.png", t->dir);
    g_autoptr(GError) error = NULL;
    if (!nc_window_save_screenshot(t->window, path, &error)) /* not drawn yet: on a later tick */
        return WAIT;
    say("fine-tuning in epoch %d, batch %" G_GINT64_FORMAT " of %" G_GINT64_FORMAT " (“%s”); cancelling", epoch,
        batch, batches, nc_window_get_status(t->window));
    t->cancelled_at = g_get_monotonic_time();
    activate(t, "cancel", NULL);
    return NEXT;
}

/* Cancelled mid-epoch: the converted net and its complete run are kept. */
static StepResult check_finetune_cancelled(SelfTest *t)
{
    double seconds = (g_get_monotonic_time() - t->cancelled_at) / 1e6;
    NcAccuracyChart *acc = NC_ACCURACY_CHART(nc_window_get_chart(t->window, "accuracy"));
    NcModelPane *pane = NC_MODEL_PANE(nc_window_get_model_pane(t->window));
    guint runs = nc_accuracy_chart_get_n_runs(acc);
    const char *label = nc_accuracy_chart_get_label(acc, runs - 1);
    if (seconds > 30)
        return fail("the fine-tuning took %.0f s to stop after Cancel", seconds);
    if (!strstr(nc_window_get_status(t->window), "Fine-tuning cancelled"))
        return fail("the status bar says “%s” after a cancel during fine-tuning", nc_window_get_status(t->window));
    double end = nc_accuracy_chart_get_accuracy(acc, runs - 1, test_steps());
    const NcStageAccuracy *s0 = nc_model_pane_get_stage(pane, 0);
    if (s0 && end != s0->snn)
        return fail("the converted net's curve ends at %g, its stage row says %g", end, s0->snn);
    if (runs != t->curves_before + 1 || nc_accuracy_chart_get_n_points(acc, runs - 1) != test_steps() ||
        strstr(label, "cancelled"))
        return fail("after a cancel in fine-tuning the accuracy chart should end with the converted net's complete "
                    "curve: %u curves (before %u), “%s” with %d points", runs, t->curves_before, label,
                    nc_accuracy_chart_get_n_points(acc, runs - 1));
    if (nc_model_pane_get_n_stages(pane) != 1 || strcmp(nc_model_pane_get_stage(pane, 0)->name, "converted") != 0)
        return fail("the stage table should hold only the converted net after the cancel (%d rows)",
                    nc_model_pane_get_n_stages(pane));
    g_autofree char *project = g_build_filename(t->dir, "cancelled-finetune.ncsnn", NULL);
    g_autoptr(GError) error = NULL;
    if (!nc_window_save_project(t->window, project, &error))
        return fail("saving the converted net after the cancel: %s", error->message);
    say("fine-tuning stopped %.1f s after Cancel; the converted net (SNN %.1f%%) and its run are kept", seconds,
        100 * nc_model_pane_get_stage(pane, 0)->snn);
    return NEXT;
}

/* mmse this time, after clearing the earlier curves: the chart compares the
 * converted p99.9 net (kept from the cancelled run), mmse, and mmse + BPTT. */
static StepResult run_finetune(SelfTest *t)
{
    activate(t, "clear-runs", NULL);
    /* the loss over two horizons, as `convert --train-horizons T/2,T` */
    int T = MIN(test_steps(), 8);
    g_autofree char *horizons = g_strdup_printf("%d,%d", MAX(T / 2, 1), T);
    g_settings_set_string(t->settings, "train-horizons", horizons);
    NcJobSettings read;
    g_autoptr(GError) error = NULL;
    if (!nc_settings_pane_read(NC_SETTINGS_PANE(nc_window_get_settings_pane(t->window)), &read, &error))
        return fail("reading the settings with horizons %s: %s", horizons, error->message);
    int n = read.pipeline.train.n_horizons, last = n > 0 ? read.pipeline.train.horizons[n - 1] : 0;
    nc_job_settings_clear(&read);
    if (n != 2 || last != T)
        return fail("the horizons “%s” were read as %d values ending in %d", horizons, n, last);
    return start_finetune(t, "mmse", test_train_images(), 0);
}

/* The fine-tuned run: two curves, the error before and after side by side,
 * a stage table with both stages. */
static StepResult check_finetune(SelfTest *t)
{
    NcAccuracyChart *acc = NC_ACCURACY_CHART(nc_window_get_chart(t->window, "accuracy"));
    NcLayerChart *error = NC_LAYER_CHART(nc_window_get_chart(t->window, "calibration-error"));
    NcModelPane *pane = NC_MODEL_PANE(nc_window_get_model_pane(t->window));
    guint runs = nc_accuracy_chart_get_n_runs(acc);
    if (runs != t->curves_before + 2)
        return fail("a fine-tuning run drew %u curves, expected 2 (before and after)", runs - t->curves_before);
    const char *before = nc_accuracy_chart_get_label(acc, runs - 2), *after = nc_accuracy_chart_get_label(acc, runs - 1);
    if (strstr(before, "BPTT") || !strstr(after, "BPTT 1 ep"))
        return fail("curve labels “%s” and “%s”: expected the converted net's, then one with “BPTT 1 ep”", before,
                    after);
    for (guint r = runs - 2; r < runs; r++)
        if (nc_accuracy_chart_get_n_points(acc, r) != test_steps())
            return fail("curve “%s” has %d points, expected %d", nc_accuracy_chart_get_label(acc, r),
                        nc_accuracy_chart_get_n_points(acc, r), test_steps());
    if (!nc_layer_chart_get_compared(error))
        return fail("the calibration-error chart does not compare before and after fine-tuning");
    int layers = nc_layer_chart_get_n_layers(error), changed = 0, bad = -1;
    double sum_before, sum_after;
    if (!compare_error_stacks(error, &changed, &sum_before, &sum_after, &bad))
        return fail("layer %d: its error before or after is not a number", bad);
    if (changed == 0)
        return fail("fine-tuning changed no layer's error");
    if (nc_model_pane_get_n_stages(pane) != 2)
        return fail("the stage table has %d rows, expected 2", nc_model_pane_get_n_stages(pane));
    const NcStageAccuracy *s0 = nc_model_pane_get_stage(pane, 0), *s1 = nc_model_pane_get_stage(pane, 1);
    /* the curves end where the table says: both runs shown complete */
    double end0 = nc_accuracy_chart_get_accuracy(acc, runs - 2, test_steps());
    double end1 = nc_accuracy_chart_get_accuracy(acc, runs - 1, test_steps());
    if (end0 != s0->snn || end1 != s1->snn)
        return fail("curves end at %g and %g, the stage table says %g and %g", end0, end1, s0->snn, s1->snn);
    if (strcmp(s0->name, "converted") != 0 || strcmp(s1->name, "BPTT fine-tuned") != 0 || !isfinite(s0->ann) ||
        !isfinite(s0->snn) || !isfinite(s1->snn) || !isfinite(s1->qcfs) || s1->T != test_steps())
        return fail("stage table: %s (ANN %g, SNN %g), %s (QCFS %g, SNN %g at T %d)", s0->name, s0->ann, s0->snn,
                    s1->name, s1->qcfs, s1->snn, s1->T);
    say("fine-tuning: %d of %d layers' errors changed; SNN %.1f%% → %.1f%% at T = %d (ANN %.1f%%)", changed, layers,
        100 * s0->snn, 100 * s1->snn, s1->T, 100 * s0->ann);
    return NEXT;
}

/* Fine-tuning off again for the steps that follow. */
static StepResult finetune_off(SelfTest *t)
{
    g_settings_set_int(t->settings, "finetune-bptt-epochs", 0);
    g_settings_reset(t->settings, "train-horizons");
    return NEXT;
}

static const char *const finetune_views[] = {"calibration-error", "accuracy", "settings", NULL};

/* The compared views and the fine-tuning settings, one screenshot each
 * (window-finetune-<view>.png). */
static StepResult finetune_screenshots(SelfTest *t)
{
    begin_view_loop(t);
    if (!waited(t, 0.4))
        return WAIT;
    gboolean settings = t->view >= 0 && strcmp(finetune_views[t->view], "settings") == 0;
    if (settings && !t->scrolled) { /* allocated by now: scroll, then draw */
        nc_settings_pane_show_finetuning(NC_SETTINGS_PANE(nc_window_get_settings_pane(t->window)));
        t->scrolled = TRUE;
        t->step_start = g_get_monotonic_time();
        return WAIT;
    }
    if (t->view >= 0) {
        g_autofree char *name = g_strdup_printf("finetune-%s", finetune_views[t->view]);
        if (save_window_png(t, name) == FAIL)
            return FAIL;
    }
    if (settings)
        activate(t, "show-side", g_variant_new_string("model"));
    if (!finetune_views[++t->view])
        return NEXT;
    if (strcmp(finetune_views[t->view], "settings") == 0)
        activate(t, "show-side", g_variant_new_string("settings"));
    else
        nc_window_show_chart(t->window, finetune_views[t->view]);
    t->step_start = g_get_monotonic_time();
    return WAIT;
}

/* ---- training-free bias calibration ---- */

/* Bias calibration alone, for the simulated T: the job simulates the
 * converted net, calibrates its biases and simulates it again. */
static StepResult run_bias(SelfTest *t)
{
    activate(t, "clear-runs", NULL);
    g_settings_set_string(t->settings, "threshold-method", "p99.9");
    g_settings_set_int(t->settings, "finetune-qcfs-epochs", 0);
    g_settings_set_int(t->settings, "finetune-bptt-epochs", 0);
    g_settings_set_int(t->settings, "calibrate-bias", test_steps());
    t->curves_before = nc_accuracy_chart_get_n_runs(NC_ACCURACY_CHART(nc_window_get_chart(t->window, "accuracy")));
    return start_run(t, test_images());
}

/* The error of each layer before and after the calibration side by side,
 * each named; two curves; the stage table's two rows. */
static StepResult check_bias(SelfTest *t)
{
    NcAccuracyChart *acc = NC_ACCURACY_CHART(nc_window_get_chart(t->window, "accuracy"));
    NcLayerChart *error = NC_LAYER_CHART(nc_window_get_chart(t->window, "calibration-error"));
    NcModelPane *pane = NC_MODEL_PANE(nc_window_get_model_pane(t->window));
    g_autofree char *after = g_strdup_printf("after: bias calibration T %d", test_steps());
    guint runs = nc_accuracy_chart_get_n_runs(acc);
    const char *key0 = nc_layer_chart_get_stack_label(error, 0), *key1 = nc_layer_chart_get_stack_label(error, 1);
    if (!nc_layer_chart_get_compared(error) || g_strcmp0(key0, "before: converted") || g_strcmp0(key1, after))
        return fail("the calibration-error view does not compare before and after the bias calibration (“%s”, “%s”)",
                    key0, key1);
    if (runs != t->curves_before + 2 || !strstr(nc_accuracy_chart_get_label(acc, runs - 1), "bias calibration"))
        return fail("a bias calibration run drew %u curves, expected 2, the second named for it",
                    runs - t->curves_before);
    const NcStageAccuracy *s0 = nc_model_pane_get_stage(pane, 0), *s1 = nc_model_pane_get_stage(pane, 1);
    if (nc_model_pane_get_n_stages(pane) != 2 || strcmp(s0->name, "converted") || strcmp(s1->name, "bias calibrated") ||
        !isfinite(s0->snn) || !isfinite(s1->snn) || s1->T != test_steps())
        return fail("the stage table should hold the converted and the bias calibrated net at T = %d (%d rows)",
                    test_steps(), nc_model_pane_get_n_stages(pane));
    int layers = nc_layer_chart_get_n_layers(error), changed = 0, bad = -1;
    double before, now;
    if (!compare_error_stacks(error, &changed, &before, &now, &bad))
        return fail("layer %d: its error before or after is not a number", bad);
    say("bias calibration: %d of %d layers' errors changed, summed %.4f → %.4f; SNN %.1f%% → %.1f%% at T = %d",
        changed, layers, before, now, 100 * s0->snn, 100 * s1->snn, s1->T);
    return NEXT;
}

/* The project file of the calibrated net holds both rows and their times,
 * as `neurocuda convert --calibrate-bias` writes them. */
static StepResult check_bias_project(SelfTest *t)
{
    g_autofree char *path = g_build_filename(t->dir, "bias-calibrated.ncsnn", NULL);
    g_autoptr(GError) error = NULL;
    if (!nc_window_save_project(t->window, path, &error))
        return fail("saving the bias calibrated net: %s", error->message);
    nc_project *p = NULL;
    nc_error err = {0};
    if (nc_project_load(path, &p, &err) != NC_OK)
        return fail("reading %s back: %s", path, err.message);
    char key[64];
    double acc = -1, seconds = -1, kept = -1, T = -1;
    g_snprintf(key, sizeof key, "bias_calibrated_snn_accuracy_t%d", test_steps());
    gboolean found = nc_project_get_metric(p, key, &acc) &&
                     nc_project_get_metric(p, "seconds_bias_calibrated", &seconds) &&
                     nc_project_get_metric(p, "bias_calibration_kept", &kept) &&
                     nc_project_get_metric(p, "bias_calibration_T", &T);
    nc_project_free(p);
    if (!found || acc < 0 || seconds <= 0 || T != test_steps())
        return fail("%s lacks the bias calibrated row, its time or the calibration's settings", path);
    say("the project keeps the bias calibrated row (%.1f%%), its time (%.2f s), kept %g", 100 * acc, seconds, kept);
    return NEXT;
}

/* The error view, after the toast that reported the run has gone. */
static StepResult bias_screenshot(SelfTest *t)
{
    if (!t->step_begun) {
        t->step_begun = TRUE;
        nc_window_dismiss_toast(t->window);
        nc_window_show_chart(t->window, "calibration-error");
        return WAIT;
    }
    if (!waited(t, 1.0))
        return WAIT;
    return save_window_png(t, "bias-calibration-error");
}

static StepResult bias_off(SelfTest *t)
{
    g_settings_reset(t->settings, "calibrate-bias");
    return NEXT;
}

/* The end of a run of some of the steps: passed, the window closes. */
static StepResult close_window(SelfTest *t)
{
    status = 0;
    g_print("# self-test: passed\n");
    gtk_window_close(GTK_WINDOW(t->window));
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
    if (!found)
        return fail("no error dialog pointing to the settings");
    /* fine-tuning settings are read (and refused) the same way */
    NcSettingsPane *pane = NC_SETTINGS_PANE(nc_window_get_settings_pane(t->window));
    NcJobSettings read;
    g_autoptr(GError) error = NULL;
    g_settings_set_string(t->settings, "train-horizons", "4,x");
    gboolean ok = nc_settings_pane_read(pane, &read, &error);
    g_settings_reset(t->settings, "train-horizons");
    nc_job_settings_clear(&read);
    if (ok || !error || !strstr(error->message, "horizons"))
        return fail("the loss horizons “4,x” were not refused with a message naming them");
    say("bad horizons: %s", error->message);
    return NEXT;
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
    if (save_window_png(t, "settings") == FAIL)
        return FAIL;
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
    run_mmse, wait_finished, check_views, screenshots, settings_shot, dark_mode, run_finetune_to_cancel,
    cancel_mid_epoch, wait_cancelled, check_finetune_cancelled, run_finetune, wait_finished, check_finetune,
    finetune_screenshots, finetune_off, export_all, run_bias, wait_finished, check_bias, check_bias_project,
    bias_screenshot, bias_off,
    open_project, run_project, wait_finished, run_spilled, wait_finished, check_spilled, close_during_run,
};

/* NC_SELF_TEST_ONLY=bias: the bias calibration's steps alone. */
static const StepFn bias_steps[] = {wait_for_model,     run_bias,        wait_finished, check_bias,
                                    check_bias_project, bias_screenshot, close_window};

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
        say("FAILED: step %u timed out after 300 s", t->step);
        finish(t, FALSE);
        return G_SOURCE_REMOVE;
    }
    StepResult r = t->steps[t->step](t);
    if (r == FAIL) {
        finish(t, FALSE);
        return G_SOURCE_REMOVE;
    }
    if (r == NEXT) {
        t->step++;
        t->step_start = g_get_monotonic_time();
        t->step_begun = FALSE;
        if (t->step == t->n_steps) /* the window closes; the application ends with it */
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

static void self_test_start(GtkApplication *app, NcWindow *window, GSettings *settings, const char *dir)
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
    gboolean bias_only = g_strcmp0(g_getenv("NC_SELF_TEST_ONLY"), "bias") == 0;
    t->steps = bias_only ? bias_steps : steps;
    t->n_steps = bias_only ? G_N_ELEMENTS(bias_steps) : G_N_ELEMENTS(steps);
    g_mkdir_with_parents(dir, 0755);
    say("writing into %s", dir);
    g_timeout_add_full(G_PRIORITY_DEFAULT, 100, tick, t, self_test_free);
}

/* ---- the program ------------------------------------------------------------------------- */

/* The application has activated (or opened MODEL) and shows its window:
 * start the test on it, once. */
static void on_window_shown(GApplication *app, gpointer dir)
{
    GtkWindow *active = gtk_application_get_active_window(GTK_APPLICATION(app));
    if (!active || !NC_IS_WINDOW(active)) {
        status = 1;
        g_print("# self-test: FAILED: the application showed no workbench window\n");
        g_application_quit(app);
        return;
    }
    self_test_start(GTK_APPLICATION(app), NC_WINDOW(active), nc_application_get_settings(NC_APPLICATION(app)),
                    dir);
}

static void on_open(GApplication *app, gpointer files, int n_files, const char *hint, gpointer dir)
{
    on_window_shown(app, dir);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-') {
        g_printerr("usage: %s DIR [MODEL]  (writes exports and screenshots into DIR)\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    /* the application sees the rest: [MODEL] */
    argv[1] = argv[0];
    NcApplication *app = nc_application_new();
    /* a test must not hand its work to a workbench already running */
    g_application_set_flags(G_APPLICATION(app), g_application_get_flags(G_APPLICATION(app)) | G_APPLICATION_NON_UNIQUE);
    /* after the application's own handlers: the window is shown and its model is opening */
    g_signal_connect_after(app, "activate", G_CALLBACK(on_window_shown), (gpointer)dir);
    g_signal_connect_after(app, "open", G_CALLBACK(on_open), (gpointer)dir);
    int run = g_application_run(G_APPLICATION(app), argc - 1, argv + 1);
    g_object_unref(app);
    return run ? run : status;
}
