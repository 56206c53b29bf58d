#!/usr/bin/python3
"""pytorch_snn_reference.py — a plain-PyTorch reimplementation of NeuroCUDA's
post-training ANN→SNN conversion (conversion.md §2.1, §7), the side-by-side
accuracy baseline for the C implementation.

Usage (from the repository root; Debian's python3-torch is /usr/bin/python3):
  /usr/bin/python3 tools/pytorch_snn_reference.py MODEL [--threshold p99.9|p99|p99.99|max]
      [--per-channel] [--v0 0.5] [--T 64] [--calib-images 2000] [--limit N]
      [--maxpool pre-spike|pre-spike-sum|avg] [--batch 500] [--threads 2] [--json]
      [--device cpu|cuda] [--data FASHION_MNIST_DIR]
MODEL is one of nc_models.BUILDERS (mlp, cnn_maxpool, vgg_bn, resnet, fmnist_cnn);
its trained state_dict is read from <model_dir>/<MODEL>.pt (nc_models.model_dir).

THE CONVERSION, exactly (compare the C side like for like):
 0. Module: nc_models.build(MODEL) + load_state_dict(.pt), eval mode (BN uses
    its running statistics, Dropout is the identity).  Inputs: nc_models
    preprocessing, x = (pixel/255 − 0.2860)/0.3530, float32.
 1. BatchNorm folding: every BatchNorm2d that directly follows a Conv2d (in the
    order the parent module registers its children: Sequential and
    nc_models.BasicBlock, whose shortcut is a Sequential(conv, bn)) is folded
    into the conv and replaced by nn.Identity:
        σ = sqrt(running_var + eps),  W' = W·γ/σ  (per output channel),
        b' = γ·(b − μ)/σ + β          (b = 0 when the conv has no bias).
 2. MaxPool (--maxpool):
      pre-spike (default): every ReLU→MaxPool2d pair of a Sequential is swapped
        into MaxPool2d→ReLU (max and ReLU commute: the ANN is unchanged), so in
        the SNN the max is taken over input currents and the IF sits after the
        pool; it is calibrated there (on the pooled activations).  In the SNN
        each step's currents are max-pooled: exact while they are the constant
        analog image (a pool before the first IF), but after a spiking layer
        the mean of the per-step max overestimates the max of the mean, by an
        amount that does not shrink with T.
      pre-spike-sum: the same swap and calibration, but a MaxPool after the
        first IF pools the running sums S(t) = Σ_{τ≤t} I(τ) of its input
        currents and passes on maxpool(S(t)) − maxpool(S(t−1)) (S(0) = 0):
        causal, and the pooled mean over 1..t is exactly maxpool(S(t))/t.
        This is the rule of NeuroCUDA's CPU and GPU engines (docs/DESIGN.md).
      avg: every MaxPool2d becomes AvgPool2d(same kernel, stride, padding); the
        ANN changes (no fine-tune) and its accuracy is printed too.
 3. Calibration: the prepared ANN of 1–2 runs on the first --calib-images
    TRAINING images (default 2000); for every nn.ReLU module its output is
    collected.  λ = the P-th percentile of the NON-ZERO (i.e. > 0) outputs
    (snn_toolbox convention), computed EXACTLY with numpy.percentile (linear
    interpolation between order statistics; the C side uses a 2048-bin
    histogram, so expect differences below one bin width), or their maximum
    for 'max'.  Layer-wise: one λ over all values of the layer.  --per-channel:
    one λ per channel = axis 1 (conv: output channel; linear: every feature);
    a channel that never fired gets the layer's λ; a layer that never fired
    gets λ = 1.0 (both as in core/nc_calib.h).
 4. SNN: each nn.ReLU module is replaced by an IF module (θ = λ), everything
    else kept as is (the forward of Sequential / BasicBlock is reused, so in
    the ResNet the IF is after the residual add and after conv1-bn1):
        v(0) = v0·θ                         (--v0, default 0.5)
        m(t) = v(t−1) + I(t)                 I = the layer's input current
        s(t) = [m(t) ≥ θ]                    fire on ≥, at most one spike/step
        v(t) = m(t) − s(t)·θ                 reset by subtraction
        out(t) = s(t)·θ                      the spike carries θ
    Direct encoding: the same analog (preprocessed) image at every step.  The
    last layer (Linear) has no IF: its output is the logits of that step; the
    prediction after step t is argmax over classes of Σ_{τ=1..t} logits(τ)
    (ties: the lowest index, torch.argmax).  Accuracy is reported for every
    t = 1..T on the 10 000 test images (or the first --limit).
Everything is float32, torch.no_grad(), torch.set_num_threads(--threads), on
the CPU by default.  --device cuda runs the ANN/SNN on a GPU instead (TF32
disabled, so the arithmetic stays float32; percentiles still in numpy).

Output: the thresholds per layer, the ANN accuracy (trained module and, if it
differs, the prepared ANN of step 2), the SNN accuracy at t = 1,2,4,…,T, and
with --json one last line:
  {"model", "ann_accuracy", "accuracy_by_step": [t=1..T], "threshold", "v0",
   "T", "per_channel", "maxpool", "calib_images", "test_images",
   "converted_ann_accuracy", "thresholds": [layer-wise λ or per-channel list]}

tools/pytorch_snn_bench.py imports the conversion functions from here.
"""
import argparse
import copy
import json
import os
import sys
import time

