#!/usr/bin/env bash
# gpu-run.sh — on the GPU machine, from the repository root (the device run's
# working directory), after tools/gpu-bundle.sh made .gpu/nc.tar.xz here:
#
#   bash tools/gpu-run.sh            (device run with carry [".gpu"]; logs in $OUT)
#
# Unpacks the bundle into /tmp/nc, then, each step with its own time limit and
# its full log under $OUT:
#   1. device facts (nvidia-smi, `neurocuda engines`);
#   2. the GPU tests (test_gpu_kernels, test_gpu_engine, and both again with
#      NC_GPU_CONV=cudnn; test_gpu_train, and again with NC_GPU_CONV=im2col;
#      test_gpu_train_graphs; test_gpu_faults; fixtures read from
#      this checkout through NC_SOURCE_DIR);
#   3. `neurocuda bench` on the issue's networks (builtin:vgg-fmnist and
#      builtin:cnn-fmnist at batch 1024, builtin:vgg16-cifar at batch 256;
#      T = 8) in fp32, tf32 and bf16, and the VGG-style net with the other
#      convolution path (NC_GPU_CONV), and VGG-style and CNN node by node
#      (NC_GPU_GRAPHS=0; NC_BENCH_NOGRAPHS=0 skips it): CUDA events, median of
#      20 after 3 warm-ups; the cnn_maxpool ONNX fixture on real Fashion-MNIST images;
#   4. the anchors: the same networks as plain ANNs in PyTorch (batch 8192;
#      VGG16 2048 = 256 × 8) and as SpikingJelly-style multi-step SNNs in
#      eager PyTorch (batch 1024 / 256, T = 8), fp32 with TF32 off, tf32, bf16;
#   5. one profile: nsys (VGG-style, bf16) where the image has it, else ncu
#      (VGG-style, NC_PROFILE_PREC); with NC_PROFILE_TRAIN=1 also ncu's kernel
#      times of one `bench --train` (precision NC_PROFILE_TRAIN_PREC), summed
#      by kernel;
#   6. if time is left: compute-sanitizer (memcheck on the kernel, engine and
#      trainer tests, racecheck on the trainer test and the transposes;
#      NC_SANITIZE overrides).
# The last lines printed are a summary table (the device reply keeps the end
# of the output).  NC_RUN_BUDGET (seconds, default 560) bounds the whole run.
# Shorter calls: NC_TESTS (test names), NC_PRECISIONS, NC_BENCH_NETS,
# NC_ACC_NEED (seconds needed to start the accuracy step), NC_ACC_PRECISIONS
# (the accuracy step's precisions), NC_TRAIN_BENCH=1 (one BPTT step against
# PyTorch's, for each conv:precision pair of NC_TRAIN_RUNS), NC_TORCH_FLOOR=0
# (no PyTorch inference anchors), NC_PROFILE=0 (no inference profile),
# NC_SANITIZE, NC_SANITIZE_LIMIT (seconds per sanitizer entry, at most).
set -uo pipefail
OUT=${OUT:-/tmp/nc-out}
mkdir -p "$OUT"
source "$(dirname "$0")/gpu-tap.sh" || exit 1
root=$(pwd)
budget=${NC_RUN_BUDGET:-560}
start=$SECONDS
left() { echo $((budget - (SECONDS - start))); }
log() { echo "[$((SECONDS - start))s] $*"; }

# ---- unpack (tools/gpu-env.sh: B, NC_SOURCE_DIR, LD_LIBRARY_PATH) -----------------
source "$root/tools/gpu-env.sh" || exit 1
ldd "$B/neurocuda" > "$OUT/ldd.txt" 2>&1
grep 'not found' "$OUT/ldd.txt" && log "WARNING: missing libraries (see ldd.txt)"

# ---- 1. device --------------------------------------------------------------------
log "device"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv \
  2>&1 | tee "$OUT/gpu.csv"
"$B/neurocuda" engines 2>&1 | tee "$OUT/engines.txt"

