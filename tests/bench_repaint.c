/* bench_repaint.c — what a frame that shows a chart's new picture costs the
 * main thread, with and without ui/nc-paint-memory.h, optionally while
 * threads at nice +10 fault in fresh memory as the engine's batches do.
 *
 *   xvfb-run -a -s "-screen 0 1600x1000x24" env GSK_RENDERER=cairo build/tests/bench_repaint [LOADERS]
 *
 * A 1300 × 850 window shows one chart-sized picture, made as the workbench
 * makes one (a worker rasterises a recording, ui/nc-chart-render.h, and the
 * window shows it as a cairo node); every 30th frame a new picture replaces
 * it (the first frames' uploads are not counted), the other frames
 * repaint nothing.  Per frame: the main thread's CPU
 * time and the wall time from the frame clock's "before-paint" to
 * "after-paint".  NC_PAINT_MEMORY=0 in the environment measures without the
 * remedies; run both, one after the other, for a side-by-side figure. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <gtk/gtk.h>

#include "nc-chart-render.h"
#include "nc-paint-memory.h"

enum { WIDTH = 1300, HEIGHT = 850, EVERY = 30, PICTURES = 20, LOADER_BYTES = 268 << 20 };

typedef struct {
    GtkWidget *window, *view;
    GskRenderNode *shown;
    int frame, pictures;             /* pictures shown (counted ones)   */
    gboolean building, new_pending;  /* a worker draws; its picture is not shown yet */
    double cpu_start, wall_start;
    double new_cpu[PICTURES], new_wall[PICTURES];
    double other_cpu_sum, other_cpu_max;
    int others;
    gboolean done;
} Bench;

static double thread_cpu_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static double wall_ms(void) { return g_get_monotonic_time() / 1e3; }

/* ---- the picture ------------------------------------------------------------------------- */

static void draw_picture(cairo_t *cr, double w, double h, gpointer user)
{
    int seed = GPOINTER_TO_INT(user);
    cairo_pattern_t *gradient = cairo_pattern_create_linear(0, 0, w, h);
    cairo_pattern_add_color_stop_rgb(gradient, 0, (seed % 7) / 7.0, 0.2, 0.4);
    cairo_pattern_add_color_stop_rgb(gradient, 1, 0.1, (seed % 5) / 5.0, 0.8);
    cairo_set_source(cr, gradient);
    cairo_paint(cr);
    cairo_pattern_destroy(gradient);
}

/* The worker's picture arrives (between frames, as a chart's does): the next
 * frame shows it. */
static void on_picture(GObject *source, GAsyncResult *result, gpointer user_data)
{
    Bench *b = user_data;
    NcChartRender *job = nc_chart_render_finish(result);
    g_clear_pointer(&b->shown, gsk_render_node_unref);
    b->shown = nc_chart_render_get_node(job);
    nc_chart_render_free(job);
    b->building = FALSE, b->new_pending = TRUE;
    gtk_widget_queue_draw(b->view);
}

/* ---- the window -------------------------------------------------------------------------- */

#define BENCH_TYPE_VIEW (bench_view_get_type())
G_DECLARE_FINAL_TYPE(BenchView, bench_view, BENCH, VIEW, GtkWidget)
struct _BenchView {
    GtkWidget parent_instance;
    Bench *bench;
};
G_DEFINE_FINAL_TYPE(BenchView, bench_view, GTK_TYPE_WIDGET)

static void bench_view_snapshot(GtkWidget *widget, GtkSnapshot *snapshot)
{
    Bench *b = BENCH_VIEW(widget)->bench;
    if (b->shown)
        gtk_snapshot_append_node(snapshot, b->shown);
}
static void bench_view_class_init(BenchViewClass *klass) { GTK_WIDGET_CLASS(klass)->snapshot = bench_view_snapshot; }
static void bench_view_init(BenchView *self) {}

static void on_before_paint(GdkFrameClock *clock, Bench *b)
{
    b->cpu_start = thread_cpu_ms();
    b->wall_start = wall_ms();
}

static void on_after_paint(GdkFrameClock *clock, Bench *b)
{
    double cpu = thread_cpu_ms() - b->cpu_start, wall = wall_ms() - b->wall_start;
    if (b->new_pending) {
        if (b->pictures >= 0 && b->pictures < PICTURES)
            b->new_cpu[b->pictures] = cpu, b->new_wall[b->pictures] = wall;
        b->pictures++, b->new_pending = FALSE;
    } else if (b->pictures > 0) {
        b->other_cpu_sum += cpu, b->others++;
        b->other_cpu_max = MAX(b->other_cpu_max, cpu);
    }
    b->done = b->pictures >= PICTURES;
}