import numpy as np
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import nc_models  # noqa: E402

THRESHOLD_METHODS = {"p99": 99.0, "p99.9": 99.9, "p99.99": 99.99, "max": 100.0}


# ------------------------------------------------------------- model -----

def load_trained(name, root=ROOT):
    """The trained module of `name` in eval mode (state_dict from its .pt)."""
    path = os.path.join(nc_models.model_dir(name, root), f"{name}.pt")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no trained state_dict (has tools/train_models.py finished it?)")
    model = nc_models.build(name)
    model.load_state_dict(torch.load(path, map_location="cpu"))
    return model.eval()


def fold_conv_bn(conv, bn):
    """A new Conv2d computing bn(conv(x)) in eval mode: W·γ/σ, γ(b−μ)/σ + β."""
    sigma = torch.sqrt(bn.running_var + bn.eps)
    scale = bn.weight / sigma                                    # γ/σ per output channel
    bias = conv.bias if conv.bias is not None else torch.zeros_like(bn.running_mean)
    fused = nn.Conv2d(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding,
                      conv.dilation, conv.groups, bias=True, padding_mode=conv.padding_mode)
    with torch.no_grad():
        fused.weight.copy_(conv.weight * scale.view(-1, 1, 1, 1))
        fused.bias.copy_(scale * (bias - bn.running_mean) + bn.bias)
    return fused


def fold_batchnorm(module):
    """In place, recursively: every Conv2d immediately followed (in child
    registration order) by a BatchNorm2d absorbs it; the BN becomes Identity."""
    names = [n for n, _ in module.named_children()]
    for i, n in enumerate(names):
        child = getattr(module, n)
        if isinstance(child, nn.Conv2d) and i + 1 < len(names) and \
                isinstance(getattr(module, names[i + 1]), nn.BatchNorm2d):
            setattr(module, n, fold_conv_bn(child, getattr(module, names[i + 1])))
            setattr(module, names[i + 1], nn.Identity())
        else:
            fold_batchnorm(child)
    return module


def prepare_maxpool(module, mode):
    """In place, recursively: 'pre-spike' swaps ReLU→MaxPool2d into
    MaxPool2d→ReLU inside Sequentials; 'avg' turns MaxPool2d into AvgPool2d.
    Returns the number of pools handled."""
    count = 0
    if isinstance(module, nn.Sequential):
        names = [n for n, _ in module.named_children()]
        for i, n in enumerate(names):
            child = getattr(module, n)
            if mode == "avg" and isinstance(child, nn.MaxPool2d):
                setattr(module, n, nn.AvgPool2d(child.kernel_size, child.stride, child.padding))
                count += 1
            elif mode == "pre-spike" and isinstance(child, nn.ReLU) and i + 1 < len(names) and \
                    isinstance(getattr(module, names[i + 1]), nn.MaxPool2d):
                pool = getattr(module, names[i + 1])
                setattr(module, n, pool)
                setattr(module, names[i + 1], child)
                count += 1
    for child in module.children():
        if not isinstance(child, (nn.MaxPool2d, nn.AvgPool2d, nn.ReLU)):
            count += prepare_maxpool(child, mode)
    return count


def prepare_ann(name, maxpool="pre-spike", root=ROOT):
    """(trained module, prepared ANN = BN folded + MaxPool handled).
    pre-spike-sum prepares the ANN like pre-spike (the difference is in the
    SNN only, see to_snn)."""
    if maxpool == "pre-spike-sum":
        maxpool = "pre-spike"
    trained = load_trained(name, root)
    ann = fold_batchnorm(copy.deepcopy(trained))
    prepare_maxpool(ann, maxpool)
    return trained, ann.eval()


