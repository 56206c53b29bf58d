/* nc-sample-list.c — the raster's sample chooser as a list model (see header). */
#include "nc-sample-list.h"

#include <gtk/gtk.h>

struct _NcSampleList {
    GObject parent_instance;
    int samples, in_memory;
};

static void nc_sample_list_model_init(GListModelInterface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE(NcSampleList, nc_sample_list, G_TYPE_OBJECT,
                              G_IMPLEMENT_INTERFACE(G_TYPE_LIST_MODEL, nc_sample_list_model_init))

static GType get_item_type(GListModel *model) { return GTK_TYPE_STRING_OBJECT; }

static guint get_n_items(GListModel *model) { return (guint)NC_SAMPLE_LIST(model)->samples + 1; }

static gpointer get_item(GListModel *model, guint position)
{
    NcSampleList *self = NC_SAMPLE_LIST(model);
    if (position > (guint)self->samples)
        return NULL;
    if (position == (guint)self->samples)
        return gtk_string_object_new("all");
    char text[32];
    g_snprintf(text, sizeof text, (int)position < self->in_memory ? "%u" : "%u (disk)", position);
    return gtk_string_object_new(text);
}

static void nc_sample_list_model_init(GListModelInterface *iface)
{
    iface->get_item_type = get_item_type;
    iface->get_n_items = get_n_items;
    iface->get_item = get_item;
}

static void nc_sample_list_class_init(NcSampleListClass *klass) {}
static void nc_sample_list_init(NcSampleList *self) {}

NcSampleList *nc_sample_list_new(void) { return g_object_new(NC_TYPE_SAMPLE_LIST, NULL); }

/* The entries listed now keep their text when the memory/disk boundary
 * falls at the same place among them. */
static gboolean keeps_listed_text(NcSampleList *self, int samples, int in_memory)
{
    return samples >= self->samples && MIN(self->in_memory, self->samples) == MIN(in_memory, self->samples);
}

gboolean nc_sample_list_set(NcSampleList *self, int samples, int in_memory)
{
    g_return_val_if_fail(NC_IS_SAMPLE_LIST(self) && samples >= 0, FALSE);
    int old = self->samples;
    gboolean grows = keeps_listed_text(self, samples, in_memory);
    self->samples = samples, self->in_memory = in_memory;
    if (grows && samples > old)
        g_list_model_items_changed(G_LIST_MODEL(self), (guint)old, 0, (guint)(samples - old));
    else if (!grows)
        g_list_model_items_changed(G_LIST_MODEL(self), 0, (guint)old + 1, (guint)samples + 1);
    return grows;
}

int nc_sample_list_get_samples(NcSampleList *self) { return self->samples; }
