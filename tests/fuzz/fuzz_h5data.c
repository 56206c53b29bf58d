/* fuzz_h5data.c — the HDF5 dataset reader (datasets `x` and `y` of one
 * file); input: the bytes of the .h5 file. */
#include "fuzz_dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[1024];
    fuzz_write("data.h5", data, size, path, sizeof path);
    fuzz_open_dataset(path, 0);
    fuzz_open_dataset(path, 2);
    return 0;
}
