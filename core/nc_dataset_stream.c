/* nc_dataset_stream.c — a dataset whose samples arrive batch by batch from
 * a caller (nc_dataset.h, "streams").
 *
 * The stream keeps a window: the samples [base, base + have) pulled last.
 * A read of [first, first + n) drops what lies before `first`, pulls batches
 * until the window reaches first + n, and copies out.  Readers go forward,
 * so the window never holds more than one read plus one caller batch; a read
 * before `base` rewinds the caller and pulls from the start again.
 *
 * Every pulled batch is checked (size, finite values, labels in range)
 * before it is kept: a bad batch fails the stream with a message naming the
 * batch and the sample, and the failure is kept for nc_dataset_stream_status. */
#include "nc_dataset_stream.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct nc_dataset_stream {
    nc_dataset_source src;
    int64_t per;          /* floats per sample                          */
    int64_t base, have;   /* the window: samples [base, base + have)    */
    int64_t cap;          /* samples the buffers hold                   */
    float *images;
    int32_t *labels;
    int64_t batches;      /* batches pulled in this pass (for messages) */
    nc_error failure;     /* code NC_OK until the first failure         */
};

static void fail(nc_dataset_stream *s, const nc_error *err)
{
    if (s->failure.code == NC_OK)
        s->failure = *err;
}

/* Room for `want` samples in the window buffers. */
static int reserve(nc_dataset_stream *s, int64_t want, nc_error *err)
{
    if (want <= s->cap)
        return 0;
    int64_t cap = s->cap > 0 ? s->cap : 256;
    while (cap < want)
        cap *= 2;
    size_t bytes;
    if (nc_mul_size((size_t)cap, (size_t)s->per * sizeof(float), &bytes) != 0) {
        nc_fail(err, NC_ERR_MEMORY, "%s: a batch of %lld samples is too large", s->src.name, (long long)want);
        return -1;
    }
    if (nc_budget_check(bytes, "the stream's window", err) != NC_OK)
        return -1;
    float *images = realloc(s->images, bytes);
    if (images)
        s->images = images;
    int32_t *labels = images ? realloc(s->labels, (size_t)cap * sizeof(int32_t)) : NULL;
    if (labels)
        s->labels = labels;
    if (!images || !labels) {
        nc_fail(err, NC_ERR_MEMORY, "out of memory for the stream's window");
        return -1;
    }
    s->cap = cap;
    return 0;
}

/* A pulled batch: finite values and labels in range. */
static int check_batch(const nc_dataset_stream *s, const float *images, const int32_t *labels, int64_t n,
                       nc_error *err)
{
    for (int64_t k = 0; k < n; k++) {
        const float *x = images + k * s->per;
        for (int64_t i = 0; i < s->per; i++)
            if (!isfinite(x[i])) {
                nc_fail(err, NC_ERR_ARGUMENT, "%s: batch %lld, sample %lld holds NaN or infinity (value %lld)",
                        s->src.name, (long long)s->batches, (long long)k, (long long)i);
                return -1;
            }
        if (labels[k] < 0 || labels[k] >= s->src.num_classes) {
            nc_fail(err, NC_ERR_ARGUMENT,
                    "%s: batch %lld, sample %lld has label %d; the network has %d classes (labels 0 to %d)",
                    s->src.name, (long long)s->batches, (long long)k, (int)labels[k], s->src.num_classes,
                    s->src.num_classes - 1);
            return -1;
        }
    }
    return 0;
}

/* Pulls one batch onto the end of the window; 0, or -1 (s->failure set). */
static int pull(nc_dataset_stream *s)
{
    nc_error err = {0};
    const float *images = NULL;
    const int32_t *labels = NULL;
    int64_t n = 0;
    int got = s->src.next(s->src.user, &images, &labels, &n, &err);
    s->batches++;
    if (got < 0) {
        if (err.code == NC_OK)
            nc_fail(&err, NC_ERR_IO, "%s failed in batch %lld", s->src.name, (long long)s->batches);
        fail(s, &err);
        return -1;
    }
    if (got == 0) {
        nc_fail(&err, NC_ERR_ARGUMENT, "%s ended after %lld samples, but it declared %lld", s->src.name,
                (long long)(s->base + s->have), (long long)s->src.count);
        fail(s, &err);
        return -1;
    }
    if (n < 1 || !images || !labels) {
        nc_fail(&err, NC_ERR_ARGUMENT, "%s: batch %lld is empty", s->src.name, (long long)s->batches);
        fail(s, &err);
        return -1;
    }
    if (check_batch(s, images, labels, n, &err) != 0 || reserve(s, s->have + n, &err) != 0) {
        fail(s, &err);
        return -1;
    }
    memcpy(s->images + s->have * s->per, images, (size_t)(n * s->per) * sizeof(float));
    memcpy(s->labels + s->have, labels, (size_t)n * sizeof(int32_t));
    s->have += n;
    return 0;
}

