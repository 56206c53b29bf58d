#!/bin/bash
# test_cli_finetune.sh — `neurocuda convert` with fine-tuning, end to end on
# the bundled model and Fashion-MNIST: both stages run, every stage's accuracy
# is printed, in the JSON line and in the project file; a bad option is named;
# Ctrl-C in the middle of an epoch keeps the previous project file intact.
# TAP output; argument: the neurocuda binary.
set -u
BIN=${1:?usage: test_cli_finetune.sh NEUROCUDA}
SRC=${NC_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
MODEL=$SRC/assets/models/fmnist_cnn.onnx
PREP=(--mean 0.2860 --std 0.3530)
SMALL=(--calib-images 300 --limit 300 --train-images 512 --val-images 256 --eval-T 4 --batch 32)
source "$(dirname "$0")/cli_common.sh"
json() { grep '^{' "$WORK/out" | tail -n 1 | python3 -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))" "$1"; }

if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  skip "fine-tuning end to end" "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"
  echo "1..$n"
  exit 0
fi

# 1. both stages, JSON with three stages and accuracies by step
"$BIN" convert "$MODEL" -o "$WORK/ft.ncsnn" "${PREP[@]}" "${SMALL[@]}" --finetune-qcfs 1 --finetune-bptt 1 \
  --train-T 4 --lr 1e-4 --surrogate atan --train-threshold --json >"$WORK/out" 2>&1
rc=$?
if [ $rc -eq 0 ] && [ "$(json 'len(d["stages"])')" = 3 ] && [ "$(json 'len(d["stages"][2]["snn_accuracy_by_step"])')" = 4 ] \
   && [ "$(json 'd["stages"][2]["snn_accuracy_by_step"][3] > 0.6')" = True ]; then
  ok "convert --finetune-qcfs 1 --finetune-bptt 1: three stages measured"
else
  not_ok "convert with both fine-tuning stages (exit $rc)"
fi
if grep -q "QCFS epoch 1/1" "$WORK/out" && grep -q "BPTT epoch 1/1" "$WORK/out" && grep -q "BPTT fine-tuned" "$WORK/out"; then
  ok "each stage prints its epochs and its accuracy row"
else
  not_ok "stage output"
fi

# 2. the project file keeps the stage accuracies
"$BIN" info "$WORK/ft.ncsnn" --json >"$WORK/out" 2>&1
if grep -q "bptt_finetuned_snn_accuracy_t4" "$WORK/out" && grep -q "qcfs_finetuned_qcfs_accuracy" "$WORK/out"; then
  ok "project file stores each stage's accuracy"
else
  not_ok "stage accuracies in the project file"
fi

# 3. bad options are named
"$BIN" convert "$MODEL" -o "$WORK/x.ncsnn" --finetune-bptt 1 --surrogate cosine >"$WORK/out" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q -- "--surrogate" "$WORK/out"; then ok "unknown surrogate named"; else not_ok "bad --surrogate (exit $rc)"; fi
"$BIN" convert "$MODEL" -o "$WORK/x.ncsnn" --finetune-bptt 1 --train-engine tpu >"$WORK/out" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q -- "--train-engine" "$WORK/out"; then ok "unknown training engine named"; else not_ok "bad --train-engine (exit $rc)"; fi

if "$BIN" convert "$MODEL" -o "$WORK/x.ncsnn" --finetune-bptt 1 --distill 1.5 >"$WORK/out" 2>&1; then rc=0; else rc=$?; fi
if [ $rc -eq 2 ] && grep -q -- "--distill" "$WORK/out"; then ok "a distillation weight above 1 named"; else not_ok "bad --distill (exit $rc)"; fi

# 3b. the recipe: prints its choices, calibrates the bias, distils, keeps the best stage, times each stage
"$BIN" convert "$MODEL" -o "$WORK/recipe.ncsnn" "${PREP[@]}" --calib-images 300 --limit 300 --train-images 256 \
  --val-images 256 --batch 32 --bias-images 128 --target-T 4 --time-budget 1 --json >"$WORK/out" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "Recipe for T = 4" "$WORK/out" && grep -q "^Bias calibration for T = 4" "$WORK/out" \
   && grep -q "distillation from the source ANN: weight 0.5" "$WORK/out" && grep -q "^Stage times:" "$WORK/out" \
   && [ "$(json 'd["kept_stage"] in [s["stage"] for s in d["stages"]] and d["target_T"] == 4')" = True ] \
   && [ "$(json 'len(d["stages"]) == 4 and all("held_out_accuracy" in s for s in d["stages"])')" = True ]; then
  ok "convert --target-T 4: the plan, bias calibration, distillation, every stage judged and timed"
