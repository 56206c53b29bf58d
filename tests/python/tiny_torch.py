"""The tiny torch network that the Python tests train, and the Fashion-MNIST
arrays that feed it.  Shared by conftest.py (the pytest fixtures) and
gpu_three_calls.py (a plain script on the GPU machine), so it imports without
pytest, and without torch for what needs only NumPy."""
import gzip
import os

import numpy as np

try:
    import torch
except ImportError:
    torch = None

MEAN, STD = 0.2860, 0.3530  # the bundled model's preprocessing (training-set statistics)


def read_fmnist(folder, split, n):
    """n images of a split ("train" or "test") from the IDX files in folder,
    preprocessed as the bundled model expects, and their labels."""
    prefix = "train" if split == "train" else "t10k"
    with gzip.open(os.path.join(folder, prefix + "-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)[:n]
    with gzip.open(os.path.join(folder, prefix + "-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)[:n].astype(np.int64)
    return (x.astype(np.float32) / 255 - MEAN) / STD, y


def loader(x, y, batch_size=64, shuffle=False):
    ds = torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
    return torch.utils.data.DataLoader(ds, batch_size=batch_size, shuffle=shuffle)


def tiny_net():
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2),
                         nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2), nn.Flatten(),
                         nn.Linear(16 * 7 * 7, 10))


def train(model, train_loader, epochs):
    """Adam (learning rate 1e-3) on the cross-entropy, epochs passes over train_loader."""
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    for _ in range(epochs):
        for xb, yb in train_loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
    return model
