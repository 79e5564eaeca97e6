#!/usr/bin/env bash
# The kernel profile of every export under EXPORTS (step_* and decode_* folders), on a machine
# with jax (CUDA): each one's PROFILE line, trace and optimized HLO go to OUT (profile_kernels.py).
#   bash bench/gpu/profile_gpu.sh EXPORTS OUT [PEAK_TF32 PEAK_BF16]
set -uo pipefail
exports=$(realpath "$1") out=$(realpath -m "$2")
tf32=${3:-} bf16=${4:-}  # dense TFLOP/s; default: the H100 / H200 SXM's (peaks.sh)
cd "$(dirname "$0")"
. ./peaks.sh
export PYTHONUNBUFFERED=1
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit,driver_version \
    --format=csv,noheader | tee "$out/log.txt"
for folder in "$exports"/step_* "$exports"/decode_*; do
    [ -d "$folder" ] || continue
    peak=$(peak_tflops "$(precision_of "$folder")")
    echo "== $(basename "$folder")" | tee -a "$out/log.txt"
    python3 profile_kernels.py --export="$folder" --out="$out" --peak_tflops="$peak" 2>&1 \
        | grep -v "^W0000\|^I0000" | tee -a "$out/log.txt"
done
