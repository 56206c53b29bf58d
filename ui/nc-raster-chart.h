/* nc-raster-chart.h — spike raster of one layer: chosen neurons (rows)
 * over time (columns), for one sample or all recorded samples stacked.
 * The neurons are the record's evenly subsampled ones (core/nc_record.h).
 * Scroll zooms the neurons around the pointer, Shift+scroll zooms time,
 * dragging pans, a double click resets; hovering names the neuron (flat
 * index, channel, h, w) and step; a click emits ::neuron-activated so the
 * window can show that neuron's membrane.  Drawing bins spikes to one cell
 * per pixel (nc_plot_raster), so a million spikes cost one mask, and the
 * drawing is cached (NcChart): hovering does not redraw it. */
#pragma once

#include "nc-chart.h"
#include "nc-run-data.h"

G_BEGIN_DECLS

#define NC_TYPE_RASTER_CHART (nc_raster_chart_get_type())
G_DECLARE_FINAL_TYPE(NcRasterChart, nc_raster_chart, NC, RASTER_CHART, NcChart)

GtkWidget *nc_raster_chart_new(void);
void nc_raster_chart_set_data(NcRasterChart *self, NcRunData *data);
/* Layer index in the run (as in NcRunData.layers) and sample (−1: all). */
void nc_raster_chart_set_layer(NcRasterChart *self, int layer);
void nc_raster_chart_set_sample(NcRasterChart *self, int sample);
int nc_raster_chart_get_layer(NcRasterChart *self);
void nc_raster_chart_reset_zoom(NcRasterChart *self);
/* Spikes in the visible window, and cells (neurons × steps) shown. */
int64_t nc_raster_chart_get_visible_spikes(NcRasterChart *self);
int nc_raster_chart_get_rows(NcRasterChart *self);

G_END_DECLS
