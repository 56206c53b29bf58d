// nc_gpu_train_conv.h — the GPU trainer's convolutions through cuDNN (C++,
// gpu/ only): forward, input gradient and weight gradient of NCHW fp32
// values, with deterministic algorithms, each chosen once per shape by
// timing cuDNN's algorithms on the real buffers.  The arithmetic follows the
// engine's option "precision" (nc_train_conv_math):
//   fp32 (and the split modes): fp32 FMA, the CPU trainer's products, so the
//        gradients stay comparable with it;
//   tf32: TF32 tensor cores on the fp32 values;
//   bf16: mixed precision as PyTorch's autocast does it — each convolution
//        reads channels-last bf16 copies of its fp32 operands (one
//        transposing, rounding kernel each), accumulates in fp32 on bf16
//        tensor cores, and its bf16 result is widened into the fp32 value
//        (the weight gradient added to the fp32 one): the weights, the
//        optimizer and every other layer stay fp32.  Only ungrouped convs
//        whose channel counts are multiples of 8; the others run in fp32.
//
// The trainer keeps im2col + cuBLAS for what this does not take: without
// cuDNN, with the `conv` option set to im2col, for asymmetric padding (cuDNN
// has no way to say it), and for a shape cuDNN refuses (kept as refused).
#ifndef NC_GPU_TRAIN_CONV_H
#define NC_GPU_TRAIN_CONV_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "gpu/nc_gpu.h"
#include "gpu/nc_gpu_cudnn.h"
#include "sim/nc_window.h"

struct nc_train_convs;

// The arithmetic of the trainer's convolutions under the current options
// (NC_CONV_FP32_ANY, NC_CONV_TF32 or NC_CONV_BF16).
nc_conv_math nc_train_conv_math(void);

// The plans of one trainer on `stream`; *out stays NULL (and NC_OK is
// returned) when cuDNN is absent or the `conv` option asks for im2col.
nc_status nc_train_convs_new(cudaStream_t stream, nc_train_convs **out, nc_error *err);
void nc_train_convs_free(nc_train_convs *c);
// Buffers freed so far (a workspace or copy that grew, a kept copy evicted):
// a recorded step that used them is void (nc_gpu_train_graph.h).  0 for NULL.
uint64_t nc_train_convs_frees(const nc_train_convs *c);

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
