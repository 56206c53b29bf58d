/* nc_dataset_stream.h — the private side of streamed datasets (the public
 * side is in nc_dataset.h: nc_dataset_source, nc_dataset_new_stream). */
#ifndef NC_DATASET_STREAM_H
#define NC_DATASET_STREAM_H

#include "nc_dataset.h"

typedef struct nc_dataset_stream nc_dataset_stream;

void nc_dataset_stream_free(nc_dataset_stream *s); /* NULL is a no-op */
/* Samples [first, first + n) (inside the declared count) into images and
 * labels (either may be NULL); zeros once the stream has failed. */
void nc_dataset_stream_batch(nc_dataset_stream *s, int64_t first, int64_t n, float *images, int32_t *labels);

#endif
