/* nc_cpu_ops.h — plain-C float32 kernels of the CPU engine.
 *
 * These are the reference that every CUDA kernel is compared against, so each
 * fast kernel has a naive twin (nc_ref_*) written as the textbook loop; the
 * tests compare the two with atol + rtol·|ref|.
 *
 * Layout: batch-major, one "row" per sample: [rows, C, H, W] or [rows, F].
 * In SNN mode rows = T·N (time-major, T slowest), which every kernel here
 * treats as plain rows.  All kernels are single-threaded on the rows they are
 * given except the GEMMs (OpenBLAS threads); the engine splits rows over
 * threads by offsetting the pointers.
 *
 * Every fast kernel runs in the build of sim/nc_cpu_ops.c that fits the CPU
 * (AVX-512, AVX2 + FMA, or plain x86-64; nc_cpu_kernels.h); the references
 * and the window geometry (nc_window.h) are plain C. */
#ifndef NC_CPU_OPS_H
#define NC_CPU_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "../core/nc_net.h"
#include "nc_if_params.h"
#include "nc_window.h"

#include <math.h>

/* ---- conv2d --------------------------------------------------------------
 * in [rows, Cin, H, W], weight [Cout, Cin/groups, KH, KW], bias [Cout] or
 * NULL, out [rows, Cout, OH, OW].  im2col + cblas_sgemm, a chunk of samples
 * at a time so that the column buffer stays in cache.
 * work: nc_conv2d_work_floats() floats (the chunk size follows from it). */
size_t nc_conv2d_work_floats(const nc_window *g, int cout, int groups, int64_t rows);
void nc_conv2d(const nc_window *g, int cout, int groups, int64_t rows, const float *in,
               const float *weight, const float *bias, float *out, float *work, size_t work_floats);
/* Direct 7-loop convolution, the reference. */
void nc_ref_conv2d(const nc_window *g, int cout, int groups, int64_t rows, const float *in,
                   const float *weight, const float *bias, float *out);

/* ---- event-driven conv2d and dense (sparse inputs, e.g. spikes) -----------
 * Exact for ANY input; fast when most inputs are zero (after an IF neuron).
 * Per sample, the non-zero inputs become lists per input position (value and
 * channel); each output position then adds up value·W[:, ci, ky, kx] over the
 * events in its window, its Cout sums in registers (AVX-512, AVX2 + FMA, or plain C)
 * — except that the AVX-512 build scatters the events of a 3×3 stride-1 conv
 * of at most 32 outputs (each input position's taps into the outputs they reach).
 * groups must be 1.  wt: the weight re-laid out by nc_conv2d_events_weight as
 * [KH][KW][Cin][Cout] (KH·KW·Cin·Cout floats).  work:
 * nc_conv2d_events_work_floats() floats (one sample's lists, window tables
 * and outputs).  Sums run in another order than nc_conv2d: results agree
 * within float rounding. */
void nc_conv2d_events_weight(const nc_window *g, int cout, const float *weight, float *wt);
size_t nc_conv2d_events_work_floats(const nc_window *g, int cout);
void nc_conv2d_events(const nc_window *g, int cout, int64_t rows, const float *in, const float *wt,
                      const float *bias, float *out, float *work);
/* Dense over sparse rows: wt is the weight transposed, [Fin][Fout]
 * (nc_dense_events_weight); work: nc_dense_events_work_floats(fin) floats. */
void nc_dense_events_weight(int fin, int fout, const float *weight, float *wt);
size_t nc_dense_events_work_floats(int fin);
void nc_dense_events(int64_t rows, int fin, int fout, const float *in, const float *wt,
                     const float *bias, float *out, float *work);
/* Number of non-zero values among n floats. */
int64_t nc_count_nonzero(int64_t n, const float *x);

/* ---- dense ---------------------------------------------------------------
 * in [rows, Fin], weight [Fout, Fin], bias [Fout] or NULL, out [rows, Fout]. */
void nc_dense(int64_t rows, int fin, int fout, const float *in, const float *weight,
              const float *bias, float *out);
/* Outputs [o0, o1) of nc_dense only (the others are left as they are): a
 * slice of the outputs for one thread. */
void nc_dense_cols(int64_t rows, int fin, int fout, int o0, int o1, const float *in, const float *weight,
                   const float *bias, float *out);
void nc_ref_dense(int64_t rows, int fin, int fout, const float *in, const float *weight,
                  const float *bias, float *out);

