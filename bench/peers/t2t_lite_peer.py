"""t2t_lite itself, and this CPU's matmul ceiling, in the benchmark's process protocol.

    .venv/bin/python bench/peers/t2t_lite_peer.py --task=train --dtype=bfloat16
    .venv/bin/python bench/peers/t2t_lite_peer.py --task=train_xla  # hparams jit_compile=true
    .venv/bin/python bench/peers/t2t_lite_peer.py --task=beam      # or greedy
    .venv/bin/python bench/peers/t2t_lite_peer.py --task=greedy_xla  # t2t-decode --jit_compile
    .venv/bin/python bench/peers/t2t_lite_peer.py --task=beam --dtype=int8
    .venv/bin/python bench/peers/t2t_lite_peer.py --task=matmul --dtype=float32

train: `t2t_lite.train.step.Trainer.train_step`, the step t2t-train runs (default strategy,
global all-reduce, non-finite check, Adam), on transformer_small resized to the benchmark's
configuration; train_xla the same with `jit_compile=true` (XLA compiles the forward pass and
its gradients). beam / greedy: `t2t_lite.search.beam` with the cached decoder, EOS forbidden
so that every output runs to the target length; --dtype=int8 decodes with int8 weights
(`t2t_lite.model.quantize`, what `t2t-decode --quantize=int8` runs). matmul: GFLOP/s of a
[2048, 1024] x [1024, 1024] product (the shape of the model's largest training matmuls, scaled
up) in TensorFlow, the ceiling that model FLOPs utilisation is measured against.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import protocol as P  # noqa: E402
import tensorflow as tf  # noqa: E402

from t2t_lite.decode import transformer_step  # noqa: E402
from t2t_lite.hparams import get_hparams  # noqa: E402
from t2t_lite.model import flops, quantize  # noqa: E402
from t2t_lite.model.transformer import Transformer  # noqa: E402
from t2t_lite.runtime import distribute
from t2t_lite.search import beam as search
from t2t_lite.search import sampling
from t2t_lite.train.step import Trainer, batch_stats  # noqa: E402
from t2t_lite.vocabulary import EOS_ID  # noqa: E402

PRECISION = {"float32": "float32", "bfloat16": "mixed_bfloat16", "int8": "float32"}


def benchmark_hparams(dtype: str = "float32", jit_compile: bool = False):
    """transformer_small at the benchmark's configuration: post-norm like every peer."""
    return get_hparams(
        "transformer_small",
        "norm_position=post,"
        f"num_encoder_layers={P.LAYERS},num_decoder_layers={P.LAYERS},d_model={P.D_MODEL},"
        f"num_heads={P.HEADS},d_ff={P.D_FF},dropout={P.DROPOUT},"
        f"label_smoothing={P.LABEL_SMOOTHING},batch_size={P.TARGET_TOKENS},"
        f"precision={PRECISION[dtype]},jit_compile={str(jit_compile).lower()}",
    )


def train(args) -> None:
    strategy = distribute.create_strategy("auto")
    # train_xla: `jit_compile=true`, XLA compiles the forward pass and its gradients.
    hparams = benchmark_hparams(args.dtype, jit_compile=args.task == "train_xla")
    trainer = Trainer(hparams, P.VOCAB, strategy)
    source, target = P.batch()
    dataset = tf.data.Dataset.from_tensors({"inputs": source, "targets": target}).repeat()
    iterator = iter(strategy.experimental_distribute_dataset(dataset))

    def step():
        result = trainer.train_step(iterator)
        if float(result["target_tokens"]) != P.TARGET_TOKENS:
            raise AssertionError(f"step saw {result['target_tokens']} target tokens")

    seconds = P.time_calls(step, args.steps, args.warmup, f"t2t_lite train {args.dtype}")
    per_token = 3 * flops.forward_flops_per_token(
        hparams, P.VOCAB, P.SOURCE_LENGTH, P.TARGET_LENGTH
    )
    P.report(seconds, version=tf.__version__, train_flops_per_target_token=per_token)


def decode(args) -> None:
    hparams = benchmark_hparams(args.dtype)
    tf.keras.utils.set_random_seed(0)
    model = Transformer.from_hparams(hparams, P.VOCAB)
    model.build()
    quantize.quantize_model(model, "int8" if args.dtype == "int8" else "none")
    no_eos = -1e9 * tf.one_hot(EOS_ID, P.VOCAB)
    length = P.TARGET_LENGTH

    # beam_xla / greedy_xla: the search `t2t-decode --jit_compile` runs, compiled by XLA with
    # the fixed-shape cache (the compile itself falls in the warm-up calls).
    xla = args.task.endswith("_xla")
    buffer = length if xla else None

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)], jit_compile=xla)
    def decode_batch(inputs):
        step_fn, cache = transformer_step.model_step_fn(model, inputs, length, fixed_shapes=xla)

        def step(ids, index, state):
            logits, state = step_fn(ids, index, state)
            return logits + no_eos, state

        batch = tf.shape(inputs)[0]
        if args.task.startswith("greedy"):
            return sampling.greedy_search(step, cache, batch, length, buffer_length=buffer).ids
        return search.beam_search(
            step, cache, batch, P.BEAM, P.ALPHA, length, buffer_length=buffer
        ).ids

    source = tf.constant(P.batch()[0])
    lengths = []

    def run():
        ids = decode_batch(source).numpy()[:, 0]  # --> [batch, length]
        lengths.append(int((ids > 0).sum()))

    seconds = P.time_calls(run, args.steps, args.warmup, f"t2t_lite {args.task}")
    if min(lengths) != P.TARGET_TOKENS:
        raise AssertionError(f"outputs not of the forced length: {min(lengths)} tokens")
    P.report(seconds, version=tf.__version__, output_tokens=lengths[-1])