# ---- 2. tests -------------------------------------------------------------------
# Each GPU test once as built (cuDNN convolutions where the engine picks them),
# and test_gpu_kernels / test_gpu_engine again with NC_GPU_CONV=cudnn (every
# precision cuDNN has, fp32 included: channels-last values against the CPU
# engine) and NC_GPU_CONV=im2col (the path without cuDNN).
declare -A test_rc
run_test() { # name binary limit [env...]
  local name=$1 bin=$2 lim=$3
  shift 3
  # NC_TESTS="name ...": run only these (a short call after a fix)
  [ -n "${NC_TESTS:-}" ] && [[ " $NC_TESTS " != *" $name "* ]] && return
  [ "$(left)" -lt $((lim / 2 + 60)) ] && { log "skip $name: out of time"; return; }
  log "$name (limit ${lim}s)"
  env "$@" timeout "$lim" "$B/$bin" > "$OUT/$name.log" 2>&1
  test_rc[$name]=$?
  grep -E '^(not ok|ok .*SKIP)|# FAILED' "$OUT/$name.log" | head -20
  log "$name: rc=${test_rc[$name]}, $(tap_counts "$name")"
}
tests=(test_gpu_kernels test_gpu_engine test_gpu_train test_gpu_train_graphs test_gpu_faults)
run_test test_gpu_kernels test_gpu_kernels 90
run_test test_gpu_engine test_gpu_engine 150
run_test test_gpu_kernels_cudnn test_gpu_kernels 90 NC_GPU_CONV=cudnn
run_test test_gpu_engine_cudnn test_gpu_engine 150 NC_GPU_CONV=cudnn
[ -x "$B/test_gpu_train" ] && run_test test_gpu_train test_gpu_train 90
[ -x "$B/test_gpu_train" ] && run_test test_gpu_train_im2col test_gpu_train 90 NC_GPU_CONV=im2col
[ -x "$B/test_gpu_train_graphs" ] && run_test test_gpu_train_graphs test_gpu_train_graphs 60
[ -x "$B/test_gpu_faults" ] && run_test test_gpu_faults test_gpu_faults 60
tests+=(test_gpu_kernels_cudnn test_gpu_engine_cudnn test_gpu_train_im2col)

# ---- 3. benchmarks ------------------------------------------------------------------
export NC_GPU_PROFILE=1  # one extra pass after the timed ones: per-node times on stderr (in the logs)
bench() { # net precision batch [tag [env...]]
  local net=$1 p=$2 b=$3 tag=${4:-}
  shift 4 2>/dev/null || shift $#
  local f="$OUT/bench_${net}_${p}${tag}.txt"
  [ "$(left)" -lt 90 ] && { log "skip bench $net $p$tag: out of time"; return; }
  log "bench $net $p$tag"
  env "$@" timeout 120 "$B/neurocuda" bench "builtin:$net" --engine gpu --precision "$p" --batch "$b" -T 8 \
    --repeats 20 --warmup 3 --no-peak --json > "$f" 2>&1
  echo "rc=$?" >> "$f"
}
for net in ${NC_BENCH_NETS:-vgg-fmnist cnn-fmnist vgg16-cifar}; do
  b=1024; [ $net = vgg16-cifar ] && b=256
  for p in ${NC_PRECISIONS:-fp32 tf32 bf16}; do
    bench $net $p $b
  done
done
[ -z "${NC_PRECISIONS:-}" ] && bench vgg-fmnist fp32 1024 _cudnn NC_GPU_CONV=cudnn
# bf16's spike convs on cuDNN (8-bit currents), on the two-bf16-part kernel, and on the fixed-point
# kernel with the IF in a kernel of its own and with the IF in the epilogue of every such conv (64
# input channels too), beside those of conv=auto (16-bit fixed point on int8 tensor cores where it
# fits, the IF in its epilogue where the conv has 32 input channels)
if [[ " ${NC_PRECISIONS:-bf16} " == *" bf16 "* ]]; then
  for net in ${NC_BENCH_NETS:-vgg-fmnist cnn-fmnist}; do
    [ $net = vgg16-cifar ] && continue
    bench $net bf16 1024 _cudnn NC_GPU_CONV=cudnn
    bench $net bf16 1024 _bf16x2 NC_GPU_CONV=bf16x2
    bench $net bf16 1024 _unfused NC_GPU_CONV=unfused
    bench $net bf16 1024 _fused NC_GPU_CONV=fused
  done
fi
# node by node (no CUDA graphs), side by side with the replayed passes above
if [ "${NC_BENCH_NOGRAPHS:-1}" = 1 ]; then
  for p in ${NC_PRECISIONS:-fp32 bf16}; do
    bench vgg-fmnist $p 1024 _nographs NC_GPU_GRAPHS=0
    bench cnn-fmnist $p 1024 _nographs NC_GPU_GRAPHS=0
  done
