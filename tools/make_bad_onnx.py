#!/usr/bin/python3
"""Writes the small ONNX fixtures of tests/test_onnx_bad_input.c into
tests/fixtures/onnx_bad/ (run from the repository root, or pass the folder).

Bad models are built with onnx.helper (python3-onnx 1.12); a few good models
serve as controls: ok_external (dynamo-style, opset 18, weights in
ok_external.onnx.data), ok_fields (raw_data, float_data, double_data and
int64_data initializers), ok_reduce (opset 18 ReduceMean as a global
average pool), ok_fold (which folds happen and which do not), ok_constfold
(constant subgraphs) and ok_qcfs (a QCFS network exported by PyTorch's
TorchScript exporter, python3-torch 1.13).  Controls come with an input and
the expected output as TensorProto files (<name>_input.pb, <name>_output.pb).

Everything is deterministic (fixed seeds), so re-running gives the same bytes
for the helper-built files; the torch export may differ across torch versions.
"""
import os
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join("tests", "fixtures", "onnx_bad")
RNG = np.random.default_rng(1234)


def path(name):
    return os.path.join(OUT, name)


def save(model, name):
    # no checker: several fixtures are invalid on purpose
    with open(path(name), "wb") as f:
        f.write(model.SerializeToString())


def save_tensor(array, name):
    with open(path(name), "wb") as f:
        f.write(numpy_helper.from_array(np.asarray(array, dtype=np.float32)).SerializeToString())


def vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, inits=(), opset=13):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="make_bad_onnx")
    m.ir_version = 8
    return m


def weights(name, shape):
    return numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32), name)


def empty_tensor(name, shape):
    """A float tensor header with no data (make_tensor insists on values)."""
    t = TensorProto()
    t.name, t.data_type = name, TensorProto.FLOAT
    t.dims.extend(shape)
    return t


def external(name, shape, location, offset, length=None):
    """A float tensor whose data lives in another file (data_location EXTERNAL)."""
    t = empty_tensor(name, shape)
    t.data_location = TensorProto.EXTERNAL
    entries = [("location", location), ("offset", str(offset))]
    if length is not None:
        entries.append(("length", str(length)))
    for key, value in entries:
        e = t.external_data.add()
        e.key, e.value = key, value
    return t


def conv2d(x, w, b):
    """Reference NCHW convolution, stride 1, no padding."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    y = np.zeros((n, o, h - kh + 1, wd - kw + 1), dtype=np.float64)
    for i in range(y.shape[2]):
        for j in range(y.shape[3]):
            patch = x[:, :, i:i + kh, j:j + kw].astype(np.float64)
            y[:, :, i, j] = np.tensordot(patch, w.astype(np.float64), axes=([1, 2, 3], [1, 2, 3]))
    return y + b.reshape(1, -1, 1, 1)


# ---- bad models ---------------------------------------------------------------

def unsupported_ops():
    """Three nodes with no spiking equivalent: the message must list all."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        helper.make_node("Sigmoid", ["c"], ["s"], name="gate"),
        helper.make_node("Tanh", ["s"], ["t"], name="squash"),
        helper.make_node("LeakyRelu", ["t"], ["l"], name="leaky"),
        helper.make_node("Flatten", ["l"], ["y"], name="flat"),
    ]
    save(model(nodes, [vi("x", [1, 1, 4, 4])], [vi("y", [1, 8])], [weights("w", [2, 1, 3, 3])]),
         "unsupported_ops.onnx")


def softmax_middle():
    nodes = [
        helper.make_node("Gemm", ["x", "w1"], ["h"], name="fc1", transB=1),
        helper.make_node("Softmax", ["h"], ["p"], name="mid_softmax", axis=1),
        helper.make_node("Gemm", ["p", "w2"], ["y"], name="fc2", transB=1),
    ]
    save(model(nodes, [vi("x", [1, 4])], [vi("y", [1, 2])], [weights("w1", [3, 4]), weights("w2", [2, 3])]),
         "softmax_middle.onnx")


def external_model(name, location, offset=0, length=None):
    nodes = [helper.make_node("Gemm", ["x", "w"], ["y"], name="fc", transB=1)]
    save(model(nodes, [vi("x", [1, 4])], [vi("y", [1, 2])], [external("w", [2, 4], location, offset, length)],
               opset=18), name + ".onnx")