def matmul(args) -> None:
    dtype = tf.as_dtype(args.dtype)
    rng = np.random.default_rng(0)
    a = tf.constant(rng.normal(size=(2048, 1024)), dtype)
    b = tf.constant(rng.normal(size=(1024, 1024)), dtype)
    repeats = 8
    flop = 2 * 2048 * 1024 * 1024 * repeats

    @tf.function
    def products():
        total = tf.zeros([], dtype)
        for _ in range(repeats):  # independent products, summed so none is pruned
            total += tf.matmul(a + total, b)[0, 0]
        return total

    seconds = P.time_calls(lambda: products().numpy(), args.steps, args.warmup, f"matmul {dtype}")
    P.report(seconds, tokens=0, gflops=flop / 1e9 / float(np.median(seconds)))


def pipeline(args) -> None:
    """Real (non-padding) source + target tokens/s of the input pipeline alone, on synthetic
    shards shaped like the LibreOffice-help corpus (bench/pipeline_bench.py)."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import pipeline_bench

    with tempfile.TemporaryDirectory() as folder:
        files = pipeline_bench.synthetic_shards(folder, P.VOCAB)
        rates = [
            pipeline_bench.time_pipeline(files, benchmark_hparams(), 100)["tokens_per_s"]
            for _ in range(args.steps)
        ]
    P.report([1.0 / r for r in rates], tokens=1)


def breakdown(args) -> None:
    """The training step broken into parts, each its own tf.function timed in turns: forward,
    forward + loss, + gradients, the whole Trainer step; and the logits + loss alone."""
    strategy = distribute.create_strategy("auto")
    trainer = Trainer(benchmark_hparams(args.dtype), P.VOCAB, strategy)
    model = trainer.model
    source, target = P.batch()
    batch = {"inputs": tf.constant(source), "targets": tf.constant(target)}
    iterator = iter(
        strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensors(batch).repeat())
    )
    hidden = tf.random.normal([P.BATCH, P.TARGET_LENGTH, P.D_MODEL])

    def loss_of(logits):
        return batch_stats(logits, batch, P.LABEL_SMOOTHING).smoothed_sum

    def gradients_of(fn, variables):
        @tf.function
        def run():
            with tf.GradientTape() as tape:
                loss = fn()
            return tf.add_n(
                [tf.reduce_sum(tf.convert_to_tensor(g)) for g in tape.gradient(loss, variables)]
            )

        return run

    weights = model.trainable_variables
    parts = {
        "forward": tf.function(lambda: tf.reduce_sum(model(batch, training=True))),
        "forward + loss": tf.function(lambda: loss_of(model(batch, training=True))),
        "forward + loss + gradients": gradients_of(
            lambda: loss_of(model(batch, training=True)), weights
        ),
        "whole step (Trainer.train_step)": lambda: trainer.train_step(iterator)["loss"],
        "logits + loss alone": tf.function(lambda: loss_of(model.embedding.logits(hidden))),
        "logits + loss alone, with gradients": gradients_of(
            lambda: loss_of(model.embedding.logits(hidden)), model.embedding.trainable_variables
        ),
    }
    seconds = {name: [] for name in parts}
    for _ in range(args.warmup):
        for fn in parts.values():
            fn().numpy()
    for _ in range(args.steps):
        for name, fn in parts.items():
            start = time.perf_counter()
            fn().numpy()
            seconds[name].append(time.perf_counter() - start)
    P.report(
        seconds["whole step (Trainer.train_step)"],
        parts={k: statistics.median(v) for k, v in seconds.items()},
    )


def main() -> None:
    args = P.parse_args(
        (
            "train",
            "train_xla",
            "beam",
            "greedy",
            "beam_xla",
            "greedy_xla",
            "matmul",
            "pipeline",
            "breakdown",
        ),
        ("float32", "bfloat16", "int8"),
    )
    tasks = {"train": train, "train_xla": train, "matmul": matmul}
    tasks.update({name: decode for name in ("beam", "greedy", "beam_xla", "greedy_xla")})
    {**tasks, "pipeline": pipeline, "breakdown": breakdown}[args.task](args)


if __name__ == "__main__":
    main()
