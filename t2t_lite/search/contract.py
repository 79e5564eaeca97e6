"""What every search over a step function keeps to and shares: the step function, what a search
returns, the GNMT length penalty, log-probs from a step's logits, and the loop's lengths and
shapes. Beam search is `t2t_lite.search.beam`; greedy search and sampling,
`t2t_lite.search.sampling`.

Every search here is model-agnostic. It drives a step function

    step_fn(ids [batch * beams], index, cache) -> (logits or log-probs [batch * beams, V], cache)

where `ids` are the tokens fed at position `index` (id 0, the start symbol, at index 0) and `cache`
is any nested structure of tensors whose leading dimension is the batch. All loops are
`tf.while_loop`s over fixed-shape state built from core TensorFlow ops, so a search runs eagerly,
inside `tf.function`, and inside an exported SavedModel alike.

Conventions: id 0 is padding and is never generated; id 1 (EOS) ends a hypothesis and appears at
most once, as its last token. Output ids are [batch, n, max_length] with zeros after the end.
A hypothesis that reaches its sentence's maximum length without EOS ends there, unpunished.
`t2t_lite.decode.transformer_step` wires a `Transformer` to these searches.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import tensorflow as tf

from t2t_lite.search.top_k import top_k

StepFn = Callable[[tf.Tensor, tf.Tensor, Any], tuple[tf.Tensor, Any]]
NEG_INF = float("-inf")


class SearchResult(NamedTuple):
    """What a search returns.

    ids: [batch, n, max_length] int32, EOS included, zeros after it.
    scores: [batch, n] float32, the ranking score, best first: log-prob / lp(length) for beam
      search, the log-prob for greedy search and sampling. -inf marks an empty n-best slot.
    log_probs: [batch, n] float32, the model's log-probability of each hypothesis.
    """

    ids: tf.Tensor
    scores: tf.Tensor
    log_probs: tf.Tensor


def length_penalty(length: tf.Tensor | int, alpha: tf.Tensor | float) -> tf.Tensor:
    """GNMT length penalty lp(Y) = ((5 + |Y|) / 6)^alpha, |Y| counting EOS (float32)."""
    return tf.pow((5.0 + tf.cast(length, tf.float32)) / 6.0, tf.cast(alpha, tf.float32))


def sentence_lengths(max_length: tf.Tensor | int, batch: tf.Tensor) -> tf.Tensor:
    """A scalar or [batch] maximum output length --> [batch] int32, checked positive."""
    lengths = tf.broadcast_to(tf.cast(max_length, tf.int32), [batch])
    with tf.control_dependencies(
        [tf.debugging.assert_positive(lengths, message="max_length must be at least 1")]
    ):
        return tf.identity(lengths)


def normalized_log_probs(logits: tf.Tensor, pad_id: int | None) -> tf.Tensor:
    """[rows, vocab] logits (or log-probs: log_softmax leaves them unchanged) --> float32
    log-probs, with `pad_id` made impossible without renormalizing the other tokens."""
    log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
    if pad_id is None:
        return log_probs
    is_pad = tf.equal(tf.range(tf.shape(log_probs)[-1]), pad_id)  # --> [vocab]
    return tf.where(is_pad[None, :], NEG_INF, log_probs)


def best_log_probs(logits: tf.Tensor, k: int, pad_id: int | None) -> tuple[tf.Tensor, tf.Tensor]:
    """The k largest logits of each row of [rows, vocab] (k + 1 when `pad_id` could be among
    them) as log-probs, best first, and their ids; the padding id's log-prob is -inf.

    The log-normalizer comes from the row's softmax (one fused kernel) at its best token,
    softmax = exp(best - logsumexp), so the log-softmax is never formed over the vocabulary.
    """
    logits = tf.cast(logits, tf.float32)
    width, vocab = k + (pad_id is not None), logits.shape[-1]
    width = min(width, vocab) if vocab is not None else tf.minimum(width, tf.shape(logits)[-1])
    best, ids = top_k(logits, width)
    top_prob = tf.gather(tf.nn.softmax(logits, axis=-1), ids[:, :1], batch_dims=1)  # [rows, 1]
    log_probs = best - (best[:, :1] - tf.math.log(top_prob))
    if pad_id is not None:
        log_probs = tf.where(tf.equal(ids, pad_id), NEG_INF, log_probs)
    return log_probs, ids


def loop_length(max_lengths: tf.Tensor, buffer_length: int | tf.Tensor | None) -> tf.Tensor:
    """The positions a search's state holds: max(max_lengths), or `buffer_length` when given.

    A given `buffer_length` (at least every max_length, checked) depends on shapes and constants
    only, so that XLA (`jit_compile`) sees the state's shapes at compile time; the sentences'
    own lengths depend on the input's values. The ids then come out `buffer_length` long."""
    if buffer_length is None:
        return tf.reduce_max(max_lengths)
    buffer_length = tf.cast(buffer_length, tf.int32)
    check = tf.debugging.assert_less_equal(
        max_lengths, buffer_length, message="buffer_length is below a sentence's max_length"
    )
    with tf.control_dependencies([check]):
        return tf.identity(buffer_length)


def shape_invariants(loop_vars: Any) -> Any:
    """A search loop's shape invariants: every axis of size 0 at the start may grow (a model
    cache that gains a position per step, as `Transformer.init_cache` makes); the rest keep
    their static shapes."""

    def invariant(t):
        if t.shape.rank is None:
            return tf.TensorShape(None)
        return tf.TensorShape([None if d == 0 else d for d in t.shape])

    return tf.nest.map_structure(invariant, loop_vars)


def write_column(seq: tf.Tensor, position: tf.Tensor, tokens: tf.Tensor) -> tf.Tensor:
    """Writes tokens [...] into the all-zero column `position` of seq [..., length]."""
    column = tf.one_hot(position, tf.shape(seq)[-1], dtype=seq.dtype)  # --> [length]
    return seq + tf.expand_dims(tokens, -1) * column
