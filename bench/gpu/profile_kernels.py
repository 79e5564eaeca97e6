"""Where a GPU step's time goes: the kernels of an exported training step or search, by kind.

    python3 bench/gpu/profile_kernels.py --export=/path/to/step_mixed_bfloat16 --out=DIR \\
        --peak_tflops=989.4

Needs NumPy and jaxlib only, like run_step.py and run_decode.py, whose compiled `time` shape it
runs: --warmup untimed calls, then --calls calls under `jax.profiler.trace` (CUPTI), whose
Perfetto trace (DIR/<name>.trace.json.gz) it reads back. Each GPU kernel is put in one kind by
its name and by the optimized HLO (DIR/<name>.hlo.txt.gz): matrix products (cuBLAS, cuDNN and
Triton GEMMs), reductions (XLA's input fusions: layer norms, softmax, the loss), element-wise
fusions, copies and transposes, sorts and top-k, gathers and scatters, and the rest. Also the
GPU's idle share of the traced span: time with no kernel running (launches, host syncs of a
while loop's condition). Prints one `PROFILE {json}` line and a table, slowest kinds first.
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os
import re
import shutil
import sys
import time

import numpy as np

KINDS = (  # (kind, pattern on the kernel's name or its HLO instruction), the first match wins
    ("matmul", r"gemm|xmma|cutlass|nvjet|cublas|wgmma|cudnn|fmha|__triton_gemm|\bdot\b"),
    ("sort / top-k", r"sort|topk|top_k"),
    ("gather / scatter", r"gather|scatter"),
    ("copy / transpose", r"copy|transpose|memcpy|memset|concatenate|dynamic.update.slice|slice"),
    ("reduction", r"reduce|softmax|input_"),
    ("element-wise", r"loop_|fusion|wrapped_|convert|add|multiply"),
)


def kind_of(name: str, instruction: str) -> str:
    """The kind of a kernel from its name and the text of its HLO instruction (may be '')."""
    for kind, pattern in KINDS:
        if re.search(pattern, name, re.IGNORECASE):
            return kind
    for kind, pattern in KINDS:
        if instruction and re.search(pattern, instruction, re.IGNORECASE):
            return kind
    return "other"


def hlo_instructions(text: str) -> dict[str, str]:
    """Optimized HLO's instruction lines by name, also under the name with '.' as '_' (how
    XLA names a fusion's kernel)."""
    lines = {}
    for match in re.finditer(r"^\s*(?:ROOT )?%?([\w.\-]+) = (.*)$", text, re.MULTILINE):
        lines[match.group(1)] = match.group(2)[:400]
        lines[match.group(1).replace(".", "_").replace("-", "_")] = match.group(2)[:400]
    return lines


def gpu_kernels(trace: dict) -> list[tuple[str, float, float, dict]]:
    """(name, start us, duration us, args) of the complete events on the trace's GPU rows."""
    names = {
        e["pid"]: e.get("args", {}).get("name", "")
        for e in trace["traceEvents"]
        if e.get("ph") == "M" and e.get("name") == "process_name"
    }
    device = os.environ.get("PROFILE_DEVICE", "GPU")  # "CPU": a dry run on a machine without
    gpu = {pid for pid, name in names.items() if device in name.upper()}
    return [
        (e["name"], float(e["ts"]), float(e["dur"]), e.get("args", {}))
        for e in trace["traceEvents"]
        if e.get("ph") == "X" and e.get("pid") in gpu and "dur" in e
    ]


def busy_time(kernels) -> tuple[float, float]:
    """(microseconds with at least one kernel running, the span from first start to last end)."""
    spans = sorted((start, start + duration) for _, start, duration, _ in kernels)
    busy, end = 0.0, -np.inf
    for start, stop in spans:
        if start > end:
            busy += stop - start
            end = stop
        elif stop > end:
            busy += stop - end
            end = stop
    return busy, spans[-1][1] - spans[0][0]


