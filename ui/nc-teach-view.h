/* nc-teach-view.h — the teaching view: one test image, a chosen layer's
 * feature maps flickering with the spikes of step t over their running rate,
 * and the output neurons' running evidence per class, stepped by hand or
 * played at a chosen speed on the frame clock (nc_plot_teach draws it, so
 * a frame exports like any chart). */
#pragma once

#include "nc-chart.h"
#include "nc-run-data.h"

G_BEGIN_DECLS

#define NC_TYPE_TEACH_VIEW (nc_teach_view_get_type())
G_DECLARE_FINAL_TYPE(NcTeachView, nc_teach_view, NC, TEACH_VIEW, NcChart)

GtkWidget *nc_teach_view_new(void);
void nc_teach_view_set_data(NcTeachView *self, NcTeachData *teach); /* NULL clears */
NcTeachData *nc_teach_view_get_data(NcTeachView *self);
void nc_teach_view_set_layer(NcTeachView *self, int layer);
/* Step t, 1..T (clamped); ::step-changed tells the window's slider. */
void nc_teach_view_set_step(NcTeachView *self, int step);
int nc_teach_view_get_step(NcTeachView *self);
/* Playing advances `steps_per_second` steps a second, looping at T. */
void nc_teach_view_set_playing(NcTeachView *self, gboolean playing);
gboolean nc_teach_view_get_playing(NcTeachView *self);
void nc_teach_view_set_speed(NcTeachView *self, double steps_per_second);

G_END_DECLS
