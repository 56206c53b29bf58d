// nc_gpu_cudnn.h — 2-D convolutions through cuDNN (C++, gpu/ only).
//
// cuDNN is loaded at run time (dlopen of libcudnn.so.9), not linked: a
// program built here starts on a machine without cuDNN and its GPU engine
// then convolves with im2col + cuBLAS, saying why once (nc_cudnn_status).
//
// Layout: channels last everywhere — x [rows, H, W, C], the filter
// [Cout, KH, KW, C] (KRSC) and y [rows, OH, OW, Cout] — the layout cuDNN's
// tensor-core kernels read without transposing.  T is folded into rows.
//
// A plan is chosen once per shape (nc_cudnn_plan, at the first pass of a
// batch shape): cudnnFindConvolutionForwardAlgorithmEx times every algorithm
// on the real buffers and the fastest deterministic one that fits the
// precision is kept, with its workspace size and a line that says what runs
// (for `neurocuda bench` and NC_GPU_PROFILE).
#ifndef NC_GPU_CUDNN_H
#define NC_GPU_CUDNN_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu/nc_gpu.h"

// The arithmetic of one convolution.
enum nc_conv_math {
    NC_CONV_FP32,      // fp32 data, fp32 FMA (no tensor cores; no FFT or Winograd: exact products)
    NC_CONV_TF32,      // fp32 data, TF32 tensor cores
    NC_CONV_BF16,      // bf16 x, filter and y; fp32 accumulation on tensor cores
    NC_CONV_TF32_EXACT, // TF32 tensor cores on operands that TF32 holds exactly (spike counts, weight
                        // parts): exact products, fp32 accumulation (no FFT or Winograd); one pass per part
    NC_CONV_BF16_EXACT, // the exact mode on bf16 tensor cores (cuDNN's graph API, nc_gpu_cudnn_graph.h):
                        // y = conv(q, hi), then y += conv([q, q], [mid, lo]), fp32 outputs.  x holds
                        // the counts q [rows, H, W, C] followed by the pairs [rows, H, W, 2, C]; the
                        // filter holds hi [Cout, KH, KW, C] followed by [Cout, KH, KW, 2, C]
    NC_CONV_FP32_ANY    // fp32 data, fp32 FMA, any deterministic algorithm, FFT and Winograd too (the
                        // trainer: gradients need fp32 accuracy, not the engine's exact products)
};

struct nc_conv_shape {
    int64_t rows;
    int c, h, w;    // input channels and size
    int cout, oh, ow;
    int kh, kw, sh, sw, dh, dw;
    int ph, pw;     // symmetric zero padding (cuDNN has no other)
    int groups;     // grouped convolution (0 or 1: plain)
    int nchw;       // 1: x and y NCHW, the filter [Cout, C/groups, KH, KW] (the trainer's layout);
                    // 0: channels last as said above
};

struct nc_conv_plan {
    nc_conv_shape shape;
    nc_conv_math math;
    int algo;             // cudnnConvolutionFwdAlgo_t
    size_t workspace;     // bytes the algorithm needs
    float find_ms;        // its time when it was chosen
    char desc[320];       // e.g. "cuDNN IMPLICIT_PRECOMP_GEMM, bf16 tensor cores, NHWC, workspace 0 bytes"
    void *x_desc, *y_desc, *w_desc, *conv_desc; // cuDNN descriptors (opaque here)
    void *graph_plan[2];  // NC_CONV_BF16_EXACT: the graph API's plans of the two passes (instead of algo and descriptors)
    // the trainer's backward passes (nc_cudnn_plan_backward_*), chosen as the forward's
    int data_planned, filter_planned;
    int data_algo, filter_algo; // cudnnConvolutionBwdDataAlgo_t, cudnnConvolutionBwdFilterAlgo_t
    size_t data_workspace, filter_workspace;
};

// 1 when cuDNN 9 was found and loaded; else 0 and `why` says what is missing
// and what runs instead.  Loads it at the first call (thread-safe).
int nc_cudnn_status(char *why, size_t why_size);

// A cuDNN handle on `stream` (*handle stays NULL and NC_OK is returned when
// cuDNN is absent: the caller checks nc_cudnn_status first).
nc_status nc_cudnn_create(cudaStream_t stream, void **handle, nc_error *err);
void nc_cudnn_destroy(void *handle);

// 1 if cuDNN can run this shape at all (sizes within cuDNN's int range);
// else 0 and a reason.  Asymmetric padding cannot be said in a shape: the
// caller keeps such convolutions on im2col.
int nc_cudnn_shape_ok(const nc_conv_shape *s, char *why, size_t why_size);

// 1 if this cuDNN can run the exact mode on bf16 tensor cores
// (NC_CONV_BF16_EXACT) for shape s: its graph API was found and the channel
// counts suit it.
int nc_cudnn_exact_ok(const nc_conv_shape *s);

// Chooses the algorithm for shape s in precision m (see above), timing them
// on x, w, y (y is overwritten) with up to ws_bytes of workspace at ws.
// In NC_CONV_BF16_EXACT, x and w are laid out as said at the enum.
nc_status nc_cudnn_plan(void *handle, cudaStream_t stream, const nc_conv_shape *s, nc_conv_math m, const void *x,
                        const void *w, void *y, void *ws, size_t ws_bytes, nc_conv_plan *plan, const char *where,
                        nc_error *err);
void nc_cudnn_plan_free(nc_conv_plan *plan);

// y = conv(x, w) + beta·y with the plan's algorithm (beta 0 or 1: 1 adds
// into y, for the parts of split weights; NC_CONV_BF16_EXACT: 0 only, both
// passes);
// ws: plan->workspace bytes.
nc_status nc_cudnn_conv(void *handle, const nc_conv_plan *plan, const void *x, const void *w, void *y, void *ws,
                        float beta, const char *where, nc_error *err);

// ---- the trainer's backward passes (NC_CONV_FP32_ANY, NC_CONV_TF32 or NC_CONV_BF16 plans) ----
//
// Choose the deterministic algorithm of the backward-data or the
// backward-filter pass of a forward plan, timing them on real buffers: w, dy
// and dx (overwritten), or x, dy and dw_scratch (a weight-sized buffer that
// cuDNN overwrites: the real weight gradient accumulates and must not be
// touched).  Each sets its *_planned flag.
nc_status nc_cudnn_plan_backward_data(void *handle, nc_conv_plan *plan, const void *w, const void *dy, void *dx,
                                      void *ws, size_t ws_bytes, const char *where, nc_error *err);
nc_status nc_cudnn_plan_backward_filter(void *handle, nc_conv_plan *plan, const void *x, const void *dy,
                                        void *dw_scratch, void *ws, size_t ws_bytes, const char *where,
                                        nc_error *err);
// dx = convᵀ(dy, w) (overwritten).  ws: plan->data_workspace bytes.
nc_status nc_cudnn_backward_data(void *handle, const nc_conv_plan *plan, const void *w, const void *dy, void *dx,
                                 void *ws, const char *where, nc_error *err);
// dw = the filter gradient of x and dy + beta·dw (beta 1 accumulates; 0 overwrites, for a bf16
// gradient that the caller widens and adds).  ws: plan->filter_workspace bytes.
nc_status nc_cudnn_backward_filter(void *handle, const nc_conv_plan *plan, const void *x, const void *dy, void *dw,
                                   void *ws, float beta, const char *where, nc_error *err);

#endif
