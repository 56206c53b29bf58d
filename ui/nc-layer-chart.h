/* nc-layer-chart.h — per-layer bar charts of a run, one widget type for the
 * three views that share a layout (a bar group per neuron layer):
 *   RATES  firing rate, dead and saturated fractions; a click on a layer
 *          shows its per-channel rates (click again, or Esc, to go back);
 *   ERROR  conversion error decomposed into clipping, quantisation and
 *          unevenness (mean |e|, stacked: they add up to φ − ReLU(z)); with
 *          a baseline (the converted net's run, after fine-tuning) each layer
 *          has two stacks side by side: before (faded) and after;
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
/* ERROR: a run to compare with, layer by layer (kept; NULL: none), and the
 * legend keys of its stack and the current data's.  Layers that do not match
 * (another network) show no comparison. */
void nc_layer_chart_set_baseline(NcLayerChart *self, NcRunData *baseline, const char *before, const char *after);
/* TRUE while the bars show the baseline beside the data. */
gboolean nc_layer_chart_get_compared(NcLayerChart *self);
/* The legend key of stack 0 (before) or 1 (after), as set with the
 * baseline; NULL without one. */
const char *nc_layer_chart_get_stack_label(NcLayerChart *self, int stack);
/* The bar of (layer, stack, group) as drawn (stack 0 = baseline when
 * compared); NAN outside the chart. */
double nc_layer_chart_get_value(NcLayerChart *self, int layer, int stack, int group);

G_END_DECLS
