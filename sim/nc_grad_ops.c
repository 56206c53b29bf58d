/* nc_grad_ops.c — backward (gradient) kernels of the CPU engine (see
 * nc_grad_ops.h for the contract).  Each kernel mirrors the loop structure
 * of its forward twin in nc_cpu_ops.c, so that index rules (padding, ceil
 * mode, first maximum, spike test) are the same by construction.
 * Everything is single-threaded and deterministic: the order of every sum
 * depends on the shapes (and the work size of conv) only. */
#include "nc_grad_ops.h"
#include "nc_im2col.h"
#include "nc_loss_rows.h"

#include <cblas.h>
#include <math.h>
#include <string.h>
#include <strings.h>

/* Neurons per IF block: their membranes (forward) or membrane gradients
 * (backward) stay in L1 while the block walks over all T steps. */
#define NC_GRAD_IF_BLOCK 256

/* ---- conv2d --------------------------------------------------------------
 * Per chunk of nb samples and per group, with col = im2col(in) [Kg, nb·P]
 * and dy = dout of the group gathered to [Mg, nb·P] (the layout of the
 * forward's GEMM output):
 *     dW_g += dy · colᵀ,   dcol = W_gᵀ · dy,   din = col2im(dcol).
 * dcol reuses col's buffer once dW_g has been taken, so the work is the
 * forward's: nb·(Kg + Mg)·P floats. */

size_t nc_conv2d_backward_work_floats(const nc_window *g, int cout, int groups, int64_t rows)
{
    return nc_conv_chunk_work_floats(g, cout, groups, rows); /* the forward's chunks (nc_window.h) */
}

/* dbias[m] += the sum of dout over every position of channel m (double
 * per plane, so that long planes lose nothing). */
static void conv_bias_grad(int64_t rows, int cout, int64_t p, const float *dout, float *dbias)
{
    for (int64_t r = 0; r < rows; r++)
        for (int m = 0; m < cout; m++) {
            const float *d = dout + (r * cout + m) * p;
            double sum = 0.0;
            for (int64_t i = 0; i < p; i++)
                sum += d[i];
            dbias[m] += (float)sum;
        }
}

/* One chunk of nb samples and one group: dW_g += dy·colᵀ, din += col2im(W_gᵀ·dy). */
static void conv_backward_group(const nc_window *g, int cout, int groups, int grp, int64_t nb,
                                const float *in, const float *weight, const float *dout,
                                float *din, float *dweight, float *col, float *dy)
{
    int mg = cout / groups;
    int64_t kg = nc_conv_k_group(g, groups), p = (int64_t)g->oh * g->ow, ld = nb * p;
    /* gather dout [nb, cout, P] of the group into dy [mg, nb·P] */
    for (int m = 0; m < mg; m++)
        for (int64_t s = 0; s < nb; s++)
            memcpy(dy + m * ld + s * p, dout + (s * cout + grp * mg + m) * p,
                   (size_t)p * sizeof(float));
    const float *w_g = weight + grp * mg * kg;
    if (dweight) {
        nc_im2col_chunk(g, groups, grp, nb, in, col);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, mg, (int)kg, (int)ld, 1.0f, dy,
                    (int)ld, col, (int)ld, 1.0f, dweight + grp * mg * kg, (int)kg);
    }
    if (din) {
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)kg, (int)ld, mg, 1.0f, w_g,
                    (int)kg, dy, (int)ld, 0.0f, col, (int)ld);
        nc_col2im_chunk(g, groups, grp, nb, col, din);
    }
}

