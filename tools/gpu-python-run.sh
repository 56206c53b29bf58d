#!/usr/bin/env bash
# gpu-python-run.sh — on the GPU machine: the Python package over the GPU
# bundle's libneurocuda (tests/python/gpu_three_calls.py: the three calls of
# docs/PYTHON.md on the GPU engine, with the machine's own PyTorch).
# Here: NC_BUILDDIR=build bash tools/gpu-bundle.sh (packs libneurocuda too);
# device run `bash tools/gpu-python-run.sh` with carry [".gpu"].
set -uo pipefail
OUT=${OUT:-/tmp/nc-out}
mkdir -p "$OUT" /tmp/nc
tar xJf .gpu/nc.tar.xz -C /tmp/nc || exit 1
export LD_LIBRARY_PATH=/tmp/nc/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NEUROCUDA_LIB=/tmp/nc/bin/libneurocuda.so.1.0.0 NC_SOURCE_DIR=$(pwd) NC_FMNIST_DIR=/tmp/nc/data/fmnist
work=$(mktemp -d) && cd "$work" || exit 1
timeout 400 python3 "$NC_SOURCE_DIR/tests/python/gpu_three_calls.py" 2>&1 | tee "$OUT/gpu_three_calls.txt"