def relu_modules(model):
    """(qualified name, module) of every nn.ReLU, in forward order (= module
    registration order for the nc_models nets)."""
    return [(n, m) for n, m in model.named_modules() if isinstance(m, nn.ReLU)]


# ------------------------------------------------------- calibration -----

def calibrate(ann, x, method="p99.9", per_channel=False, batch=500):
    """Thresholds λ of every ReLU of `ann` from its outputs on x (see 3. above).
    Returns a list (forward order) of float (layer-wise) or float32 numpy
    arrays [C] (per channel)."""
    relus = relu_modules(ann)
    # Positive activations per layer: a list of 1-D arrays (layer-wise), or per
    # layer a list of C lists of 1-D arrays (per channel).
    store = [[] if not per_channel else None for _ in relus]

    def hook_for(k):
        def hook(_module, _inp, out):
            a = out.detach()
            if per_channel:
                c = a.shape[1]
                chan = a.transpose(0, 1).reshape(c, -1).cpu().numpy()   # [C, N·H·W]
                if store[k] is None:
                    store[k] = [[] for _ in range(c)]
                for j in range(c):
                    row = chan[j]
                    store[k][j].append(row[row > 0].copy())
            else:
                flat = a.reshape(-1).cpu().numpy()
                store[k].append(flat[flat > 0].copy())
        return hook

    handles = [m.register_forward_hook(hook_for(k)) for k, (_, m) in enumerate(relus)]
    try:
        with torch.no_grad():
            for i in range(0, len(x), batch):
                ann(x[i:i + batch])
    finally:
        for h in handles:
            h.remove()

    p = THRESHOLD_METHODS[method]

    def stat(values):
        if values.size == 0:
            return None
        return float(values.max()) if p >= 100.0 else float(np.percentile(values.astype(np.float64), p))

    thresholds = []
    for k in range(len(relus)):
        if not per_channel:
            t = stat(np.concatenate(store[k]))
            thresholds.append(1.0 if t is None else t)
        else:
            chans = [np.concatenate(parts) for parts in store[k]]
            layer = stat(np.concatenate(chans))
            layer = 1.0 if layer is None else layer
            per = [stat(c) for c in chans]
            thresholds.append(np.array([layer if t is None else t for t in per], dtype=np.float32))
        store[k] = None          # free the layer's values as we go
    return thresholds


# ---------------------------------------------------------------- SNN -----