void nc_conv2d_backward(const nc_window *g, int cout, int groups, int64_t rows, const float *in,
                        const float *weight, const float *dout, float *din, float *dweight,
                        float *dbias, float *work, size_t work_floats)
{
    if (rows < 1)
        return;
    int mg = cout / groups;
    int64_t kg = nc_conv_k_group(g, groups), p = (int64_t)g->oh * g->ow;
    int64_t in_row = (int64_t)g->c * g->h * g->w, out_row = (int64_t)cout * p;
    if (dbias)
        conv_bias_grad(rows, cout, p, dout, dbias);
    if (!din && !dweight)
        return;
    int64_t nb_max = (int64_t)work_floats / ((kg + mg) * p);
    if (nb_max < 1)
        return; /* the caller sized work with nc_conv2d_backward_work_floats */
    for (int64_t r0 = 0; r0 < rows; r0 += nb_max) {
        int64_t nb = rows - r0 < nb_max ? rows - r0 : nb_max;
        float *col = work, *dy = work + kg * nb * p;
        float *din_chunk = din ? din + r0 * in_row : NULL;
        if (din_chunk) /* col2im adds: start from 0 (din is overwritten, not accumulated) */
            memset(din_chunk, 0, (size_t)(nb * in_row) * sizeof(float));
        for (int grp = 0; grp < groups; grp++)
            conv_backward_group(g, cout, groups, grp, nb, in + r0 * in_row, weight,
                                dout + r0 * out_row, din_chunk, dweight, col, dy);
    }
}

/* ---- dense -------------------------------------------------------------- */

void nc_dense_backward(int64_t rows, int fin, int fout, const float *in, const float *weight,
                       const float *dout, float *din, float *dweight, float *dbias)
{
    if (rows < 1)
        return;
    if (din) /* din [rows, fin] = dout [rows, fout] · W [fout, fin] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, fin, fout, 1.0f, dout,
                    fout, weight, fin, 0.0f, din, fin);
    if (dweight) /* dW [fout, fin] += doutᵀ [fout, rows] · in [rows, fin] */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, fout, fin, (int)rows, 1.0f, dout,
                    fout, in, fin, 1.0f, dweight, fin);
    if (dbias)
        for (int o = 0; o < fout; o++) {
            double sum = 0.0;
            for (int64_t r = 0; r < rows; r++)
                sum += dout[r * fout + o];
            dbias[o] += (float)sum;
        }
}

/* ---- pools ---------------------------------------------------------------
 * The window of output (oy, ox) as the ranges of taps that land on real input
 * (nc_row_taps, nc_col_taps of nc_window.h). */
void nc_avgpool_backward(const nc_window *g, int count_include_pad, int64_t rows,
                         const float *dout, float *din)
{
    int64_t hw = (int64_t)g->h * g->w, ohw = (int64_t)g->oh * g->ow;
    int dh = g->dilation[0], dw = g->dilation[1];
    memset(din, 0, (size_t)(rows * g->c * hw) * sizeof(float));
    for (int64_t pl = 0; pl < rows * g->c; pl++) {
        float *dx = din + pl * hw;
        const float *dy = dout + pl * ohw;
        for (int oy = 0; oy < g->oh; oy++) {
            nc_axis_taps ty = nc_row_taps(g, oy);
            for (int ox = 0; ox < g->ow; ox++) {
                nc_axis_taps tx = nc_col_taps(g, ox);
                /* the forward's divisor: y = Σ x / count, so ∂y/∂x = 1/count */
                int count = count_include_pad ? ty.n_padded * tx.n_padded
                                              : (ty.hi - ty.lo) * (tx.hi - tx.lo);
                if (count <= 0)
                    continue; /* the forward gives a constant 0 */
                float share = dy[oy * g->ow + ox] / (float)count;
                for (int ki = ty.lo; ki < ty.hi; ki++) {
                    float *row = dx + (int64_t)(ty.start + ki * dh) * g->w + tx.start;
                    for (int kj = tx.lo; kj < tx.hi; kj++)
                        row[kj * dw] += share;
                }
            }
        }
    }
}

/* The plane index of the value nc_maxpool picks in a window: the same scan
 * (row-major taps, `v > best` from −inf), so the first maximum wins ties.
 * −1 when nothing beats −inf (only padding, or only −inf/NaN inputs): such
 * an output does not depend on any input value and passes no gradient. */
