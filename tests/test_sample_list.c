/* test_sample_list.c — the raster's sample chooser (ui/nc-sample-list.h):
 * its entries ("7", "70 (disk)", then "all"), that a list growing by a batch
 * announces only the new entries, inserted before "all" (so a dropdown keeps
 * its selection), and that a list whose listed entries would change text
 * (another run) is replaced whole.  No display needed. */
#include "nc_test.h"

#include <gtk/gtk.h>

#include "nc-sample-list.h"

typedef struct changes {
    int calls;
    guint position, removed, added;
} changes;

static void on_items_changed(GListModel *model, guint position, guint removed, guint added, changes *c)
{
    c->calls++;
    c->position = position, c->removed = removed, c->added = added;
}

/* The text of entry i, or "" past the end. */
static char *entry(NcSampleList *list, guint i)
{
    GtkStringObject *item = g_list_model_get_item(G_LIST_MODEL(list), i);
    char *text = g_strdup(item ? gtk_string_object_get_string(item) : "");
    g_clear_object(&item);
    return text;
}

static int entry_is(NcSampleList *list, guint i, const char *expected)
{
    char *text = entry(list, i);
    int same = strcmp(text, expected) == 0;
    if (!same)
        printf("# entry %u is \"%s\", expected \"%s\"\n", i, text, expected);
    g_free(text);
    return same;
}

static void test_entries(void)
{
    NcSampleList *list = nc_sample_list_new();
    NC_CHECK(g_list_model_get_n_items(G_LIST_MODEL(list)) == 1 && entry_is(list, 0, "all"), "empty: only \"all\"");
    NC_CHECK(g_list_model_get_item_type(G_LIST_MODEL(list)) == GTK_TYPE_STRING_OBJECT, "string items");
    nc_sample_list_set(list, 5, 3);
    NC_CHECK(g_list_model_get_n_items(G_LIST_MODEL(list)) == 6, "5 samples and \"all\"");
    NC_CHECK(entry_is(list, 0, "0") && entry_is(list, 2, "2"), "in memory: the number");
    NC_CHECK(entry_is(list, 3, "3 (disk)") && entry_is(list, 4, "4 (disk)"), "past the budget: from the disk");
    NC_CHECK(entry_is(list, 5, "all"), "\"all\" last");
    NC_CHECK(g_list_model_get_item(G_LIST_MODEL(list), 6) == NULL, "nothing past the end");
    NC_CHECK(nc_sample_list_get_samples(list) == 5, "samples");
    g_object_unref(list);
}

static void test_growth_inserts_before_all(void)
{
    NcSampleList *list = nc_sample_list_new();
    changes c = {0};
    g_signal_connect(list, "items-changed", G_CALLBACK(on_items_changed), &c);
    NC_CHECK(nc_sample_list_set(list, 16, 16), "the first batch adds entries");
    NC_CHECK(c.calls == 1 && c.position == 0 && c.removed == 0 && c.added == 16, "inserted at 0: %u −%u +%u",
             c.position, c.removed, c.added);
    /* the memory budget is reached at 20: the next batches go to the disk */
    NC_CHECK(nc_sample_list_set(list, 32, 20), "a batch past the budget adds entries");
    NC_CHECK(c.calls == 2 && c.position == 16 && c.removed == 0 && c.added == 16, "inserted at 16: %u −%u +%u",
             c.position, c.removed, c.added);
    NC_CHECK(entry_is(list, 19, "19") && entry_is(list, 20, "20 (disk)") && entry_is(list, 32, "all"),
             "the new entries say where they are");
    NC_CHECK(nc_sample_list_set(list, 48, 20) && c.calls == 3 && c.position == 32 && c.added == 16,
             "and the next batch");
    nc_sample_list_set(list, 48, 20);
    NC_CHECK(c.calls == 3, "the same count announces nothing");
    g_object_unref(list);
}

static void test_changed_entries_replace_the_list(void)
{
    NcSampleList *list = nc_sample_list_new();
    changes c = {0};
    nc_sample_list_set(list, 32, 20);
    g_signal_connect(list, "items-changed", G_CALLBACK(on_items_changed), &c);
    /* another run keeps fewer samples in memory: entry 10 now comes from the disk */
    NC_CHECK(!nc_sample_list_set(list, 40, 10), "listed entries changed: replaced");
    NC_CHECK(c.calls == 1 && c.position == 0 && c.removed == 33 && c.added == 41, "replaced whole: %u −%u +%u",
             c.position, c.removed, c.added);
    NC_CHECK(entry_is(list, 10, "10 (disk)"), "with the new text");
    NC_CHECK(!nc_sample_list_set(list, 8, 8), "fewer samples: replaced");
    NC_CHECK(c.calls == 2 && c.removed == 41 && c.added == 9, "replaced whole: −%u +%u", c.removed, c.added);
    g_object_unref(list);
}

int main(void)
{
    NC_RUN(test_entries);
    NC_RUN(test_growth_inserts_before_all);
    NC_RUN(test_changed_entries_replace_the_list);
    return nc_test_done();
}
