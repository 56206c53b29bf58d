/* nc_gpu.h — the C face of the CUDA code in gpu/.  Compiled only when the
 * build finds nvcc (NC_HAVE_CUDA in nc_config.h); everything here returns
 * errors instead of exiting, so a machine without a GPU or driver gets a clear
 * reason and the CPU engine goes on.
 *
 * The GPU engine ("gpu", gpu/nc_engine_gpu.cu) runs everything the CPU engine
 * runs (sim/engine_cpu.c is the reference) in ANN, QCFS and SNN mode:
 *   - values live on the device, batch-major [rows, C, H, W] like the CPU
 *     engine; in SNN mode rows = T·N, time-major, so each conv/dense layer is
 *     GEMMs over all T steps at once (T folded into the GEMM);
 *   - a value that is the same at every step (direct-encoded input and what is
 *     computed from it before the first IF neuron: layer 1) is computed once;
 *   - the IF recurrence of a layer is ONE kernel, one thread per neuron, the
 *     steps innermost per thread ([T, N·numel] layout: coalesced), membrane in
 *     a register, writing only the spike values (θ or 0);
 *   - a conv/dense bias is added in the kernel of the neuron (or MaxPool) that
 *     reads the layer, when that is its only reader and no observer is set;
 *   - convolutions: im2col in chunks of samples that fit in half the L2 cache
 *     (NC_GPU_CHUNK_MB overrides), each chunk one strided-batched cuBLAS GEMM;
 *     grouped convs with < 4 outputs per group (depthwise) a direct kernel;
 *   - observers get node outputs copied to the host only when set, in chunks
 *     of whole steps (SNN) or the batch (ANN/QCFS).
 * Fine-tuning runs on the GPU trainer (gpu/nc_gpu_train.cu, the "gpu"
 * backend of sim/nc_train_backend.h): the registry's entry claims
 * NC_CAP_TRAINING.
 *
 * Precision modes (products of the conv and dense layers):
 *   fp32        cuBLAS CUBLAS_COMPUTE_32F, no TF32: products as exact as the
 *               CPU engine (only the summation order differs);
 *   tf32        CUBLAS_COMPUTE_32F_FAST_TF32 (operands rounded to 10 bits);
 *   bf16        operands in bf16, fp32 accumulation.  Spikes are exact: an
 *               operand derived from IF spikes (θ·{0,1}, through flatten,
 *               gated MaxPool and AvgPools of a constant window count D) is
 *               fed as the integer count q = x·D/θ and θ/D is folded into the
 *               weights before rounding them to bf16;
 *   split-bf16  the same spike operands with the θ/D-scaled fp32 weights split
 *               into 3 bf16 parts (hi + mid + lo, 24 significand bits): three
 *               bf16 GEMMs accumulated in fp32 give fp32-accurate products at
 *               tensor-core speed; split-bf16x2 uses 2 parts (16 bits).  An
 *               analog operand (the input image, ANN mode, after Add/Concat)
 *               runs in fp32 in the split modes.
 * The default is fp32, or the engine option "precision" (nc_gpu_options)
 * when a gpu engine is created.
 *
 * Not on the GPU yet (nc_engine_check names them): the NIR neuron models
 * (LIF, CubaLIF, LI, CubaLI, I, NIR-IF, Threshold, Delay) and recurrent
 * edges, which the CPU engine runs step by step.
 *
 * Like the CPU engine, the GPU engine copies what it needs of the net at
 * load (weights, thresholds): load again after changing the net.
 *
 * Faults: an out-of-memory or a failed launch ends the load or the pass with
 * NC_ERR_MEMORY / NC_ERR_DEVICE and a message naming the node; the pass's
 * device buffers are freed, so the engine (or, after a sticky CUDA error, at
 * least the host: free the engine and use the CPU one) stays usable.  For
 * tests, the option "fault" (NC_GPU_FAULT, nc_gpu_options) injects them: "oom:N" makes
 * the N-th device allocation fail with cudaErrorMemoryAllocation ("oom:N+":
 * that one and every later one, a full device),
 * "launch:N" the N-th checked kernel launch with cudaErrorLaunchFailure,
 * "graph" makes cuDNN's graph API refuse every plan (the exact fp32 mode then
 * runs one TF32 pass per weight part), "capture" makes every capture of a
 * pass as a CUDA graph fail (the pass then runs node by node; the only fault
 * under which passes are still captured) (several may be given, comma-separated;
 * N counts from 1, and the counts start again whenever the variable's value
 * changes). */
