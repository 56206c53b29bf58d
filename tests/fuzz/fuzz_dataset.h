/* fuzz_dataset.h — the part the three dataset harnesses share: write an
 * images + labels pair, open the dataset written to `spec` and use it the
 * way an evaluation would. */
#ifndef NC_FUZZ_DATASET_H
#define NC_FUZZ_DATASET_H

#include "fuzz_common.h"
#include "nc_dataset.h"

static inline void fuzz_open_dataset(const char *spec, int64_t limit)
{
    nc_dataset *ds = NULL;
    nc_error err = {0};
    if (nc_dataset_open(spec, NC_SPLIT_TEST, NULL, limit, &ds, &err) == NC_OK) {
        int64_t n = ds->count < 2 ? ds->count : 2;
        size_t per = (size_t)ds->channels * (size_t)ds->height * (size_t)ds->width;
        float *images = malloc(n * per * sizeof(float) + 1);
        int32_t labels[2];
        if (images && n > 0)
            nc_dataset_batch(ds, ds->count - n, n, images, labels);
        free(images);
    }
    nc_dataset_free(ds);
}

/* Writes an input "images [FUZZ_SPLIT labels]" as two files (an empty
 * labels file when there is no separator); their paths go to images and
 * labels (1024 bytes each). */
static inline void fuzz_write_pair(const uint8_t *data, size_t size, const char *images_name,
                                   const char *labels_name, char *images, char *labels)
{
    const uint8_t *parts[2];
    size_t sizes[2];
    int n = fuzz_split(data, size, parts, sizes, 2);
    fuzz_write(images_name, parts[0], sizes[0], images, 1024);
    fuzz_write(labels_name, n > 1 ? parts[1] : (const uint8_t *)"", n > 1 ? sizes[1] : 0, labels, 1024);
}

#endif
