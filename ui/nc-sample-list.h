/* nc-sample-list.h — the raster's sample chooser as a list model: one entry
 * per viewable sample ("7", or "70 (disk)" for a sample past the memory
 * budget, read back from the spill file), then "all" (the samples in memory,
 * stacked).  Items are GtkStringObjects made when asked for, so a run that
 * keeps 10 000 samples costs no list of 10 000 strings, and a list that
 * grows by a batch announces only the new entries (inserted before "all"):
 * a dropdown keeps its selection and the raster is not redrawn. */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

#define NC_TYPE_SAMPLE_LIST (nc_sample_list_get_type())
G_DECLARE_FINAL_TYPE(NcSampleList, nc_sample_list, NC, SAMPLE_LIST, GObject)

/* An empty list: only "all". */
NcSampleList *nc_sample_list_new(void);
/* `samples` viewable samples, the first `in_memory` of them in memory.
 * Returns TRUE when the entries already listed kept their text (the new ones
 * were inserted before "all"), FALSE when the whole list was replaced. */
gboolean nc_sample_list_set(NcSampleList *self, int samples, int in_memory);
int nc_sample_list_get_samples(NcSampleList *self);

G_END_DECLS
