#!/usr/bin/env bash
# gpu-bundle.sh — builds the GPU programs here and packs them for the GPU
# machine into .gpu/nc.tar.xz (git-ignored: pass ".gpu" in the device run's
# carry list), then tools/gpu-run.sh runs them there.
#
#   tools/gpu-bundle.sh            build dir ./build-gpu (NC_BUILDDIR overrides)
#
# Packed (with the shared libraries they need that the GPU image may lack;
# the CUDA runtime and cuBLAS are NOT packed — the GPU machine has CUDA 13):
#   bin/neurocuda, bin/test_gpu_kernels, bin/test_gpu_engine
#   data/fmnist/   the first 2048 Fashion-MNIST test images (also as the
#                  "train" split), for `neurocuda bench MODEL.onnx --data`
#   data/fmnist10k/ all 10 000 test images (accuracy by step)
# Only those targets are built, so that work in progress elsewhere in the
# tree cannot stop the bundle.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
builddir=${NC_BUILDDIR:-build-gpu}
bundler=${NC_GPU_BUNDLER:-$root/../shared/tools/gpu-bundle}
[ -x "$bundler" ] || bundler=/work/shared/tools/gpu-bundle
[ -f "$bundler" ] || { echo "gpu-bundle.sh: no gpu-bundle tool at $bundler" >&2; exit 1; }

if [ ! -f "$builddir/build.ninja" ]; then
  meson setup "$builddir" -Dcuda=enabled
fi
grep -q '#define NC_HAVE_CUDA 1' "$builddir/nc_config.h" || {
  echo "gpu-bundle.sh: $builddir was configured without CUDA (meson configure $builddir -Dcuda=enabled)" >&2
  exit 1
}
targets=(app/neurocuda tests/test_gpu_kernels tests/test_gpu_engine)
# the GPU trainer's test, once it exists in this build
[ -f tests/test_gpu_train.c ] && targets+=(tests/test_gpu_train)
[ -f tests/test_gpu_train_graphs.c ] && targets+=(tests/test_gpu_train_graphs)
[ -f tests/test_gpu_faults.c ] && targets+=(tests/test_gpu_faults)
# several GPUs (tools/gpu-multi-run.sh): CPU ranks, and GPU ranks where there are GPUs
[ -f tests/test_multi_rank.c ] && targets+=(tests/test_multi_rank)
# the C library of the Python package (tools/gpu-python-run.sh)
[ -f lib/neurocuda.h ] && targets+=(lib/libneurocuda.so.1.0.0)
# NC_BUNDLE_PROGRAMS="app/neurocuda": only these targets (a lean bundle that leaves room in the
# 64 MiB carry for the full training set, tools/gpu-recipe-run.sh)
# shellcheck disable=SC2206 # a space-separated list on purpose
[ -n "${NC_BUNDLE_PROGRAMS:-}" ] && targets=($NC_BUNDLE_PROGRAMS)
ninja -C "$builddir" "${targets[@]}"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p .gpu "$stage/data/fmnist" "$stage/data/fmnist10k"
# Fashion-MNIST in IDX form (the test images double as the train split):
# data/fmnist the first 2048 test images (benchmarks, quick accuracy checks),
# data/fmnist10k all 10 000 (accuracy by step of every engine and precision)
python3 - "$stage/data" <<'EOF'
import gzip, os, struct, sys
src = "/usr/share/datasets/fashion-mnist"
def sub(kind, dst, n):
    name = f"t10k-{kind}-idx{3 if kind == 'images' else 1}-ubyte.gz"
    path = os.path.join(src, name)
    if not os.path.exists(path):
        return False
    data = gzip.open(path).read()
    magic, count = struct.unpack(">II", data[:8])
    n = min(n, count)
    if kind == "images":
        rows, cols = struct.unpack(">II", data[8:16])
        body = data[16:16 + n * rows * cols]
        head = struct.pack(">IIII", magic, n, rows, cols)
    else:
        body = data[8:8 + n]
        head = struct.pack(">II", magic, n)
    for split in ("t10k", "train"):
        out = os.path.join(dst, name.replace("t10k", split))
        with gzip.open(out, "wb") as f:
            f.write(head + body)
    return True
ok = all(sub(kind, os.path.join(sys.argv[1], d), n)
         for d, n in (("fmnist", 2048), ("fmnist10k", 10000)) for kind in ("images", "labels"))
print("fashion-mnist:", "yes" if ok else "no (dataset-fashion-mnist not installed)")
EOF

# the bundler's archive is unpacked again below (NCCL's 200 MB leave it): compress it fast
# (outside .gpu/: a device run that starts meanwhile carries the previous bundle, whole)
XZ_OPT="-0 -T0" bash "$bundler" "$stage/programs.tar.xz" "${targets[@]/#/$builddir/}"
# add the data to the archive (the bundler packs bin/ and lib/)
tmp=$(mktemp -d)
tar xJf "$stage/programs.tar.xz" -C "$tmp"
# NC_BUNDLE_DATA=0: no images (a call that carries the full .fmnist instead
# and must stay under the 64 MiB carry limit)
[ "${NC_BUNDLE_DATA:-1}" = 1 ] && cp -r "$stage/data" "$tmp/"
rm -f "$tmp"/lib/libnccl.so* # 200 MB, and the GPU machine has it (tools/gpu-env.sh finds it)
# NC_BUNDLE_LEAN=1: the programs without debug information, and without OpenSSL's two
# libraries (the GPU image's Python loads them, so it has them): with NC_BUNDLE_PROGRAMS
# this leaves room in the 64 MiB carry for the full Fashion-MNIST training set
if [ "${NC_BUNDLE_LEAN:-0}" = 1 ]; then
  strip --strip-debug "$tmp"/bin/*
  rm -f "$tmp"/lib/libcrypto.so.3 "$tmp"/lib/libssl.so.3
fi
# written beside the build (git-ignored, never carried), then renamed into .gpu/ whole
XZ_OPT="-6 -T0" tar cJf "$builddir/nc.tar.xz.tmp" -C "$tmp" bin lib $([ -d "$tmp/data" ] && echo data)
mv -f "$builddir/nc.tar.xz.tmp" .gpu/nc.tar.xz
rm -rf "$tmp"
echo "$(du -h .gpu/nc.tar.xz | cut -f1) .gpu/nc.tar.xz: $(tar tJf .gpu/nc.tar.xz | grep -c '^bin/.') programs$(
  [ "${NC_BUNDLE_DATA:-1}" = 1 ] && echo ", data/fmnist, data/fmnist10k")"
