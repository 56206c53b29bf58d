"""Shared fixtures of the Python tests: the repository, the dataset, a tiny
torch network trained here on a few thousand Fashion-MNIST images."""
import gzip
import os

import numpy as np
import pytest

SOURCE_DIR = os.environ.get("NC_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
BUILD_DIR = os.environ.get("NC_BUILD_DIR", os.path.join(SOURCE_DIR, "build"))
FMNIST = "/usr/share/datasets/fashion-mnist/"
MEAN, STD = 0.2860, 0.3530
# The package is imported from where Python finds it: the installed one under
# tests/test_python.sh (which names its environment in NC_EXPECT_INSTALLED),
# or this tree's python/ for a developer who sets PYTHONPATH=python.
INSTALLED_ENV = os.environ.get("NC_EXPECT_INSTALLED")


def read_idx(name, images):
    with gzip.open(FMNIST + name) as f:
        data = f.read()
    return np.frombuffer(data, np.uint8, offset=16 if images else 8)


def fmnist(split, n):
    """n images of a split, preprocessed as the bundled model expects, and labels."""
    prefix = "train" if split == "train" else "t10k"
    x = read_idx(prefix + "-images-idx3-ubyte.gz", True).reshape(-1, 1, 28, 28)[:n]
    y = read_idx(prefix + "-labels-idx1-ubyte.gz", False)[:n].astype(np.int64)
    return ((x.astype(np.float32) / 255 - MEAN) / STD), y


need_data = pytest.mark.skipif(not os.path.exists(FMNIST + "train-images-idx3-ubyte.gz"),
                               reason="dataset-fashion-mnist is not installed")

try:
    import torch
except ImportError:
    torch = None
need_torch = pytest.mark.skipif(torch is None, reason="torch is not installed (Debian python3-torch; tools/test.sh installs it unless NC_WITH_TORCH=0)")


def loader(x, y, batch_size=64, shuffle=False):
    ds = torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
    return torch.utils.data.DataLoader(ds, batch_size=batch_size, shuffle=shuffle)


def tiny_net():
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2),
                         nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2), nn.Flatten(),
                         nn.Linear(16 * 7 * 7, 10))


@pytest.fixture(scope="session")
def trained():
    """(model, train_loader, test_loader): the tiny net after 2 epochs on 4000 images."""
    if torch is None:
        pytest.skip("torch is not installed")
    torch.manual_seed(0)
    x, y = fmnist("train", 4000)
    xt, yt = fmnist("test", 1000)
    train_loader = loader(x, y, shuffle=True)
    model = tiny_net()
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    for _ in range(2):
        for xb, yb in train_loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
    return model, train_loader, loader(xt, yt, batch_size=100)
