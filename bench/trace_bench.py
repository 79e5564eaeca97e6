"""A search's first trace, with AutoGraph and without: the seconds a fresh process takes to trace
and run its first beam search (the Translator's search function of a random `transformer_tiny`,
as t2t-decode and t2t-serve trace it on their first line), traced with `autograph=True`
(TensorFlow's default) and with `autograph=False` (what t2t_lite passes), in fresh processes
taken in turns. The two must find the same ids.

    python bench/trace_bench.py --runs=5 [--output=bench/results/NAME.md]
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import sys
import time

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_integer("runs", 5, "Fresh processes of each kind, taken in turns.")
flags.DEFINE_integer("beam_size", 4, "The search's beam.")
flags.DEFINE_string("output", "", "Also write the table to this Markdown file.")
flags.DEFINE_enum("child", "", ["", "autograph", "plain"], "(internal) one measurement.")

VOCAB = 40
SOURCES = [[5, 6, 7, 8, 1], [9, 10, 11, 1], [12, 13, 1]]


def measure(autograph: bool) -> dict:
    """The first call's seconds of the search traced with or without AutoGraph, and its ids'
    digest."""
    import keras
    import tensorflow as tf

    from t2t_lite.decode.batches import pad_batch
    from t2t_lite.decode.transformer_step import search_function
    from t2t_lite.hparams import SearchSettings, get_hparams
    from t2t_lite.model.transformer import Transformer

    keras.utils.set_random_seed(1)
    model = Transformer.from_hparams(get_hparams("transformer_tiny"), VOCAB)
    model.build()
    settings = SearchSettings(beam_size=FLAGS.beam_size, alpha=0.6, extra_length=10)
    search = tf.function(
        lambda inputs: search_function(model, settings)(inputs),
        input_signature=[tf.TensorSpec([None, None], tf.int32)],
        autograph=autograph,
    )
    inputs = tf.constant(pad_batch(SOURCES))
    start = time.perf_counter()
    ids = search(inputs).ids.numpy()
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "ids": hashlib.sha256(ids.tobytes()).hexdigest()[:16]}


def fresh(kind: str) -> dict:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run(
        [sys.executable, __file__, f"--child={kind}", f"--beam_size={FLAGS.beam_size}"],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv) -> None:
    del argv
    if FLAGS.child:
        print(json.dumps(measure(FLAGS.child == "autograph")))
        return
    from machine import machine  # bench/machine.py, beside this script

    load = os.getloadavg()
    found = {"autograph": [], "plain": []}
    for run in range(FLAGS.runs):
        for kind in ("autograph", "plain") if run % 2 == 0 else ("plain", "autograph"):
            found[kind].append(fresh(kind))
    digests = {r["ids"] for rows in found.values() for r in rows}
    if len(digests) != 1:
        raise SystemExit(f"trace_bench.py: error: the searches found different ids: {digests}")
    median = {k: statistics.median(r["seconds"] for r in rows) for k, rows in found.items()}
    about = machine(load)
    unit = about["matrix_unit"] or "no AMX, no AVX-512 BF16"  # the CPU kind
    lines = [
        f"First beam-{FLAGS.beam_size} search of a random `transformer_tiny` in a fresh process; "
        f"{about['cpu']} ({unit}, {about['cpus']} CPUs), commit {about['commit']}, "
        f"{about['date']}; "
        f"{FLAGS.runs} processes of each kind in turns, medians; load {about['load']}. "
        "Written by `bench/trace_bench.py`.",
        "",
        "| traced | first search (s) | each process (s) |",
        "|---|---:|---|",
    ]
    for kind, label in (("autograph", "with AutoGraph"), ("plain", "`autograph=False`")):
        each = ", ".join(f"{r['seconds']:.2f}" for r in found[kind])
        lines.append(f"| {label} | {median[kind]:.2f} | {each} |")
    lines += ["", f"Ratio (with / without): {median['autograph'] / median['plain']:.2f}x; the "
              "same ids in every process."]  # fmt: skip
    text = "\n".join(lines) + "\n"
    print(text)
    if FLAGS.output:
        with open(FLAGS.output, "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    app.run(main)
