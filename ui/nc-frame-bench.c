/* nc-frame-bench.c — frame times while a run streams (see header). */
#include "nc-frame-bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define LATE_US 25000            /* an interval past one and a half ticks of 60 Hz */
#define STREAM_WAIT_S 1800       /* the longest wait for the first record snapshot */
#define LATE_SHOWN 12            /* late intervals broken down in the report */

static const char *const bench_views[] = {"accuracy", "firing-rates", "calibration-error", "raster", "membrane",
                                          "sops"};
#define N_VIEWS G_N_ELEMENTS(bench_views)

typedef struct {
    GArray *interval_us, *paint_us;   /* gint64 each */
} ViewTimes;

/* Where a late interval went: the main thread either ran (the paint that
 * ended it, or other sources: snapshots handed over, idle work) or waited
 * in poll() for the next tick or event. */
typedef struct {
    int view;
    gint64 interval_us, waited_us, paint_us;
} LateFrame;

/* The main thread's time in poll(), summed by the wrapper below (a poll
 * function takes no user data, and the main context is polled by the main
 * thread alone). */
static gint64 polled_us;
static GPollFunc default_poll;

static gint polling_timed(GPollFD *fds, guint n_fds, gint timeout_ms)
{
    gint64 t0 = g_get_monotonic_time();
    gint ready = default_poll(fds, n_fds, timeout_ms);
    polled_us += g_get_monotonic_time() - t0;
    return ready;
}

enum { NONE = -1, FINISH = -2, FINISHING = -3 };

typedef struct {
    NcWindow *window;
    int seconds, *exit_status;
    char *screenshots;                /* folder for window-<view>.png, or NULL */
    gint64 started_us;                /* when the run was asked for          */
    gint64 measure_from_us;           /* when the first snapshot arrived     */
    guint first_updates, tick_id;
    GdkFrameClock *clock;
    gulong before_paint_id, after_paint_id;
    gint64 previous_frame_us, paint_begin_us;
    gint64 polled_at_previous_frame_us, last_paint_us;
    GArray *busy_outside_paint_us;    /* gint64: an interval less its wait and its paint */
    GArray *late;                     /* LateFrame */
    int view;                         /* index into bench_views being shown  */
    int save_then;                    /* after the next paint: save the view, then show this
                                         view (>= 0), finish (FINISH), or nothing (NONE);
                                         FINISHING: finish() is queued */
    int raster_sample;                /* the image the raster view showed    */
    ViewTimes times[N_VIEWS];
} FrameBench;

static void bench_free(FrameBench *b)
{
    for (guint v = 0; v < N_VIEWS; v++) {
        g_array_unref(b->times[v].interval_us);
        g_array_unref(b->times[v].paint_us);
    }
    g_array_unref(b->busy_outside_paint_us);
    g_array_unref(b->late);
    g_object_unref(b->window);
    g_free(b->screenshots);
    g_free(b);
}

static void fail(FrameBench *b, const char *why)
{
    g_printerr("neurocuda-workbench --bench-frames: %s\n", why);
    *b->exit_status = 1;
    g_application_quit(G_APPLICATION(gtk_window_get_application(GTK_WINDOW(b->window))));
    bench_free(b);
}

/* ---- statistics ---------------------------------------------------------------------- */

static int compare_int64(const void *a, const void *b)
{
    gint64 x = *(const gint64 *)a, y = *(const gint64 *)b;
    return x < y ? -1 : x > y;
}

/* Median, 95th percentile and maximum of `values`, in ms (sorts a copy). */
static void summarise(const GArray *values, double out[3])
{
    out[0] = out[1] = out[2] = 0;
    if (values->len == 0)
        return;
    gint64 *sorted = g_memdup2(values->data, values->len * sizeof(gint64));
    qsort(sorted, values->len, sizeof(gint64), compare_int64);
    out[0] = sorted[values->len / 2] / 1000.0;
    out[1] = sorted[MIN(values->len - 1, (guint)(0.95 * values->len))] / 1000.0;
    out[2] = sorted[values->len - 1] / 1000.0;
    g_free(sorted);
}

