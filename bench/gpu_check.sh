#!/usr/bin/env bash
# Every GPU measurement of issue 41 in one short run (under 8 minutes on an H200), for a
# machine lent for minutes: ops against cuBLAS/cuDNN, ResNet-18/50 untuned and
# ResNet-18 tuned against PyTorch eager and torch.compile, the launch sequence (CUDA
# graph) against kernel-by-kernel launches, each kernel inside the network against the
# same operator alone, and ONNX parity with PyTorch.
#
#   OUT=out bash bench/gpu_check.sh path/to/tessera
#
# Needs python3 with torch, torchvision, onnx and numpy (bench/gpu_peers.py), the
# NVIDIA driver, and NVRTC from a CUDA 12/13 toolkit or wheel; the first step checks that
# NVRTC is found with LD_LIBRARY_PATH unset. The ResNet-18 tune gets what is left of
# DEADLINE (540 s) after the other steps, so one call fits the device tool's 10 minutes.
# Each step has its own timeout and writes STEP.out/STEP.err under $OUT; the tune comes
# last (its record log is kill-safe, so the tuned run uses whatever it wrote). SM
# clocks are sampled into clocks.csv throughout. bench/gpu_summary.py $OUT prints the
# tables for BENCHMARKS.md.
set -u
T=$(realpath "${1:-./tessera}")
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
HERE=$(dirname "$0")
TUNE_S=${TUNE_S:-170}
# another target rehearses the orchestration where there is no GPU (cpu, opencl)
TARGET=${TARGET:-cuda}
export TESSERA_MODEL_CACHE=off

step() { # name timeout_s command…
  local name=$1 secs=$2
  shift 2
  local t0=$(date +%s.%N)
  timeout "$secs" "$@" > "$OUT/$name.out" 2> "$OUT/$name.err"
  local rc=$?
  printf '%-28s rc=%-3s %6.1f s\n' "$name" "$rc" "$(awk "BEGIN { print $(date +%s.%N) - $t0 }")" | tee -a "$OUT/steps.txt"
  return $rc
}
TESS=("$T")
START=$(date +%s)
# the whole run stays under the device tool's 10 minutes a command: the tune gets what is left
DEADLINE=${DEADLINE:-540}

nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > "$OUT/gpu.csv" 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,utilization.gpu,power.draw --format=csv,noheader -lms 250 > "$OUT/clocks.csv" 2>/dev/null &
CLOCKS=$!
trap 'kill $CLOCKS 2>/dev/null' EXIT

# 1. NVRTC found without LD_LIBRARY_PATH (reported, not fatal: the driver's own libraries
#    may need it), then the driver and a default-schedule matmul: stop here if not
step nvrtc_no_ld_path 60 env -u LD_LIBRARY_PATH "$T" op matmul --shape 256,256,256 --target "$TARGET" --json
step nvrtc_matmul_default 60 "${TESS[@]}" op matmul --shape 1024,1024,1024 --target "$TARGET" --json || { echo "no CUDA build: see $OUT/nvrtc_matmul_default.err"; exit 1; }
# 2. the peers, and the ONNX models tessera runs
step peers 200 python3 "$HERE/gpu_peers.py" --out "$OUT"
# 3. operators alone, default schedules (the 7×7 conv also with the L2 cold)
step op_conv7_default 40 "${TESS[@]}" op conv2d --shape 1,7,7,512,512,3,3 --pad 1 --target "$TARGET" --json
step op_conv7_default_flushed 40 "${TESS[@]}" op conv2d --shape 1,7,7,512,512,3,3 --pad 1 --target "$TARGET" --cache-flush --json
# 4. untuned networks: the launch sequence, kernel by kernel, and the per-kernel profile
for m in resnet18_b1 resnet18_b16 resnet50_b1; do
  step "run_$m" 60 "${TESS[@]}" run --onnx "$OUT/$m.onnx" --target "$TARGET" --benchmark --repeat 30 --number 5 --json
done
step run_resnet18_b1_steps 60 "${TESS[@]}" run --onnx "$OUT/resnet18_b1.onnx" --target "$TARGET" --benchmark --repeat 30 --number 5 --step-by-step --json
step profile_resnet18_b1 60 "${TESS[@]}" run --onnx "$OUT/resnet18_b1.onnx" --target "$TARGET" --profile --repeat 20 --json
# 5. parity with PyTorch on the same image
step parity_resnet18 60 "${TESS[@]}" run --onnx "$OUT/resnet18_b1.onnx" --target "$TARGET" --input "input=$OUT/input.npy" --output "$OUT/tessera_out.npy" --json
# 5b. the OpenCL backend on NVIDIA's OpenCL (its ICD registered through OCL_ICD_VENDORS,
#     beside PoCL's): ResNet-18 on the same image, and its latency
ICD=$(realpath "$OUT")/icd
mkdir -p "$ICD"
cp /etc/OpenCL/vendors/*.icd "$ICD/" 2>/dev/null
NV_OCL=$(ls /usr/local/nvidia/lib64/libnvidia-opencl.so.1 /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 2>/dev/null | head -1)
[ -n "$NV_OCL" ] && echo "$NV_OCL" > "$ICD/nvidia.icd"
OCL_ICD_VENDORS="$ICD" step opencl_nvidia_resnet18 90 "${TESS[@]}" run --onnx "$OUT/resnet18_b1.onnx" --target "opencl -platform=NVIDIA" --input "input=$OUT/input.npy" --output "$OUT/opencl_out.npy" --benchmark --repeat 20 --json
# 6. tuned operators against cuBLAS/cuDNN
step tune_matmul 75 "${TESS[@]}" tune --op matmul --op-shape 1024,1024,1024 --target "$TARGET" --trials 64 --per-round 32 --log "$OUT/matmul.json" --json
step tune_conv7 75 "${TESS[@]}" tune --op conv2d --op-shape 1,7,7,512,512,3,3 --pad 1 --target "$TARGET" --trials 64 --per-round 32 --log "$OUT/conv7.json" --json
# 7. ResNet-18 tuned (last: killed at TUNE_S, its log kept), then built with its log
LEFT=$((DEADLINE - ($(date +%s) - START) - 100))
[ "$LEFT" -lt "$TUNE_S" ] && TUNE_S=$LEFT
[ "$TUNE_S" -lt 20 ] && TUNE_S=20
step tune_resnet18 "$TUNE_S" "${TESS[@]}" tune --onnx "$OUT/resnet18_b1.onnx" --target "$TARGET" --trials 2000 --per-round 32 --log "$OUT/r18.json" --no-network-check --json
step run_resnet18_b1_tuned 60 "${TESS[@]}" run --onnx "$OUT/resnet18_b1.onnx" --target "$TARGET" --log "$OUT/r18.json" --benchmark --repeat 30 --number 5 --json
step profile_resnet18_b1_tuned 60 "${TESS[@]}" run --onnx "$OUT/resnet18_b1.onnx" --target "$TARGET" --log "$OUT/r18.json" --profile --repeat 20 --json
kill $CLOCKS 2>/dev/null
python3 "$HERE/gpu_summary.py" "$OUT" | tee "$OUT/summary.md"
