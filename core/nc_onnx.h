/* nc_onnx.h — ONNX import (protobuf-c code generated at build time from
 * Debian libonnx-dev's /usr/include/onnx/onnx.proto).
 *
 * Reads what PyTorch writes: the TorchScript exporter (opsets 11–17, weights
 * inline) and the dynamo exporter (opset 18+, weights in an external
 * `<name>.onnx.data` file next to the model).  External data is resolved only
 * inside the model's folder: a location with "..", an absolute path or a
 * symlink leaving the folder is refused.
 *
 * Supported ops: Conv, Gemm, MatMul(+Add), Relu, Clip, MaxPool, AveragePool,
 * GlobalAveragePool, BatchNormalization (folded into the preceding Conv/Gemm
 * when that node feeds only the BN, else a per-channel affine node), Flatten,
 * Reshape with a constant shape that flattens, Add (residual, or a constant
 * bias folded into the producer), Concat (channels), Dropout/Identity
 * (removed), Softmax/LogSoftmax at the output (dropped, reported), Constant
 * and constant-only subgraphs (Shape/Gather/Unsqueeze/Squeeze/Concat/Cast/
 * Slice/Mul/Div...) folded; the QCFS chain Div→Clip→Mul→Add(0.5)→Floor→Div→Mul
 * recognised as a QCFS neuron with its λ and L.
 * Anything else: import fails with NC_ERR_UNSUPPORTED and a message listing
 * every unsupported node (name, op type, opset); the report holds them too. */
#ifndef NC_ONNX_H
#define NC_ONNX_H

#include "nc_net.h"

/* A graph input that the caller supplies as a constant (used by the ONNX
 * conformance tests, whose node tests pass weights as graph inputs). */
typedef struct nc_onnx_binding {
    const char *name;
    const nc_tensor *value;
} nc_onnx_binding;

typedef struct nc_onnx_options {
    int n_bindings;
    const nc_onnx_binding *bindings;
    size_t memory_budget; /* max bytes of weights to accept; 0 = nc_memory_budget() */
} nc_onnx_options;

/* Imports the model at `path` into a new network (*out).  opts may be NULL.
 * On failure *out is NULL and err says which file, node and op, and what to do.
 * On success (*out)->report lists every ONNX node and what became of it. */
nc_status nc_onnx_load(const char *path, const nc_onnx_options *opts, nc_net **out, nc_error *err);

/* Same, but on failure still returns the partial report of what was found
 * (for `neurocuda info` on an unsupported model): *report_out receives a
 * report the caller frees with nc_report_clear(), even on failure. */
nc_status nc_onnx_load_with_report(const char *path, const nc_onnx_options *opts, nc_net **out,
                                   nc_report *report_out, nc_error *err);
void nc_report_clear(nc_report *report);

/* Reads a serialized onnx.TensorProto file (the `input_0.pb` / `output_0.pb`
 * files of ONNX's test data) as float32.  Integer and double tensors are
 * converted; other types fail with NC_ERR_UNSUPPORTED. */
nc_status nc_onnx_read_tensor_file(const char *path, nc_tensor **out, nc_error *err);

#endif
