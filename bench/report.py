"""The markdown report of bench/run_bench.py: machine, versions, medians, ratios to t2t_lite."""

from __future__ import annotations

import datetime
import os
import platform
import statistics

import protocol as P

# CPU flags that decide the speed of float32 and bfloat16 matmuls, reported when present.
SPEED_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16")


def machine() -> str:
    """CPU model, its SPEED_FLAGS, logical CPUs and memory, from /proc (Linux) or platform."""
    model = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read().splitlines()
        model = next(line.split(":", 1)[1].strip() for line in info if "model name" in line)
        flags = next(line.split(":", 1)[1].split() for line in info if line.startswith("flags"))
        found = [flag for flag in SPEED_FLAGS if flag in flags]
        model += f" ({', '.join(found) or 'none of ' + ', '.join(SPEED_FLAGS)})"
        with open("/proc/meminfo") as f:
            memory = int(f.readline().split()[1]) / 2**20
        model += f", {memory:.0f} GiB"
    except (OSError, StopIteration):
        pass
    return f"{model}, {os.cpu_count()} logical CPUs, {platform.system()} {platform.release()}"


def describe(m) -> str:
    """A measurement in a line: label, task, precision and its shape when not the usual."""
    return f"{m.label} {m.task} {m.dtype}" + (f" at {m.shape[0]} x {m.shape[1]}" if m.shape else "")


def _find(runs, peer, task, dtype):
    for m in runs:
        if (m.peer, m.task, m.dtype) == (peer, task, dtype):
            return m
    return None


def _rate(m, key="tokens_per_s") -> str:
    if m is None:
        return "not run"
    value = m.median(key)
    if value is None:
        return "failed" if m.errors else "not run"
    return f"{value:,.0f} ({len(m.results)})"


def _ratio(ours, theirs) -> str:
    a = ours.median() if ours else None
    b = theirs.median() if theirs else None
    return f"{a / b:.2f}x" if a and b else "-"


def _versions(runs) -> list[str]:
    seen = {}
    for m in runs:
        for r in m.results:
            parts = [f"{k} {r[k]}" for k in ("version", "tensorflow", "keras") if k in r]
            if parts and m.peer != "matmul":
                seen.setdefault(m.peer, ", ".join(parts))
    return [f"- {peer}: {text}" for peer, text in seen.items()]


def _train_table(runs) -> list[str]:
    flops = None
    for m in runs:
        for r in m.results:
            flops = flops or r.get("train_flops_per_target_token")
    ceilings = {d: _find(runs, "matmul", "matmul", d) for d in ("float32", "bfloat16")}
    lines = [
        "| training step | float32 target tokens/s (runs) | t2t_lite / peer | % of fp32 matmul "
        "ceiling | bfloat16 target tokens/s (runs) | t2t_lite / peer | % of bf16 ceiling |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    labels = []
    for m in runs:
        if m.part == "train" and m.peer != "matmul" and m.label not in labels:
            labels.append(m.label)
    for label in labels:
        row = [label]
        for dtype in ("float32", "bfloat16"):
            m = next((x for x in runs if x.label == label and x.dtype == dtype), None)
            ours = _find(runs, "t2t_lite", "train", dtype)
            ceiling = ceilings[dtype].median("gflops") if ceilings[dtype] else None
            rate = m.median() if m else None
            mfu = f"{rate * flops / 1e9 / ceiling:.0%}" if rate and flops and ceiling else "-"
            row += [_rate(m), _ratio(ours, m), mfu]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "| matmul ceiling, [2048,1024]x[1024,1024] | GFLOP/s (runs) |", "|---|---:|"]
    for dtype, m in ceilings.items():
        lines.append(f"| {dtype} | {_rate(m, 'gflops')} |")
    if flops:
        lines += [
            "",
            f"Model FLOPs per target token of a training step: {flops / 1e6:.1f} M "
            "(`3 x t2t_lite.model.flops.forward_flops_per_token`, the same for every peer: one "
            "architecture).",
        ]
    return lines


def _decode_table(runs) -> list[str]:
    lines = [
        "| decoder | beam 4 target tokens/s (runs) | t2t_lite / it | greedy target tokens/s "
        "(runs) | t2t_lite / it |",
        "|---|---:|---:|---:|---:|",
    ]
    seen = []
    for m in runs:
        variant = "_xla" if m.task.endswith("_xla") else ""  # t2t-decode --jit_compile
        key = (m.peer, m.dtype, variant)
        if m.part != "decode" or key in seen:
            continue
        seen.append(key)
        row = [f"{m.label} {m.dtype}"]
        for task in ("beam", "greedy"):
            theirs = _find(runs, m.peer, task + variant, m.dtype)
            row += [_rate(theirs), _ratio(_find(runs, "t2t_lite", task, "float32"), theirs)]
        lines.append("| " + " | ".join(row) + " |")
    return lines + _best_against_int8(runs)


