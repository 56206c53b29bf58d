"""convert(..., target_T=N): the recipe of `neurocuda convert --target-T`
through the package, on the bundled model and Fashion-MNIST (small sizes)."""
import os

from conftest import SOURCE_DIR, need_data

pytestmark = need_data

SMALL = dict(mean=0.2860, std=0.3530, limit=300, calib_images=300, train_images=256, val_images=256, batch=32,
             bias_images=128, engine="cpu", progress=False)


def test_target_T_runs_the_recipe():
    import neurocuda
    model = os.path.join(SOURCE_DIR, "assets", "models", "fmnist_cnn.onnx")
    snn = neurocuda.convert(model, "fashion-mnist", target_T=4, time_budget=0.5, **SMALL)
    stages = [r["stage"] for r in snn.results.rows]
    assert stages == ["converted", "QCFS fine-tuned", "bias calibrated", "BPTT fine-tuned"], stages
    assert all(len(r["snn"]) == 4 for r in snn.results.rows), snn.results.table
    assert snn.spiking and snn.classes == 10


def test_distill_and_calibrate_bias_keywords():
    import neurocuda
    model = os.path.join(SOURCE_DIR, "assets", "models", "fmnist_cnn.onnx")
    snn = neurocuda.convert(model, "fashion-mnist", timesteps=4, calibrate_bias=4, **SMALL)
    assert [r["stage"] for r in snn.results.rows] == ["converted", "bias calibrated"], snn.results.table
    snn = neurocuda.convert(model, "fashion-mnist", timesteps=4, bptt_epochs=1, distill=(0.5, 2), **SMALL)
    assert [r["stage"] for r in snn.results.rows] == ["converted", "BPTT fine-tuned"], snn.results.table
