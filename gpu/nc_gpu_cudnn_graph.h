// nc_gpu_cudnn_graph.h — the exact fp32 convolution through cuDNN's graph
// API (C++, gpu/ only; see nc_gpu_cudnn_graph.cu for why and how).
#ifndef NC_GPU_CUDNN_GRAPH_H
#define NC_GPU_CUDNN_GRAPH_H

#include <cudnn.h>

#include "gpu/nc_gpu_cudnn.h"

// The graph-API functions of libcudnn.so.9, filled by the loader in
// nc_gpu_cudnn.cu (all NULL when cuDNN is absent).
struct nc_cudnn_graph_api {
    const char *(*GetErrorString)(cudnnStatus_t);
    cudnnStatus_t (*CreateDescriptor)(cudnnBackendDescriptorType_t, cudnnBackendDescriptor_t *);
    cudnnStatus_t (*DestroyDescriptor)(cudnnBackendDescriptor_t);
    cudnnStatus_t (*Finalize)(cudnnBackendDescriptor_t);
    cudnnStatus_t (*SetAttribute)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t, cudnnBackendAttributeType_t,
                                  int64_t, const void *);
    cudnnStatus_t (*GetAttribute)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t, cudnnBackendAttributeType_t,
                                  int64_t, int64_t *, void *);
    cudnnStatus_t (*Execute)(cudnnHandle_t, cudnnBackendDescriptor_t, cudnnBackendDescriptor_t);
};
extern nc_cudnn_graph_api nc_graph_api;

// 1 if the channel counts suit the graph engines (16-byte rows of bf16
// input channels and of fp32 outputs).
int nc_cudnn_graph_shape_ok(const nc_conv_shape *s);

// Plans the two passes of the exact conv (NC_CONV_BF16_EXACT in
// nc_gpu_cudnn.h, which says how x and w are laid out) for shape s: for each,
// compiles and times the heuristics' first engines on x, w, y (y is
// overwritten) with up to ws_bytes of workspace at ws, and keeps the fastest
// in plan->graph_plan (plan->workspace, plan->desc set).
nc_status nc_cudnn_graph_plan(void *handle, cudaStream_t stream, const nc_conv_shape *s, const void *x,
                              const void *w, void *y, void *ws, size_t ws_bytes, nc_conv_plan *plan,
                              const char *where, nc_error *err);
nc_status nc_cudnn_graph_conv(void *handle, const nc_conv_plan *plan, const void *x, const void *w, void *y, void *ws,
                              const char *where, nc_error *err);
void nc_cudnn_graph_plan_free(nc_conv_plan *plan);

#endif
