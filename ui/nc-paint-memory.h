/* nc-paint-memory.h — keeps the memory that a repaint uses touched, so that
 * a frame does not fault in fresh pages.
 *
 * GTK 4.8's cairo renderer on X11 paints every frame into a new client-side
 * image of the area that changed (a malloc of 4.4 MB for a 1300 × 850 chart),
 * and cairo-xlib sends that image to the X server through a MIT-SHM segment
 * from its pool, which it destroys as soon as no upload uses it.  So a frame
 * in which a chart's new picture appears wrote about twice its size into
 * pages the kernel had to find and clear first: 8–10 ms of the main thread,
 * and up to 51 ms of wall time while two other threads also fault in memory
 * (the engine's batches) — what the late paints of docs/BENCHMARKS.md §9 were
 * made of.  Two remedies, each for one of those copies:
 *
 *   nc_paint_memory_keep_heap(bytes)   glibc maps a block afresh when it is
 *       at least as large as the largest mapped block freed so far, and
 *       keeps twice that size at the top of its heap; a window's images alone
 *       bring that only up to their own size, so each new one is mapped
 *       afresh.  One block a little larger than the monitor's image, mapped
 *       and freed, moves both past it, by glibc's own rule: the images then
 *       come from the heap and reuse the pages of the one before.  (Fixed
 *       thresholds set with mallopt do the same for every block of every
 *       thread, and kept the workbench's peak memory 110 MB higher, past its
 *       2 GB budget.)
 *   nc_paint_memory_hold_shm(widget)   on X11: one shared-memory image of
 *       the monitor's size, made once and never drawn into, kept for the
 *       window's life.  cairo-xlib's pool is sized by its first request (eight times the
 *       next power of two), so it holds the window's uploads, and since it
 *       never empties it is never destroyed: its pages stay mapped and
 *       touched.
 *
 * Together (tests/bench_repaint.c, docs/BENCHMARKS.md §9 run L): such a frame
 * costs the main thread a median of 2.7–3.7 ms of CPU instead of 8.5–9.6
 * (the held image alone: 4.9–5.5), and at most 16–18 ms of wall time
 * instead of 41–51 with two threads at nice +10 faulting in memory.
 * NC_PAINT_MEMORY=0 in the environment turns both off, =heap or =shm leaves
 * that one alone on, to measure them side by side. */
#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

/* Whether the remedy `part` ("heap" or "shm") is on: both are, unless
 * NC_PAINT_MEMORY names the other one alone or is 0. */
gboolean nc_paint_memory_enabled(const char *part);

/* Both, for the window of `widget`, once it is realized, where it is drawn
 * by the cairo renderer (GL and Vulkan upload textures instead). */
void nc_paint_memory_prepare(GtkWidget *widget);

/* The allocator's rule moved past images of `image_bytes` (glibc; elsewhere,
 * and when disabled, nothing).  TRUE when the block was made and freed. */
gboolean nc_paint_memory_keep_heap(size_t image_bytes);

/* Holds cairo-xlib's shared-memory pool for the window of `widget` (call it
 * once the window is realized; nothing where it is not drawn by the cairo
 * renderer on X11, or when disabled).  The image is freed with the window.
 * TRUE when a shared-memory image is held. */
gboolean nc_paint_memory_hold_shm(GtkWidget *widget);

/* The image held for the window of `widget`, or NULL (for tests). */
cairo_surface_t *nc_paint_memory_get_held(GtkWidget *widget);

G_END_DECLS
