// nc_gpu_info.cu — device discovery for `neurocuda engines` and the engine
// registry.  Every CUDA call is checked; failures become a reason string.
#include "gpu/nc_gpu.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

extern "C" void nc_gpu_query(nc_gpu_info *info)
{
    memset(info, 0, sizeof *info);
    cudaRuntimeGetVersion(&info->runtime_version);
    cudaError_t e = cudaDriverGetVersion(&info->driver_version);
    if (e != cudaSuccess || info->driver_version == 0) {
        snprintf(info->reason, sizeof info->reason,
                 "no NVIDIA driver found (cudaDriverGetVersion: %s); install the driver or use --engine cpu",
                 e != cudaSuccess ? cudaGetErrorString(e) : "version 0");
        return;
    }
    e = cudaGetDeviceCount(&info->device_count);
    if (e != cudaSuccess || info->device_count == 0) {
        snprintf(info->reason, sizeof info->reason, "no CUDA device (cudaGetDeviceCount: %s); use --engine cpu",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        info->device_count = 0;
        return;
    }
    cudaDeviceProp prop;
    e = cudaGetDeviceProperties(&prop, 0);
    if (e != cudaSuccess) {
        snprintf(info->reason, sizeof info->reason, "cudaGetDeviceProperties failed: %s", cudaGetErrorString(e));
        return;
    }
    snprintf(info->name, sizeof info->name, "%s", prop.name);
    info->sm_count = prop.multiProcessorCount;
    info->cc_major = prop.major;
    info->cc_minor = prop.minor;
    info->total_memory = prop.totalGlobalMem;
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess)
        info->free_memory = free_bytes;
    info->available = 1;
}
