/* nc-application.h — the workbench application (io.github.neurocuda.Workbench):
 * command line ([MODEL], --version, and two scripted sessions: --print-loaded
 * opens MODEL, prints what the window loaded and quits; --bench-frames
 * measures the frames while a run streams, nc-frame-bench.h), GSettings,
 * dark mode, accelerators, the about window. */
#pragma once

#include <adwaita.h>

G_BEGIN_DECLS

#define NC_APP_ID "io.github.neurocuda.Workbench"

#define NC_TYPE_APPLICATION (nc_application_get_type())
G_DECLARE_FINAL_TYPE(NcApplication, nc_application, NC, APPLICATION, AdwApplication)

NcApplication *nc_application_new(void);
GSettings *nc_application_get_settings(NcApplication *self);
/* What main() returns after g_application_run() returned 0: non-zero when a
 * scripted session failed. */
int nc_application_get_exit_status(NcApplication *self);

G_END_DECLS
