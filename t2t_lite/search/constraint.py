"""Constrained decoding: a step function that searches only the tokens a `Constraint` allows.

A constraint is model-agnostic, like the searches: it sees ids, never logits. The parsing
problems' `TreeConstraint` is one.
"""

from __future__ import annotations

from typing import Any, Protocol

import tensorflow as tf

from t2t_lite.search.contract import NEG_INF, StepFn
from t2t_lite.vocabulary import PAD_ID


class Constraint(Protocol):
    """Which tokens a hypothesis may take next, given what it has taken (constrained decoding).

    Its state is a nested structure of tensors with leading dimension the batch; it rides in the
    search's cache, so beam search tiles and reorders it with the hypotheses.
    """

    def initial_state(self, inputs: tf.Tensor, max_lengths: tf.Tensor) -> Any:
        """The state before any token, from the source ids [batch, source] (zero-padded) and
        the [batch] maximum output lengths (EOS included)."""

    def update(self, state: Any, ids: tf.Tensor) -> Any:
        """The state after feeding ids [rows] (the start id 0 at the first step)."""

    def allowed(self, state: Any, width: int) -> tf.Tensor:
        """Bool [rows, width]: the ids the next token may be; at least one per row."""


def constrained_step_fn(
    step_fn: StepFn,
    cache: Any,
    constraint: Constraint,
    inputs: tf.Tensor,
    max_lengths: tf.Tensor,
) -> tuple[StepFn, Any]:
    """`step_fn` with its logits set to -inf wherever `constraint` forbids the token; the
    constraint's state joins the cache (`{"model": cache, "constraint": state}`).

    The allowed tokens keep the probabilities the model gives them, not renormalized among
    themselves: the forbidden tokens' mass moves to the padding id, which searches never
    generate. So a hypothesis the constraint keeps forcing away from what the model wants
    scores low, and beam search prefers one the model itself finds likely (renormalizing made
    GUM parses 7 F1 worse: forced steps cost nothing).
    """

    def step(ids, index, cache):
        state = constraint.update(cache["constraint"], ids)
        logits, inner = step_fn(ids, index, cache["model"])
        logits = tf.cast(logits, tf.float32)
        allowed = constraint.allowed(state, logits.shape[-1] or tf.shape(logits)[-1])
        forbidden = tf.reduce_logsumexp(tf.where(allowed, NEG_INF, logits), -1, keepdims=True)
        is_pad = tf.equal(tf.range(tf.shape(logits)[-1]), PAD_ID)[None, :]
        masked = tf.where(is_pad, forbidden, tf.where(allowed, logits, NEG_INF))
        return masked, {"model": inner, "constraint": state}

    return step, {"model": cache, "constraint": constraint.initial_state(inputs, max_lengths)}


class AllOf:
    """The constraint that allows a token where every one of `constraints` does; its state is
    the tuple of theirs."""

    def __init__(self, constraints):
        self.constraints = tuple(constraints)

    def initial_state(self, inputs, max_lengths):
        return tuple(c.initial_state(inputs, max_lengths) for c in self.constraints)

    def update(self, state, ids):
        return tuple(c.update(s, ids) for c, s in zip(self.constraints, state, strict=True))

    def allowed(self, state, width):
        masks = [c.allowed(s, width) for c, s in zip(self.constraints, state, strict=True)]
        return tf.reduce_all(tf.stack(masks), axis=0)


class PrefixConstraint:
    """A target prefix per sentence, prefix [batch, P] (zero-padded; an empty row for none): the
    first tokens of every hypothesis are its sentence's prefix, then the search goes on freely.
    The prefix's tokens are scored as the model scores them (n-best lists and scores include
    them), as if forced through `--score_file`."""

    def __init__(self, prefix: tf.Tensor):
        self.prefix = tf.convert_to_tensor(prefix, tf.int32)

    def initial_state(self, inputs, max_lengths):
        lengths = tf.reduce_sum(tf.cast(self.prefix > 0, tf.int32), axis=-1)
        # One zero column more, so that an empty prefix [batch, 0] can be indexed too.
        prefix = tf.pad(self.prefix, [[0, 0], [0, 1]])
        return {"prefix": prefix, "lengths": lengths, "taken": tf.zeros_like(lengths)}

    def update(self, state, ids):
        # The start id 0, fed at the first step, is no token.
        return {**state, "taken": state["taken"] + tf.cast(ids > 0, tf.int32)}

    def allowed(self, state, width):
        forcing = state["taken"] < state["lengths"]  # --> [rows]
        index = tf.minimum(state["taken"], tf.shape(state["prefix"])[1] - 1)
        forced = tf.gather(state["prefix"], index[:, None], batch_dims=1)  # --> [rows, 1]
        ids = tf.range(width)[None, :]
        return tf.not_equal(ids, PAD_ID) & (~forcing[:, None] | tf.equal(ids, forced))
