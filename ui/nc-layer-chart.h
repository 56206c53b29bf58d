/* nc-layer-chart.h — per-layer bar charts of a run, one widget type for the
 * three views that share a layout (a bar group per neuron layer):
 *   RATES  firing rate, dead and saturated fractions; a click on a layer
 *          shows its per-channel rates (click again, or Esc, to go back);
 *   ERROR  conversion error decomposed into clipping, quantisation and
 *          unevenness (mean |e|, stacked: they add up to φ − ReLU(z));
 *   SOPS   synaptic operations of the SNN against the ANN's MACs, per image.
 * Every metric is defined once, in core/nc_record.h; the tooltips repeat the
 * formulas. */
#pragma once

#include "nc-chart.h"
#include "nc-run-data.h"

G_BEGIN_DECLS

typedef enum { NC_LAYER_CHART_RATES, NC_LAYER_CHART_ERROR, NC_LAYER_CHART_SOPS } NcLayerChartKind;

#define NC_TYPE_LAYER_CHART (nc_layer_chart_get_type())
G_DECLARE_FINAL_TYPE(NcLayerChart, nc_layer_chart, NC, LAYER_CHART, NcChart)

GtkWidget *nc_layer_chart_new(NcLayerChartKind kind);
void nc_layer_chart_set_data(NcLayerChart *self, NcRunData *data); /* NULL clears */
/* The layer whose channels are shown (RATES), or −1 for the layer view. */
int nc_layer_chart_get_drill_layer(NcLayerChart *self);
void nc_layer_chart_set_drill_layer(NcLayerChart *self, int layer);
int nc_layer_chart_get_n_layers(NcLayerChart *self);

G_END_DECLS