/* Every tick asks for a repaint (which repaints nothing while the picture
 * is the same); every EVERY-th a worker starts on a new picture. */
static gboolean on_tick(GtkWidget *widget, GdkFrameClock *clock, gpointer user_data)
{
    Bench *b = user_data;
    gtk_widget_queue_draw(b->view);
    if (++b->frame % EVERY == 0 && !b->building) {
        b->building = TRUE;
        nc_chart_render_run_async(nc_chart_render_new(0, WIDTH, HEIGHT, 1, draw_picture, GINT_TO_POINTER(b->frame)),
                                  NULL, on_picture, b);
    }
    return G_SOURCE_CONTINUE;
}

/* ---- the load ---------------------------------------------------------------------------- */

static volatile gboolean stop_loaders;

/* Fresh pages, again and again, at the engine's nice value. */
static void *fault_in_memory(void *unused)
{
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
    while (!stop_loaders) {
        char *block = malloc(LOADER_BYTES);
        for (size_t i = 0; block && i < LOADER_BYTES; i += 4096)
            ((volatile char *)block)[i] = 1;
        free(block);
    }
    return NULL;
}

/* ---- the report -------------------------------------------------------------------------- */

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void report(Bench *b, int loaders, gboolean heap, gboolean held)
{
    double cpu_mean = 0, cpu_max = 0, wall_max = 0;
    for (int i = 0; i < PICTURES; i++) {
        cpu_mean += b->new_cpu[i] / PICTURES;
        cpu_max = MAX(cpu_max, b->new_cpu[i]);
        wall_max = MAX(wall_max, b->new_wall[i]);
    }
    double cpu_median = median(b->new_cpu, PICTURES), wall_median = median(b->new_wall, PICTURES);
    printf("| paint memory | loaders | frames with a new picture | CPU mean | median | max | wall median | max | "
           "other frames' CPU mean | max |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    printf("| %s | %d | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n",
           heap || held ? (heap && held ? "heap + shm" : heap ? "heap" : "shm") : "off", loaders, PICTURES, cpu_mean,
           cpu_median, cpu_max, wall_median, wall_max, b->others ? b->other_cpu_sum / b->others : 0, b->other_cpu_max);
}

int main(int argc, char **argv)
{
    int loaders = argc > 1 ? atoi(argv[1]) : 0;
    if (!gtk_init_check()) {
        fprintf(stderr, "bench_repaint: no display (run under xvfb-run)\n");
        return 1;
    }
    Bench b = {.pictures = -1}; /* the first picture's frame is not counted */
    b.window = gtk_window_new();
    b.view = g_object_new(BENCH_TYPE_VIEW, NULL);
    BENCH_VIEW(b.view)->bench = &b;
    gtk_window_set_default_size(GTK_WINDOW(b.window), WIDTH, HEIGHT);
    gtk_window_set_child(GTK_WINDOW(b.window), b.view);
    gtk_window_present(GTK_WINDOW(b.window));
    while (!gtk_widget_get_mapped(b.view))
        g_main_context_iteration(NULL, TRUE);
    nc_paint_memory_prepare(b.window); /* as the workbench's window does */
    gboolean heap = nc_paint_memory_enabled("heap"), held = nc_paint_memory_get_held(b.window) != NULL;
    pthread_t threads[8];
    loaders = CLAMP(loaders, 0, 8);
    for (int i = 0; i < loaders; i++)
        pthread_create(&threads[i], NULL, fault_in_memory, NULL);
    GdkFrameClock *clock = gtk_widget_get_frame_clock(b.window);
    g_signal_connect(clock, "before-paint", G_CALLBACK(on_before_paint), &b);
    g_signal_connect(clock, "after-paint", G_CALLBACK(on_after_paint), &b);
    gtk_widget_add_tick_callback(b.window, on_tick, &b, NULL);
    while (!b.done)
        g_main_context_iteration(NULL, TRUE);
    stop_loaders = TRUE;
    for (int i = 0; i < loaders; i++)
        pthread_join(threads[i], NULL);
    report(&b, loaders, heap, held);
    g_clear_pointer(&b.shown, gsk_render_node_unref);
    gtk_window_destroy(GTK_WINDOW(b.window));
    return 0;
}