static int64_t max_position(const nc_window *g, const float *x, nc_axis_taps ty, nc_axis_taps tx)
{
    float best = -INFINITY;
    int64_t pick = -1;
    for (int ki = ty.lo; ki < ty.hi; ki++) {
        int64_t row = (int64_t)(ty.start + ki * g->dilation[0]) * g->w + tx.start;
        for (int kj = tx.lo; kj < tx.hi; kj++) {
            float v = x[row + kj * g->dilation[1]];
            if (v > best) {
                best = v;
                pick = row + kj * g->dilation[1];
            }
        }
    }
    return pick;
}

void nc_maxpool_backward(const nc_window *g, int64_t rows, const float *in, const float *dout,
                         float *din)
{
    int64_t hw = (int64_t)g->h * g->w, ohw = (int64_t)g->oh * g->ow;
    memset(din, 0, (size_t)(rows * g->c * hw) * sizeof(float));
    for (int64_t pl = 0; pl < rows * g->c; pl++) {
        const float *x = in + pl * hw, *dy = dout + pl * ohw;
        float *dx = din + pl * hw;
        for (int oy = 0; oy < g->oh; oy++) {
            nc_axis_taps ty = nc_row_taps(g, oy);
            for (int ox = 0; ox < g->ow; ox++) {
                int64_t at = max_position(g, x, ty, nc_col_taps(g, ox));
                if (at >= 0) /* overlapping windows may pick one input twice: add */
                    dx[at] += dy[oy * g->ow + ox];
            }
        }
    }
}

void nc_global_avgpool_backward(int64_t rows, int c, int64_t hw, const float *dout, float *din)
{
    float inv = 1.0f / (float)hw; /* the forward multiplies by this same float */
    for (int64_t pl = 0; pl < rows * c; pl++) {
        float share = dout[pl] * inv;
        float *dx = din + pl * hw;
        for (int64_t i = 0; i < hw; i++)
            dx[i] = share;
    }
}

/* ---- element-wise ------------------------------------------------------- */

/* scale NULL means 1 (as in nc_affine); dscale / dshift may be NULL. */
void nc_affine_backward(int64_t rows, int c, int64_t inner, const float *scale, const float *in,
                        const float *dout, float *din, float *dscale, float *dshift)
{
    for (int64_t r = 0; r < rows; r++)
        for (int ch = 0; ch < c; ch++) {
            int64_t base = (r * c + ch) * inner;
            float a = scale ? scale[ch] : 1.0f;
            double sum_dx = 0.0, sum_d = 0.0;
            for (int64_t i = 0; i < inner; i++) {
                float d = dout[base + i];
                if (dscale)
                    sum_dx += (double)d * in[base + i];
                sum_d += d;
                if (din)
                    din[base + i] = a * d;
            }
            if (dscale)
                dscale[ch] += (float)sum_dx;
            if (dshift)
                dshift[ch] += (float)sum_d;
        }
}

void nc_relu_backward(int64_t n, const float *in, const float *dout, float *din)
{
    for (int64_t i = 0; i < n; i++)
        din[i] = in[i] > 0.0f ? dout[i] : 0.0f;
}

void nc_clip_backward(int64_t n, float lo, float hi, const float *in, const float *dout,
                      float *din)
{
    for (int64_t i = 0; i < n; i++)
        din[i] = in[i] > lo && in[i] < hi ? dout[i] : 0.0f;
}

/* One value of the QCFS STE: ∂y/∂z into *dz, ∂y/∂λ into *dlam.  z/λ is the
 * forward's first operation (nc_qcfs1), so the region test agrees with it. */
static void qcfs_grad1(float z, float lam, int levels, float shift, float *dz, float *dlam)
{
    float u = z / lam;
    if (u < 0.0f) {
        *dz = 0.0f;
        *dlam = 0.0f;
    } else if (u > 1.0f) {
        *dz = 0.0f;
        *dlam = 1.0f;
    } else { /* y = λ·q(z/λ) with ∂q/∂u = 1: ∂y/∂λ = q − z/λ = (y − z)/λ */
        *dz = 1.0f;
        *dlam = (nc_qcfs1(z, lam, levels, shift) - z) / lam;
    }
}

