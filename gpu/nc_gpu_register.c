/* nc_gpu_register.c — the CUDA engine's entry in the engine table
 * (sim/nc_engine_registry.h), added when this library is linked in, and the
 * engine's settings (nc_gpu_options_get in nc_gpu.h).
 *
 * This is the one place that ties gpu/ to the registry: sim/ includes no gpu/
 * header, and the CLI and the workbench see the GPU only through the table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/nc_engine_registry.h"
#include "nc_gpu.h"

/* The options, in the order of nc_gpu_options's fields. */
enum { OPT_PRECISION, OPT_CONV, OPT_CHUNK_MB, OPT_PROFILE, OPT_PEAK_N, OPT_TRAIN_CHUNK_MB, OPT_FAULT, N_OPTIONS };

static const nc_engine_option gpu_options[N_OPTIONS] = {
    [OPT_PRECISION] = {.key = "precision", .type = NC_ENGINE_OPTION_CHOICE, .default_value = "fp32",
                       .choices = "fp32|tf32|bf16|split-bf16|split-bf16x2",
                       .help = "products of conv and dense layers (nc_gpu.h: fp32 is as exact as the CPU)",
                       .env = "NC_GPU_PRECISION"},
    [OPT_CONV] = {.key = "conv", .type = NC_ENGINE_OPTION_CHOICE, .default_value = "auto",
                  .choices = "auto|cudnn|im2col",
                  .help = "how convolutions run: cuDNN (loaded at run time) or im2col + cuBLAS; auto: cuDNN in "
                          "tf32 and bf16, where it is faster",
                  .env = "NC_GPU_CONV"},
    [OPT_CHUNK_MB] = {.key = "chunk-mb", .type = NC_ENGINE_OPTION_INT, .default_value = "0", .min = 0,
                      .max = 65536, .help = "im2col chunk of a convolution in MiB (0: from the L2 cache size)",
                      .env = "NC_GPU_CHUNK_MB"},
    [OPT_PROFILE] = {.key = "profile", .type = NC_ENGINE_OPTION_BOOL, .default_value = "0",
                     .help = "bench: one more pass that prints each node's time on stderr",
                     .env = "NC_GPU_PROFILE"},
    [OPT_PEAK_N] = {.key = "peak-n", .type = NC_ENGINE_OPTION_INT, .default_value = "8192", .min = 256,
                    .max = 32768, .help = "bench: the n of the n×n×n GEMM that measures the peak",
                    .env = "NC_GPU_PEAK_N"},
    [OPT_TRAIN_CHUNK_MB] = {.key = "train-chunk-mb", .type = NC_ENGINE_OPTION_INT, .default_value = "64",
                            .min = 1, .max = 65536, .help = "fine-tuning: im2col chunk in MiB",
                            .env = "NC_GPU_TRAIN_CHUNK_MB"},
    [OPT_FAULT] = {.key = "fault", .type = NC_ENGINE_OPTION_TEXT, .default_value = "",
                   .help = "tests: inject faults, oom:N[+] and/or launch:N (nc_gpu.h)", .env = "NC_GPU_FAULT"},
};

static nc_engine_values chosen;      /* values set with --engine-opt        */
static int chosen_explicit[N_OPTIONS];

/* Each option's environment override, else its default. */
static void resolve_base(nc_engine_values *out)
{
    nc_engine_info info = {.name = "gpu", .n_options = N_OPTIONS, .options = gpu_options};
    nc_error ignored = {0};
    nc_engine_resolve(&info, NULL, out, &ignored);
}

/* The settings the engine reads: the values set when an engine was created
 * through the registry, else the environment override or the default, read
 * at every call (tests change the variables between cases). */
nc_gpu_options nc_gpu_options_get(void)
{
    static nc_engine_values current; /* the strings below point into it */
    resolve_base(&current);
    for (int i = 0; i < N_OPTIONS; i++)
        if (chosen_explicit[i])
            memcpy(current.text[i], chosen.text[i], sizeof current.text[i]);
    nc_gpu_options o = {.precision = current.text[OPT_PRECISION], .conv = current.text[OPT_CONV],
                        .chunk_mb = atol(current.text[OPT_CHUNK_MB]),
                        .profile = atoi(current.text[OPT_PROFILE]), .peak_n = atol(current.text[OPT_PEAK_N]),
                        .train_chunk_mb = atol(current.text[OPT_TRAIN_CHUNK_MB]),
                        .fault = current.text[OPT_FAULT]};
    return o;
}

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
    nc_engine_values base;
    resolve_base(&base);
    chosen = *values;
    for (int i = 0; i < N_OPTIONS; i++) /* only what was set: the rest follows the environment */
        chosen_explicit[i] = strcmp(values->text[i], base.text[i]) != 0;
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
    .caps = NC_CAP_SNN | NC_CAP_TRAINING | NC_CAP_DEVICE_MEMORY,
    .n_options = N_OPTIONS,
    .options = gpu_options,
    .available = gpu_available,
    .details = gpu_details,
    .create = gpu_create,
    .train_backend_new = nc_train_backend_gpu_new,
    .train_memory = gpu_train_memory,
    .time_forward = nc_engine_gpu_time_forward,
    .precision = gpu_precision,
    .measure_peak = gpu_peak,
    .describe_kernels = nc_engine_gpu_describe_convs,
};

__attribute__((constructor)) static void register_gpu(void) { nc_engine_register(&gpu_info); }
