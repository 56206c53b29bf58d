/* nc_grad_ops.h — backward (gradient) kernels of the CPU engine, for
 * fine-tuning (sim/nc_train.h).  Each kernel is the exact derivative of its
 * forward twin in nc_cpu_ops.h, with the same layouts: batch-major rows, and
 * in BPTT rows = T·N, time-major (T slowest).
 *
 * Conventions:
 *   - `dout` is dL/d(output) of the forward op, same layout as its output.
 *   - `din` (may be NULL when the input needs no gradient) RECEIVES dL/d(in):
 *     it is overwritten, not accumulated.  Callers that have several consumers
 *     of one tensor add the results themselves (nc_add).
 *   - Parameter gradients (`dweight`, `dbias`, `dlambda`, `dthreshold`, ...)
 *     are ACCUMULATED (+=), so a caller can sum over chunks of rows and over
 *     time steps; the caller zeroes them once per optimiser step.
 *   - Gradients are float32 except where noted; sums over many rows use
 *     float accumulators of moderate length (GEMMs) — the tests compare with
 *     float64 finite differences within 1e-3 relative.
 */
#ifndef NC_GRAD_OPS_H
#define NC_GRAD_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "nc_cpu_ops.h"
#include "nc_surrogate.h"

/* ---- conv2d --------------------------------------------------------------
 * Forward: nc_conv2d(g, cout, groups, rows, in, weight, bias, out).
 * din [rows, Cin, H, W] (col2im of Wᵀ·dout; may be NULL), dweight
 * [Cout, Cin/groups, KH, KW] += (may be NULL), dbias [Cout] += (may be NULL).
 * work: nc_conv2d_backward_work_floats() floats (the same size as the
 * forward's; a smaller work only means smaller chunks of samples). */
size_t nc_conv2d_backward_work_floats(const nc_window *g, int cout, int groups, int64_t rows);
void nc_conv2d_backward(const nc_window *g, int cout, int groups, int64_t rows, const float *in,
                        const float *weight, const float *dout, float *din, float *dweight,
                        float *dbias, float *work, size_t work_floats);

/* ---- dense ---------------------------------------------------------------
 * din [rows, Fin] = dout·W (may be NULL); dweight [Fout, Fin] += doutᵀ·in
 * (may be NULL); dbias [Fout] += Σ_rows dout (may be NULL). */
void nc_dense_backward(int64_t rows, int fin, int fout, const float *in, const float *weight,
                       const float *dout, float *din, float *dweight, float *dbias);

/* ---- pools ---------------------------------------------------------------
 * Same window rules as the forward kernels.  Max: the gradient goes to the
 * position the forward pass chose (the first maximum in row-major window
 * order, as nc_maxpool picks it), recomputed from `in`; overlapping windows
 * that pick one input add up there.  A window where nothing beats −inf
 * (only −inf / NaN inputs) passes no gradient. */
void nc_avgpool_backward(const nc_window *g, int count_include_pad, int64_t rows,
                         const float *dout, float *din);
void nc_maxpool_backward(const nc_window *g, int64_t rows, const float *in, const float *dout,
                         float *din);
void nc_global_avgpool_backward(int64_t rows, int c, int64_t hw, const float *dout, float *din);

/* ---- element-wise --------------------------------------------------------
 * Affine y = scale[c]·x + shift[c]: din (may be NULL), dscale, dshift +=
 * (each may be NULL); scale NULL means 1, as in nc_affine. */
void nc_affine_backward(int64_t rows, int c, int64_t inner, const float *scale, const float *in,
                        const float *dout, float *din, float *dscale, float *dshift);
/* ReLU: din = dout where in > 0, else 0.  Clip: dout where lo < in < hi. */
void nc_relu_backward(int64_t n, const float *in, const float *dout, float *din);
void nc_clip_backward(int64_t n, float lo, float hi, const float *in, const float *dout,
                      float *din);

/* QCFS y = λ·clip(floor(z·L/λ + φ)/L, 0, 1) with the straight-through
 * estimator for floor (conversion.md §1.3, autograd-equivalent):
 *   z/λ < 0 (clipped at the bottom):  ∂y/∂z = 0, ∂y/∂λ = 0
 *   z/λ > 1 (clipped at the top):     ∂y/∂z = 0, ∂y/∂λ = 1
 *   in range:                         ∂y/∂z = 1, ∂y/∂λ = (y − z)/λ
 * (the clamp is on z/λ, before the floor, as in ANN_SNN_QCFS; the bounds
 * themselves count as in range).  lambda has n_lambda values, 1 or C;
 * dlambda has n_lambda values, +=.  din and dlambda may be NULL. */
