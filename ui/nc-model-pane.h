/* nc-model-pane.h — the network as a list of layers: type, shape, MACs,
 * threshold, firing rate, and what the conversion did to each node (the
 * status pill; its tooltip gives the reason for anything folded,
 * approximated, removed or unsupported, from net->report), and a small table
 * of each stage's test accuracy once a run measured them. */
#pragma once

#include <gtk/gtk.h>

#include "../core/nc_net.h"
#include "nc-run-data.h"

G_BEGIN_DECLS

#define NC_TYPE_MODEL_PANE (nc_model_pane_get_type())
G_DECLARE_FINAL_TYPE(NcModelPane, nc_model_pane, NC, MODEL_PANE, GtkWidget)

/* Rebuilds the rows from `net` (not kept).  NULL empties the pane. */
void nc_model_pane_set_net(NcModelPane *self, const nc_net *net);
/* Fills the threshold and rate columns from a snapshot that holds a record. */
void nc_model_pane_update(NcModelPane *self, const NcRunData *data);
/* The test accuracy of each stage of the run (converted, fine-tuned ...), as
 * a small table under the summary; n = 0 hides it.  Copied. */
void nc_model_pane_set_stages(NcModelPane *self, const NcStageAccuracy *stages, int n);
int nc_model_pane_get_n_stages(NcModelPane *self);
const NcStageAccuracy *nc_model_pane_get_stage(NcModelPane *self, int i); /* NULL outside */
/* Selects the row of node `node` (−1: none) without emitting ::node-selected. */
void nc_model_pane_select_node(NcModelPane *self, int node);
guint nc_model_pane_get_n_rows(NcModelPane *self);

G_END_DECLS
