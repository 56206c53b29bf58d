/* fuzz_dataset.h — the part the three dataset harnesses share: open the
 * dataset written to `spec` and use it the way an evaluation would. */
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

#endif
