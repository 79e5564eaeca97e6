"""Beam-search decoding speed with and without the incremental cache, by output length.

    python bench/decode_bench.py                       # transformer_small, lengths 16 32 64
    python bench/decode_bench.py --hparams_set=transformer_base --lengths=16,32 --batch_size=4
    python bench/decode_bench.py --quantize=int8 --lengths=32 --repeats=5   # int8 beside float
    python bench/decode_bench.py --xla --lengths=32 --repeats=5     # the XLA search beside it

A random-weight model decodes `batch_size` sentences of `source_length` tokens with beam 4; EOS is
made impossible, so every hypothesis runs to exactly the output length and both paths do the
same work. "cached" keeps earlier keys and values (`Transformer.decode_step`); "recomputed" runs
`Transformer.decode` over the whole prefix at every step (like tensor2tensor's slow path, it also
projects every prefix position onto the vocabulary). Each timing is the best of `repeats` runs of
one `tf.function`, after one untimed run that traces it. `--quantize=int8` adds the cached search
of the same model with int8 weights (`t2t_lite.model.quantize`) and its ratio to float32's, the
median over the repeats of each repeat's pair (timed back to back). `--xla` adds, the same way,
the search that XLA compiles (`fixed_shapes`: a fixed-length cache, one `jit_compile` function).
"""

from __future__ import annotations

import os
import time

import keras
import numpy as np
import tensorflow as tf
from absl import app, flags

from t2t_lite.decode import transformer_step
from t2t_lite.hparams import get_hparams
from t2t_lite.model import quantize
from t2t_lite.model.transformer import Transformer
from t2t_lite.search import beam as search
from t2t_lite.vocabulary import EOS_ID

FLAGS = flags.FLAGS
flags.DEFINE_string("hparams_set", "transformer_small", "Model size.")
flags.DEFINE_string("hparams", "precision=float32", "Overrides k=v,k=v (float32 unless set).")
flags.DEFINE_integer("vocab_size", 8000, "Vocabulary size.")
flags.DEFINE_integer("batch_size", 8, "Sentences per search.")
flags.DEFINE_integer("beam_size", 4, "Beam width.")
flags.DEFINE_integer("source_length", 24, "Source tokens per sentence (EOS included).")
flags.DEFINE_list("lengths", ["16", "32", "64"], "Output lengths.")
flags.DEFINE_integer("repeats", 3, "Timed runs per setting; the best is reported.")
flags.DEFINE_enum("quantize", "none", ["none", "int8"], "int8: also the int8 model's search.")
flags.DEFINE_bool("xla", False, "Also the fixed-shape search under jit_compile.")


def make_search(model: Transformer, use_cache: bool, length: int, xla: bool = False):
    """A traced search: source ids [batch, source] --> SearchResult, outputs exactly `length`.
    xla: the fixed-shape search in one `jit_compile` function."""
    no_eos = -1e9 * tf.one_hot(EOS_ID, model.vocab_size)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)], jit_compile=xla)
    def decode_batch(inputs):
        step_fn, cache = transformer_step.model_step_fn(
            model, inputs, length, use_cache=use_cache, fixed_shapes=xla
        )

        def step(ids, index, state):
            logits, state = step_fn(ids, index, state)
            return logits + no_eos, state

        batch = tf.shape(inputs)[0]
        buffer = length if xla else None
        return search.beam_search(
            step, cache, batch, FLAGS.beam_size, 0.6, length, buffer_length=buffer
        )

    return decode_batch


def timed_seconds(searches: list, inputs: np.ndarray, length: int) -> list[list[float]]:
    """`repeats` timed runs of each search, run in turns so that load from other processes
    falls on all of them alike: per search, the seconds of each run."""
    for decode_batch in searches:
        found = decode_batch(inputs)  # traces
        if (found.ids.numpy()[:, 0] > 0).sum(-1).min() != length:
            raise AssertionError("outputs did not run to the requested length")
    seconds = [[] for _ in searches]
    for _ in range(FLAGS.repeats):
        for i, decode_batch in enumerate(searches):
            start = time.perf_counter()
            decode_batch(inputs).ids.numpy()
            seconds[i].append(time.perf_counter() - start)
    return seconds


def int8_copy(model: Transformer) -> Transformer:
    """A copy of `model` (same weights) with int8 weights."""
    copy = Transformer.from_config(model.get_config())
    copy.build()
    copy.set_weights(model.get_weights())
    quantize.quantize_model(copy, "int8")
    return copy


def main(argv: list[str]) -> None:
    del argv
    hparams = get_hparams(FLAGS.hparams_set, FLAGS.hparams).replace(dropout=0.0)
    keras.utils.set_random_seed(0)
    model = Transformer.from_hparams(hparams, FLAGS.vocab_size)
    model.build()
    rng = np.random.default_rng(0)
    inputs = rng.integers(2, FLAGS.vocab_size, (FLAGS.batch_size, FLAGS.source_length))
    inputs[:, -1] = EOS_ID
    inputs = inputs.astype(np.int32)
    print(
        f"{FLAGS.hparams_set} (d_model {hparams.d_model}, {hparams.num_decoder_layers} decoder "
        f"layers), vocab {FLAGS.vocab_size}, beam {FLAGS.beam_size}, batch {FLAGS.batch_size}, "
        f"source {FLAGS.source_length} tokens; TF {tf.__version__}, "
        f"{os.cpu_count()} CPU cores"
    )
    # Searches beside the cached one: (column name, model, use_cache, xla).
    others = [("int8 cached", int8_copy(model), True, False)] if FLAGS.quantize == "int8" else []
    others += [("XLA fixed-shape", model, True, True)] if FLAGS.xla else []
    extra = "".join(f" {name} tok/s | {name} / cached |" for name, *_ in others)
    print(
        "| output length | cached sent/s | cached tok/s | recomputed sent/s | recomputed tok/s "
        "| speed-up |" + extra
    )
    print("|---|---|---|---|---|---|" + "---|---|" * len(others))
    for length in map(int, FLAGS.lengths):
        searches = [make_search(model, use_cache, length) for use_cache in (True, False)]
        searches += [make_search(m, cached, length, xla) for _, m, cached, xla in others]
        seconds = timed_seconds(searches, inputs, length)
        fast, slow = min(seconds[0]), min(seconds[1])
        n = FLAGS.batch_size
        row = (
            f"| {length} | {n / fast:.1f} | {n * length / fast:.0f} | {n / slow:.1f} "
            f"| {n * length / slow:.0f} | {slow / fast:.2f}x |"
        )
        for other in seconds[2:]:  # tokens/s ratio to cached of each back-to-back pair
            ratio = np.median([f / q for f, q in zip(seconds[0], other, strict=True)])
            row += f" {n * length / min(other):.0f} | {ratio:.2f}x |"
        print(row, flush=True)


if __name__ == "__main__":
    app.run(main)
