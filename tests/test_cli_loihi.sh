#!/bin/bash
# test_cli_loihi.sh — the loihi engine from the command line: `run --engine
# loihi` with its report and options, `export-lava` and the netx file read
# back with h5py, and bad input (a clear one-line error, never a crash).
# TAP output; argument: the neurocuda binary.
set -u
BIN=${1:?usage: test_cli_loihi.sh NEUROCUDA}
SRC=${NC_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
FIX=$SRC/tests/fixtures/models
PREP=(--mean 0.2860 --std 0.3530)
source "$(dirname "$0")/cli_common.sh"
has() { # NAME TEXT: $WORK/out contains TEXT
  if grep -qF -- "$2" "$WORK/out"; then ok "$1"; else not_ok "$1 (no '$2')"; fi
}

# a python with h5py (Debian's python3-h5py lives in /usr/bin/python3)
PY=
for p in /usr/bin/python3 python3; do
  if "$p" -c 'import h5py, numpy' >/dev/null 2>&1; then PY=$p; break; fi
done

expect "export-lava --help" 0 "$BIN" export-lava --help && has "help states what netx cannot express" "reset by subtraction"
expect "neurocuda --help lists export-lava" 0 "$BIN" --help && has "export-lava in the command list" "export-lava"
expect "run --help lists the loihi options" 0 "$BIN" run --help && has "run --help: --loihi-delay" "--loihi-delay"
expect "engines: loihi available" 0 "$BIN" engines --json
if grep '^{' "$WORK/out" | python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(not any(e['name']=='loihi' and e['available'] for e in d['engines']))"; then
  ok "engines --json says loihi is available"
else
  not_ok "engines --json says loihi is available"
fi
if grep '^{' "$WORK/out" | python3 -c "
import json, sys
d = json.load(sys.stdin)
keys = [o['key'] for e in d['engines'] if e['name'] == 'loihi' for o in e['options']]
sys.exit(keys != ['threads', 'reset', 'fire', 'delay', 'spikes', 'message-bits', 'vth', 'input-bits'])"; then
  ok "engines --json lists the loihi engine's options"
else
  not_ok "engines --json lists the loihi engine's options"
fi
expect "export-lava without -o" 2 "$BIN" export-lava "$FIX/mlp.onnx"
expect "export-lava of an ANN fails" nonzero "$BIN" export-lava "$FIX/mlp.onnx" -o "$WORK/x.net" &&
  has "it says to convert first" "convert it first"
expect "export-lava of a missing file fails" nonzero "$BIN" export-lava "$WORK/none.ncsnn" -o "$WORK/x.net"
expect "run --loihi-reset bogus is refused" 2 "$BIN" run "$FIX/mlp.onnx" --engine loihi --loihi-reset bogus &&
  has "it names the choices" "subtract or zero"

if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  skip "convert, run --engine loihi, export-lava on the fixtures" "Fashion-MNIST not installed"
  echo "1..$n"
  exit 0
fi

for m in mlp vgg_bn cnn_maxpool; do
  expect "convert $m" 0 "$BIN" convert "$FIX/$m.onnx" "${PREP[@]}" --calib-images 200 --limit 200 -o "$WORK/$m.ncsnn"
done

expect "run --engine loihi (mlp, 100 images, T 16)" 0 "$BIN" run "$WORK/mlp.ncsnn" --engine loihi --limit 100 -T 16 --json
has "run prints the quantisation report" "Loihi quantisation"
has "run prints the hardware check" "Loihi 2 hardware check"
has "run prints the latency T + D" "latency 18 steps for T = 16"
has "run prints the overflow counts" "v saturated"
acc=$(grep '^{' "$WORK/out" | tail -n 1 | python3 -c "import json,sys; print(json.load(sys.stdin)['accuracy_by_step'][-1])" 2>/dev/null)
if python3 -c "import sys; sys.exit(not (float('$acc') > 0.7))" 2>/dev/null; then ok "loihi mlp accuracy $acc > 0.7"; else not_ok "loihi mlp accuracy '$acc' > 0.7"; fi

expect "run --engine loihi with every option" 0 "$BIN" run "$WORK/mlp.ncsnn" --engine loihi --limit 20 -T 8 \
  --loihi-reset zero --loihi-fire ge --loihi-delay raw --loihi-spikes graded --loihi-message-bits 4 --loihi-vth 2000 \
  --loihi-input-bits 6
has "the options are reported" "reset to zero, fire on >=, graded spikes, synaptic delay raw"
expect "run --engine loihi with --engine-opt" 0 "$BIN" run "$WORK/mlp.ncsnn" --engine loihi --limit 20 -T 8 \
  --engine-opt reset=zero --engine-opt fire=ge --engine-opt delay=raw --engine-opt spikes=graded
has "the settings are reported" "reset to zero, fire on >=, graded spikes, synaptic delay raw"
expect "a --loihi-* switch wins over --engine-opt" 0 "$BIN" run "$WORK/mlp.ncsnn" --engine loihi --limit 20 -T 8 \
  --engine-opt delay=raw --loihi-delay off
has "the switch's delay is used" "synaptic delay off"
expect "run --engine-opt vth=0 is refused" 1 "$BIN" run "$WORK/mlp.ncsnn" --engine loihi --engine-opt vth=0 &&
  has "it names the option and its range" "option vth wants an integer in 1…131071"
expect "run --engine loihi: cnn_maxpool warns about MaxPool" 0 "$BIN" run "$WORK/cnn_maxpool.ncsnn" --engine loihi \
  --limit 10 -T 4
has "the hardware check names the MaxPool" "has no Loihi 2 equivalent"

expect "export-lava mlp" 0 "$BIN" export-lava "$WORK/mlp.ncsnn" -o "$WORK/mlp.net" -T 16
has "export-lava states the subtractive reset" "netx cannot express reset by subtraction"
expect "export-lava vgg_bn (average pools folded)" 0 "$BIN" export-lava "$WORK/vgg_bn.ncsnn" -o "$WORK/vgg.net"
has "the pool folding is listed" "is folded into conv"
expect "export-lava cnn_maxpool is refused" 1 "$BIN" export-lava "$WORK/cnn_maxpool.ncsnn" -o "$WORK/cnn.net" &&
  has "it names the MaxPool and what to do" "--maxpool avg"
if [ -e "$WORK/cnn.net" ]; then not_ok "a refused export leaves no file"; else ok "a refused export leaves no file"; fi
ls "$WORK" | grep -q 'tmp-' && not_ok "no temporary file left" || ok "no temporary file left"

if [ -z "$PY" ]; then
  skip "netx files read back with h5py" "python3-h5py not installed"
else
  for f in mlp vgg; do
    if "$PY" "$SRC/tests/h5py_read_netx.py" "$WORK/$f.net" >"$WORK/out" 2>&1; then ok "h5py reads $f.net as netx"; else
      not_ok "h5py reads $f.net as netx"; fi
    cp "$WORK/out" "$WORK/$f.json"
  done
  # mlp: input, flatten, 3 dense layers of 256/128/10 (fixtures/models/mlp.json), tSample = T + 2
  if "$PY" -c "
import json, sys
d = json.load(open('$WORK/mlp.json'))
ok = d['types'] == ['input', 'flatten', 'dense', 'dense', 'dense'] and d['shapes'][0] == [1, 28, 28]
ok = ok and [s[0] for s in d['weight_shapes']] == [s[0] for s in d['shapes'][2:]] and d['weight_shapes'][0][1] == 784
ok = ok and d['tSample'] == 18 and all(max(x, -y) in (254, 256) for x, y in zip(d['w_max'], d['w_min']))
sys.exit(not ok)"; then ok "mlp.net: layer types, shapes, weights using the 8-bit range"; else
    cp "$WORK/mlp.json" "$WORK/out"; not_ok "mlp.net: layer types, shapes, weights using the 8-bit range"; fi
  if "$PY" -c "
import json, sys
d = json.load(open('$WORK/vgg.json'))
t = d['types']
ok = t == ['input', 'conv', 'conv', 'conv', 'conv', 'flatten', 'dense', 'dense']
ok = ok and d['weight_shapes'][2][2:] == [6, 6] and d['weight_shapes'][4][1] == 64 * 14 * 14
sys.exit(not ok)"; then ok "vgg.net: pools folded (6x6 kernel, dense over 64x14x14)"; else
    cp "$WORK/vgg.json" "$WORK/out"; not_ok "vgg.net: pools folded (6x6 kernel, dense over 64x14x14)"; fi
fi

echo "1..$n"
[ $failed -eq 0 ]
