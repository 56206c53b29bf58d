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

# True once process PID catches SIGINT (bit 2 of SigCgt in /proc/PID/status):
# from then on a Ctrl-C is the CLI's to handle, not the default action.
catches_sigint() {
  local mask
  mask=$(awk '/^SigCgt:/ {print $2}' "/proc/$1/status" 2>/dev/null) || return 1
  [ -n "$mask" ] && (( (16#$mask & 2) != 0 ))
}

# Starts `neurocuda ARGS...`, waits DELAY seconds, sends SIGINT, and waits
# for the end: sets rc, took (seconds from SIGINT to exit) and err (stderr).
# A fast machine may finish the whole job before DELAY: then the job is
# started again with a third of the delay (down to "as soon as the CLI
# catches SIGINT"), so the test checks an interrupted job on any machine.
interrupt() {
  local delay=$1
  shift
  local attempt
  for attempt in 1 2 3 4; do
    restore_old_files
    interrupt_once "$delay" "$@" && return
    delay=$(awk -v d="$delay" 'BEGIN { printf "%.2f", d / 3 }')
    [ "$attempt" = 3 ] && delay=0
    echo "# retrying with SIGINT after ${delay}s"
  done
}

# One attempt; returns 1 when the job ended by itself before SIGINT.
interrupt_once() {
  local delay=$1
  shift
  "$cli" "$@" >"$work/out.txt" 2>"$work/err.txt" &
  local pid=$!
  for _ in $(seq 300); do catches_sigint "$pid" && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.01; done
  sleep "$delay"
  if ! kill -0 "$pid" 2>/dev/null; then
    wait "$pid"
    rc=$?
    took=0
    err=$(cat "$work/err.txt")
    echo "# the command ended before SIGINT (rc $rc): $(tail -n 1 "$work/err.txt")"
    return 1
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
  # exit 0 with no "interrupted": the job had done its work and was on its way
  # out when the signal came (nothing left to stop) — the same as ending first
  if [ "$rc" = 0 ] && [[ "$err" != *interrupted* ]]; then
    echo "# the command had finished its work before SIGINT"
    return 1
  fi
}

# "The last good file": a file the command would overwrite, with known bytes.
# A job that ran to the end before SIGINT overwrote it: restore_old_files puts
# the old bytes back before each attempt.
old_files=""
old_file() {
  printf 'the last good %s\n' "$1" >"$work/$1"
  cp "$work/$1" "$work/$1.orig"
  old_files="$old_files $1"
}
restore_old_files() { local f; for f in $old_files; do cp "$work/$f.orig" "$work/$f"; done; }
unchanged() { cmp -s "$work/$1" "$work/$1.orig"; }
no_temp() { ! ls "$work" | grep -q '\.tmp'; }

# ---- eval: nothing to write; stops and says so ----
interrupt 1 eval "$model" --batch 16
check "eval: exit status 130 after Ctrl-C" '[ "$rc" = 130 ]'
check "eval: says it was interrupted" '[[ "$err" == *interrupted* ]]'
check "eval: stops within a few batches (${took}s)" '[ "$took" -le 30 ]'

# ---- convert: the project file keeps its old bytes ----
old_file model.ncsnn
interrupt 1 convert "$model" -o "$work/model.ncsnn"
check "convert: exit status 130 after Ctrl-C" '[ "$rc" = 130 ]'
check "convert: says it was interrupted" '[[ "$err" == *interrupted* ]]'
check "convert: the existing project file is unchanged" 'unchanged model.ncsnn'
check "convert: no temporary file is left" 'no_temp'
check "convert: stops within a few batches (${took}s)" '[ "$took" -le 30 ]'

# ---- run: a real SNN project, and the recording keeps its old bytes ----
if "$cli" convert "$model" -o "$work/snn.ncsnn" --limit 16 --calib-images 64 >/dev/null 2>"$work/err.txt"; then
  old_file rec.h5
  interrupt 1 run "$work/snn.ncsnn" -T 64 --batch 8 --record "$work/rec.h5"
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
interrupt 1 sweep "$model" --png "$work/sweep.png"
check "sweep: exit status 130 after Ctrl-C" '[ "$rc" = 130 ]'
check "sweep: says it was interrupted" '[[ "$err" == *interrupted* ]]'
check "sweep: the existing chart is unchanged" 'unchanged sweep.png'
check "sweep: stops within a few batches (${took}s)" '[ "$took" -le 30 ]'

# ---- a second Ctrl-C leaves at once ----
restore_old_files
"$cli" convert "$model" -o "$work/model.ncsnn" >/dev/null 2>"$work/err.txt" &
pid=$!
for _ in $(seq 300); do catches_sigint "$pid" && break; sleep 0.01; done
sleep 1
kill -INT "$pid" 2>/dev/null
sleep 0.2
kill -INT "$pid" 2>/dev/null
wait "$pid"
rc=$?
check "convert: a second Ctrl-C exits with 130 at once" '[ "$rc" = 130 ]'
check "convert: still the old project file after two Ctrl-C" 'unchanged model.ncsnn'

echo "1..$n"
exit $failed