else
  not_ok "convert --target-T 4 (exit $rc)"
fi
# each training stage's time plan: printed under its header and in --json; the total against the budget
if [ "$(grep -c -E '^  time budget( over-full)?: ' "$WORK/out")" = 2 ] \
   && grep -q -E "reserved for the 7 stages after it \(evaluate ×3 .*calibrate-bias" "$WORK/out" \
   && grep -q -E "^Total [0-9.]+ s of the 60.0 s time budget" "$WORK/out" \
   && [ "$(json '[s["stage"] for s in d["stage_seconds"] if "budget_seconds" in s] == ["finetune", "finetune"]')" = True ]; then
  ok "convert --target-T 4: each training stage's time plan, printed and in --json"
else
  not_ok "the time plans of convert --target-T 4"
fi
grep '^{' "$WORK/out" | tail -n 1 >"$WORK/recipe.json"
"$BIN" info "$WORK/recipe.ncsnn" --json >"$WORK/out" 2>&1
if grep -q "bias_calibrated_snn_accuracy_t4" "$WORK/out" && grep -q "seconds_finetune" "$WORK/out" \
   && grep -q "finetune_distill_alpha" "$WORK/out"; then
  ok "the project file keeps the recipe's rows, stage times and distillation"
else
  not_ok "recipe metrics in the project file"
fi
# each stage's time, held-out and test accuracy: in the --json line, and the same in the project file
if python3 - "$WORK/recipe.json" "$WORK/out" >"$WORK/check" 2>&1 <<'EOF'
import json, math, sys
run = json.load(open(sys.argv[1]))
metrics = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])["metrics"]
keys = {"converted": "", "QCFS fine-tuned": "qcfs_finetuned_", "bias calibrated": "bias_calibrated_",
        "BPTT fine-tuned": "bptt_finetuned_"}
for s in run["stages"]:
    prefix = keys[s["stage"]]
    row = "seconds_" + (prefix[:-1] or "converted")
    assert s["seconds"] > 0 and math.isclose(metrics[row], s["seconds"], rel_tol=1e-6), (row, s, metrics.get(row))
    assert metrics[prefix + "held_out_accuracy"] == s["held_out_accuracy"], (prefix, s)
    assert metrics[prefix + "snn_accuracy_t4"] == s["snn_accuracy_by_step"][3], (prefix, s)
    assert ("epochs_run" in s) == ("fine-tuned" in s["stage"]), s
print(len(run["stages"]), "stages agree")
EOF
then
  ok "each stage's time, held-out and test accuracy: in --json and the same in the project file"
else
  cp "$WORK/check" "$WORK/out"
  not_ok "stage times and accuracies in --json and the project file"
fi

# 4. Ctrl-C mid-epoch: exit non-zero, the old project file is unchanged
cp "$WORK/ft.ncsnn" "$WORK/keep.ncsnn"
sum_before=$(sha256sum "$WORK/keep.ncsnn" | cut -d' ' -f1)
"$BIN" convert "$MODEL" -o "$WORK/keep.ncsnn" "${PREP[@]}" --calib-images 300 --limit 300 --finetune-bptt 3 \
  --train-images 20000 --val-images 256 --batch 32 >"$WORK/out" 2>&1 &
pid=$!
for _ in $(seq 1 600); do grep -q "BPTT fine-tuning" "$WORK/out" && break; sleep 0.1; done
sleep 2
kill -INT $pid
wait $pid
rc=$?
sum_after=$(sha256sum "$WORK/keep.ncsnn" | cut -d' ' -f1)
# 130 = the conventional exit code after SIGINT, set by the CLI itself (not a crash)
if { [ $rc -eq 130 ] || { [ $rc -ne 0 ] && [ $rc -lt 128 ]; }; } && [ "$sum_before" = "$sum_after" ] \
   && grep -qi "cancel" "$WORK/out"; then
  ok "Ctrl-C mid-epoch stops cleanly and keeps the previous project file"
else
  not_ok "Ctrl-C during fine-tuning (exit $rc, file $( [ "$sum_before" = "$sum_after" ] && echo kept || echo changed))"
fi

echo "1..$n"
[ $failed -eq 0 ]
