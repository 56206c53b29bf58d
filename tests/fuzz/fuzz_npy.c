/* fuzz_npy.c — the NumPy .npy reader (nc_npy_read and .npy datasets).
 * Input: the images array, FUZZ_SPLIT, the labels array. */
#include "fuzz_dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char images[1024], labels[1024];
    fuzz_write_pair(data, size, "x.npy", "x_labels.npy", images, labels);
    nc_tensor *t = NULL;
    nc_error err = {0};
    if (nc_npy_read(images, &t, &err) == NC_OK)
        (void)nc_tensor_numel(t);
    nc_tensor_free(t);
    fuzz_open_dataset(images, 0);
    fuzz_open_dataset(images, 2);
    return 0;
}
