"""The three calls of docs/PYTHON.md, verbatim, on the GPU machine (run by
tools/gpu-python-run.sh, which unpacks the GPU bundle and points
NEUROCUDA_LIB at its libneurocuda): a tiny torch net trained here on the
bundle's Fashion-MNIST subset, converted at T = 8, compiled for the GPU
engine, exported to NIR; then evaluated on the GPU and on the CPU, which must
agree.  Prints TAP."""
import gzip
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.environ.get("NC_SOURCE_DIR", "."), "python"))
import neurocuda  # noqa: E402

DATA = os.environ.get("NC_FMNIST_DIR", "/tmp/nc/data/fmnist")
MEAN, STD = 0.2860, 0.3530
n = 0


def check(ok, what):
    global n
    n += 1
    print(("ok" if ok else "not ok"), n, "-", what, flush=True)
    return ok


def read(prefix, n_images):
    with gzip.open(os.path.join(DATA, prefix + "-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)[:n_images]
    with gzip.open(os.path.join(DATA, prefix + "-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)[:n_images].astype(np.int64)
    return (x.astype(np.float32) / 255 - MEAN) / STD, y


def loader(x, y, batch_size, shuffle):
    ds = torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
    return torch.utils.data.DataLoader(ds, batch_size=batch_size, shuffle=shuffle)


torch.manual_seed(0)
x, y = read("train", 2048)
xt, yt = read("t10k", 1024)
train_loader = loader(x, y, 64, True)
test_loader = loader(xt, yt, 256, False)
nn = torch.nn
model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2), nn.Conv2d(8, 16, 3, padding=1),
                      nn.ReLU(), nn.AvgPool2d(2), nn.Flatten(), nn.Linear(16 * 7 * 7, 10))
opt = torch.optim.Adam(model.parameters(), 1e-3)
for _ in range(3):
    for xb, yb in train_loader:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()
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
