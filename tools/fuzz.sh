#!/bin/bash
# Builds the libFuzzer targets of tests/fuzz/ with clang (ASan + UBSan +
# libFuzzer) in their own build folder and runs each for a given time.
# Every crasher, leak, timeout or out-of-memory input found is copied into
# tests/fuzz/regressions/<target>/, where the normal test suite
# (fuzz_regress_<target>) replays it from then on.
#
#   tools/fuzz.sh [-t SECONDS] [-j JOBS] [TARGET...]
#     -t SECONDS   run time per target (default 600)
#     -j JOBS      targets fuzzed at the same time (default 1; each uses one core)
#     TARGET       onnx nir project record idx npy h5data cli (default: all)
#
# Developer tool: needs clang-14 and libclang-rt-14-dev (Debian), not part of
# tools/install-deps.sh.  Build folder: $NC_FUZZ_BUILDDIR (default build-fuzz);
# the growing corpus and raw findings stay in <build>/fuzz-work/<target>/.
# One summary line per target goes to stdout and <build>/fuzz-work/summary.txt.
set -uo pipefail
cd "$(dirname "$0")/.."

seconds=600
jobs=1
while getopts "t:j:h" opt; do
  case $opt in
    t) seconds=$OPTARG ;;
    j) jobs=$OPTARG ;;
    *) sed -n '2,17p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
all=(onnx nir project record idx npy h5data cli)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all[@]}")
for t in "${targets[@]}"; do
  [ -f "tests/fuzz/fuzz_$t.c" ] || { echo "fuzz.sh: unknown target '$t' (${all[*]})" >&2; exit 2; }
done

builddir=$(realpath -m "${NC_FUZZ_BUILDDIR:-build-fuzz}")
if ! command -v clang >/dev/null; then
  echo "fuzz.sh: clang not found; apt-get install clang-14 libclang-rt-14-dev" >&2
  exit 1
fi
if [ ! -f "$builddir/build.ninja" ]; then
  CC=clang meson setup "$builddir" -Dfuzzing=true -Db_sanitize=address,undefined -Db_lundef=false \
    -Dc_args=-fsanitize=fuzzer-no-link -Dgui=disabled -Dcuda=disabled -Dbuildtype=debugoptimized >/dev/null ||
    exit 1
fi
built=()
for t in "${targets[@]}"; do
  if ninja -C "$builddir" -j2 "tests/fuzz/fuzz_$t" >"$builddir/fuzz-build-$t.log" 2>&1; then
    built+=("$t")
  else
    echo "fuzz.sh: fuzz_$t does not build (see $builddir/fuzz-build-$t.log); skipped" >&2
  fi
done
[ ${#built[@]} -eq 0 ] && exit 1
targets=("${built[@]}")

dict_of() {
  case $1 in
    onnx) echo $PWD/tests/fuzz/dict/onnx.dict ;;
    nir|project|record|h5data) echo $PWD/tests/fuzz/dict/hdf5.dict ;;
    npy) echo $PWD/tests/fuzz/dict/npy.dict ;;
    cli) echo $PWD/tests/fuzz/dict/cli.dict ;;
  esac
}

# Runs one target; prints its summary line.  libFuzzer stops at the first
# finding, so it is started again (on the grown corpus) until the time is
# spent; each finding is an artifact file.
fuzz_one() {
  local t=$1 work="$builddir/fuzz-work/$1"
  mkdir -p "$work/corpus" "$work/artifacts" "tests/fuzz/regressions/$t"
  rm -f "$work/artifacts"/* "$work/log.txt"   # kept ones are in tests/fuzz/regressions already
  local dict; dict=$(dict_of "$t")
  local args=(-timeout=25 -rss_limit_mb=2048 -malloc_limit_mb=2048 -artifact_prefix="$work/artifacts/"
              -print_final_stats=1)
  [ -n "$dict" ] && args+=(-dict="$dict")
  local start end left execs=0 runs=0 n
  start=$(date +%s)
  end=$((start + seconds))
  while left=$((end - $(date +%s))); [ "$left" -gt 2 ] && [ "$runs" -lt 50 ]; do
    runs=$((runs + 1))
    echo "=== run $runs, $left s left" >>"$work/log.txt"
    ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
    LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
      "$builddir/tests/fuzz/fuzz_$t" "${args[@]}" -max_total_time="$left" \
        "$work/corpus" "$PWD/tests/fuzz/corpus/$t" >"$work/run.txt" 2>&1
    cat "$work/run.txt" >>"$work/log.txt"
    n=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$work/run.txt" | tail -n 1)
    execs=$((execs + ${n:-0}))
  done
  local kept=0 found=0
  for f in "$work/artifacts"/*; do
    [ -f "$f" ] || continue
    found=$((found + 1))
    cp -n "$f" "tests/fuzz/regressions/$t/$(basename "$f")" && kept=$((kept + 1))
  done
  local corpus; corpus=$(find "$work/corpus" -type f | wc -l)
  local summary="$t: $execs executions in ${seconds}s ($runs run(s)), corpus $corpus, $found finding(s), $kept new file(s) in tests/fuzz/regressions/$t"
  echo "$summary" | tee -a "$builddir/fuzz-work/summary.txt"
}

mkdir -p "$builddir/fuzz-work"
running=0
for t in "${targets[@]}"; do
  fuzz_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
done
wait
