"""Beam search over a step function, with the GNMT length penalty (greedy search and sampling
are in `t2t_lite.search.sampling`; the step function's contract and what every search shares,
in `t2t_lite.search.contract`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import tensorflow as tf

from t2t_lite.search import compaction
from t2t_lite.search.contract import (
    NEG_INF,
    SearchResult,
    StepFn,
    best_log_probs,
    length_penalty,
    loop_length,
    sentence_lengths,
    shape_invariants,
    write_column,
)
from t2t_lite.vocabulary import EOS_ID, PAD_ID

UNMET_PENALTY = 1e6


class _BeamSetup(NamedTuple):
    """What every step of one `beam_search` call shares (k = beam_size)."""

    k: int
    nbest: int
    eos_id: int
    pad_id: int | None
    batch: tf.Tensor  # scalar int32
    max_lengths: tf.Tensor  # [batch] int32, EOS included
    alpha: tf.Tensor  # scalar float32
    batch_offsets: tf.Tensor  # [batch, 1]: the first cache row of each sentence, r * k
    top_ranks: tf.Tensor  # [1, 2k] bool: which of the 2k candidates rank in the top k
    banks: Any  # None, or how candidates are widened and chosen (`terminology.TermBanks`)
    enough: int  # finished hypotheses after which a sentence stops (0: the exact bound only)

    @classmethod
    def make(
        cls, batch_size, k, alpha, max_length, eos_id, pad_id, nbest, banks, patience
    ) -> _BeamSetup:
        """From `beam_search`'s arguments (k = beam_size)."""
        batch = tf.cast(batch_size, tf.int32)
        max_lengths, alpha = sentence_lengths(max_length, batch), tf.cast(alpha, tf.float32)
        offsets, top_ranks = tf.range(batch)[:, None] * k, tf.range(2 * k)[None, :] < k
        enough = max(nbest, math.ceil(patience * k)) if patience else 0
        return cls(
            k, nbest, eos_id, pad_id, batch, max_lengths, alpha, offsets, top_ranks, banks, enough
        )


class _Beams(NamedTuple):
    """The loop state of `beam_search`; L = max(max_lengths) + 1 positions, the start id first."""

    i: tf.Tensor  # scalar int32: the step, the position of the tokens fed to the model
    seq: tf.Tensor  # [batch, k, L] the live hypotheses
    alive_lp: tf.Tensor  # [batch, k] their log-probs, best first (-inf: an empty slot)
    fin_seq: tf.Tensor  # [batch, k, L] the finished hypotheses, best first
    fin_scores: tf.Tensor  # [batch, k] their scores, log-prob / lp(length) (-inf: empty)
    fin_lp: tf.Tensor  # [batch, k] their log-probs
    cache: Any  # the model's cache, rows [batch * k, ...] in the previous step's beam order
    parents: tf.Tensor  # [batch * k] the cache row of each live beam's parent
    finished: tf.Tensor  # [batch] int32: how many hypotheses have finished (with a patience)


class _Candidates(NamedTuple):
    """A step's best 2k continuations of each sentence, best first."""

    lp: tf.Tensor  # [batch, 2k] log-probs
    priority: tf.Tensor  # [batch, 2k] what they rank by, descending: lp, or the banks' order
    complete: tf.Tensor | None  # [batch, 2k] bool: met every constraint of the banks (or None)
    token: tf.Tensor  # [batch, 2k] the token each adds
    origin: tf.Tensor  # [batch, 2k] the live beam (0..k-1) each extends
    seq: tf.Tensor  # [batch, 2k, L] the extended hypotheses


def _initial_beams(initial_cache: Any, batch: tf.Tensor, k: int, total: tf.Tensor) -> _Beams:
    """Step 0's state: k empty hypotheses per sentence, of which only beam 0 is live, so the
    first step does not pick k copies of one token."""
    # Row r * k + j of the tiled cache is beam j of sentence r: [batch, ...] --> [batch * k, ...],
    # one gather per tensor by rows made once (`tf.repeat` builds a dozen ops for each).
    rows = tf.repeat(tf.range(batch), k)
    cache = tf.nest.map_structure(lambda t: tf.gather(t, rows), initial_cache)
    # Position 0 holds the start id fed at step 0; step i writes its token at position i + 1.
    seq = tf.zeros([batch, k, total + 1], tf.int32)
    alive_lp = tf.tile(tf.constant([[0.0] + [NEG_INF] * (k - 1)]), [batch, 1])  # [batch, k]
    empty = tf.fill([batch, k], NEG_INF)
    parents, no_finished = tf.range(batch * k), tf.zeros([batch], tf.int32)
    return _Beams(
        tf.constant(0), seq, alive_lp, tf.zeros_like(seq), empty, empty, cache, parents, no_finished
    )


