"""The three calls of docs/PYTHON.md, verbatim, on the GPU machine (run by
tools/gpu-python-run.sh, which unpacks the GPU bundle and points
NEUROCUDA_LIB at its libneurocuda): a tiny torch net trained here on the
bundle's Fashion-MNIST subset, converted at T = 8, compiled for the GPU
engine, exported to NIR; then evaluated on the GPU and on the CPU, which must
agree.  Prints TAP."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.environ.get("NC_SOURCE_DIR", "."), "python"))
import neurocuda  # noqa: E402
from tiny_torch import loader, read_fmnist, tiny_net, train  # noqa: E402 (beside this script)

DATA = os.environ.get("NC_FMNIST_DIR", "/tmp/nc/data/fmnist")
n = 0


def check(ok, what):
    global n
    n += 1
    print(("ok" if ok else "not ok"), n, "-", what, flush=True)
    return ok


torch.manual_seed(0)
x, y = read_fmnist(DATA, "train", 2048)
xt, yt = read_fmnist(DATA, "test", 1024)
train_loader = loader(x, y, 64, True)
test_loader = loader(xt, yt, 256, False)
model = train(tiny_net(), train_loader, epochs=3)
print("# torch", torch.__version__, "; engines:", neurocuda.engines(), flush=True)

snn = neurocuda.convert(model, train_loader, timesteps=8)   # QCFS calibration + BPTT fine-tuning
neurocuda.compile(snn, target="gpu")
neurocuda.to_nir(snn, "model.nir")

check(os.path.getsize("model.nir") > 1000, "to_nir wrote model.nir")
gpu = snn.evaluate(test_loader, T=8)
print("# gpu accuracy by step:", [round(a, 4) for a in gpu.accuracy], flush=True)
check(len(gpu.accuracy) == 8 and gpu.accuracy[-1] > 0.6, "evaluate on the gpu engine: accuracy at T = 8 over 0.6")
neurocuda.compile(snn, target="cpu")
cpu = snn.evaluate(test_loader, T=8)
print("# cpu accuracy by step:", [round(a, 4) for a in cpu.accuracy], flush=True)
diff = max(abs(a - b) for a, b in zip(gpu.accuracy, cpu.accuracy))
check(diff <= 0.0005, "gpu (exact fp32) and cpu accuracy by step agree within 0.05 points (max diff %.4f)" % diff)
print("1..%d" % n)