#ifndef NC_GPU_H
#define NC_GPU_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "../sim/nc_engine.h"

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

/* ---- the engine ---------------------------------------------------------- */

typedef enum nc_gpu_precision {
    NC_GPU_FP32,
    NC_GPU_TF32,
    NC_GPU_BF16,
    NC_GPU_SPLIT_BF16,   /* 3 bf16 parts of the weights */
    NC_GPU_SPLIT_BF16X2, /* 2 bf16 parts                */
    NC_GPU_PRECISION_COUNT
} nc_gpu_precision;

/* "fp32", "tf32", "bf16", "split-bf16", "split-bf16x2". */
const char *nc_gpu_precision_name(nc_gpu_precision p);
/* Parses a name above (also "split-bf16x3" = split-bf16); 0 ok, -1 unknown. */
int nc_gpu_precision_parse(const char *text, nc_gpu_precision *out);

/* Creates the GPU engine on device 0 (a CUDA stream and a cuBLAS handle of its
 * own).  Fails with NC_ERR_UNSUPPORTED and the reason from nc_gpu_query when
 * there is no usable device, NC_ERR_DEVICE when CUDA or cuBLAS fail, and
 * NC_ERR_ARGUMENT when NC_GPU_PRECISION holds an unknown name.  Free it with
 * nc_engine_free. */
nc_status nc_engine_gpu_new(nc_engine **out, nc_error *err);

/* 1 if e is a GPU engine. */
int nc_engine_is_gpu(const nc_engine *e);

/* Sets the precision of e (a GPU engine; before or after load).  Fails with
 * NC_ERR_ARGUMENT for another engine. */
nc_status nc_engine_gpu_set_precision(nc_engine *e, nc_gpu_precision p, nc_error *err);
nc_gpu_precision nc_engine_gpu_get_precision(const nc_engine *e);

/* What ran each convolution of the loaded net in the last passes: one line a
 * conv node ("cuDNN IMPLICIT_PRECOMP_GEMM, bf16 tensor cores, NHWC, ..." or
 * "im2col + cuBLAS GEMM"), and one a dense node that read its flatten's
 * channels-last value with permuted weight columns, after a line that says
 * whether cuDNN was found.
 * Convolutions run through cuDNN (loaded at run time) in tf32 and bf16, and
 * as im2col + cuBLAS otherwise; the engine option conv (NC_GPU_CONV)
 * chooses otherwise. */
void nc_engine_gpu_describe_convs(const nc_engine *e, char *buf, size_t size);

/* Times forward passes of e on `input` with CUDA events on the engine's
 * stream: the input is uploaded once, then `warmup` untimed and `repeats`
 * timed passes run on the device (the output stays on the device, no
 * observer; opts->observer is ignored).  *times_ms receives `repeats` times
 * in milliseconds (caller's array, may be NULL); *median_ms their median.
 * With the option profile = 1 (NC_GPU_PROFILE) one more pass records an event
 * after every node and prints each node's time on stderr. */
nc_status nc_engine_gpu_time_forward(nc_engine *e, const nc_tensor *input, const nc_run_options *opts,
                                     int warmup, int repeats, double *times_ms, double *median_ms,
                                     nc_error *err);

/* The device's measured GEMM peak in precision p, in TFLOP/s: an
 * n × n × n product of random matrices through cuBLAS (n = the option
 * peak-n, 8192), the median of 10 timed runs after 3 warm-ups (CUDA events).
 * For the split modes one "product" is the 3 (2) bf16 GEMMs of the split,
 * counted as 2n³ flops. */
nc_status nc_gpu_measure_peak(nc_gpu_precision p, double *tflops, nc_error *err);

/* ---- settings -------------------------------------------------------------- */

