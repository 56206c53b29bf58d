#!/usr/bin/env bash
# gpu-tap.sh — sourced by the device scripts (tools/gpu-run.sh,
# tools/gpu-train-run.sh): what a test's TAP log under $OUT says, for their
# progress lines and their closing summary, written once.

# "N ok, M not ok" of test NAME's log, $OUT/NAME.log.
tap_counts() {
  echo "$(grep -c '^ok' "$OUT/$1.log" 2>/dev/null) ok, $(grep -c '^not ok' "$OUT/$1.log" 2>/dev/null) not ok"
}

# One line per test named in the array `tests`: its exit status (the
# associative array test_rc, "?" when it did not run) and its counts.
tap_summary() {
  local t
  for t in "${tests[@]}"; do
    printf '%-18s rc=%s  %s\n' "$t" "${test_rc[$t]:-?}" "$(tap_counts "$t")"
  done
}
