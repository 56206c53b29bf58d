#!/bin/bash
# test_valgrind.sh — valgrind's memcheck on the CLI end to end: a few small
# commands (info, eval, convert, run with a recording, export-nir, and reading
# back what they wrote) must show no invalid access and no definite leak.
# Leaks inside system libraries are suppressed by tests/valgrind.supp.  TAP.
#   bash tests/test_valgrind.sh path/to/neurocuda
# Skipped without valgrind, and for a sanitizer build (ASan and valgrind do
# not run together).
set -u
cli=${1:?usage: test_valgrind.sh NEUROCUDA}
src=${NC_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
models=$src/tests/fixtures/models
if ! command -v valgrind >/dev/null; then
  echo "1..0 # SKIP valgrind is not installed (tools/install-deps.sh installs it)"
  exit 0
fi
if ldd "$cli" 2>/dev/null | grep -q 'libasan\|libubsan'; then
  echo "1..0 # SKIP a sanitizer build (valgrind runs on the normal build)"
  exit 0
fi
if [ "${NC_NATIVE_ARCH:-0}" = 1 ]; then
  # valgrind 3.19 cannot decode AVX-512: a -march=native program may die with
  # SIGILL under it.  The default build is portable and runs here.
  echo "1..0 # SKIP built with -Dnative_arch=true (valgrind runs the default, portable build)"
  exit 0
fi
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  echo "1..0 # SKIP no Fashion-MNIST (Debian's dataset-fashion-mnist)"
  exit 0
fi
export OPENBLAS_NUM_THREADS=1
work=$(mktemp -d /tmp/nc-test-valgrind-XXXXXX)
trap 'rm -rf "$work"' EXIT
n=0
failed=0

# memcheck NAME ARGS...: runs `neurocuda ARGS` under memcheck; exit status 1
# from valgrind means errors or definite leaks (the command's own failures
# use other codes, and are reported too).
memcheck() {
  local name=$1
  shift
  n=$((n + 1))
  local t0; t0=$(date +%s)
  valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
    --show-leak-kinds=definite --suppressions="$src/tests/valgrind.supp" --num-callers=30 \
    "$cli" "$@" >"$work/out.txt" 2>"$work/err.txt"
  local rc=$?
  if [ $rc = 0 ]; then
    echo "ok $n - $name ($(($(date +%s) - t0)) s)"
  else
    failed=1
    echo "not ok $n - $name: exit status $rc (99: memcheck found errors or leaks)"
    sed 's/^/# /' "$work/err.txt" | head -n 80
  fi
}

memcheck "info (ONNX)" info "$models/cnn_maxpool.onnx"
memcheck "eval --limit 200" eval "$models/mlp.onnx" --limit 200
memcheck "convert (small)" convert "$models/mlp.onnx" -o "$work/mlp.ncsnn" --limit 20 --calib-images 64
memcheck "run -T 4 with a recording" run "$work/mlp.ncsnn" -T 4 --limit 8 --batch 4 --record "$work/rec.h5"
memcheck "export-nir" export-nir "$work/mlp.ncsnn" -o "$work/mlp.nir"
memcheck "info (project)" info "$work/mlp.ncsnn"
memcheck "info (the exported NIR graph)" info "$work/mlp.nir"
memcheck "info (the recording)" info "$work/rec.h5"
echo "1..$n"
exit $failed
