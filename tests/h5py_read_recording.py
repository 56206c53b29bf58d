#!/usr/bin/env python3
"""Reads a NeuroCUDA recording (HDF5) with h5py, checks its structure and the
consistency of its values, and prints a flat JSON summary for the C test.

Usage: h5py_read_recording.py FILE
Exit status: 0 = the file is well-formed (JSON on stdout), 1 = a check failed
(reason on stderr), 77 = h5py is missing (the caller skips)."""
import json
import math
import sys

from h5py_common import checker, h5py, np

need = checker("check")


def close(a, b, tol=1e-9):
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= tol * max(1.0, abs(b))


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def check_layer(f, g, T, samples, out, key):
    a = g.attrs
    neurons, spikes = int(a["neurons"]), int(a["spikes"])
    need(close(float(a["firing_rate"]), spikes / (neurons * samples * T)), f"{key}: firing_rate formula")
    counts = g["spike_count_by_channel"][()]
    rates = g["rate_by_channel"][()]
    need(counts.dtype == np.int64 and rates.dtype == np.float64, f"{key}: channel dtypes")
    need(int(counts.sum()) == spikes, f"{key}: channel counts sum to spikes")
    per_channel = neurons // int(a["channels"])
    need(np.allclose(rates, counts / (per_channel * samples * T)), f"{key}: rate_by_channel formula")
    neuron, step, sample = g["neuron"][()], g["step"][()], g["sample"][()]
    need(neuron.dtype == np.int32 and step.dtype == np.int32 and sample.dtype == np.int32, f"{key}: event dtypes")
    need(len(neuron) == len(step) == len(sample), f"{key}: event lengths")
    if len(neuron):
        need(neuron.min() >= 0 and neuron.max() < neurons, f"{key}: neuron range")
        need(step.min() >= 0 and step.max() < T, f"{key}: step range")
        need(sample.min() >= 0 and sample.max() < int(a["raster_samples"]), f"{key}: sample range")
        need(set(neuron.tolist()) <= set(g["raster_neurons"][()].tolist()), f"{key}: events from raster neurons")
    tr = g["traces"]
    S, k = tr["current"].shape[0], tr["current"].shape[1]
    need(tr["v"].shape == (S, k, T + 1) and tr["spike"].shape == (S, k, T), f"{key}: trace shapes")
    if S and k:  # membrane rule: v_t = v_{t-1} + x_t − s_t·θ (subtract reset)
        if text(a["reset"]) == "subtract":
            th = tr["threshold"][()][None, :, None]
            expect = tr["v"][:, :, :-1] + tr["current"][()] - tr["spike"][()] * th
            need(np.allclose(tr["v"][:, :, 1:], expect, atol=1e-5), f"{key}: membrane rule")
    for e in ("total", "local"):
        for s in ("mean", "mse", "mean_abs", "rel_l2"):
            need(f"{e}_{s}" in a, f"{key}: attribute {e}_{s}")
    decomposed = float(a["clip_mean"]) + float(a["quant_mean"]) + float(a["uneven_mean"])
    need(close(decomposed, float(a["local_mean"]), 1e-6), f"{key}: decomposition sums to the local error")
    name = text(a["node_name"])
    out[f"layer.{name}.spikes"] = spikes
    out[f"layer.{name}.firing_rate"] = float(a["firing_rate"])
    out[f"layer.{name}.events"] = int(len(neuron))
    out[f"layer.{name}.local_mse"] = float(a["local_mse"])
    out[f"layer.{name}.sops"] = float(a["sops"])
    out[f"layer.{name}.v_last"] = float(tr["v"][0, 0, T]) if S and k else 0.0


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with h5py.File(sys.argv[1], "r") as f:
        need(text(f.attrs["format"]) == "neurocuda-recording", "root format attribute")
        need(int(f.attrs["version"]) == 1, "version 1")
        T, samples = int(f.attrs["T"]), int(f.attrs["samples"])
        acc = f["accuracy_by_step"][()]
        need(acc.shape == (T,) and acc.dtype == np.float64, "accuracy_by_step is f64 [T]")
        need(f["ann_accuracy"].shape == () and f["qcfs_accuracy"].shape == (), "scalar reference accuracies")
        d = f["definitions"].attrs
        need(text(d["firing_rate"]) == "spikes / (neurons × samples × steps)", "firing_rate formula text")
        need(text(d["sops"]) == "spikes × fanout", "sops formula text")
        need("firing_rate.units" in d, "units")
        names = [text(n) for n in f["layer_names"][()]]
        by_name = {text(g.attrs["node_name"]): key for key, g in f["layers"].items()}
        need(sorted(names) == sorted(by_name), "layer_names match the layer groups")
        out = {"ok": True, "T": T, "samples": samples, "accuracy_last": float(acc[-1]),
               "ann_accuracy": float(f["ann_accuracy"][()]), "qcfs_accuracy": float(f["qcfs_accuracy"][()]),
               "sops_per_mac": float(f["totals"].attrs["sops_per_mac"]), "layers": len(names)}
        for n in names:
            check_layer(f, f["layers"][by_name[n]], T, samples, out, by_name[n])
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
