/* nc_gpu_options.c — the CUDA engine's settings: the option table that the
 * engine table lists (nc_gpu_register.c), the values chosen when an engine is
 * created, and nc_gpu_options_get, which the engine's files read (nc_gpu.h).
 * A file of its own so that the engine's files depend on their settings
 * without depending on the file that registers the engine. */
#include <stdlib.h>
#include <string.h>

#include "../sim/nc_engine_registry.h"
#include "nc_gpu.h"
#include "nc_gpu_options.h"

/* The options, in the order of nc_gpu_options's fields; then "gpus", which
 * the runner reads (sim/nc_ranks.h), not the engine. */
enum { OPT_PRECISION, OPT_CONV, OPT_CHUNK_MB, OPT_PROFILE, OPT_PEAK_N, OPT_TRAIN_CHUNK_MB, OPT_FAULT, OPT_GRAPHS, OPT_GPUS,
       N_OPTIONS };

_Static_assert((int)N_OPTIONS == (int)NC_GPU_N_OPTIONS, "nc_gpu_options.h counts the options");

const nc_engine_option nc_gpu_option_table[N_OPTIONS] = {
    [OPT_PRECISION] = {.key = "precision", .type = NC_ENGINE_OPTION_CHOICE, .default_value = "fp32",
                       .choices = "fp32|tf32|bf16|split-bf16|split-bf16x2",
                       .help = "products of conv and dense layers (nc_gpu.h: fp32 is as exact as the CPU); the "
                               "GPU trainer: tf32 on TF32 tensor cores, bf16 with bf16 convolutions and fp32 "
                               "weights (mixed precision), the others fp32",
                       .env = "NC_GPU_PRECISION"},
    [OPT_CONV] = {.key = "conv", .type = NC_ENGINE_OPTION_CHOICE, .default_value = "auto",
                  .choices = "auto|cudnn|im2col|bf16x2|unfused|fused",
                  .help = "how convolutions run: cuDNN (loaded at run time) or im2col + cuBLAS; auto: cuDNN where it "
                          "is faster (fp32: the exact mode on bf16 tensor cores; an analog input of T·N rows "
                          "keeps im2col) and, in bf16, 3×3 spike convs with 16 to 64 input channels on own "
                          "kernels with 16-bit currents: the weight in 16-bit fixed point on int8 tensor cores "
                          "(32 or 64 channels; with 32, the IF after it in its epilogue), else in two bf16 parts "
                          "(bf16x2: two bf16 parts for all; unfused: the IF in a kernel of its own; fused: in "
                          "the epilogue with 64 channels too; cudnn: "
                          "cuDNN's bf16, 8-bit currents); the GPU trainer: cuDNN unless im2col (fp32 sgemm in "
                          "every precision)",
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
                   .help = "tests: inject faults, oom:N[+], launch:N, graph and/or capture (nc_gpu.h)", .env = "NC_GPU_FAULT"},
    [OPT_GRAPHS] = {.key = "graphs", .type = NC_ENGINE_OPTION_BOOL, .default_value = "1",
                     .help = "replay a forward pass of a batch shape seen before as one CUDA graph (captured at "
                             "its second pass; not with an observer, Poisson input or fault injection)",
                     .env = "NC_GPU_GRAPHS"},
    [OPT_GPUS] = {.key = "gpus", .type = NC_ENGINE_OPTION_TEXT, .default_value = "1",
                  .help = "GPUs of this machine a job spreads over, N or all (--gpus): measurements dealt over them, "
                          "fine-tuning data-parallel through NCCL",
                  .env = "NC_GPUS"},
};

static nc_engine_values chosen;      /* values set with --engine-opt        */
static int chosen_explicit[N_OPTIONS];

/* Each option's environment override, else its default. */
static void resolve_base(nc_engine_values *out)
{
    nc_engine_info info = {.name = "gpu", .n_options = N_OPTIONS, .options = nc_gpu_option_table};
    nc_error ignored = {0};
    nc_engine_resolve(&info, NULL, out, &ignored);
}

/* The settings the engine reads: the values set when an engine was created
 * through the registry, else the environment override or the default, read
 * at every call (tests change the variables between cases). */
nc_gpu_options nc_gpu_options_get(void)
{
    /* the strings below point into it; one per thread: the ranks of several
     * GPUs create their engines at the same time (sim/nc_ranks.h) */
    static _Thread_local nc_engine_values current;
    resolve_base(&current);
    for (int i = 0; i < N_OPTIONS; i++)
        if (chosen_explicit[i])
            memcpy(current.text[i], chosen.text[i], sizeof current.text[i]);
    nc_gpu_options o = {.precision = current.text[OPT_PRECISION], .conv = current.text[OPT_CONV],
                        .chunk_mb = atol(current.text[OPT_CHUNK_MB]),
                        .profile = atoi(current.text[OPT_PROFILE]), .peak_n = atol(current.text[OPT_PEAK_N]),
                        .train_chunk_mb = atol(current.text[OPT_TRAIN_CHUNK_MB]),
                        .fault = current.text[OPT_FAULT], .graphs = atoi(current.text[OPT_GRAPHS])};
    return o;
}

void nc_gpu_options_choose(const nc_engine_values *values)
{
    nc_engine_values base;
    resolve_base(&base);
    chosen = *values;
    for (int i = 0; i < N_OPTIONS; i++) /* only what was set: the rest follows the environment */
        chosen_explicit[i] = strcmp(values->text[i], base.text[i]) != 0;
}