fi
[ -n "${NC_BENCH_PATHS:-}" ] && bench vgg-fmnist tf32 1024 _im2col NC_GPU_CONV=im2col
[ -n "${NC_BENCH_PATHS:-}" ] && bench vgg-fmnist bf16 1024 _im2col NC_GPU_CONV=im2col
[ -n "${NC_BENCH_PATHS:-}" ] && bench vgg-fmnist split-bf16 1024
if [ -d /tmp/nc/data/fmnist ] && [ "$(left)" -gt 60 ]; then
  log "bench cnn_maxpool.onnx (Fashion-MNIST subset)"
  timeout 120 "$B/neurocuda" bench tests/fixtures/models/cnn_maxpool.onnx --engine gpu --data /tmp/nc/data/fmnist \
    --mean 0.286 --std 0.353 --batch 1024 -T 8 --json > "$OUT/bench_cnn_maxpool_onnx_fp32.txt" 2>&1
fi

# ---- 3a. one training step (NC_TRAIN_BENCH=1): ours with cuDNN and with im2col, and PyTorch's ----
if [ "${NC_TRAIN_BENCH:-0}" = 1 ] && [ "$(left)" -gt 120 ]; then
  # NC_TRAIN_RUNS: conv path:precision[:nographs] (the trainer's convolutions follow
  # --precision; nographs: every step queued call by call, NC_GPU_GRAPHS=0)
  for run in ${NC_TRAIN_RUNS:-auto:fp32 auto:bf16 auto:tf32 im2col:fp32}; do
    IFS=: read -r conv prec nographs <<< "$run"
    name=train_vgg_${conv}_$prec${nographs:+_nographs}
    log "bench --train vgg-fmnist (conv=$conv, precision $prec${nographs:+, no graphs})"
    NC_GPU_CONV=$conv NC_GPU_GRAPHS=$([ -n "$nographs" ] && echo 0 || echo 1) timeout 120 "$B/neurocuda" bench \
      builtin:vgg-fmnist --engine gpu --precision "$prec" --batch 256 -T 8 --repeats 20 --warmup 3 --train \
      > "$OUT/$name.txt" 2>&1
    tail -6 "$OUT/$name.txt"
  done
  timeout 120 python3 "$root/tools/torch_train_floor.py" 2>&1 | tee "$OUT/torch_train_floor.txt"
fi

# ---- 3b. accuracy by step on real images: each GPU precision against the CPU engine ----------
acc_data=/tmp/nc/data/fmnist10k
[ -d $acc_data ] || acc_data=/tmp/nc/data/fmnist
if [ -d /tmp/nc/data/fmnist ] && [ "$(left)" -gt "${NC_ACC_NEED:-150}" ]; then
  log "accuracy: fixture models, $(basename $acc_data) test images, T = 8, cpu vs gpu fp32/tf32/bf16"
  for m in vgg_bn fmnist_cnn_dynamo cnn_maxpool; do
    src=tests/fixtures/models/$m.onnx
    [ $m = fmnist_cnn_dynamo ] && src=assets/models/fmnist_cnn.onnx
    timeout 60 "$B/neurocuda" convert "$src" --data /tmp/nc/data/fmnist --mean 0.2860 --std 0.3530 \
      --calib-images 500 -o "/tmp/acc_$m.ncsnn" > "$OUT/acc_convert_$m.txt" 2>&1 || continue
    for e in cpu $(printf 'gpu:%s ' ${NC_ACC_PRECISIONS:-${NC_PRECISIONS:-fp32 tf32 bf16}}); do
      opt=(); [ "${e#gpu:}" != "$e" ] && opt=(--engine gpu --engine-opt "precision=${e#gpu:}")
      timeout 90 "$B/neurocuda" run "/tmp/acc_$m.ncsnn" --data $acc_data -T 8 --batch 256 "${opt[@]}" \
        --json 2>&1 | grep '^{' | tail -1 > "$OUT/acc_${m}_${e/:/_}.json"
    done
  done
  python3 - "$OUT" <<'EOF2' | tee "$OUT/accuracy.txt"
