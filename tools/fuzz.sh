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

builddir=${NC_FUZZ_BUILDDIR:-build-fuzz}
if ! command -v clang >/dev/null; then
  echo "fuzz.sh: clang not found; apt-get install clang-14 libclang-rt-14-dev" >&2
  exit 1
fi
if [ ! -f "$builddir/build.ninja" ]; then
  CC=clang meson setup "$builddir" -Dfuzzing=true -Db_sanitize=address,undefined -Db_lundef=false \
    -Dc_args=-fsanitize=fuzzer-no-link -Dgui=disabled -Dcuda=disabled -Dbuildtype=debugoptimized >/dev/null ||
    exit 1
fi
ninja -C "$builddir" -j2 $(printf "tests/fuzz/fuzz_%s " "${targets[@]}") >/dev/null || {
  echo "fuzz.sh: build failed; run: ninja -C $builddir" >&2; exit 1; }

dict_of() {
  case $1 in
    onnx) echo tests/fuzz/dict/onnx.dict ;;
    nir|project|record|h5data) echo tests/fuzz/dict/hdf5.dict ;;
    npy) echo tests/fuzz/dict/npy.dict ;;
    cli) echo tests/fuzz/dict/cli.dict ;;
  esac
}

# Runs one target; prints its summary line.
fuzz_one() {
  local t=$1 work="$builddir/fuzz-work/$1"
  mkdir -p "$work/corpus" "$work/artifacts" "tests/fuzz/regressions/$t"
  local dict; dict=$(dict_of "$t")
  local args=(-max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 -malloc_limit_mb=512
              -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1
              -artifact_prefix="$PWD/$work/artifacts/" -print_final_stats=1)
  [ -n "$dict" ] && args+=(-dict="$dict")
  # each input is a file name of a temporary folder: keep it off the disk
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1:abort_on_error=0 \
  LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "$builddir/tests/fuzz/fuzz_$t" "${args[@]}" "$work/corpus" "tests/fuzz/corpus/$t" >"$work/log.txt" 2>&1
  # the last status line of the fork-mode parent: "#N: cov: ... oom/timeout/crash: a/b/c time: ..."
  local line execs found
  line=$(grep -E '^#[0-9]+: cov:' "$work/log.txt" | tail -n 1)
  execs=$(sed -E 's/^#([0-9]+):.*/\1/' <<<"$line")
  found=$(sed -nE 's/.*oom\/timeout\/crash: ([0-9]+\/[0-9]+\/[0-9]+).*/\1/p' <<<"$line")
  local kept=0
  for f in "$work/artifacts"/*; do
    [ -f "$f" ] || continue
    local name; name=$(basename "$f")
    cp -n "$f" "tests/fuzz/regressions/$t/$name" && kept=$((kept + 1))
  done
  local corpus; corpus=$(find "$work/corpus" -type f | wc -l)
  local summary="$t: ${execs:-0} executions in ${seconds}s, corpus $corpus, oom/timeout/crash ${found:-?}, $kept new file(s) in tests/fuzz/regressions/$t"
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
