#!/usr/bin/python3
"""pytorch_snn_bench.py — how fast plain PyTorch (CPU) simulates a converted
NeuroCUDA network: the speed baseline that `neurocuda bench --engine cpu` is
compared with.

Usage (from the repository root; Debian's python3-torch is /usr/bin/python3):
  /usr/bin/python3 tools/pytorch_snn_bench.py MODEL [--T 8] [--batch 64]
      [--repeats 20] [--warmup 3] [--threads 2] [--maxpool pre-spike|avg]
      [--memory-format auto|contiguous|channels_last] [--json]

The network is the one tools/pytorch_snn_reference.py builds (BN folded,
MaxPool before the IF, IF with reset by subtraction, fire on ≥, v0 = θ/2,
direct encoding, the last Linear accumulating logits), calibrated layer-wise
with p99.9 on 200 training images: the speed does not depend on θ.

One batch = the first --batch test images simulated for T steps, giving the
summed logits.  Timed in three ways (float32, torch.no_grad(),
torch.set_num_threads(--threads)):
  step loop, naive   for t in 1..T: the whole SNN on the image (stateful IF).
  step loop          the layers before the first IF (which see only the
                     analog image) once, then for t in 1..T: the rest.
  multi-step         layer by layer over all T steps at once: the layers
                     before the first IF once on [B, ...]; every later conv /
                     linear / pool in ONE call on [T·B, ...] (time-major); the
                     IF recurrence a python loop over t on the [T, B, ...]
                     tensor (the first IF adds the same [B, ...] current at
                     every step: same trick as the C engine); the logits are
                     summed over T at the end.
Per variant: --warmup untimed runs, then --repeats timed runs
(time.perf_counter); reported: the median ms per batch, images/s = B / median,
and the best of "step loop" and "multi-step" (the naive loop is shown for
information only).  Memory format of the feature maps: --memory-format auto
(default) times every variant both in the contiguous NCHW layout and in
torch.channels_last (NHWC, often faster for oneDNN convolutions) for a net
with a Conv2d, and keeps the faster per variant, so that the baseline is
PyTorch at its best; nets without a Conv2d are timed contiguous only.  Before timing, the three variants' summed logits are
checked against each other (max |Δ| printed; they must agree up to float
rounding).

With --json a last line:
  {"model", "T", "batch", "step_loop_ms", "multi_step_ms",
   "best_images_per_second", "naive_step_loop_ms", "best", "threads",
   "repeats", "memory_format" (of the best), "by_format": {format: {variant:
   median ms}}, "torch"}
"""
import argparse
import json
import statistics
import time

import torch

import pytorch_snn_reference as ref
import nc_models


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


def time_it(fn, warmup, repeats):
    """Median wall time of fn() in ms over `repeats` runs after `warmup`."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), min(times), max(times)


def bench_format(snn, x, T, memory_format, args):
    """{variant: (median, min, max) ms} of the three variants in one memory
    format, after checking that they agree."""
    snn = snn.to(memory_format=memory_format)
    x = x.contiguous(memory_format=memory_format)
    head, tail = ref.split_head(snn)
    with torch.no_grad():
        # Cross-check: the three ways compute the same summed logits.
        ref.set_multi_step(snn, None)
        a = run_naive_step_loop(snn, x, T)
        b = run_step_loop(head, tail, snn, x, T)
        ref.set_multi_step(snn, T)
        c = run_multi_step(snn, x, T)
        ref.set_multi_step(snn, None)
        diff = max(float((a - b).abs().max()), float((a - c).abs().max()))
        scale = float(a.abs().max())
        name = FORMAT_NAMES[memory_format]
        print(f"check ({name}): max |Δ summed logits| between the variants = {diff:.3g} "
              f"(max |logit sum| {scale:.3g})")
        if diff > 1e-3 * max(1.0, scale):
            print("WARNING: the variants disagree beyond float rounding")

        results = {}
        results["naive_step_loop"] = time_it(lambda: run_naive_step_loop(snn, x, T), args.warmup, args.repeats)
        results["step_loop"] = time_it(lambda: run_step_loop(head, tail, snn, x, T), args.warmup, args.repeats)
        ref.set_multi_step(snn, T)
        results["multi_step"] = time_it(lambda: run_multi_step(snn, x, T), args.warmup, args.repeats)
        ref.set_multi_step(snn, None)
    return results


FORMAT_NAMES = {torch.contiguous_format: "contiguous", torch.channels_last: "channels_last"}
VARIANTS = ("naive_step_loop", "step_loop", "multi_step")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", choices=sorted(nc_models.BUILDERS))
    ap.add_argument("--T", type=int, default=8)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--maxpool", default="pre-spike", choices=["pre-spike", "avg"])
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
    snn = ref.to_snn(ann, thresholds, 0.5)
    x = nc_models.preprocess(xte[:args.batch])
    T = args.T

    has_conv = any(isinstance(m, torch.nn.Conv2d) for m in snn.modules())
    if args.memory_format == "contiguous" or (args.memory_format == "auto" and not has_conv):
        formats = [torch.contiguous_format]
    elif args.memory_format == "channels_last":
        formats = [torch.channels_last]
    else:
        formats = [torch.contiguous_format, torch.channels_last]

    by_format = {FORMAT_NAMES[f]: bench_format(snn, x, T, f, args) for f in formats}

    # Per variant, the faster memory format.
    best_of = {v: min(by_format, key=lambda f: by_format[f][v][0]) for v in VARIANTS}
    med = {v: by_format[best_of[v]][v][0] for v in VARIANTS}
    best = min(("step_loop", "multi_step"), key=lambda v: med[v])

    print(f"model {args.model}: T = {T}, batch = {args.batch}, threads = {args.threads}, "
          f"{args.repeats} repeats (+{args.warmup} warm-up), torch {torch.__version__}")
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
            "best_images_per_second": args.batch / med[best] * 1e3,
            "naive_step_loop_ms": med["naive_step_loop"], "best": best,
            "threads": args.threads, "repeats": args.repeats, "memory_format": best_of[best],
            "by_format": {f: {v: r[v][0] for v in VARIANTS} for f, r in by_format.items()},
            "torch": torch.__version__}))


if __name__ == "__main__":
    main()