import glob, json, os, sys
out = sys.argv[1]
for m in ["vgg_bn", "fmnist_cnn_dynamo", "cnn_maxpool"]:
    acc = {}
    for e in ["cpu", "gpu_fp32", "gpu_tf32", "gpu_bf16", "gpu_split-bf16", "gpu_split-bf16x2"]:
        if not os.path.exists(os.path.join(out, f"acc_{m}_{e}.json")):
            continue  # a precision this run left out (NC_PRECISIONS)
        try:
            acc[e] = json.load(open(os.path.join(out, f"acc_{m}_{e}.json")))["accuracy_by_step"]
        except Exception as x:
            acc[e] = None
    if not acc.get("cpu"):
        print(f"accuracy {m}: no cpu result"); continue
    for e, a in acc.items():
        if e == "cpu": continue
        if not a: print(f"accuracy {m} {e}: FAILED"); continue
        d = max(abs(x - y) for x, y in zip(a, acc["cpu"]))
        print(f"accuracy {m:18s} {e:9s} T=8 {a[-1]:.4f} (cpu {acc['cpu'][-1]:.4f}), max |diff| over steps {100*d:.2f} points")
EOF2
fi

# ---- 4. the dense floor in PyTorch ---------------------------------------------------
if [ "${NC_TORCH_FLOOR:-1}" = 1 ] && [ "$(left)" -gt 60 ]; then
  log "PyTorch dense floor"
  lim=$(( $(left) - 20 )); [ $lim -gt 200 ] && lim=200
  timeout "$lim" python3 "$root/tools/torch_floor.py" > "$OUT/torch_floor.jsonl" 2> "$OUT/torch_floor.err"
  log "PyTorch rc=$?"
fi

# ---- 5. one profile: where the time of the bf16 VGG-style pass goes -------------------------
nsys=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
log "profilers: nsys=${nsys:-none} ncu=${ncu:-none}"
ncu_train=$ncu                            # NC_PROFILE_TRAIN=1 profiles the training step even so
[ "${NC_PROFILE:-1}" = 0 ] && nsys= ncu=  # NC_PROFILE=0: no inference profile this call
if [ -z "$nsys" ] && [ -n "$ncu" ] && [ "$(left)" -gt 120 ]; then
  log "ncu: the kernels of one ${NC_PROFILE_PREC:-fp32} VGG-style pass"
  timeout 100 "$ncu" --target-processes all --launch-skip 200 --launch-count 40 --section SpeedOfLight \
    "$B/neurocuda" bench builtin:vgg-fmnist --engine gpu --precision ${NC_PROFILE_PREC:-fp32} --batch 1024 -T 8 --repeats 2 --warmup 1 \
    --no-peak > "$OUT/ncu_vgg_${NC_PROFILE_PREC:-fp32}.txt" 2>&1
  log "ncu rc=$?"
fi
if [ -n "$nsys" ] && [ "$(left)" -gt 120 ]; then
  log "nsys profile vgg-fmnist bf16"
  timeout 90 "$nsys" profile -o "$OUT/nsys_vgg_bf16" --force-overwrite true --stats=true \
    "$B/neurocuda" bench builtin:vgg-fmnist --engine gpu --precision bf16 --batch 1024 -T 8 --repeats 5 --warmup 2 \
    --no-peak > "$OUT/nsys_vgg_bf16.txt" 2>&1
  log "nsys rc=$?"
  rm -f "$OUT"/nsys_vgg_bf16.qdrep "$OUT"/nsys_vgg_bf16.sqlite
fi
# NC_NCU_KERNEL=regex: ncu's detailed sections (throughputs, stall reasons,
# occupancy, shared-memory bank conflicts) for the first launches of the
# kernels whose names match, in one bf16 VGG-style pass; NC_NCU_COUNT launches
# (default 3: each of the net's spike convs once)
if [ -n "${NC_NCU_KERNEL:-}" ] && [ -n "$ncu_train" ] && [ "$(left)" -gt 100 ]; then
  log "ncu: detailed sections of kernels matching ${NC_NCU_KERNEL}"
  timeout 90 "$ncu_train" --target-processes all --kernel-name "regex:${NC_NCU_KERNEL}" \
    --launch-count "${NC_NCU_COUNT:-3}" --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section MemoryWorkloadAnalysis_Tables --section ComputeWorkloadAnalysis --section Occupancy \
    --section WarpStateStats --section SchedulerStats --section LaunchStats --section InstructionStats \
    "$B/neurocuda" bench builtin:vgg-fmnist --engine gpu --precision bf16 --batch 1024 -T 8 --repeats 1 --warmup 0 \
    --no-peak > "$OUT/ncu_kernels.txt" 2>&1
  log "ncu rc=$?"
