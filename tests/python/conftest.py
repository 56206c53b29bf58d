"""Shared fixtures of the Python tests: the repository, the dataset, a tiny
torch network trained here on a few thousand Fashion-MNIST images."""
import os

import pytest

from tiny_torch import loader, read_fmnist, tiny_net, torch, train  # noqa: F401 (loader, tiny_net: for the tests)

SOURCE_DIR = os.environ.get("NC_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
BUILD_DIR = os.environ.get("NC_BUILD_DIR", os.path.join(SOURCE_DIR, "build"))
FMNIST = "/usr/share/datasets/fashion-mnist/"
# The package is imported from where Python finds it: the installed one under
# tests/test_python.sh (which names its environment in NC_EXPECT_INSTALLED),
# or this tree's python/ for a developer who sets PYTHONPATH=python.
INSTALLED_ENV = os.environ.get("NC_EXPECT_INSTALLED")


def fmnist(split, n):
    """n images of a split, preprocessed as the bundled model expects, and labels."""
    return read_fmnist(FMNIST, split, n)


need_data = pytest.mark.skipif(not os.path.exists(FMNIST + "train-images-idx3-ubyte.gz"),
                               reason="dataset-fashion-mnist is not installed")

need_torch = pytest.mark.skipif(torch is None, reason="torch is not installed (Debian python3-torch; tools/test.sh installs it unless NC_WITH_TORCH=0)")


@pytest.fixture(scope="session")
def trained():
    """(model, train_loader, test_loader): the tiny net after 2 epochs on 4000 images."""
    if torch is None:
        pytest.skip("torch is not installed")
    torch.manual_seed(0)
    x, y = fmnist("train", 4000)
    xt, yt = fmnist("test", 1000)
    train_loader = loader(x, y, shuffle=True)
    model = train(tiny_net(), train_loader, epochs=2)
    return model, train_loader, loader(xt, yt, batch_size=100)