def summarize(kernels, instructions: dict[str, str], calls: int, flops: float, peak: float):
    """The profile's summary (per call): time and count per kind, the slowest kernels."""
    per_kind, per_name = collections.defaultdict(float), collections.defaultdict(float)
    count = collections.Counter()
    for name, _, duration, args in kernels:
        op = str(args.get("hlo_op", "") or args.get("long_name", ""))
        kind = kind_of(name, instructions.get(op, "") or instructions.get(name, ""))
        per_kind[kind] += duration / calls
        per_name[(kind, name)] += duration / calls
        count[kind] += 1
    busy, span = busy_time(kernels)
    kernel_total = sum(per_kind.values())
    matmul = per_kind.get("matmul", 0.0)
    return {
        "calls": calls,
        "span_ms_per_call": span / calls / 1e3,
        "kernel_ms_per_call": kernel_total / 1e3,
        "idle_share": 1 - busy / span,
        "kernels_per_call": len(kernels) / calls,
        "kinds": {
            k: {"ms": v / 1e3, "share": v / kernel_total, "kernels": count[k] / calls}
            for k, v in sorted(per_kind.items(), key=lambda kv: -kv[1])
        },
        "matmul_tflops": flops / (matmul / 1e6) / 1e12 if matmul else None,
        "matmul_share_of_peak": flops / (matmul / 1e6) / 1e12 / peak if matmul else None,
        "slowest": [
            {"kind": k, "name": n[:120], "ms": v / 1e3}
            for (k, n), v in sorted(per_name.items(), key=lambda kv: -kv[1])[:25]
        ],
    }


def build(folder: str, device):
    """(the compiled `time` call of the export, its model FLOPs per call, its manifest)."""
    import jax  # here, so that the trace's reading above needs no jax (tests/test_bench_gpu.py)
    from run_decode import Search, search_flops
    from run_step import Step
    from values import initial_values

    with open(os.path.join(folder, "manifest.json")) as f:
        manifest = json.load(f)
    values = initial_values(folder, manifest["arguments"])
    shape = manifest["shapes"]["time"]
    if "beam_size" in manifest:
        weights = [jax.device_put(v, device) for v in values]
        call = Search(folder, "time", weights, device)
        return call, search_flops(manifest, call()[0])[1], manifest
    return Step(folder, "time", manifest, values, device), shape["train_flops"], manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--export", required=True, help="a step_* or decode_* export folder")
    parser.add_argument("--out", required=True, help="folder for the trace and the HLO")
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--peak_tflops", type=float, required=True, help="the device's peak")
    args = parser.parse_args()
    import jax

    jax.config.update("jax_enable_x64", True)
    device = jax.devices()[0]
    name = os.path.basename(os.path.normpath(args.export))
    call, flops, manifest = build(args.export, device)
    hlo = "\n".join(m.to_string() for m in call.executable.hlo_modules())
    os.makedirs(args.out, exist_ok=True)
    with gzip.open(os.path.join(args.out, f"{name}.hlo.txt.gz"), "wt") as f:
        f.write(hlo)
    for _ in range(args.warmup):
        call()
    log_dir = os.path.join(args.out, f"jax_{name}")
    start = time.perf_counter()
    with jax.profiler.trace(log_dir, create_perfetto_trace=True):
        for _ in range(args.calls):
            call()
    seconds = (time.perf_counter() - start) / args.calls
    traces = sorted(
        glob.glob(os.path.join(log_dir, "**", "perfetto_trace.json.gz"), recursive=True)
    )
    if not traces:
        raise SystemExit(f"no perfetto_trace.json.gz under {log_dir}")
    saved = os.path.join(args.out, f"{name}.trace.json.gz")
    shutil.copy(traces[-1], saved)
    shutil.rmtree(log_dir)
    with gzip.open(saved, "rt") as f:
        trace = json.load(f)
    kernels = gpu_kernels(trace)
    if not kernels:
        raise SystemExit("the trace holds no GPU kernels (did CUPTI load?)")
    summary = summarize(kernels, hlo_instructions(hlo), args.calls, flops, args.peak_tflops)
    summary.update(
        export=name,
        device=device.device_kind,
        precision=manifest["hparams"]["precision"],
        wall_ms_per_call_traced=seconds * 1e3,
        model_tflops=flops / 1e12,
        jax=jax.__version__,
    )
    print("PROFILE " + json.dumps(summary))
    print(f"{name}: {summary['kernel_ms_per_call']:.2f} ms of kernels per call", file=sys.stderr)
    for kind, row in summary["kinds"].items():
        print(f"  {kind:18s} {row['ms']:8.2f} ms {row['share']:6.1%}", file=sys.stderr)


if __name__ == "__main__":
    main()
