"""neurocuda.workbench(snn_or_path) opens the GTK workbench on the network:
run under a private Xvfb with --print-loaded, the window prints what it
loaded and quits, and that must be the network that was handed to it."""
import os
import shutil
import subprocess

import pytest

from conftest import SOURCE_DIR, fmnist, need_data

BUNDLED = os.path.join(SOURCE_DIR, "assets", "models", "fmnist_cnn.onnx")


@pytest.fixture(scope="module")
def display():
    """A private X display (Xvfb -displayfd), so no test needs the user's one."""
    import neurocuda
    if shutil.which("Xvfb") is None:
        pytest.skip("Xvfb is not installed (Debian package xvfb)")
    try:
        probe = neurocuda.workbench(BUNDLED, options=["--version"], stdout=subprocess.DEVNULL)
        probe.wait(timeout=60)
    except neurocuda.Error as e:
        pytest.skip("no workbench in this build: %s" % e)
    read, write = os.pipe()
    server = subprocess.Popen(["Xvfb", "-displayfd", str(write), "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
                              pass_fds=[write], stderr=subprocess.DEVNULL)
    os.close(write)
    with os.fdopen(read) as f:
        number = f.readline().strip()
    assert number.isdigit(), "Xvfb did not report its display"
    yield ":" + number
    server.terminate()
    server.wait(timeout=30)


def open_in_workbench(snn_or_path, display):
    """What the window loaded, as --print-loaded printed it."""
    import neurocuda
    env = dict(os.environ, DISPLAY=display, GSETTINGS_BACKEND="memory", NO_AT_BRIDGE="1", GTK_A11Y="none",
               G_DEBUG="fatal-criticals")
    env.pop("WAYLAND_DISPLAY", None)
    process = neurocuda.workbench(snn_or_path, options=["--print-loaded"], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    lines = [line for line in out.splitlines() if line.startswith("loaded ")]
    assert len(lines) == 1, out + err
    return lines[0][len("loaded "):]


def test_workbench_opens_a_model_file(display):
    loaded = open_in_workbench(BUNDLED, display)
    assert loaded == BUNDLED + ": ANN, input 1x28x28, 10 classes, 12 nodes", loaded


@need_data
def test_workbench_opens_a_converted_snn(display):
    import neurocuda
    x, y = fmnist("train", 256)
    batches = [(x[k:k + 64], y[k:k + 64]) for k in range(0, 256, 64)]
    snn = neurocuda.convert(BUNDLED, batches, timesteps=4, calib_images=256, engine="cpu", progress=False)
    loaded = open_in_workbench(snn, display)
    path, what = loaded.split(": ", 1)
    assert path.endswith("model.ncsnn") and os.path.exists(path), loaded
    shape = "x".join(str(d) for d in snn.input_shape)
    assert what.startswith("spiking network, input %s, %d classes, " % (shape, snn.classes)), loaded
    assert neurocuda.load(path).spiking  # the very file the window opened
