/* nc_api_data.c — data streams of libneurocuda (neurocuda.h): the caller's
 * next/rewind functions behind a streamed nc_dataset (core/nc_dataset.h). */
#include "nc_api_private.h"

#include <stdio.h>
#include <stdlib.h>

/* The caller's error, in the library's type. */
static void copy_error(nc_error *err, const neurocuda_error *e, const char *what, const char *name)
{
    if (e->status != NEUROCUDA_OK && e->message[0])
        nc_fail(err, (nc_status)e->status, "%s", e->message);
    else
        nc_fail(err, NC_ERR_IO, "%s: %s failed", name, what);
}

static int next_batch(void *user, const float **images, const int32_t **labels, int64_t *n, nc_error *err)
{
    neurocuda_data *d = user;
    neurocuda_error e = {0};
    int got = d->next(d->user, images, labels, n, &e);
    if (got < 0)
        copy_error(err, &e, "reading a batch", d->name);
    return got;
}

static int rewind_data(void *user, nc_error *err)
{
    neurocuda_data *d = user;
    neurocuda_error e = {0};
    int rc = d->rewind(d->user, &e);
    if (rc != 0)
        copy_error(err, &e, "starting a new pass", d->name);
    return rc;
}

int neurocuda_data_stream(int64_t count, int channels, int height, int width, int classes, const char *name,
                          neurocuda_next_fn next, neurocuda_rewind_fn rewind, void *user, neurocuda_data **out,
                          neurocuda_error *err)
{
    *out = NULL;
    if (!next || !rewind)
        return nc_api_fail(err, NC_ERR_ARGUMENT, "a data stream needs next and rewind functions");
    neurocuda_data *d = calloc(1, sizeof *d);
    if (!d)
        return nc_api_fail(err, NC_ERR_MEMORY, "out of memory for a data stream");
    *d = (neurocuda_data){.next = next, .rewind = rewind, .user = user};
    snprintf(d->name, sizeof d->name, "%s", name ? name : "the data stream");
    nc_dataset_source src = {.count = count, .channels = channels, .height = height, .width = width,
                             .num_classes = classes, .name = d->name, .next = next_batch, .rewind = rewind_data,
                             .user = d};
    nc_error e = {0};
    nc_status st = nc_dataset_new_stream(&src, &d->ds, &e);
    if (st != NC_OK) {
        free(d);
        return nc_api_error(err, &e, st);
    }
    *out = d;
    return NEUROCUDA_OK;
}

void neurocuda_data_free(neurocuda_data *d)
{
    if (!d)
        return;
    nc_dataset_free(d->ds);
    free(d);
}
