/* nc-settings-pane.h — the run's settings: dataset and preprocessing,
 * threshold method, per-channel, L, calibration images, MaxPool strategy,
 * fine-tuning (epochs of the QCFS and BPTT stages, training T, learning rate,
 * optimizer, surrogate, thresholds, batch, augmentation, images), T,
 * encoding, batch size, raster size, engine.  Every value lives in GSettings
 * (bound here), so the next start remembers the last settings; the worker
 * reads them once per run through nc_settings_pane_read(). */
#pragma once

#include <gio/gio.h>
#include <gtk/gtk.h>

#include "../core/nc_net.h"
#include "nc-job.h"

G_BEGIN_DECLS

#define NC_TYPE_SETTINGS_PANE (nc_settings_pane_get_type())
G_DECLARE_FINAL_TYPE(NcSettingsPane, nc_settings_pane, NC, SETTINGS_PANE, GtkWidget)

void nc_settings_pane_bind(NcSettingsPane *self, GSettings *settings);
/* Checks every engine against `net` (nc_engine_new + nc_engine_check): the
 * ones that cannot run it are dimmed with the reason; NULL: no model. */
void nc_settings_pane_set_net(NcSettingsPane *self, const nc_net *net);
/* The settings of a run; FALSE with a message saying what to fix (e.g. a
 * mean that is not a number). */
gboolean nc_settings_pane_read(NcSettingsPane *self, NcJobSettings *out, GError **error);
/* Scrolls the pane to the fine-tuning group (it must be allocated). */
void nc_settings_pane_show_finetuning(NcSettingsPane *self);
/* Whether the engine `name` can run the current net (after set_net). */
gboolean nc_settings_pane_engine_available(NcSettingsPane *self, const char *name);

G_END_DECLS
