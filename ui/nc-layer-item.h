/* nc-layer-item.h — one row of the model pane: a node of the network (or a
 * source node that did not become one, e.g. a removed Dropout), with what the
 * conversion did to it and, after a run, its threshold and firing rate. */
#pragma once

#include <glib-object.h>

G_BEGIN_DECLS

#define NC_TYPE_LAYER_ITEM (nc_layer_item_get_type())
G_DECLARE_FINAL_TYPE(NcLayerItem, nc_layer_item, NC, LAYER_ITEM, GObject)

/* Every property is a display string except "node" (−1 for report-only
 * rows).  "status" is a nc_support name ("converted", "folded", ...), used
 * as a CSS class of the status pill; "reason" explains it. */
NcLayerItem *nc_layer_item_new(int node, const char *name, const char *kind, const char *shape, const char *macs,
                               const char *status, const char *reason);
int nc_layer_item_get_node(NcLayerItem *self);
const char *nc_layer_item_get_name(NcLayerItem *self);
void nc_layer_item_set_threshold(NcLayerItem *self, const char *text);
void nc_layer_item_set_rate(NcLayerItem *self, const char *text);
void nc_layer_item_set_kind(NcLayerItem *self, const char *text);

G_END_DECLS