void nc_qcfs_backward(int64_t rows, int c, int64_t inner, const float *lambda, int n_lambda,
                      int levels, float shift, const float *in, const float *dout, float *din,
                      float *dlambda)
{
    for (int64_t r = 0; r < rows; r++)
        for (int ch = 0; ch < c; ch++) {
            int li = n_lambda == c ? ch : 0;
            float lam = lambda[li];
            int64_t base = (r * c + ch) * inner;
            double sum = 0.0;
            for (int64_t i = 0; i < inner; i++) {
                float dz, dl, d = dout[base + i];
                qcfs_grad1(in[base + i], lam, levels, shift, &dz, &dl);
                if (din)
                    din[base + i] = d * dz;
                sum += (double)d * dl;
            }
            if (dlambda)
                dlambda[li] += (float)sum;
        }
}

/* ---- integrate-and-fire, BPTT --------------------------------------------- */

/* The cases below write the header's formulas literally; each returns 0 for
 * a NaN x (every comparison with NaN is false). */
float nc_surrogate_grad(nc_surrogate kind, float alpha, float x)
{
    switch (kind) {
    case NC_SURROGATE_TRIANGLE: {
        float a = alpha - fabsf(x);
        return a > 0.0f ? a / (alpha * alpha) : 0.0f;
    }
    case NC_SURROGATE_SIGMOID: {
        if (isnan(x))
            return 0.0f;
        float s = 1.0f / (1.0f + expf(-alpha * x));
        return alpha * s * (1.0f - s);
    }
    case NC_SURROGATE_ATAN: {
        if (isnan(x))
            return 0.0f;
        float u = 1.57079632679f * alpha * x; /* π/2·αx */
        return alpha / (2.0f * (1.0f + u * u));
    }
    case NC_SURROGATE_RECT:
        return fabsf(x) < alpha / 2.0f ? 1.0f / alpha : 0.0f;
    }
    return 0.0f;
}

float nc_surrogate_default_alpha(nc_surrogate kind)
{
    switch (kind) {
    case NC_SURROGATE_TRIANGLE: return 1.0f;
    case NC_SURROGATE_SIGMOID: return 4.0f;
    case NC_SURROGATE_ATAN: return 2.0f;
    case NC_SURROGATE_RECT: return 1.0f;
    }
    return 1.0f;
}

static const char *const surrogate_names[] = {"triangle", "sigmoid", "atan", "rect"};

const char *nc_surrogate_name(nc_surrogate kind)
{
    return (unsigned)kind < 4u ? surrogate_names[kind] : "unknown";
}

int nc_surrogate_parse(const char *text, nc_surrogate *out)
{
    for (int k = 0; text && k < 4; k++)
        if (strcasecmp(text, surrogate_names[k]) == 0) {
            *out = (nc_surrogate)k;
            return 0;
        }
    return -1;
}

/* θ of every neuron of the flat range [e0, e0 + len), as nc_if_run picks it. */
static void block_thresholds(const nc_if_params *p, int c, int64_t inner, int64_t e0, int len,
                             float *th)
{
    for (int j = 0; j < len; j++)
        th[j] = p->threshold[p->n_threshold == c ? ((e0 + j) / inner) % c : 0];
}

/* One block of the training forward.  The float operations are if_step's in
 * nc_cpu_ops.c, in the same order: v0 = f·θ, m = v + x, d = m − θ, the test
 * on d (≡ on m, see there), v = d or 0 or m; so the spikes are nc_if_run's
 * bit for bit.  x is read before out is written (in place is fine). */
