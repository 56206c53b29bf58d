#!/usr/bin/python3
"""train_models.py — trains NeuroCUDA's Fashion-MNIST models and exports them
to ONNX with the TorchScript exporter (opset 13).

For each model it writes, next to each other:
  <name>.pt           the trained state_dict (export_onnx.py re-exports from it)
  <name>.onnx         TorchScript export, input "input" [N,1,28,28], output "logits"
  <name>.json         test accuracy, preprocessing, exporter, opset, seed, epochs
and, in tests/fixtures/models, the reference pair the C tests compare with:
  <name>.input.npy    the first 16 test images, preprocessed, float32 [16,1,28,28]
  <name>.logits.npy   PyTorch's eval-mode logits for them, float32 [16,10]
The four fixture nets go to tests/fixtures/models, the bundled fmnist_cnn to
assets/models (its reference pair still to tests/fixtures/models).

Preprocessing: x/255, then (x − 0.2860)/0.3530.  Adam with a cosine learning
rate, batch 128, 2 CPU threads; the whole run takes ~15–25 minutes on 2 cores.

Usage (from the repository root; Debian's python3-torch is /usr/bin/python3):
  /usr/bin/python3 tools/train_models.py                  # every model
  /usr/bin/python3 tools/train_models.py --models mlp --epochs mlp=2
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_onnx  # noqa: E402
import nc_models  # noqa: E402

# Epochs chosen so that every net trains in a few CPU minutes; the bundled
# model gets the most, since it must reach ≥ 0.90 test accuracy.
EPOCHS = {"mlp": 5, "cnn_maxpool": 5, "vgg_bn": 3, "resnet": 3, "fmnist_cnn": 8}
LEARNING_RATE = 1e-3
BATCH = 128
N_REFERENCE = 16


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def evaluate(model, x, y, batch=1000):
    """Test accuracy in eval mode (BN running statistics, no dropout)."""
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            xb = x[i:i + batch].contiguous(memory_format=torch.channels_last)
            correct += int((model(xb).argmax(1) == y[i:i + batch]).sum())
    return correct / len(x)


def fit(model, x, y, epochs, seed, name, lr=LEARNING_RATE):
    """Adam with a cosine learning rate over all steps, batches in a seeded
    random order; logs each epoch's mean loss."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    steps = epochs * math.ceil(len(x) / BATCH)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    gen = torch.Generator().manual_seed(seed)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(epochs):
        model.train()
        t0, total = time.time(), 0.0
        order = torch.randperm(len(x), generator=gen)
        for i in range(0, len(x), BATCH):
            idx = order[i:i + BATCH]
            opt.zero_grad()
            loss = loss_fn(model(x[idx].contiguous(memory_format=torch.channels_last)), y[idx])
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item() * len(idx)
        log(f"{name}: epoch {epoch + 1}/{epochs} loss {total / len(x):.4f} ({time.time() - t0:.0f} s)")


def train(name, data, epochs, seed, limit=0):
    """Trains a fresh module; returns it (eval mode, contiguous weights)."""
    torch.manual_seed(seed)
    x, y = data["train"]
    if limit:
        x, y = x[:limit], y[:limit]
    model = nc_models.build(name).to(memory_format=torch.channels_last)  # faster convs on CPU
    fit(model, x, y, epochs, seed, name)
    # Rebuild from the state_dict exactly as export_onnx.py will, so the
    # exported module and the reference logits come from the same code path.
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    fresh = nc_models.build(name)
    fresh.load_state_dict(state)
    return fresh.eval()


def save_reference(model, name, data, root):
    """The first 16 test images (preprocessed) and PyTorch's logits for them."""
    ref = nc_models.reference_dir(root)
    os.makedirs(ref, exist_ok=True)
    x = data["test"][0][:N_REFERENCE].contiguous()
    with torch.no_grad():
        logits = model(x)
    np.save(os.path.join(ref, name + ".input.npy"), x.numpy().astype(np.float32))
    np.save(os.path.join(ref, name + ".logits.npy"), logits.numpy().astype(np.float32))


def save_model(model, name, info, root):
    folder = nc_models.model_dir(name, root)
    os.makedirs(folder, exist_ok=True)
    torch.save(model.state_dict(), os.path.join(folder, name + ".pt"))
    with open(os.path.join(folder, name + ".json"), "w") as f:
        json.dump(info, f, indent=2)
        f.write("\n")
    paths = export_onnx.export_model(model, name, "torchscript", root)
    export_onnx.record_export(name, "torchscript", paths, root)
    return paths[0]


def run_one(name, data, args):
    t0 = time.time()
    epochs = args.epochs.get(name, EPOCHS[name])
    model = train(name, data, epochs, args.seed, args.limit)
    acc = evaluate(model, *data["test"])
    info = {"model": name, "test_accuracy": round(acc, 4), "mean": nc_models.MEAN, "std": nc_models.STD,
            "scale": nc_models.SCALE, "exporter": "torchscript",
            "opset": export_onnx.OPSETS["torchscript"], "input": "input", "output": "logits",
            "input_shape": ["N", 1, 28, 28], "epochs": epochs, "batch": BATCH, "optimizer": "Adam",
            "learning_rate": LEARNING_RATE, "schedule": "cosine", "seed": args.seed, "threads": args.threads,
            "train_images": len(data["train"][0]) if not args.limit else args.limit,
            "test_images": len(data["test"][0]), "torch": torch.__version__,
            "train_seconds": round(time.time() - t0)}
    save_reference(model, name, data, args.root)
    onnx_path = save_model(model, name, info, args.root)
    log(f"{name}: test accuracy {acc:.4f}; {os.path.relpath(onnx_path, args.root)} "
        f"{os.path.getsize(onnx_path)} B ({time.time() - t0:.0f} s)")


def parse_epochs(items):
    out = {}
    for item in items:
        name, _, n = item.partition("=")
        if name not in EPOCHS or not n.isdigit():
            raise SystemExit(f"--epochs {item}: expected NAME=N with NAME one of {', '.join(EPOCHS)}")
        out[name] = int(n)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=nc_models.FIXTURES + [nc_models.BUNDLED],
                    choices=sorted(nc_models.BUILDERS))
    ap.add_argument("--epochs", nargs="*", default=[], metavar="NAME=N", help="override epochs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0, help="train on the first N images (smoke test)")
    ap.add_argument("--data", default=nc_models.FASHION_MNIST_DIR, help="folder of the IDX files")
    ap.add_argument("--root", default=export_onnx.ROOT, help="repository root (default: %(default)s)")
    args = ap.parse_args()
    args.epochs = parse_epochs(args.epochs)
    torch.set_num_threads(args.threads)
    data = {}
    for split in ("train", "test"):
        images, labels = nc_models.load_fashion_mnist(split, args.data)
        data[split] = (nc_models.preprocess(images), torch.from_numpy(labels))
    log(f"torch {torch.__version__}, {args.threads} threads, seed {args.seed}; "
        f"{len(data['train'][0])} train / {len(data['test'][0])} test images")
    for name in args.models:
        run_one(name, data, args)
    log("done")


if __name__ == "__main__":
    main()
