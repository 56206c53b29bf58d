#!/usr/bin/env bash
# gpu-recipe-run.sh — issue 17's recipe table in ONE device call on one H200:
# `convert --target-T 8` and `--target-T 4` (distillation on, then off) and
# the bias calibration at T = 8, 16, 32, on the fixture networks, the bundled
# model and the five held-out networks (tests/fixtures/heldout, made by
# tools/train_heldout_nets.py), every accuracy on all 10 000 test images.
#
#   tools/gpu-bundle.sh && cp -r /usr/share/datasets/fashion-mnist .fmnist    (here)
#   bash tools/gpu-recipe-run.sh          (device run, carry [".gpu", ".fmnist"], timeout 600)
# The carry (tracked files + .gpu + .fmnist) must stay under 64 MiB: a lean bundle
# (NC_BUNDLE_PROGRAMS=app/neurocuda NC_BUNDLE_DATA=0 NC_BUNDLE_LEAN=1 tools/gpu-bundle.sh, 12.6 MB)
# and the IDX files as .xz (tools/gpu-env.sh unpacks them) leave room for 56 000 of the
# 60 000 training images (24.9 MB; the tracked files are 28.8 MB).
#
# The runs go through tools/recipe-table.sh, many at once on the one GPU: the
# recipe runs with distillation on and off all start together (one wave, so
# that both see the same contention; each recipe run has the same
# --time-budget, which the recipe fits its epochs into), and the bias
# calibration runs (no training, short) fill two more slots as they free.
# A run that cannot end before the deadline is not started, and every run is
# stopped at it (its cells then show —).  $OUT gets tables.md (the three
# tables and one line per run), runs.tgz (every run's log and --json line)
# and the device facts; the tables are also the last lines printed.
#
# Knobs (environment), defaults for the H200 call:
#   NC_RUN_BUDGET     seconds for the whole script (540: the device call's 600 less unpacking and margin)
#   NC_RECIPE_BUDGET  --time-budget of each recipe run in minutes (6: the 40 recipe runs share the GPU,
#                     so this is less training than one run alone would get in 6 minutes)
#   NC_RECIPE_SETS    recipe,nodistill,bias (tools/recipe-table.sh -s); "recipe,bias" gives the
#                     distillation-on runs the GPU alone
#   NC_RECIPE_JOBS    runs at once (42: all 40 recipe runs and two bias runs)
#   NC_RECIPE_ENGINE  gpu | cpu;  NC_RECIPE_LIMIT  test images (empty: all);  NC_RECIPE_EXTRA  more
#                     convert options;  NC_RECIPE_MODELS  the models (space-separated);
#   NC_RECIPE_DATA    the dataset (default the carried .fmnist, else Debian's fashion-mnist)
#   NEUROCUDA         a neurocuda built here: no bundle is unpacked (the check below)
# A check of this script on the CPU, here, on a tiny subset (about a minute; tests/test_gpu_recipe_script.sh):
#   NEUROCUDA=build/app/neurocuda NC_RECIPE_ENGINE=cpu NC_RECIPE_LIMIT=100 NC_RECIPE_BUDGET=0.05 \
#   NC_RECIPE_EXTRA="--train-images 256 --val-images 128 --calib-images 200 --bias-images 128" \
#   NC_RECIPE_MODELS=tests/fixtures/models/mlp.onnx OUT=/tmp/recipe-check bash tools/gpu-recipe-run.sh
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
budget=${NC_RUN_BUDGET:-540}
start=$SECONDS
log() { echo "[$((SECONDS - start))s] $*"; }
engine=${NC_RECIPE_ENGINE:-gpu}

if [ -n "${NEUROCUDA:-}" ]; then
  OUT=${OUT:-/tmp/nc-out}
  mkdir -p "$OUT"
  [ -x "$NEUROCUDA" ] || { echo "gpu-recipe-run.sh: NEUROCUDA=$NEUROCUDA is not a program" >&2; exit 1; }
