/* fuzz_idx.c — the IDX dataset reader (MNIST layout, plain or gzip).
 * Input: the images file, FUZZ_SPLIT, the labels file. */
#include "fuzz_dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char images[1024], labels[1024];
    fuzz_write_pair(data, size, "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", images, labels);
    fuzz_open_dataset(images, 0);
    fuzz_open_dataset(fuzz_dir(), 3); /* the folder form, with a limit */
    return 0;
}