class IF(nn.Module):
    """Integrate-and-fire neuron, reset by subtraction, fire on ≥, spike = θ.

    Step mode (steps = None): each forward(x) is one time step; the membrane v
    persists between calls until reset().
    Multi-step mode (steps = T): forward gets all T steps at once as
    [T·B, ...] (time-major) and returns [T·B, ...]; with broadcast_input the
    input is a single [B, ...] current applied at every step (direct
    encoding: the layers before the first IF are computed once).
    """

    def __init__(self, theta, v0=0.5):
        super().__init__()
        theta = torch.as_tensor(np.asarray(theta, dtype=np.float32))
        self.register_buffer("theta", theta)   # scalar, or [C] per channel
        self.v0 = float(v0)
        self.v = None
        self.steps = None
        self.broadcast_input = False

    def _theta_for(self, x):
        """θ shaped to broadcast against x [B, C, ...]."""
        if self.theta.dim() == 0:
            return self.theta
        return self.theta.view(1, -1, *([1] * (x.dim() - 2)))

    def reset(self):
        self.v = None

    def forward(self, x):
        if self.steps is None:                        # one time step
            th = self._theta_for(x)
            if self.v is None:
                self.v = (self.v0 * th).expand_as(x).clone()
            self.v += x                                # m(t) = v(t−1) + I(t)
            spike = (self.v >= th).to(x.dtype) * th    # s(t)·θ
            self.v -= spike                            # v(t) = m(t) − s(t)·θ
            return spike
        # all T steps at once
        T = self.steps
        step_shape = x.shape if self.broadcast_input else (x.shape[0] // T,) + tuple(x.shape[1:])
        th = self._theta_for(x)
        v = (self.v0 * th).expand(step_shape).clone()
        xs = x if self.broadcast_input else x.view(T, *step_shape)
        out = torch.empty((T,) + tuple(step_shape), dtype=x.dtype, device=x.device)
        for t in range(T):
            v += xs if self.broadcast_input else xs[t]
            torch.mul(v >= th, th, out=out[t])
            v -= out[t]
        return out.view(T * step_shape[0], *step_shape[1:])


class RunningSumMaxPool(nn.Module):
    """MaxPool over the running sums of its input (--maxpool pre-spike-sum):
    S(t) = S(t−1) + I(t), S(0) = 0; out(t) = pool(S(t)) − pool(S(t−1)).
    Step mode keeps S and pool(S(t−1)) between calls until reset(); in
    multi-step mode (steps = T) the input is [T·B, ...], time-major."""

    def __init__(self, pool):
        super().__init__()
        self.pool = pool
        self.s = None
        self.prev = None
        self.steps = None

    def reset(self):
        self.s = None
        self.prev = None

    def forward(self, x):
        if self.steps is None:                         # one time step
            self.s = x.clone() if self.s is None else self.s.add_(x)
            m = self.pool(self.s)
            out = m if self.prev is None else m - self.prev
            self.prev = m
            return out
        T = self.steps
        B = x.shape[0] // T
        s = x.view(T, B, *x.shape[1:]).cumsum(0)       # S(1..T), summed in step order
        m = self.pool(s.view(T * B, *x.shape[1:]))
        m = m.view(T, B, *m.shape[1:])
        out = m.clone()
        out[1:] -= m[:-1]
        return out.view(T * B, *m.shape[2:])


def to_snn(ann, thresholds, v0=0.5, pool_sums=False):
    """A deep copy of the prepared ANN with its k-th nn.ReLU replaced by
    IF(θ = thresholds[k], v0).  pool_sums: every MaxPool2d of a top-level
    Sequential that comes after the first IF is wrapped in RunningSumMaxPool
    (those before it see only the constant analog image and stay as they
    are: for a constant input both rules give the same current)."""
    snn = copy.deepcopy(ann)
    names = [n for n, _ in relu_modules(snn)]
    assert len(names) == len(thresholds)
    for n, th in zip(names, thresholds):
        parent = snn
        *path, last = n.split(".")
        for p in path:
            parent = getattr(parent, p)
        setattr(parent, last, IF(th, v0))
    if pool_sums:
        assert isinstance(snn, nn.Sequential)
        seen_if = False
        for i, m in enumerate(snn):
            seen_if = seen_if or isinstance(m, IF)
            if seen_if and isinstance(m, nn.MaxPool2d):
                snn[i] = RunningSumMaxPool(m)
    return snn.eval()


def if_modules(snn):
    return [m for m in snn.modules() if isinstance(m, IF)]


def stateful_modules(snn):
    """IF neurons and running-sum pools: what reset() / steps apply to."""
    return [m for m in snn.modules() if isinstance(m, (IF, RunningSumMaxPool))]


def reset_snn(snn):
    for m in stateful_modules(snn):
        m.reset()


def set_multi_step(snn, steps):
    """steps = T: multi-step mode, the first IF broadcasting its [B] input;
    steps = None: back to step mode."""
    for m in stateful_modules(snn):
        m.steps = steps
        m.reset()
    for k, m in enumerate(if_modules(snn)):
        m.broadcast_input = steps is not None and k == 0


def split_head(snn):
    """(head, tail) of a Sequential SNN at its first top-level IF: the head
    (everything before it) sees only the analog image, so under direct
    encoding its output is the same at every step."""
    assert isinstance(snn, nn.Sequential)
    for i, m in enumerate(snn):
        if isinstance(m, IF):
            return snn[:i], snn[i:]
    raise ValueError("no top-level IF")


def snn_correct_by_step(snn, x, y, T, batch=500):
    """Number of correct predictions after each step t = 1..T (step loop,
    summed logits; the head before the first IF is computed once per batch)."""
    head, tail = split_head(snn)
    correct = np.zeros(T, dtype=np.int64)
    with torch.no_grad():
        for i in range(0, len(x), batch):
            xb, yb = x[i:i + batch], y[i:i + batch]
            reset_snn(snn)
            current = head(xb)
            acc = None
            for t in range(T):
                logits = tail(current)
                acc = logits.clone() if acc is None else acc.add_(logits)
                correct[t] += int((acc.argmax(1) == yb).sum())
    return correct


def ann_accuracy(model, x, y, batch=500):
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            correct += int((model(x[i:i + batch]).argmax(1) == y[i:i + batch]).sum())
    return correct / len(x)


# ----------------------------------------------------------------- main -----

def describe_threshold(th):
    if np.ndim(th) == 0:
        return f"{float(th):.6g}"
    th = np.asarray(th)
    return f"[{th.size} ch] min {th.min():.6g}  median {np.median(th):.6g}  max {th.max():.6g}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", choices=sorted(nc_models.BUILDERS))
    ap.add_argument("--threshold", default="p99.9", choices=list(THRESHOLD_METHODS))
    ap.add_argument("--per-channel", action="store_true")
    ap.add_argument("--v0", type=float, default=0.5, help="v(0) as a fraction of θ (default 0.5)")
    ap.add_argument("--T", type=int, default=64)
    ap.add_argument("--calib-images", type=int, default=2000)
    ap.add_argument("--limit", type=int, default=0, help="first N test images (0 = all 10 000)")
    ap.add_argument("--maxpool", default="pre-spike", choices=["pre-spike", "pre-spike-sum", "avg"])
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--root", default=ROOT, help="repository root (where the .pt files are)")
    ap.add_argument("--device", default="cpu", help="torch device (default cpu)")
    ap.add_argument("--data", default=nc_models.FASHION_MNIST_DIR, help="Fashion-MNIST IDX folder")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.backends.cuda.matmul.allow_tf32 = False     # float32 arithmetic on a GPU too
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(args.device)
    t0 = time.perf_counter()

    trained, ann = prepare_ann(args.model, args.maxpool, args.root)
    trained, ann = trained.to(dev), ann.to(dev)

    xtr, _ = nc_models.load_fashion_mnist("train", args.data)
    xte, yte = nc_models.load_fashion_mnist("test", args.data)
    x_cal = nc_models.preprocess(xtr[:args.calib_images]).to(dev)
    n_test = args.limit if args.limit > 0 else len(xte)
    x_test = nc_models.preprocess(xte[:n_test]).to(dev)
    y_test = torch.from_numpy(yte[:n_test]).to(dev)

    # Folding is exact up to float rounding: check on a few test images.
    with torch.no_grad():
        ref = trained(x_test[:256])
        if args.maxpool != "avg":
            diff = float((ann(x_test[:256]) - ref).abs().max())
            print(f"BN fold + pre-spike MaxPool swap: max |Δlogit| = {diff:.3g} (256 test images)")

    acc_trained = ann_accuracy(trained, x_test, y_test, args.batch)
    acc_ann = ann_accuracy(ann, x_test, y_test, args.batch) if args.maxpool == "avg" else acc_trained

    thresholds = calibrate(ann, x_cal, args.threshold, args.per_channel, args.batch)
    print(f"model {args.model}: thresholds ({args.threshold}, "
          f"{'per channel' if args.per_channel else 'layer-wise'}, {len(x_cal)} training images)")
    for (name, _), th in zip(relu_modules(ann), thresholds):
        print(f"  {name:14s} θ = {describe_threshold(th)}")

    snn = to_snn(ann, thresholds, args.v0, pool_sums=args.maxpool == "pre-spike-sum").to(dev)
    correct = snn_correct_by_step(snn, x_test, y_test, args.T, args.batch)
    acc_by_step = [float(c) / n_test for c in correct]

    print(f"ANN accuracy (trained module)     {acc_trained:.4f}   ({n_test} test images)")
    if args.maxpool == "avg":
        print(f"ANN accuracy (MaxPool→AvgPool)    {acc_ann:.4f}")
    print(f"SNN accuracy, {args.threshold} {'per-channel' if args.per_channel else 'layer-wise'}, "
          f"v0 = {args.v0}·θ, maxpool {args.maxpool}, device {args.device}:")
    print("     t  accuracy")
    t = 1
    while t <= args.T:
        print(f"  {t:4d}  {acc_by_step[t - 1]:.4f}")
        t *= 2
    if args.T & (args.T - 1):
        print(f"  {args.T:4d}  {acc_by_step[-1]:.4f}")
    print(f"({time.perf_counter() - t0:.1f} s)")

    if args.json:
        print(json.dumps({
            "model": args.model, "ann_accuracy": acc_trained, "accuracy_by_step": acc_by_step,
            "threshold": args.threshold, "v0": args.v0, "T": args.T, "per_channel": args.per_channel,
            "maxpool": args.maxpool, "calib_images": len(x_cal), "test_images": n_test,
            "converted_ann_accuracy": acc_ann, "device": args.device,
            "thresholds": [t.tolist() if isinstance(t, np.ndarray) else t for t in thresholds]}))


if __name__ == "__main__":
    main()