fi

# ---- 5b. where a training step's time goes (NC_PROFILE_TRAIN=1): every kernel of one
# `bench --train` timed by ncu, summed by name (the image has no nsys) ----
# Only the steady BPTT steps: the trainer brackets its syncs 30 to 46 in a
# profiler range (NC_GPU_PROFILE_SYNCS; since the step runs as a graph, one
# sync a step, so 16 steps, counted by their optimiser launches; the QCFS
# steps and the first BPTT steps, whose planning runs hundreds of cuDNN trial
# kernels, come before), and ncu profiles only inside it.
if [ "${NC_PROFILE_TRAIN:-0}" = 1 ] && [ -n "$ncu_train" ] && [ "$(left)" -gt 150 ]; then
  ncu=$ncu_train
  log "ncu: kernel times of the steady BPTT steps of bench --train (vgg-fmnist, batch 256, T 8, ${NC_PROFILE_TRAIN_PREC:-fp32})"
  NC_GPU_PROFILE_SYNCS=30:46 timeout 150 "$ncu" --profile-from-start off --metrics gpu__time_duration.sum --csv \
    --target-processes all \
    "$B/neurocuda" bench builtin:vgg-fmnist --engine gpu --precision "${NC_PROFILE_TRAIN_PREC:-fp32}" --batch 256 -T 8 \
    --train --repeats 25 --warmup 1 --no-peak \
    > "$OUT/ncu_train.csv" 2>&1
  log "ncu rc=$?"
  python3 - "$OUT/ncu_train.csv" <<'EOF3' | tee "$OUT/ncu_train_summary.txt"
import csv, sys, collections
scale = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3}
total, count = collections.Counter(), collections.Counter()
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
for r in csv.DictReader(rows):
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    name = r["Kernel Name"].split("(")[0][:70]
    total[name] += float(r["Metric Value"].replace(",", "")) * scale.get(r["Metric Unit"], 1e-6)
    count[name] += 1
# one optimiser launch per step (the multi-tensor Adam kernel): the range's
# step count, whatever the syncs per step
steps = next((n for name, n in count.items() if "multi_step_kernel" in name), 0) or 8
print(f"{sum(total.values()) / steps:.3f} ms of kernels per BPTT step ({sum(count.values())} kernels in {steps} steps; "
      "per step below)")
for name, ms in total.most_common(40):
    print(f"{ms / steps:9.4f} ms {count[name] / steps:6.1f}x  {name}")
EOF3
fi

# ---- 6. sanitizers, if time is left ---------------------------------------------------------
# NC_SANITIZE: "tool:test[:kernel[:tests]]" entries, run in order while time is
# left; kernel: only kernels whose name holds it are checked; tests: a comma-
# separated list of the program's tests to run (NC_GPU_TESTS).  By default:
# memcheck of the kernel, engine and trainer tests (H100: 3, 69 and 5 s);
# racecheck of the whole trainer test (58 s, cuDNN's kernels too); racecheck of
# the engine's transposes through the kernel tests that call them directly, and
# of the fused spike conv (double-buffered tiles, membranes and spikes in
# shared memory) through its kernel test.
# racecheck of the whole engine test takes longer than a call (its own kernels
# alone: NC_GPU_CONV=im2col, BENCHMARKS §3i), and with a kernel filter
# compute-sanitizer 2025 stops with an internal error as soon as one of cuDNN's
# runtime-compiled graph engines runs.
sanitize=${NC_SANITIZE:-memcheck:test_gpu_kernels memcheck:test_gpu_engine memcheck:test_gpu_train \
racecheck:test_gpu_train racecheck:test_gpu_kernels:transpose_rows_kernel:test_pool_kernels,test_prespike_max_kernel,test_bf16_transposes \
racecheck:test_gpu_kernels:spike_conv3x3_fx16_if_kernel:test_spike_conv_if_kernel}
if command -v compute-sanitizer > /dev/null; then
  for entry in $sanitize; do
    IFS=: read -r tool t kernel only <<< "$entry"
    [ -x "$B/$t" ] || continue
    [ "$(left)" -gt 90 ] || { log "skip $tool $t: out of time"; continue; }
    lim=$(( $(left) - 40 ))
    # NC_SANITIZE_LIMIT: at most this many seconds an entry (a slow entry then
    # leaves time for the next ones)
    [ -n "${NC_SANITIZE_LIMIT:-}" ] && [ "$lim" -gt "$NC_SANITIZE_LIMIT" ] && lim=$NC_SANITIZE_LIMIT
    opts=(--tool "$tool")
    # API errors stay out of memcheck's count: the program checks every CUDA call
    # itself (a failure is a test failure), and the fault tests make some fail on
    # purpose (test_graphs' failed capture gives five); memory errors are counted.
    [ "$tool" = memcheck ] && opts+=(--leak-check no --report-api-errors no)
    [ -n "$kernel" ] && opts+=(--kernel-name "kns=$kernel")
    log "compute-sanitizer ${opts[*]} $t ${only:+(tests $only) }(limit ${lim}s)"
    f="$OUT/sanitizer_${tool}_$t${kernel:+_$kernel}${only:+_${only//,/_}}.log"
    NC_GPU_TESTS="${only//,/ }" timeout "$lim" compute-sanitizer "${opts[@]}" "$B/$t" > "$f" 2>&1
    log "sanitizer $tool $t $kernel rc=$?: $(grep -c '^ok' "$f") ok, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$f" | tail -1)"
  done
