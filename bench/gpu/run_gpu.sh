#!/usr/bin/env bash
# The GPU benchmark on a machine with jax (CUDA) and PyTorch but no TensorFlow, from the folders
# that export_decode.py (decode_*) and export_step.py (step_*) wrote under EXPORTS. Each
# t2t_lite row is followed by its peer at the same precision and sizes: transformers'
# MarianMTModel.generate for a search, PyTorch's `torch.compile` for a training step. Each part
# prints a RESULT line; all output goes to LOG too.
#   bash bench/gpu/run_gpu.sh EXPORTS LOG [PEAK_TF32 PEAK_BF16]
set -uo pipefail
exports=$(realpath "$1") log=$(realpath -m "$2")
tf32=${3:-} bf16=${4:-}  # dense TFLOP/s; default: the H100 / H200 SXM's (peaks.sh)
cd "$(dirname "$0")"
. ./peaks.sh
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit,driver_version \
    --format=csv,noheader | tee "$log"
part() { echo "== $*" | tee -a "$log"; "$@" 2>&1 | tee -a "$log"; }
# manifest FOLDER: "precision beam_size sentences length" of an export (beam_size 0: a step).
manifest() {
    python3 -c 'import json, sys; m = json.load(open(sys.argv[1] + "/manifest.json"))
print(m["hparams"]["precision"], m.get("beam_size", 0), *m["shapes"]["time"]["batch"])' "$1"
}
for folder in "$exports"/decode_* "$exports"/step_*; do
    [ -d "$folder" ] || continue
    read -r precision beam sentences length < <(manifest "$folder")
    peak=$(peak_tflops "$precision")
    torch_precision=${precision#mixed_}
    if [ "$beam" -gt 0 ]; then
        tolerance=$([ "$precision" = float32 ] && echo 2e-3 || echo 2e-2)
        part python3 run_decode.py --decode="$folder" --peak_tflops="$peak" \
            --tolerance="$tolerance"
        part python3 marian_decode.py --precision="$torch_precision" --beam_size="$beam" \
            --sentences="$sentences" --length="$length"
    else
        part python3 run_step.py --step="$folder" --peak_tflops="$peak"
        part python3 torch_cuda.py --precision="$torch_precision" --compile
    fi
done