def external_bad():
    external_model("ext_missing", "ext_missing.onnx.data")
    external_model("ext_parent", "../outside.onnx.data")
    external_model("ext_absolute", "/etc/passwd")
    # 32 bytes needed at offset 16 of a 24-byte file
    external_model("ext_short", "ext_short.onnx.data", offset=16, length=32)
    with open(path("ext_short.onnx.data"), "wb") as f:
        f.write(bytes(24))


def weight_input():
    """W is a graph input without an initializer (node-test style)."""
    nodes = [helper.make_node("Conv", ["x", "W"], ["y"], name="conv")]
    save(model(nodes, [vi("x", [1, 1, 5, 5]), vi("W", [1, 1, 3, 3])], [vi("y", [1, 1, 3, 3])]),
         "weight_input.onnx")


def dangling():
    nodes = [helper.make_node("Conv", ["x", "missing_weight"], ["y"], name="conv")]
    save(model(nodes, [vi("x", [1, 1, 5, 5])], [vi("y", [1, 1, 3, 3])]), "dangling.onnx")


def cycle():
    nodes = [
        helper.make_node("Add", ["x", "b"], ["a"], name="loop_a"),
        helper.make_node("Relu", ["a"], ["b"], name="loop_b"),
        helper.make_node("Identity", ["b"], ["y"], name="out"),
    ]
    save(model(nodes, [vi("x", [1, 4])], [vi("y", [1, 4])]), "cycle.onnx")


def huge_dims():
    """An initializer that declares 2^93 floats and holds none."""
    w = empty_tensor("w", [1 << 31, 1 << 31, 1 << 31])
    nodes = [helper.make_node("Gemm", ["x", "w"], ["y"], name="fc", transB=1)]
    save(model(nodes, [vi("x", [1, 4])], [vi("y", [1, 2])], [w]), "huge_dims.onnx")


def raw_mismatch():
    w = empty_tensor("w", [2, 4])
    w.raw_data = bytes(12)
    nodes = [helper.make_node("Gemm", ["x", "w"], ["y"], name="fc", transB=1)]
    save(model(nodes, [vi("x", [1, 4])], [vi("y", [1, 2])], [w]), "raw_mismatch.onnx")


