#!/usr/bin/env bash
# gpu-env.sh — on the GPU machine, from the repository root: unpacks the
# bundle that tools/gpu-bundle.sh made (.gpu/nc.tar.xz, carried) into /tmp/nc
# and exports what the programs need, so that a device command can be
#
#   source tools/gpu-env.sh && "$B/test_gpu_train" > "$OUT/train.log" 2>&1; ...
#
# Exports: B (the programs), NC_SOURCE_DIR (fixtures), FMNIST (the carried
# Fashion-MNIST folder .fmnist, when present), LD_LIBRARY_PATH.
OUT=${OUT:-/tmp/nc-out}
mkdir -p "$OUT"
if [ ! -f .gpu/nc.tar.xz ]; then
  echo "gpu-env.sh: no .gpu/nc.tar.xz (run tools/gpu-bundle.sh, and carry .gpu)" >&2
  return 1 2>/dev/null || exit 1
fi
rm -rf /tmp/nc && mkdir -p /tmp/nc && tar xJf .gpu/nc.tar.xz -C /tmp/nc
export B=/tmp/nc/bin
export LD_LIBRARY_PATH=/tmp/nc/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NC_SOURCE_DIR=$(pwd)
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-16}
[ -d .fmnist ] && export FMNIST=$(pwd)/.fmnist
# A carried .fmnist may hold xz-compressed IDX files (the training images are 26 MB as .gz,
# 23 MB as .xz: what lets them fit beside a bundle): unpacked into /tmp/fmnist.
if ls .fmnist/*.xz >/dev/null 2>&1; then
  rm -rf /tmp/fmnist && mkdir -p /tmp/fmnist
  for f in .fmnist/*; do
    case $f in
      *.xz) xz -dc "$f" > "/tmp/fmnist/$(basename "$f" .xz)" ;;
      *) cp "$f" /tmp/fmnist/ ;;
    esac
  done
  export FMNIST=/tmp/fmnist
fi
# Libraries the bundle leaves to the machine: the CUDA runtime and cuBLAS (from
# PyTorch's wheels where the system has none) and NCCL (libnccl.so.2, 200 MB,
# from the system or PyTorch's nvidia-nccl wheel).
# A lean bundle (tools/gpu-bundle.sh, NC_BUNDLE_LEAN=1) also leaves OpenSSL's libraries to it.
for lib in libcublas.so.13 libcudart.so.13 libnccl.so.2 libcrypto.so.3 libssl.so.3; do
  if ldd "$B/neurocuda" | grep -q "$lib.*not found"; then
    d=$(find / -xdev -name "$lib" -printf '%h\n' 2>/dev/null | head -1)
    [ -n "$d" ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d
  fi
done
ldd "$B/neurocuda" | grep 'not found' && echo "gpu-env.sh: WARNING: missing libraries" >&2
true
