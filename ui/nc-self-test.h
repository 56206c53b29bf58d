/* nc-self-test.h — the workbench's end-to-end test, driven from inside the
 * running application (`neurocuda-workbench --self-test=DIR`, run under Xvfb
 * by tests/test_workbench_xvfb.sh):
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
 *   7. start a long run and close the window during it: the run is
 *      cancelled, the worker stops and the application exits by itself.
 * The exit status is 0 only if every check passed.  NC_SELF_TEST_IMAGES and
 * NC_SELF_TEST_STEPS (default 64 and 16) size the compared runs,
 * NC_SELF_TEST_TRAIN_IMAGES (default 320) the fine-tuning epoch.
 * Every step prints a "# self-test: ..." line; small sizes keep it short. */
#pragma once

#include <gtk/gtk.h>

#include "nc-window.h"

G_BEGIN_DECLS

void nc_self_test_start(GtkApplication *app, NcWindow *window, GSettings *settings, const char *dir);
/* 0 when the self-test passed (or never ran), 1 otherwise. */
int nc_self_test_status(void);

G_END_DECLS
