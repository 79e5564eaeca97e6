# Sourced by bench/gpu's drivers, after they set tf32 and bf16 (the device's dense TFLOP/s;
# default: the H100 / H200 SXM's): the peak an export's MFU is measured against.
tf32=${tf32:-494.7} bf16=${bf16:-989.4}

# precision_of FOLDER: the precision in an export's manifest.json (float32, mixed_bfloat16, ...).
precision_of() {
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["hparams"]["precision"])' \
        "$1/manifest.json"
}

# peak_tflops PRECISION: TF32's peak for float32, else bfloat16's (float16 has the same).
peak_tflops() {
    if [ "$1" = float32 ]; then echo "$tf32"; else echo "$bf16"; fi
}
