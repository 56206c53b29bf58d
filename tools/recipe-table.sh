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
# Before them, one line per run: its exit status, wall time, and each stage's
# time, epochs and held-out accuracy.  Every run's --json line and output are
# kept in OUT (default a temporary folder, printed at the end).
#
# Usage (from the repository root, after building):
#   tools/recipe-table.sh [-e cpu|gpu] [-l TEST_IMAGES] [-b MINUTES] [-x "EXTRA ARGS"] [-o OUT]
#                         [-s SETS] [-j JOBS] [-d SECONDS [-m SECONDS]] [-r] MODEL.onnx...
#   -s: the runs to make, a comma list of recipe (tables 1), nodistill (2), bias (3); default all
#   -j: runs at once (default 1), started in the order of -s, every model of a set before the next set
#   -d: end within SECONDS: a run starts only while it can still end in time (a recipe run needs
#       its budget, -b or 5 minutes, plus the margin -m, default 30 s; a bias run the margin) and is
#       stopped at the deadline (its cells then show —, its wall time "stopped at")
#   -r: run nothing, print the tables from the runs already in OUT (a run cut short shows —)
#   e.g. on the H200, all 10 000 test images (tools/gpu-recipe-run.sh does it in one device call):
#   tools/recipe-table.sh -e gpu tests/fixtures/models/{mlp,cnn_maxpool,vgg_bn,resnet}.onnx \
#       assets/models/fmnist_cnn.onnx tests/fixtures/heldout/*.onnx
#   a CPU subset: tools/recipe-table.sh -l 1000 -b 2 -x "--train-images 10000" MODEL.onnx
# Models are Fashion-MNIST nets preprocessed as the fixtures: --mean 0.2860 --std 0.3530.
set -u
ENGINE=cpu LIMIT="" BUDGET="" EXTRA="" OUT="" REPORT_ONLY=0 SETS=recipe,nodistill,bias JOBS=1 WITHIN="" MARGIN=30
while getopts "e:l:b:x:o:s:j:d:m:rh" opt; do
  case $opt in
    e) ENGINE=$OPTARG ;;
    l) LIMIT=$OPTARG ;;
    b) BUDGET=$OPTARG ;;
    x) EXTRA=$OPTARG ;;
    o) OUT=$OPTARG ;;
    s) SETS=$OPTARG ;;
    j) JOBS=$OPTARG ;;
    d) WITHIN=$OPTARG ;;
    m) MARGIN=$OPTARG ;;
    r) REPORT_ONLY=1 ;;
    *) sed -n '2,28p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "recipe-table.sh: give at least one MODEL.onnx (-h for help)" >&2; exit 2; }
for model in "$@"; do
  [ $REPORT_ONLY -eq 1 ] || [ -f "$model" ] || { echo "recipe-table.sh: no model file $model" >&2; exit 2; }
done
for set in ${SETS//,/ }; do
  case $set in recipe | nodistill | bias) ;; *) echo "recipe-table.sh: -s: unknown set '$set' (recipe, nodistill, bias)" >&2; exit 2 ;; esac
done
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || { echo "recipe-table.sh: -j wants a positive number of runs, not '$JOBS'" >&2; exit 2; }
[[ -z $WITHIN || $WITHIN =~ ^[1-9][0-9]*$ ]] || { echo "recipe-table.sh: -d wants whole seconds, not '$WITHIN'" >&2; exit 2; }
[[ $MARGIN =~ ^[1-9][0-9]*$ ]] || { echo "recipe-table.sh: -m wants whole seconds, not '$MARGIN'" >&2; exit 2; }
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
DEADLINE=$((SECONDS + ${WITHIN:-0}))
# the seconds a recipe run needs: its budget (the recipe's default 5 minutes) and a margin to start and save
RECIPE_NEED=$(awk -v b="${BUDGET:-5}" -v m="$MARGIN" 'BEGIN { printf "%d", b * 60 + m }')
BIAS_NEED=$MARGIN

# run NAME ARGS...: one convert with its output in OUT/NAME.log; the --json line in OUT/NAME.json
run() {
  local name=$1
  shift
  local start=$SECONDS limit=()
  [ -n "$WITHIN" ] && limit=(timeout -k 10 $((DEADLINE - SECONDS)))  # -k: KILL 10 s after a TERM it ignores
  "${limit[@]}" "$BIN" convert "$@" -o "$OUT/$name.ncsnn" "${COMMON[@]}" "${EXTRA_ARGS[@]}" --json >"$OUT/$name.log" 2>&1
  local rc=$?
  grep '^{' "$OUT/$name.log" | tail -n 1 >"$OUT/$name.json"
  echo "$((SECONDS - start))" >"$OUT/$name.seconds"
  echo "$rc" >"$OUT/$name.rc"
  [ $rc -eq 124 ] && echo "recipe-table.sh: $name stopped at the deadline, see $OUT/$name.log" >&2
  [ $rc -eq 0 ] || [ $rc -eq 124 ] || echo "recipe-table.sh: $name failed (exit $rc), see $OUT/$name.log" >&2
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

# The runs, in order: every model of a set before the next set (NAME, NEED seconds, ARGS quoted).
NAMES=() NEEDS=() ARGS=()
add_run() {
  NAMES+=("$1")
  NEEDS+=("$2")
  shift 2
  ARGS+=("$(printf '%q ' "$@")")
}
for set in ${SETS//,/ }; do
  for model in "$@"; do
    m=$(basename "$model" .onnx)
    case $set in
      recipe) for T in 8 4; do add_run "${m}_t$T" "$RECIPE_NEED" "$model" --target-T "$T" "${RECIPE[@]}"; done ;;
      nodistill) for T in 8 4; do add_run "${m}_t${T}_nodistill" "$RECIPE_NEED" "$model" --target-T "$T" "${RECIPE[@]}" --distill 0; done ;;
      bias) for T in 8 16 32; do add_run "${m}_bias$T" "$BIAS_NEED" "$model" --L "$T" --calibrate-bias "$T" --eval-T "$T"; done ;;
    esac
  done
