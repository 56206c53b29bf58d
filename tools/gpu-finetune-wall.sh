#!/usr/bin/env bash
# gpu-finetune-wall.sh — on the GPU machine, from the repository root, after
# tools/gpu-bundle.sh made .gpu/nc.tar.xz (device run with carry [".gpu"], or
# [".gpu", ".fmnist"] for the full training set):
#
#   bash tools/gpu-finetune-wall.sh [CONV...]
#
# The wall time of one end-to-end fine-tuning of the VGG-style fixture on the
# GPU (calibration, 4 QCFS and 6 BPTT epochs at T = 8, the test sweeps up to
# T = 32 on 10 000 images), once per convolution path CONV (NC_GPU_CONV:
# im2col = the first design, for the engine and the trainer alike; auto = as
# built), one after the other so that neither shares the GPU.  Default:
# "im2col auto".  Each run's log is $OUT/ft_wall_CONV.txt (the --json line
# last); $OUT/ft_wall.txt has one line per run: wall seconds and the test
# accuracy at T = 8.  NC_FT_LIMIT (s, default 240) bounds each run;
# NC_FT_ARGS replaces the fine-tuning options.
set -uo pipefail
source "$(dirname "$0")/gpu-env.sh" || exit 1
data=${FMNIST:-/tmp/nc/data/fmnist10k} # without .fmnist the 10 000 test images double as the training split
limit=${NC_FT_LIMIT:-240}
args=${NC_FT_ARGS:---L 4 --finetune-qcfs 4 --finetune-bptt 6 --train-T 8}
convs=("$@")
[ ${#convs[@]} -eq 0 ] && convs=(im2col auto)
: > "$OUT/ft_wall.txt"
for conv in "${convs[@]}"; do
  t0=$SECONDS
  # shellcheck disable=SC2086 # args is a list of options on purpose
  ( cd /tmp && NC_GPU_CONV=$conv stdbuf -oL timeout "$limit" "$B/neurocuda" convert \
      "$NC_SOURCE_DIR/tests/fixtures/models/vgg_bn.onnx" -o "/tmp/ft_$conv.ncsnn" --engine gpu --data "$data" \
      --mean 0.2860 --std 0.3530 --eval-T 32 --json $args ) > "$OUT/ft_wall_$conv.txt" 2>&1
  rc=$?
  acc=$(python3 - "$OUT/ft_wall_$conv.txt" <<'EOF'
import json, sys
for line in reversed(open(sys.argv[1], errors="replace").read().splitlines()):
    if line.startswith("{"):
        try:
            j = json.loads(line)
        except ValueError:
            continue
        last = j["stages"][-1]
        steps = last["snn_accuracy_by_step"]
        print(f"{steps[7]:.4f} ({last['stage']}; stage seconds {[round(x['seconds'], 1) for x in j['stage_seconds']]})")
        break
else:
    print("no --json line")
EOF
)
  echo "conv=$conv rc=$rc wall $((SECONDS - t0)) s accuracy at T=8: $acc" | tee -a "$OUT/ft_wall.txt"
done
