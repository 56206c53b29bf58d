/* nc-layer-item.c — a row of the model pane (see header). */
#include "nc-layer-item.h"

struct _NcLayerItem {
    GObject parent_instance;
    int node;
    char *name, *kind, *shape, *macs, *status, *reason, *threshold, *rate;
};

G_DEFINE_FINAL_TYPE(NcLayerItem, nc_layer_item, G_TYPE_OBJECT)

enum { PROP_0, PROP_NODE, PROP_NAME, PROP_KIND, PROP_SHAPE, PROP_MACS, PROP_STATUS, PROP_REASON, PROP_THRESHOLD,
       PROP_RATE, N_PROPS };
static GParamSpec *props[N_PROPS];

/* The string properties, in property-id order, so get/set need no switch. */
static char **string_field(NcLayerItem *self, guint id)
{
    char **fields[] = {NULL, NULL, &self->name, &self->kind, &self->shape, &self->macs, &self->status,
                       &self->reason, &self->threshold, &self->rate};
    return id < G_N_ELEMENTS(fields) ? fields[id] : NULL;
}

static void set_string(NcLayerItem *self, guint id, const char *text)
{
    char **field = string_field(self, id);
    if (g_strcmp0(*field, text) == 0)
        return;
    g_free(*field);
    *field = g_strdup(text);
    g_object_notify_by_pspec(G_OBJECT(self), props[id]);
}

static void nc_layer_item_get_property(GObject *object, guint id, GValue *value, GParamSpec *pspec)
{
    NcLayerItem *self = NC_LAYER_ITEM(object);
    if (id == PROP_NODE)
        g_value_set_int(value, self->node);
    else
        g_value_set_string(value, *string_field(self, id));
}

static void nc_layer_item_set_property(GObject *object, guint id, const GValue *value, GParamSpec *pspec)
{
    NcLayerItem *self = NC_LAYER_ITEM(object);
    if (id == PROP_NODE)
        self->node = g_value_get_int(value);
    else
        set_string(self, id, g_value_get_string(value));
}

static void nc_layer_item_finalize(GObject *object)
{
    NcLayerItem *self = NC_LAYER_ITEM(object);
    for (guint id = PROP_NAME; id < N_PROPS; id++)
        g_free(*string_field(self, id));
    G_OBJECT_CLASS(nc_layer_item_parent_class)->finalize(object);
}

static void nc_layer_item_class_init(NcLayerItemClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS(klass);
    object_class->get_property = nc_layer_item_get_property;
    object_class->set_property = nc_layer_item_set_property;
    object_class->finalize = nc_layer_item_finalize;
    GParamFlags flags = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | G_PARAM_EXPLICIT_NOTIFY;
    props[PROP_NODE] = g_param_spec_int("node", NULL, NULL, -1, G_MAXINT, -1, flags | G_PARAM_CONSTRUCT_ONLY);
    static const char *names[] = {NULL, NULL, "name", "kind", "shape", "macs", "status", "reason", "threshold", "rate"};
    for (guint id = PROP_NAME; id < N_PROPS; id++)
        props[id] = g_param_spec_string(names[id], NULL, NULL, "", flags);
    g_object_class_install_properties(object_class, N_PROPS, props);
}

static void nc_layer_item_init(NcLayerItem *self) { self->node = -1; }

NcLayerItem *nc_layer_item_new(int node, const char *name, const char *kind, const char *shape, const char *macs,
                               const char *status, const char *reason)
{
    return g_object_new(NC_TYPE_LAYER_ITEM, "node", node, "name", name, "kind", kind, "shape", shape, "macs", macs,
                        "status", status, "reason", reason, "threshold", "", "rate", "", NULL);
}

int nc_layer_item_get_node(NcLayerItem *self) { return self->node; }
const char *nc_layer_item_get_name(NcLayerItem *self) { return self->name; }
void nc_layer_item_set_threshold(NcLayerItem *self, const char *text) { set_string(self, PROP_THRESHOLD, text); }
void nc_layer_item_set_rate(NcLayerItem *self, const char *text) { set_string(self, PROP_RATE, text); }
void nc_layer_item_set_kind(NcLayerItem *self, const char *text) { set_string(self, PROP_KIND, text); }