fi

# ---- summary ------------------------------------------------------------------------------
echo
echo "==== summary ($((SECONDS - start))s; logs in \$OUT) ===="
tap_summary
python3 - "$OUT" <<'EOF'
import glob, json, os, sys
out = sys.argv[1]
floor, sj = {}, {}
try:
    for line in open(os.path.join(out, "torch_floor.jsonl")):
        r = json.loads(line)
        if r.get("kind") == "snn-multistep":
            sj[(r["net"], r["precision"])] = r["ms"]
        else:
            floor[(r["net"], r["precision"])] = r["ms"]
except Exception:
    pass
print(f"{'bench':34s} {'ann ms':>8s} {'snn ms':>8s} {'TFLOP/s':>8s} {'%peak':>6s} {'peak':>7s} {'floor ms':>8s}")
for f in sorted(glob.glob(os.path.join(out, "bench_*.txt"))):
    name = os.path.basename(f)[6:-4]
    j = None
    for line in open(f):
        if line.startswith("{"):
            try: j = json.loads(line)
            except Exception: pass
    if not j:
        err = [l.strip() for l in open(f) if l.strip()][-2:]
        print(f"{name:34s} FAILED: {' | '.join(err)[:90]}")
        continue
    net = j["model"].replace("builtin:", "")
    prec = j.get("precision", "?")
    fl = floor.get((net, "bf16" if prec.startswith("split") else prec))
    print(f"{name:34s} {j['ann']['ms_per_batch']:8.3f} {j['snn']['ms_per_batch']:8.3f} {j['snn']['tflops']:8.2f} "
          f"{100*j['snn'].get('fraction_of_peak', 0):6.1f} {j.get('peak_tflops', 0):7.1f} "
          f"{(f'{fl:8.2f}' if fl else '       -')}")
for f in sorted(glob.glob(os.path.join(out, "train_vgg_*.txt"))):
    steps = {l.split()[0]: l.split()[1] for l in open(f) if l.split()[:1] in (["qcfs-step"], ["bptt-step"])}
    print(f"{os.path.basename(f)[:-4]:34s} qcfs-step {steps.get('qcfs-step', '?'):>8s} ms  "
          f"bptt-step {steps.get('bptt-step', 'FAILED'):>8s} ms")
for (net, p), ms in sorted(floor.items()):
    print(f"torch floor {net:12s} {p:5s} {ms:8.2f} ms")
for (net, p), ms in sorted(sj.items()):
    print(f"torch multi-step SNN {net:12s} {p:5s} {ms:8.2f} ms")
EOF
# the logs as one archive (the device run returns only a few files)
tar czf /tmp/nc-logs.tgz -C "$OUT" . && find "$OUT" -maxdepth 1 -type f -delete && mv /tmp/nc-logs.tgz "$OUT/logs.tgz"
# the exit status: every test that ran passed (NC_TESTS may leave some out)
for t in "${!test_rc[@]}"; do
  [ "${test_rc[$t]}" = 0 ] || exit 1
done
exit 0

