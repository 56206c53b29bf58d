#!/usr/bin/python3
"""One fine-tuning step of a small conv net in PyTorch, written as the fixture
that tests/test_train.c compares the C trainer (sim/nc_train.c) against.

Run with Debian's python3-torch (PyTorch 1.13, CPU):
    /usr/bin/python3 tools/pytorch_train_reference.py tests/fixtures/train

It writes qcfs.bin and bptt.bin.  The net, identical in sim/ and here:
    input [1, 8, 8]
    conv1 1→4, 3×3, pad 1, bias            neuron n1 (per-channel threshold, 4 values)
    avgpool 2×2                            → [4, 4, 4]
    conv2 4→6, 3×3, pad 1, groups 2, bias  neuron n2 (one threshold)
    maxpool 2×2                            → [6, 2, 2]
    flatten, dense 24→5, bias              → the output (5 classes)
QCFS mode: the neurons are QCFS (L = 4, φ = 0.5) with the straight-through
estimator for floor and the clamp on z/λ before it (ANN_SNN_QCFS).
BPTT mode: IF neurons over T = 4 steps, v0 = θ/2, reset by subtraction, fire
on ≥, the triangle surrogate (γ = 1) for the step; the MaxPool pools running
sums of its input and passes on their increments (as sim/engine_cpu.c runs a
PRE_SPIKE MaxPool); direct encoding; logits = mean of the output over T.
Both modes train the thresholds.  Loss: mean cross-entropy.  Then one SGD step
(lr 0.1, momentum 0.9, weight decay 5e-4 on conv/dense weights only).

File layout (little-endian): b"NCTRAIN\\0", uint32 version (1), uint32 record
count, then per record: uint32 name length, name (UTF-8), uint32 ndim, int64
dims[ndim], float32 data.
"""
import os
import struct
import sys

import torch
import torch.nn.functional as F

MAGIC = b"NCTRAIN\0"
VERSION = 1
T, LEVELS, PHI, V0 = 4, 4, 0.5, 0.5
LR, MOMENTUM, WEIGHT_DECAY = 0.1, 0.9, 5e-4


class GradFloor(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.floor(x)

    @staticmethod
    def backward(ctx, g):
        return g


class Heaviside(torch.autograd.Function):
    """H(x) = x ≥ 0 with the triangle surrogate (1/γ²)·max(0, γ − |x|), γ = 1."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (x >= 0).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.clamp(1.0 - x.abs(), min=0.0)


def qcfs(z, lam):
    lam = lam.view(1, -1, 1, 1)
    c = torch.clamp(z / lam, 0.0, 1.0)
    return GradFloor.apply(c * LEVELS + PHI) / LEVELS * lam


def if_neuron(x_steps, theta):
    """x_steps: list of T currents [N, C, H, W]; theta: [1] or [C]."""
    th = theta.view(1, -1, 1, 1)
    v = V0 * th * torch.ones_like(x_steps[0])
    out = []
    for x in x_steps:
        m = v + x
        s = Heaviside.apply(m - th)
        out.append(th * s)
        v = m - th * s
    return out


def prespike_max(x_steps):
    sums, total = [], None
    for x in x_steps:
        total = x if total is None else total + x
        sums.append(F.max_pool2d(total, 2))
    return [sums[0]] + [sums[t] - sums[t - 1] for t in range(1, len(sums))]


def make_params(gen):
    def rand(*shape, scale):
        return (torch.rand(*shape, generator=gen) * 2 - 1) * scale

    return {
        "conv1.weight": rand(4, 1, 3, 3, scale=0.6),
        "conv1.bias": rand(4, scale=0.2),
        "n1.threshold": torch.tensor([0.8, 1.0, 0.6, 1.2]),
        "conv2.weight": rand(6, 2, 3, 3, scale=0.5),
        "conv2.bias": rand(6, scale=0.2),
        "n2.threshold": torch.tensor([0.9]),
        "fc.weight": rand(5, 24, scale=0.4),
        "fc.bias": rand(5, scale=0.1),
    }


def forward(p, x, mode):
    if mode == "qcfs":
        h = qcfs(F.conv2d(x, p["conv1.weight"], p["conv1.bias"], padding=1), p["n1.threshold"])
        h = F.avg_pool2d(h, 2)
        h = qcfs(F.conv2d(h, p["conv2.weight"], p["conv2.bias"], padding=1, groups=2), p["n2.threshold"])
        h = F.max_pool2d(h, 2)
        return F.linear(h.flatten(1), p["fc.weight"], p["fc.bias"])
    c1 = F.conv2d(x, p["conv1.weight"], p["conv1.bias"], padding=1)  # the same every step
    s1 = if_neuron([c1] * T, p["n1.threshold"])
    c2 = [F.conv2d(F.avg_pool2d(s, 2), p["conv2.weight"], p["conv2.bias"], padding=1, groups=2) for s in s1]
    s2 = if_neuron(c2, p["n2.threshold"])
    pooled = prespike_max(s2)
    outs = [F.linear(h.flatten(1), p["fc.weight"], p["fc.bias"]) for h in pooled]
    return torch.stack(outs).mean(0)


def sgd_step(p, grads):
    after = {}
    for name, value in p.items():
        g = grads[name].clone()
        if name.endswith(".weight"):
            g += WEIGHT_DECAY * value.detach()
        buf = g  # first step: the momentum buffer is the gradient itself
        after[name] = value.detach() - LR * buf
    return after


def write_records(path, records):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<II", VERSION, len(records)))
        for name, t in records:
            t = t.detach().to(torch.float32).contiguous()
            raw = name.encode()
            f.write(struct.pack("<I", len(raw)) + raw)
            f.write(struct.pack("<I", t.dim()))
            f.write(struct.pack("<%dq" % t.dim(), *t.shape))
            f.write(t.numpy().astype("<f4").tobytes())
    os.replace(tmp, path)


def make_case(mode, seed):
    gen = torch.Generator().manual_seed(seed)
    p = {k: v.clone().requires_grad_(True) for k, v in make_params(gen).items()}
    x = torch.rand(3, 1, 8, 8, generator=gen) * 1.6 - 0.3
    labels = torch.tensor([1, 4, 0])
    logits = forward(p, x, mode)
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    grads = {k: v.grad for k, v in p.items()}
    after = sgd_step(p, grads)
    config = torch.tensor([T if mode == "bptt" else 1, LEVELS, PHI, V0, LR, MOMENTUM, WEIGHT_DECAY])
    records = [("config", config), ("input", x), ("labels", labels.float()), ("logits", logits),
               ("loss", loss.reshape(1))]
    records += [(k, v) for k, v in p.items()]
    records += [("grad." + k, v) for k, v in grads.items()]
    records += [("step." + k, v) for k, v in after.items()]
    return records


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/train"
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    for mode, seed in (("qcfs", 7), ("bptt", 11)):
        records = make_case(mode, seed)
        write_records(os.path.join(out, mode + ".bin"), records)
        loss = dict(records)["loss"].item()
        print("%s: %d records, loss %.6f" % (os.path.join(out, mode + ".bin"), len(records), loss))


if __name__ == "__main__":
    main()
