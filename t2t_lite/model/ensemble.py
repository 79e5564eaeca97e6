"""Ensembles: several models of one vocabulary searched as one, their probabilities averaged.

At every step each member runs its own decoder on its own cache, and the ensemble's distribution
over the next token is the weighted mean of the members' probabilities:

    log p(y) = log sum_i w_i p_i(y) = logsumexp_i(log p_i(y) + log w_i),   sum_i w_i = 1

with equal weights unless given. This is fairseq's rule (its `EnsembleModel` takes the
logsumexp of the members' log-probabilities minus log N: the log of the mean probability, not
the mean of the log-probabilities), and Marian's and OpenNMT's "average the probabilities".

`Ensemble` has the methods of a `Transformer` that the searches and scoring use (`encode`,
`project_memory`, `init_cache`, `decode_step`, `decode`, `__call__`), so `translate_ids`,
`sample_ids`, `score_ids`, constraints and `Translator` take it in place of a model: the search
state is a tuple of the members' caches, tiled and reordered with the beams like any cache. Its
outputs are log-probabilities (already normalized), where a model's are logits.

`--checkpoint=A,B,...` (`t2t_lite.run.run.Run.restore`) restores one member per entry: a run
folder (its newest checkpoint), a checkpoint folder or a checkpoint path, from one run or
several; the members must share their vocabulary, which is checked by the SHA-256 of each run's
vocabulary file.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import tensorflow as tf


def members(model) -> tuple:
    """The models an `Ensemble` averages, or `(model,)` for one model: what per-model work
    (quantizing, casting weights, counting parameters) iterates over."""
    return getattr(model, "models", (model,))


def parameter_count(model) -> int:
    """The weights of a `Transformer`, or of every member of an `Ensemble`: Keras'
    `count_params` (a float model's are all trainable; an int8 model counts its scales too).
    The one count t2t-info, t2t-serve's facts and t2t-sweep's report print."""
    return int(sum(member.count_params() for member in members(model)))


class Ensemble:
    """Models searched as one: at each step the log of the weighted mean of their probabilities.

    Args:
      models: `Transformer`s with the same vocabulary size and output vocabulary.
      weights: one positive weight per model (normalized to sum 1); default equal.
    """

    def __init__(self, models: Sequence[Any], weights: Sequence[float] | None = None):
        if not models:
            raise ValueError("an ensemble needs at least one model")
        sizes = {(m.vocab_size, m.output_vocab_size) for m in models}
        if len(sizes) > 1:
            raise ValueError(f"ensemble members differ in (vocab_size, output_vocab_size): {sizes}")
        self.models = tuple(models)
        self.weights = normalized_weights(weights, len(models))
        self._log_weights = tf.constant([math.log(w) for w in self.weights], tf.float32)

    @property
    def vocab_size(self) -> int:
        return self.models[0].vocab_size

    @property
    def output_vocab_size(self) -> int:
        return self.models[0].output_vocab_size

    @property
    def max_positions(self) -> int:
        """The smallest `max_positions` of all members (the
        longest input and output every member can take)."""
        return min(m.max_positions for m in self.models)

    def average(self, logits: Sequence[tf.Tensor]) -> tf.Tensor:
        """The members' logits (or log-probs) [..., vocab], one per member --> the log of the
        weighted mean of their probabilities [..., vocab] (float32)."""
        stacked = tf.stack([tf.nn.log_softmax(tf.cast(x, tf.float32), -1) for x in logits])
        weights = tf.reshape(self._log_weights, [-1] + [1] * (stacked.shape.rank - 1))
        return tf.reduce_logsumexp(stacked + weights, axis=0)  # [members, ...] --> [...]

    def encode(self, inputs: tf.Tensor, training=None) -> tuple[tuple[tf.Tensor, ...], tf.Tensor]:
        """[batch, source] ids --> (each member's memory [batch, source, d_model_i], the padding
        mask [batch, source])."""
        encoded = [m.encode(inputs, training=training) for m in self.models]
        return tuple(memory for memory, _ in encoded), encoded[0][1]

    def project_memory(self, memory: tuple[tf.Tensor, ...], memory_mask: tf.Tensor) -> tuple:
        """Each member's `project_memory` of its own memory."""
        return tuple(
            m.project_memory(mem, memory_mask) for m, mem in zip(self.models, memory, strict=True)
        )

    def init_cache(
        self, batch: int | tf.Tensor, max_length: int | tf.Tensor, fixed: bool | str = False
    ) -> tuple:
        """One empty decoding cache per member."""
        return tuple(m.init_cache(batch, max_length, fixed) for m in self.models)

    def decode_step(
        self,
        ids: tf.Tensor,
        index: tf.Tensor,
        cache: tuple,
        memory_state: tuple,
        columns: tf.Tensor | None = None,
        kernel: tuple | None = None,
    ) -> tuple[tf.Tensor, tuple]:
        """Previous ids [rows] at position `index` --> log-probs [rows, vocab] of the next
        token under the ensemble (or [rows, n] over a shortlist's `columns`, each member's
        distribution normalized over them), and the members' updated caches. `kernel`: the
        members' `output_kernel`s."""
        kernels = kernel or (None,) * len(self.models)
        steps = [
            m.decode_step(ids, index, c, s, columns, k)
            for m, c, s, k in zip(self.models, cache, memory_state, kernels, strict=True)
        ]
        return self.average([logits for logits, _ in steps]), tuple(c for _, c in steps)

    def output_kernel(self, columns: tf.Tensor | None = None) -> tuple:
        """Each member's `output_kernel`."""
        return tuple(m.output_kernel(columns) for m in self.models)

    def decode(
        self,
        targets: tf.Tensor,
        memory: tuple[tf.Tensor, ...],
        memory_mask: tf.Tensor,
        training=None,
    ) -> tf.Tensor:
        """Teacher forcing: [batch, target] ids --> log-probs [batch, target, vocab]."""
        return self.average(
            [
                m.decode(targets, mem, memory_mask, training=training)
                for m, mem in zip(self.models, memory, strict=True)
            ]
        )

    def attention_maps(self, inputs: tf.Tensor, targets: tf.Tensor) -> dict[str, list]:
        """Refused: each member attends in its own way (ValueError naming --checkpoint)."""
        raise ValueError("an ensemble has no attention maps of its own; pass one --checkpoint")

    def __call__(self, features: dict[str, tf.Tensor], training=None) -> tf.Tensor:
        """{"inputs": [b, s], "targets": [b, t]} --> log-probs [b, t, vocab] (teacher forcing)."""
        return self.average([m(features, training=training) for m in self.models])


def normalized_weights(weights: Sequence[float] | None, count: int) -> tuple[float, ...]:
    """`count` weights summing to 1 (equal when `weights` is None or empty); ValueError naming
    --ensemble_weights when their number or a value is wrong."""
    if not weights:
        return (1.0 / count,) * count
    if len(weights) != count:
        raise ValueError(f"--ensemble_weights has {len(weights)} values for {count} checkpoints")
    if not all(math.isfinite(w) and w > 0 for w in weights):
        raise ValueError(f"--ensemble_weights must be positive numbers, got {list(weights)}")
    total = math.fsum(weights)
    return tuple(w / total for w in weights)


def parse_weights(values: Sequence[str] | str | None) -> list[float] | None:
    """--ensemble_weights as given ("1,2" or ["1", "2"]) --> floats, or None when unset."""
    if values is None:
        return None
    if isinstance(values, str):
        values = [v for v in values.split(",") if v.strip()]
    try:
        return [float(v) for v in values]
    except (TypeError, ValueError):
        raise ValueError(f"--ensemble_weights must be numbers, got {list(values)}") from None