def best_against_int8(runs, task: str) -> tuple[str, float] | None:
    """t2t_lite's fastest variant of `task` ("beam", "greedy"; its precision, " jit_compile"
    under XLA) and its rate over CTranslate2 int8's; None where either is missing."""
    theirs = _find(runs, "ctranslate2", task, "int8")
    ours = [
        m
        for m in runs
        if m.part == "decode"
        and m.peer == "t2t_lite"
        and m.task in (task, f"{task}_xla")
        and m.median() is not None
    ]
    if theirs is None or theirs.median() is None or not ours:
        return None
    best = max(ours, key=lambda m: m.median())
    xla = " jit_compile" if best.task.endswith("_xla") else ""
    return f"{best.dtype}{xla}", best.median() / theirs.median()


def _best_against_int8(runs) -> list[str]:
    """The decoding target's row: best_against_int8 of each search, or nothing where either
    search lacks it."""
    best = [best_against_int8(runs, task) for task in ("beam", "greedy")]
    if None in best:
        return []
    cells = [cell for variant, ratio in best for cell in (variant, f"**{ratio:.2f}x**")]
    return ["| " + " | ".join(["**best t2t_lite / CTranslate2 int8**", *cells]) + " |"]


def _pipeline_table(runs) -> list[str]:
    pipe = _find(runs, "t2t_lite", "pipeline", "float32")
    train = _find(runs, "t2t_lite", "train", "float32")
    if pipe is None or pipe.median() is None:
        return ["Pipeline: not run."]
    lines = ["| measured | real source + target tokens/s |", "|---|---:|"]
    lines.append(f"| input pipeline alone | {_rate(pipe)} |")
    if train and train.median():
        consumed = train.median() * (P.SOURCE_LENGTH + P.TARGET_LENGTH) / P.TARGET_LENGTH
        lines.append(f"| t2t_lite float32 training consumes | {consumed:,.0f} |")
        lines.append(f"| ratio | {pipe.median() / consumed:.0f}x |")
    return lines


def _breakdown_table(runs) -> list[str]:
    found = [m for m in runs if m.task == "breakdown" and m.results]
    if not found:
        return []
    lines = [
        "",
        "t2t_lite's training step broken into parts (median seconds per call, each "
        "part its own tf.function, timed in turns; medians over runs):",
        "",
    ]
    names = list(found[0].results[0]["parts"])
    lines += [
        "| part | " + " | ".join(m.dtype for m in found) + " |",
        "|---|" + "---:|" * len(found),
    ]
    for name in names:
        cells = [f"{statistics.median(r['parts'][name] for r in m.results):.3f}" for m in found]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def markdown(
    runs,
    machine: str,
    load: list,
    minutes: float,
    settings: str,
    sections: list[str] = (),
    commit: str = "unknown",
    command: str = "bench/run_bench.py",
) -> str:
    """The whole report; `sections` (markdown lines) go before the failures. The tables read
    the measurements at the configuration's shape; those at other shapes are `sections`'. The
    header names the date, the commit measured, the command that reproduces the run, and the
    machine."""
    everything, runs = runs, [m for m in runs if not m.shape]
    loads = ", ".join(f"{a:.1f}" for a, _, _ in load)
    lines = [
        "# Benchmarks: t2t_lite side by side with its peers",
        "",
        f"Written by `bench/run_bench.py` on {datetime.date.today()}"
        + (f", {minutes:.0f} minutes." if minutes >= 1 else "."),
        f"Commit: {commit}. Command: `{command}`.",
        f"Machine: {machine}. Load average (1 min) at the start and after each repetition: "
        f"{loads}; the CPUs are shared with other jobs, so compare ratios, not absolute rates.",
        f"Configuration: {P.LAYERS}+{P.LAYERS} layers, d_model {P.D_MODEL}, {P.HEADS} heads, "
        f"d_ff {P.D_FF}, shared vocabulary {P.VOCAB}, batches of {P.BATCH} x {P.SOURCE_LENGTH} "
        f"source and {P.TARGET_LENGTH} target tokens (no padding), dropout {P.DROPOUT}, label "
        f"smoothing {P.LABEL_SMOOTHING}, Adam. {settings}. Rates are medians over "
        "repetitions of each process's median call; (runs) counts the processes that finished.",
        "",
        "Versions:",
        *_versions(runs),
        "",
        "## Training",
        "",
        *_train_table(runs),
        *_breakdown_table(runs),
        "",
        f"## Decoding (forced output length {P.TARGET_LENGTH}, batch {P.BATCH})",
        "",
        *_decode_table(runs),
        "",
        "## Input pipeline",
        "",
        *_pipeline_table(runs),
        *sections,
    ]
    errors = [f"- {describe(m)}: {e}" for m in everything for e in dict.fromkeys(m.errors)]
    if errors:
        lines += ["", "## Failures", "", *errors]
    return "\n".join(lines) + "\n"
