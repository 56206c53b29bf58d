#!/usr/bin/env bash
# gpu-multi-run.sh — several GPUs of one host (issue 20), in one device run
# on a 2- or 4-GPU machine, from the repository root, after
# tools/gpu-bundle.sh made .gpu/nc.tar.xz:
#
#   bash tools/gpu-multi-run.sh        (device run with carry [".gpu"]; logs in $OUT)
#
# Steps, each log under $OUT, each with its own time limit:
#   1. the machine: nvidia-smi topology, `neurocuda engines` (the gpus option);
#   2. test_multi_rank: the CPU-rank tests and, on this machine, the GPU ranks
#      against one GPU (data-parallel steps, sharded simulation); test_gpu_train;
#   3. scaling of BPTT fine-tuning: `neurocuda bench builtin:vgg16-cifar
#      --train --gpus N` for N = 1, 2, 4 (those the machine has), the same
#      global batch (NC_MULTI_BATCH, default 256) at T = 4; bptt-step images/s
#      and the speed-up over one GPU (issue: ≥ 1.8× on 2, ≥ 3.4× on 4);
#   4. the loss curve: the same BPTT fine-tuning of tests/fixtures/models/
#      vgg_bn.onnx on Fashion-MNIST with --gpus 1 and --gpus N, the running
#      loss after every batch compared (tools/gpu-multi-compare.py);
#   5. a sweep of 16 settings (4 thresholds × layer/channel × L 4/8, as four
#      `neurocuda sweep` calls) on 1 GPU and on 4 (or all): wall time and the
#      speed-up (issue: ≥ 3.6× on 4), and the accuracy tables compared;
#   6. `neurocuda run` of one converted net on 1 and on N GPUs: the JSON must be
#      identical (the merge gives one GPU's numbers).
# NCCL_NVLS_ENABLE=0 (the program sets it too).  NC_RUN_BUDGET (s, default
# 560) bounds the whole run; the last lines are a summary.
set -uo pipefail
source "$(dirname "$0")/gpu-env.sh" || exit 1
export NCCL_NVLS_ENABLE=0
budget=${NC_RUN_BUDGET:-560}
start=$SECONDS
left() { echo $((budget - (SECONDS - start))); }
log() { echo "[$((SECONDS - start))s] $*"; }
batch=${NC_MULTI_BATCH:-256}
data=/tmp/nc/data/fmnist10k
fm="--data $data --mean 0.2860 --std 0.3530"
declare -a summary

# ---- 1. the machine ---------------------------------------------------------------
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
log "$gpus GPUs"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
"$B/neurocuda" engines --json > "$OUT/engines.json" 2>&1
grep -o '"gpus"[^}]*' "$OUT/engines.json" | head -1
[ "$gpus" -ge 2 ] || { log "fewer than 2 GPUs: nothing to measure here"; exit 1; }
counts=(1 2)
[ "$gpus" -ge 4 ] && counts+=(4)
most=${counts[-1]}

# ---- 2. tests ------------------------------------------------------------------------
for t in test_multi_rank test_gpu_train; do
  [ -x "$B/$t" ] || { log "no $t in the bundle"; continue; }
  timeout 180 "$B/$t" > "$OUT/$t.log" 2>&1
  rc=$?
  grep -E '^(not ok|ok .*SKIP)|# FAILED|^# (gpu|GPU)' "$OUT/$t.log" | head -20
  summary+=("$t: rc=$rc, $(grep -c '^ok' "$OUT/$t.log") ok, $(grep -c '^not ok' "$OUT/$t.log") not ok")
  log "${summary[-1]}"
done

# ---- 3. scaling of BPTT steps --------------------------------------------------------
for n in "${counts[@]}"; do
  [ "$(left)" -gt 120 ] || { log "skip bench on $n GPUs: out of time"; continue; }
  timeout 150 "$B/neurocuda" bench builtin:vgg16-cifar --engine gpu --gpus "$n" --train --batch "$batch" -T 4 \
    --repeats 10 --warmup 3 --no-peak --json > "$OUT/bench_vgg16_gpus$n.txt" 2>&1
  log "bench, $n GPUs: rc=$? $(grep -E '^  bptt-step' "$OUT/bench_vgg16_gpus$n.txt")"
