/* nc-window.h — the workbench window: a model, its settings, the live
 * views of a run, and the exports.  Pipeline work runs in NcJob workers;
 * the window only shows what they hand back. */
#pragma once

#include <adwaita.h>

G_BEGIN_DECLS

#define NC_TYPE_WINDOW (nc_window_get_type())
G_DECLARE_FINAL_TYPE(NcWindow, nc_window, NC, WINDOW, AdwApplicationWindow)

/* How the last run ended. */
typedef enum { NC_RUN_NONE, NC_RUN_FINISHED, NC_RUN_CANCELLED, NC_RUN_FAILED } NcRunOutcome;

NcWindow *nc_window_new(GtkApplication *app, GSettings *settings);
/* Opens a model (.onnx or .ncsnn) in a worker; errors go to a dialog. */
void nc_window_open(NcWindow *self, GFile *file);
/* Opens the bundled model with Fashion-MNIST preprocessing. */
void nc_window_open_default(NcWindow *self);

/* ---- state, for the self-test and the application ---------------------------------- */

gboolean nc_window_has_model(NcWindow *self);
/* "PATH: spiking network|ANN, input 1x28x28, 10 classes, 12 nodes" of the
 * model the window shows (free with g_free), or NULL before one is open. */
char *nc_window_describe_model(NcWindow *self);
gboolean nc_window_is_loading(NcWindow *self);
gboolean nc_window_is_running(NcWindow *self);
NcRunOutcome nc_window_get_outcome(NcWindow *self);
guint nc_window_get_runs_finished(NcWindow *self);  /* runs that ended, any outcome */
/* Snapshots with a record that reached the views during the last run. */
guint nc_window_get_live_updates(NcWindow *self);
const char *nc_window_get_last_error(NcWindow *self); /* NULL when none */
/* The newest snapshot's stage ("calibrate", "simulate", "finetune" ...). */
const char *nc_window_get_run_stage(NcWindow *self);
/* While the newest snapshot is one of fine-tuning: its epoch and batch
 * (epoch 0 before the first batch); FALSE otherwise. */
gboolean nc_window_get_train_progress(NcWindow *self, int *epoch, gint64 *batch, gint64 *batches);
GtkWidget *nc_window_get_model_pane(NcWindow *self); /* the NcModelPane */
GtkWidget *nc_window_get_settings_pane(NcWindow *self); /* the NcSettingsPane */
const char *nc_window_get_status(NcWindow *self);   /* the status bar's text */
/* The raster samples the views can show, of which *in_memory are held in
 * memory and the others read from the run's spill file (*spill_bytes). */
gint64 nc_window_get_raster_samples(NcWindow *self, gint64 *in_memory, gint64 *spill_bytes);
/* Chooses the raster's image as its Sample list does (ignored when the list
 * has no such entry). */
void nc_window_show_raster_sample(NcWindow *self, int sample);

/* The charts by name ("accuracy", "firing-rates", "calibration-error",
 * "raster", "membrane", "sops"), NULL-terminated array owned by the window. */
const char *const *nc_window_get_chart_names(NcWindow *self);
GtkWidget *nc_window_get_chart(NcWindow *self, const char *name);
void nc_window_show_chart(NcWindow *self, const char *name);

/* The exports behind the window's actions, without file choosers. */
gboolean nc_window_save_recording(NcWindow *self, const char *path, GError **error);
gboolean nc_window_save_project(NcWindow *self, const char *path, GError **error);
/* *differences: parts other NIR tools will read differently (see nc_nir.h). */
gboolean nc_window_export_nir(NcWindow *self, const char *path, int *differences, GError **error);
/* Hides the toast now (e.g. before a screenshot). */
void nc_window_dismiss_toast(NcWindow *self);
/* Renders the whole window into a PNG (what a screenshot tool would see). */
gboolean nc_window_save_screenshot(NcWindow *self, const char *path, GError **error);

G_END_DECLS
