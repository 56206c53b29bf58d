/* nc_nir.c — NIR notes and file probing (export: nc_nir_export.c, import:
 * nc_nir_import.c, the HDF5 document: nc_nir_doc.c). */
#include "nc_nir.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nc_h5util.h"
#include "nc_nir_doc.h"

void nc_nir_notes_clear(nc_nir_notes *notes)
{
    if (!notes)
        return;
    free(notes->items);
    memset(notes, 0, sizeof *notes);
}

int nir_note(nc_nir_notes *notes, nc_nir_note_kind kind, const char *node, const char *fmt, ...)
{
    if (!notes)
        return 0;
    char text[sizeof(((nc_nir_note *)0)->text)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    for (int k = 0; k < notes->count; k++) /* the same note twice is noise */
        if (notes->items[k].kind == kind && strcmp(notes->items[k].node, node ? node : "") == 0 &&
            strcmp(notes->items[k].text, text) == 0)
            return 0;
    nc_nir_note *items = nc_grow(notes->items, notes->count, &notes->capacity, 16, sizeof *items);
    if (!items)
        return -1;
    notes->items = items;
    nc_nir_note *n = &notes->items[notes->count++];
    n->kind = kind;
    snprintf(n->node, sizeof n->node, "%s", node ? node : "");
    memcpy(n->text, text, sizeof n->text);
    return 0;
}

int nc_nir_notes_count(const nc_nir_notes *notes, nc_nir_note_kind kind)
{
    int n = 0;
    for (int k = 0; notes && k < notes->count; k++)
        n += notes->items[k].kind == kind;
    return n;
}

/* Appends printf-style text at *used, never past size. */
static void put(char *buf, size_t size, size_t *used, const char *fmt, ...)
{
    if (*used + 1 >= size)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *used, size - *used, fmt, ap);
    va_end(ap);
    if (n > 0)
        *used = *used + (size_t)n < size ? *used + (size_t)n : size - 1;
}

const char *nc_nir_notes_format(const nc_nir_notes *notes, int kind, char *buf, size_t size)
{
    size_t used = 0;
    if (!size)
        return buf;
    buf[0] = 0;
    if (!notes)
        return buf;
    char *done = calloc((size_t)(notes->count ? notes->count : 1), 1);
    if (!done)
        return buf;
    for (int k = 0; k < notes->count; k++) {
        const nc_nir_note *a = &notes->items[k];
        if (done[k] || (kind >= 0 && (int)a->kind != kind))
            continue;
        put(buf, size, &used, "  - %s", a->text);
        int shown = 0, more = 0;
        for (int j = k; j < notes->count; j++) {
            const nc_nir_note *b = &notes->items[j];
            if (done[j] || b->kind != a->kind || strcmp(b->text, a->text) != 0)
                continue;
            done[j] = 1;
            if (!b->node[0])
                continue;
            if (shown < 8)
                put(buf, size, &used, "%s%s", shown ? ", " : " (nodes: ", b->node);
            else
                more++;
            shown++;
        }
        if (more)
            put(buf, size, &used, " and %d more", more);
        put(buf, size, &used, "%s\n", shown ? ")" : "");
    }
    free(done);
    return buf;
}

int nc_nir_probe(const char *path)
{
    nc_error err;
    hid_t f;
    if (!path || nc_h5_open_read(path, &f, &err) != NC_OK)
        return 0;
    int yes = nc_h5_exists(f, "node") && nc_h5_exists(f, "node/type");
    nc_h5_close(&f);
    return yes;
}