static int rewind_stream(nc_dataset_stream *s)
{
    nc_error err = {0};
    if (s->src.rewind(s->src.user, &err) != 0) {
        if (err.code == NC_OK)
            nc_fail(&err, NC_ERR_IO, "%s could not start a new pass", s->src.name);
        fail(s, &err);
        return -1;
    }
    s->base = s->have = s->batches = 0;
    return 0;
}

/* Forgets the window's samples before `first` (they were read). */
static void drop_before(nc_dataset_stream *s, int64_t first)
{
    int64_t k = first - s->base;
    if (k <= 0)
        return;
    if (k > s->have)
        k = s->have;
    memmove(s->images, s->images + k * s->per, (size_t)((s->have - k) * s->per) * sizeof(float));
    memmove(s->labels, s->labels + k, (size_t)(s->have - k) * sizeof(int32_t));
    s->base += k;
    s->have -= k;
}

void nc_dataset_stream_batch(nc_dataset_stream *s, int64_t first, int64_t n, float *images, int32_t *labels)
{
    int ok = s->failure.code == NC_OK;
    if (ok && first < s->base)
        ok = rewind_stream(s) == 0;
    while (ok) {
        drop_before(s, first); /* also skips whole batches read past */
        if (s->base + s->have >= first + n)
            break;
        ok = pull(s) == 0;
    }
    if (!ok) { /* the driver stops at the next status check */
        if (images)
            memset(images, 0, (size_t)(n * s->per) * sizeof(float));
        if (labels)
            memset(labels, 0, (size_t)n * sizeof(int32_t));
        return;
    }
    int64_t at = first - s->base;
    if (images)
        memcpy(images, s->images + at * s->per, (size_t)(n * s->per) * sizeof(float));
    if (labels)
        memcpy(labels, s->labels + at, (size_t)n * sizeof(int32_t));
}

void nc_dataset_stream_free(nc_dataset_stream *s)
{
    if (!s)
        return;
    free(s->images);
    free(s->labels);
    free(s);
}

nc_status nc_dataset_new_stream(const nc_dataset_source *src, nc_dataset **out, nc_error *err)
{
    *out = NULL;
    if (!src || !src->next || !src->rewind)
        return nc_fail(err, NC_ERR_ARGUMENT, "a stream needs next and rewind functions");
    const char *name = src->name ? src->name : "the data stream";
    if (src->count < 1 || src->channels < 1 || src->height < 1 || src->width < 1 || src->num_classes < 1)
        return nc_fail(err, NC_ERR_ARGUMENT,
                       "%s: declare at least 1 sample, 1 class and a sample shape of at least 1×1×1 "
                       "(got %lld samples of %d×%d×%d, %d classes)",
                       name, (long long)src->count, src->channels, src->height, src->width, src->num_classes);
    if (src->channels > NC_MAX_CHANNELS || src->height > (1 << 16) || src->width > (1 << 16))
        return nc_fail(err, NC_ERR_ARGUMENT, "%s: a sample of %d×%d×%d is larger than this program reads", name,
                       src->channels, src->height, src->width);
    nc_dataset *ds = calloc(1, sizeof *ds);
    nc_dataset_stream *s = calloc(1, sizeof *s);
    if (!ds || !s) {
        free(ds);
        free(s);
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for a data stream");
    }
    s->src = *src;
    s->src.name = name;
    s->per = (int64_t)src->channels * src->height * src->width;
    *ds = (nc_dataset){.count = src->count, .channels = src->channels, .height = src->height,
                       .width = src->width, .num_classes = src->num_classes, .stream = s};
    snprintf(ds->path, sizeof ds->path, "%s", name);
    snprintf(ds->format, sizeof ds->format, "stream");
    *out = ds;
    return NC_OK;
}

nc_status nc_dataset_stream_status(const nc_dataset *ds, nc_error *err)
{
    if (!ds || !ds->stream || ds->stream->failure.code == NC_OK)
        return NC_OK;
    if (err)
        *err = ds->stream->failure;
    return ds->stream->failure.code;
}
