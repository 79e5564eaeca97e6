"""Batch compaction: `beam_search(compact=True)` drops its finished sentences from the batch.

Without it, beam search steps every sentence of a batch until the last one is done. A sentence
whose n-best list is final (`beam._sentences_done`) is stepped along with the rest, and in a
batch of mixed lengths that is much of the work: on the demo's 300 first test sentences, in
t2t-decode's batches of 4,096 source tokens, the sentences were done in 56 % of the
sentence-steps made (docs/results/benchmarks.md).

With it, once at least `COMPACT_SHARE` of the sentences in the batch are done, their results are
written to their rows of the [batch, ...] outputs and the others kept:
- the search's own state (hypotheses, finished lists, lengths) is gathered to the kept rows;
- the model's cache needs no copy of its own with several beams: the next step already gathers
  it by each live beam's parent (`beam._expand`), and now gathers the kept sentences' rows
  only; with one beam no step gathers it (each row is its own parent), so `compact` does;
- the sentences' state (`beam_search`'s `sentence_state`: the encoder's keys and values, one
  copy per sentence, which the step function takes as a fourth argument) is gathered to the
  kept sentences.

It finds the hypotheses of the search without it: a done sentence's n-best list never changes
again (the stopping test), so what it had when it was dropped is what it would have ended with.
Shapes change as sentences leave, so a compacting search does not compile under XLA
(`fixed_shapes`), and it takes no terminology banks; `transformer_step.translate_ids` compacts
wherever it can (t2t-decode's greedy search is beam search with one beam, so it gains too).

This module holds the compaction's state and steps; `beam.beam_search` runs the loop.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import tensorflow as tf

# Compact once this share of the batch's sentences is done: each compaction gathers the
# search's state and the sentences' state, and each new batch size sets up new kernels.
COMPACT_SHARE = 0.125


class Compacting(NamedTuple):
    """The loop state: the search's, for the sentences still in the batch, and the outputs."""

    beams: Any  # the beam search's state (`beam._Beams`) of the kept sentences
    rows: tf.Tensor  # [kept] int32: the input row of each kept sentence
    max_lengths: tf.Tensor  # [kept] int32
    state: Any  # the kept sentences' state, leading dimension kept
    out_seq: tf.Tensor  # [batch, k, L]: the finished lists of the dropped sentences, by row
    out_scores: tf.Tensor  # [batch, k]
    out_lp: tf.Tensor  # [batch, k]

    @classmethod
    def start(cls, beams: Any, max_lengths: tf.Tensor, state: Any) -> Compacting:
        """Every sentence of the batch kept, no output written yet."""
        rows = tf.range(tf.shape(max_lengths)[0])
        return cls(beams, rows, max_lengths, state, beams.fin_seq, beams.fin_scores, beams.fin_lp)


def worth_it(done: tf.Tensor) -> tf.Tensor:
    """Whether to compact a batch whose sentences are `done` [batch]: at least COMPACT_SHARE of
    them (one at least) are, and not all (the search then ends)."""
    count, batch = tf.reduce_sum(tf.cast(done, tf.int32)), tf.shape(done)[0]
    enough = tf.cast(tf.math.ceil(COMPACT_SHARE * tf.cast(batch, tf.float32)), tf.int32)
    return (count >= tf.maximum(enough, 1)) & (count < batch)


def record(loop: Compacting) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """The outputs with the finished lists of the sentences in the batch written to their rows."""
    where, beams = loop.rows[:, None], loop.beams
    return (
        tf.tensor_scatter_nd_update(loop.out_seq, where, beams.fin_seq),
        tf.tensor_scatter_nd_update(loop.out_scores, where, beams.fin_scores),
        tf.tensor_scatter_nd_update(loop.out_lp, where, beams.fin_lp),
    )


def compact(loop: Compacting, done: tf.Tensor, k: int) -> Compacting:
    """Records every sentence's finished list, then keeps the sentences not `done` [batch]."""
    out = record(loop)
    keep = tf.cast(tf.reshape(tf.where(tf.logical_not(done)), [-1]), tf.int32)

    def take(t):
        return tf.gather(t, keep)

    b = loop.beams
    # Cache rows of the kept beams' parents, still in the cache's current numbering: the next
    # step's gather (`beam._expand`) both reorders the cache and drops the other sentences' rows.
    parents = tf.reshape(take(tf.reshape(b.parents, [-1, k])), [-1])
    if k == 1:
        # With one beam no step gathers the cache (`beam._expand`), so the rows go here.
        b = b._replace(cache=tf.nest.map_structure(lambda t: tf.gather(t, parents), b.cache))
        parents = tf.range(tf.size(parents))
    beams = b._replace(
        seq=take(b.seq),
        alive_lp=take(b.alive_lp),
        fin_seq=take(b.fin_seq),
        fin_scores=take(b.fin_scores),
        fin_lp=take(b.fin_lp),
        parents=parents,
        finished=take(b.finished),
    )
    state = tf.nest.map_structure(take, loop.state)
    return Compacting(beams, take(loop.rows), take(loop.max_lengths), state, *out)


def _shrinking(shape: tf.TensorShape) -> tf.TensorShape:
    """`shape` free along its first axis (a tensor of the rows still searched)."""
    return shape if shape.rank in (None, 0) else tf.TensorShape([None, *shape[1:]])


def invariants(growing: Compacting) -> Compacting:
    """The loop's shape invariants from the search's own (`growing`: `contract.shape_invariants`
    of the start, whose cache gains positions): every tensor of the batch may also shrink
    along its first axis; the outputs keep their shapes."""
    free = tf.nest.map_structure(_shrinking, growing)
    return free._replace(
        out_seq=growing.out_seq, out_scores=growing.out_scores, out_lp=growing.out_lp
    )
