/* fuzz_idx.c — the IDX dataset reader (MNIST layout, plain or gzip).
 * Input: the images file, FUZZ_SPLIT, the labels file. */
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
    fuzz_write("t10k-images-idx3-ubyte", parts[0], sizes[0], images, sizeof images);
    fuzz_write("t10k-labels-idx1-ubyte", n > 1 ? parts[1] : (const uint8_t *)"", n > 1 ? sizes[1] : 0, labels,
               sizeof labels);
    fuzz_open_dataset(images, 0);
    fuzz_open_dataset(fuzz_dir(), 3); /* the folder form, with a limit */
    return 0;
}
