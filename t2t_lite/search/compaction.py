"""Beam search that drops its finished sentences from the batch as it goes (batch compaction).

`beam_search` steps every sentence of a batch until the last one is done. A sentence whose
n-best list is final (`search._sentences_done`) is stepped along with the rest, and in a batch
of mixed lengths that is much of the work: on the demo's 300 first test sentences, in t2t-decode's
batches of 4,096 source tokens, the sentences were done in 56 % of the sentence-steps made
(docs/results/benchmarks.md).

`compacting_beam_search` runs the same search and, once at least `COMPACT_SHARE` of the
sentences in the batch are done, writes their results to their rows of the [batch, ...] outputs
and keeps the others:
- the search's own state (hypotheses, finished lists, lengths) is gathered to the kept rows;
- the model's cache needs no copy of its own with several beams: the next step already gathers
  it by each live beam's parent (`search._expand`), and now gathers the kept sentences' rows
  only; with one beam no step gathers it (each row is its own parent), so the compaction does;
- the sentences' state (the encoder's keys and values, one copy per sentence, which the step
  function takes as a fourth argument) is gathered to the kept sentences.

It finds the hypotheses of `beam_search`: a done sentence's n-best list never changes again
(the stopping test), so what it had when it was dropped is what it would have ended with.
Shapes change as sentences leave, so this search does not compile under XLA
(`fixed_shapes`), and it takes no terminology banks; `transformer_step.translate_ids` uses it
wherever it can (t2t-decode's greedy search is beam search with one beam, so it gains too).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import tensorflow as tf

from t2t_lite.search.beam import (
    SearchResult,
    _beam_step,
    _Beams,
    _beams_searching,
    _BeamSetup,
    _initial_beams,
    _sentences_done,
    loop_length,
    shape_invariants,
)
from t2t_lite.vocabulary import EOS_ID, PAD_ID

# Compact once this share of the batch's sentences is done: each compaction gathers the
# search's state and the sentences' state, and each new batch size sets up new kernels.
COMPACT_SHARE = 0.125


class _Compacting(NamedTuple):
    """The loop state: the search's, for the sentences still in the batch, and the outputs."""

    beams: _Beams
    rows: tf.Tensor  # [kept] int32: the input row of each kept sentence
    max_lengths: tf.Tensor  # [kept] int32
    state: Any  # the kept sentences' state, leading dimension kept
    out_seq: tf.Tensor  # [batch, k, L]: the finished lists of the dropped sentences, by row
    out_scores: tf.Tensor  # [batch, k]
    out_lp: tf.Tensor  # [batch, k]


def compacting_beam_search(
    step_fn,
    initial_cache: Any,
    sentence_state: Any,
    batch_size: int | tf.Tensor,
    beam_size: int,
    alpha: float | tf.Tensor,
    max_length: int | tf.Tensor,
    eos_id: int = EOS_ID,
    pad_id: int | None = PAD_ID,
    nbest: int = 1,
) -> SearchResult:
    """`search.beam_search` (same arguments, no buffer_length or banks) with finished sentences
    dropped from the batch. `step_fn(ids, index, cache, state)` takes the state of the
    sentences still searched: `sentence_state` (nested tensors, leading dimension
    `batch_size`) gathered to them. Returns what `beam_search` returns."""
    if not 1 <= nbest <= beam_size:
        raise ValueError(f"nbest must be in [1, beam_size={beam_size}], got {nbest}")
    k = beam_size
    setup = _BeamSetup.make(batch_size, k, alpha, max_length, eos_id, pad_id, nbest, None)
    total = loop_length(setup.max_lengths, None)
    beams = _initial_beams(initial_cache, setup.batch, k, total)
    rows = tf.range(setup.batch)
    start = _Compacting(
        beams,
        rows,
        setup.max_lengths,
        sentence_state,
        beams.fin_seq,
        beams.fin_scores,
        beams.fin_lp,
    )

    def now(loop: _Compacting) -> _BeamSetup:
        """The setup of the sentences still in the batch."""
        batch = tf.shape(loop.rows)[0]
        offsets = tf.range(batch)[:, None] * k
        return setup._replace(batch=batch, max_lengths=loop.max_lengths, batch_offsets=offsets)

    def body(loop: _Compacting) -> tuple[_Compacting]:
        current = now(loop)
        beams = _beam_step(
            lambda ids, i, cache: step_fn(ids, i, cache, loop.state), current, loop.beams
        )
        loop = loop._replace(beams=beams)
        done = _sentences_done(current, beams)
        return (tf.cond(_worth_it(done), lambda: _compact(loop, done, k), lambda: loop),)

    (loop,) = tf.while_loop(
        lambda loop: _beams_searching(now(loop), loop.beams),
        body,
        (start,),
        (_invariants(start),),
        maximum_iterations=total,
    )
    out_seq, out_scores, out_lp = _record(loop)
    return SearchResult(out_seq[:, :nbest, 1:], out_scores[:, :nbest], out_lp[:, :nbest])


