"""Constrained decoding for linearized trees: every hypothesis is a well-formed tree.

A `t2t_lite.search.constraint.Constraint` over the linearization of `parsing_trees.linearize`.
At each step it allows only the tokens that keep the output a prefix of a well-formed tree over
exactly the sentence's words:

  * a tag (a leaf) only inside a phrase, while fewer tags than source words were emitted;
  * `(X` only while a word is left for it, the phrase depth is below `max_depth`, fewer than
    `max_opens` phrases have opened in a row (a tag or `)X` resets the count), the
    shortest completion after it (a tag per word left, every phrase closed, EOS) still fits in
    the output's maximum length, and never after the root phrase has closed;
  * `)X` only when it matches the innermost open `(X`, that phrase already holds something, and
    it is not the root closing before all words have their tag;
  * EOS only once the root has closed with every word tagged.

With a tag dictionary (`tag_table`: which tags each source id may take, from the training
trees) a tag is further restricted to those seen with the word it belongs to, the next untagged
source word; that keeps the i-th tag on the i-th word, which the model alone often loses.

So `delinearize` has nothing left to repair in what a constrained search returns (it stays the
fallback for unconstrained decoding). The number of words is the source's length in ids (the
parsing vocabularies give each word one id) minus EOS.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from t2t_lite.extras import lazy_import
from t2t_lite.vocabulary import EOS_ID, PAD_ID

tf = lazy_import("tensorflow")

# Token kinds.
NONE, OPEN, CLOSE, TAG, EOS = 0, 1, 2, 3, 4


def token_kinds(tokens: Sequence[str], reserved: int) -> tuple[list[int], list[int]]:
    """(kind of every id, and for a `)X` the id of its `(X`, else -1) for a vocabulary list.

    Ids below `reserved` are never tags or brackets; EOS is EOS. A `)X` whose `(X` is not in the
    list gets kind NONE (it could never close anything).
    """
    index = {token: i for i, token in enumerate(tokens)}
    kinds, opener = [], []
    for i, token in enumerate(tokens):
        match = -1
        if i == EOS_ID:
            kind = EOS
        elif i < reserved:
            kind = NONE
        elif len(token) > 1 and token[0] == "(":
            kind = OPEN
        elif len(token) > 1 and token[0] == ")":
            match = index.get("(" + token[1:], -1)
            kind = CLOSE if match >= 0 else NONE
        else:
            kind = TAG
        kinds.append(kind)
        opener.append(match)
    return kinds, opener


class TreeConstraint:
    """The `Constraint` of linearized trees (see the module docstring).

    Args:
      tokens: the vocabulary, id order (only ids below the logits' width are ever allowed).
      reserved: how many leading ids are reserved (padding, EOS, unknown).
      max_depth: the deepest phrase nesting a hypothesis may reach.
      max_opens: the most phrases that may open in a row. Without these two bounds a search
        that the tag dictionary keeps from a tag it wants can escape into ever deeper unary
        chains; the parsing problems take both from the training trees.
      tag_table: optional bool [vocabulary, n]: row w marks the tag ids (all below n) the
        source id w may take (every tag for a word with no tags of its own, such as `<unk>`).
    """

    def __init__(
        self,
        tokens: Sequence[str],
        reserved: int,
        max_depth: int = 64,
        max_opens: int = 64,
        tag_table: np.ndarray | None = None,
    ):
        kinds, opener = token_kinds(tokens, reserved)
        self.kinds = tf.constant(kinds, tf.int32)
        self.opener = tf.constant(opener, tf.int32)
        self.max_depth, self.max_opens = max_depth, max_opens
        if tag_table is not None and (tag_table.ndim != 2 or len(tag_table) != len(tokens)):
            raise ValueError(f"tag_table must be [{len(tokens)}, tags], got {tag_table.shape}")
        self.tag_table = None if tag_table is None else tf.constant(tag_table, tf.bool)

    def initial_state(self, inputs: tf.Tensor, max_lengths: tf.Tensor) -> dict[str, tf.Tensor]:
        batch = tf.shape(inputs)[0]
        words = tf.reduce_sum(tf.cast(tf.not_equal(inputs, PAD_ID), tf.int32), axis=1) - 1
        zeros = tf.zeros([batch], tf.int32)
        return {
            "words": tf.maximum(words, 0),  # source words (EOS not counted)
            "room": tf.broadcast_to(tf.cast(max_lengths, tf.int32), [batch]),  # tokens left
            "leaves": zeros,  # tags emitted
            "depth": zeros,  # phrases open
            "opens": zeros,  # phrases opened since the last tag or closing bracket
            "stack": tf.zeros([batch, self.max_depth], tf.int32),  # open phrases, outermost first
            "inputs": tf.cast(inputs, tf.int32),  # the source ids, for the tag dictionary
        }

    def update(self, state: dict[str, tf.Tensor], ids: tf.Tensor) -> dict[str, tf.Tensor]:
        kind = tf.gather(self.kinds, ids)
        is_open, is_close = tf.equal(kind, OPEN), tf.equal(kind, CLOSE)
        depth = state["depth"]
        at_depth = tf.equal(tf.range(self.max_depth)[None, :], depth[:, None])  # --> [rows, max]
        stack = tf.where(at_depth & is_open[:, None], ids[:, None], state["stack"])
        depth = tf.clip_by_value(
            depth + tf.cast(is_open, tf.int32) - tf.cast(is_close, tf.int32), 0, self.max_depth
        )
        counts = tf.equal(kind, OPEN) | is_close | tf.equal(kind, TAG)
        return {
            "words": state["words"],
            "room": state["room"] - tf.cast(counts, tf.int32),
            "leaves": state["leaves"] + tf.cast(tf.equal(kind, TAG), tf.int32),
            "depth": depth,
            "opens": tf.where(is_open, state["opens"] + 1, tf.where(counts, 0, state["opens"])),
            "stack": stack,
            "inputs": state["inputs"],
        }

    def allowed(self, state: dict[str, tf.Tensor], width: int) -> tf.Tensor:
        kinds, opener = self.kinds[:width], self.opener[:width]
        depth = state["depth"]
        left = state["words"] - state["leaves"]  # words still without a tag
        inside = depth > 0
        # Tags come only inside phrases, so something was emitted iff a phrase is open or a
        # word tagged; the last token opened a phrase iff phrases opened since the last tag/close.
        started = inside | (state["leaves"] > 0)
        fresh = state["opens"] > 0
        can_tag = (left > 0) & inside
        # After "(X": a tag per word left, depth + 1 closing brackets and EOS.
        fits = left + depth + 3 <= state["room"]
        can_open = (left > 0) & (inside | ~started) & (depth < self.max_depth) & fits
        can_open &= state["opens"] < self.max_opens
        can_close = inside & ~fresh & ((depth > 1) | (left <= 0))
        can_end = started & ~inside & (left <= 0)
        top = tf.gather(state["stack"], tf.maximum(depth - 1, 0), batch_dims=1)  # --> [rows]

        def where_kind(kind, ok):  # [rows] --> [rows, width]
            return tf.equal(kinds, kind)[None, :] & ok[:, None]

        tags = where_kind(TAG, can_tag)
        if self.tag_table is not None:
            # The word the next tag belongs to (any, once all are tagged: no tag is allowed then).
            last = tf.shape(state["inputs"])[1] - 1
            word = tf.gather(state["inputs"], tf.minimum(state["leaves"], last), batch_dims=1)
            table = self.tag_table[:, :width]
            table = tf.pad(table, [[0, 0], [0, width - table.shape[1]]])  # [vocabulary, width]
            tags &= tf.gather(table, word)  # --> [rows, width]
        allowed = (
            tags
            | where_kind(OPEN, can_open)
            | where_kind(EOS, can_end)
            | (tf.equal(opener[None, :], top[:, None]) & can_close[:, None])
        )
        # A row with nothing allowed (a hypothesis the search has already ruled out) may end.
        stuck = ~tf.reduce_any(allowed, axis=1, keepdims=True)
        return allowed | (stuck & tf.equal(tf.range(width), EOS_ID)[None, :])
