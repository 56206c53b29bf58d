/* fuzz_npy.c — the NumPy .npy reader (nc_npy_read and .npy datasets).
 * Input: the images array, FUZZ_SPLIT, the labels array. */
#include "fuzz_dataset.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_init_budget();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *parts[2];
    size_t sizes[2];
    char images[1024], labels[1024];
    int n = fuzz_split(data, size, parts, sizes, 2);
    fuzz_write("x.npy", parts[0], sizes[0], images, sizeof images);
    fuzz_write("x_labels.npy", n > 1 ? parts[1] : (const uint8_t *)"", n > 1 ? sizes[1] : 0, labels,
               sizeof labels);
    nc_tensor *t = NULL;
    nc_error err = {0};
    if (nc_npy_read(images, &t, &err) == NC_OK)
        (void)nc_tensor_numel(t);
    nc_tensor_free(t);
    fuzz_open_dataset(images, 0);
    fuzz_open_dataset(images, 2);
    return 0;
}
