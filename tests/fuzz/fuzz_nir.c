/* fuzz_nir.c — NIR import (nc_nir_load), by NIR's rules and, for files we
 * wrote, from our metadata; input: the bytes of a .nir (HDF5) file. */
#define NC_FUZZ_WANT_NET
#include "fuzz_common.h"
#include "nc_nir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[1024];
    fuzz_write("graph.nir", data, size, path, sizeof path);
    (void)nc_nir_probe(path);
    /* one load per input (they are slow): the last byte picks NIR's rules
     * alone or, for files we wrote, our metadata */
    nc_nir_load_options opts = {.ignore_ours = size > 0 && (data[size - 1] & 1)};
    nc_nir_notes notes = {0};
    nc_net *net = NULL;
    nc_error err = {0};
    if (nc_nir_load(path, &opts, &net, &notes, &err) == NC_OK) {
        char text[4096];
        nc_nir_notes_format(&notes, -1, text, sizeof text);
        fuzz_use_net(net);
    }
    nc_nir_notes_clear(&notes);
    nc_net_free(net);
    return 0;
}
