#!/usr/bin/env bash
# The GPU benchmark on a machine with jax (CUDA) and PyTorch but no TensorFlow, from the folders
# that export_decode.py and export_step.py wrote under EXPORTS (decode_<precision>,
# step_<precision>). Each part prints a RESULT line; all output goes to LOG too.
#   bash bench/gpu/run_gpu.sh EXPORTS LOG [PEAK_TF32 PEAK_BF16]
set -uo pipefail
exports=$(realpath "$1") log=$(realpath -m "$2")
tf32=${3:-494.7} bf16=${4:-989.4}  # dense TFLOP/s of the H100 / H200 SXM
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit,driver_version \
    --format=csv,noheader | tee "$log"
part() { echo "== $*" | tee -a "$log"; "$@" 2>&1 | tee -a "$log"; }
for precision in float32 mixed_bfloat16; do
    peak=$([ $precision = float32 ] && echo "$tf32" || echo "$bf16")
    tolerance=$([ $precision = float32 ] && echo 2e-3 || echo 2e-2)
    [ -d "$exports/decode_$precision" ] && part python3 run_decode.py \
        --decode="$exports/decode_$precision" --peak_tflops="$peak" --tolerance="$tolerance"
done
part python3 marian_decode.py --precision=float32
part python3 marian_decode.py --precision=bfloat16
for precision in mixed_bfloat16 float32; do
    peak=$([ $precision = float32 ] && echo "$tf32" || echo "$bf16")
    [ -d "$exports/step_$precision" ] && part python3 run_step.py \
        --step="$exports/step_$precision" --peak_tflops="$peak"
done
part python3 torch_cuda.py --precision=bfloat16 --compile
