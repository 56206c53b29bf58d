/* nc-trace-chart.h — the membrane potential of one neuron over the T steps
 * of sample 0, with its threshold θ and its spikes (nc_plot_trace).  The
 * record reconstructs v_t exactly from the observed input currents and
 * spikes (core/nc_record.h); every raster neuron is traced, so a click in
 * the raster selects the same neuron here. */
#pragma once

#include "nc-chart.h"
#include "nc-run-data.h"

G_BEGIN_DECLS

#define NC_TYPE_TRACE_CHART (nc_trace_chart_get_type())
G_DECLARE_FINAL_TYPE(NcTraceChart, nc_trace_chart, NC, TRACE_CHART, NcChart)

GtkWidget *nc_trace_chart_new(void);
void nc_trace_chart_set_data(NcTraceChart *self, NcRunData *data);
/* Layer (NcRunData.layers index) and traced neuron j (0-based row). */
void nc_trace_chart_set_neuron(NcTraceChart *self, int layer, int neuron);
int nc_trace_chart_get_neuron(NcTraceChart *self);
/* Shows the traced neuron whose flat index (within a sample) is nearest to
 * `index`: the same neuron as a raster row when both keep the same neurons. */
void nc_trace_chart_show_index(NcTraceChart *self, int layer, int64_t index);
/* Traced neurons of the current layer (0 before data). */
int nc_trace_chart_get_n_neurons(NcTraceChart *self);
/* Chooses, in `layer`, the traced neuron whose spike count is nearest T/2:
 * a neuron that neither stays silent nor saturates shows the most. */
void nc_trace_chart_pick_active(NcTraceChart *self, int layer);
/* Spikes of the shown neuron over the T steps, or −1 without data. */
int nc_trace_chart_get_spike_count(NcTraceChart *self);

G_END_DECLS
