/* nc_window.h — the geometry of a sliding window (conv2d, average and max
 * pools), shared by the CPU forward kernels (nc_cpu_ops.c), their backward
 * twins (nc_grad_ops.c) and the references.
 *
 * Windows follow ONNX: pad = {top, left, bottom, right}; the output size
 * along one axis is
 *     floor_or_ceil((in + pad0 + pad1 − dil·(k−1) − 1) / stride) + 1
 * and with ceil_mode a last window that would START in the right/bottom
 * padding is dropped (so every window covers at least one real input). */
#ifndef NC_WINDOW_H
#define NC_WINDOW_H

#include <stddef.h>
#include <stdint.h>

/* The arithmetic below is also the GPU kernels' (gpu/ includes this header):
 * under nvcc each function is compiled for the host and the device. */
#ifdef __CUDACC__
#define NC_WINDOW_FN __host__ __device__ static inline
#else
#define NC_WINDOW_FN static inline
#endif

/* Geometry of a sliding window over [C, H, W]. */
typedef struct nc_window {
    int c, h, w;      /* input channels and size per sample                  */
    int oh, ow;       /* output size, filled by nc_window_init               */
    int kernel[2];    /* KH, KW                                              */
    int stride[2];
    int pad[4];       /* top, left, bottom, right                            */
    int dilation[2];
} nc_window;


/* Fills g from the input size and the node's window parameters; returns 0, or
 * -1 when a parameter is out of range (k, stride, dilation < 1, pad < 0) or
 * no window fits. */
int nc_window_init(nc_window *g, int c, int h, int w, const int kernel[2], const int stride[2],
                   const int pad[4], const int dilation[2], int ceil_mode);

/* ⌈a / b⌉ for a ≥ 0, b > 0. */
NC_WINDOW_FN int nc_ceil_div(int a, int b) { return (a + b - 1) / b; }

/* Output size along one axis (formula above); 0 or less when no window fits. */
NC_WINDOW_FN int nc_window_out_size(int in, int k, int stride, int pad0, int pad1, int dil, int ceil_mode)
{
    int span = in + pad0 + pad1 - dil * (k - 1) - 1; /* last valid window start */
    if (span < 0)
        return 0;
    int out = (ceil_mode ? nc_ceil_div(span, stride) : span / stride) + 1;
    /* ONNX / PyTorch: a ceil-mode window starting in the end padding is dropped */
    if (ceil_mode && (out - 1) * stride >= in + pad0)
        out--;
    return out;
}

/* The kernel taps k in [lo, hi) of output position o that land on real input
 * along one axis (input position start + k·dil), and in n_padded how many
 * land inside the padded input.  The input positions grow with k, so both
 * sets are ranges.  Inline: the kernels ask for it once per output. */
typedef struct nc_axis_taps {
    int start, lo, hi, n_padded;
} nc_axis_taps;

NC_WINDOW_FN nc_axis_taps nc_taps_of(int o, int k, int stride, int pad0, int pad1, int dil, int in)
{
    nc_axis_taps a;
    a.start = o * stride - pad0;
    if (dil == 1) { /* the common case, without divisions */
        a.lo = a.start >= 0 ? 0 : -a.start;
        a.hi = in - a.start < k ? in - a.start : k;
        a.n_padded = in + pad1 - a.start < k ? in + pad1 - a.start : k;
        if (a.hi < 0)
            a.hi = 0;
        if (a.lo > a.hi)
            a.lo = a.hi;
        if (a.n_padded < 0)
            a.n_padded = 0;
        return a;
    }
    a.lo = a.start >= 0 ? 0 : nc_ceil_div(-a.start, dil);
    a.hi = in - a.start > 0 ? nc_ceil_div(in - a.start, dil) : 0;
    a.n_padded = in + pad1 - a.start > 0 ? nc_ceil_div(in + pad1 - a.start, dil) : 0;
    if (a.hi > k)
        a.hi = k;
    if (a.lo > a.hi)
        a.lo = a.hi;
    if (a.n_padded > k)
        a.n_padded = k;
    return a;
}

/* The taps of output row oy and of output column ox. */
NC_WINDOW_FN nc_axis_taps nc_row_taps(const nc_window *g, int oy)
{
    return nc_taps_of(oy, g->kernel[0], g->stride[0], g->pad[0], g->pad[2], g->dilation[0], g->h);
}

NC_WINDOW_FN nc_axis_taps nc_col_taps(const nc_window *g, int ox)
{
    return nc_taps_of(ox, g->kernel[1], g->stride[1], g->pad[1], g->pad[3], g->dilation[1], g->w);
}

/* The output columns ox of kernel column kj whose input column
 * ix = ox·stride + off_x lies inside [0, W): [*lo, *hi) (one row of im2col). */
NC_WINDOW_FN void nc_tap_columns(const nc_window *g, int kj, int *off_x, int *lo, int *hi)
{
    int sw = g->stride[1];
    *off_x = kj * g->dilation[1] - g->pad[1];
    *lo = *off_x >= 0 ? 0 : nc_ceil_div(-*off_x, sw);
    *hi = g->w - *off_x > 0 ? nc_ceil_div(g->w - *off_x, sw) : 0;
    if (*hi > g->ow)
        *hi = g->ow;
    if (*lo > *hi)
        *lo = *hi;
}

/* ---- the chunked im2col convolution (forward and backward) ----------------
 * Both walk the samples in chunks whose im2col columns fill about
 * NC_CONV_CHUNK_BYTES: about half the 1 MiB L2 of the target machines, so
 * that the GEMM reads its B panel from cache (chunks of 128 KiB to 2 MiB
 * measured within noise of each other on a 28×28 CNN). */
#ifndef NC_CONV_CHUNK_BYTES
#define NC_CONV_CHUNK_BYTES (512 * 1024)
#endif

/* Rows of one group's im2col: (C / groups)·KH·KW. */
NC_WINDOW_FN int64_t nc_conv_k_group(const nc_window *g, int groups)
{
    return (int64_t)(g->c / groups) * g->kernel[0] * g->kernel[1];
}

/* Samples per chunk (at least 1, at most rows). */
NC_WINDOW_FN int64_t nc_conv_samples_per_chunk(const nc_window *g, int groups, int64_t rows)
{
    int64_t col_bytes = nc_conv_k_group(g, groups) * g->oh * g->ow * (int64_t)sizeof(float);
    int64_t nb = NC_CONV_CHUNK_BYTES / (col_bytes > 0 ? col_bytes : 1);
    if (nb < 1)
        nb = 1;
    return nb < rows ? nb : rows;
}

/* Floats of a chunk's workspace: its columns and its group's output,
 * nb·(Kg + cout / groups)·OH·OW (0 for no rows). */
NC_WINDOW_FN size_t nc_conv_chunk_work_floats(const nc_window *g, int cout, int groups, int64_t rows)
{
    if (rows < 1)
        return 0;
    int64_t nb = nc_conv_samples_per_chunk(g, groups, rows);
    int64_t p = (int64_t)g->oh * g->ow;
    return (size_t)(nb * (nc_conv_k_group(g, groups) + cout / groups) * p);
}

#endif
