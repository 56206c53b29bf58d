/* nc_loss_rows.h — one row of the output losses (softmax cross-entropy and
 * distillation from a teacher's logits), shared by the CPU's batch losses
 * (nc_grad_ops.c: nc_softmax_xent, nc_distill_xent) and the GPU trainer's
 * loss kernel (gpu/nc_gpu_train_step.cu), so that both run the same
 * arithmetic, in double, line for line.  Under nvcc each function is
 * compiled for the host and the device (as nc_window.h). */
#ifndef NC_LOSS_ROWS_H
#define NC_LOSS_ROWS_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define NC_LOSS_FN __host__ __device__ static inline
#else
#define NC_LOSS_FN static inline
#endif

/* Index of the first maximum of x[0, n). */
NC_LOSS_FN int nc_argmax_first(int n, const float *x)
{
    int best = 0;
    for (int k = 1; k < n; k++)
        if (x[k] > x[best])
            best = k;
    return best;
}

/* Cross-entropy of one row z (its first maximum at `top`), and its gradient
 * divided by `rows` into dz when dz is set. */
NC_LOSS_FN double nc_xent_row(int64_t rows, int classes, const float *z, int top, int32_t label, float *dz)
{
    /* log-sum-exp shifted by the maximum, in double */
    double zmax = z[top], sum = 0.0;
    for (int k = 0; k < classes; k++)
        sum += exp((double)z[k] - zmax);
    if (dz)
        for (int k = 0; k < classes; k++)
            dz[k] = (float)((exp((double)z[k] - zmax) / sum - (k == label)) / (double)rows);
    return log(sum) + zmax - z[label];
}

/* log Σ_k exp(z_k/τ) of one row, shifted by the maximum, in double. */
NC_LOSS_FN double nc_log_sum_exp_scaled(int classes, const float *z, double tau)
{
    double zmax = (double)z[0] / tau, sum = 0.0;
    for (int k = 1; k < classes; k++)
        if ((double)z[k] / tau > zmax)
            zmax = (double)z[k] / tau;
    for (int k = 0; k < classes; k++)
        sum += exp((double)z[k] / tau - zmax);
    return log(sum) + zmax;
}

/* One row of nc_distill_xent: student logits s, teacher logits t, weight α
 * and temperature τ; its gradient divided by `rows` into ds when set. */
NC_LOSS_FN double nc_distill_row(int64_t rows, int classes, const float *s, const float *t, double alpha,
                                 double tau, int32_t label, float *ds)
{
    double scale = 1.0 / (double)rows;
    double lse = nc_log_sum_exp_scaled(classes, s, 1.0);
    double soft_lse = nc_log_sum_exp_scaled(classes, s, tau), target_lse = nc_log_sum_exp_scaled(classes, t, tau);
    double kl = 0.0;
    for (int k = 0; k < classes; k++) {
        /* log-probabilities first: no log of an underflowed probability */
        double log_target = (double)t[k] / tau - target_lse, log_soft = (double)s[k] / tau - soft_lse;
        double target = exp(log_target), soft = exp(log_soft), hard = exp((double)s[k] - lse);
        kl += target * (log_target - log_soft);
        if (ds)
            ds[k] = (float)(((1.0 - alpha) * (hard - (k == label)) + alpha * tau * (soft - target)) * scale);
    }
    return (1.0 - alpha) * (lse - (double)s[label]) + alpha * tau * tau * kl;
}

#endif
