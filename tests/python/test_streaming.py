"""A loader of 20 000 images is streamed: the peak resident memory of the
Python process grows by far less than holding the set would take."""
import os
import subprocess
import sys

from conftest import SOURCE_DIR, need_data

pytestmark = need_data

CHILD = r'''
import resource, sys
import numpy as np
sys.path.insert(0, sys.argv[1] + "/tests/python")
import neurocuda
from conftest import fmnist

N, BATCH = 20000, 100
base_x, base_y = fmnist("train", 1000)

class Generated:
    """20 000 images made batch by batch from 1 000 (shifted copies): the
    loader never holds the set either."""
    batch_size = BATCH
    class sampler:
        def __len__(self):
            return N
    sampler = sampler()
    def __iter__(self):
        for first in range(0, N, BATCH):
            k = (first // BATCH) % 10
            x = np.roll(base_x[k * BATCH:(k + 1) * BATCH], first // 1000, axis=3)
            yield np.ascontiguousarray(x), base_y[k * BATCH:(k + 1) * BATCH]

def rss(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024

def reset_peak():  # Linux: VmHWM starts again from the current RSS
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")

model = sys.argv[1] + "/assets/models/fmnist_cnn.onnx"
snn = neurocuda.convert(model, Generated(), timesteps=2, calib_images=500, engine="cpu", progress=False)
snn.evaluate(Generated(), T=1, progress=False)  # engine buffers made once
before = rss("VmRSS")
reset_peak()
result = snn.evaluate(Generated(), T=1, progress=False)
streamed = rss("VmHWM") - before
assert result.rows[0]["images"] == N, result.table
before = rss("VmRSS")  # the control: the measure sees a set held whole
reset_peak()
held = np.ones((N, 1, 28, 28), np.float32)
control = rss("VmHWM") - before
print(streamed, control, N * 784 * 4)
'''


def test_loader_of_20000_images_is_streamed():
    out = subprocess.run([sys.executable, "-c", CHILD, SOURCE_DIR], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    streamed, control, whole = (int(v) for v in out.stdout.split())
    print("peak RSS grew by %.1f MB while 20 000 images were streamed through evaluate; holding them grows it by "
          "%.1f MB (%.1f MB of float32)" % (streamed / 1e6, control / 1e6, whole / 1e6))
    assert control > 0.9 * whole, "the measure does not see memory: %d" % control
    assert streamed < whole / 2, (streamed, whole)  # per-run buffers only: batch, record, window