static void if_train_block(const nc_if_params *p, int T, int64_t step, int len, const float *th,
                           const float *in, float *out, float *m_saved)
{
    float v[NC_GRAD_IF_BLOCK];
    int ge = p->compare == NC_FIRE_GE, sub = p->reset == NC_RESET_SUBTRACT;
    for (int j = 0; j < len; j++)
        v[j] = p->v0_fraction * th[j];
    for (int t = 0; t < T; t++) {
        const float *x = in + t * step;
        float *o = out + t * step, *ms = m_saved + t * step;
        for (int j = 0; j < len; j++) {
            float m = v[j] + x[j], d = m - th[j];
            int fire = ge ? d >= 0.0f : d > 0.0f;
            ms[j] = m;
            o[j] = fire ? th[j] : 0.0f;
            v[j] = fire ? (sub ? d : 0.0f) : m;
        }
    }
}

void nc_if_forward_train(const nc_if_params *p, int T, int64_t n, int c, int64_t inner,
                         const float *in, float *out, float *m_saved)
{
    int64_t step = n * c * inner;
    float th[NC_GRAD_IF_BLOCK];
    for (int64_t e0 = 0; e0 < step; e0 += NC_GRAD_IF_BLOCK) {
        int len = (int)(step - e0 < NC_GRAD_IF_BLOCK ? step - e0 : NC_GRAD_IF_BLOCK);
        block_thresholds(p, c, inner, e0, len, th);
        if_train_block(p, T, step, len, th, in + e0, out + e0, m_saved + e0);
    }
}

/* Adds the per-neuron θ gradients acc[0, len) of the block starting at e0
 * into dthreshold: runs of neurons of one channel are summed in double and
 * added once (per layer everything goes to dthreshold[0]). */
static void add_threshold_grads(const nc_if_params *p, int c, int64_t inner, int64_t e0, int len,
                                const double *acc, float *dthreshold)
{
    int per_channel = p->n_threshold == c;
    int j = 0;
    while (j < len) {
        int ch = per_channel ? (int)(((e0 + j) / inner) % c) : 0;
        double sum = 0.0;
        do
            sum += acc[j++];
        while (j < len && (!per_channel || ((e0 + j) / inner) % c == ch));
        dthreshold[ch] += (float)sum;
    }
}

/* BPTT of one block, steps T..1 (the header's recurrence).  dv[j] holds
 * dL/dv_t of neuron j, the gradient flowing back from step t + 1.  acc
 * (NULL when θ needs no gradient) receives dL/dθ per neuron. */
static void if_backward_block(const nc_if_params *p, nc_surrogate kind, float alpha, int T,
                              int64_t step, int len, const float *th, const float *m_saved,
                              const float *dout, float *din, double *acc)
{
    float dv[NC_GRAD_IF_BLOCK];
    int ge = p->compare == NC_FIRE_GE, sub = p->reset == NC_RESET_SUBTRACT;
    for (int j = 0; j < len; j++) {
        dv[j] = 0.0f;
        if (acc)
            acc[j] = 0.0;
    }
    for (int t = T - 1; t >= 0; t--) {
        const float *ms = m_saved + t * step, *dy = dout + t * step;
        float *dx = din + t * step;
        for (int j = 0; j < len; j++) {
            float m = ms[j], d = m - th[j];
            float s = (ge ? d >= 0.0f : d > 0.0f) ? 1.0f : 0.0f; /* the forward's test */
            float sg = nc_surrogate_grad(kind, alpha, d);
            float g = dy[j]; /* read before din[j] is written: din may alias dout */
            /* ∂v/∂s is −θ (subtract) or −m (zero); ∂v/∂m is 1 or 1 − s */
            float ds = g * th[j] - dv[j] * (sub ? th[j] : m);
            float dm = dv[j] * (sub ? 1.0f : 1.0f - s) + ds * sg;
            if (acc) /* θ enters out = θ·s, s = H(m − θ) and, subtracting, v = m − θ·s */
                acc[j] += (double)g * s - (double)ds * sg - (sub ? (double)dv[j] * s : 0.0);
            dx[j] = dm;
            dv[j] = dm;
        }
    }
    if (acc) /* v_0 = f·θ */
        for (int j = 0; j < len; j++)
            acc[j] += (double)dv[j] * p->v0_fraction;
}