def _expand(step_fn: StepFn, setup: _BeamSetup, beams: _Beams) -> tuple[_Candidates, Any]:
    """Runs the model one step on every live beam; returns the 2k best continuations of each
    sentence and the model's new cache."""
    k, batch, i = setup.k, setup.batch, beams.i
    ids = tf.reshape(beams.seq[:, :, i], [-1])  # [batch, k] --> [batch * k]
    # The cache rows of each live beam's parent, gathered here rather than at the end of the
    # previous step: the model's cache is still empty at step 0 (nothing to copy) and the
    # last step's reorder, which nothing would read, is never made. With one beam every row is
    # its own parent (a compaction gathers the cache itself, `compaction.compact`): no copy.
    cache = beams.cache
    if k > 1:
        cache = tf.nest.map_structure(lambda t: tf.gather(t, beams.parents), cache)
    logits, cache = step_fn(ids, i, cache)
    # The best 2k continuations of a sentence include at most 2k of each beam, so each row
    # first keeps its own best (2k, one more when it could be the padding id that is then
    # dropped) by logit; log-probs are computed only for those, as logit - logsumexp.
    row_lp, row_token = best_log_probs(logits, 2 * k, setup.pad_id)  # --> [batch * k, n]
    if setup.banks is not None:
        row_lp, row_token = setup.banks.widen(logits, row_lp, row_token, cache)
    # Candidate j * n + r extends beam j with its r-th token: [batch, k, n] --> [batch, k*n].
    n = tf.shape(row_lp)[-1]
    flat_lp = tf.reshape(
        beams.alive_lp[:, :, None] + tf.reshape(row_lp, [batch, k, n]), [batch, -1]
    )
    if setup.banks is None:
        lp, chosen = tf.math.top_k(flat_lp, 2 * k)  # --> [batch, 2k]
        priority, complete = lp, None
    else:
        chosen, priority, complete = setup.banks.choose(flat_lp, row_token, cache, batch, 2 * k)
        lp = tf.gather(flat_lp, chosen, batch_dims=1)
    origin = chosen // n  # --> [batch, 2k]
    token = tf.gather(tf.reshape(row_token, [batch, -1]), chosen, batch_dims=1)
    seq = write_column(tf.gather(beams.seq, origin, batch_dims=1), i + 1, token)
    return _Candidates(lp, priority, complete, token, origin, seq), cache


