#!/usr/bin/env bash
# One exported training step (a step_* folder of export_step.py) timed by run_step.py under each
# XLA_FLAGS setting given, each in a process of its own, since XLA reads its flags once per
# process ("" is XLA's defaults). Each RESULT line, which names its flags, goes to LOG too.
#   bash bench/gpu/flags_gpu.sh LOG FOLDER "FLAGS" ["FLAGS" ...]
# PEAK_TF32 and PEAK_BF16: the device's dense TFLOP/s (default: the H100 / H200 SXM's).
set -uo pipefail
log=$(realpath -m "$1") folder=$(realpath "$2")
shift 2
tf32=${PEAK_TF32:-} bf16=${PEAK_BF16:-}
cd "$(dirname "$0")"
. ./peaks.sh
export PYTHONUNBUFFERED=1
peak=$(peak_tflops "$(precision_of "$folder")")
for setting in "$@"; do
    echo "== $(basename "$folder") XLA_FLAGS=$setting" | tee -a "$log"
    XLA_FLAGS=$setting python3 run_step.py --step="$folder" --peak_tflops="$peak" 2>&1 \
        | grep -v "^W0000\|^I0000\|^step " | tee -a "$log"
done
