#!/usr/bin/python3
"""pytorch_snn_bench.py — how fast plain PyTorch (CPU) simulates a converted
NeuroCUDA network: the speed baseline that `neurocuda bench --engine cpu` is
compared with.

Usage (from the repository root; Debian's python3-torch is /usr/bin/python3):
  /usr/bin/python3 tools/pytorch_snn_bench.py MODEL [--T 8] [--batch 64]
      [--repeats 20] [--warmup 3] [--threads 2] [--maxpool pre-spike|pre-spike-sum|avg]
      [--memory-format auto|contiguous|channels_last] [--json]

The network is the one tools/pytorch_snn_reference.py builds: BN folded;
MaxPool before the IF (--maxpool pre-spike: max of each step's currents;
pre-spike-sum: max of the running sums, the C engines' rule; avg: AvgPool);
IF with reset by subtraction, fire on ≥, v0 = θ/2; direct encoding; the last
Linear accumulating logits.  Calibrated layer-wise with p99.9 on 200 training
images: the speed does not depend on θ.

One batch = the first --batch test images simulated for T steps, giving the
summed logits [B, 10].  Timed in three ways (float32, torch.no_grad(),
torch.set_num_threads(--threads)):
  naive_step_loop  for t in 1..T: the whole SNN on the image (stateful IF).
                   Shown for information only.
  step_loop        the layers before the first IF (they see only the analog
                   image, the same at every step) once, then for t in 1..T:
                   the rest of the SNN (stateful IF).
  multi_step       layer by layer over all T steps at once: the layers before
                   the first IF once on [B, ...]; every later conv / linear /
                   pool in ONE call on [T·B, ...] (time-major); the IF
                   recurrence a python loop over t on the [T, B, ...] tensor
                   (the first IF adds the same [B, ...] current at every step:
                   the same trick as the C engine); the logits summed over T.
Before timing, the variants' summed logits are checked against each other
(max |Δ| printed; they must agree up to float rounding).

Memory format of the feature maps: --memory-format auto (the default) times
every variant both in the contiguous NCHW layout and in torch.channels_last
(NHWC, often faster for oneDNN convolutions) when the net has a Conv2d, and
keeps the faster per variant, so that the baseline is PyTorch at its best.
Nets without a Conv2d are timed contiguous only.

Timing: --warmup untimed calls of every (format, variant), then --repeats
rounds in which each (format, variant) is timed once (time.perf_counter),
round robin, so that other load on the machine hits all of them alike.
Reported per variant: median / min / max ms per batch and images/s =
B / median; the result is the better (lower median) of step_loop and
multi_step.  The 1-minute load average before and after is printed: on a
2-core machine any other load distorts OpenMP timings, so measure idle.

With --json a last line:
  {"model", "T", "batch", "step_loop_ms", "multi_step_ms",
   "best_images_per_second", "best", "best_images_per_second_min" (from the
   fastest single run of step_loop / multi_step in any format: the estimate
   least distorted by other load), "naive_step_loop_ms", "memory_format"
   (of the best), "by_format": {format: {variant: median ms}},
   "min_ms": {format: {variant: min ms}}, "threads", "repeats",
   "load_average": [before, after], "torch"}
"""
import argparse
import copy
import json
import os
import statistics
import time

import torch

import pytorch_snn_reference as ref
import nc_models

FORMAT_NAMES = {torch.contiguous_format: "contiguous", torch.channels_last: "channels_last"}
VARIANTS = ("naive_step_loop", "step_loop", "multi_step")


# ---------------------------------------------------- the three loops -----

def run_naive_step_loop(snn, x, T):
    """Summed logits [B, 10]: the full net on the image at every step."""
    ref.reset_snn(snn)
    acc = snn(x).clone()
    for _ in range(T - 1):
        acc += snn(x)
    return acc


def run_step_loop(head, tail, snn, x, T):
    """Summed logits [B, 10]: head once, then the stateful tail T times."""
    ref.reset_snn(snn)
    current = head(x)
    acc = tail(current).clone()
    for _ in range(T - 1):
        acc += tail(current)
    return acc


def run_multi_step(snn, x, T):
    """Summed logits [B, 10]: all T steps per layer (snn in multi-step mode)."""
    out = snn(x)                                   # [T·B, 10], time-major
    return out.view(T, x.shape[0], -1).sum(0)


# -------------------------------------------------------------- timing -----

def prepare_variants(snn, x, T, memory_format):
    """{variant: zero-argument callable returning the summed logits} for one
    memory format.  The step variants and the multi-step one get their own
    copy of the SNN (so the mode is set once, outside the timing).  Checks
    that the variants agree."""
    step_snn = copy.deepcopy(snn).to(memory_format=memory_format)
    multi_snn = copy.deepcopy(snn).to(memory_format=memory_format)
    ref.set_multi_step(step_snn, None)
    ref.set_multi_step(multi_snn, T)
    x = x.contiguous(memory_format=memory_format)
    head, tail = ref.split_head(step_snn)
    fns = {"naive_step_loop": lambda: run_naive_step_loop(step_snn, x, T),
           "step_loop": lambda: run_step_loop(head, tail, step_snn, x, T),
           "multi_step": lambda: run_multi_step(multi_snn, x, T)}
    with torch.no_grad():
        out = {v: f() for v, f in fns.items()}
    a = out["naive_step_loop"]
    diff = max(float((a - out[v]).abs().max()) for v in out)
    scale = float(a.abs().max())
    print(f"check ({FORMAT_NAMES[memory_format]}): max |Δ summed logits| between the variants = "
          f"{diff:.3g} (max |logit sum| {scale:.3g})")
    if diff > 1e-3 * max(1.0, scale):
        print("WARNING: the variants disagree beyond float rounding")
    return fns