static guint count_late(const GArray *intervals)
{
    guint late = 0;
    for (guint i = 0; i < intervals->len; i++)
        late += g_array_index(intervals, gint64, i) > LATE_US;
    return late;
}

static void print_row(const char *name, const GArray *intervals, const GArray *paints)
{
    double iv[3], pt[3];
    summarise(intervals, iv);
    summarise(paints, pt);
    printf("| %-17s | %6u | %6.1f | %6.1f | %7.1f | %6.1f | %6.1f | %7.1f | %4u |\n", name, intervals->len, iv[0],
           iv[1], iv[2], pt[0], pt[1], pt[2], count_late(intervals));
}

/* The main thread's work between two ticks other than the paint, and each
 * late interval split into the paint, other work and the wait in poll(): a
 * late interval with a short paint and a short wait had other work on the
 * main thread; one with a long wait was late outside the window's work: the
 * frame clock, the X server, or no free core for the main thread (poll()
 * returns when the thread next runs). */
static void print_where_time_went(const FrameBench *b)
{
    double busy[3];
    summarise(b->busy_outside_paint_us, busy);
    printf("main thread outside the paints, per interval: busy p50 %.1f, p95 %.1f, max %.1f ms\n", busy[0], busy[1],
           busy[2]);
    for (guint i = 0; i < b->late->len && i < LATE_SHOWN; i++) {
        const LateFrame *f = &g_array_index(b->late, LateFrame, i);
        gint64 other = f->interval_us - f->waited_us - f->paint_us;
        printf("late interval %.1f ms (%s): paint %.1f, other work %.1f, waiting in poll %.1f ms\n",
               f->interval_us / 1000.0, bench_views[f->view], f->paint_us / 1000.0, MAX(other, 0) / 1000.0,
               f->waited_us / 1000.0);
    }
}

static void print_report(FrameBench *b)
{
    GArray *all_iv = g_array_new(FALSE, FALSE, sizeof(gint64)), *all_pt = g_array_new(FALSE, FALSE, sizeof(gint64));
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    printf("frame bench: %d s while the run streamed (snapshots that reached the views: %u; stage %s; status: %s)\n",
           b->seconds, nc_window_get_live_updates(b->window) - b->first_updates, nc_window_get_run_stage(b->window),
           nc_window_get_status(b->window));
    printf("| view              | frames | interval p50 | p95 | max (ms) | paint p50 | p95 | max (ms) | late |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (guint v = 0; v < N_VIEWS; v++) {
        print_row(bench_views[v], b->times[v].interval_us, b->times[v].paint_us);
        g_array_append_vals(all_iv, b->times[v].interval_us->data, b->times[v].interval_us->len);
        g_array_append_vals(all_pt, b->times[v].paint_us->data, b->times[v].paint_us->len);
    }
    print_row("all", all_iv, all_pt);
    print_where_time_went(b);
    gint64 in_memory, spill_bytes, samples = nc_window_get_raster_samples(b->window, &in_memory, &spill_bytes);
    printf("raster: %" G_GINT64_FORMAT " images viewable, %" G_GINT64_FORMAT " in memory, %" G_GINT64_FORMAT
           " read back from the spill file (%.1f MB); the raster view showed image %d\n",
           samples, in_memory, samples - in_memory, spill_bytes / 1e6, b->raster_sample);
    printf("peak resident memory: %.0f MB\n", usage.ru_maxrss / 1024.0);
    fflush(stdout);
    g_array_unref(all_iv), g_array_unref(all_pt);
}

/* ---- measuring ------------------------------------------------------------------------ */

static void finish(FrameBench *b)
{
    gtk_widget_remove_tick_callback(GTK_WIDGET(b->window), b->tick_id);
    g_signal_handler_disconnect(b->clock, b->before_paint_id);
    g_signal_handler_disconnect(b->clock, b->after_paint_id);
    print_report(b);
    /* closing the window cancels the run and waits for its worker */
    g_action_group_activate_action(G_ACTION_GROUP(gtk_window_get_application(GTK_WINDOW(b->window))), "quit", NULL);
    bench_free(b);
}

static gboolean finish_when_idle(gpointer user_data)
{
    finish(user_data);
    return G_SOURCE_REMOVE;
}

