#!/usr/bin/python3
"""export_onnx.py — exports NeuroCUDA's Fashion-MNIST models to ONNX without
retraining: each module is rebuilt from tools/nc_models.py and its saved
state_dict (<name>.pt), then written by one of PyTorch's two exporters:

  --exporter torchscript  torch.onnx.export(..., dynamo=False), opset 13, weights
                          inline                          → <name>.onnx
  --exporter dynamo       torch.onnx.export(..., dynamo=True, external_data=True),
                          opset 18, needs PyTorch ≥ 2.5   → <name>_dynamo.onnx
                                                            + <name>_dynamo.onnx.data

Both take input "input" [N,1,28,28] (preprocessed: x/255, then (x−0.2860)/0.3530)
and give "logits" [N,10], with a dynamic batch axis.  torchscript exports go next
to the .pt (tests/fixtures/models, or assets/models for the bundled model);
dynamo exports always go to tests/fixtures/models (they are test fixtures).

Before exporting, the rebuilt module is run on <name>.input.npy and compared
with <name>.logits.npy, so a state_dict that does not load right is caught here.

Usage (from the repository root):
  /usr/bin/python3 tools/export_onnx.py                       # all models, torchscript
  python3 tools/export_onnx.py --exporter dynamo              # on PyTorch ≥ 2.5
  python3 tools/export_onnx.py --exporter dynamo --models mlp resnet
"""
import argparse
import inspect
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nc_models  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPSETS = {"torchscript": 13, "dynamo": 18}


def _example_input(batch=2):
    # batch > 1: the dynamo exporter would otherwise specialise the batch to 1
    return torch.zeros(batch, 1, 28, 28)


def _supports_kwarg(name):
    return name in inspect.signature(torch.onnx.export).parameters


def export_torchscript(model, path, opset=OPSETS["torchscript"]):
    """The TorchScript exporter: one self-contained .onnx file."""
    kwargs = {}
    if _supports_kwarg("dynamo"):  # PyTorch ≥ 2.9 defaults to dynamo=True
        kwargs["dynamo"] = False
    torch.onnx.export(model, (_example_input(),), path, opset_version=opset, do_constant_folding=True,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}}, **kwargs)
    return [path]


def export_dynamo(model, path, opset=OPSETS["dynamo"]):
    """The dynamo exporter: <path> plus its weights in <path>.data."""
    if not _supports_kwarg("dynamo"):
        raise SystemExit(f"the dynamo exporter needs PyTorch ≥ 2.5; this is {torch.__version__}")
    dim = getattr(torch.export.Dim, "AUTO", None) or torch.export.Dim("batch")
    torch.onnx.export(model, (_example_input(),), path, dynamo=True, external_data=True,
                      opset_version=opset, input_names=["input"], output_names=["logits"],
                      dynamic_shapes=({0: dim},))
    return [path, path + ".data"]


EXPORTERS = {"torchscript": export_torchscript, "dynamo": export_dynamo}


def output_path(name, exporter, root=ROOT):
    if exporter == "torchscript":
        return os.path.join(nc_models.model_dir(name, root), name + ".onnx")
    return os.path.join(nc_models.reference_dir(root), name + "_dynamo.onnx")


def export_model(model, name, exporter, root=ROOT):
    """Exports an eval-mode module; returns the paths written."""
    model.eval()
    path = output_path(name, exporter, root)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return EXPORTERS[exporter](model, path)


def load_trained(name, root=ROOT):
    """Rebuilds the named module and loads its saved state_dict."""
    pt = os.path.join(nc_models.model_dir(name, root), name + ".pt")
    if not os.path.exists(pt):
        raise SystemExit(f"{pt}: no such file; train first: /usr/bin/python3 tools/train_models.py "
                         f"--models {name}")
    model = nc_models.build(name)
    model.load_state_dict(torch.load(pt, map_location="cpu"))
    return model.eval()


def check_reference(model, name, root=ROOT):
    """Max |PyTorch − stored logits| on the stored reference input."""
    ref = nc_models.reference_dir(root)
    x = torch.from_numpy(np.load(os.path.join(ref, name + ".input.npy")))
    want = np.load(os.path.join(ref, name + ".logits.npy"))
    with torch.no_grad():
        got = model(x).numpy()
    return float(np.max(np.abs(got - want)))


def check_onnx(paths, name, root=ROOT):
    """Validates the file with onnx.checker; runs it with onnxruntime when
    installed (not on Debian 12) and returns the max error, else None."""
    import onnx
    onnx.checker.check_model(paths[0])  # a path, so external data is resolved
    try:
        import onnxruntime
    except ImportError:
        return None
    ref = nc_models.reference_dir(root)
    x = np.load(os.path.join(ref, name + ".input.npy"))
    want = np.load(os.path.join(ref, name + ".logits.npy"))
    sess = onnxruntime.InferenceSession(paths[0], providers=["CPUExecutionProvider"])
    got = sess.run(["logits"], {"input": x})[0]
    return float(np.max(np.abs(got - want)))


def record_export(name, exporter, paths, root=ROOT):
    """Notes in <name>.json which PyTorch wrote which export (the weights may
    have been trained under another version)."""
    info_path = os.path.join(nc_models.model_dir(name, root), name + ".json")
    if not os.path.exists(info_path):
        return
    with open(info_path) as f:
        info = json.load(f)
    info.setdefault("exports", {})[exporter] = {
        "torch": torch.__version__, "opset": OPSETS[exporter],
        "files": [os.path.basename(p) for p in paths if os.path.exists(p)]}
    with open(info_path, "w") as f:
        json.dump(info, f, indent=2)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--exporter", choices=sorted(EXPORTERS), default="torchscript")
    ap.add_argument("--models", nargs="+", default=nc_models.FIXTURES + [nc_models.BUNDLED],
                    choices=sorted(nc_models.BUILDERS))
    ap.add_argument("--root", default=ROOT, help="repository root (default: %(default)s)")
    args = ap.parse_args()
    torch.set_num_threads(2)
    for name in args.models:
        model = load_trained(name, args.root)
        err = check_reference(model, name, args.root)
        if err > 1e-4:
            raise SystemExit(f"{name}: rebuilt module differs from {name}.logits.npy by {err:.3g}")
        paths = export_model(model, name, args.exporter, args.root)
        ort_err = check_onnx(paths, name, args.root)
        record_export(name, args.exporter, paths, args.root)
        sizes = ", ".join(f"{os.path.relpath(p, args.root)} {os.path.getsize(p)} B"
                          for p in paths if os.path.exists(p))
        ort = "not checked (no onnxruntime)" if ort_err is None else f"max error {ort_err:.3g}"
        print(f"{name}: {args.exporter} opset {OPSETS[args.exporter]}: {sizes}; onnxruntime {ort}")


if __name__ == "__main__":
    main()
