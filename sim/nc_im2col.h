/* nc_im2col.h — the column matrix of a chunked convolution and its
 * transpose, shared by the CPU forward conv (nc_cpu_ops.c, compiled once per
 * instruction set) and its backward twin (nc_grad_ops.c), so that both read
 * the same taps in the same order.
 *
 * For group grp of nb samples the matrix is [Kg, nb·P] (Kg = nc_conv_k_group,
 * P = OH·OW): row (ci, ki, kj) holds sample s's tap (ki, kj) of channel ci at
 * columns [s·P, (s + 1)·P), zero where the tap reads padding. */
#ifndef NC_IM2COL_H
#define NC_IM2COL_H

#include <string.h>

#include "nc_window.h"

/* One row of im2col: tap (ki, kj) of the plane src (H×W) for every output
 * position into dst (OH×OW), 0 in padding. */
static inline void nc_im2col_tap(const nc_window *g, const float *src, int ki, int kj, float *dst)
{
    int off_x, lo, hi, sw = g->stride[1];
    nc_tap_columns(g, kj, &off_x, &lo, &hi);
    for (int oy = 0; oy < g->oh; oy++, dst += g->ow) {
        int iy = oy * g->stride[0] + ki * g->dilation[0] - g->pad[0];
        if (iy < 0 || iy >= g->h) {
            memset(dst, 0, (size_t)g->ow * sizeof(float));
            continue;
        }
        const float *row = src + (int64_t)iy * g->w + off_x;
        for (int ox = 0; ox < lo; ox++)
            dst[ox] = 0.0f;
        if (sw == 1)
            memcpy(dst + lo, row + lo, (size_t)(hi - lo) * sizeof(float));
        else
            for (int ox = lo; ox < hi; ox++)
                dst[ox] = row[ox * sw];
        for (int ox = hi; ox < g->ow; ox++)
            dst[ox] = 0.0f;
    }
}

/* The transpose of nc_im2col_tap: adds each column value of src back onto
 * the input position of dst it was read from (values from padding drop). */
static inline void nc_col2im_tap(const nc_window *g, const float *src, int ki, int kj, float *dst)
{
    int off_x, lo, hi;
    nc_tap_columns(g, kj, &off_x, &lo, &hi);
    for (int oy = 0; oy < g->oh; oy++, src += g->ow) {
        int iy = oy * g->stride[0] + ki * g->dilation[0] - g->pad[0];
        if (iy < 0 || iy >= g->h)
            continue;
        float *row = dst + (int64_t)iy * g->w + off_x;
        for (int ox = lo; ox < hi; ox++)
            row[ox * g->stride[1]] += src[ox];
    }
}

/* Walks the matrix of group grp for samples [0, nb) of planes (C×H×W each):
 * to_cols: col = im2col(planes), planes only read; else planes += the
 * transpose of col. */
static inline void nc_im2col_walk(const nc_window *g, int groups, int grp, int64_t nb, float *planes, float *col,
                                  int to_cols)
{
    int cg = g->c / groups;
    int64_t p = (int64_t)g->oh * g->ow, ld = nb * p;
    int64_t hw = (int64_t)g->h * g->w, in_row = g->c * hw;
    for (int64_t s = 0; s < nb; s++) {
        float *x = planes + s * in_row + (int64_t)grp * cg * hw;
        float *c = col + s * p;
        for (int ci = 0; ci < cg; ci++)
            for (int ki = 0; ki < g->kernel[0]; ki++)
                for (int kj = 0; kj < g->kernel[1]; kj++, c += ld) {
                    if (to_cols)
                        nc_im2col_tap(g, x + ci * hw, ki, kj, c);
                    else
                        nc_col2im_tap(g, c, ki, kj, x + ci * hw);
                }
    }
}

/* col = the matrix of group grp for nb samples of in. */
static inline void nc_im2col_chunk(const nc_window *g, int groups, int grp, int64_t nb, const float *in, float *col)
{
    nc_im2col_walk(g, groups, grp, nb, (float *)in, col, 1); /* only read when to_cols */
}

/* din (nb samples) += the transpose of the matrix col of group grp. */
static inline void nc_col2im_chunk(const nc_window *g, int groups, int grp, int64_t nb, const float *col, float *din)
{
    nc_im2col_walk(g, groups, grp, nb, din, (float *)col, 0); /* col only read when !to_cols */
}

#endif