/* ---- pools ---------------------------------------------------------------
 * in [rows, C, H, W] → out [rows, C, OH, OW].
 * Average: the divisor counts the window positions that lie inside the
 * padded input [−pad0, in + pad1) when count_include_pad, else those inside
 * the real input; positions past the padded border (a ceil_mode overhang)
 * never count.  This is ONNX Runtime's and PyTorch's rule.
 * Max: padding acts as −inf (never chosen).
 * A window with no real input at all (only possible when pad ≥ kernel,
 * which ONNX forbids) gives 0 in both. */
void nc_avgpool(const nc_window *g, int count_include_pad, int64_t rows, const float *in, float *out);
void nc_ref_avgpool(const nc_window *g, int count_include_pad, int64_t rows, const float *in,
                    float *out);
void nc_maxpool(const nc_window *g, int64_t rows, const float *in, float *out);
void nc_ref_maxpool(const nc_window *g, int64_t rows, const float *in, float *out);

/* PRE_SPIKE max pool for SNNs over currents that change from step to step,
 * T steps of n samples (time-major, in_step/out_step floats apart): it pools
 * the running sums S(t) = x(1) + … + x(t) and passes on the increments
 * out(t) = maxpool(S(t)) − maxpool(S(t−1)), so that the mean over T is the
 * max of the mean currents (see run_prespike_max in engine_cpu.c).  work:
 * C·H·W + C·OH·OW floats. */
void nc_maxpool_running(const nc_window *g, int T, int64_t n, const float *in, int64_t in_step, float *out,
                        int64_t out_step, float *work);

/* An event-driven conv (nc_conv2d_events) and the PRE_SPIKE max pool that
 * is its only reader (nc_maxpool_running), fused per sample: each step's
 * currents stay in the workspace (in cache) instead of a T·N buffer of them
 * going through memory.  n samples, T steps each (time-major: in_step and
 * out_step floats apart); in: the conv's spikes, out: the pool's output.
 * Gives what the two calls give, bit for bit.  work:
 * nc_conv2d_events_maxpool_work_floats() floats. */
size_t nc_conv2d_events_maxpool_work_floats(const nc_window *conv, int cout, const nc_window *pool);
void nc_conv2d_events_maxpool(const nc_window *conv, int cout, const nc_window *pool, int T, int64_t n,
                              const float *in, int64_t in_step, const float *wt, const float *bias, float *out,
                              int64_t out_step, float *work);

/* Gated max pool for SNNs, over T steps of N samples (time-major).
 * in_step/out_step: floats between one step and the next (0 for an input
 * that is the same at every step).  For each sample and window, at step t it
 * passes the input of the position whose running count of non-zero inputs
 * (steps 1..t, the current step included) is highest, ties going to the first
 * position in row-major window order.  counts: N·C·H·W ints of workspace. */
void nc_maxpool_gated(const nc_window *g, int T, int64_t n, const float *in, int64_t in_step,
                      float *out, int64_t out_step, int *counts);

/* in [rows, C, HW] → out [rows, C], the mean over HW. */
void nc_global_avgpool(int64_t rows, int c, int64_t hw, const float *in, float *out);

/* ---- element-wise --------------------------------------------------------
 * Per-channel affine y = scale[c]·x + shift[c] over [rows, C, inner]. */
void nc_affine(int64_t rows, int c, int64_t inner, const float *scale, const float *shift,
               const float *in, float *out);
/* Element-wise scale over [rows, numel]: out[r, k] = in[r, k]·w[k], or
 * in[r, k]·w[0] when n_w == 1 (NIR's Scale).  In place is fine. */
void nc_scale(int64_t rows, int64_t numel, const float *w, int64_t n_w, const float *in, float *out);
/* out = a + b over n floats (out may alias a or b). */
void nc_add(int64_t n, const float *a, const float *b, float *out);
/* Concat along the channel axis (axis 0 of a sample): out row r is the rows r
 * of every input, one after the other; per_row[i] = floats per row of input i. */
void nc_concat(int64_t rows, int n_inputs, const float *const *in, const int64_t *per_row,
               float *out);

/* ---- neuron functions ----------------------------------------------------
 * All are in-place safe (out may equal in). */
void nc_relu(int64_t n, const float *in, float *out);
void nc_clip(int64_t n, float lo, float hi, const float *in, float *out);
/* QCFS: λ·clip(floor(x·L/λ + φ)/L, 0, 1) over [rows, C, inner]; lambda has
 * n_lambda values, 1 (per layer) or C (per channel). */
