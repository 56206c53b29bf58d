# The networks as plain ANNs in PyTorch at the dense-floor batch
# (8192 = 1024 x 8; VGG16 2048 = 256 x 8): eager, cudnn.benchmark,
# channels_last, CUDA events, median of 20 after 5 warm-ups, random input.
import json, statistics, sys
import torch
from torch import nn

def conv(cin, cout): return [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU()]
def vgg_fmnist(): return nn.Sequential(*conv(1, 32), *conv(32, 32), nn.AvgPool2d(2), *conv(32, 64), *conv(64, 64),
                                       nn.AvgPool2d(2), nn.Flatten(), nn.Linear(3136, 256), nn.ReLU(), nn.Linear(256, 10))
def cnn_fmnist(): return nn.Sequential(*conv(1, 16), nn.MaxPool2d(2), *conv(16, 32), nn.MaxPool2d(2), nn.Flatten(),
                                       nn.Linear(1568, 128), nn.ReLU(), nn.Linear(128, 10))
def vgg16_cifar():
    layers, c = [], 3
    for v in [64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0]:
        if v == 0: layers.append(nn.AvgPool2d(2))
        else: layers += conv(c, v); c = v
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(512, 10))

def set_tf32(on):
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on

def time_ms(model, x, reps=20, warm=5):
    with torch.no_grad():
        for _ in range(warm): model(x)
        torch.cuda.synchronize()
        ts = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(); model(x); b.record(); b.synchronize()
            ts.append(a.elapsed_time(b))
    return statistics.median(ts)

torch.backends.cudnn.benchmark = True
torch.manual_seed(0)
rows = []
for name, make, shape, batch in [("vgg-fmnist", vgg_fmnist, (1, 28, 28), 8192), ("cnn-fmnist", cnn_fmnist, (1, 28, 28), 8192),
                                 ("vgg16-cifar", vgg16_cifar, (3, 32, 32), 2048)]:
    for prec in ["fp32", "tf32", "bf16"]:
        set_tf32(prec == "tf32")
        dt = torch.bfloat16 if prec == "bf16" else torch.float32
        m = make().cuda().eval().to(dtype=dt).to(memory_format=torch.channels_last)
        x = torch.rand(batch, *shape, device="cuda", dtype=dt).to(memory_format=torch.channels_last)
        ms = time_ms(m, x)
        rows.append({"net": name, "precision": prec, "batch": batch, "ms": ms})
        print(json.dumps(rows[-1]), flush=True)
# The SpikingJelly-style anchor: the same nets as multi-step SNNs in eager
# PyTorch (SpikingJelly's torch backend): every conv / linear / pool on all
# B·T rows at once (cuDNN, channels_last), the IF neuron (soft reset, v0 =
# θ/2, fire on ≥) a loop over T on the [T, B, ...] view; batch B = 1024 (VGG16
# 256), T = 8, the image repeated over the steps as SpikingJelly's direct
# encoding does.
T = 8
class IF(nn.Module):
    def forward(self, x):
        xs = x.view(T, -1, *x.shape[1:])
        v = torch.full_like(xs[0], 0.5)
        out = torch.empty_like(xs)
        for t in range(T):
            v = v + xs[t]
            s = (v >= 1.0).to(x.dtype)
            v = v - s
            out[t] = s
        return out.view_as(x)

def spiking(model):
    return nn.Sequential(*[IF() if isinstance(m, nn.ReLU) else m for m in model])

for name, make, shape, batch in [("vgg-fmnist", vgg_fmnist, (1, 28, 28), 1024), ("cnn-fmnist", cnn_fmnist, (1, 28, 28), 1024),
                                 ("vgg16-cifar", vgg16_cifar, (3, 32, 32), 256)]:
    for prec in ["fp32", "tf32", "bf16"]:
        set_tf32(prec == "tf32")
        dt = torch.bfloat16 if prec == "bf16" else torch.float32
        m = spiking(make()).cuda().eval().to(dtype=dt).to(memory_format=torch.channels_last)
        x = torch.rand(batch, *shape, device="cuda", dtype=dt)
        xt = x.unsqueeze(0).expand(T, *x.shape).reshape(T * batch, *shape).contiguous(memory_format=torch.channels_last)
        ms = time_ms(m, xt)
        rows.append({"net": name, "precision": prec, "batch": batch, "T": T, "kind": "snn-multistep", "ms": ms})
        print(json.dumps(rows[-1]), flush=True)
print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version(), file=sys.stderr)
