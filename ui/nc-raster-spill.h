/* nc-raster-spill.h — the spike raster of the samples that do not fit the
 * memory budget, kept in a temporary file and read back one sample at a time.
 *
 * A run keeps the raster of its first `raster-samples` images.  The first
 * ones, as many as fit `record-memory-mb`, stay in the record (memory); the
 * record hands every finished batch to nc_raster_spill_sink (its
 * nc_raster_sink, on the worker thread), which writes the samples from
 * `first` on into the file: per sample one block, per layer its chosen
 * neurons × T bits, byte aligned.  The file is unlinked as soon as it is
 * created, so nothing is left behind, even after a crash.
 *
 * Thread safety: one thread writes (the sink), any thread reads; a sample
 * is readable once its whole batch is written (nc_raster_spill_samples).
 * Reference counted (atomic).  A write that fails (disk full) stops the
 * spill; nc_raster_spill_get_error says why, and the samples written
 * before stay readable. */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "../core/nc_record.h"

G_BEGIN_DECLS

typedef struct NcRasterSpill NcRasterSpill;

/* A spill for the record `rec` (its layers' chosen neurons and T) keeping
 * samples first … last − 1 (run indices), in a file of g_get_tmp_dir().
 * When the file cannot be made, the spill keeps nothing and
 * nc_raster_spill_get_error names the folder and why. */
NcRasterSpill *nc_raster_spill_new(const nc_record *rec, int64_t first, int64_t last);
NcRasterSpill *nc_raster_spill_ref(NcRasterSpill *spill);
void nc_raster_spill_unref(NcRasterSpill *spill);

/* The nc_raster_sink of the record the spill was made for (user = spill). */
void nc_raster_spill_sink(void *user, const nc_record *rec, int layer, int64_t first, int64_t n, int neurons, int T,
                          const uint8_t *bits);

/* The record it belongs to (compared, never dereferenced). */
const nc_record *nc_raster_spill_get_record(const NcRasterSpill *spill);
int64_t nc_raster_spill_first(const NcRasterSpill *spill);
/* Samples readable so far: first … first + samples − 1. */
int64_t nc_raster_spill_samples(const NcRasterSpill *spill);
/* Bytes written to the file so far. */
int64_t nc_raster_spill_bytes(const NcRasterSpill *spill);
/* Why the spill stopped, or NULL. */
const char *nc_raster_spill_get_error(const NcRasterSpill *spill);

/* Reads sample `sample` (a run index) of layer `layer` into bits (neurons ×
 * T bits, bit j·T + t, LSB first; (neurons·T + 7) / 8 bytes). */
gboolean nc_raster_spill_read(NcRasterSpill *spill, int layer, int64_t sample, uint8_t *bits, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(NcRasterSpill, nc_raster_spill_unref)

G_END_DECLS
