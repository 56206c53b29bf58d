#!/bin/bash
# Installs what is missing, builds, installs the Python package into
# build/python-env (tools/install-python.sh), and runs the whole test suite twice: in
# the normal build (./build) and in an AddressSanitizer + UBSan build
# (./build-asan).  The normal build also runs the CLI end-to-end commands
# under valgrind's memcheck (tests/test_valgrind.sh).
# The last line printed is `N passed, N failed, N skipped` (TAP sub-tests of
# BOTH builds, summed).
#   tools/test.sh                 both builds (what CI runs)
#   tools/test.sh --no-sanitize   the normal build only (quicker, for developers)
set -uo pipefail
cd "$(dirname "$0")/.."
sanitize=1
for arg in "$@"; do
  case $arg in
    --no-sanitize) sanitize=0 ;;
    --sanitize) sanitize=1 ;;   # the default; kept for old scripts
    *) echo "usage: tools/test.sh [--no-sanitize]" >&2; echo "0 passed, 1 failed"; exit 2 ;;
  esac
done
# A failed set-up still ends with the summary line CI reads.
# python3-torch too: the Python package's tests train a small torch network
# (NC_WITH_TORCH=0 leaves it out; those tests then skip, saying why).
NC_WITH_TORCH=${NC_WITH_TORCH:-1} bash tools/install-deps.sh ||
  { echo "install-deps failed"; echo "0 passed, 1 failed"; exit 1; }
bash tools/build.sh || { echo "build failed"; echo "0 passed, 1 failed"; exit 1; }
# The Python package, installed as a user would (pip install
# --no-build-isolation ., offline) into build/python-env; the Python tests
# (test_python) import it from there, not from python/.
bash tools/install-python.sh build || { echo "installing the Python package failed"; echo "0 passed, 1 failed"; exit 1; }

export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
start=$(date +%s)
meson test -C build --print-errorlogs --num-processes 2 >build/test-output.txt 2>&1
status=$?
tail -n 25 build/test-output.txt
echo "normal build: $(($(date +%s) - start)) s"
logs=(build/meson-logs/testlog.json)

if [ $sanitize = 1 ]; then
  start=$(date +%s)
  # -O1 keeps the sanitizer build fast enough for CI; no CUDA (ASan and the
  # CUDA runtime do not mix).
  if [ ! -f build-asan/build.ninja ]; then
    meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled \
      -Ddebug=true -Doptimization=1 >/dev/null || echo "sanitizer build: meson setup failed"
  fi
  mkdir -p build-asan
  rm -f build-asan/meson-logs/testlog.json
  if ninja -C build-asan >build-asan/build-output.txt 2>&1; then
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=0 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      meson test -C build-asan --print-errorlogs --num-processes 2 >build-asan/test-output.txt 2>&1
    asan_status=$?
    tail -n 15 build-asan/test-output.txt
  else
    tail -n 20 build-asan/build-output.txt
    echo "sanitizer build failed"
    asan_status=1
  fi
  echo "sanitizer build: $(($(date +%s) - start)) s"
  logs+=(build-asan/meson-logs/testlog.json)   # missing = counted as a failure
  [ $asan_status -ne 0 ] && status=$asan_status
fi
python3 tools/count_tests.py "${logs[@]}"
count_status=$?
[ $status -ne 0 ] && exit $status
exit $count_status
