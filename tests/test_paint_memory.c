/* test_paint_memory.c — the memory a repaint uses stays touched
 * (ui/nc-paint-memory.h): after nc_paint_memory_keep_heap(size) a freed
 * window-sized image's pages serve the next one (resident, no fault); a window
 * drawn by GTK's cairo renderer on X11 holds one shared-memory image of its
 * monitor's size, and the X uploads of its repaints then come from a segment
 * that stays mapped instead of new segments made and destroyed frame after
 * frame (counted where they are made: shmget); NC_PAINT_MEMORY=0 turns both
 * off.  The window part runs under a display (xvfb-run). */
#include "nc_test.h"

#include <dlfcn.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

#include <gtk/gtk.h>

#include "nc-paint-memory.h"

/* ---- the heap --------------------------------------------------------------------------- */

/* The share of the pages of [p, p + bytes) that are resident. */
static double resident_share(void *p, size_t bytes)
{
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)p & ~(uintptr_t)(page - 1), end = (uintptr_t)p + bytes;
    size_t pages = (end - start + page - 1) / page;
    unsigned char *vec = g_malloc(pages);
    if (mincore((void *)start, end - start, vec) != 0) {
        g_free(vec);
        return -1;
    }
    size_t in = 0;
    for (size_t i = 0; i < pages; i++)
        in += vec[i] & 1;
    g_free(vec);
    return (double)in / pages;
}

/* A window-sized image (1300 × 850 ARGB) allocated, written and freed, then
 * one of the same size allocated again: how much of it is already there. */
static double second_image_resident(void)
{
    size_t bytes = (size_t)1300 * 850 * 4;
    volatile char *first = malloc(bytes);
    for (size_t i = 0; i < bytes; i += 1024) /* volatile: stores before a free are not dropped */
        first[i] = 1;
    free((void *)first);
    char *second = malloc(bytes);
    double share = resident_share(second, bytes);
    free(second);
    return share;
}

static void test_keep_heap(void)
{
    g_setenv("NC_PAINT_MEMORY", "0", TRUE);
    size_t image = (size_t)1300 * 850 * 4;
    NC_CHECK(!nc_paint_memory_enabled("heap") && !nc_paint_memory_keep_heap(image), "NC_PAINT_MEMORY=0 turns it off");
    g_setenv("NC_PAINT_MEMORY", "shm", TRUE);
    NC_CHECK(!nc_paint_memory_keep_heap(image) && nc_paint_memory_enabled("shm"), "NC_PAINT_MEMORY=shm: the other alone");
    g_unsetenv("NC_PAINT_MEMORY");
    NC_CHECK(nc_paint_memory_keep_heap(image), "the block is made and freed");
#if defined(__SANITIZE_ADDRESS__)
    printf("# the sanitizer's allocator is not glibc's: its pages are not measured\n");
    return;
#endif
    second_image_resident(); /* the first image since leaves its pages in the heap */
    double share = second_image_resident();
    NC_CHECK(share >= 0.99, "a second window-sized image reuses the first one's pages (%.0f %% resident)",
             100 * share);
}

/* ---- the X server's shared memory --------------------------------------------------------- */

/* Every SysV shared-memory segment this process makes goes through here
 * (the executable's definition comes before libc's for cairo-xlib too). */
static int segments_made;

int shmget(key_t key, size_t size, int flags)
{
    static int (*real_shmget)(key_t, size_t, int);
    if (!real_shmget)
        real_shmget = (int (*)(key_t, size_t, int))dlsym(RTLD_NEXT, "shmget");
    segments_made++;
    return real_shmget(key, size, flags);
}

static void on_after_paint(GdkFrameClock *clock, guint *painted) { (*painted)++; }

/* A new colour for the whole area at every draw: each frame uploads a
 * window-sized image. */
static void draw_colour(GtkDrawingArea *area, cairo_t *cr, int w, int h, gpointer user_data)
{
    guint *frame = user_data;
    cairo_set_source_rgb(cr, (*frame % 7) / 7.0, (*frame % 5) / 5.0, (*frame % 3) / 3.0);
    cairo_paint(cr);
}

