/* test_dataset_stream.c — streamed datasets (core/nc_dataset.h): reads give
 * the caller's samples in order, a read before the window rewinds, the
 * window stays small, and bad batches fail with a message that names them. */
#include "nc_dataset.h"
#include "nc_test.h"

#define PER 4 /* values per sample: 1 × 2 × 2 */

/* A source of `count` samples whose values are their index, in batches of
 * `batch`; it can be told to break one batch. */
typedef struct fake {
    int64_t count, next_index;
    int batch, rewinds, max_batch_seen;
    int64_t bad_batch;   /* 1-based batch to break, 0: none */
    int bad_kind;        /* 0 NaN, 1 label, 2 caller error, 3 ends early */
    float images[64 * PER];
    int32_t labels[64];
    int64_t batches;
} fake;

static int fake_next(void *user, const float **images, const int32_t **labels, int64_t *n, nc_error *err)
{
    fake *f = user;
    if (f->next_index >= f->count)
        return 0;
    f->batches++;
    int64_t m = f->count - f->next_index < f->batch ? f->count - f->next_index : f->batch;
    for (int64_t k = 0; k < m; k++) {
        for (int i = 0; i < PER; i++)
            f->images[k * PER + i] = (float)(f->next_index + k);
        f->labels[k] = (int32_t)((f->next_index + k) % 10);
    }
    if (f->batches == f->bad_batch) {
        if (f->bad_kind == 0)
            f->images[1] = NAN;
        if (f->bad_kind == 1)
            f->labels[0] = 10;
        if (f->bad_kind == 2)
            return nc_fail(err, NC_ERR_IO, "the loader broke"), -1;
        if (f->bad_kind == 3)
            return 0;
    }
    f->next_index += m;
    *images = f->images;
    *labels = f->labels;
    *n = m;
    return 1;
}

static int fake_rewind(void *user, nc_error *err)
{
    fake *f = user;
    f->next_index = 0;
    f->batches = 0;
    f->rewinds++;
    return 0;
}

static nc_dataset *open_fake(fake *f)
{
    nc_dataset_source src = {.count = f->count, .channels = 1, .height = 2, .width = 2, .num_classes = 10,
                             .name = "fake loader", .next = fake_next, .rewind = fake_rewind, .user = f};
    nc_dataset *ds = NULL;
    nc_error err = {0};
    NC_CHECK(nc_dataset_new_stream(&src, &ds, &err) == NC_OK, "%s", err.message);
    return ds;
}

static void test_reads_in_order(void)
{
    fake f = {.count = 103, .batch = 7};
    nc_dataset *ds = open_fake(&f);
    float x[10 * PER];
    int32_t y[10];
    int ok = 1;
    for (int64_t first = 0; first < 103; first += 10) {
        int64_t n = 103 - first < 10 ? 103 - first : 10;
        nc_dataset_batch(ds, first, n, x, y);
        for (int64_t k = 0; k < n; k++)
            ok &= x[k * PER + 3] == (float)(first + k) && y[k] == (first + k) % 10;
    }
    NC_CHECK(ok, "every sample arrives in order");
    NC_CHECK(f.rewinds == 0, "no rewind on a forward read (%d)", f.rewinds);
    nc_dataset_batch(ds, 5, 3, x, y); /* back: a new pass */
    NC_CHECK(f.rewinds == 1 && x[0] == 5.0f && y[2] == 7, "a read before the window rewinds");
    nc_error err = {0};
    NC_CHECK(nc_dataset_stream_status(ds, &err) == NC_OK, "%s", err.message);
    NC_CHECK(ds->images == NULL && !strcmp(ds->format, "stream"), "nothing held whole");
    nc_dataset_free(ds);
}

static void check_failure(int kind, const char *expect)
{
    fake f = {.count = 50, .batch = 8, .bad_batch = 3, .bad_kind = kind};
    nc_dataset *ds = open_fake(&f);
    float x[50 * PER];
    int32_t y[50];
    nc_dataset_batch(ds, 0, 50, x, y);
    nc_error err = {0};
    nc_status st = nc_dataset_stream_status(ds, &err);
    NC_CHECK(st != NC_OK, "kind %d fails", kind);
    NC_CHECK(strstr(err.message, expect) != NULL, "message '%s' says '%s'", err.message, expect);
    NC_CHECK(x[0] == 0.0f && y[49] == 0, "a failed read gives zeros");
    nc_dataset_free(ds);
}

static void test_bad_batches(void)
{
    check_failure(0, "batch 3, sample 0 holds NaN");
    check_failure(1, "label 10; the network has 10 classes");
    check_failure(2, "the loader broke");
    check_failure(3, "ended after 16 samples, but it declared 50");
}

static void test_bad_source(void)
{
    nc_dataset_source src = {.count = 0, .channels = 1, .height = 2, .width = 2, .num_classes = 10,
                             .next = fake_next, .rewind = fake_rewind};
    nc_dataset *ds = NULL;
    nc_error err = {0};
    NC_CHECK(nc_dataset_new_stream(&src, &ds, &err) == NC_ERR_ARGUMENT && ds == NULL, "no samples is refused");
    NC_CHECK(strstr(err.message, "at least 1 sample") != NULL, "%s", err.message);
}

int main(void)
{
    NC_RUN(test_reads_in_order);
    NC_RUN(test_bad_batches);
    NC_RUN(test_bad_source);
    return nc_test_done();
}
