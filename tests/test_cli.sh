#!/bin/bash
# test_cli.sh — end-to-end tests of the `neurocuda` command-line tool: every
# sub-command on real models and Fashion-MNIST, its --help, its JSON line, and
# bad input (a clear one-line error and a non-zero exit, never a crash).
# TAP output; argument: the neurocuda binary.
set -u
BIN=${1:?usage: test_cli.sh NEUROCUDA}
SRC=${NC_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
MODEL=$SRC/assets/models/fmnist_cnn.onnx
CNN=$SRC/tests/fixtures/models/cnn_maxpool.onnx
PREP=(--mean 0.2860 --std 0.3530)
source "$(dirname "$0")/cli_common.sh"

# json_get KEY: the value of KEY in the JSON line of $WORK/out (the last line of stdout; a
# sanitizer build may print its own report after it on stderr).
json_get() { grep '^{' "$WORK/out" | tail -n 1 | python3 -c "import json,sys; v=json.load(sys.stdin)[sys.argv[1]]; print(v)" "$1"; }

check() { # NAME CONDITION-COMMAND...
  local name=$1
  shift
  if "$@"; then ok "$name"; else not_ok "$name"; fi
}

have_data=1
[ -d /usr/share/datasets/fashion-mnist ] || have_data=0

# --- help and usage --------------------------------------------------------
expect "neurocuda --help" 0 "$BIN" --help
expect "neurocuda --version" 0 "$BIN" --version
for cmd in info eval convert run sweep bench export-nir engines; do
  expect "$cmd --help" 0 "$BIN" "$cmd" --help && check "$cmd --help shows its usage" grep -q "Usage: neurocuda $cmd" "$WORK/out"
done
expect "unknown command" 2 "$BIN" frobnicate
expect "missing model argument" 2 "$BIN" info

# --- info -----------------------------------------------------------------------
expect "info on the bundled model" 0 "$BIN" info "$MODEL"
check "info lists the conversion report" grep -q "Conversion report" "$WORK/out"
expect "info --json" 0 "$BIN" info "$MODEL" --json
check "info --json has MACs and nodes" test "$(json_get supported)" = True -a "$(json_get macs)" -gt 1000000

# --- bad input ------------------------------------------------------------------------
: >"$WORK/empty.onnx"
expect "empty model file" 1 "$BIN" info "$WORK/empty.onnx"
check "empty file error names the file, on one line" bash -c "grep -q 'empty.onnx' '$WORK/out' && [ \$(wc -l <'$WORK/out') -le 2 ]"
head -c 5000 /dev/urandom >"$WORK/random.onnx"
expect "random bytes as a model" 1 "$BIN" eval "$WORK/random.onnx"
head -c 20000 "$MODEL" >"$WORK/truncated.onnx"
expect "truncated model" 1 "$BIN" info "$WORK/truncated.onnx"
expect "missing model" 1 "$BIN" info "$WORK/nope.onnx"
expect "unknown model format" 1 "$BIN" eval "$WORK/model.txt"
expect "wrong dataset path" 1 "$BIN" eval "$CNN" --data "$WORK/no-such-dataset"
check "wrong dataset path says what to do" grep -q "no such file" "$WORK/out"
expect "bad --limit" 2 "$BIN" eval "$CNN" --limit -3
expect "bad --std" 2 "$BIN" eval "$CNN" --std 0
expect "unknown engine" 1 "$BIN" eval "$CNN" --engine quantum --limit 10
expect "run on an ANN says to convert first" 1 "$BIN" run "$CNN"
check "... and names the command" grep -q "neurocuda convert" "$WORK/out"
expect "bad threshold method" 2 "$BIN" convert "$CNN" -o "$WORK/x.ncsnn" --threshold p42
printf 'HDF\x89garbage' >"$WORK/corrupt.ncsnn"
expect "corrupt project file" 1 "$BIN" run "$WORK/corrupt.ncsnn"

if [ $have_data = 0 ]; then
  for t in eval convert run sweep bench export-nir; do skip "$t on Fashion-MNIST" "dataset-fashion-mnist is not installed"; done
  echo "1..$n"
  exit 0
fi

# --- eval -------------------------------------------------------------------------------
expect "eval --json" 0 "$BIN" eval "$CNN" "${PREP[@]}" --limit 500 --json
check "eval reports accuracy and images" python3 -c "
import json,sys; d=json.loads([l for l in open('$WORK/out') if l.startswith('{')][-1])
sys.exit(not (d['images'] == 500 and 0.8 < d['accuracy'] <= 1))"
expect "dataset whose images do not fit the model" 1 "$BIN" eval "$SRC/tests/fixtures/nir_ours/converted_cnn.nir"

# --- convert, run, export --------------------------------------------------------------------
expect "convert" 0 "$BIN" convert "$CNN" "${PREP[@]}" --calib-images 300 --limit 300 -o "$WORK/cnn.ncsnn" --json
check "convert wrote the project" test -s "$WORK/cnn.ncsnn"
check "convert reports ANN and QCFS accuracy" python3 -c "
import json,sys; d=json.loads([l for l in open('$WORK/out') if l.startswith('{')][-1])
sys.exit(not (d['ann_accuracy'] > 0.8 and d['qcfs_accuracy'] > 0.75))"
expect "convert with -T 0 is refused" 2 "$BIN" convert "$CNN" -o "$WORK/y.ncsnn" -T 0
expect "run --json" 0 "$BIN" run "$WORK/cnn.ncsnn" -T 16 --limit 100 --record "$WORK/rec.h5" --plots "$WORK/plots" --json
check "run JSON has the required keys" python3 -c "
import json,sys; d=json.loads([l for l in open('$WORK/out') if l.startswith('{')][-1])
ok = len(d['accuracy_by_step']) == 16 and d['ann_accuracy'] > 0.7 and d['firing_rate_by_layer'] \
     and d['calibration_error_by_layer'] and d['accuracy_by_step'][-1] > 0.7
sys.exit(not ok)"
check "run wrote the recording" test -s "$WORK/rec.h5"
check "run wrote the PNG charts" test -s "$WORK/plots/accuracy.png" -a -s "$WORK/plots/raster.png"
expect "run -T 0 is refused" 2 "$BIN" run "$WORK/cnn.ncsnn" -T 0
expect "run with Poisson encoding" 0 "$BIN" run "$WORK/cnn.ncsnn" -T 8 --limit 32 --encoding poisson --json
expect "export-nir refuses MaxPool without --approx" 1 "$BIN" export-nir "$WORK/cnn.ncsnn" -o "$WORK/cnn.nir"
check "... naming the workaround" grep -q -- "--maxpool avg" "$WORK/out"
expect "export-nir --approx" 0 "$BIN" export-nir "$WORK/cnn.ncsnn" -o "$WORK/cnn.nir" --approx
check "export-nir lists what other tools read differently" grep -q "Other tools will read this differently" "$WORK/out"
expect "info on the exported NIR" 0 "$BIN" info "$WORK/cnn.nir"
expect "run on the exported NIR" 0 "$BIN" run "$WORK/cnn.nir" "${PREP[@]}" -T 8 --limit 32 --json
# the NIR fixtures of shared/ sit beside the checkout (not in it): skipped, saying so, where it is absent
if [ -f "$SRC/../shared/fixtures/nir/cnn_sinabs.nir" ]; then
  expect "info on a Sinabs NIR file" 0 "$BIN" info "$SRC/../shared/fixtures/nir/cnn_sinabs.nir"
else
  skip "info on a Sinabs NIR file" "no ../shared/fixtures/nir beside this checkout"
fi
[ -f "$SRC/../shared/fixtures/nir/broken_braille_subgraph.nir" ] &&
  expect "a NIR file with a dangling edge is refused" 1 "$BIN" info "$SRC/../shared/fixtures/nir/broken_braille_subgraph.nir"

# --- sweep and bench ---------------------------------------------------------------------------
expect "sweep with a PNG" 0 "$BIN" sweep "$CNN" "${PREP[@]}" --threshold p99.9,max --calib-images 200 --limit 100 -T 8 \
  --png "$WORK/sweep.png" --json
check "sweep wrote the chart" test -s "$WORK/sweep.png"
expect "bench --json" 0 "$BIN" bench "$WORK/cnn.ncsnn" --batch 16 -T 4 --repeats 3 --warmup 1 --json
check "bench reports images per second" python3 -c "
import json,sys; d=json.loads([l for l in open('$WORK/out') if l.startswith('{')][-1])
sys.exit(not d['snn']['images_per_second'] > 0)"
expect "bench --train --json" 0 "$BIN" bench "$WORK/cnn.ncsnn" --batch 8 -T 2 --repeats 1 --warmup 0 --train --json
check "bench --train times a QCFS and a BPTT step and gives their memory" python3 -c "
import json,sys; d=json.loads([l for l in open('$WORK/out') if l.startswith('{')][-1])
q,b=d['qcfs-step'],d['bptt-step']
sys.exit(not (q['ms_per_batch'] > 0 and b['ms_per_batch'] > 0 and b['memory_bytes'] > q['memory_bytes'] > 0))"
# --- several GPUs: refused clearly where they are not (no crash, no half run) ------------------
expect "run --gpus 2 on the cpu engine is refused" 1 "$BIN" run "$WORK/cnn.ncsnn" -T 4 --limit 8 --gpus 2
check "... saying --gpus is for the gpu engine" grep -q -- "--gpus 2: the cpu engine runs on this machine's cores" "$WORK/out"
GPUS_LEFT=$("$BIN" engines --json | python3 -c "
import json,sys; d=json.loads([l for l in sys.stdin if l.startswith('{')][-1])
g=[e for e in d['engines'] if e['name'] == 'gpu'][0]; print(1 if g['available'] else 0)")
if [ "$GPUS_LEFT" = 1 ]; then
  expect "convert --gpus 64 on this machine is refused" 1 "$BIN" convert "$CNN" -o "$WORK/g.ncsnn" --engine gpu --gpus 64
  check "... naming the GPUs it has" grep -q -- "--gpus 64: this machine has" "$WORK/out"
else
  expect "sweep --engine gpu --gpus 2 without a GPU engine is refused" 1 "$BIN" sweep "$CNN" --engine gpu --gpus 2
  check "... saying why the GPU engine cannot run" grep -q -- "--gpus 2: the gpu engine cannot run here" "$WORK/out"
fi
expect "bench --gpus two is refused" 1 "$BIN" bench builtin:cnn-fmnist --engine gpu --gpus two
expect "engines --json" 0 "$BIN" engines --json
check "engines lists cpu as available" python3 -c "
import json,sys; d=json.loads([l for l in open('$WORK/out') if l.startswith('{')][-1])
sys.exit(not any(e['name'] == 'cpu' and e['available'] for e in d['engines']))"
NC_CPU_PATH=baseline expect "engines --json with NC_CPU_PATH=baseline" 0 "$BIN" engines --json
check "engines names the baseline CPU kernels when asked for" python3 -c "
import json,sys; d=json.loads([l for l in open('$WORK/out') if l.startswith('{')][-1])
sys.exit(not any(e.get('cpu_kernels') == 'baseline' for e in d['engines']))"
NC_CPU_PATH=sse9 expect "engines with an unknown NC_CPU_PATH" 0 "$BIN" engines
check "engines says why NC_CPU_PATH was not followed" grep -q "NC_CPU_PATH=sse9 is not a CPU path" "$WORK/out"
expect "--version --verbose" 0 "$BIN" --version --verbose
check "--version --verbose names the CPU kernels" grep -Eq "^CPU kernels: (avx512|avx2|baseline)" "$WORK/out"

echo "1..$n"
[ $failed -eq 0 ]
