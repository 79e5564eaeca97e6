"""t2t_lite side by side with its peers on one configuration; writes bench/RESULTS.md, the current
tables (their analysis is kept in docs/results/benchmarks.md, newest first).

    make bench                                   # creates .bench/<peer> venvs, runs everything
    .venv/bin/python bench/run_bench.py --parts=train --reps=3 --output=bench/RESULTS.md
    .venv/bin/python bench/run_bench.py --parts=decode --only=t2t_lite,ctranslate2

Every measurement is one process (bench/peers/<peer>_peer.py in that peer's virtual environment,
see bench/peers/protocol.py for the configuration and the result line). A repetition runs every
selected measurement once, in turns, so that load from other jobs on this shared machine falls on
all of them alike; the report gives the median over repetitions and ratios to t2t_lite measured
in the same run. Parts: train (target tokens/s of a training step, float32 and bfloat16, with
the matmul ceiling and model FLOPs utilisation), decode (beam 4 and greedy target tokens/s at a
forced output length), pipeline (the input pipeline's tokens/s against what training consumes),
breakdown (the parts of t2t_lite's step), curves (tokens/s against sentence length and batch
size, bench/curves.py; its plot is written beside --output).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time

from absl import app, flags

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))
import curves  # noqa: E402
import kinds  # noqa: E402
import report  # noqa: E402
import t2t_lite_peer  # noqa: E402
from machine import ROOT  # noqa: E402
from measurement import Measurement  # noqa: E402

from t2t_lite.runtime import atomic_io  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_list(
    "parts", ["train", "decode", "pipeline", "breakdown", "curves"], "Which parts to run."
)
flags.DEFINE_list("only", [], "Only these peers (t2t_lite, matmul, torch, ...).")
flags.DEFINE_list("dtypes", ["float32", "bfloat16", "int8"], "Only these precisions.")
flags.DEFINE_integer("reps", 3, "Repetitions: every measurement runs once per repetition.")
flags.DEFINE_integer("steps", 6, "Timed calls per process (after --warmup untimed ones).")
flags.DEFINE_integer("warmup", 2, "Untimed calls per process (tracing, compilation).")
flags.DEFINE_integer("timeout", 600, "Seconds before a measurement is abandoned.")
flags.DEFINE_string("bench_dir", ".bench", "Folder of the peers' virtual environments.")
flags.DEFINE_string("output", None, "Write the markdown report here (RESULTS.md).")
flags.DEFINE_string("save_json", None, "Also write the raw results of this run here.")
flags.DEFINE_list("from_json", [], "Merge the raw results of earlier runs into the report.")


def measurements() -> list[Measurement]:
    """Everything the benchmark can run, in the order of a repetition."""
    m = []
    for dtype in ("float32", "bfloat16"):
        m += [
            Measurement("train", "matmul", "matmul", dtype, "matmul ceiling"),
            Measurement("train", "t2t_lite", "train", dtype, "t2t_lite (Trainer.train_step)"),
            Measurement("train", "t2t_lite", "train_xla", dtype, "t2t_lite jit_compile"),
            Measurement("train", "model_garden", "train", dtype, "Model Garden", "model_garden"),
            Measurement("train", "opennmt", "train", dtype, "OpenNMT-tf", "opennmt"),
            Measurement("train", "keras_hub", "train", dtype, "keras-hub", "keras_hub"),
            Measurement(
                "train", "keras_hub", "train_xla", dtype, "keras-hub jit_compile", "keras_hub"
            ),
            Measurement("train", "torch", "train", dtype, "PyTorch nn.Transformer", "torch"),
        ]
    for task in ("beam", "greedy"):
        m += [
            Measurement("decode", "t2t_lite", task, "float32", "t2t_lite"),
            Measurement("decode", "t2t_lite", task, "bfloat16", "t2t_lite"),
            Measurement("decode", "t2t_lite", task, "int8", "t2t_lite"),
            Measurement("decode", "t2t_lite", f"{task}_xla", "float32", "t2t_lite jit_compile"),
            Measurement("decode", "model_garden", task, "float32", "Model Garden", "model_garden"),
            Measurement("decode", "ctranslate2", task, "float32", "CTranslate2", "ctranslate2"),
            Measurement("decode", "ctranslate2", task, "int8", "CTranslate2", "ctranslate2"),
        ]
    m.append(Measurement("pipeline", "t2t_lite", "pipeline", "float32", "t2t_lite pipeline"))
    for dtype in ("float32", "bfloat16"):
        m.append(Measurement("breakdown", "t2t_lite", "breakdown", dtype, "t2t_lite step parts"))
    return m + curves.measurements()


def key(m) -> tuple:
    return (m.peer, m.task, m.dtype, tuple(m.shape) if m.shape else None)


def run_one(m: Measurement) -> None:
    """Runs one process and appends its result (or the reason it failed) to `m`."""
    command = [m.python(FLAGS.bench_dir), m.script, f"--task={m.task}", f"--dtype={m.dtype}"]
    command += [f"--steps={FLAGS.steps}", f"--warmup={FLAGS.warmup}"]
    if m.shape:
        command += [f"--batch={m.shape[0]}", f"--length={m.shape[1]}"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONWARNINGS": "ignore"}
    start = time.perf_counter()
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=FLAGS.timeout, env=env, cwd=ROOT
        )
    except subprocess.TimeoutExpired:
        m.errors.append(f"timed out after {FLAGS.timeout} s")
        return
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not lines:
        lines = done.stderr.strip().splitlines() or ["no output"]
        tail = next((x for x in reversed(lines) if "Error" in x), lines[-1]).strip()
        m.errors.append(f"exit {done.returncode}: {tail[:300]}")
        print(f"  {report.describe(m)}: FAILED {m.errors[-1]}", flush=True)
        return
    result = json.loads(lines[-1][len("RESULT ") :])
    m.results.append(result)
    rate = result.get("gflops") or result["tokens_per_s"]
    unit = "GFLOP/s" if "gflops" in result else "tokens/s"
    seconds = time.perf_counter() - start
    print(f"  {report.describe(m)}: {rate:,.0f} {unit} ({seconds:.0f} s)", flush=True)


def selected() -> list[Measurement]:
    chosen = []
    for m in measurements():
        if m.part not in FLAGS.parts or m.dtype not in FLAGS.dtypes:
            continue
        if FLAGS.only and m.peer not in FLAGS.only:
            continue
        if m.venv and not os.path.exists(m.python(FLAGS.bench_dir)):
            m.errors.append(f"no environment {m.python(FLAGS.bench_dir)} (run `make bench-envs`)")
        chosen.append(m)
    return chosen


def merge(runs: list[Measurement], path: str, load: list, machines: list) -> str:
    """Adds the results of an earlier run (its --save_json file) to `runs`, `load` and
    `machines`; returns the commit it measured (`kinds.record_commit`)."""
    with open(path) as f:
        saved = json.load(f)
    by_key = {key(m): m for m in runs}
    for item in saved["runs"]:
        found = next(m for m in measurements() if key(m) == key(Measurement(**item)))
        if key(found) not in by_key:
            by_key[key(found)] = found
            runs.append(found)
        by_key[key(found)].results += item["results"]
        by_key[key(found)].errors += item["errors"]
    load += [tuple(x) for x in saved["load"]]
    machines.append(saved.get("machine", f"not recorded in {path}"))
    return kinds.record_commit(path, saved)


def commit() -> str:
    """The checkout's commit, `+` when it has uncommitted changes, or "unknown" outside git."""
    try:
        head = subprocess.run(
            ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        dirty = subprocess.run(
            ["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+" if dirty else "")


def main(argv: list[str]) -> None:
    del argv
    runs = selected() if FLAGS.reps else []
    load = [os.getloadavg()] if FLAGS.reps else []
    started = time.time()
    for rep in range(FLAGS.reps):
        print(f"repetition {rep + 1}/{FLAGS.reps} ({time.time() - started:.0f} s)", flush=True)
        # Rotating the order as well keeps a slow stretch from always hitting the same peer.
        shift = rep % max(len(runs), 1)
        for m in runs[shift:] + runs[:shift]:
            if not (m.venv and not os.path.exists(m.python(FLAGS.bench_dir))):
                run_one(m)
        load.append(os.getloadavg())
    here = report.machine()
    machines = [here] if FLAGS.reps else []
    if FLAGS.save_json:
        saved = {"runs": [m.__dict__ for m in runs], "load": load, "machine": here}
        saved.update(commit=commit(), date=time.strftime("%Y-%m-%d"))
        atomic_io.write_text(FLAGS.save_json, json.dumps(saved, indent=1))
    merged = [merge(runs, path, load, machines) for path in FLAGS.from_json]
    order = {key(m): i for i, m in enumerate(measurements())}
    runs.sort(key=lambda m: order[key(m)])
    plot = curves.plot_path(FLAGS.output) if FLAGS.output else None
    text = report.markdown(
        runs,
        machine="; ".join(dict.fromkeys(machines)),
        load=load,
        minutes=(time.time() - started) / 60,
        settings=f"{FLAGS.reps} repetitions, {FLAGS.steps} timed calls per process "
        f"after {FLAGS.warmup} untimed; Python {platform.python_version()}"
        if not FLAGS.from_json
        else f"Merged runs ({', '.join(FLAGS.from_json)}), their settings in their reports",
        sections=curves.section(runs, plot, t2t_lite_peer.benchmark_hparams())
        + kinds.section(os.path.join(ROOT, "bench", "results"), FLAGS.output),
        commit=commit() if FLAGS.reps else ", ".join(dict.fromkeys(merged)) or "unknown",
        command=" ".join(["bench/run_bench.py", *sys.argv[1:]]),
    )
    print(text)
    if FLAGS.output:
        atomic_io.write_text(FLAGS.output, text)


if __name__ == "__main__":
    app.run(main)