done
speedups=$(python3 - "$OUT" "${counts[@]}" <<'PY'
import json, sys
out, counts = sys.argv[1], sys.argv[2:]
ips = {}
for n in counts:
    try:
        lines = [l for l in open(f"{out}/bench_vgg16_gpus{n}.txt") if l.startswith("{")]
        ips[n] = json.loads(lines[-1])["bptt-step"]["images_per_second"]
    except Exception:
        pass
base = ips.get("1")
print(", ".join(f"{n} GPU{'s' if n != '1' else ''}: {v:.0f} img/s" + (f" ({v / base:.2f}x)" if base else "")
                for n, v in ips.items()))
PY
)
summary+=("VGG16 BPTT steps (batch $batch, T 4): $speedups")
log "${summary[-1]}"

# ---- 4. the loss curve ---------------------------------------------------------------------
curve() { # gpus
  NC_TRAIN_LOG=1 timeout 200 "$B/neurocuda" convert tests/fixtures/models/vgg_bn.onnx $fm --engine gpu --gpus "$1" --L 4 \
    --finetune-bptt 1 --train-T 4 --batch 64 --eval-T 8 --limit 1000 -o "$OUT/vgg_gpus$1.ncsnn" --json \
    > "$OUT/finetune_gpus$1.txt" 2> "$OUT/finetune_gpus$1.err"
  log "fine-tuning on $1 GPU(s): rc=$?"
}
if [ "$(left)" -gt 200 ]; then
  curve 1
  curve "$most"
  cmp=$(python3 tools/gpu-multi-compare.py loss "$OUT/finetune_gpus1.err" "$OUT/finetune_gpus$most.err" 2>&1)
  summary+=("loss curve, $most GPUs vs 1: $cmp")
  log "${summary[-1]}"
fi

# ---- 5. a sweep of 16 settings -----------------------------------------------------------------
sweep() { # gpus: four sweeps of four thresholds
  local t0=$SECONDS
  for pc in "" "--per-channel"; do
    for L in 4 8; do
      timeout 150 "$B/neurocuda" sweep tests/fixtures/models/vgg_bn.onnx $fm --engine gpu --gpus "$1" \
        --threshold max,p99,p99.9,p99.99 $pc --L $L -T 32 --limit 10000 --json \
        >> "$OUT/sweep_gpus$1.txt" 2>&1 || echo "sweep failed: $pc L $L" >> "$OUT/sweep_gpus$1.txt"
    done
  done
  echo $((SECONDS - t0))
}
if [ "$(left)" -gt 150 ]; then
  s1=$(sweep 1)
  sN=$(sweep "$most")
  summary+=("sweep of 16 settings: ${s1}s on 1 GPU, ${sN}s on $most ($(python3 -c "print(f'{$s1 / max($sN, 1):.2f}x')")); $(python3 tools/gpu-multi-compare.py sweep "$OUT/sweep_gpus1.txt" "$OUT/sweep_gpus$most.txt" 2>&1)")
  log "${summary[-1]}"
fi

# ---- 6. one run, 1 GPU against N -----------------------------------------------------------------
if [ -f "$OUT/vgg_gpus1.ncsnn" ] && [ "$(left)" -gt 60 ]; then
  for n in 1 "$most"; do
    timeout 60 "$B/neurocuda" run "$OUT/vgg_gpus1.ncsnn" $fm --engine gpu --gpus "$n" -T 16 --limit 2000 --json \
      > "$OUT/run_gpus$n.txt" 2>&1
  done
  summary+=("run on $most GPUs vs 1: $(python3 tools/gpu-multi-compare.py run "$OUT/run_gpus1.txt" "$OUT/run_gpus$most.txt" 2>&1)")
  log "${summary[-1]}"
fi

echo "==== summary ($gpus GPUs, $((SECONDS - start)) s)"
printf '%s\n' "${summary[@]}"
