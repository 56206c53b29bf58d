/* fuzz_record.c — the recording reader (nc_recording_load, the HDF5 file
 * `neurocuda run --record` writes); input: the bytes of the file. */
#include "fuzz_common.h"
#include "nc_record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[1024];
    fuzz_write("recording.h5", data, size, path, sizeof path);
    (void)nc_recording_probe(path);
    nc_recording *r = NULL;
    nc_error err = {0};
    if (nc_recording_load(path, &r, &err) == NC_OK) {
        volatile double sink = r->accuracy_by_step[r->T - 1];
        for (int i = 0; i < r->n_layers; i++)
            for (int64_t e = 0; e < r->layers[i].n_events; e++)
                sink += r->layers[i].neuron[e] + r->layers[i].step[e] + r->layers[i].sample[e];
        (void)sink;
    }
    nc_recording_free(r);
    return 0;
}