/* Repaints the area `frames` times: the segments made meanwhile. */
static int repaint(GtkWidget *area, guint *painted, int frames)
{
    int made = segments_made;
    for (int i = 0; i < frames; i++) {
        guint before = *painted;
        gtk_widget_queue_draw(area);
        while (*painted == before)
            g_main_context_iteration(NULL, TRUE);
    }
    return segments_made - made;
}

static void test_hold_shm(void)
{
    GtkWidget *window = gtk_window_new(), *area = gtk_drawing_area_new();
    guint painted = 0;
    gtk_drawing_area_set_draw_func(GTK_DRAWING_AREA(area), draw_colour, &painted, NULL);
    gtk_window_set_default_size(GTK_WINDOW(window), 900, 700);
    gtk_window_set_child(GTK_WINDOW(window), area);
    gtk_window_present(GTK_WINDOW(window));
    while (!gtk_widget_get_mapped(area))
        g_main_context_iteration(NULL, TRUE);
    g_signal_connect(gtk_widget_get_frame_clock(window), "after-paint", G_CALLBACK(on_after_paint), &painted);

    int without = repaint(area, &painted, 6);
    printf("# without the hold: %d segments made in 6 repaints\n", without);
    NC_CHECK(without > 0, "without the hold, the repaints' uploads make shared-memory segments (%d in 6 frames; "
             "none: this display takes no MIT-SHM uploads, and the rest shows nothing)", without);
    g_setenv("NC_PAINT_MEMORY", "heap", TRUE);
    NC_CHECK(!nc_paint_memory_hold_shm(window) && !nc_paint_memory_get_held(window), "NC_PAINT_MEMORY=heap: no hold");
    g_unsetenv("NC_PAINT_MEMORY");
    NC_CHECK(nc_paint_memory_hold_shm(window), "a window of the cairo renderer on X11 holds an image");
    cairo_surface_t *held = nc_paint_memory_get_held(window);
    NC_CHECK(held && cairo_surface_get_type(held) == CAIRO_SURFACE_TYPE_IMAGE && cairo_surface_get_device(held),
             "the held image is a shared-memory image of the X display");
    GdkMonitor *monitor = gdk_display_get_monitor_at_surface(gtk_widget_get_display(window),
                                                             gtk_native_get_surface(GTK_NATIVE(window)));
    GdkRectangle geometry;
    gdk_monitor_get_geometry(monitor, &geometry);
    NC_CHECK(held && cairo_image_surface_get_width(held) == geometry.width &&
                 cairo_image_surface_get_height(held) == geometry.height,
             "of the monitor's size (%d × %d)", geometry.width, geometry.height);
    NC_CHECK(nc_paint_memory_hold_shm(window) && nc_paint_memory_get_held(window) == held, "held once");

    int with = repaint(area, &painted, 12);
    NC_CHECK(with == 0, "with the hold, 12 repaints' uploads made no segment (%d)", with);
    gtk_window_destroy(GTK_WINDOW(window));
}

int main(void)
{
    /* glibc maps such a block afresh by default; where the memory is already
     * there (MALLOC_PERTURB_ writes every block it hands out), the test
     * could not tell a kept heap from a fresh one */
    double by_default = second_image_resident();
    printf("# default allocator: %.0f %% of a second window-sized image already resident\n", 100 * by_default);
    if (by_default < 0.5)
        NC_RUN(test_keep_heap);
    else
        nc_test_report("test_keep_heap", 0, "blocks are resident without it (MALLOC_PERTURB_ set?)");
    /* the renderer this is for; the X11 backend, as under Xvfb */
    g_setenv("GSK_RENDERER", "cairo", TRUE);
    g_setenv("GDK_BACKEND", "x11", TRUE);
    if (!gtk_init_check()) {
        nc_test_report("test_hold_shm", 0, "no display (run under xvfb-run)");
        return nc_test_done();
    }
    NC_RUN(test_hold_shm);
    return nc_test_done();
}
