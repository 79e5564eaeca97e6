"""Terminology constraints: target phrases that must appear in a sentence's translation.

Beam search with dynamic beam allocation (Post & Vilar, 2018), in fixed-shape TensorFlow ops so
that it runs in t2t-decode, the SavedModel and t2t-serve alike:

- `TermConstraint` follows, per hypothesis, which phrases it has written (`met`) and how far into
  the phrase it is writing now (`active`, `pos`); it forbids EOS until every phrase is met. A
  hypothesis that leaves a phrase half-written drops that progress, as in Post & Vilar.
- `TermBanks` widens each step's candidates: beside every hypothesis's best tokens, the tokens
  that advance a phrase (the next token of the phrase being written, or the first token of each
  unmet one). A candidate's bank is the number of phrase tokens its hypothesis has met. The beam
  is filled bank by bank in turns, best log-prob first within each bank: the best of the fullest
  bank, the best of the next, ..., then the second best of each, so hypotheses that have placed
  more of the phrases keep a share of the beam even when the model finds them less likely.

Phrases come as ids [batch, C, T]: C phrases per sentence of up to T tokens, zero-padded; a
phrase of no tokens is no constraint. With no phrases the search equals the unconstrained one.
"""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

from t2t_lite.vocabulary import EOS_ID, PAD_ID


class TermState(NamedTuple):
    phrases: tf.Tensor  # [rows, C, T] int32
    lengths: tf.Tensor  # [rows, C] int32
    met: tf.Tensor  # [rows, C] bool; an empty phrase is met from the start
    active: tf.Tensor  # [rows] int32: the phrase being written, -1 for none
    pos: tf.Tensor  # [rows] int32: its tokens written so far
    just_met: tf.Tensor  # [rows] bool: the last token completed a phrase


def _phrase_token(phrases: tf.Tensor, which: tf.Tensor, pos: tf.Tensor) -> tf.Tensor:
    """phrases [rows, C, T], which [rows, ...], pos [rows, ...] --> the token at (which, pos)
    of each row, 0 where `which` is -1 or `pos` is past the phrase's end."""
    width = tf.shape(phrases)[2]
    safe_which, safe_pos = tf.maximum(which, 0), tf.minimum(pos, width - 1)
    index = tf.stack([safe_which, safe_pos], axis=-1)
    token = tf.gather_nd(phrases, index, batch_dims=1)
    return tf.where((which >= 0) & (pos < width), token, 0)


def advance(state: TermState, tokens: tf.Tensor) -> TermState:
    """The states after each row takes each of tokens [rows, m]: a TermState whose met is
    [rows, m, C] and active, pos, just_met [rows, m] (phrases and lengths unchanged)."""
    count = tf.shape(state.phrases)[1]
    m = tf.shape(tokens)[1]
    active = tf.tile(state.active[:, None], [1, m])
    pos = tf.tile(state.pos[:, None], [1, m])
    met = tf.tile(state.met[:, None, :], [1, m, 1])
    expected = _phrase_token(state.phrases, active, pos)  # --> [rows, m]
    continues = (active >= 0) & tf.equal(tokens, expected)
    # A token that does not continue the phrase being written may start an unmet phrase (the
    # first such phrase in order).
    starts = tf.equal(state.phrases[:, None, :, 0], tokens[..., None]) & ~met  # [rows, m, C]
    starts &= state.lengths[:, None, :] > 0
    first = tf.argmax(tf.cast(starts, tf.int32), axis=-1, output_type=tf.int32)
    any_start = tf.reduce_any(starts, axis=-1) & ~continues
    new_active = tf.where(continues, active, tf.where(any_start, first, -1))
    new_pos = tf.where(continues, pos + 1, tf.where(any_start, 1, 0))
    length = tf.gather(state.lengths, tf.maximum(new_active, 0), batch_dims=1)
    done = (new_active >= 0) & (new_pos >= length)
    met |= done[..., None] & tf.equal(tf.range(count)[None, None, :], new_active[..., None])
    new_active = tf.where(done, -1, new_active)
    new_pos = tf.where(done, 0, new_pos)
    return TermState(state.phrases, state.lengths, met, new_active, new_pos, done)


def bank(state: TermState) -> tf.Tensor:
    """The phrase tokens met: of whole phrases, plus those of the phrase being written: [rows]
    for a hypothesis's state, [rows, m] for `advance`'s states ([rows, m, C] met)."""
    lengths = state.lengths if state.met.shape.rank == 2 else state.lengths[:, None, :]
    whole = tf.reduce_sum(tf.where(state.met, lengths, 0), axis=-1)
    return whole + state.pos


