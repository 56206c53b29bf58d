/* fuzz_project.c — the project-file reader (nc_project_load, .ncsnn);
 * input: the bytes of a project file (HDF5). */
#define NC_FUZZ_WANT_NET
#include "fuzz_common.h"
#include "nc_project.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[1024];
    fuzz_write("project.ncsnn", data, size, path, sizeof path);
    nc_project *p = NULL;
    nc_error err = {0};
    if (nc_project_load(path, &p, &err) == NC_OK) {
        fuzz_use_net(p->net);
        (void)nc_project_get_meta(p, "x");
        double v;
        (void)nc_project_get_metric(p, "ann_accuracy", &v);
    }
    nc_project_free(p);
    return 0;
}