else
  # forty processes share 16 cores: one OpenBLAS thread each (gpu-env.sh would give each 16)
  export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
  source tools/gpu-env.sh || exit 1
  export NEUROCUDA=$B/neurocuda
fi

data=${NC_RECIPE_DATA:-${FMNIST:-}}
if [ -z "$data" ]; then
  [ -d /usr/share/datasets/fashion-mnist ] || {
    echo "gpu-recipe-run.sh: no Fashion-MNIST: carry .fmnist (cp -r /usr/share/datasets/fashion-mnist .fmnist)" >&2
    exit 1
  }
  data=fashion-mnist
fi
models=(tests/fixtures/models/mlp.onnx tests/fixtures/models/cnn_maxpool.onnx tests/fixtures/models/vgg_bn.onnx
  tests/fixtures/models/resnet.onnx assets/models/fmnist_cnn.onnx tests/fixtures/heldout/ho_mlp_wide.onnx
  tests/fixtures/heldout/ho_cnn_avg.onnx tests/fixtures/heldout/ho_cnn_bn_max.onnx tests/fixtures/heldout/ho_vgg_deep.onnx
  tests/fixtures/heldout/ho_resnet_pre.onnx)
# shellcheck disable=SC2206 # a space-separated list on purpose
[ -n "${NC_RECIPE_MODELS:-}" ] && models=($NC_RECIPE_MODELS)
for m in "${models[@]}"; do
  [ -f "$m" ] || { echo "gpu-recipe-run.sh: no model $m (run from a checkout that has it)" >&2; exit 1; }
done

# ---- the device -----------------------------------------------------------------------
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1 | tee "$OUT/gpu.csv"
fi
"$NEUROCUDA" engines >"$OUT/engines.txt" 2>&1
grep -E "^ *$engine" "$OUT/engines.txt" | head -3

# ---- the runs ----------------------------------------------------------------------------
sets=${NC_RECIPE_SETS:-recipe,nodistill,bias}
jobs=${NC_RECIPE_JOBS:-42}
rbudget=${NC_RECIPE_BUDGET:-6}
# the tables and the archive need about 15 s after the runs
within=$((budget - (SECONDS - start) - 15))
[ "$within" -gt 60 ] || { echo "gpu-recipe-run.sh: only $within s left for the runs" >&2; exit 1; }
log "${#models[@]} models, engine $engine, sets $sets, $jobs at once, --time-budget $rbudget min, runs end within $within s"
args=(-e "$engine" -b "$rbudget" -s "$sets" -j "$jobs" -d "$within" -o "$OUT/runs" -x "--data $data ${NC_RECIPE_EXTRA:-}")
[ -n "${NC_RECIPE_LIMIT:-}" ] && args+=(-l "$NC_RECIPE_LIMIT")
tools/recipe-table.sh "${args[@]}" "${models[@]}" >"$OUT/tables.md" 2>"$OUT/runs.err"
rc=$?
grep -E "not started|failed" "$OUT/runs.err"
log "runs done (recipe-table.sh exit $rc): $(ls "$OUT"/runs/*.json 2>/dev/null | wc -l) started, $(grep -l '^{' "$OUT"/runs/*.json 2>/dev/null | wc -l) with a --json line"

# ---- the tables (last in the output: the device reply keeps its end) ---------------------------
# the project files stay out: 40 of them would outgrow what a device call returns
tar czf "$OUT/runs.tgz" --exclude="*.ncsnn" -C "$OUT" runs runs.err && rm -rf "$OUT/runs" "$OUT/runs.err"
sed -i 's|^Logs and --json lines: .*|Logs and --json lines: runs.tgz (runs/NAME.log, NAME.json)|' "$OUT/tables.md"
echo "==== tables ($((SECONDS - start))s; runs.tgz holds every log and --json line) ===="
cat "$OUT/tables.md"
[ $rc -eq 0 ]