/* The engine's settings: the registered options of the "gpu" engine
 * (gpu/nc_gpu_register.c; `neurocuda engines` lists them, `--engine-opt
 * KEY=VALUE` sets them).  Each field is the value of the last engine created
 * through the registry, else the option's environment override (the
 * variable named below, documented in `neurocuda engines`), else its
 * default.  The strings stay valid until the next call. */
typedef struct nc_gpu_options {
    const char *precision; /* precision, NC_GPU_PRECISION: "fp32", ...             */
    const char *conv;      /* conv, NC_GPU_CONV: "auto", "cudnn" or "im2col"        */
    long chunk_mb;         /* chunk-mb, NC_GPU_CHUNK_MB: 0 = from the L2 cache      */
    int profile;           /* profile, NC_GPU_PROFILE                              */
    long peak_n;           /* peak-n, NC_GPU_PEAK_N: 8192                           */
    long train_chunk_mb;   /* train-chunk-mb, NC_GPU_TRAIN_CHUNK_MB: 64             */
    const char *fault;     /* fault, NC_GPU_FAULT: "" = none                        */
    int graphs;            /* graphs, NC_GPU_GRAPHS: 1 = forward passes as CUDA graphs */
} nc_gpu_options;

nc_gpu_options nc_gpu_options_get(void);

/* ---- test hooks: single kernels on host data ----------------------------- */

/* The IF kernel of the engine on host arrays (copied to and from the
 * device): the recurrence of nc_if_run in sim/nc_cpu_ops.h over T steps of
 * n samples of [c, inner] values, in_step = 0 for a constant current.  bias
 * (may be NULL) holds c values added to every input before it is integrated,
 * as a fused conv bias is.  form: NC_GPU_TEST_IF_VALUES, the spikes as θ or
 * 0 in fp32; NC_GPU_TEST_IF_BF16, the kernel's bf16 form: in is rounded to
 * bf16 on the device and read as such, and the spikes come back as counts
 * (1 or 0, not θ), as a bf16 conv after the IF reads them;
 * NC_GPU_TEST_IF_COUNTS8, fp32 currents and the counts as bytes, as the
 * fixed-point spike conv reads them (given back as 1 or 0). */
enum { NC_GPU_TEST_IF_VALUES, NC_GPU_TEST_IF_BF16, NC_GPU_TEST_IF_COUNTS8 };
nc_status nc_gpu_test_if(int form, int T, long long n, int c, long long inner, const float *threshold,
                         int n_threshold, float v0_fraction, int reset_zero, int fire_gt, const float *bias,
                         const float *in, long long in_step, float *out, long long out_step, nc_error *err);

/* The operands of the exact conv on bf16 tensor cores on host arrays
 * (channels last, `pixels` rows of c channels; each result is the counts
 * [pixels, c] followed by their pairs [pixels, 2, c], 3·pixels·c values):
 *   counts   — one IF step (v0 = θ/2, fire on ≥) over current, spikes as 1/0;
 *   x_counts — rint(x·scale[ch]), the conv's own conversion of its input;
 *   w_parts  — w[cout, taps, c]·mul[ch] in three bf16 parts: hi
 *              [cout, taps, c] followed by mid and lo [cout, taps, 2, c],
 *              whose sum is the fp32 product. */
nc_status nc_gpu_test_exact_operands(long long pixels, int c, const float *threshold, const float *current,
                                     float *counts, const float *x, const float *scale, float *x_counts, int cout,
                                     int taps, const float *w, const float *mul, float *w_parts, nc_error *err);

/* The 3×3 spike convolution with 16-bit currents (stride 1, padding 1) on
 * host arrays, channels last: out [images, h, w, cout] = conv(counts, hi +
 * mid), counts [images, h, w, c] (small integers), hi and mid [cout, 3, 3, c]
 * (values that bf16 holds exactly: the weight's two bf16 parts).
 * NC_ERR_UNSUPPORTED, saying why, for a shape the kernel does not take. */
nc_status nc_gpu_test_spike_conv(long long images, int c, int h, int w, int cout, const float *counts,
                                 const float *hi, const float *mid, float *out, nc_error *err);

