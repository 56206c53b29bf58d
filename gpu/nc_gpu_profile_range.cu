// nc_gpu_profile_range.cu — a profiler range over chosen syncs of the GPU
// trainer, so that ncu can time the steady steps of `bench --train` alone
// (run it with `ncu --profile-from-start off`): the planning of the first
// steps runs hundreds of cuDNN's trial kernels that would bury them.
//
// NC_GPU_PROFILE_SYNCS=A:B starts the range at the trainer's A-th sync and
// stops it at its B-th (a training step syncs twice: after the forward pass
// and after the gradients).  Unset: nothing happens.
#include <cuda_profiler_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpu/nc_gpu_internal.h"

void nc_gpu_profile_range_tick(void)
{
    static long start = -1, stop = -1, syncs = 0;
    if (start < 0) {
        const char *v = getenv("NC_GPU_PROFILE_SYNCS");
        if (!v || sscanf(v, "%ld:%ld", &start, &stop) != 2 || start < 1 || stop <= start)
            start = stop = 0; // unset or not A:B with 1 <= A < B: never
    }
    syncs++;
    if (syncs == start)
        cudaProfilerStart();
    else if (syncs == stop)
        cudaProfilerStop();
}
