/* nc-quant-chart.h — the loihi engine's quantisation error per layer
 * (core/nc_loihi.h), shown under the calibration error when a run uses the
 * loihi engine: for each synaptic layer (named by the neurons it drives),
 * the relative RMS error of its 8-bit weights, 13-bit biases and 17-bit
 * thresholds, in units of the layer's threshold; the title counts the values
 * that had to be clipped.  The numbers come from quantising the converted
 * network with the engine's default options, on the calling thread (a pass
 * over the weights: milliseconds). */
#pragma once

#include "../core/nc_net.h"
#include "nc-chart.h"

G_BEGIN_DECLS

#define NC_TYPE_QUANT_CHART (nc_quant_chart_get_type())
G_DECLARE_FINAL_TYPE(NcQuantChart, nc_quant_chart, NC, QUANT_CHART, NcChart)

GtkWidget *nc_quant_chart_new(void);
/* Quantises `net` (an SNN; not kept) and shows its errors; NULL clears.  A
 * network the engine cannot quantise shows the reason instead. */
void nc_quant_chart_set_net(NcQuantChart *self, const nc_net *net);
int nc_quant_chart_get_n_layers(NcQuantChart *self);

G_END_DECLS
