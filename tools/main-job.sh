#!/bin/bash
# Installs what is missing, builds, and runs the main job on the bundled
# Fashion-MNIST model: with a display, the workbench; without one, the same
# job headless with the CLI, writing its plots as PNG into ./out/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
bash tools/build.sh

model=assets/models/fmnist_cnn.onnx
prep=(--mean 0.2860 --std 0.3530)
bin=build/app/neurocuda
mkdir -p out

if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && [ -x build/app/neurocuda-workbench ]; then
  exec build/app/neurocuda-workbench "$model"
fi

echo "== neurocuda info $model"
"$bin" info "$model"
echo
echo "== neurocuda eval $model (Fashion-MNIST test set, 10 000 images)"
"$bin" eval "$model" --data fashion-mnist "${prep[@]}"