def time_round_robin(fns, warmup, repeats):
    """{key: [ms, ...]}: `warmup` untimed calls of each fn, then `repeats`
    rounds in which every fn is timed once."""
    times = {k: [] for k in fns}
    with torch.no_grad():
        for _ in range(warmup):
            for f in fns.values():
                f()
        for _ in range(repeats):
            for k, f in fns.items():
                t0 = time.perf_counter()
                f()
                times[k].append((time.perf_counter() - t0) * 1e3)
    return times


# ---------------------------------------------------------------- main -----

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", choices=sorted(nc_models.BUILDERS))
    ap.add_argument("--T", type=int, default=8)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--maxpool", default="pre-spike", choices=["pre-spike", "pre-spike-sum", "avg"])
    ap.add_argument("--memory-format", default="auto", choices=["auto", "contiguous", "channels_last"])
    ap.add_argument("--root", default=ref.ROOT)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)

    # The converted network (calibration: p99.9 layer-wise, 200 images).
    _, ann = ref.prepare_ann(args.model, args.maxpool, args.root)
    xtr, _ = nc_models.load_fashion_mnist("train")
    xte, _ = nc_models.load_fashion_mnist("test")
    thresholds = ref.calibrate(ann, nc_models.preprocess(xtr[:200]), "p99.9", False)
    snn = ref.to_snn(ann, thresholds, 0.5, pool_sums=args.maxpool == "pre-spike-sum")
    x = nc_models.preprocess(xte[:args.batch])
    T = args.T

    has_conv = any(isinstance(m, torch.nn.Conv2d) for m in snn.modules())
    if args.memory_format == "contiguous" or (args.memory_format == "auto" and not has_conv):
        formats = [torch.contiguous_format]
    elif args.memory_format == "channels_last":
        formats = [torch.channels_last]
    else:
        formats = [torch.contiguous_format, torch.channels_last]

    fns = {}
    for f in formats:
        for v, fn in prepare_variants(snn, x, T, f).items():
            fns[(FORMAT_NAMES[f], v)] = fn

    load_before = os.getloadavg()[0]
    times = time_round_robin(fns, args.warmup, args.repeats)
    load_after = os.getloadavg()[0]

    # {format: {variant: (median, min, max)}}
    by_format = {}
    for (f, v), ts in times.items():
        by_format.setdefault(f, {})[v] = (statistics.median(ts), min(ts), max(ts))
    # Per variant, the faster memory format; then the better of the two loops.
    best_of = {v: min(by_format, key=lambda f: by_format[f][v][0]) for v in VARIANTS}
    med = {v: by_format[best_of[v]][v][0] for v in VARIANTS}
    best = min(("step_loop", "multi_step"), key=lambda v: med[v])

    print(f"model {args.model}: T = {T}, batch = {args.batch}, threads = {args.threads}, "
          f"{args.repeats} repeats (+{args.warmup} warm-up), torch {torch.__version__}; "
          f"load average {load_before:.2f} -> {load_after:.2f} on {os.cpu_count()} CPUs")
    print(f"  {'variant':16s} {'format':14s} {'median ms':>10s} {'min ms':>9s} {'max ms':>9s} {'images/s':>10s}")
    for f, results in by_format.items():
        for v in VARIANTS:
            m, lo, hi = results[v]
            mark = "  <- best" if (v == best and f == best_of[v]) else ""
            print(f"  {v:16s} {f:14s} {m:10.2f} {lo:9.2f} {hi:9.2f} {args.batch / m * 1e3:10.1f}{mark}")

    if args.json:
        print(json.dumps({
            "model": args.model, "T": T, "batch": args.batch,
            "step_loop_ms": med["step_loop"], "multi_step_ms": med["multi_step"],
            "best_images_per_second": args.batch / med[best] * 1e3, "best": best,
            "best_images_per_second_min": args.batch / min(by_format[f][v][1] for f in by_format
                                                            for v in ("step_loop", "multi_step")) * 1e3,
            "naive_step_loop_ms": med["naive_step_loop"], "memory_format": best_of[best],
            "by_format": {f: {v: r[v][0] for v in VARIANTS} for f, r in by_format.items()},
            "min_ms": {f: {v: r[v][1] for v in VARIANTS} for f, r in by_format.items()},
            "threads": args.threads, "repeats": args.repeats,
            "load_average": [load_before, load_after], "torch": torch.__version__}))


if __name__ == "__main__":
    main()
