#!/usr/bin/env bash
# gpu-run.sh — on the GPU machine, from the repository root (the device run's
# working directory), after tools/gpu-bundle.sh made .gpu/nc.tar.xz here:
#
#   bash tools/gpu-run.sh            (device run with carry [".gpu"]; logs in $OUT)
#
# Unpacks the bundle into /tmp/nc, then, each step with its own time limit and
# its full log under $OUT:
#   1. device facts (nvidia-smi, `neurocuda engines`);
#   2. the GPU tests (test_gpu_kernels, test_gpu_engine; fixtures read from
#      this checkout through NC_SOURCE_DIR);
#   3. `neurocuda bench` on the issue's networks (builtin:vgg-fmnist and
#      builtin:cnn-fmnist at batch 1024, builtin:vgg16-cifar at batch 256;
#      T = 8) in every precision: CUDA events, median of 20 after 3 warm-ups,
#      TFLOP/s and fraction of the measured peak; an im2col chunk-size sweep;
#      the cnn_maxpool ONNX fixture on real Fashion-MNIST images;
#   4. the dense floor: the same networks as plain ANNs in PyTorch (batch
#      8192; VGG16 2048 = 256 × 8), fp32 with TF32 off, tf32, bf16;
#   5. if time is left: test_gpu_kernels under compute-sanitizer memcheck.
# The last lines printed are a summary table (the device reply keeps the end
# of the output).  NC_RUN_BUDGET (seconds, default 540) bounds the whole run.
set -uo pipefail
OUT=${OUT:-/tmp/nc-out}
mkdir -p "$OUT"
root=$(pwd)
budget=${NC_RUN_BUDGET:-540}
start=$SECONDS
left() { echo $((budget - (SECONDS - start))); }
log() { echo "[$((SECONDS - start))s] $*"; }

# ---- unpack --------------------------------------------------------------------
if [ ! -f .gpu/nc.tar.xz ]; then
  echo "gpu-run.sh: no .gpu/nc.tar.xz (run tools/gpu-bundle.sh, and carry .gpu)" >&2
  exit 1
fi
rm -rf /tmp/nc && mkdir -p /tmp/nc && tar xJf .gpu/nc.tar.xz -C /tmp/nc || exit 1
B=/tmp/nc/bin
export LD_LIBRARY_PATH=/tmp/nc/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
if ldd "$B/neurocuda" | grep -q 'libcublas.*not found'; then
  # no system CUDA libraries: use the ones PyTorch's wheels bring
  for lib in libcublas.so.13 libcudart.so.13; do
    d=$(find / -xdev -name "$lib" -printf '%h\n' 2>/dev/null | head -1)
    [ -n "$d" ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d
  done
fi
export NC_SOURCE_DIR=$root
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-16}
ldd "$B/neurocuda" > "$OUT/ldd.txt" 2>&1
grep 'not found' "$OUT/ldd.txt" && log "WARNING: missing libraries (see ldd.txt)"

# ---- 1. device --------------------------------------------------------------------
log "device"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv \
  2>&1 | tee "$OUT/gpu.csv"
"$B/neurocuda" engines 2>&1 | tee "$OUT/engines.txt"

# ---- 2. tests ---------------------------------------------------------------------
declare -A test_rc
for t in test_gpu_kernels test_gpu_engine; do
  if [ $t = test_gpu_kernels ]; then lim=150; else lim=$(( $(left) - 210 )); fi
  [ $lim -gt 300 ] && lim=300; [ $lim -lt 60 ] && lim=60
  log "$t (limit ${lim}s)"
  timeout "$lim" "$B/$t" > "$OUT/$t.log" 2>&1
  test_rc[$t]=$?
  grep -E '^(not ok|ok .*SKIP)|# FAILED' "$OUT/$t.log" | head -20
  log "$t: rc=${test_rc[$t]}, $(grep -c '^ok' "$OUT/$t.log") ok, $(grep -c '^not ok' "$OUT/$t.log") not ok"
done

# ---- 3. benchmarks ------------------------------------------------------------------
export NC_GPU_PROFILE=1  # one extra pass after the timed ones: per-node times on stderr (in the logs)
bench() { # name precision batch [extra env]
  local net=$1 p=$2 b=$3 tag=${4:-}
  local f="$OUT/bench_${net}_${p}${tag}.txt"
  [ "$(left)" -lt 90 ] && { log "skip bench $net $p$tag: out of time"; return; }
  timeout 120 "$B/neurocuda" bench "builtin:$net" --engine gpu --precision "$p" --batch "$b" -T 8 \
    --repeats 20 --warmup 3 --json > "$f" 2>&1
  echo "rc=$?" >> "$f"
}
for net in vgg-fmnist cnn-fmnist vgg16-cifar; do
  b=1024; [ $net = vgg16-cifar ] && b=256
  for p in fp32 tf32 bf16 split-bf16 split-bf16x2; do
    log "bench $net $p"
    bench $net $p $b
  done
done
for mb in 16 128; do
  for p in fp32 bf16; do
    log "bench vgg-fmnist $p, NC_GPU_CHUNK_MB=$mb"
    NC_GPU_CHUNK_MB=$mb bench vgg-fmnist $p 1024 "_chunk$mb"
  done
