"""nc_models.py — the Fashion-MNIST networks of NeuroCUDA's fixtures and the
bundled model, plus the data loader and preprocessing they were trained with.

One importable file so that tools/train_models.py (trains, saves state_dicts)
and tools/export_onnx.py (rebuilds a module from its state_dict and exports it
with the TorchScript or the dynamo exporter) build exactly the same modules.

Needs only torch and numpy (no torchvision): the IDX files are parsed here.
"""
import gzip
import os

import numpy as np
import torch
from torch import nn

# Preprocessing used for training and recorded with every model:
#   x = (pixel * SCALE - MEAN) / STD   (Fashion-MNIST training-set statistics)
SCALE = 1.0 / 255.0
MEAN = 0.2860
STD = 0.3530

FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"

# The bundled model lives in assets/models, the others in tests/fixtures/models.
BUNDLED = "fmnist_cnn"
FIXTURES = ["mlp", "cnn_maxpool", "vgg_bn", "resnet"]


# ---------------------------------------------------------------- data ----

def _read_idx(path):
    """Reads an IDX file (gzip or plain) into a numpy uint8 array, checking
    that the real size matches the declared dimensions."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes")
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    offset = 4 + 4 * ndim
    if len(raw) - offset != int(np.prod(dims)):
        raise ValueError(f"{path}: header says {dims}, file holds {len(raw) - offset} bytes")
    return np.frombuffer(raw, dtype=np.uint8, offset=offset).reshape(dims)


def load_fashion_mnist(split, folder=FASHION_MNIST_DIR):
    """Returns (images uint8 [n,1,28,28], labels int64 [n]) of 'train' or 'test'."""
    prefix = "t10k" if split == "test" else "train"

    def find(kind):
        for ext in (".gz", ""):
            p = os.path.join(folder, f"{prefix}-{kind}{ext}")
            if os.path.exists(p):
                return p
        raise FileNotFoundError(f"{folder}/{prefix}-{kind}[.gz]: no such file; install Debian's "
                                "dataset-fashion-mnist or pass --data PATH")

    x = _read_idx(find("images-idx3-ubyte"))
    y = _read_idx(find("labels-idx1-ubyte"))
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"{folder}: {x.shape[0]} images but {y.shape[0]} labels")
    return x[:, None, :, :], y.astype(np.int64)


def preprocess(images_u8):
    """uint8 [n,1,28,28] → float32 tensor, x/255 then (x − MEAN)/STD."""
    x = torch.from_numpy(images_u8.astype(np.float32))
    return (x * SCALE - MEAN) / STD


# -------------------------------------------------------------- models ----

def conv_bn_relu(cin, cout, stride=1):
    return [nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                         nn.Linear(128, 10))


def cnn_maxpool():
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * 7 * 7, 10))


def vgg_bn():
    return nn.Sequential(*conv_bn_relu(1, 32), *conv_bn_relu(32, 32), nn.AvgPool2d(2),
                         *conv_bn_relu(32, 64), *conv_bn_relu(64, 64), nn.AvgPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


class BasicBlock(nn.Module):
    """conv-BN-ReLU-conv-BN + shortcut, ReLU after the add.  With stride 2 or a
    channel change the shortcut is a 1x1 conv-BN (ResNet's option B)."""

    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
        self.relu2 = nn.ReLU()

    def forward(self, x):
        y = self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x)))))
        return self.relu2(y + self.shortcut(x))


def resnet():
    return nn.Sequential(*conv_bn_relu(1, 32), BasicBlock(32, 32), BasicBlock(32, 64, stride=2),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))


def fmnist_cnn():
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.3),
                         nn.Linear(128, 10))


BUILDERS = {"mlp": mlp, "cnn_maxpool": cnn_maxpool, "vgg_bn": vgg_bn, "resnet": resnet,
            "fmnist_cnn": fmnist_cnn}


def build(name):
    """A fresh (untrained) module of the named architecture."""
    if name not in BUILDERS:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(BUILDERS)}")
    return BUILDERS[name]()


def model_dir(name, root):
    """Where a model's files live, relative to the repository root."""
    sub = "assets/models" if name == BUNDLED else "tests/fixtures/models"
    return os.path.join(root, sub)


def reference_dir(root):
    """Reference inputs/logits of every model (bundled one included)."""
    return os.path.join(root, "tests/fixtures/models")
