"""Training throughput of the real step (t2t_lite.train.step.Trainer) in tokens per second.

Times `Trainer.train_step` -- the same tf.distribute step t2t-train runs, with the global
all-reduce, the non-finite check and Adam -- on `--hparams_set` (transformer_small by default)
over batches of random ids with the set's token budget, one row per variant:

    python bench/train_bench.py [--variants=float32,xla,bfloat16] [--steps=8]
        [--output=bench/results/train_bench.md]

Tokens are real (non-padding) source + target tokens. Variants: float32, xla (jit_compile),
bfloat16 (mixed_bfloat16), float16 (mixed_float16 with loss scaling), accum2 (accum_steps=2:
twice the tokens per step).
"""

from __future__ import annotations

import os
import time

import numpy as np
import tensorflow as tf
from absl import app, flags

from t2t_lite.hparams import get_hparams
from t2t_lite.runtime import atomic_io, distribute
from t2t_lite.train.step import Trainer

FLAGS = flags.FLAGS
flags.DEFINE_string("hparams_set", "transformer_small", "Model and batch size to measure.")
flags.DEFINE_string("variants", "float32,xla", "Comma-separated variants to time.")
flags.DEFINE_integer("vocab_size", 8000, "Vocabulary size of the model and the random ids.")
flags.DEFINE_integer("length", 32, "Source and target length of every example (EOS included).")
flags.DEFINE_integer("steps", 8, "Steps timed per variant, after 2 warm-up steps.")
flags.DEFINE_string("output", None, "Also write the markdown table here.")

VARIANTS = {  # each a float32 step but for its one change
    "float32": "precision=float32",
    "xla": "precision=float32,jit_compile=true",
    "bfloat16": "precision=mixed_bfloat16",
    "float16": "precision=mixed_float16",
    "accum2": "precision=float32,accum_steps=2",
}


def random_batch(hparams, vocab_size: int, length: int, seed: int) -> dict[str, np.ndarray]:
    """[batch_size // length, length] ids in 2..vocab_size-1, EOS last, no padding."""
    rng = np.random.default_rng(seed)
    rows = max(1, hparams.batch_size // length)
    ids = rng.integers(2, vocab_size, size=(2, rows, length), dtype=np.int32)
    ids[:, :, -1] = 1
    return {"inputs": ids[0], "targets": ids[1]}


def time_variant(name: str, strategy) -> dict:
    hparams = get_hparams(FLAGS.hparams_set, VARIANTS[name])
    trainer = Trainer(hparams, FLAGS.vocab_size, strategy)
    batches = [random_batch(hparams, FLAGS.vocab_size, FLAGS.length, s) for s in range(4)]
    dataset = tf.data.Dataset.from_tensor_slices(
        {k: np.stack([b[k] for b in batches]) for k in ("inputs", "targets")}
    ).repeat()
    iterator = iter(strategy.experimental_distribute_dataset(dataset))
    for _ in range(2):
        trainer.train_step(iterator)  # traces, compiles
    tokens, start = 0.0, time.perf_counter()
    for step in range(FLAGS.steps):
        result = trainer.train_step(iterator)
        tokens += float(result["source_tokens"] + result["target_tokens"])
        rate = tokens / (time.perf_counter() - start)
        print(
            f"{name}: step {step + 1}/{FLAGS.steps} loss {float(result['loss']):.3f} "
            f"{rate:,.0f} tokens/s",
            flush=True,
        )
    seconds = time.perf_counter() - start
    return {
        "tokens_per_s": tokens / seconds,
        "steps_per_s": FLAGS.steps / seconds,
        "tokens_per_step": tokens / FLAGS.steps,
    }


def main(argv: list[str]) -> None:
    del argv
    strategy = distribute.create_strategy("mirrored")
    names = [n.strip() for n in FLAGS.variants.split(",") if n.strip()]
    for name in names:
        if name not in VARIANTS:
            raise app.UsageError(f"--variants: {name!r} is not one of {', '.join(VARIANTS)}")
    rows = {name: time_variant(name, strategy) for name in names}
    hparams = get_hparams(FLAGS.hparams_set)
    lines = [
        f"Training step, {FLAGS.hparams_set} (batch_size={hparams.batch_size} tokens per "
        f"replica, examples {FLAGS.length}+{FLAGS.length} tokens, vocab {FLAGS.vocab_size}), "
        f"{strategy.num_replicas_in_sync} replica(s) on {distribute.local_devices()}, "
        f"{os.cpu_count()} CPUs, {FLAGS.steps} timed steps",
        "",
        "| variant | real tokens/s | steps/s | tokens/step |",
        "|---|---:|---:|---:|",
    ]
    for name, row in rows.items():
        lines.append(
            f"| {name} | {row['tokens_per_s']:,.0f} | {row['steps_per_s']:.2f} | "
            f"{row['tokens_per_step']:,.0f} |"
        )
    table = "\n".join(lines)
    print(table)
    if FLAGS.output:
        atomic_io.write_text(FLAGS.output, table + "\n")


if __name__ == "__main__":
    app.run(main)
