"""Exact top-k of each row in two stages, for beam search's candidates over a vocabulary."""

from __future__ import annotations

import tensorflow as tf


def block_size(vocab: int | None, k: int) -> int:
    """The block width for `top_k` over `vocab` columns: a divisor of `vocab` near
    sqrt(vocab / k), which balances the two stages; 0 where none fits (plain top-k then)."""
    if vocab is None or vocab < 64 * k:
        return 0
    target = (vocab / k) ** 0.5
    divisors = [b for b in range(8, 257) if vocab % b == 0 and vocab // b >= k]
    return min(divisors, key=lambda b: abs(b - target)) if divisors else 0


def top_k(values: tf.Tensor, k: int) -> tuple[tf.Tensor, tf.Tensor]:
    """`tf.math.top_k(values, k)` of [rows, vocab] float32, the same values and ids (lower id
    first among equal values), in two cheaper stages where the vocabulary splits into blocks.

    TensorFlow's top-k over 8,000 columns took as long as the step's pre-softmax matmul on this
    CPU (docs/results/benchmarks.md). Instead: each block's maximum (one vectorized reduction), the
    k blocks with the largest maxima, then the top k among those k blocks' entries. Exact: a block
    that holds one of the k best entries has a maximum at least that entry's, so it ranks among the
    k best blocks; blocks are visited in column order, so ties keep TensorFlow's order.
    """
    vocab = values.shape[-1]
    block = block_size(vocab, k)
    if not block:
        return tf.math.top_k(values, k)
    rows = tf.shape(values)[0]
    blocks = tf.reshape(values, [rows, vocab // block, block])
    _, chosen = tf.math.top_k(tf.reduce_max(blocks, axis=-1), k)  # --> [rows, k] block ids
    chosen = tf.sort(chosen, axis=-1)
    candidates = tf.reshape(tf.gather(blocks, chosen, batch_dims=1), [rows, k * block])
    best, where = tf.math.top_k(candidates, k)
    ids = tf.gather(chosen, where // block, batch_dims=1) * block + where % block
    return best, ids
