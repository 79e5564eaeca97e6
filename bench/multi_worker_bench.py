"""One worker against two on 127.0.0.1 at the same global batch: tokens per second of t2t-train.

"one": one process with `batch_size` 2B (one replica); "two": two workers under
MultiWorkerMirroredStrategy (TF_CONFIG on loopback ports) with B each. Both train the same model
on the same synthetic algorithmic_reverse data for `--steps`; the rate is the chief's progress
line over the steps after the first `--log_every` (start-up and tracing left out). Runs
alternate, `--reps` of each; medians are reported with the CPU. On one machine's shared cores
two workers compete for the same cores, so this measures the cost of the collectives, not a
speed-up.

    python bench/multi_worker_bench.py [--steps=300] [--reps=3] [--output=bench/results/x.json]
"""

from __future__ import annotations

import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile

from absl import app, flags

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [BENCH, os.path.join(BENCH, "peers")]
from report import machine  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_integer("steps", 300, "Steps per run.")
flags.DEFINE_integer("log_every", 50, "Progress lines every N steps; the first window is left out.")
flags.DEFINE_integer("batch_size", 1024, "Tokens per replica of the two-worker run (B).")
flags.DEFINE_integer("reps", 3, "Runs of each, alternating.")
flags.DEFINE_string("output", None, "Also write the results as JSON here.")

RATE = re.compile(r"step (\d+)/\d+ .* ([\d,]+) tok/s")


def _ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _rate(log: str) -> float:
    """Tokens per second of the progress lines after the first (start-up) window."""
    rates = [float(r.replace(",", "")) for s, r in RATE.findall(log) if int(s) > FLAGS.log_every]
    return statistics.mean(rates)


def _train(data_dir: str, out: str, workers: int) -> float:
    batch = FLAGS.batch_size * (2 if workers == 1 else 1)
    command = [
        sys.executable, "-m", "t2t_lite.bin.t2t_train", "--problem=algorithmic_reverse",
        "--hparams_set=transformer_tiny", f"--hparams=batch_size={batch}",
        f"--data_dir={data_dir}", f"--output_dir={out}", f"--train_steps={FLAGS.steps}",
        f"--log_every={FLAGS.log_every}", "--save_every=100000", "--eval_every=100000",
    ]  # fmt: skip
    hosts = [f"127.0.0.1:{p}" for p in _ports(workers)]
    processes = []
    for index in range(workers):
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
        if workers > 1:
            task = {"type": "worker", "index": index}
            env["TF_CONFIG"] = json.dumps({"cluster": {"worker": hosts}, "task": task})
        processes.append(subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True))
    logs = [p.communicate()[1] for p in processes]
    if any(p.returncode for p in processes):
        raise RuntimeError(logs[0][-3000:])
    return _rate(logs[0])


def main(argv) -> None:
    del argv
    from t2t_lite import problems

    with tempfile.TemporaryDirectory() as folder:
        data_dir = os.path.join(folder, "data")
        problems.get_problem("algorithmic_reverse").generate_data(
            data_dir, num_symbols=64, max_sequence_length=30, train_size=20000, dev_size=100
        )
        rates = {"one": [], "two": []}
        for rep in range(FLAGS.reps):
            for name, workers in (("one", 1), ("two", 2)):
                out = os.path.join(folder, f"{name}{rep}")
                rates[name].append(_train(data_dir, out, workers))
                print(f"{name} worker(s), run {rep + 1}: {rates[name][-1]:,.0f} tok/s", flush=True)
    medians = {k: statistics.median(v) for k, v in rates.items()}
    result = {
        "machine": machine(),
        "steps": FLAGS.steps,
        "global_batch_tokens": 2 * FLAGS.batch_size,
        "tokens_per_second": rates,
        "median": medians,
        "two_over_one": round(medians["two"] / medians["one"], 3),
    }
    print(json.dumps(result, indent=1))
    if FLAGS.output:
        with open(FLAGS.output, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    app.run(main)