void nc_qcfs(int64_t rows, int c, int64_t inner, const float *lambda, int n_lambda, int levels,
             float shift, const float *in, float *out);
/* One value, in the operation order of the QCFS reference code (x/λ, ·L, +φ,
 * floor, /L, ·λ), so that results match a PyTorch export bit for bit where
 * possible.  Inline: the kernels call it per element. */
static inline float nc_qcfs1(float x, float lambda, int levels, float shift)
{
    float q = floorf(x / lambda * (float)levels + shift);
    q = q < 0.0f ? 0.0f : (q > (float)levels ? (float)levels : q);
    return q / (float)levels * lambda;
}

/* ---- integrate-and-fire --------------------------------------------------
 * The IF recurrence over T steps for n samples of [C, inner] values each,
 * time-major.  For every neuron, v = v0_fraction·θ, then per step t:
 *     m = v + x_t;  s = (m ≥ θ) (or m > θ);  out_t = s·θ;
 *     v = s ? (reset subtract ? m − θ : 0) : m.
 * A NaN membrane never fires.  Blocks of neurons run all T steps while their
 * membranes stay in L1; in and out may be the same buffer (in place).
 * θ = threshold[channel] when n_threshold == C, else threshold[0].
 * in_step / out_step: floats between consecutive steps (in_step = 0 repeats
 * one input at every step, for a direct-encoded constant current).
 * v_final (may be NULL): n·C·inner floats, the membrane after step T. */

void nc_if_run(const nc_if_params *p, int T, int64_t n, int c, int64_t inner, const float *in,
               int64_t in_step, float *out, int64_t out_step, float *v_final);
/* The same with the membrane carried by the caller: v (n·C·inner floats)
 * holds the membrane before the first step and gets the one after the last,
 * so T calls of one step equal one call of T steps bit for bit (for
 * step-by-step simulation).  nc_if_state_init sets v = v0_fraction·θ. */
void nc_if_state_init(const nc_if_params *p, int64_t n, int c, int64_t inner, float *v);
void nc_if_run_state(const nc_if_params *p, int T, int64_t n, int c, int64_t inner, const float *in,
                     int64_t in_step, float *out, int64_t out_step, float *v);
/* Reference: steps outer, neurons inner, with an explicit membrane array
 * (v: n·C·inner floats of workspace). */
void nc_ref_if_run(const nc_if_params *p, int T, int64_t n, int c, int64_t inner, const float *in,
                   int64_t in_step, float *out, int64_t out_step, float *v);

/* Sums over T steps, the textbook loop (what a recording adds up step by
 * step; the GPU's observe_sums kernel is tested against it): out[j] =
 * Σ_t in[t·step + j] added in step order in float, or with nonzero the
 * number of steps where that value was ≠ 0, for j < n (step 0: a constant
 * value). */
void nc_ref_step_sums(int T, int64_t n, int64_t step, const float *in, int nonzero, float *out);

/* ---- input encoding ------------------------------------------------------
 * Poisson (Bernoulli-per-step) rate code: out[t, i] = 1 with probability
 * clamp(in[i], 0, 1), else 0, for t < T and i < n (in holds one step of n
 * values, out holds T·n).  The random numbers are a counter-based splitmix64
 * of (seed, t·n + i): deterministic for a seed, and independent of how the
 * work is split over threads.  first_step lets a caller do steps
 * [first_step, first_step + T) only; out then holds those T steps. */
void nc_poisson_encode(uint64_t seed, int first_step, int T, int64_t n, const float *in, float *out);

/* ---- the CPU path --------------------------------------------------------
 * Which build of the fast kernels runs: "avx512", "avx2" or "baseline"
 * (chosen at the first kernel call from what the CPU supports, or from
 * NC_CPU_PATH when the CPU can run the build it names). */
const char *nc_cpu_path(void);
/* "" or, when NC_CPU_PATH was not followed, why (for `neurocuda engines`). */
const char *nc_cpu_path_note(void);
/* 1 when this CPU can run the build named isa and the program contains it. */
int nc_cpu_path_supported(const char *isa);
/* Asks for a build before the first kernel call (the cpu engine's option
 * "kernels", whose environment override is NC_CPU_PATH).  Returns 0 when that
 * build runs; -1 with the reason when the CPU cannot run it or another build
 * already runs in this process. */
int nc_cpu_path_request(const char *isa, char *why, size_t why_size);

#endif
