#!/usr/bin/env python3
"""gpu-multi-compare.py — compares a run on several GPUs with the same run on
one (tools/gpu-multi-run.sh); prints one line, exit status 1 when they differ
more than they may.

  loss  ONE.err MANY.err   the running loss after every batch (the progress
                           lines `neurocuda convert` writes to stderr): the
                           largest relative difference, within 1e-3
  sweep ONE.txt MANY.txt   the accuracy tables of the sweeps' JSON lines:
                           identical (measurements merge to one GPU's numbers)
  run   ONE.txt MANY.txt   the JSON of `neurocuda run`: identical numbers
"""
import json
import re
import sys

PROGRESS = re.compile(r"(qcfs|bptt) epoch (\d+)/\d+: batch (\d+)/\d+, loss ([0-9.eE+-]+)")


def losses(path):
    text = open(path, errors="replace").read().replace("\r", "\n")
    return {(m[0], int(m[1]), int(m[2])): float(m[3]) for m in PROGRESS.findall(text)}


def json_lines(path):
    return [json.loads(l) for l in open(path, errors="replace") if l.startswith("{")]


def numbers(obj, prefix=""):
    """Every number in a JSON value, by its path (timings left out)."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if "second" in k or k in ("seconds", "images_per_second", "stage_seconds"):
                continue
            out.update(numbers(v, f"{prefix}/{k}"))
        return out
    if isinstance(obj, list):
        out = {}
        for i, v in enumerate(obj):
            out.update(numbers(v, f"{prefix}[{i}]"))
        return out
    return {prefix: obj} if isinstance(obj, (int, float)) and not isinstance(obj, bool) else {}


def compare_loss(one, many):
    a, b = losses(one), losses(many)
    common = sorted(set(a) & set(b))
    if not common:
        print(f"no progress lines to compare ({len(a)} and {len(b)})")
        return 1
    worst = max(abs(a[k] - b[k]) / max(1.0, abs(a[k])) for k in common)
    last = common[-1]
    print(f"{len(common)} batches, largest relative difference {worst:.2e}, last loss {a[last]:.5f} vs {b[last]:.5f}")
    return 0 if worst < 1e-3 else 1


def compare_same(one, many, what):
    a, b = json_lines(one), json_lines(many)
    if not a or len(a) != len(b):
        print(f"{what}: {len(a)} and {len(b)} JSON results")
        return 1
    differ = [k for x, y in zip(a, b) for k, v in numbers(x).items() if numbers(y).get(k) != v]
    print(f"{what}: {len(a)} results, " + ("identical" if not differ else f"{len(differ)} numbers differ, e.g. {differ[:3]}"))
    return 0 if not differ else 1


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("loss", "sweep", "run"):
        print(__doc__)
        return 2
    kind, one, many = sys.argv[1:]
    return compare_loss(one, many) if kind == "loss" else compare_same(one, many, kind)


if __name__ == "__main__":
    sys.exit(main())
