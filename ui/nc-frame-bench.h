/* nc-frame-bench.h — `neurocuda-workbench --bench-frames SECONDS [MODEL]`:
 * how fluid the window stays while a run streams, measured with GTK's own
 * frame clock, and how much memory the process took.
 *
 * Once the model is open it starts a run with the saved settings (Convert &
 * Run), waits for the first snapshot with a record to reach the views (the
 * run is streaming), then for SECONDS asks for a repaint at every tick of
 * the frame clock and shows each view in turn (equal shares of the time).
 * For every frame it keeps:
 *   interval = frame time − previous frame time (gdk_frame_clock_get_frame_time):
 *              the clock ticks every 16.7 ms at 60 Hz, so a longer interval
 *              means the main loop was busy or blocked past a tick
 *   paint    = the time from the clock's "before-paint" to "after-paint"
 *              (update, layout, snapshot of the widgets, render)
 * and prints, per view and for all frames, the count, the median, 95th
 * percentile and maximum of both, the frames whose interval exceeded 25 ms
 * (a missed tick), the main thread's work between ticks other than the
 * paints (an interval less the paint and the time in poll(), timed by a
 * poll function set on the main context), each late interval split into its
 * paint, other work and waiting, the snapshots that arrived meanwhile, the raster images
 * kept in memory and in the spill file (the raster view shows the newest
 * one, from the file when it is there), and the peak resident memory
 * (getrusage).  Then it quits (the run is cancelled). */
#pragma once

#include "nc-window.h"

G_BEGIN_DECLS

/* Starts the session on `window` (which is opening its model); sets
 * *exit_status to 1 when the measurement could not be made.  With
 * `screenshots` (a folder, or NULL) the window is saved as
 * window-<view>.png at the end of each view's share; the interval of the
 * frame that saved it is not counted. */
void nc_frame_bench_start(NcWindow *window, int seconds, const char *screenshots, int *exit_status);

G_END_DECLS