done

# JOBS at a time; with -d a run that cannot end before the deadline is not started
for i in "${!NAMES[@]}"; do
  [ $REPORT_ONLY -eq 1 ] && break
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
  if [ -n "$WITHIN" ] && [ $((DEADLINE - SECONDS)) -lt "${NEEDS[$i]}" ]; then
    echo "recipe-table.sh: [${SECONDS}s] not started (${NEEDS[$i]} s needed, $((DEADLINE - SECONDS)) s left): ${NAMES[$i]}" >&2
    continue
  fi
  echo "recipe-table.sh: [${SECONDS}s] start ${NAMES[$i]}" >&2
  eval "run ${NAMES[$i]} ${ARGS[$i]}" &
done
wait

# secs NAME: the run's wall seconds; "stopped at N" when the deadline ended it; — when it did not run
secs() {
  if [ ! -f "$OUT/$1.seconds" ]; then
    echo —
  elif [ "$(cat "$OUT/$1.rc" 2>/dev/null)" = 124 ]; then
    echo "stopped at $(cat "$OUT/$1.seconds")"
  else
    cat "$OUT/$1.seconds"
  fi
}

echo "## Each run: the stages it went through (seconds; epochs run/kept of a training stage; held-out accuracy)"
echo
python3 - "$OUT" <<'EOF'
import glob, json, os, sys
out = sys.argv[1]
print("| run | wall s | exit | kept | stages |")
print("|---|---|---|---|---|")
for path in sorted(glob.glob(os.path.join(out, "*.rc"))):
    name = os.path.basename(path)[:-3]
    def text(ext):
        try:
            return open(os.path.join(out, name + ext)).read().strip()
        except OSError:
            return ""
    try:
        d = json.loads(text(".json"))
    except ValueError:
        d = {}
    cells = []
    for s in d.get("stages", []):
        c = f'{s["stage"]} {s.get("seconds", 0):.1f} s'
        if "epochs_run" in s:
            c += f' ({s["epochs_run"]} ep, kept {s["kept_epoch"]})'
        if "held_out_accuracy" in s:
            c += f' held-out {s["held_out_accuracy"]:.4f}'
        cells.append(c)
    print(f'| {name} | {text(".seconds")} | {text(".rc")} | {d.get("kept_stage", "")} | {"; ".join(cells) or "—"} |')
EOF
echo
echo "## --target-T (engine $ENGINE, ${LIMIT:-all} test images${BUDGET:+, budget $BUDGET min})"
echo
echo "| network | ANN | T = 4 | goal ANN − 2 | T = 8 | goal ANN − 1 | kept T = 4 / T = 8 | seconds T = 4 / T = 8 |"
echo "|---|---|---|---|---|---|---|---|"
for model in "$@"; do
  m=$(basename "$model" .onnx)
  ann=$(field "${m}_t8" 'd["stages"][0]["ann_accuracy"]')
  [ "$ann" = — ] && ann=$(field "${m}_t4" 'd["stages"][0]["ann_accuracy"]')
  t4=$(field "${m}_t4" 'at(d["kept_stage"], 4)')
  t8=$(field "${m}_t8" 'at(d["kept_stage"], 8)')
  verdict() { python3 -c "import sys; a,v,g=sys.argv[1:]; print('—' if '—' in (a,v) else ('✓' if float(v) >= float(a)-float(g)-1e-9 else '✗'))" "$ann" "$1" "$2"; }
  echo "| $m | $ann | $t4 | $(verdict "$t4" 0.02) | $t8 | $(verdict "$t8" 0.01) |" \
       "$(field "${m}_t4" 'd["kept_stage"]') / $(field "${m}_t8" 'd["kept_stage"]') |" \
       "$(secs "${m}_t4") / $(secs "${m}_t8") |"
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
# exit 1 when a run of this call failed (a run stopped at the deadline is not a failure)
[ $REPORT_ONLY -eq 1 ] || ! grep -qvxE '0|124' "$OUT"/*.rc
