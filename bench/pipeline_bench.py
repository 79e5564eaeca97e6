"""Does the input pipeline outrun training? Tokens per second delivered vs. consumed.

Measures, in one process on this machine:
  1. the pipeline (`t2t_lite.data.pipeline`): shuffled, bucketed batches of `--hparams_set`'s
     token budget, read from a finished `--data_dir` or from synthetic shards shaped like the
     LibreOffice-help corpus (25,000 pairs, mean length about 22 tokens);
  2. training: a plain Keras/TF train step (forward, label-smoothed loss, gradients, Adam) of
     `Transformer.from_hparams(--hparams_set)` on batches taken from the same pipeline beforehand.
Both count real (non-padding) source + target tokens. The issue asks for a ratio of at least 10.

    python bench/pipeline_bench.py [--data_dir=/tmp/lohelp_ende] [--output=bench/results/x.md]
"""

from __future__ import annotations

import os
import tempfile
import time

import numpy as np
import tensorflow as tf
from absl import app, flags

from t2t_lite.data.pipeline import make_dataset_from_files
from t2t_lite.data.shards import serialize_example
from t2t_lite.hparams import get_hparams
from t2t_lite.model.losses import label_smoothed_cross_entropy
from t2t_lite.model.transformer import Transformer
from t2t_lite.problems import read_metadata
from t2t_lite.runtime import atomic_io
from t2t_lite.train.schedules import create_optimizer

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", None, "A finished data_dir; synthetic shards when not given.")
flags.DEFINE_string("hparams_set", "transformer_small", "Model and batch size to measure.")
flags.DEFINE_integer("vocab_size", 8000, "Vocabulary size of the synthetic data and model.")
flags.DEFINE_integer("pipeline_batches", 400, "Batches timed for the pipeline.")
flags.DEFINE_integer("train_steps", 8, "Train steps timed (after 2 warm-up steps).")
flags.DEFINE_string("output", None, "Also write the markdown table here.")


def synthetic_shards(folder: str, vocab_size: int, examples: int = 25_000) -> list[str]:
    """Three shards of random ids with lohelp-like lengths (log-normal, mean about 22)."""
    rng = np.random.default_rng(0)
    files = []
    for shard in range(3):
        path = os.path.join(folder, f"train-{shard:05d}.tfrecord")
        with tf.io.TFRecordWriter(path) as writer:
            for _ in range(examples // 3):
                lengths = np.clip(rng.lognormal(2.9, 0.6, size=2).astype(int), 2, 150)
                src, tgt = (rng.integers(3, vocab_size, size=n).tolist() + [1] for n in lengths)
                writer.write(serialize_example(src, tgt))
        files.append(path)
    return files


def _real_tokens(batch: dict[str, tf.Tensor]) -> int:
    return int(sum(tf.math.count_nonzero(batch[k]) for k in ("inputs", "targets")))


def time_pipeline(files: list[str], hparams, batches: int) -> dict:
    ds = make_dataset_from_files(files, hparams, shuffle=True, repeat=True, seed=0)
    iterator = iter(ds)
    for _ in range(20):  # warm-up: buffers fill, functions trace
        next(iterator)
    real = padded = 0
    start = time.perf_counter()
    for i in range(batches):
        batch = next(iterator)
        real += _real_tokens(batch)
        padded += int(tf.size(batch["inputs"]) + tf.size(batch["targets"]))
        if (i + 1) % 100 == 0:
            rate = real / (time.perf_counter() - start)
            print(f"pipeline: {i + 1}/{batches} batches, {rate:,.0f} real tokens/s", flush=True)
    seconds = time.perf_counter() - start
    return {
        "tokens_per_s": real / seconds,
        "padding_fraction": 1 - real / padded,
        "batches_per_s": batches / seconds,
    }


def time_training(files: list[str], hparams, vocab_size: int, steps: int) -> dict:
    ds = make_dataset_from_files(files, hparams, shuffle=True, repeat=True, seed=1)
    batches = list(ds.take(steps + 2))  # materialized first: only compute is timed
    model = Transformer.from_hparams(hparams, vocab_size)
    model(batches[0])  # builds the weights eagerly, outside the traced step
    optimizer = create_optimizer(hparams)
    optimizer.build(model.trainable_variables)
    spec = {k: tf.TensorSpec([None, None], tf.int32) for k in ("inputs", "targets")}

    @tf.function(input_signature=[spec])
    def train_step(batch):
        with tf.GradientTape() as tape:
            logits = model(batch, training=True)
            loss_sum, _, count = label_smoothed_cross_entropy(
                logits, batch["targets"], hparams.label_smoothing
            )
            loss = loss_sum / count
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    for batch in batches[:2]:
        train_step(batch)  # traces and builds the optimizer's variables
    real, start = 0, time.perf_counter()
    for i, batch in enumerate(batches[2:]):
        loss = train_step(batch)
        real += _real_tokens(batch)
        rate = real / (time.perf_counter() - start)
        print(
            f"train: step {i + 1}/{steps}, loss {float(loss):.3f}, {rate:,.0f} tokens/s", flush=True
        )
    seconds = time.perf_counter() - start
    return {"tokens_per_s": real / seconds, "steps_per_s": steps / seconds}


def main(argv: list[str]) -> None:
    del argv
    hparams = get_hparams(FLAGS.hparams_set)
    with tempfile.TemporaryDirectory() as tmp:
        if FLAGS.data_dir:
            meta = read_metadata(FLAGS.data_dir)
            files = [os.path.join(FLAGS.data_dir, s) for s in meta["splits"]["train"]["shards"]]
            vocab_size, source = meta["vocab"]["size"], f"{meta['problem']} train"
        else:
            files = synthetic_shards(tmp, FLAGS.vocab_size)
            vocab_size, source = FLAGS.vocab_size, "synthetic, lohelp-shaped"
        pipe = time_pipeline(files, hparams, FLAGS.pipeline_batches)
        train = time_training(files, hparams, vocab_size, FLAGS.train_steps)
    ratio = pipe["tokens_per_s"] / train["tokens_per_s"]
    table = "\n".join(
        [
            f"Pipeline vs. training, {FLAGS.hparams_set} (batch_size={hparams.batch_size} tokens, "
            f"max_length={hparams.max_length}), data: {source}, {os.cpu_count()} CPUs",
            "",
            "| measured | real tokens/s | notes |",
            "|---|---:|---|",
            f"| pipeline | {pipe['tokens_per_s']:,.0f} | {pipe['batches_per_s']:.1f} batches/s, "
            f"{pipe['padding_fraction']:.1%} padding |",
            f"| training step | {train['tokens_per_s']:,.0f} | "
            f"{train['steps_per_s']:.2f} steps/s |",
            f"| ratio | {ratio:.1f}x | issue asks >= 10x |",
        ]
    )
    print(table)
    if FLAGS.output:
        atomic_io.write_text(FLAGS.output, table + "\n")


if __name__ == "__main__":
    app.run(main)
