"""Bad input raises a neurocuda.Error that names the problem, and crashes
nothing; Ctrl-C during convert raises KeyboardInterrupt and leaves no file."""
import os
import signal

import numpy as np
import pytest

from conftest import SOURCE_DIR, fmnist, loader, need_data, need_torch, tiny_net

BUNDLED = os.path.join(SOURCE_DIR, "assets", "models", "fmnist_cnn.onnx")


class Batches:
    """A loader of fixed NumPy batches (no torch needed)."""

    def __init__(self, batches):
        self.batches = batches

    def __iter__(self):
        return iter(self.batches)


def good_batches(n=4, size=32):
    x, y = fmnist("train", n * size)
    return [(x[k * size:(k + 1) * size], y[k * size:(k + 1) * size]) for k in range(n)]


def test_missing_file(tmp_path):
    import neurocuda
    with pytest.raises(neurocuda.FileError, match="no_such_model.onnx"):
        neurocuda.convert(str(tmp_path / "no_such_model.onnx"), Batches([]), progress=False)
    with pytest.raises(neurocuda.FileError, match="nothing.ncsnn"):
        neurocuda.load(tmp_path / "nothing.ncsnn")


def test_not_a_model(tmp_path):
    import neurocuda
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"this is not protobuf" * 10)
    with pytest.raises(neurocuda.Error) as e:
        neurocuda.load(bad)
    assert "bad.onnx" in str(e.value)
    with pytest.raises(neurocuda.ArgumentError, match="torch.nn.Module, an ONNX file path or an onnx.ModelProto"):
        neurocuda.convert(42, Batches([]), progress=False)


@need_data
def test_wrong_target():
    import neurocuda
    snn = neurocuda.convert(BUNDLED, Batches(good_batches()), timesteps=4, calib_images=64, engine="cpu",
                            progress=False)
    with pytest.raises(neurocuda.ArgumentError, match="unknown engine 'tpu'"):
        neurocuda.compile(snn, target="tpu")
    if not neurocuda.engines()["gpu"][0]:
        with pytest.raises(neurocuda.DeviceError, match="the gpu engine cannot run here"):
            neurocuda.compile(snn, target="gpu")
        assert neurocuda.compile(snn, target="auto").engine == "cpu"
    with pytest.raises(neurocuda.ArgumentError, match="option threshold must be max, p99"):
        neurocuda.convert(BUNDLED, Batches(good_batches()), threshold="p42", progress=False)


@need_data
@pytest.mark.parametrize("kind, error, text", [
    ("shape", "ShapeError", r"the training loader, batch 2: inputs of shape \[32, 3, 28, 28\] do not fit the "
                            r"model, which takes \[n, 1, 28, 28\]"),
    ("dtype", "ArgumentError", "the training loader, batch 2: inputs must be floating point, preprocessed as the "
                               "model was trained, not uint8"),
    ("nan", "ArgumentError", "the training loader: batch 2, sample 3 holds NaN or infinity"),
    ("label", "ArgumentError", "the training loader: batch 2, sample 0 has label 10; the network has 10 classes"),
    ("float labels", "ArgumentError", "labels must be integer classes, not float32"),
    ("not pairs", "ArgumentError", "a data loader must yield \\(inputs, labels\\) pairs"),
    ("loader raises", "Error", "the training loader failed in batch 2: RuntimeError: disk on fire"),
])
def test_bad_batches(kind, error, text):
    import neurocuda
    batches = good_batches()
    x, y = batches[1]
    if kind == "shape":
        batches[1] = (np.repeat(x, 3, axis=1), y)
    elif kind == "dtype":
        batches[1] = ((x * 255).astype(np.uint8), y)
    elif kind == "nan":
        x = x.copy()
        x[3, 0, 5, 5] = np.nan
        batches[1] = (x, y)
    elif kind == "label":
        y = y.copy()
        y[0] = 10
        batches[1] = (x, y)
    elif kind == "float labels":
        batches[1] = (x, y.astype(np.float32))
    elif kind == "not pairs":
        batches[1] = x

    class Broken(Batches):
        def __iter__(self):
            yield batches[0]
            raise RuntimeError("disk on fire")

    source = Broken(batches) if kind == "loader raises" else Batches(batches)
    with pytest.raises(getattr(neurocuda, error), match=text):
        neurocuda.convert(BUNDLED, source, calib_images=128, engine="cpu", progress=False)


@need_data
@need_torch
def test_unsupported_layer_names_the_node():
    import torch
    import neurocuda

    class WithSin(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(1, 4, 3)
            self.fc = torch.nn.Linear(4 * 26 * 26, 10)

        def forward(self, x):
            return self.fc(torch.flatten(torch.sin(self.conv(x)), 1))

    x, y = fmnist("train", 64)
    with pytest.raises(neurocuda.UnsupportedError, match=r"unsupported node: /Sin \(Sin"):
        neurocuda.convert(WithSin(), loader(x, y), progress=False)


@need_data
@need_torch
def test_sigint_during_convert_leaves_no_file(tmp_path):
    import neurocuda
    x, y = fmnist("train", 2000)
    out = tmp_path / "never.ncsnn"
    calls = []

    def interrupt_once(p):  # Ctrl-C in the middle of fine-tuning
        calls.append(p["stage"])
        if p["stage"] == "train" and calls.count("train") == 3:
            os.kill(os.getpid(), signal.SIGINT)
        return 0

    with pytest.raises(KeyboardInterrupt):
        neurocuda.convert(tiny_net(), loader(x, y), timesteps=4, bptt_epochs=2, output=out, progress=interrupt_once,
                          val_images=200)
    assert not out.exists() and not list(tmp_path.iterdir())
    assert calls.count("train") < 10  # stopped at the next batch
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
