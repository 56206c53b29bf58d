// nc_gpu_train_conv.h — the GPU trainer's convolutions through cuDNN (C++,
// gpu/ only): forward, input gradient and weight gradient of NCHW fp32
// values, with fp32 FMA arithmetic (the CPU trainer's products, so the
// gradients stay comparable with it) and deterministic algorithms, each
// chosen once per shape by timing cuDNN's algorithms on the real buffers.
//
// The trainer keeps im2col + cuBLAS for what this does not take: without
// cuDNN, with the `conv` option set to im2col, for asymmetric padding (cuDNN
// has no way to say it), and for a shape cuDNN refuses (kept as refused).
#ifndef NC_GPU_TRAIN_CONV_H
#define NC_GPU_TRAIN_CONV_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "gpu/nc_gpu.h"
#include "sim/nc_window.h"

struct nc_train_convs;

// The plans of one trainer on `stream`; *out stays NULL (and NC_OK is
// returned) when cuDNN is absent or the `conv` option asks for im2col.
nc_status nc_train_convs_new(cudaStream_t stream, nc_train_convs **out, nc_error *err);
void nc_train_convs_free(nc_train_convs *c);

// 1 if this convolution runs here (c may be NULL: 0).
int nc_train_convs_take(nc_train_convs *c, const nc_window *w, int cout, int groups, int64_t rows);

// out [rows, Cout, OH, OW] = conv(in, weight) (no bias).
nc_status nc_train_convs_forward(nc_train_convs *c, const nc_window *w, int cout, int groups, int64_t rows,
                                 const float *in, const float *weight, float *out, nc_error *err);

// din = the input gradient (overwritten; may be NULL), dweight += the weight
// gradient (may be NULL).
nc_status nc_train_convs_backward(nc_train_convs *c, const nc_window *w, int cout, int groups, int64_t rows,
                                  const float *in, const float *weight, const float *dout, float *din,
                                  float *dweight, nc_error *err);

#endif