void nc_if_backward(const nc_if_params *p, nc_surrogate surrogate, float alpha, int T, int64_t n,
                    int c, int64_t inner, const float *m_saved, const float *dout, float *din,
                    float *dthreshold)
{
    int64_t step = n * c * inner;
    float th[NC_GRAD_IF_BLOCK];
    double acc[NC_GRAD_IF_BLOCK];
    for (int64_t e0 = 0; e0 < step; e0 += NC_GRAD_IF_BLOCK) {
        int len = (int)(step - e0 < NC_GRAD_IF_BLOCK ? step - e0 : NC_GRAD_IF_BLOCK);
        block_thresholds(p, c, inner, e0, len, th);
        if_backward_block(p, surrogate, alpha, T, step, len, th, m_saved + e0, dout + e0,
                          din + e0, dthreshold ? acc : NULL);
        if (dthreshold)
            add_threshold_grads(p, c, inner, e0, len, acc, dthreshold);
    }
}

/* ---- loss --------------------------------------------------------------- */

/* One row of a loss over [rows, classes] logits: its loss, and its gradient
 * (already divided by rows) into dz when dz is set. */
typedef double (*row_loss_fn)(const void *ctx, int64_t rows, int64_t r, int classes, const float *z, int top,
                              int32_t label, float *dz);

/* The mean over rows of row_loss; *correct counts the right argmaxes; a row
 * with a label outside [0, classes) adds no loss and a zero gradient. */
static double mean_row_loss(int64_t rows, int classes, const float *logits, const int32_t *labels,
                            float *dlogits, int64_t *correct, row_loss_fn row_loss, const void *ctx)
{
    if (rows < 1)
        return 0.0;
    double total = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        const float *z = logits + r * classes;
        float *dz = dlogits ? dlogits + r * classes : NULL;
        int32_t label = labels[r];
        int valid = label >= 0 && label < classes;
        int top = nc_argmax_first(classes, z);
        if (correct && valid && top == label)
            (*correct)++;
        if (!valid) { /* wrong, no loss and no gradient */
            if (dz)
                memset(dz, 0, (size_t)classes * sizeof(float));
            continue;
        }
        total += row_loss(ctx, rows, r, classes, z, top, label, dz);
    }
    return total / (double)rows;
}

static double xent_row(const void *ctx, int64_t rows, int64_t r, int classes, const float *z, int top,
                       int32_t label, float *dz)
{
    (void)ctx;
    (void)r;
    return nc_xent_row(rows, classes, z, top, label, dz);
}

double nc_softmax_xent(int64_t rows, int classes, const float *logits, const int32_t *labels,
                       float *dlogits, int64_t *correct)
{
    return mean_row_loss(rows, classes, logits, labels, dlogits, correct, xent_row, NULL);
}

typedef struct distill_ctx {
    const float *teacher; /* [rows, classes] */
    double alpha, tau;
} distill_ctx;

/* One row's loss and gradient (see nc_distill_xent). */
static double distill_row(const void *ctx, int64_t rows, int64_t r, int classes, const float *s, int top,
                          int32_t label, float *ds)
{
    const distill_ctx *d = ctx;
    (void)top;
    return nc_distill_row(rows, classes, s, d->teacher + r * classes, d->alpha, d->tau, label, ds);
}

double nc_distill_xent(int64_t rows, int classes, const float *logits, const float *teacher,
                       const int32_t *labels, double alpha, double tau, float *dlogits, int64_t *correct)
{
    if (alpha == 0.0 || !teacher)
        return nc_softmax_xent(rows, classes, logits, labels, dlogits, correct);
    distill_ctx ctx = {teacher, alpha, tau};
    return mean_row_loss(rows, classes, logits, labels, dlogits, correct, distill_row, &ctx);
}
