#!/usr/bin/env python3
"""Reads a lava-dl netx HDF5 file written by `neurocuda export-lava` with h5py
the way netx's NetDict does (conversion.md §5.4), checks the layout, and
prints a JSON summary for tests/test_cli_loihi.sh.

Usage: h5py_read_netx.py FILE
Exit status: 0 = well-formed (JSON on stdout), 1 = a check failed (reason on
stderr), 77 = h5py is missing (the caller skips)."""
import json
import sys

from h5py_common import checker, h5py, np

need = checker("netx check")


def text(ds):
    """netx's NetDict: value[0] or value[()], then .decode('ascii')."""
    v = ds[0] if len(ds.shape) > 0 else ds[()]
    need(isinstance(v, bytes), f"{ds.name} is a fixed-length byte string ({type(v)})")
    return v.decode("ascii")


def main(path):
    f = h5py.File(path, "r")
    need("layer" in f and "simulation" in f, "/layer and /simulation exist")
    layers = f["layer"]
    n = len(layers)
    need(n >= 2, "at least an input and one layer")
    summary = {"layers": n, "types": [], "shapes": [], "weight_shapes": [], "vth": [], "w_min": [], "w_max": []}
    prev_numel = None
    for i in range(n):
        need(str(i) in layers, f"layer groups are numbered 0..{n - 1}")
        g = layers[str(i)]
        t = text(g["type"])
        summary["types"].append(t)
        shape = [int(v) for v in g["shape"][()]]
        summary["shapes"].append(shape)
        if i == 0:
            need(t == "input", "layer 0 is the input")
        if t == "flatten":
            prev_numel = int(np.prod(shape))
            continue
        need("neuron" in g, f"layer {i} ({t}) has a neuron group")
        nr = g["neuron"]
        need(text(nr["type"]) == "CUBA", "CUBA neurons")
        need(int(nr["iDecay"][()]) == 4096 and int(nr["vDecay"][()]) == 0, "IF: iDecay 4096 (du 4095), vDecay 0")
        vth = int(nr["vThMant"][()])
        need(1 <= vth <= 131071, f"vThMant {vth} is a 17-bit mantissa")
        need("refDelay" in nr, "refDelay present")
        need(nr.attrs["nc_reset"].decode() in ("subtract", "zero"), "nc_reset attribute")
        summary["vth"].append(vth)
        if t == "input":
            prev_numel = int(np.prod(shape))
            continue
        w = g["weight"][()]
        wi = w.astype(int)  # NetDict's copy_keys: .astype(int)
        need(np.all(wi == w), f"layer {i}: integer weights")
        need(wi.min() >= -256 and wi.max() <= 254, f"layer {i}: weights in [-256, 254] ({wi.min()}, {wi.max()})")
        need(np.all(wi % 2 == 0), f"layer {i}: 8 significant bits (even)")
        summary["weight_shapes"].append(list(w.shape))
        summary["w_min"].append(int(wi.min()))
        summary["w_max"].append(int(wi.max()))
        if t == "dense":
            need(w.ndim == 2, "dense weight [out, in]")
            need(int(g["outFeatures"][()]) == w.shape[0] == int(np.prod(shape)), "outFeatures = rows = shape")
            need(int(g["inFeatures"][()]) == w.shape[1], "inFeatures = columns")
            if prev_numel is not None:
                need(w.shape[1] == prev_numel, f"dense layer {i} reads the {prev_numel} values before it")
        elif t == "conv":
            need(w.ndim == 4, "conv weight [out, in/groups, kH, kW]")
            need(int(g["outChannels"][()]) == w.shape[0] == shape[0], "outChannels = rows = shape[0]")
            k = [int(v) for v in g["kernelSize"][()]]
            need(k == [w.shape[2], w.shape[3]], "kernelSize matches the weight")
            for key in ("stride", "padding", "dilation"):
                need(len(g[key][()]) == 2, f"{key} has 2 values")
            need(int(g["groups"][()]) >= 1, "groups")
        else:
            need(False, f"unexpected layer type {t}")
        if "bias" in g:
            b = g["bias"][()]
            need(b.shape[0] == w.shape[0], "one bias per output (channel)")
            need(np.all(b.astype(int) == b), "integer biases")
        prev_numel = int(np.prod(shape))
    summary["tSample"] = int(f["simulation"]["tSample"][()])
    print(json.dumps(summary))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(1)
    main(sys.argv[1])