def channel_mismatch():
    """Declared input has 3 channels, the weight expects 1."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv1")]
    save(model(nodes, [vi("x", [1, 3, 5, 5])], [vi("y", [1, 2, 3, 3])], [weights("w", [2, 1, 3, 3])]),
         "channel_mismatch.onnx")


def two_inputs():
    nodes = [helper.make_node("Add", ["a", "b"], ["y"], name="sum")]
    save(model(nodes, [vi("a", [1, 4]), vi("b", [1, 4])], [vi("y", [1, 4])]), "two_inputs.onnx")


# ---- good controls -----------------------------------------------------------

def ok_external():
    """Dynamo layout: opset 18, weights at aligned offsets of one .data file."""
    w1 = RNG.standard_normal((2, 1, 3, 3)).astype(np.float32)
    b1 = RNG.standard_normal(2).astype(np.float32)
    w2 = RNG.standard_normal((3, 32)).astype(np.float32)
    blob = bytearray(256)
    blob[0:72] = w1.tobytes()
    blob[128:136] = b1.tobytes()
    blob = bytes(blob) + w2.tobytes()
    with open(path("ok_external.onnx.data"), "wb") as f:
        f.write(blob)
    shape = numpy_helper.from_array(np.array([1, -1], dtype=np.int64), "shape")
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c"], name="conv"),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Reshape", ["r", "shape"], ["f"], name="view"),
        helper.make_node("Gemm", ["f", "w2"], ["y"], name="fc", transB=1),
    ]
    inits = [external("w1", [2, 1, 3, 3], "ok_external.onnx.data", 0, 72),
             external("b1", [2], "ok_external.onnx.data", 128, 8),
             external("w2", [3, 32], "ok_external.onnx.data", 256, 384), shape]
    save(model(nodes, [vi("x", [1, 1, 6, 6])], [vi("y", [1, 3])], inits, opset=18), "ok_external.onnx")
    x = RNG.standard_normal((1, 1, 6, 6)).astype(np.float32)
    y = np.maximum(conv2d(x, w1, b1), 0).reshape(1, -1) @ w2.T.astype(np.float64)
    save_tensor(x, "ok_external_input.pb")
    save_tensor(y, "ok_external_output.pb")


def ok_fields():
    """Initializers in every storage field; a double constant cast to float
    and added per channel (folded into the Gemm bias)."""
    w = RNG.standard_normal((2, 1, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(2).astype(np.float32)
    g = RNG.standard_normal((3, 8)).astype(np.float32)
    k = RNG.standard_normal(3)
    inits = [
        helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.flatten().tolist()),          # float_data
        helper.make_tensor("b", TensorProto.FLOAT, b.shape, b.tobytes(), raw=True),         # raw_data
        helper.make_tensor("shape", TensorProto.INT64, [2], [1, -1]),                       # int64_data
        helper.make_tensor("g", TensorProto.FLOAT, g.shape, g.tobytes(), raw=True),
        helper.make_tensor("k", TensorProto.DOUBLE, [3], k.tolist()),                       # double_data
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv"),
        helper.make_node("Reshape", ["c", "shape"], ["f"], name="view"),
        helper.make_node("Gemm", ["f", "g"], ["h"], name="fc", transB=1),
        helper.make_node("Cast", ["k"], ["kf"], name="cast", to=TensorProto.FLOAT),
        helper.make_node("Add", ["h", "kf"], ["y"], name="bias"),
    ]
    save(model(nodes, [vi("x", [1, 1, 4, 4])], [vi("y", [1, 3])], inits), "ok_fields.onnx")
    x = RNG.standard_normal((1, 1, 4, 4)).astype(np.float32)
    y = conv2d(x, w, b).reshape(1, -1) @ g.T.astype(np.float64) + k.astype(np.float32)
    save_tensor(x, "ok_fields_input.pb")
    save_tensor(y, "ok_fields_output.pb")


def ok_reduce():
    """Opset 18 ReduceMean over H, W with axes as an input (a dynamo-style
    adaptive average pool), keepdims=0, then a Gemm."""
    w = RNG.standard_normal((3, 1, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(3).astype(np.float32)
    g = RNG.standard_normal((2, 3)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"), numpy_helper.from_array(g, "g"),
             numpy_helper.from_array(np.array([-1, -2], dtype=np.int64), "axes")]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv"),
        helper.make_node("ReduceMean", ["c", "axes"], ["m"], name="mean", keepdims=0),
        helper.make_node("Gemm", ["m", "g"], ["y"], name="fc", transB=1),
    ]
    save(model(nodes, [vi("x", [2, 1, 5, 5])], [vi("y", [2, 2])], inits, opset=18), "ok_reduce.onnx")
    x = RNG.standard_normal((2, 1, 5, 5)).astype(np.float32)
    y = conv2d(x, w, b).mean(axis=(2, 3)) @ g.T.astype(np.float64)
    save_tensor(x, "ok_reduce_input.pb")
    save_tensor(y, "ok_reduce_output.pb")


def ok_fold():
    """Folding rules: a BN whose conv output is also read elsewhere becomes
    an affine node; MatMul + Add becomes one dense layer with a bias; a dead
    branch (Sigmoid whose result nobody reads) is removed."""
    w = RNG.standard_normal((2, 2, 3, 3)).astype(np.float32)
    gamma, beta = RNG.uniform(0.5, 1.5, 2).astype(np.float32), RNG.standard_normal(2).astype(np.float32)
    mean, var = RNG.standard_normal(2).astype(np.float32), RNG.uniform(0.5, 2, 2).astype(np.float32)
    m, b = RNG.standard_normal((32, 3)).astype(np.float32), RNG.standard_normal(3).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in
             ((w, "w"), (gamma, "gamma"), (beta, "beta"), (mean, "mean"), (var, "var"), (m, "m"), (b, "b"))]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["bn"], name="bn"),
        helper.make_node("Sigmoid", ["c"], ["unused"], name="dead"),
        helper.make_node("Add", ["c", "bn"], ["s"], name="residual"),
        helper.make_node("Relu", ["s"], ["r"], name="relu"),
        helper.make_node("Flatten", ["r"], ["f"], name="flat"),
        helper.make_node("MatMul", ["f", "m"], ["mm"], name="matmul"),
        helper.make_node("Add", ["mm", "b"], ["y"], name="bias"),
    ]
    save(model(nodes, [vi("x", [1, 2, 4, 4])], [vi("y", [1, 3])], inits), "ok_fold.onnx")
    x = RNG.standard_normal((1, 2, 4, 4)).astype(np.float32)
    c = conv2d(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), w, np.zeros(2, np.float32))
    bn = (gamma.reshape(1, 2, 1, 1) * (c - mean.reshape(1, 2, 1, 1)) / np.sqrt(var.reshape(1, 2, 1, 1) + 1e-5)
          + beta.reshape(1, 2, 1, 1))
    y = np.maximum(c + bn, 0).reshape(1, -1) @ m.astype(np.float64) + b
    save_tensor(x, "ok_fold_input.pb")
    save_tensor(y, "ok_fold_output.pb")


def ok_constfold():
    """Constant subgraphs evaluated at import: Shape, Gather, Unsqueeze,
    ConstantOfShape, Concat, Slice, Cast, Range, Div, Transpose."""
    big = RNG.standard_normal((48, 2)).astype(np.float32)
    i64 = lambda v: numpy_helper.from_array(np.array(v, dtype=np.int64))  # noqa: E731
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "zero"], ["n"], name="batch", axis=0),
        helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"], name="unsq"),
        helper.make_node("ConstantOfShape", ["one"], ["m1"], name="minus_one", value=i64([-1])),
        helper.make_node("ConstantOfShape", ["one"], ["seven"], name="seven", value=i64([7])),
        helper.make_node("Concat", ["m1", "seven"], ["pair"], name="pair", axis=0),
        helper.make_node("Slice", ["pair", "starts", "ends"], ["rest"], name="slice"),
        helper.make_node("Concat", ["n1", "rest"], ["target"], name="target", axis=0),
        helper.make_node("Reshape", ["x", "target"], ["flat"], name="view"),
        helper.make_node("Range", ["r0", "r1", "r2"], ["idx"], name="range"),
        helper.make_node("Cast", ["idx"], ["idxf"], name="cast", to=TensorProto.FLOAT),
        helper.make_node("Div", ["idxf", "ten"], ["scale"], name="scale"),
        helper.make_node("Mul", ["flat", "scale"], ["scaled"], name="mul"),
        helper.make_node("Transpose", ["big"], ["bigT"], name="transpose", perm=[1, 0]),
        helper.make_node("Gather", ["bigT", "one_scalar"], ["shift"], name="pick", axis=0),
        helper.make_node("Add", ["scaled", "shift"], ["y"], name="shift_add"),
    ]
    consts = {"zero": np.array(0, np.int64), "axes0": np.array([0], np.int64), "one": np.array([1], np.int64),
              "starts": np.array([0], np.int64), "ends": np.array([1], np.int64),
              "r0": np.array(1, np.int64), "r1": np.array(49, np.int64), "r2": np.array(1, np.int64),
              "ten": np.array(10, np.float32), "one_scalar": np.array(1, np.int64), "big": big}
    inits = [numpy_helper.from_array(v, k) for k, v in consts.items()]
    save(model(nodes, [vi("x", [2, 3, 4, 4])], [vi("y", [2, 48])], inits), "ok_constfold.onnx")
    x = RNG.standard_normal((2, 3, 4, 4)).astype(np.float32)
    scale = np.arange(1, 49, dtype=np.float32) / np.float32(10)
    y = x.reshape(2, 48) * scale + big.T[1]
    save_tensor(x, "ok_constfold_input.pb")
    save_tensor(y, "ok_constfold_output.pb")


def ok_qcfs():
    """QCFS activations (scalar and per-channel λ) as PyTorch exports them."""
    import torch
    import torch.nn as nn

    class QCFS(nn.Module):
        def __init__(self, levels, thresh):
            super().__init__()
            self.up = nn.Parameter(thresh)
            self.t = levels

        def forward(self, x):
            x = x / self.up
            x = torch.clamp(x, 0, 1)
            x = torch.floor(x * self.t + 0.5) / self.t
            return x * self.up

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 2, 3), QCFS(8, torch.tensor([2.0])),
                        nn.Conv2d(2, 3, 3), QCFS(4, torch.tensor([1.0, 1.5, 2.0]).view(1, 3, 1, 1)),
                        nn.Flatten(), nn.Linear(12, 2)).eval()
    x = torch.randn(2, 1, 6, 6)
    torch.onnx.export(net, x, path("ok_qcfs.onnx"), opset_version=13, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    with torch.no_grad():
        save_tensor(x.numpy(), "ok_qcfs_input.pb")
        save_tensor(net(x).numpy(), "ok_qcfs_output.pb")


def main():
    os.makedirs(OUT, exist_ok=True)
    for make in (unsupported_ops, softmax_middle, external_bad, weight_input, dangling, cycle, huge_dims,
                 raw_mismatch, channel_mismatch, two_inputs, ok_external, ok_fields, ok_reduce, ok_fold,
                 ok_constfold, ok_qcfs):
        make()
    total = sum(os.path.getsize(path(f)) for f in os.listdir(OUT))
    print("wrote %d files, %d bytes, to %s" % (len(os.listdir(OUT)), total, OUT))


if __name__ == "__main__":
    main()
