#!/bin/bash
# Installs what is missing, builds, and runs the whole test suite.
# The last line printed is `N passed, N failed, N skipped` (TAP sub-tests).
#   tools/test.sh              the normal build (./build)
#   tools/test.sh --sanitize   also an AddressSanitizer + UBSan build (./build-asan)
set -uo pipefail
cd "$(dirname "$0")/.."
# A failed set-up still ends with the summary line CI reads.
bash tools/install-deps.sh || { echo "install-deps failed"; echo "0 passed, 1 failed"; exit 1; }
bash tools/build.sh || { echo "build failed"; echo "0 passed, 1 failed"; exit 1; }

export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
meson test -C build --print-errorlogs --num-processes 2 >build/test-output.txt 2>&1
status=$?
tail -n 25 build/test-output.txt
if [ "${1:-}" = --sanitize ]; then
  if [ ! -f build-asan/build.ninja ]; then
    meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled -Dbuildtype=debug >/dev/null || exit 1
  fi
  ninja -C build-asan >/dev/null || exit 1
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    meson test -C build-asan --print-errorlogs --num-processes 2 >build-asan/test-output.txt 2>&1
  asan_status=$?
  tail -n 15 build-asan/test-output.txt
  echo "sanitizer build:"
  python3 tools/count_tests.py build-asan/meson-logs/testlog.json | tail -n 1
  [ $asan_status -ne 0 ] && status=$asan_status
fi
python3 tools/count_tests.py build/meson-logs/testlog.json
count_status=$?
[ $status -ne 0 ] && exit $status
exit $count_status
