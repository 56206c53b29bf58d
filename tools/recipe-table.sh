#!/bin/bash
# recipe-table.sh — measures the --target-T recipe on a list of models and
# prints three markdown tables (issue 17):
#   1. `convert --target-T 8` and `--target-T 4`: the ANN, the kept stage's SNN
#      accuracy at T against the goals (T = 8 ≥ ANN − 1, T = 4 ≥ ANN − 2), and
#      each run's wall time;
#   2. the same recipe with distillation off (--distill 0), same seeds;
#   3. training-free bias calibration: a plain conversion (L = T) measured at
#      T = 8, 16, 32 without and with --calibrate-bias T (one run per T: the
#      "converted" and "bias calibrated" rows).
# Every run's --json line and output are kept in OUT (default a temporary
# folder, printed at the end).
#
# Usage (from the repository root, after building):
#   tools/recipe-table.sh [-e cpu|gpu] [-l TEST_IMAGES] [-b MINUTES] [-x "EXTRA ARGS"] [-o OUT] [-r] MODEL.onnx...
#   -r: run nothing, print the tables from the runs already in OUT (a run cut short shows —)
#   e.g. on the H200, all 10 000 test images:
#   tools/recipe-table.sh -e gpu tests/fixtures/models/{mlp,cnn_maxpool,vgg_bn,resnet}.onnx \
#       assets/models/fmnist_cnn.onnx HELDOUT/*.onnx
#   a CPU subset: tools/recipe-table.sh -l 1000 -b 2 -x "--train-images 10000" MODEL.onnx
# Models are Fashion-MNIST nets preprocessed as the fixtures: --mean 0.2860 --std 0.3530.
set -u
ENGINE=cpu LIMIT="" BUDGET="" EXTRA="" OUT="" REPORT_ONLY=0
while getopts "e:l:b:x:o:rh" opt; do
  case $opt in
    e) ENGINE=$OPTARG ;;
    l) LIMIT=$OPTARG ;;
    b) BUDGET=$OPTARG ;;
    x) EXTRA=$OPTARG ;;
    o) OUT=$OPTARG ;;
    r) REPORT_ONLY=1 ;;
    *) sed -n '2,24p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "recipe-table.sh: give at least one MODEL.onnx (-h for help)" >&2; exit 2; }
BIN=${NEUROCUDA:-build/app/neurocuda}
[ $REPORT_ONLY -eq 1 ] || [ -x "$BIN" ] || { echo "recipe-table.sh: $BIN is not built; run: ninja -C build app/neurocuda" >&2; exit 1; }
OUT=${OUT:-$(mktemp -d /tmp/recipe-table.XXXXXX)}
mkdir -p "$OUT"
COMMON=(--mean 0.2860 --std 0.3530 --engine "$ENGINE")
[ -n "$LIMIT" ] && COMMON+=(--limit "$LIMIT")
RECIPE=()
[ -n "$BUDGET" ] && RECIPE+=(--time-budget "$BUDGET")
# shellcheck disable=SC2206 # EXTRA is a list of options on purpose
EXTRA_ARGS=($EXTRA)

# run NAME ARGS...: one convert with its output in OUT/NAME.log; the --json line in OUT/NAME.json
run() {
  local name=$1
  shift
  local start=$SECONDS
  "$BIN" convert "$@" -o "$OUT/$name.ncsnn" "${COMMON[@]}" "${EXTRA_ARGS[@]}" --json >"$OUT/$name.log" 2>&1
  local rc=$?
  grep '^{' "$OUT/$name.log" | tail -n 1 >"$OUT/$name.json"
  echo "$((SECONDS - start))" >"$OUT/$name.seconds"
  [ $rc -eq 0 ] || echo "recipe-table.sh: $name failed (exit $rc), see $OUT/$name.log" >&2
}

# field NAME EXPR: a value from OUT/NAME.json (d = the JSON object), "—" when missing
field() {
  python3 - "$OUT/$1.json" "$2" <<'EOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
    rows = {s["stage"]: s for s in d["stages"]}
    def at(stage, T):
        return rows[stage]["snn_accuracy_by_step"][T - 1]
    v = eval(sys.argv[2])
    print(f"{v:.4f}" if isinstance(v, float) else v)
except Exception:
    print("—")
EOF
}

for model in "$@"; do
  [ $REPORT_ONLY -eq 1 ] && break
  m=$(basename "$model" .onnx)
  for T in 8 4; do
    run "${m}_t$T" "$model" --target-T "$T" "${RECIPE[@]}"
    run "${m}_t${T}_nodistill" "$model" --target-T "$T" "${RECIPE[@]}" --distill 0
  done
  for T in 8 16 32; do
    run "${m}_bias$T" "$model" --L "$T" --calibrate-bias "$T" --eval-T "$T"
  done
done

echo "## --target-T (engine $ENGINE, ${LIMIT:-all} test images${BUDGET:+, budget $BUDGET min})"
echo
echo "| network | ANN | T = 4 | goal ANN − 2 | T = 8 | goal ANN − 1 | kept T = 4 / T = 8 | seconds T = 4 / T = 8 |"
echo "|---|---|---|---|---|---|---|---|"
for model in "$@"; do
  m=$(basename "$model" .onnx)
  ann=$(field "${m}_t8" 'd["stages"][0]["ann_accuracy"]')
  t4=$(field "${m}_t4" 'at(d["kept_stage"], 4)')
  t8=$(field "${m}_t8" 'at(d["kept_stage"], 8)')
  verdict() { python3 -c "import sys; a,v,g=sys.argv[1:]; print('—' if '—' in (a,v) else ('✓' if float(v) >= float(a)-float(g)-1e-9 else '✗'))" "$ann" "$1" "$2"; }
  echo "| $m | $ann | $t4 | $(verdict "$t4" 0.02) | $t8 | $(verdict "$t8" 0.01) |" \
       "$(field "${m}_t4" 'd["kept_stage"]') / $(field "${m}_t8" 'd["kept_stage"]') |" \
       "$(cat "$OUT/${m}_t4.seconds" 2>/dev/null || echo —) / $(cat "$OUT/${m}_t8.seconds" 2>/dev/null || echo —) |"
done
echo
echo "## Distillation on and off (the same recipe and seeds)"
echo
echo "| network | T = 4 on | T = 4 off | T = 8 on | T = 8 off |"
echo "|---|---|---|---|---|"
for model in "$@"; do
  m=$(basename "$model" .onnx)
  echo "| $m | $(field "${m}_t4" 'at(d["kept_stage"], 4)') | $(field "${m}_t4_nodistill" 'at(d["kept_stage"], 4)') |" \
       "$(field "${m}_t8" 'at(d["kept_stage"], 8)') | $(field "${m}_t8_nodistill" 'at(d["kept_stage"], 8)') |"
done
echo
echo "## Training-free bias calibration (conversion with L = T; without → with; undone: it lowered the held-out accuracy)"
echo
echo "| network | T = 8 | T = 16 | T = 32 |"
echo "|---|---|---|---|"
for model in "$@"; do
  m=$(basename "$model" .onnx)
  line="| $m |"
  for T in 8 16 32; do
    undone=$(field "${m}_bias$T" '"" if d["bias_calibration"]["kept"] else " (undone)"')
    line="$line $(field "${m}_bias$T" "at('converted', $T)") → $(field "${m}_bias$T" "at('bias calibrated', $T)")${undone/—/} |"
  done
  echo "$line"
done
echo
echo "Logs and --json lines: $OUT"