class TermConstraint:
    """A `t2t_lite.search.constraint.Constraint`: EOS only once every phrase is met; right
    after a phrase, none of the `continuations` ([vocab] bool: the ids that continue the word
    before them, e.g. SentencePiece pieces without "▁"; `Tokenizer.word_continuations`), so
    that "Tabelle" is not written as the start of "Tabellen"."""

    def __init__(self, phrases: tf.Tensor, continuations: tf.Tensor | None = None):
        self.continuations = continuations
        # [batch, C, T], with one empty phrase and one zero column more, so that none ([batch,
        # 0, T] or [batch, C, 0]) is indexed alike.
        self.phrases = tf.pad(tf.convert_to_tensor(phrases, tf.int32), [[0, 0], [0, 1], [0, 1]])

    def initial_state(self, inputs: tf.Tensor, max_lengths: tf.Tensor) -> TermState:
        lengths = tf.reduce_sum(tf.cast(self.phrases > 0, tf.int32), axis=-1)  # --> [batch, C]
        rows = tf.shape(self.phrases)[0]
        none = tf.fill([rows], -1)
        return TermState(
            self.phrases,
            lengths,
            tf.equal(lengths, 0),
            none,
            tf.zeros_like(none),
            tf.zeros([rows], tf.bool),
        )

    def update(self, state: TermState, ids: tf.Tensor) -> TermState:
        moved = advance(state, ids[:, None])
        # The start id 0 (fed at the first step) is no token of a phrase.
        fed = ids > 0
        return TermState(
            state.phrases,
            state.lengths,
            tf.where(fed[:, None], moved.met[:, 0], state.met),
            tf.where(fed, moved.active[:, 0], state.active),
            tf.where(fed, moved.pos[:, 0], state.pos),
            fed & moved.just_met[:, 0],
        )

    def allowed(self, state: TermState, width) -> tf.Tensor:
        ids = tf.range(width)[None, :]
        all_met = tf.reduce_all(state.met, axis=-1, keepdims=True)  # --> [rows, 1]
        allowed = tf.not_equal(ids, PAD_ID) & (tf.not_equal(ids, EOS_ID) | all_met)
        if self.continuations is None:
            return allowed
        # The logits may cover the first ids only (a problem's own output symbols).
        continues = tf.convert_to_tensor(self.continuations, tf.bool)[None, :width]
        return allowed & ~(state.just_met[:, None] & continues)


class TermBanks:
    """The beam-search hook of dynamic beam allocation (`beam_search(banks=...)`).

    `state_of(cache)` finds the `TermState` in the search's cache (after the step's update).
    """

    def __init__(self, state_of):
        self.state_of = state_of

    def under(self, key: str) -> TermBanks:
        """The same hook for a cache that holds this one's under `key` (the cache of a step
        function wrapped again, as `controls.controlled_step_fn` keeps it under "model")."""
        return TermBanks(lambda cache: self.state_of(cache[key]))

    def widen(self, logits, row_lp, row_token, cache):
        """Adds to each row's candidates ([rows, n] log-probs and ids) the tokens that advance
        a phrase: [rows, n + C]. A token already among the row's candidates is added as -inf."""
        state = self.state_of(cache)
        count = tf.shape(state.phrases)[1]
        writing = state.active[:, None] >= 0
        nexts = tf.tile(_phrase_token(state.phrases, state.active, state.pos)[:, None], [1, count])
        firsts = tf.where(state.met, 0, state.phrases[:, :, 0])
        first_slot = tf.equal(tf.range(count), 0)[None, :]
        extra = tf.where(writing, tf.where(first_slot, nexts, 0), firsts)  # --> [rows, C]
        logits = tf.cast(logits, tf.float32)
        extra_lp = tf.gather(logits, extra, batch_dims=1) - tf.reduce_logsumexp(
            logits, axis=-1, keepdims=True
        )
        seen = tf.reduce_any(tf.equal(extra[:, :, None], row_token[:, None, :]), axis=-1)
        # The same token twice in `extra` (two phrases starting alike): only the first counts.
        count_range = tf.range(count)
        earlier = tf.equal(extra[:, :, None], extra[:, None, :]) & (
            count_range[None, None, :] < count_range[None, :, None]
        )
        seen |= tf.reduce_any(earlier, axis=-1)
        extra_lp = tf.where(seen | tf.equal(extra, PAD_ID), float("-inf"), extra_lp)
        return tf.concat([row_lp, extra_lp], 1), tf.concat([row_token, extra], 1)

    def choose(self, flat_lp, row_token, cache, batch, count):
        """The `count` candidates of each sentence to keep, from flat_lp [batch, M] (M = beams
        x row candidates, as `row_token` [rows, n] lays them out), filling the beam bank by
        bank in turns: their indices [batch, count], priorities (higher first), and whether
        each has met every phrase."""
        moved = advance(self.state_of(cache), row_token)
        banks = tf.reshape(bank(moved), [batch, -1])
        complete = tf.reshape(tf.reduce_all(moved.met, axis=-1), [batch, -1])
        live = flat_lp > float("-inf")
        # Rank within the bank: candidates of the same bank with a higher log-prob, or an equal
        # one at a lower index.
        index = tf.range(tf.shape(flat_lp)[1])
        better = (flat_lp[:, None, :] > flat_lp[:, :, None]) | (
            tf.equal(flat_lp[:, None, :], flat_lp[:, :, None])
            & (index[None, None, :] < index[None, :, None])
        )
        same = tf.equal(banks[:, None, :], banks[:, :, None]) & live[:, None, :]
        rank = tf.reduce_sum(tf.cast(better & same, tf.int32), axis=-1)  # --> [batch, M]
        top = tf.reduce_max(banks) + 1
        key = tf.cast(rank * top + (top - 1 - banks), tf.float32)
        # -inf candidates come last, in index order, as top_k would leave them.
        priority = tf.where(live, -key, -1e9 - tf.cast(index, tf.float32)[None, :])
        _, chosen = tf.math.top_k(priority, count)
        return (
            chosen,
            tf.gather(priority, chosen, batch_dims=1),
            tf.gather(complete, chosen, batch_dims=1),
        )


def phrases_met(ids: list[int], phrases: list[list[int]]) -> list[bool]:
    """Per phrase, whether it occurs in `ids` as a contiguous run (the check after a search)."""

    def occurs(phrase):
        n = len(phrase)
        return any(ids[i : i + n] == phrase for i in range(len(ids) - n + 1))

    return [occurs(p) for p in phrases]
