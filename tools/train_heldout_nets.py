#!/usr/bin/python3
"""train_heldout_nets.py — trains and exports Fashion-MNIST networks that the
recipes of docs/FINETUNING.md were never tuned on (issue 17's held-out set).

The architectures differ from the fixture nets of tools/nc_models.py on
purpose: other widths and depths, BatchNorm or not, MaxPool or AvgPool, and a
residual net with a different block layout:

  ho_mlp_wide      Flatten-512-256-10, no BatchNorm
  ho_cnn_avg       three convs (24, 48, 48) with AvgPool, no BatchNorm
  ho_cnn_bn_max    four conv-BN-ReLU (16, 32, 64, 64) with MaxPool
  ho_vgg_deep      six conv-BN-ReLU (32…96) with AvgPool, two dense layers
  ho_resnet_pre    stem + three residual blocks (24, 48, 48), global AvgPool

Every net is trained with one fixed seed on the CPU for a few epochs (the
whole run stays under ~10 minutes on 2 cores with the defaults), then written
to OUT/<name>.onnx with the TorchScript exporter (opset 13) and, when PyTorch
≥ 2.5 is present, also to OUT/<name>_dynamo.onnx with the dynamo exporter.
OUT/<name>.json holds the test accuracy and the training settings.

Preprocessing (as the fixtures): x/255, then (x − 0.2860)/0.3530 — what
`neurocuda convert` applies by default for fashion-mnist.

The nets that docs/BENCHMARKS.md §6c reports and tools/gpu-recipe-run.sh runs are committed in
tests/fixtures/heldout (made with the defaults below: `tools/train_heldout_nets.py tests/fixtures/heldout`
with torch 1.13, so TorchScript exports only).

Usage (Debian's python3-torch is /usr/bin/python3):
  /usr/bin/python3 tools/train_heldout_nets.py OUT
  /usr/bin/python3 tools/train_heldout_nets.py OUT --models ho_mlp_wide --epochs 1 --limit 6000
"""
import argparse
import json
import os
import sys
import time

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_onnx  # noqa: E402
from nc_models import conv_bn_relu  # noqa: E402  (3×3, stride 1, BatchNorm, ReLU)
import nc_models  # noqa: E402
from train_models import BATCH, evaluate, fit, log  # noqa: E402

SEED = 1717
LEARNING_RATE = 2e-3


def ho_mlp_wide():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                         nn.Linear(256, 10))


def ho_cnn_avg():
    return nn.Sequential(nn.Conv2d(1, 24, 5, padding=2), nn.ReLU(), nn.AvgPool2d(2),
                         nn.Conv2d(24, 48, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2),
                         nn.Conv2d(48, 48, 3, padding=1), nn.ReLU(),
                         nn.Flatten(), nn.Linear(48 * 7 * 7, 10))


def ho_cnn_bn_max():
    return nn.Sequential(*conv_bn_relu(1, 16), *conv_bn_relu(16, 32), nn.MaxPool2d(2),
                         *conv_bn_relu(32, 64), *conv_bn_relu(64, 64), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 7 * 7, 10))


def ho_vgg_deep():
    return nn.Sequential(*conv_bn_relu(1, 32), *conv_bn_relu(32, 32), nn.AvgPool2d(2),
                         *conv_bn_relu(32, 64), *conv_bn_relu(64, 64), nn.AvgPool2d(2),
                         *conv_bn_relu(64, 96), *conv_bn_relu(96, 96), nn.AvgPool2d(7),
                         nn.Flatten(), nn.Linear(96, 64), nn.ReLU(), nn.Linear(64, 10))


class Block(nn.Module):
    """conv-BN-ReLU-conv-BN plus an identity (or 1x1 conv-BN) shortcut, ReLU after the add."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                                  nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
        self.shortcut = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.body(x) + self.shortcut(x))


def ho_resnet_pre():
    return nn.Sequential(*conv_bn_relu(1, 24), Block(24, 24, 1), Block(24, 48, 2), Block(48, 48, 1),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(48, 10))


BUILDERS = {"ho_mlp_wide": ho_mlp_wide, "ho_cnn_avg": ho_cnn_avg, "ho_cnn_bn_max": ho_cnn_bn_max,
            "ho_vgg_deep": ho_vgg_deep, "ho_resnet_pre": ho_resnet_pre}
# epochs that keep the whole run near 10 CPU minutes (2 cores, --limit 30000)
EPOCHS = {"ho_mlp_wide": 3, "ho_cnn_avg": 2, "ho_cnn_bn_max": 2, "ho_vgg_deep": 1, "ho_resnet_pre": 1}


def train(name, x, y, epochs):
    torch.manual_seed(SEED)
    model = BUILDERS[name]()
    fit(model, x, y, epochs, SEED, name, lr=LEARNING_RATE)
    return model.eval()


def export(model, name, out):
    """TorchScript export always; dynamo too where this PyTorch has it."""
    paths = export_onnx.export_torchscript(model, os.path.join(out, name + ".onnx"))
    exporters = ["torchscript"]
    if export_onnx._supports_kwarg("dynamo") and hasattr(torch, "export"):
        paths += export_onnx.export_dynamo(model, os.path.join(out, name + "_dynamo.onnx"))
        exporters.append("dynamo")
    return paths, exporters


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="directory for the .onnx and .json files (created)")
    ap.add_argument("--models", nargs="+", default=list(BUILDERS), choices=list(BUILDERS))
    ap.add_argument("--epochs", type=int, default=0, help="epochs for every model (default: per model)")
    ap.add_argument("--limit", type=int, default=30000, help="training images (0: all 60 000)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    x_u8, y_np = nc_models.load_fashion_mnist("train")
    tx_u8, ty_np = nc_models.load_fashion_mnist("test")
    x, y = nc_models.preprocess(x_u8), torch.from_numpy(y_np)
    if args.limit:
        x, y = x[:args.limit], y[:args.limit]
    tx, ty = nc_models.preprocess(tx_u8), torch.from_numpy(ty_np)
    for name in args.models:
        t0 = time.time()
        epochs = args.epochs or EPOCHS[name]
        model = train(name, x, y, epochs)
        acc = evaluate(model, tx, ty)
        paths, exporters = export(model, name, args.out)
        info = {"model": name, "test_accuracy": round(acc, 4), "seed": SEED, "epochs": epochs,
                "train_images": len(x), "batch": BATCH, "learning_rate": LEARNING_RATE, "optimizer": "Adam",
                "schedule": "cosine", "exporters": exporters, "torch": torch.__version__,
                "mean": nc_models.MEAN, "std": nc_models.STD, "train_seconds": round(time.time() - t0)}
        with open(os.path.join(args.out, name + ".json"), "w") as f:
            json.dump(info, f, indent=2)
            f.write("\n")
        log(f"{name}: test accuracy {acc:.4f}; {', '.join(os.path.basename(p) for p in paths)}")


if __name__ == "__main__":
    main()
