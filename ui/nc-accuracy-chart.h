/* nc-accuracy-chart.h — accuracy versus timesteps, the SNN curve of the
 * current run growing with every finished batch, the ANN and QCFS-ANN
 * accuracy as dashed lines, earlier runs overlaid for comparison (e.g. p99.9
 * against mmse).  accuracy(t) is defined in core/nc_record.h. */
#pragma once

#include "nc-chart.h"
#include "nc-run-data.h"

G_BEGIN_DECLS

#define NC_TYPE_ACCURACY_CHART (nc_accuracy_chart_get_type())
G_DECLARE_FINAL_TYPE(NcAccuracyChart, nc_accuracy_chart, NC, ACCURACY_CHART, NcChart)

#define NC_ACCURACY_CHART_MAX_RUNS 20

GtkWidget *nc_accuracy_chart_new(void);
/* Starts a new curve named `label` (the oldest is dropped beyond MAX_RUNS). */
void nc_accuracy_chart_begin_run(NcAccuracyChart *self, const char *label);
/* Updates the newest curve from a snapshot that holds a record. */
void nc_accuracy_chart_update(NcAccuracyChart *self, const NcRunData *data);
/* Appends a note to the newest curve's label (e.g. "cancelled"). */
void nc_accuracy_chart_end_run(NcAccuracyChart *self, const char *note);
/* Keeps only the newest curve. */
void nc_accuracy_chart_clear_history(NcAccuracyChart *self);
guint nc_accuracy_chart_get_n_runs(NcAccuracyChart *self);
/* Curve `run`'s accuracy after step t (1-based); NAN outside or before data. */
double nc_accuracy_chart_get_accuracy(NcAccuracyChart *self, guint run, int t);
/* The legend text of curve `run` (oldest first), NULL outside. */
const char *nc_accuracy_chart_get_label(NcAccuracyChart *self, guint run);
/* Points of curve `run` that hold a value (0 before its first batch). */
int nc_accuracy_chart_get_n_points(NcAccuracyChart *self, guint run);

G_END_DECLS
