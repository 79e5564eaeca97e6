"""Greedy search and ancestral sampling over a step function, one hypothesis per sentence.

They follow `t2t_lite.search.beam`'s conventions (the step function, ids, EOS and padding,
per-sentence maximum lengths) and share its loop helpers; sampling draws are stateless, so the
same seed and batch give the same samples.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from t2t_lite.search.contract import (
    NEG_INF,
    SearchResult,
    StepFn,
    best_log_probs,
    loop_length,
    normalized_log_probs,
    sentence_lengths,
    shape_invariants,
    write_column,
)
from t2t_lite.vocabulary import EOS_ID, PAD_ID


def _filter_top_k(logits: tf.Tensor, top_k: int) -> tf.Tensor:
    """Keeps the `top_k` largest logits of [rows, vocab] (ties at the k-th kept too); a `top_k`
    of the vocabulary's size or more keeps them all."""
    vocab = logits.shape[-1]
    if vocab is not None and top_k >= vocab:
        return logits
    kth = tf.math.top_k(logits, top_k).values[:, -1:]  # --> [rows, 1]
    return tf.where(logits < kth, NEG_INF, logits)


def _filter_top_p(logits: tf.Tensor, top_p: float) -> tf.Tensor:
    """Nucleus filter on [rows, vocab]: keeps the fewest most likely tokens whose probabilities
    sum to at least `top_p` (the most likely token always)."""
    sorted_logits = tf.sort(logits, axis=-1, direction="DESCENDING")
    mass_before = tf.cumsum(tf.nn.softmax(sorted_logits), axis=-1, exclusive=True)
    kept = tf.where(mass_before < top_p, sorted_logits, float("inf"))
    threshold = tf.reduce_min(kept, axis=-1, keepdims=True)  # --> [rows, 1]
    return tf.where(logits < threshold, NEG_INF, logits)


def greedy_choice(logits: tf.Tensor, pad_id: int | None) -> tuple[tf.Tensor, tf.Tensor]:
    """The most likely token of each row of [rows, vocab] logits other than `pad_id`, and its
    log-prob: [rows] int32 and [rows] float32, as argmax and gather over
    `normalized_log_probs(logits, pad_id)` give them (the lower id among equal logits). It takes
    beam search's `best_log_probs` of the best two (the padding id could be the first), so no
    log-softmax is formed over the vocabulary (docs/results/benchmarks.md)."""
    log_probs, ids = best_log_probs(logits, 1, pad_id)  # --> [rows, 1 or 2], padding at -inf
    column = tf.argmax(log_probs, axis=-1, output_type=tf.int32)  # the first among equals
    return tf.gather(ids, column, batch_dims=1), tf.gather(log_probs, column, batch_dims=1)


def sample_search(
    step_fn: StepFn,
    initial_cache: Any,
    batch_size: int | tf.Tensor,
    max_length: int | tf.Tensor,
    temperature: float = 0.0,
    top_k: int = 0,
    top_p: float = 1.0,
    seed: int | tf.Tensor = 0,
    eos_id: int = EOS_ID,
    pad_id: int | None = PAD_ID,
    buffer_length: int | tf.Tensor | None = None,
) -> SearchResult:
    """Greedy search (temperature 0) or ancestral sampling, one hypothesis per sentence.

    Sampling draws from softmax(log_probs / temperature) restricted to the `top_k` most likely
    tokens (0: all) and then to the nucleus of mass `top_p` (1.0: all). Draws are stateless: the
    same `seed` and batch give the same samples. `temperature`, `top_k` and `top_p` are Python
    numbers fixed when the graph is built. Returns a SearchResult with ids [batch, 1,
    max(max_length)]; its scores and log_probs [batch, 1] are both the model's own log-probability
    of the hypothesis (before temperature and filtering). `buffer_length`: see `loop_length`."""
    if temperature < 0 or top_k < 0 or not 0.0 < top_p <= 1.0:
        raise ValueError(
            f"need temperature >= 0, top_k >= 0 and 0 < top_p <= 1; got temperature="
            f"{temperature}, top_k={top_k}, top_p={top_p}"
        )
    batch = tf.cast(batch_size, tf.int32)
    max_lengths = sentence_lengths(max_length, batch)  # --> [batch]
    total = loop_length(max_lengths, buffer_length)
    seed = tf.cast(seed, tf.int32)

    def choose(log_probs, i):
        logits = log_probs / temperature
        if top_k:
            logits = _filter_top_k(logits, top_k)
        if top_p < 1.0:
            logits = _filter_top_p(logits, top_p)
        draws = tf.random.stateless_categorical(logits, 1, seed=tf.stack([seed, i]), dtype=tf.int32)
        return draws[:, 0]  # [batch, 1] --> [batch]

    def body(i, seq, done, total_lp, cache):
        logits, cache = step_fn(seq[:, i], i, cache)
        if temperature == 0.0:
            token, token_lp = greedy_choice(logits, pad_id)  # --> [batch], [batch]
        else:
            log_probs = normalized_log_probs(logits, pad_id)  # --> [batch, vocab]
            token = choose(log_probs, i)
            token_lp = tf.gather(log_probs, token, batch_dims=1)
        token = tf.where(done, 0, token)
        total_lp += tf.where(done, 0.0, token_lp)
        done |= tf.equal(token, eos_id) | (i + 1 >= max_lengths)
        return i + 1, write_column(seq, i + 1, token), done, total_lp, cache

    def cond(i, seq, done, total_lp, cache):
        return tf.logical_not(tf.reduce_all(done))

    seq = tf.zeros([batch, total + 1], tf.int32)
    start = (tf.constant(0), seq, tf.zeros([batch], tf.bool), tf.zeros([batch]), initial_cache)
    _, seq, _, total_lp, _ = tf.while_loop(
        cond, body, start, shape_invariants(start), maximum_iterations=total
    )
    # [batch, total + 1] --> [batch, 1, total], dropping the start position.
    total_lp = tf.expand_dims(total_lp, 1)
    return SearchResult(tf.expand_dims(seq[:, 1:], 1), total_lp, total_lp)


def greedy_search(
    step_fn: StepFn,
    initial_cache: Any,
    batch_size: int | tf.Tensor,
    max_length: int | tf.Tensor,
    eos_id: int = EOS_ID,
    pad_id: int | None = PAD_ID,
    buffer_length: int | tf.Tensor | None = None,
) -> SearchResult:
    """The most likely token at every step; see `sample_search`."""
    return sample_search(
        step_fn,
        initial_cache,
        batch_size,
        max_length,
        eos_id=eos_id,
        pad_id=pad_id,
        buffer_length=buffer_length,
    )
