#!/usr/bin/env bash
# gpu-train-run.sh — on the GPU machine, from the repository root, after
# tools/gpu-bundle.sh made .gpu/nc.tar.xz (device run with carry
# [".gpu", ".fmnist"]; .fmnist holds the full Fashion-MNIST IDX files):
#
#   bash tools/gpu-train-run.sh [RUN...]
#
# 1. the GPU trainer's tests (test_gpu_train, test_gpu_faults, test_gpu_engine);
# 2. `neurocuda bench builtin:vgg-fmnist --engine gpu --batch 256 -T 8 --train`
#    and PyTorch's ANN forward+backward of the same network at batch 2048;
# 3. the fine-tuning runs of the "Fine-tuning" issue, all at once on the one
#    GPU (each is small): every RUN is NAME:MODEL:ARGS, ARGS with '+' for ' '.
#    Without RUN arguments the default set below runs: the best recipe found
#    per model and latency (docs/BENCHMARKS.md §6b; about 9 minutes together).
# Every log lands in $OUT; stdout is line-buffered so a run cut short by the
# time limit still shows its finished epochs.  NC_RUN_BUDGET (s, default 560)
# bounds the whole script.
set -uo pipefail
source "$(dirname "$0")/gpu-env.sh" || exit 1
source "$(dirname "$0")/gpu-tap.sh" || exit 1
budget=${NC_RUN_BUDGET:-560}
start=$SECONDS
left() { echo $((budget - (SECONDS - start))); }
log() { echo "[$((SECONDS - start))s] $*"; }
[ -n "${FMNIST:-}" ] || { echo "gpu-train-run.sh: carry .fmnist (the full Fashion-MNIST)" >&2; exit 1; }
common="--engine gpu --data $FMNIST --mean 0.2860 --std 0.3530 --eval-T 32 --json"

runs=("$@")
if [ ${#runs[@]} -eq 0 ]; then
  runs=(
    "vgg_t4:tests/fixtures/models/vgg_bn.onnx:--L+4+--finetune-qcfs+4+--finetune-bptt+6+--train-T+4"
    "vgg_t8:tests/fixtures/models/vgg_bn.onnx:--L+4+--finetune-qcfs+4+--finetune-bptt+6+--train-T+8"
    "resnet_t4:tests/fixtures/models/resnet.onnx:--per-channel+--L+4+--finetune-qcfs+4+--finetune-bptt+6+--train-T+4"
    "resnet_t8:tests/fixtures/models/resnet.onnx:--per-channel+--finetune-qcfs+3+--finetune-bptt+7+--train-T+8+--train-horizons+4,8+--lr+3e-4"
    "bundled_t8:assets/models/fmnist_cnn.onnx:--finetune-qcfs+2+--finetune-bptt+2+--train-T+8+--train-horizons+4,8"
  )
fi

nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1 | tee "$OUT/gpu.csv"
"$B/neurocuda" engines 2>&1 | tee "$OUT/engines.txt"

# ---- fine-tuning runs, in the background ----------------------------------------------
declare -A pid
for r in "${runs[@]}"; do
  name=${r%%:*}; rest=${r#*:}; model=${rest%%:*}; args=${rest#*:}; args=${args//+/ }
  log "start $name: convert $model $args"
  # shellcheck disable=SC2086
  ( cd /tmp && stdbuf -oL timeout $(( $(left) - 15 )) "$B/neurocuda" convert "$NC_SOURCE_DIR/$model" \
      -o "/tmp/$name.ncsnn" $common $args > "$OUT/ft_$name.txt" 2> >(tr '\r' '\n' | grep -v 'batch' > "$OUT/ft_$name.err");
    echo "rc=$? wall=$SECONDS" >> "$OUT/ft_$name.txt" ) &
  pid[$name]=$!
done

# ---- tests (NC_SKIP_TESTS=1: only the fine-tuning runs) ---------------------------------------
declare -A test_rc
tests=(test_gpu_train test_gpu_faults test_gpu_engine)
[ "${NC_SKIP_TESTS:-0}" = 1 ] && tests=()
for t in "${tests[@]}"; do
  log "$t"
  timeout 150 "$B/$t" > "$OUT/$t.log" 2>&1
  test_rc[$t]=$?
  grep -E '^not ok|# FAILED|mismatch' "$OUT/$t.log" | head -8
  log "$t: rc=${test_rc[$t]}, $(tap_counts "$t")"
done

# ---- one training step, ours and PyTorch's ---------------------------------------------------
if [ "${NC_SKIP_TESTS:-0}" != 1 ]; then
log "bench --train vgg-fmnist"
timeout 120 "$B/neurocuda" bench builtin:vgg-fmnist --engine gpu --batch 256 -T 8 --repeats 20 --warmup 3 --train \
  > "$OUT/bench_train_vgg.txt" 2>&1
tail -6 "$OUT/bench_train_vgg.txt"
timeout 120 python3 "$NC_SOURCE_DIR/tools/torch_train_floor.py" 2>&1 | tee "$OUT/torch_train_floor.txt"
fi

# ---- wait for the fine-tuning runs ---------------------------------------------------------
for name in "${!pid[@]}"; do
  wait "${pid[$name]}"
  log "$name done"
done
echo "==== summary ($((SECONDS - start))s) ===="
tap_summary
for f in "$OUT"/ft_*.txt; do
  echo "--- $(basename "$f")"
  grep -E 'epoch|accuracy|rc=|kept|error|neurocuda:' "$f" | grep -v '^{' | tail -14
  tail -3 "${f%.txt}.err"
done
# at most 8 files come back from a device run: the logs go into one archive
(cd "$OUT" && tar czf logs.tgz --remove-files -- *.log *.err *.csv engines.txt 2>/dev/null)
