#!/bin/bash
# test_faults.sh — Ctrl-C in the CLI: `neurocuda eval/convert/run/sweep`
# started on real work, then sent SIGINT, must stop within about a batch,
# print an "interrupted" message, exit with status 130, and leave the files
# the command would write exactly as they were.  TAP output.
#   bash tests/test_faults.sh path/to/neurocuda
set -u
cli=${1:?usage: test_faults.sh NEUROCUDA}
src=${NC_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
model=$src/tests/fixtures/models/cnn_maxpool.onnx
work=$(mktemp -d /tmp/nc-test-faults-sh-XXXXXX)
trap 'rm -rf "$work"' EXIT
n=0
failed=0

ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=1; echo "not ok $n - $1"; }
check() { if eval "$2"; then ok "$1"; else not_ok "$1"; fi; }

if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  echo "1..0 # SKIP no Fashion-MNIST (Debian's dataset-fashion-mnist)"
  exit 0
fi

# Starts `neurocuda ARGS...`, waits DELAY seconds, sends SIGINT, and waits
# for the end: sets rc, took (seconds from SIGINT to exit) and err (stderr).
interrupt() {
  local delay=$1
  shift
  "$cli" "$@" >"$work/out.txt" 2>"$work/err.txt" &
  local pid=$!
  sleep "$delay"
  if ! kill -0 "$pid" 2>/dev/null; then
    wait "$pid"
    rc=$?
    took=0
    err=$(cat "$work/err.txt")
    echo "# the command ended before SIGINT (rc $rc): $err"
    return
  fi
  local t0; t0=$(date +%s)
  kill -INT "$pid"
  # a stuck job must not hang the suite: give up after 60 s
  for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  wait "$pid"
  rc=$?
  took=$(($(date +%s) - t0))
  err=$(cat "$work/err.txt")
  echo "# neurocuda $1: rc $rc, stopped ${took}s after SIGINT; stderr: $(tail -n 2 "$work/err.txt" | tr '\n' ' ')"
}

# "The last good file": a file the command would overwrite, with known bytes.
old_file() { printf 'the last good %s\n' "$1" >"$work/$1"; cp "$work/$1" "$work/$1.orig"; }
unchanged() { cmp -s "$work/$1" "$work/$1.orig"; }
no_temp() { ! ls "$work" | grep -q '\.tmp'; }

# ---- eval: nothing to write; stops and says so ----
interrupt 3 eval "$model" --batch 16
check "eval: exit status 130 after Ctrl-C" '[ "$rc" = 130 ]'
check "eval: says it was interrupted" '[[ "$err" == *interrupted* ]]'
check "eval: stops within a few batches (${took}s)" '[ "$took" -le 30 ]'

# ---- convert: the project file keeps its old bytes ----
old_file model.ncsnn
interrupt 3 convert "$model" -o "$work/model.ncsnn"
check "convert: exit status 130 after Ctrl-C" '[ "$rc" = 130 ]'
check "convert: says it was interrupted" '[[ "$err" == *interrupted* ]]'
check "convert: the existing project file is unchanged" 'unchanged model.ncsnn'
check "convert: no temporary file is left" 'no_temp'
check "convert: stops within a few batches (${took}s)" '[ "$took" -le 30 ]'

# ---- run: a real SNN project, and the recording keeps its old bytes ----
if "$cli" convert "$model" -o "$work/snn.ncsnn" --limit 16 --calib-images 64 >/dev/null 2>"$work/err.txt"; then
  old_file rec.h5
  interrupt 2 run "$work/snn.ncsnn" -T 64 --batch 8 --record "$work/rec.h5"
  check "run: exit status 130 after Ctrl-C" '[ "$rc" = 130 ]'
  check "run: says it was interrupted" '[[ "$err" == *interrupted* ]]'
  check "run: the existing recording is unchanged" 'unchanged rec.h5'
  check "run: no temporary file is left" 'no_temp'
  check "run: stops within a few batches (${took}s)" '[ "$took" -le 30 ]'
else
  not_ok "run: making the SNN project failed: $(cat "$work/err.txt")"
fi

# ---- sweep: the chart keeps its old bytes ----
old_file sweep.png
interrupt 3 sweep "$model" --png "$work/sweep.png"
check "sweep: exit status 130 after Ctrl-C" '[ "$rc" = 130 ]'
check "sweep: says it was interrupted" '[[ "$err" == *interrupted* ]]'
check "sweep: the existing chart is unchanged" 'unchanged sweep.png'
check "sweep: stops within a few batches (${took}s)" '[ "$took" -le 30 ]'

# ---- a second Ctrl-C leaves at once ----
"$cli" convert "$model" -o "$work/model.ncsnn" >/dev/null 2>"$work/err.txt" &
pid=$!
sleep 3
kill -INT "$pid" 2>/dev/null
sleep 0.2
kill -INT "$pid" 2>/dev/null
wait "$pid"
rc=$?
check "convert: a second Ctrl-C exits with 130 at once" '[ "$rc" = 130 ]'
check "convert: still the old project file after two Ctrl-C" 'unchanged model.ncsnn'

echo "1..$n"
exit $failed
