/* nc_gpu_register.c — the CUDA engine's entry in the engine table
 * (sim/nc_engine_registry.h), added when this library is linked in; its
 * settings live in nc_gpu_options.c.
 *
 * This is the one place that ties gpu/ to the registry: sim/ includes no gpu/
 * header, and the CLI and the workbench see the GPU only through the table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/nc_engine_registry.h"
#include "nc_config.h"
#include "nc_gpu.h"
#include "nc_gpu_nccl.h"
#include "nc_gpu_options.h"

static int gpu_available(char *why, size_t size)
{
    nc_gpu_info info;
    nc_gpu_query(&info);
    if (!info.available)
        snprintf(why, size, "%s", info.reason);
    return info.available;
}

static void gpu_details(char *buf, size_t size)
{
    nc_gpu_info info;
    nc_gpu_query(&info);
    if (info.available)
        snprintf(buf, size, "%s, %.1f GiB, %d SMs, compute %d.%d", info.name, (double)info.total_memory / (1 << 30),
                 info.sm_count, info.cc_major, info.cc_minor);
    else
        snprintf(buf, size, "%s", info.reason);
}

static nc_status gpu_create(const nc_engine_values *values, nc_engine **out, nc_error *err)
{
    nc_gpu_options_choose(values);
    return nc_engine_gpu_new(out, err);
}

/* 90 % of the device's free memory. */
static double gpu_train_memory(void)
{
    nc_gpu_info info;
    nc_gpu_query(&info);
    return info.available ? 0.9 * (double)info.free_memory : 0;
}

static const char *gpu_precision(const nc_engine *e)
{
    return nc_gpu_precision_name(nc_engine_gpu_get_precision(e));
}

static nc_status gpu_peak(const nc_engine *e, double *tflops, nc_error *err)
{
    return nc_gpu_measure_peak(nc_engine_gpu_get_precision(e), tflops, err);
}

static const nc_engine_info gpu_info = {
    .name = "gpu",
    .description = "CUDA: cuDNN convolutions (loaded at run time), cuBLAS; fp32 exact on tensor cores, tf32, bf16",
    /* the forward passes, and fine-tuning through gpu/nc_gpu_train.cu */
    .caps = NC_CAP_SNN | NC_CAP_TRAINING | NC_CAP_DEVICE_MEMORY | NC_CAP_STEP_SUMS,
    .n_options = NC_GPU_N_OPTIONS,
    .options = nc_gpu_option_table,
    .available = gpu_available,
    .details = gpu_details,
    .create = gpu_create,
    .train_backend_new = nc_train_backend_gpu_new,
    .train_memory = gpu_train_memory,
    .time_forward = nc_engine_gpu_time_forward,
    .precision = gpu_precision,
    .measure_peak = gpu_peak,
    .describe_kernels = nc_engine_gpu_describe_convs,
    /* several GPUs of this machine, one thread each (sim/nc_ranks.h) */
    .device_count = nc_gpu_device_count,
    .bind_device = nc_gpu_bind_device,
#if NC_HAVE_NCCL
    .allreduce_new = nc_gpu_nccl_new,
#endif
};

__attribute__((constructor)) static void register_gpu(void) { nc_engine_register(&gpu_info); }
