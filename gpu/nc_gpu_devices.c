/* nc_gpu_devices.c — the device of each rank's thread (nc_gpu_nccl.h). */
#include <cuda_runtime.h>

#include "nc_gpu.h"
#include "nc_gpu_nccl.h"

/* cudaSetDevice is per host thread already; the index is kept as well so
 * that the engine and the trainer, which choose their device when they are
 * created, pick this one instead of device 0. */
static _Thread_local int thread_device;

int nc_gpu_device_count(void)
{
    nc_gpu_info info;
    nc_gpu_query(&info);
    return info.available ? info.device_count : 0;
}

nc_status nc_gpu_bind_device(int rank, nc_error *err)
{
    int count = nc_gpu_device_count();
    if (rank < 0 || rank >= count)
        return nc_fail(err, NC_ERR_UNSUPPORTED, "GPU %d asked for, but this machine has %d usable GPU%s", rank, count,
                       count == 1 ? "" : "s");
    cudaError_t e = cudaSetDevice(rank);
    if (e != cudaSuccess)
        return nc_fail(err, NC_ERR_DEVICE, "cudaSetDevice(%d): %s", rank, cudaGetErrorString(e));
    thread_device = rank;
    return NC_OK;
}

int nc_gpu_thread_device(void) { return thread_device; }
