"""The three calls of the package's promise, verbatim, on a small torch
network trained in the test; then the SNN's own calls."""
import os

import numpy as np
import pytest

from conftest import need_data, need_torch

pytestmark = [need_data, need_torch]


def test_three_calls(trained, tmp_path, monkeypatch):
    import neurocuda
    model, train_loader, test_loader = trained
    monkeypatch.chdir(tmp_path)
    snn = neurocuda.convert(model, train_loader, timesteps=8)   # QCFS calibration + BPTT fine-tuning
    if neurocuda.engines()["gpu"][0]:
        neurocuda.compile(snn, target="gpu")
    else:  # says why, and runs on the CPU only when asked
        with pytest.raises(neurocuda.DeviceError, match="the gpu engine cannot run here"):
            neurocuda.compile(snn, target="gpu")
        neurocuda.compile(snn, target="auto")
    neurocuda.to_nir(snn, "model.nir")
    assert os.path.getsize(tmp_path / "model.nir") > 1000
    assert snn.spiking and snn.input_shape == (1, 28, 28) and snn.classes == 10
    result = snn.evaluate(test_loader, T=8)
    assert len(result.accuracy) == 8 and result.accuracy[-1] > 0.6, result.table
    assert result.layers and all(l["firing_rate"] > 0 and l["sops"] > 0 for l in result.layers)
    assert all(l["calib_error"] is not None for l in result.layers)
    back = neurocuda.from_nir("model.nir")
    assert back.spiking and back.classes == 10


def test_snn_calls(trained, tmp_path):
    import torch
    import neurocuda
    model, train_loader, test_loader = trained
    snn = neurocuda.convert(model, train_loader, timesteps=4, test_loader=test_loader, progress=False)
    assert [r["stage"] for r in snn.results.rows] == ["converted"]
    assert len(snn.results.rows[0]["snn"]) == 4
    x, y = next(iter(test_loader))
    out = snn(x)                              # torch in, torch out
    assert isinstance(out, torch.Tensor) and tuple(out.shape) == (4, 100, 10)
    out_np = snn(x.numpy(), T=6)              # NumPy in, NumPy out
    assert isinstance(out_np, np.ndarray) and out_np.shape == (6, 100, 10)
    assert np.allclose(out_np[:4], out.numpy(), rtol=1e-5, atol=1e-4)  # other T: other kernel sizes
    path = tmp_path / "tiny.ncsnn"
    snn.save(path)
    again = neurocuda.load(path)
    assert np.allclose(again(x.numpy(), T=4), out.numpy(), rtol=1e-5, atol=1e-4)
    assert "spiking" in again.report() and "snn_accuracy_t4" in again.report()
    neurocuda.to_lava(snn, tmp_path / "tiny.net")
    assert os.path.getsize(tmp_path / "tiny.net") > 1000


def test_finetuning_streams_each_epoch(trained):
    import neurocuda
    model, train_loader, test_loader = trained
    seen = []
    snn = neurocuda.convert(model, train_loader, timesteps=4, qcfs_epochs=1, bptt_epochs=1, test_loader=test_loader,
                            progress=lambda p: seen.append(p["stage"]) and False, val_images=400)
    stages = [r["stage"] for r in snn.results.rows]
    assert stages == ["converted", "QCFS fine-tuned", "BPTT fine-tuned"], snn.results.table
    assert "train" in seen and "calibrate" in seen
    assert snn.results.rows[-1]["snn"][-1] > 0.5, snn.results.table
