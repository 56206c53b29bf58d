/* nc-paint-memory.h — keeps the memory that a repaint uses touched, so that
 * a frame does not fault in fresh pages.
 *
 * GTK 4.8's cairo renderer on X11 paints every frame into a new client-side
 * image of the area that changed (a malloc of 4.4 MB for a 1300 × 850 chart),
 * and cairo-xlib sends that image to the X server through a MIT-SHM segment
 * from its pool, which it destroys as soon as no upload uses it.  So a frame
 * in which a chart's new picture appears wrote about twice its size into
 * pages the kernel had to find and clear first: 8–10 ms of the main thread,
 * and up to 45 ms of wall time while two other threads also fault in memory
 * (the engine's batches) — what the late frames of docs/BENCHMARKS.md §9 were
 * made of.  Two remedies, each for one of those copies:
 *
 *   nc_paint_memory_keep_heap()   glibc keeps up to 16 MB of freed memory at
 *       the top of a heap instead of returning it to the kernel, and serves
 *       blocks under 16 MB (a frame of a 2560 × 1600 window) from the heap
 *       rather than from a fresh mapping, so a frame's image reuses the pages
 *       of the one before.  (64 MB kept the workbench's peak memory 110 MB
 *       higher, past its 2 GB budget; 16 MB costs nothing measurable.)  Call
 *       it before the first allocation that matters (start of main).
 *   nc_paint_memory_hold_shm(widget)   where the widget's window is drawn by
 *       the cairo renderer on X11: one shared-memory image of the monitor's
 *       size, made once and never drawn into, kept for the window's life.
 *       cairo-xlib's pool is sized by its first request (eight times the
 *       next power of two), so it holds the window's uploads, and since it
 *       never empties it is never destroyed: its pages stay mapped and
 *       touched.
 *
 * Together (tests/bench_repaint.c, docs/BENCHMARKS.md §9 run L): such a frame
 * costs the main thread a median of 1.4–1.8 ms of CPU instead of 8.3–10.5,
 * and at most 6–11 ms of wall time instead of 32–45 with two threads at
 * nice +10 faulting in memory.
 * NC_PAINT_MEMORY=0 in the environment turns both off, to measure them side
 * by side. */
#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

/* FALSE when NC_PAINT_MEMORY=0 is set. */
gboolean nc_paint_memory_enabled(void);

/* The allocator settings above (glibc; elsewhere, and when disabled, nothing).
 * TRUE when they were applied. */
gboolean nc_paint_memory_keep_heap(void);

/* Holds cairo-xlib's shared-memory pool for the window of `widget` (call it
 * once the window is realized; nothing where it is not drawn by the cairo
 * renderer on X11, or when disabled).  The image is freed with the window.
 * TRUE when a shared-memory image is held. */
gboolean nc_paint_memory_hold_shm(GtkWidget *widget);

/* The image held for the window of `widget`, or NULL (for tests). */
cairo_surface_t *nc_paint_memory_get_held(GtkWidget *widget);

G_END_DECLS