/* The raster view shows the newest image it can, from the spill file when
 * the run keeps more images than fit its memory budget. */
static void show_newest_image(FrameBench *b)
{
    gint64 in_memory, spill_bytes, samples = nc_window_get_raster_samples(b->window, &in_memory, &spill_bytes);
    b->raster_sample = (int)MAX(0, MIN(samples - 1, G_MAXINT));
    nc_window_show_raster_sample(b->window, b->raster_sample);
}

static void show_view(FrameBench *b, int view)
{
    b->view = view;
    nc_window_show_chart(b->window, bench_views[view]);
    if (strcmp(bench_views[view], "raster") == 0)
        show_newest_image(b);
}

/* DIR/window-<view>.png of the view shown now; FALSE when it failed (said). */
static gboolean save_view(FrameBench *b)
{
    g_autofree char *name = g_strdup_printf("window-%s.png", bench_views[b->view]);
    g_autofree char *path = g_build_filename(b->screenshots, name, NULL);
    g_autoptr(GError) error = NULL;
    if (nc_window_save_screenshot(b->window, path, &error))
        return TRUE;
    g_printerr("neurocuda-workbench --bench-frames: %s: %s\n", path, error->message);
    return FALSE;
}

static void on_before_paint(GdkFrameClock *clock, FrameBench *b) { b->paint_begin_us = g_get_monotonic_time(); }

/* After a paint: its time, then a screenshot that was asked for — now, when
 * the window's render nodes are those just drawn (between a tick that
 * queued a redraw and the paint, the window has nothing to render). */
static void on_after_paint(GdkFrameClock *clock, FrameBench *b)
{
    if (b->paint_begin_us != 0) {
        gint64 paint = g_get_monotonic_time() - b->paint_begin_us;
        g_array_append_val(b->times[b->view].paint_us, paint);
        b->last_paint_us += paint;
        b->paint_begin_us = 0;
    }
    if (b->save_then == NONE || b->save_then == FINISHING)
        return;
    save_view(b);
    b->previous_frame_us = 0; /* the save took time: the next interval is not counted */
    if (b->save_then == FINISH) {
        b->save_then = FINISHING;
        g_idle_add(finish_when_idle, b);
        return;
    }
    show_view(b, b->save_then);
    b->save_then = NONE;
}

/* One interval between ticks: its length, the main thread's work in it
 * other than the paint, and its breakdown when it was late. */
static void record_interval(FrameBench *b, gint64 interval)
{
    g_array_append_val(b->times[b->view].interval_us, interval);
    gint64 waited = polled_us - b->polled_at_previous_frame_us;
    gint64 busy = MAX(interval - waited - b->last_paint_us, 0);
    g_array_append_val(b->busy_outside_paint_us, busy);
    if (interval > LATE_US) {
        LateFrame f = {b->view, interval, waited, b->last_paint_us};
        g_array_append_val(b->late, f);
    }
}

/* Every tick: the interval since the last one, the view due now, and a
 * repaint, so that every frame of the window is drawn (from the charts'
 * cached nodes unless a snapshot changed them).  With screenshots, a view
 * is saved after its last paint, before the next one is shown. */
static gboolean on_tick(GtkWidget *widget, GdkFrameClock *clock, gpointer user_data)
{
    FrameBench *b = user_data;
    gint64 now = gdk_frame_clock_get_frame_time(clock);
    gint64 elapsed = now - b->measure_from_us;
    if (b->save_then == FINISH || b->save_then == FINISHING)
        return G_SOURCE_CONTINUE; /* the last screenshot is due after this paint, or taken */
    if (elapsed >= (gint64)b->seconds * G_USEC_PER_SEC) {
        if (!b->screenshots) {
            finish(b);
            return G_SOURCE_REMOVE;
        }
        b->save_then = FINISH;
        gtk_widget_queue_draw(widget);
        return G_SOURCE_CONTINUE;
    }
    if (b->previous_frame_us > 0)
        record_interval(b, now - b->previous_frame_us);
    b->polled_at_previous_frame_us = polled_us;
    b->last_paint_us = 0;
    int due = (int)(elapsed * (gint64)N_VIEWS / ((gint64)b->seconds * G_USEC_PER_SEC));
    if (due != b->view && due < (int)N_VIEWS && b->save_then == NONE) {
        if (b->screenshots)
            b->save_then = due;
        else
            show_view(b, due);
    }
    b->previous_frame_us = now;
    gtk_widget_queue_draw(widget);
    return G_SOURCE_CONTINUE;
}

