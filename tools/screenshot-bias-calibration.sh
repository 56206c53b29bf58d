#!/bin/bash
# screenshot-bias-calibration.sh — the README's screenshot of the
# calibration-error view before and after the training-free bias calibration
# (docs/screenshots/workbench-bias-calibration-error.png).
#
# Runs the workbench's own end-to-end program (tests/test_workbench.c) with
# NC_SELF_TEST_ONLY=bias under Xvfb, as tests/test_workbench_xvfb.sh runs the
# whole self-test: the window opens MODEL, converts it (p99.9, L = T), runs
# with Settings → Fine-tuning → Bias calibration T = T on the CPU engine,
# checks that the error view compares each layer before and after, and saves
# the window.  The settings are the self-test's (200 calibration images,
# batches of 16, in-memory GSettings: the user's settings are not touched).
#
# Usage (from the repository root, after building):
#   tools/screenshot-bias-calibration.sh [MODEL] [T] [TEST_IMAGES]
#   default: tests/fixtures/models/vgg_bn.onnx 8 1000 (a few minutes on 2 busy cores)
#   NC_BUILDDIR picks the build folder (default build); OUT the folder for the run's files.
set -u
cd "$(dirname "$0")/.." || exit 1
model=${1:-tests/fixtures/models/vgg_bn.onnx}
steps=${2:-8}
images=${3:-1000}
build=${NC_BUILDDIR:-build}
program=$build/tests/test_workbench
[ -x "$program" ] || { echo "screenshot-bias-calibration.sh: $program is not built; run: ninja -C $build tests/test_workbench" >&2; exit 1; }
[ -f "$model" ] || { echo "screenshot-bias-calibration.sh: no model $model" >&2; exit 1; }
command -v xvfb-run >/dev/null || { echo "screenshot-bias-calibration.sh: xvfb-run not found (apt-get install xvfb)" >&2; exit 1; }
out=${OUT:-$(mktemp -d /tmp/bias-shot.XXXXXX)}
mkdir -p "$out"
# the screen of tests/test_workbench_xvfb.sh, so that the window has the size of the other screenshots
xvfb-run -a -s "-screen 0 1600x1000x24" env GSETTINGS_BACKEND=memory NO_AT_BRIDGE=1 GTK_A11Y=none \
  NC_SELF_TEST_ONLY=bias NC_SELF_TEST_STEPS="$steps" NC_SELF_TEST_IMAGES="$images" \
  timeout 1800 "$program" "$out" "$model" 2>&1 | tee "$out/self-test.log"
grep -q "self-test: passed" "$out/self-test.log" || { echo "screenshot-bias-calibration.sh: the self-test failed, see $out/self-test.log" >&2; exit 1; }
cp "$out/window-bias-calibration-error.png" docs/screenshots/workbench-bias-calibration-error.png
echo "docs/screenshots/workbench-bias-calibration-error.png ($(stat -c %s docs/screenshots/workbench-bias-calibration-error.png) bytes); the run's files: $out"