/* The same on int8 tensor cores (the weight in 16-bit fixed point per output
 * channel): weight [cout, 3, 3, c] fp32 is split on the device
 * (nc_launch_fx16_parts, as the engine does), its steps come back in step
 * [cout].  NC_ERR_UNSUPPORTED, saying why, for a shape it does not take. */
nc_status nc_gpu_test_spike_conv_fx16(long long images, int c, int h, int w, int cout, const float *counts,
                                      const float *weight, float *step, float *out, nc_error *err);
/* The same conv with the IF neurons after it in its epilogue
 * (nc_gpu_spike_conv_if.cu): T steps of n samples of counts [T, n, h, w, c]
 * (integers 0..255), bias [cout] or NULL, θ per channel (n_threshold =
 * cout) or one; out: the spikes [T, n, h, w, cout] as θ / 0 (as_counts 0) or
 * counts 1 / 0, or with pool their 2×2 averages [T, n, h/2, w/2, cout]
 * (pooled θ values, or counts 0..4); a count never written reads −1.  The
 * weight's steps come back in step [cout]. */
nc_status nc_gpu_test_spike_conv_if(int T, long long n, int c, int h, int w, int cout, const float *counts,
                                    const float *weight, const float *bias, const float *threshold,
                                    int n_threshold, float v0_fraction, int reset_zero, int fire_gt, int pool,
                                    int as_counts, float *step, float *out, nc_error *err);

/* The engine's GEMM in precision p on host arrays: out[rows, fout] =
 * in[rows, fin] · weight[fout, fin]ᵀ.  spike_scale (may be NULL): in holds
 * spikes whose per-feature value is spike_scale[f] (θ); they are fed as 0/1
 * with θ folded into the weights, the engine's exact spike path. */
nc_status nc_gpu_test_gemm(nc_gpu_precision p, long long rows, int fin, int fout, const float *in,
                           const float *weight, const float *spike_scale, float *out, nc_error *err);

/* The channels-last max (max = 1) or average pool on host arrays: in
 * [rows, C, H, W] goes to channels last on the device (the transpose kernel),
 * is pooled there (ONNX window rules, as nc_maxpool / nc_avgpool), and comes
 * back: out [rows, C, OH, OW]. */
nc_status nc_gpu_test_pool_nhwc(int max, long long rows, int c, int h, int w, const int kernel[2], const int stride[2],
                                const int pad[4], const int dilation[2], int ceil_mode, int count_include_pad,
                                const float *in, float *out, nc_error *err);

/* The pre-spike max pool of T steps in one kernel on host arrays: in
 * [T·n, C, H, W] (time-major; channels last on the device when nhwc is 1) and
 * the per-channel bias (may be NULL) added to every tap; out [T·n, C, OH, OW]
 * holds max S(t) − max S(t−1) of the running sums S of (in + bias). */
nc_status nc_gpu_test_prespike_max(int nhwc, int T, long long n, int c, int h, int w, const int kernel[2],
                                   const int stride[2], const int pad[4], const int dilation[2], int ceil_mode,
                                   const float *bias, const float *in, float *out, nc_error *err);

/* The trainer's bf16 copies on host arrays: in [rows, a, b] goes to bf16
 * [rows, b, a] (rounded to nearest even) — narrowed gets those values as
 * floats — and is transposed back, widened and added to base [rows, a, b]
 * into widened. */
nc_status nc_gpu_test_transpose_bf16(long long rows, long long a, long long b, const float *in, const float *base,
                                     float *narrowed, float *widened, nc_error *err);

/* Poisson encoding on the device (same stream of numbers as
 * nc_poisson_encode in sim/nc_cpu_ops.h). */
nc_status nc_gpu_test_poisson(unsigned long long seed, int T, long long n, const float *in, float *out,
                              nc_error *err);

/* Sums over the steps on the device (as nc_ref_step_sums): in holds
 * (T − 1)·step + n floats. */
nc_status nc_gpu_test_step_sums(int T, long long n, long long step, const float *in, int nonzero, float *out,
                                nc_error *err);

#ifdef __cplusplus
}
#endif

#endif
