"""Repetition and length controls: a step function whose logits are adjusted by what each
hypothesis has generated so far, before any search sees them.

The four controls are those of CTranslate2 (`repetition_penalty`, `no_repeat_ngram_size`,
`min_decoding_length`, `disable_unk`), fairseq (`no_repeat_ngram_size`, `min_len`) and
OpenNMT-py (`-block_ngram_repeat`, `-min_length`, `-ban_unk_token`):

  repetition_penalty p: the logit of every token the hypothesis already holds is divided by p
    where positive and multiplied by p where not (CTranslate2's rule); 1 is off.
  no_repeat_ngram_size N: a token that would complete an N-gram the hypothesis already holds is
    banned; 0 is off.
  min_length M: EOS is banned until the hypothesis holds M tokens, EOS not counted; 0 is off.
  disable_unk: the unknown-piece id (`UNK_ID`) is banned.

"The hypothesis" is every output token so far, a forced target prefix included; never the
source. A banned token's logit is -inf; the search then normalizes what is left (as
CTranslate2 does), so scores are those of the adjusted distribution. A ban never empties a row:
where a constraint or prefix allows only banned tokens, that row keeps its logits unbanned
(prefixes and terminology win over the controls). Each control is a number per sentence riding
in the search's cache (`constraint.constrained_step_fn`'s pattern), so beam search reorders the
state with the hypotheses and an exported graph takes the values as inputs. With every control
off the logits come back unchanged, bit for bit.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import tensorflow as tf

from t2t_lite.search.contract import NEG_INF, StepFn
from t2t_lite.vocabulary import EOS_ID, PAD_ID, UNK_ID


class Controls(NamedTuple):
    """The controls' values: Python numbers, or scalar or [batch] tensors (an exported graph's
    inputs). The defaults are all off."""

    no_repeat_ngram_size: Any = 0
    repetition_penalty: Any = 1.0
    min_length: Any = 0
    disable_unk: Any = False

    @classmethod
    def of(cls, settings: Any) -> Controls | None:
        """The controls of a `SearchSettings`; None where all are off (the search then runs
        unwrapped, as before they existed)."""
        controls = cls(*(getattr(settings, name) for name in cls._fields))
        return None if controls == cls() else controls


def controlled_step_fn(
    step_fn: StepFn, cache: Any, controls: Controls, batch: tf.Tensor, length: tf.Tensor
) -> tuple[StepFn, Any]:
    """`step_fn` with its logits adjusted by `controls` (see the module); their state joins the
    cache (`{"model": cache, "controls": state}`). `length`: the most tokens a hypothesis
    holds (the search's maximum output length)."""

    def step(ids, index, cache):
        state = _update(cache["controls"], ids)
        logits, inner = step_fn(ids, index, cache["model"])
        return adjusted_logits(tf.cast(logits, tf.float32), state), {
            "model": inner,
            "controls": state,
        }

    return step, {"model": cache, "controls": initial_state(controls, batch, length)}


def initial_state(controls: Controls, batch: tf.Tensor, length: tf.Tensor) -> dict[str, Any]:
    """The state before any token: the controls as [batch] values, the tokens so far
    `history` [batch, length] (zero-padded), their count `taken` [batch], and `suffix`
    [batch, length] (see `_update`)."""

    def per_row(value, dtype):
        return tf.broadcast_to(tf.cast(value, dtype), [batch])

    empty = tf.zeros([batch, tf.cast(length, tf.int32)], tf.int32)
    return {
        "ngram": per_row(controls.no_repeat_ngram_size, tf.int32),
        "penalty": per_row(controls.repetition_penalty, tf.float32),
        "min_length": per_row(controls.min_length, tf.int32),
        "unk": per_row(controls.disable_unk, tf.bool),
        "history": empty,
        "suffix": empty,
        "taken": tf.zeros([batch], tf.int32),
    }


def _update(state: dict[str, Any], ids: tf.Tensor) -> dict[str, Any]:
    """The state after feeding ids [rows]; the start id 0 (and the 0 a finished row is fed) is
    no token.

    suffix[p], for p < taken, is the length of the longest common suffix of the hypothesis's
    first p tokens and of all its tokens, h[:p] and h[:t]. Appending x gives
    S(p + 1, t + 1) = S(p, t) + 1 where h[p] == x, else 0: the n-gram test at every position
    in one vectorized step, instead of comparing every window.
    """
    history, suffix, taken = state["history"], state["suffix"], state["taken"]
    token = ids[:, None]  # --> [rows, 1]
    grown = tf.where(tf.equal(history, token), suffix + 1, 0)[:, :-1]
    new_suffix = tf.pad(grown, [[0, 0], [1, 0]])
    written = history + tf.one_hot(taken, tf.shape(history)[1], dtype=tf.int32) * token
    feeds = ids > 0
    return {
        **state,
        "history": tf.where(feeds[:, None], written, history),
        "suffix": tf.where(feeds[:, None], new_suffix, suffix),
        "taken": taken + tf.cast(feeds, tf.int32),
    }


def adjusted_logits(logits: tf.Tensor, state: dict[str, Any]) -> tf.Tensor:
    """float32 logits [rows, vocab] --> the same with the repetition penalty applied and the
    banned tokens at -inf (a row they would empty is left unbanned)."""
    rows, vocab = tf.shape(logits)[0], tf.shape(logits)[1]
    history, taken = state["history"], state["taken"]
    held = tf.range(tf.shape(history)[1])[None, :] < taken[:, None]  # --> [rows, length]
    row = tf.broadcast_to(tf.range(rows)[:, None], tf.shape(history))
    where = tf.stack([row, history], axis=-1)  # --> [rows, length, 2]

    def tokens(select):  # [rows, length] bool over the history --> [rows, vocab] bool
        return tf.scatter_nd(where, tf.cast(select, tf.int32), [rows, vocab]) > 0

    penalty = state["penalty"][:, None]
    penalized = tf.where(logits > 0, logits / penalty, logits * penalty)
    logits = tf.where(tokens(held), penalized, logits)
    # suffix >= N - 1: the N - 1 tokens before position p are the hypothesis's last N - 1, so
    # the token at p would repeat that N-gram.
    ngram = state["ngram"][:, None]
    repeats = tokens(held & (ngram > 0) & (state["suffix"] >= ngram - 1))
    ids = tf.range(vocab)[None, :]
    banned = (
        repeats
        | (tf.equal(ids, EOS_ID) & (taken < state["min_length"])[:, None])
        | (tf.equal(ids, UNK_ID) & state["unk"][:, None])
    )
    kept = tf.where(banned, NEG_INF, logits)
    some = tf.reduce_any((kept > NEG_INF) & tf.not_equal(ids, PAD_ID), axis=-1, keepdims=True)
    return tf.where(some, kept, logits)
