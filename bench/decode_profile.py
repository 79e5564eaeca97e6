"""Where a decoding step's time goes on a CPU: TensorFlow's profiler over the benchmark's greedy
and beam-4 searches (the model and batch of bench/peers/protocol.py, EOS forbidden so that every
output runs to 32 tokens, as `run_bench.py --parts=decode` times them), op time by kind.

    nice -n 10 python bench/decode_profile.py --dtypes=float32,int8 --calls=3

Each search is traced and run twice untimed, then `calls` times under `tf.profiler`. The host
plane of the trace holds one event per op execution (`name:type`) on the executor's threads;
ops are put in kinds by type. "Wall" is the time of one call of the search (the eager call
around its function); "no op running" the part of it in which no op of the search ran on any
thread (the executor's scheduling, the while loop's bookkeeping and Python), from the union of
the op intervals. Op time is summed over threads, so two threads at once count twice. Writes a
markdown table and a JSON record to bench/results/.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import numpy as np
import tensorflow as tf
from absl import app, flags
from op_profile import read_trace, summarize, write_profile  # bench/op_profile.py
from op_profile import table as op_table

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "peers"))
import protocol as P  # noqa: E402  (bench/peers/protocol.py: the one benchmark configuration)

from t2t_lite.decode import transformer_step  # noqa: E402
from t2t_lite.hparams import get_hparams  # noqa: E402
from t2t_lite.model import quantize  # noqa: E402
from t2t_lite.model.transformer import Transformer  # noqa: E402
from t2t_lite.search import beam as search
from t2t_lite.search import sampling

FLAGS = flags.FLAGS
flags.DEFINE_list("dtypes", ["float32", "int8"], "float32, bfloat16 or int8 (int8 weights).")
flags.DEFINE_list("tasks", ["greedy", "beam"], "greedy and/or beam (beam 4).")
flags.DEFINE_integer("calls", 3, "Profiled calls of each search.")
flags.DEFINE_string("record", None, "Where the JSON (and a .md) go; default bench/results/.")


def make_search(task: str, dtype: str, patch=None):
    """The benchmark's model in `dtype` and its search as a traced function of source ids;
    `patch(model)` runs before the search is traced (`decode_ab.py`)."""
    precision = "mixed_bfloat16" if dtype == "bfloat16" else "float32"
    hparams = get_hparams(
        "transformer_small",
        f"norm_position=post,num_encoder_layers={P.LAYERS},num_decoder_layers={P.LAYERS},"
        f"d_model={P.D_MODEL},num_heads={P.HEADS},d_ff={P.D_FF},dropout=0.0,"
        f"precision={precision}",
    )
    tf.keras.utils.set_random_seed(0)
    model = Transformer.from_hparams(hparams, P.VOCAB)
    model.build()
    quantize.quantize_model(model, "int8" if dtype == "int8" else "none")
    if patch is not None:
        patch(model)
    no_eos = -1e9 * tf.one_hot(P.EOS_ID, P.VOCAB)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
    def decode_batch(inputs):
        step_fn, cache = transformer_step.model_step_fn(model, inputs, P.TARGET_LENGTH)

        def step(ids, index, state):
            logits, state = step_fn(ids, index, state)
            return logits + no_eos, state

        batch = tf.shape(inputs)[0]
        if task == "greedy":
            return sampling.greedy_search(step, cache, batch, P.TARGET_LENGTH).ids
        return search.beam_search(step, cache, batch, P.BEAM, P.ALPHA, P.TARGET_LENGTH).ids

    return decode_batch


def profile(task: str, dtype: str) -> dict:
    decode_batch = make_search(task, dtype)
    source = tf.constant(P.batch()[0])
    for _ in range(2):
        decode_batch(source).numpy()
    folder = tempfile.mkdtemp(prefix="decode_profile_")
    tf.profiler.experimental.start(folder)
    for _ in range(FLAGS.calls):
        decode_batch(source).numpy()
    tf.profiler.experimental.stop()
    ops, calls = read_trace(folder, "decode_batch")
    found = summarize(ops, calls, per_call=P.TARGET_LENGTH)
    return {
        "task": task,
        "dtype": dtype,
        "wall_ms": found["wall_ms"],
        "step_ms": found["wall_ms"] / P.TARGET_LENGTH,
        "no_op_ms": found["no_op_ms"],
        "op_ms": found["op_ms"],
        "top_types_ms": found["top_types_ms"],
        "op_executions_per_step": found["op_executions"],
        "target_tokens_per_second": P.TARGET_TOKENS / (found["wall_ms"] * 1e-3),
    }


def table(rows: list[dict]) -> str:
    before = [
        ("wall (ms)", lambda r: f"{r['wall_ms']:.1f}"),
        ("per step (ms)", lambda r: f"{r['step_ms']:.2f}"),
        ("target tokens/s", lambda r: f"{r['target_tokens_per_second']:,.0f}"),
        ("op executions per step", lambda r: f"{r['op_executions_per_step']:.0f}"),
    ]
    columns = [f"{r['task']} {r['dtype']}" for r in rows]
    return op_table("per call of 32 steps", rows, columns, before)


def main(argv) -> None:
    del argv
    load = os.getloadavg()
    rows = []
    for dtype in FLAGS.dtypes:
        for task in FLAGS.tasks:
            rows.append(profile(task, dtype))
            print(json.dumps(rows[-1]), flush=True)
    what = (
        f"Decoding profile, benchmark model (2+2 layers, d_model {P.D_MODEL}, vocabulary "
        f"{P.VOCAB}), {P.BATCH} sentences x {P.TARGET_LENGTH} steps"
    )
    write_profile(
        "decode_profile", load, what, f"{FLAGS.calls} profiled calls each", rows, table(rows),
        tensorflow=tf.__version__, record=FLAGS.record,
    )  # fmt: skip


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    app.run(main)