static void start_measuring(FrameBench *b)
{
    GtkWidget *widget = GTK_WIDGET(b->window);
    b->clock = gtk_widget_get_frame_clock(widget);
    b->first_updates = nc_window_get_live_updates(b->window);
    b->measure_from_us = gdk_frame_clock_get_frame_time(b->clock);
    b->save_then = NONE;
    show_view(b, 0);
    b->before_paint_id = g_signal_connect(b->clock, "before-paint", G_CALLBACK(on_before_paint), b);
    b->after_paint_id = g_signal_connect(b->clock, "after-paint", G_CALLBACK(on_after_paint), b);
    b->tick_id = gtk_widget_add_tick_callback(widget, on_tick, b, NULL);
    if (!default_poll) {
        default_poll = g_main_context_get_poll_func(NULL);
        g_main_context_set_poll_func(NULL, polling_timed);
    }
    printf("frame bench: the run streams (%.0f s after Convert & Run); measuring for %d s\n",
           (g_get_monotonic_time() - b->started_us) / 1e6, b->seconds);
    fflush(stdout);
}

/* ---- waiting for the model, then for the run to stream ---------------------------------- */

static gboolean wait_for_stream(gpointer user_data)
{
    FrameBench *b = user_data;
    if (nc_window_get_live_updates(b->window) > 0) {
        start_measuring(b);
        return G_SOURCE_REMOVE;
    }
    if (!nc_window_is_running(b->window)) {
        const char *why = nc_window_get_last_error(b->window);
        g_autofree char *text = g_strdup_printf("the run ended before its first snapshot: %s",
                                                why ? why : nc_window_get_status(b->window));
        fail(b, text);
        return G_SOURCE_REMOVE;
    }
    if (g_get_monotonic_time() - b->started_us > (gint64)STREAM_WAIT_S * G_USEC_PER_SEC) {
        fail(b, "no snapshot with a record reached the views in 30 minutes; use fewer calibration images or a "
                "smaller batch");
        return G_SOURCE_REMOVE;
    }
    return G_SOURCE_CONTINUE;
}

static gboolean wait_for_model(gpointer user_data)
{
    FrameBench *b = user_data;
    if (nc_window_is_loading(b->window))
        return G_SOURCE_CONTINUE;
    if (!nc_window_has_model(b->window)) {
        const char *why = nc_window_get_last_error(b->window);
        fail(b, why ? why : "no model was opened");
        return G_SOURCE_REMOVE;
    }
    b->started_us = g_get_monotonic_time();
    gtk_widget_activate_action(GTK_WIDGET(b->window), "win.run", NULL);
    if (!nc_window_is_running(b->window)) {
        fail(b, "the run did not start (see the window's message)");
        return G_SOURCE_REMOVE;
    }
    g_timeout_add(100, wait_for_stream, b);
    return G_SOURCE_REMOVE;
}

void nc_frame_bench_start(NcWindow *window, int seconds, const char *screenshots, int *exit_status)
{
    FrameBench *b = g_new0(FrameBench, 1);
    b->window = g_object_ref(window);
    b->screenshots = g_strdup(screenshots);
    b->seconds = seconds, b->exit_status = exit_status;
    for (guint v = 0; v < N_VIEWS; v++) {
        b->times[v].interval_us = g_array_new(FALSE, FALSE, sizeof(gint64));
        b->times[v].paint_us = g_array_new(FALSE, FALSE, sizeof(gint64));
    }
    b->busy_outside_paint_us = g_array_new(FALSE, FALSE, sizeof(gint64));
    b->late = g_array_new(FALSE, FALSE, sizeof(LateFrame));
    g_timeout_add(100, wait_for_model, b);
}
