#!/bin/bash
# test_workbench_xvfb.sh — the workbench end to end, under Xvfb (TAP).
#
# Starts `test_workbench DIR` (tests/test_workbench.c: the workbench's own
# application and window, driven by a test program) on the bundled model: it
# converts and simulates through the window's own actions (a run cancelled
# after its first live update, then p99.9 and mmse runs compared on one
# accuracy chart), checks that every view received data, exports every chart
# as PNG/SVG/PDF, the recording, the project and NIR, opens that project and
# simulates it, screenshots the window (each view, light and dark, during a
# run), opens the shortcuts and about windows, checks that a bad setting gives
# a dialog, fine-tunes (a BPTT epoch cancelled in its middle, then a short one
# whose calibration error and accuracy are compared before and after), runs
# a training-free bias calibration (its error per layer before and after), and
# finally closes the window during a run (it must exit cleanly).  Then the
# installed program's scripted sessions: --print-loaded and --bench-frames.
# G_DEBUG=fatal-criticals turns any GTK/GLib critical into a failure.
#
# The installed program itself must start, and must not carry the test.
#
# Usage: test_workbench_xvfb.sh PATH/TO/test_workbench PATH/TO/neurocuda-workbench
set -u
test_workbench=${1:?usage: $0 test_workbench neurocuda-workbench}
workbench=${2:?usage: $0 test_workbench neurocuda-workbench}
out="${NC_BUILD_DIR:-${TMPDIR:-/tmp}}/test-workbench"
n=0 failed=0

ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=1; echo "not ok $n - $1"; }
check() { if eval "$2"; then ok "$1"; else not_ok "$1"; fi; }

if ! command -v xvfb-run >/dev/null; then
  echo "1..0 # SKIP xvfb-run not found (Debian package xvfb)"
  exit 0
fi

rm -rf "$out"
mkdir -p "$out"
log="$out/self-test.log"
# memory GSettings: the test neither reads nor changes the user's settings
# In a sanitizer build, leak checking is off for the GUI process only: GTK
# loads modules at run time (GL drivers, input methods) whose one-off
# allocations LeakSanitizer reports from "<unknown module>"; invalid accesses
# are still caught, and every pipeline call the window makes is leak-checked
# by the other tests.
xvfb-run -a -s "-screen 0 1600x1000x24" \
  env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" GSETTINGS_BACKEND=memory G_DEBUG=fatal-criticals NO_AT_BRIDGE=1 GTK_A11Y=none \
  timeout 600 "$test_workbench" "$out" >"$log" 2>&1
status=$?
sed 's/^/# /' "$log"
check "the self-test passed (exit status $status, no GTK critical)" '[ $status -eq 0 ] && grep -q "self-test: passed" "$log"'

is_png() { [ -s "$1" ] && [ "$(head -c 4 "$1" | tail -c 3)" = "PNG" ]; }
is_pdf() { [ -s "$1" ] && [ "$(head -c 5 "$1")" = "%PDF-" ]; }
is_svg() { [ -s "$1" ] && grep -q "<svg" "$1"; }

charts="accuracy firing-rates calibration-error raster membrane sops teaching"
bad=""
for c in $charts; do
  is_png "$out/$c.png" && is_svg "$out/$c.svg" && is_pdf "$out/$c.pdf" || bad="$bad $c"
done
check "every chart exported as PNG, SVG and PDF${bad:+ (missing:$bad)}" '[ -z "$bad" ]'
check "the recording is an HDF5 file" '[ "$(head -c 4 "$out/recording.h5" | tail -c 3)" = "HDF" ]'
check "the project is an HDF5 file" '[ "$(head -c 4 "$out/model.ncsnn" | tail -c 3)" = "HDF" ]'
check "the network is exported to NIR (HDF5)" '[ "$(head -c 4 "$out/network.nir" | tail -c 3)" = "HDF" ]'

bad=""
for c in $charts dark settings running finetune-calibration-error finetune-accuracy finetune-settings finetune-running \
  bias-calibration-error; do
  f="$out/window-$c.png"
  is_png "$f" && [ "$(stat -c %s "$f")" -gt 20000 ] || bad="$bad $c"
done
check "window screenshots of every view and in dark mode${bad:+ (missing:$bad)}" '[ -z "$bad" ]'
check "fine-tuning compared before and after, and cancelled mid-epoch" 'grep -q "self-test: fine-tuning: .* layers. errors changed" "$log" && grep -q "fine-tuning stopped .* after Cancel" "$log"'
check "bias calibration compared before and after in the error view, its row and time in the project file" \
  'grep -q "self-test: bias calibration: .* layers. errors changed" "$log" && grep -q "self-test: the project keeps the bias calibrated row" "$log"'
check "no temporary files left by the atomic writes" '[ -z "$(ls "$out" | grep -E "\.tmp")" ]'
check "the workbench prints its version" '"$workbench" --version | grep -q "^neurocuda-workbench "'
check "the installed workbench carries no self-test" '! grep -qa "self-test: " "$workbench"'

# The scripted sessions of the workbench itself: --print-loaded names the
# model the window opened; --bench-frames measures the frame clock while a
# run of the bundled model streams (2 s; defaults but 200 calibration images).
bench_cfg="$out/bench-config"
mkdir -p "$bench_cfg/glib-2.0/settings"
printf '[io/github/neurocuda/Workbench]\ncalib-images=200\nraster-samples=40\nraster-memory-mb=1\nraster-neurons=1048576\n' \
  >"$bench_cfg/glib-2.0/settings/keyfile"
scripted() { # LOG OPTION...: the installed workbench under Xvfb, its own settings
  local log=$1
  shift
  xvfb-run -a -s "-screen 0 1600x1000x24" env XDG_CONFIG_HOME="$bench_cfg" GSETTINGS_BACKEND=keyfile \
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" G_DEBUG=fatal-criticals NO_AT_BRIDGE=1 GTK_A11Y=none \
    GSK_RENDERER=cairo timeout 300 "$workbench" "$@" >"$log" 2>&1
}
scripted "$out/print-loaded.log" --print-loaded
check "--print-loaded names the bundled model the window opened" \
  'grep -q "^loaded .*fmnist_cnn.onnx: ANN, input 1x28x28, 10 classes, 12 nodes$" "$out/print-loaded.log"'
mkdir -p "$out/bench-shots"
scripted "$out/bench-frames.log" --bench-frames 2 --bench-screenshots "$out/bench-shots"
sed 's/^/# /' "$out/bench-frames.log"
check "--bench-frames measures the frames while a run streams, and the rasters past 1 MB go to the spill file" \
  'grep -q "^| all  *| *[1-9]" "$out/bench-frames.log" && grep -q "peak resident memory: [0-9]* MB" "$out/bench-frames.log" && grep -qE "^main thread outside the paints, per interval: busy p50 [0-9.]+, p95 [0-9.]+, max [0-9.]+ ms$" "$out/bench-frames.log" && grep -qE "in memory, [1-9][0-9]* read back from the spill file" "$out/bench-frames.log" && is_png "$out/bench-shots/window-sops.png"'

echo "# screenshots and exports are in $out"
echo "1..$n"
exit $failed
