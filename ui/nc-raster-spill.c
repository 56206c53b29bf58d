/* nc-raster-spill.c — the raster past the memory budget, in a file (see header). */
#include "nc-raster-spill.h"

#include <errno.h>
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

struct NcRasterSpill {
    const nc_record *record;
    int fd;
    int n_layers, T;
    int64_t first, last;
    int64_t *layer_offset;   /* [n_layers + 1]: byte offset of each layer in a sample's block */
    int *neurons;            /* [n_layers] */
    uint8_t *packed;         /* one layer of one sample, byte aligned */
    _Atomic int64_t samples; /* readable so far                            */
    char *_Atomic error;     /* set once, by the writer; then nothing more is written */
};

static size_t layer_bytes(const NcRasterSpill *s, int layer)
{
    return (size_t)(s->layer_offset[layer + 1] - s->layer_offset[layer]);
}

static int64_t block_bytes(const NcRasterSpill *s) { return s->layer_offset[s->n_layers]; }

static void spill_free(NcRasterSpill *s)
{
    if (s->fd >= 0)
        close(s->fd);
    g_free(s->layer_offset);
    g_free(s->neurons);
    g_free(s->packed);
    g_free(atomic_load(&s->error));
}

NcRasterSpill *nc_raster_spill_ref(NcRasterSpill *spill) { return g_atomic_rc_box_acquire(spill); }

void nc_raster_spill_unref(NcRasterSpill *spill)
{
    if (spill)
        g_atomic_rc_box_release_full(spill, (GDestroyNotify)spill_free);
}

NcRasterSpill *nc_raster_spill_new(const nc_record *rec, int64_t first, int64_t last)
{
    NcRasterSpill *s = g_atomic_rc_box_new0(NcRasterSpill);
    s->record = rec, s->first = first, s->last = MAX(first, last), s->T = nc_record_T(rec);
    s->n_layers = nc_record_layer_count(rec);
    s->layer_offset = g_new0(int64_t, s->n_layers + 1);
    s->neurons = g_new0(int, MAX(s->n_layers, 1));
    size_t largest = 1;
    for (int i = 0; i < s->n_layers; i++) {
        nc_raster r;
        nc_record_raster(rec, i, &r);
        s->neurons[i] = r.neurons;
        size_t bytes = ((size_t)r.neurons * (size_t)s->T + 7) / 8;
        s->layer_offset[i + 1] = s->layer_offset[i] + (int64_t)bytes;
        largest = MAX(largest, bytes);
    }
    s->packed = g_malloc(largest);
    g_autofree char *path = NULL;
    g_autoptr(GError) error = NULL;
    s->fd = g_file_open_tmp("neurocuda-raster-XXXXXX", &path, &error);
    if (s->fd < 0) {
        s->fd = -1;
        atomic_store(&s->error, g_strdup_printf("cannot keep the spike raster past the memory budget: %s; free "
                                                "space there or raise the budget", error->message));
        return s;
    }
    g_unlink(path); /* the open descriptor keeps it until the spill is freed */
    return s;
}

static gboolean write_all(int fd, const uint8_t *data, size_t n, int64_t offset)
{
    while (n > 0) {
        ssize_t w = pwrite(fd, data, n, (off_t)offset);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return FALSE;
        data += w, n -= (size_t)w, offset += w;
    }
    return TRUE;
}

/* Bits [from, from + count) of `bits` into s->packed, starting at bit 0. */
static void repack(NcRasterSpill *s, const uint8_t *bits, int64_t from, int64_t count)
{
    if (from % 8 == 0) {
        memcpy(s->packed, bits + from / 8, (size_t)(count + 7) / 8);
        return;
    }
    memset(s->packed, 0, (size_t)(count + 7) / 8);
    for (int64_t b = 0; b < count; b++)
        if ((bits[(from + b) >> 3] >> ((from + b) & 7)) & 1)
            s->packed[b >> 3] |= (uint8_t)(1u << (b & 7));
}

void nc_raster_spill_sink(void *user, const nc_record *rec, int layer, int64_t first, int64_t n, int neurons, int T,
                          const uint8_t *bits)
{
    NcRasterSpill *s = user;
    if (atomic_load(&s->error) || rec != s->record || layer < 0 || layer >= s->n_layers || neurons != s->neurons[layer] ||
        T != s->T)
        return;
    int64_t per_sample = (int64_t)neurons * T;
    for (int64_t k = 0; k < n; k++) {
        int64_t sample = first + k;
        if (sample < s->first || sample >= s->last)
            continue;
        repack(s, bits, k * per_sample, per_sample);
        int64_t offset = (sample - s->first) * block_bytes(s) + s->layer_offset[layer];
        if (!write_all(s->fd, s->packed, layer_bytes(s, layer), offset)) {
            atomic_store(&s->error, g_strdup_printf("writing the spike raster to a temporary file in %s failed (%s); the "
                                       "samples after %" G_GINT64_FORMAT " are not kept",
                                       g_get_tmp_dir(), g_strerror(errno), sample - 1));
            return;
        }
    }
    /* the batch is readable once its last layer is written */
    if (layer == s->n_layers - 1)
        atomic_store(&s->samples, CLAMP(first + n - s->first, 0, s->last - s->first));
}

const nc_record *nc_raster_spill_get_record(const NcRasterSpill *spill) { return spill->record; }
int64_t nc_raster_spill_first(const NcRasterSpill *spill) { return spill->first; }

int64_t nc_raster_spill_samples(const NcRasterSpill *spill)
{
    return atomic_load(&((NcRasterSpill *)spill)->samples);
}

int64_t nc_raster_spill_bytes(const NcRasterSpill *spill) { return nc_raster_spill_samples(spill) * block_bytes(spill); }

const char *nc_raster_spill_get_error(const NcRasterSpill *spill)
{
    return atomic_load(&((NcRasterSpill *)spill)->error);
}

gboolean nc_raster_spill_read(NcRasterSpill *spill, int layer, int64_t sample, uint8_t *bits, GError **error)
{
    int64_t k = sample - spill->first;
    if (layer < 0 || layer >= spill->n_layers || k < 0 || k >= nc_raster_spill_samples(spill)) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, "sample %" G_GINT64_FORMAT
                    " of layer %d is not in the raster file", sample, layer);
        return FALSE;
    }
    size_t n = layer_bytes(spill, layer);
    int64_t offset = k * block_bytes(spill) + spill->layer_offset[layer];
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(spill->fd, bits + done, n - done, (off_t)(offset + (int64_t)done));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED, "reading sample %" G_GINT64_FORMAT
                        " of the spike raster back from its temporary file failed (%s)", sample,
                        r < 0 ? g_strerror(errno) : "the file is shorter than written");
            return FALSE;
        }
        done += (size_t)r;
    }
    return TRUE;
}
