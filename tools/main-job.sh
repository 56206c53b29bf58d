#!/bin/bash
# Installs what is missing, builds, and runs the main job on the bundled
# Fashion-MNIST model: with a display, the workbench; without one, the same
# job headless with the CLI — inspect, evaluate, convert, simulate, compare
# threshold choices, fine-tune with BPTT (a short run on 6 000 training
# images) — writing its charts as PNG files into ./out/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
bash tools/build.sh

model=assets/models/fmnist_cnn.onnx
prep=(--data fashion-mnist --mean 0.2860 --std 0.3530)
bin=build/app/neurocuda
out=out
mkdir -p "$out"

if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && [ -x build/app/neurocuda-workbench ]; then
  echo "Opening the workbench on $model (Fashion-MNIST)"
  exec build/app/neurocuda-workbench "$model"
fi

echo "No display: running the workbench's job with the CLI; charts go to $out/"
step() { echo; echo "== $*"; "$@"; }
step "$bin" info "$model"
step "$bin" eval "$model" "${prep[@]}"
step "$bin" convert "$model" "${prep[@]}" --threshold p99.9 -o "$out/fmnist_cnn.ncsnn"
step "$bin" run "$out/fmnist_cnn.ncsnn" -T 32 --limit 2000 --record "$out/fmnist_cnn_T32.h5" --plots "$out"
step "$bin" sweep "$model" "${prep[@]}" --threshold p99.9,p99.99,mmse -T 32 --limit 1000 \
  --png "$out/threshold_sweep.png"
step "$bin" convert "$model" "${prep[@]}" --threshold p99.9 --finetune-bptt 1 --train-T 8 --train-horizons 4,8 \
  --train-images 6000 --val-images 2000 --limit 2000 --eval-T 16 -o "$out/fmnist_cnn_bptt.ncsnn"
echo
echo "Done. Charts: $(ls "$out"/*.png | tr '\n' ' ')"
echo "Recording (HDF5, readable with h5py): $out/fmnist_cnn_T32.h5; projects: $out/fmnist_cnn.ncsnn," \
  "$out/fmnist_cnn_bptt.ncsnn (fine-tuned)"
