/* nc_gpu_nccl.h — several GPUs of one host: the device of each rank's thread
 * and the gradient sums between the ranks through NCCL (sim/nc_allreduce.h,
 * sim/nc_ranks.h).  nc_gpu_register.c puts these into the GPU engine's entry
 * of the engine table.
 *
 * One thread per GPU: nc_gpu_bind_device makes the calling thread use device
 * `rank` and remembers it, and the engine and the trainer backend choose
 * nc_gpu_thread_device() when they are created on that thread (0 on a
 * thread that was never bound: one GPU, as before): the measured peak
 * (nc_gpu_blas.cu), the engine (nc_engine_gpu.cu, which keeps its device for
 * every later call) and the trainer backend (nc_gpu_train.cu).
 *
 * NCCL is opened from the CUDA toolkit at build time (meson: nccl.h and
 * libnccl beside cudart); NVLink SHARP multicast stays off
 * (NCCL_NVLS_ENABLE=0 is set before NCCL initialises).  Without NCCL the
 * build has the device functions but no sums, and the runner says that
 * several GPUs need NCCL. */
#ifndef NC_GPU_NCCL_H
#define NC_GPU_NCCL_H

#include "../core/nc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct nc_allreduce;

/* The GPUs this process can use (0 without a usable one). */
int nc_gpu_device_count(void);
/* The calling thread uses device `rank` from now on. */
nc_status nc_gpu_bind_device(int rank, nc_error *err);
/* The device the calling thread was bound to (0 if never). */
int nc_gpu_thread_device(void);
/* Gradient sums over `ranks` GPUs, one NCCL communicator per rank (each
 * rank joins on its own bound thread).  Only in a build with NCCL
 * (NC_HAVE_NCCL). */
nc_status nc_gpu_nccl_new(int ranks, struct nc_allreduce **out, nc_error *err);

#ifdef __cplusplus
}
#endif

#endif
