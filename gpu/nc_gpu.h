/* nc_gpu.h — the C face of the CUDA code in gpu/.  Compiled only when the
 * build finds nvcc (NC_HAVE_CUDA in nc_config.h); everything here returns
 * errors instead of exiting, so a machine without a GPU or driver gets a clear
 * reason and the CPU engine goes on. */
#ifndef NC_GPU_H
#define NC_GPU_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nc_gpu_info {
    int available;          /* 1 when a usable device was found             */
    int device_count;
    char name[256];         /* device 0                                     */
    size_t total_memory;    /* bytes                                        */
    size_t free_memory;     /* bytes                                        */
    int sm_count;
    int cc_major, cc_minor; /* compute capability                           */
    int driver_version;     /* e.g. 13000                                   */
    int runtime_version;
    char reason[512];       /* why unavailable (no driver, no device, ...)  */
} nc_gpu_info;

/* Fills info about device 0; never fails: an unusable GPU is described in
 * info->reason with available = 0. */
void nc_gpu_query(nc_gpu_info *info);

#ifdef __cplusplus
}
#endif

#endif
