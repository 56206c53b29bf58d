#!/bin/bash
# test_gpu_recipe_script.sh — tools/gpu-recipe-run.sh (the one-call recipe
# table for the H200) end to end on the CPU engine, on a tiny subset, so that
# the device call cannot fail on a typo: every set of runs (recipe with and
# without distillation, bias calibration) ends with its --json line, the
# tables hold numbers, the run table names each run's stages and times, the
# archive holds the logs; a run that cannot end before the deadline is not
# started, and one that reaches it is stopped and marked.
# TAP output; argument: the neurocuda binary.
set -u
BIN=${1:?usage: test_gpu_recipe_script.sh NEUROCUDA}
SRC=${NC_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
source "$(dirname "$0")/cli_common.sh"

if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  skip "gpu-recipe-run.sh on the CPU" "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"
  echo "1..$n"
  exit 0
fi

# recipe_run OUT [VAR=VALUE...]: the script on the CPU with tiny settings, output in $WORK/out
recipe_run() {
  local out=$1
  shift
  env NEUROCUDA="$BIN" NC_RECIPE_ENGINE=cpu NC_RECIPE_LIMIT=100 NC_RECIPE_BUDGET=0.05 NC_RECIPE_JOBS=2 \
    NC_RECIPE_EXTRA="--train-images 256 --val-images 128 --calib-images 200 --bias-images 128" \
    NC_RECIPE_MODELS="tests/fixtures/models/mlp.onnx" OUT="$out" "$@" bash "$SRC/tools/gpu-recipe-run.sh" >"$WORK/out" 2>&1
}

# 1. every set, one model
recipe_run "$WORK/all"
rc=$?
number='0\.[0-9]{4}'
if [ $rc -eq 0 ] && grep -qE "^\| mlp \| $number \| $number \| [✓✗] \| $number \| [✓✗] \|" "$WORK/all/tables.md" \
   && grep -qE "^\| mlp \| $number \| $number \| $number \| $number \|$" "$WORK/all/tables.md" \
   && grep -qE "^\| mlp \| $number → $number" "$WORK/all/tables.md"; then
  ok "the three tables hold the mlp's accuracies"
else
  not_ok "gpu-recipe-run.sh on the CPU (exit $rc)"
fi
runs=$(grep -cE "^\| mlp_(t[48](_nodistill)?|bias(8|16|32)) \| [0-9]+ \| 0 \|" "$WORK/all/tables.md")
if [ "$runs" = 7 ] && grep -qE "^\| mlp_t8 .*BPTT fine-tuned [0-9.]+ s \([0-9]+ ep, kept [0-9]+\) held-out $number" \
   "$WORK/all/tables.md"; then
  ok "the run table: 7 runs, each stage timed, epochs and held-out accuracy"
else
  not_ok "the run table ($runs runs ended well)"
  sed 's/^/# /' "$WORK/all/tables.md" | tail -n 12
fi
mkdir -p "$WORK/logs"
tar xzf "$WORK/all/runs.tgz" -C "$WORK/logs" 2>/dev/null
jsons=$(ls "$WORK"/logs/runs/*.json 2>/dev/null | wc -l)
if [ "$jsons" = 7 ] && ! ls "$WORK"/logs/runs/*.ncsnn >/dev/null 2>&1 && [ -s "$WORK/logs/runs/mlp_t4.log" ]; then
  ok "runs.tgz holds each run's log and --json line, no project file"
else
  not_ok "runs.tgz ($jsons --json files)"
fi

# 2. the deadline: a recipe run needing 90 s is not started with 85 s left; the bias runs are
recipe_run "$WORK/late" NC_RUN_BUDGET=100 NC_RECIPE_BUDGET=1
rc=$?
if [ $rc -eq 0 ] && grep -q "not started (90 s needed, 8[0-9] s left): mlp_t8" "$WORK/out" \
   && grep -qE "^\| mlp_bias8 \| [0-9]+ \| 0 \|" "$WORK/late/tables.md" && ! grep -q "^| mlp_t8 " "$WORK/late/tables.md"; then
  ok "a run that cannot end before the deadline is not started"
else
  not_ok "the deadline (exit $rc)"
fi

# 3. a run past the deadline is stopped and marked (tools/recipe-table.sh -d, 3 s, a model too big for it)
NEUROCUDA="$BIN" bash "$SRC/tools/recipe-table.sh" -s bias -d 3 -m 2 -o "$WORK/stopped" -x "--calib-images 20000" \
  "$SRC/tests/fixtures/models/vgg_bn.onnx" >"$WORK/out" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "vgg_bn_bias8 stopped at the deadline" "$WORK/out" && grep -qE "^\| vgg_bn_bias8 \| [0-9]+ \| 124 \|" "$WORK/out"; then
  ok "a run at the deadline is stopped, marked, and is not a failure"
else
  not_ok "a run past the deadline (exit $rc)"
fi

echo "1..$n"
[ $failed -eq 0 ]