done
if [ -d /tmp/nc/data/fmnist ] && [ "$(left)" -gt 60 ]; then
  log "bench cnn_maxpool.onnx (Fashion-MNIST subset)"
  timeout 120 "$B/neurocuda" bench tests/fixtures/models/cnn_maxpool.onnx --engine gpu --data /tmp/nc/data/fmnist \
    --mean 0.286 --std 0.353 --batch 1024 -T 8 --json > "$OUT/bench_cnn_maxpool_onnx_fp32.txt" 2>&1
fi

# ---- 4. the dense floor in PyTorch ---------------------------------------------------
if [ "$(left)" -gt 60 ]; then
  log "PyTorch dense floor"
  cat > "$OUT/torch_floor.py" <<'EOF'
# The issue's networks as plain ANNs in PyTorch at the dense-floor batch
# (8192 = 1024 x 8; VGG16 2048 = 256 x 8): eager, cudnn.benchmark,
# channels_last, CUDA events, median of 20 after 5 warm-ups, random input.
import json, statistics, sys
import torch
from torch import nn

def conv(cin, cout): return [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU()]
def vgg_fmnist(): return nn.Sequential(*conv(1, 32), *conv(32, 32), nn.AvgPool2d(2), *conv(32, 64), *conv(64, 64),
                                       nn.AvgPool2d(2), nn.Flatten(), nn.Linear(3136, 256), nn.ReLU(), nn.Linear(256, 10))
def cnn_fmnist(): return nn.Sequential(*conv(1, 16), nn.MaxPool2d(2), *conv(16, 32), nn.MaxPool2d(2), nn.Flatten(),
                                       nn.Linear(1568, 128), nn.ReLU(), nn.Linear(128, 10))
def vgg16_cifar():
    layers, c = [], 3
    for v in [64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0]:
        if v == 0: layers.append(nn.AvgPool2d(2))
        else: layers += conv(c, v); c = v
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(512, 10))

def set_tf32(on):
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on

def time_ms(model, x, reps=20, warm=5):
    with torch.no_grad():
        for _ in range(warm): model(x)
        torch.cuda.synchronize()
        ts = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(); model(x); b.record(); b.synchronize()
            ts.append(a.elapsed_time(b))
    return statistics.median(ts)

torch.backends.cudnn.benchmark = True
torch.manual_seed(0)
rows = []
for name, make, shape, batch in [("vgg-fmnist", vgg_fmnist, (1, 28, 28), 8192), ("cnn-fmnist", cnn_fmnist, (1, 28, 28), 8192),
                                 ("vgg16-cifar", vgg16_cifar, (3, 32, 32), 2048)]:
    for prec in ["fp32", "tf32", "bf16"]:
        set_tf32(prec == "tf32")
        dt = torch.bfloat16 if prec == "bf16" else torch.float32
        m = make().cuda().eval().to(dtype=dt).to(memory_format=torch.channels_last)
        x = torch.rand(batch, *shape, device="cuda", dtype=dt).to(memory_format=torch.channels_last)
        ms = time_ms(m, x)
        rows.append({"net": name, "precision": prec, "batch": batch, "ms": ms})
        print(json.dumps(rows[-1]), flush=True)
print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version(), file=sys.stderr)
EOF
  lim=$(( $(left) - 20 )); [ $lim -gt 150 ] && lim=150
  timeout "$lim" python3 "$OUT/torch_floor.py" > "$OUT/torch_floor.jsonl" 2> "$OUT/torch_floor.err"
  log "PyTorch rc=$?"
fi

# ---- 5. sanitizer, if time is left ---------------------------------------------------------
if command -v compute-sanitizer > /dev/null && [ "$(left)" -gt 150 ]; then
  lim=$(( $(left) - 30 ))
  log "compute-sanitizer memcheck test_gpu_kernels (limit ${lim}s)"
  timeout "$lim" compute-sanitizer --tool memcheck --leak-check no "$B/test_gpu_kernels" > "$OUT/sanitizer_kernels.log" 2>&1
  log "sanitizer rc=$?: $(grep -E 'ERROR SUMMARY' "$OUT/sanitizer_kernels.log" | tail -1)"
fi

# ---- summary ------------------------------------------------------------------------------
echo
echo "==== summary ($((SECONDS - start))s; logs in \$OUT) ===="
for t in test_gpu_kernels test_gpu_engine; do
  printf '%-18s rc=%s  %s ok, %s not ok\n' "$t" "${test_rc[$t]:-?}" "$(grep -c '^ok' "$OUT/$t.log" 2>/dev/null)" \
    "$(grep -c '^not ok' "$OUT/$t.log" 2>/dev/null)"
done
python3 - "$OUT" <<'EOF'
import glob, json, os, sys
out = sys.argv[1]
floor = {}
try:
    for line in open(os.path.join(out, "torch_floor.jsonl")):
        r = json.loads(line); floor[(r["net"], r["precision"])] = r["ms"]
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
for (net, p), ms in sorted(floor.items()):
    print(f"torch floor {net:12s} {p:5s} {ms:8.2f} ms")
EOF
for t in test_gpu_kernels test_gpu_engine; do
  [ "${test_rc[$t]:-1}" = 0 ] || exit 1
done
exit 0