def _worth_it(done: tf.Tensor) -> tf.Tensor:
    """Whether to compact a batch whose sentences are `done` [batch]: at least COMPACT_SHARE of
    them (one at least) are, and not all (the search then ends)."""
    count, batch = tf.reduce_sum(tf.cast(done, tf.int32)), tf.shape(done)[0]
    enough = tf.cast(tf.math.ceil(COMPACT_SHARE * tf.cast(batch, tf.float32)), tf.int32)
    return (count >= tf.maximum(enough, 1)) & (count < batch)


def _record(loop: _Compacting) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """The outputs with the finished lists of the sentences in the batch written to their rows."""
    where, beams = loop.rows[:, None], loop.beams
    return (
        tf.tensor_scatter_nd_update(loop.out_seq, where, beams.fin_seq),
        tf.tensor_scatter_nd_update(loop.out_scores, where, beams.fin_scores),
        tf.tensor_scatter_nd_update(loop.out_lp, where, beams.fin_lp),
    )


def _compact(loop: _Compacting, done: tf.Tensor, k: int) -> _Compacting:
    """Records every sentence's finished list, then keeps the sentences not `done` [batch]."""
    out = _record(loop)
    keep = tf.cast(tf.reshape(tf.where(tf.logical_not(done)), [-1]), tf.int32)

    def take(t):
        return tf.gather(t, keep)

    b = loop.beams
    # Cache rows of the kept beams' parents, still in the cache's current numbering: the next
    # step's gather (`_expand`) both reorders the cache and drops the other sentences' rows.
    parents = tf.reshape(take(tf.reshape(b.parents, [-1, k])), [-1])
    if k == 1:
        # With one beam no step gathers the cache (`search._expand`), so the rows go here.
        b = b._replace(cache=tf.nest.map_structure(lambda t: tf.gather(t, parents), b.cache))
        parents = tf.range(tf.size(parents))
    beams = b._replace(
        seq=take(b.seq),
        alive_lp=take(b.alive_lp),
        fin_seq=take(b.fin_seq),
        fin_scores=take(b.fin_scores),
        fin_lp=take(b.fin_lp),
        parents=parents,
    )
    state = tf.nest.map_structure(take, loop.state)
    return _Compacting(beams, take(loop.rows), take(loop.max_lengths), state, *out)


def _shrinking(shape: tf.TensorShape) -> tf.TensorShape:
    """`shape` free along its first axis (a tensor of the rows still searched)."""
    return shape if shape.rank in (None, 0) else tf.TensorShape([None, *shape[1:]])


def _invariants(start: _Compacting) -> Any:
    """Every tensor of the batch may shrink along its first axis, and the cache's positions
    grow (`search.shape_invariants`); the outputs keep their shapes."""

    growing = shape_invariants(start)
    free = tf.nest.map_structure(_shrinking, growing)
    return free._replace(
        out_seq=growing.out_seq, out_scores=growing.out_scores, out_lp=growing.out_lp
    )