void nc_qcfs_backward(int64_t rows, int c, int64_t inner, const float *lambda, int n_lambda,
                      int levels, float shift, const float *in, const float *dout, float *din,
                      float *dlambda);

/* ---- integrate-and-fire, BPTT ---------------------------------------------
 * The surrogates (nc_surrogate, nc_surrogate_grad, ...) are declared in
 * nc_surrogate.h and implemented in nc_grad_ops.c. */


/* Forward for training: exactly nc_if_run (same spikes, bit for bit) but
 * also keeps m_t, the membrane after charging and before firing, for every
 * step: m_saved [T, n, C, inner] (time-major like out).  in is [T, n, C,
 * inner] (in_step = n·C·inner) — a constant input is expanded by the caller.
 * in and out may be the same buffer. */
void nc_if_forward_train(const nc_if_params *p, int T, int64_t n, int c, int64_t inner,
                         const float *in, float *out, float *m_saved);

/* BPTT through the IF recurrence, from step T back to 1.  Per neuron, with
 * s_t = H(m_t − θ) (forward) and σ' the surrogate at m_t − θ:
 *   v_0 = f·θ;  m_t = v_{t−1} + x_t;  out_t = θ·s_t;
 *   v_t = m_t − θ·s_t (subtract)  or  m_t·(1 − s_t) (zero)
 *   dv = 0 after step T; for t = T..1:
 *     ds  = dout_t·θ + dv·(∂v_t/∂s_t)        (−θ subtract, −m_t zero)
 *     dm  = dv·(∂v_t/∂m_t) + ds·σ'           (1 subtract, 1 − s_t zero)
 *     din_t = dm;  dv ← dm                     (gradient of v_{t−1})
 *   dθ (if dthreshold != NULL) += Σ_t [dout_t·s_t − ds·σ' − dv_t·s_t (subtract
 *     only)] + dv_0·f, summed into the neuron's channel (n_threshold = C) or
 *     into dthreshold[0].  The spike test s_t is recomputed from m_saved with
 *     the forward's comparison (≥ or >), so it matches the forward exactly.
 * din [T, n, C, inner] (may alias dout). */
void nc_if_backward(const nc_if_params *p, nc_surrogate surrogate, float alpha, int T, int64_t n,
                    int c, int64_t inner, const float *m_saved, const float *dout, float *din,
                    float *dthreshold);

/* ---- loss ----------------------------------------------------------------
 * Softmax cross-entropy over [rows, classes] logits with integer labels:
 * returns the mean loss over rows; dlogits (may be NULL) receives
 * (softmax − onehot)/rows; *correct (may be NULL) += rows whose argmax (first
 * maximum) equals the label.  Labels outside [0, classes) count as wrong and
 * contribute no gradient and no loss (the mean still divides by rows; the
 * caller validates labels first).  The loss is computed in double. */
double nc_softmax_xent(int64_t rows, int classes, const float *logits, const int32_t *labels,
                       float *dlogits, int64_t *correct);

/* Distillation from a teacher (the source ANN) next to the labels:
 *   loss = (1 − α)·CE(labels, s) + α·τ²·KL(softmax(t/τ) ‖ softmax(s/τ))
 * per row, averaged over rows, for student logits s and teacher logits t
 * [rows, classes].  dlogits (may be NULL) receives
 *   ((1 − α)·(softmax(s) − onehot) + α·τ·(softmax(s/τ) − softmax(t/τ)))/rows
 * (the τ² keeps the soft term's gradient on the scale of the hard one, as in
 * Hinton et al. 2015).  *correct as nc_softmax_xent; a row with a label
 * outside [0, classes) contributes nothing.  α = 0 is nc_softmax_xent itself,
 * bit for bit; α in [0, 1], τ > 0.  Computed in double. */
double nc_distill_xent(int64_t rows, int classes, const float *logits, const float *teacher,
                       const int32_t *labels, double alpha, double tau, float *dlogits, int64_t *correct);

#endif
