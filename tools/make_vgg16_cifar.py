#!/usr/bin/python3
"""Writes the VGG16-sized network and the CIFAR-shaped images of the
workbench's scale benchmark (docs/BENCHMARKS.md, "The workbench on a
VGG16-sized network"):

  OUT/vgg16_cifar.onnx          the layout of `neurocuda bench builtin:vgg16-cifar`:
                                13 3x3 convolutions (64-64, 128-128,
                                256-256-256, 512-512-512, 512-512-512) with
                                ReLU, a 2x2 average pool after each block,
                                flatten, dense 512-10; 32x32x3 input; He-random
                                weights (fixed seed), so the accuracy is chance
                                and only the sizes matter
  OUT/cifar_synthetic.npy       N float32 images [N, 3, 32, 32]: CIFAR-10 is not
  OUT/cifar_synthetic_labels.npy  packaged in Debian, so these are smooth random
                                images (8x8 noise upsampled, plus fine noise),
                                zero mean and unit variance per channel, with
                                random labels 0..9

Usage: tools/make_vgg16_cifar.py OUT [N]     (N defaults to 10 000)
Needs python3-onnx and python3-numpy (tools/install-deps.sh)."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BLOCKS = [[64, 64], [128, 128], [256, 256, 256], [512, 512, 512], [512, 512, 512]]


def vgg16_cifar(rng):
    nodes, weights = [], []
    x, cin = "input", 3
    k = 0
    for block in BLOCKS:
        for cout in block:
            k += 1
            w = rng.normal(0, np.sqrt(2.0 / (cin * 9)), (cout, cin, 3, 3)).astype(np.float32)
            weights += [numpy_helper.from_array(w, "conv%d.weight" % k),
                        numpy_helper.from_array(np.zeros(cout, np.float32), "conv%d.bias" % k)]
            nodes.append(helper.make_node("Conv", [x, "conv%d.weight" % k, "conv%d.bias" % k], ["conv%d" % k],
                                          name="conv%d" % k, kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
            nodes.append(helper.make_node("Relu", ["conv%d" % k], ["relu%d" % k], name="relu%d" % k))
            x, cin = "relu%d" % k, cout
        pool = "pool%d" % len([n for n in nodes if n.op_type == "AveragePool"])
        nodes.append(helper.make_node("AveragePool", [x], [pool], name=pool, kernel_shape=[2, 2], strides=[2, 2]))
        x = pool
    nodes.append(helper.make_node("Flatten", [x], ["flat"], name="flatten", axis=1))
    w = rng.normal(0, np.sqrt(1.0 / 512), (10, 512)).astype(np.float32)
    weights += [numpy_helper.from_array(w, "fc.weight"), numpy_helper.from_array(np.zeros(10, np.float32), "fc.bias")]
    nodes.append(helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1))
    graph = helper.make_graph(nodes, "vgg16_cifar",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 32, 32])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="make_vgg16_cifar")
    onnx.checker.check_model(model)
    return model


def synthetic_images(rng, n, chunk=500):
    images = np.empty((n, 3, 32, 32), np.float32)
    for first in range(0, n, chunk):
        m = min(chunk, n - first)
        coarse = rng.normal(0, 1, (m, 3, 8, 8)).astype(np.float32)
        smooth = np.repeat(np.repeat(coarse, 4, axis=2), 4, axis=3)
        images[first:first + m] = smooth + 0.3 * rng.normal(0, 1, (m, 3, 32, 32)).astype(np.float32)
    images -= images.mean(axis=(0, 2, 3), keepdims=True)
    images /= images.std(axis=(0, 2, 3), keepdims=True)
    return images


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: tools/make_vgg16_cifar.py OUT [N]")
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) == 3 else 10000
    if n < 1:
        sys.exit("make_vgg16_cifar: N must be at least 1")
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(16)
    onnx.save(vgg16_cifar(rng), os.path.join(out, "vgg16_cifar.onnx"))
    np.save(os.path.join(out, "cifar_synthetic.npy"), synthetic_images(rng, n))
    np.save(os.path.join(out, "cifar_synthetic_labels.npy"), rng.integers(0, 10, n).astype(np.int64))
    print("wrote %s/vgg16_cifar.onnx and %d synthetic 3x32x32 images (cifar_synthetic.npy, _labels.npy)" % (out, n))


if __name__ == "__main__":
    main()
