"""Where a training step's time goes on a CPU: TensorFlow's profiler over `Trainer.train_step`
(the step t2t-train runs) on the benchmark's model and batch (bench/peers/protocol.py, as
`run_bench.py --parts=train` times it), op time by kind, and the step's model FLOPs against the
matmul ceiling measured in the same process.

    nice -n 10 python bench/train_profile.py --dtypes=float32,bfloat16 --steps=4

Each precision's step is traced and run twice untimed, then `steps` times under `tf.profiler`
(op kinds and "no op running" as in `decode_profile.py`, `op_profile.summarize`). Then each
matmul of the model's shapes is timed alone (medians of 20), so that the matrix products' share
of the step can be read against what those products cost on their own. Writes a markdown table
and a JSON record to bench/results/.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf
from absl import app, flags
from op_profile import read_trace, summarize, write_profile  # bench/op_profile.py
from op_profile import table as op_table

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "peers"))
import protocol as P  # noqa: E402  (bench/peers/protocol.py: the one benchmark configuration)
from t2t_lite_peer import benchmark_hparams  # noqa: E402

from t2t_lite.model import flops  # noqa: E402
from t2t_lite.runtime import distribute  # noqa: E402
from t2t_lite.train.step import Trainer  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_list("dtypes", ["float32", "bfloat16"], "float32 and/or bfloat16 (mixed_bfloat16).")
flags.DEFINE_integer("steps", 4, "Profiled training steps of each precision.")
flags.DEFINE_string("record", None, "Where the JSON (and a .md) go; default bench/results/.")

TOKENS = P.BATCH * P.TARGET_LENGTH
# [rows, contracted, output] of the step's matmuls (forward shapes; the backward pass runs each
# twice more, transposed): projections, feed-forward in and out, the pre-softmax projection.
SHAPES = {
    "projection [2048,256]x[256,256]": (TOKENS, P.D_MODEL, P.D_MODEL),
    "feed-forward in [2048,256]x[256,1024]": (TOKENS, P.D_MODEL, P.D_FF),
    "feed-forward out [2048,1024]x[1024,256]": (TOKENS, P.D_FF, P.D_MODEL),
    "logits [2048,256]x[256,8000]": (TOKENS, P.D_MODEL, P.VOCAB),
    "ceiling [2048,1024]x[1024,1024]": (2048, 1024, 1024),
}


def profile_step(dtype: str) -> dict:
    """The profiled steps of Trainer.train_step in `dtype`."""
    trainer = Trainer(benchmark_hparams(dtype), P.VOCAB, distribute.create_strategy("auto"))
    source, target = P.batch()
    dataset = tf.data.Dataset.from_tensors({"inputs": source, "targets": target}).repeat()
    iterator = iter(trainer.strategy.experimental_distribute_dataset(dataset))
    for _ in range(2):
        float(trainer.train_step(iterator)["loss"])
    folder = tempfile.mkdtemp(prefix="train_profile_")
    tf.profiler.experimental.start(folder)
    for _ in range(FLAGS.steps):
        float(trainer.train_step(iterator)["loss"])
    tf.profiler.experimental.stop()
    found = summarize(*read_trace(folder, "_train_step"))
    per_token = 3 * flops.forward_flops_per_token(
        trainer.hparams, P.VOCAB, P.SOURCE_LENGTH, P.TARGET_LENGTH
    )
    found.update(
        dtype=dtype,
        target_tokens_per_second=TOKENS / (found["wall_ms"] * 1e-3),
        model_gflops_per_second=per_token * TOKENS / (found["wall_ms"] * 1e-3) / 1e9,
    )
    return found


def matmul_rates(dtype: str) -> dict[str, float]:
    """GFLOP/s of each of SHAPES alone in `dtype`, medians of 20 calls."""
    rates = {}
    rng = np.random.default_rng(0)
    for name, (rows, k, n) in SHAPES.items():
        a = tf.constant(rng.normal(size=(rows, k)), tf.as_dtype(dtype))
        b = tf.constant(rng.normal(size=(k, n)), tf.as_dtype(dtype))
        product = tf.function(lambda a=a, b=b: tf.matmul(a, b)[0, 0])
        product().numpy()
        seconds = []
        for _ in range(20):
            start = time.perf_counter()
            product().numpy()
            seconds.append(time.perf_counter() - start)
        rates[name] = 2 * rows * k * n / statistics.median(seconds) / 1e9
    return rates


def table(rows: list[dict]) -> str:
    before = [
        ("wall (ms)", lambda r: f"{r['wall_ms']:.1f}"),
        ("target tokens/s", lambda r: f"{r['target_tokens_per_second']:,.0f}"),
        ("model GFLOP/s", lambda r: f"{r['model_gflops_per_second']:.0f}"),
        ("op executions per step", lambda r: f"{r['op_executions']:.0f}"),
    ]
    after = [
        (f"matmul alone, {name} (GFLOP/s)", lambda r, n=name: f"{r['matmuls'][n]:.0f}")
        for name in SHAPES
    ]
    return op_table("per training step", rows, [r["dtype"] for r in rows], before, after)


def main(argv) -> None:
    del argv
    load = os.getloadavg()
    rows = []
    for dtype in FLAGS.dtypes:
        rows.append({**profile_step(dtype), "matmuls": matmul_rates(dtype)})
        print(json.dumps(rows[-1]), flush=True)
    what = (
        f"Training step profile, benchmark model (2+2 layers, d_model {P.D_MODEL}, vocabulary "
        f"{P.VOCAB}), {P.BATCH} x {P.TARGET_LENGTH} target tokens"
    )
    write_profile(
        "train_profile", load, what, f"{FLAGS.steps} profiled steps each", rows, table(rows),
        tensorflow=tf.__version__, record=FLAGS.record,
    )  # fmt: skip


if __name__ == "__main__":
    app.run(main)
