#!/bin/bash
# Side-by-side CPU benchmark rounds: for each network, alternating in every
# round, `neurocuda bench` of each program given (e.g. the portable build and
# a -march=native one) and PyTorch simulating the same converted network
# (tools/pytorch_snn_bench.py).  Prints one line per measurement and the load
# average at the start of each round; the medians and ratios are read from it
# (docs/BENCHMARKS.md §4).
#   tools/cpu-bench-rounds.sh ROUNDS NEUROCUDA [NEUROCUDA...]
# Needs Debian's python3-torch (NC_WITH_TORCH=1 tools/install-deps.sh) and
# /tmp/b_M.ncsnn for M in mlp cnn_maxpool vgg_bn:
#   neurocuda convert tests/fixtures/models/M.onnx --mean 0.2860 --std 0.3530 \
#     --calib-images 500 -o /tmp/b_M.ncsnn
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:?usage: cpu-bench-rounds.sh ROUNDS NEUROCUDA...}
shift
nets=${NC_BENCH_NETS:-mlp cnn_maxpool vgg_bn}
for round in $(seq 1 "$rounds"); do
  # the machine's 1-minute load average: other work on it distorts every timing
  echo "round $round load: $(cut -d' ' -f1-3 /proc/loadavg)"
  for m in $nets; do
    reps=40
    [ "$m" = vgg_bn ] && reps=10
    for prog in "$@"; do
      line=$("$prog" bench "/tmp/b_$m.ncsnn" --engine cpu --batch 64 -T 8 --repeats $reps --warmup 3 | grep -E '^ *snn ')
      echo "round $round $m $prog: $line"
    done
    line=$(/usr/bin/python3 tools/pytorch_snn_bench.py "$m" --T 8 --batch 64 --threads 2 --repeats $reps | grep '<- best')
    echo "round $round $m torch: $line"
  done
done
