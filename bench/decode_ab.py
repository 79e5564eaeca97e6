"""One decoding change's own gain: the benchmark's greedy and beam-4 searches (the model and
batch of bench/peers/protocol.py, as `decode_profile.py` builds them) with the change and with
it undone on the same model, in alternating calls.

    nice -n 10 python bench/decode_ab.py --change=output_kernel --dtypes=float32,bfloat16

Changes it can undo:
  output_kernel: the search multiplies by the pre-softmax matrix as the layer stores it
    ([vocab, d_model], transposed in each step's product) instead of the copy transposed once
    per search (`Transformer.output_kernel`).
  greedy_choice: greedy search takes each step's token and log-prob from the log-softmax over
    the whole vocabulary (argmax, then gather) instead of `sampling.greedy_choice` (the best
    two logits and the softmax at the best).

Each search is traced and run twice untimed, then `calls` times with and without the change in
turns; reported: the median call of each, their ratio, and the median of the ratios of each
back-to-back pair.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time

import tensorflow as tf
from absl import app, flags
from decode_profile import P, make_search  # bench/decode_profile.py, beside this script
from machine import machine

from t2t_lite.search import sampling

FLAGS = flags.FLAGS
flags.DEFINE_enum(
    "change", "output_kernel", ["output_kernel", "greedy_choice"], "The change to measure."
)
flags.DEFINE_list("ab_dtypes", ["float32", "bfloat16", "int8"], "Weights to measure with.")
flags.DEFINE_list("ab_tasks", ["greedy", "beam"], "greedy and/or beam (beam 4).")
flags.DEFINE_integer("ab_calls", 9, "Timed calls of each search.")


def undone(model) -> None:
    """`model` searching without the change (FLAGS.change)."""
    if FLAGS.change == "output_kernel":
        model.output_kernel = lambda columns=None: None  # every step transposes in its product


def log_softmax_choice(logits, pad_id):
    """Greedy search's token and log-prob before `sampling.greedy_choice`."""
    log_probs = sampling.normalized_log_probs(logits, pad_id)  # --> [rows, vocab]
    token = tf.argmax(log_probs, axis=-1, output_type=tf.int32)
    return token, tf.gather(log_probs, token, batch_dims=1)


@contextlib.contextmanager
def tracing_undone():
    """The search traced inside runs without the change (FLAGS.change), where the change is in
    the search rather than the model."""
    if FLAGS.change != "greedy_choice":
        yield
        return
    kept = sampling.greedy_choice
    sampling.greedy_choice = log_softmax_choice
    try:
        yield
    finally:
        sampling.greedy_choice = kept


def pair(task: str, dtype: str) -> dict:
    searches = {"with": make_search(task, dtype), "without": make_search(task, dtype, undone)}
    source = tf.constant(P.batch()[0])
    for name, search in searches.items():
        with tracing_undone() if name == "without" else contextlib.nullcontext():
            for _ in range(2):
                search(source).numpy()
    seconds = {name: [] for name in searches}
    for _ in range(FLAGS.ab_calls):
        for name, search in searches.items():
            start = time.perf_counter()
            search(source).numpy()
            seconds[name].append(time.perf_counter() - start)
    ratios = [b / a for a, b in zip(seconds["with"], seconds["without"], strict=True)]
    row = {"task": task, "dtype": dtype}
    for name, values in seconds.items():
        row[f"{name}_tokens_per_second"] = P.TARGET_TOKENS / statistics.median(values)
    row["speedup"] = statistics.median(ratios)
    return row


def main(argv) -> None:
    del argv
    load = os.getloadavg()
    rows = [pair(task, dtype) for dtype in FLAGS.ab_dtypes for task in FLAGS.ab_tasks]
    about = machine(load)
    print(
        f"{FLAGS.change}: {about['cpu']} ({about['cpus']} CPUs), TensorFlow {tf.__version__}, "
        f"commit {about['commit']}, {about['date']}; {FLAGS.ab_calls} alternating calls each; "
        f"load {about['load']}\n"
    )
    print("| search | weights | without (tok/s) | with (tok/s) | median pair ratio |")
    print("|---|---|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['task']} | {r['dtype']} | {r['without_tokens_per_second']:,.0f} | "
            f"{r['with_tokens_per_second']:,.0f} | {r['speedup']:.3f}x |"
        )


if __name__ == "__main__":
    app.run(main)