def _add_finished(
    setup: _BeamSetup, beams: _Beams, candidates: _Candidates, ends: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """The k best of the finished list and the candidates that `ends` [batch, 2k] marks:
    (fin_seq [batch, k, L], fin_scores [batch, k], fin_lp [batch, k])."""
    new_lp = tf.where(ends, candidates.lp, NEG_INF)
    new_scores = new_lp / length_penalty(beams.i + 1, setup.alpha)
    if candidates.complete is not None:
        # A hypothesis that reached its maximum length without every constraint ranks below
        # all that have them (the returned scores are recomputed from the log-probs).
        new_scores = tf.where(candidates.complete, new_scores, new_scores - UNMET_PENALTY)
    # The old finished list first: top_k keeps the lower index on ties, so a later
    # hypothesis never displaces an equal earlier one (what the stopping test relies on).
    both = tf.concat([beams.fin_scores, new_scores], 1)  # --> [batch, 3k]
    fin_scores, keep = tf.math.top_k(both, setup.k)  # --> [batch, k]
    fin_seq = tf.gather(tf.concat([beams.fin_seq, candidates.seq], 1), keep, batch_dims=1)
    fin_lp = tf.gather(tf.concat([beams.fin_lp, new_lp], 1), keep, batch_dims=1)
    return fin_seq, fin_scores, fin_lp


def _beam_step(step_fn: StepFn, setup: _BeamSetup, beams: _Beams) -> _Beams:
    """One step of `beam_search`: expand, finish the top-k candidates that end, keep the best k
    that do not end live."""
    candidates, cache = _expand(step_fn, setup, beams)
    at_max = (beams.i + 1 >= setup.max_lengths)[:, None]  # --> [batch, 1]
    stops = tf.equal(candidates.token, setup.eos_id) | at_max  # --> [batch, 2k]
    # Finished: ranked in the top k, live (not -inf), and ending with EOS or at max length.
    ends = stops & setup.top_ranks & (candidates.lp > NEG_INF)
    # A done sentence stepped along with the others finishes nothing more where the stopping
    # rule is not the exact bound (under which nothing could join its n-best list).
    if _greedy(setup):
        ends &= tf.equal(beams.fin_scores[:, :1], NEG_INF)
    elif setup.enough:
        ends &= tf.logical_not(_sentences_done(setup, beams))[:, None]
    finished = beams.finished
    if setup.enough:
        finished += tf.reduce_sum(tf.cast(ends, tf.int32), axis=1)
    fin_seq, fin_scores, fin_lp = _add_finished(setup, beams, candidates, ends)
    # Live: the best k candidates that did not end; none once a sentence is at max length.
    _, alive = tf.math.top_k(tf.where(stops, NEG_INF, candidates.priority), setup.k)
    alive_lp = tf.where(
        tf.gather(stops, alive, batch_dims=1),
        NEG_INF,
        tf.gather(candidates.lp, alive, batch_dims=1),
    )
    seq = tf.gather(candidates.seq, alive, batch_dims=1)  # --> [batch, k, L]
    # The cache rows of each new beam's parent: [batch, k] --> [batch * k].
    origin = tf.gather(candidates.origin, alive, batch_dims=1)
    parents = tf.reshape(origin + setup.batch_offsets, [-1])
    return _Beams(beams.i + 1, seq, alive_lp, fin_seq, fin_scores, fin_lp, cache, parents, finished)


def _greedy(setup: _BeamSetup) -> bool:
    """Whether the search is greedy search: one beam, no banks. As in tensor2tensor, fairseq
    and CTranslate2, a sentence then ends with its first finished hypothesis (the argmax
    path's EOS) whatever alpha, which a search that went on could beat at alpha > 0."""
    return setup.k == 1 and setup.banks is None


def _sentences_done(setup: _BeamSetup, beams: _Beams) -> tf.Tensor:
    """[batch] bool: whether each sentence's `nbest` finished hypotheses are final."""
    if _greedy(setup):
        return (beams.i >= setup.max_lengths) | (beams.fin_scores[:, 0] > NEG_INF)
    # A live log-prob L <= 0 only falls, and lp is monotone in the length, so the best final
    # score of a live hypothesis is L / lp at the shortest or the longest reachable length.
    best = tf.reduce_max(beams.alive_lp, axis=1)  # --> [batch] (the first, without banks)
    bound = tf.maximum(
        best / length_penalty(beams.i + 1, setup.alpha),
        best / length_penalty(setup.max_lengths, setup.alpha),
    )
    done = (beams.i >= setup.max_lengths) | (beams.fin_scores[:, setup.nbest - 1] >= bound)
    if setup.enough:  # the patience rule (fairseq's and CTranslate2's): enough have finished
        done |= beams.finished >= setup.enough
    return done


def _beams_searching(setup: _BeamSetup, beams: _Beams) -> tf.Tensor:
    """Whether any sentence may still improve its `nbest` finished hypotheses (scalar bool)."""
    return tf.logical_not(tf.reduce_all(_sentences_done(setup, beams)))


def beam_search(
    step_fn: StepFn,
    initial_cache: Any,
    batch_size: int | tf.Tensor,
    beam_size: int,
    alpha: float | tf.Tensor,
    max_length: int | tf.Tensor,
    eos_id: int = EOS_ID,
    pad_id: int | None = PAD_ID,
    nbest: int = 1,
    buffer_length: int | tf.Tensor | None = None,
    banks: Any = None,
    sentence_state: Any = None,
    compact: bool = False,
    patience: float = 0.0,
) -> SearchResult:
    """Batched beam search with the GNMT length penalty; returns the `nbest` best hypotheses.

    Each step expands the live beams into their `2 * beam_size` best continuations. Those among
    the best `beam_size` that end (EOS, or the sentence's maximum length) join the finished list,
    scored log-prob / lp(length); the best `beam_size` that do not end stay live, so the live beam
    stays full. (tensor2tensor also finishes EOS candidates ranked below `beam_size`; keeping to
    the top `beam_size`, as fairseq does, makes `beam_size=1` exactly greedy search.) A sentence
    stops when its `nbest`-th finished score is at least the best score any live hypothesis
    could still reach (the exact bound, tensor2tensor's), or at its maximum length, or, with a
    `patience` P > 0, once ceil(P * beam_size) hypotheses have finished (fairseq's and
    CTranslate2's rule at P = 1; Kasai et al. 2022): the loop stops when all have. With one beam
    (and no banks) a sentence stops at its first finished hypothesis: greedy search, which
    the length penalty cannot change (tensor2tensor's, fairseq's and CTranslate2's beam size 1).

    Args:
      step_fn: (ids [batch * beam_size], index, cache) -> ([batch * beam_size, vocab], cache);
        with a `sentence_state`, (ids, index, cache, state).
      initial_cache: nested tensors with leading dimension `batch_size`; tiled to the beams and
        reordered with gathers as beams are chosen.
      batch_size: number of sentences (Python int or scalar tensor).
      beam_size: number of live hypotheses per sentence (Python int).
      alpha: length-penalty exponent (0.6 in the paper for translation).
      max_length: scalar or [batch] maximum output lengths, EOS included.
      eos_id: the end-of-sequence id.
      pad_id: an id never generated (padding); None allows all.
      nbest: how many finished hypotheses to return, 1 <= nbest <= beam_size.
      buffer_length: see `loop_length`.
      banks: None, or a `t2t_lite.search.terminology.TermBanks`: terminology constraints'
        candidates and their allocation of the beam (dynamic beam allocation).
      sentence_state: None, or nested tensors with leading dimension `batch_size`, one copy per
        sentence (never tiled to the beams), handed to `step_fn` as its fourth argument.
      compact: drop each sentence from the batch once it is done (`t2t_lite.search.compaction`;
        the same hypotheses, fewer rows stepped); not with `buffer_length` or `banks`.
      patience: 0 (the exact bound only), or P > 0: a sentence also stops once
        max(nbest, ceil(P * beam_size)) hypotheses have finished. Sooner, and at times with
        a worse best hypothesis; a large P is the exact search.

    Returns:
      SearchResult with ids [batch, nbest, max(max_length) or buffer_length] and scores
      [batch, nbest].
    """
    if not 1 <= nbest <= beam_size:
        raise ValueError(f"nbest must be in [1, beam_size={beam_size}], got {nbest}")
    if compact and (buffer_length is not None or banks is not None):
        raise ValueError("a compacting beam search takes no buffer_length and no banks")
    if patience < 0:
        raise ValueError(f"patience must be >= 0 (0: the exact bound only), got {patience}")
    setup = _BeamSetup.make(
        batch_size, beam_size, alpha, max_length, eos_id, pad_id, nbest, banks, patience
    )
    total = loop_length(setup.max_lengths, buffer_length)
    beams = _initial_beams(initial_cache, setup.batch, beam_size, total)
    loop = _compacting_loop if compact else _loop
    fin_seq, fin_scores, fin_lp = loop(step_fn, setup, beams, sentence_state, total)
    # [batch, k, total + 1] --> [batch, nbest, total], dropping the start position.
    ids, scores, log_probs = fin_seq[:, :nbest, 1:], fin_scores[:, :nbest], fin_lp[:, :nbest]
    if banks is not None:  # without UNMET_PENALTY
        lengths = tf.reduce_sum(tf.cast(ids > 0, tf.int32), axis=-1)
        scores = log_probs / length_penalty(lengths, setup.alpha)
    return SearchResult(ids, scores, log_probs)


def _with_state(step_fn: Callable, state: Any) -> StepFn:
    """`step_fn` as a step function of three arguments: `state` (None: none) is its fourth."""
    if state is None:
        return step_fn
    return lambda ids, index, cache: step_fn(ids, index, cache, state)


def _loop(
    step_fn: Callable, setup: _BeamSetup, beams: _Beams, sentence_state: Any, total: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Steps every sentence until all are done: (fin_seq, fin_scores, fin_lp) of the batch."""
    step = _with_state(step_fn, sentence_state)
    (beams,) = tf.while_loop(
        lambda beams: _beams_searching(setup, beams),
        lambda beams: (_beam_step(step, setup, beams),),
        (beams,),
        shape_invariants((beams,)),
        maximum_iterations=total,
    )
    return beams.fin_seq, beams.fin_scores, beams.fin_lp


def _compacting_loop(
    step_fn: Callable, setup: _BeamSetup, beams: _Beams, sentence_state: Any, total: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """`_loop` that drops the done sentences from the batch as it goes (`compaction`)."""
    k, stateless = setup.k, sentence_state is None
    start = compaction.Compacting.start(
        beams, setup.max_lengths, () if stateless else sentence_state
    )

    def now(loop: compaction.Compacting) -> _BeamSetup:
        """The setup of the sentences still in the batch."""
        batch = tf.shape(loop.rows)[0]
        offsets = tf.range(batch)[:, None] * k
        return setup._replace(batch=batch, max_lengths=loop.max_lengths, batch_offsets=offsets)

    def body(loop: compaction.Compacting) -> tuple[compaction.Compacting]:
        current = now(loop)
        step = _with_state(step_fn, None if stateless else loop.state)
        loop = loop._replace(beams=_beam_step(step, current, loop.beams))
        done = _sentences_done(current, loop.beams)
        compacted = compaction.compact
        return (tf.cond(compaction.worth_it(done), lambda: compacted(loop, done, k), lambda: loop),)

    (loop,) = tf.while_loop(
        lambda loop: _beams_searching(now(loop), loop.beams),
        body,
        (start,),
        (compaction.invariants(shape_invariants(start)),),
        maximum_iterations=total,
    )
    return compaction.record(loop)
