"""The Transformer wired to the searches: its step function, and translate, sample and score.

`model_step_fn` turns a `t2t_lite.model.Transformer` into the `step_fn` that every search in
`t2t_lite.search.beam` drives, with the incremental cache (fast path) or by recomputing the
whole prefix at every step (the slow path it is tested against).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

import keras
import tensorflow as tf

from t2t_lite.data.shortlist import Shortlist
from t2t_lite.hparams import SearchSettings
from t2t_lite.model.ensemble import members
from t2t_lite.model.layers.masks import padding_mask
from t2t_lite.search.beam import beam_search
from t2t_lite.search.constraint import AllOf, Constraint, PrefixConstraint, constrained_step_fn
from t2t_lite.search.contract import SearchResult, StepFn, write_column
from t2t_lite.search.controls import Controls, controlled_step_fn
from t2t_lite.search.sampling import sample_search
from t2t_lite.search.terminology import TermBanks, TermConstraint


def model_step_fn(
    model,
    inputs: tf.Tensor,
    max_length: int | tf.Tensor,
    use_cache: bool = True,
    fixed_shapes: bool | str = False,
    columns: tf.Tensor | None = None,
) -> tuple[StepFn, Any]:
    """A step function and its initial cache that decode `inputs` [batch, source] with a
    `Transformer` for up to `max_length` positions.

    use_cache=True uses the model's incremental decoder (keys and values of earlier positions kept
    in the cache), which grows a position per step; with `fixed_shapes` it is a `max_length`
    buffer instead, the same in every step, as XLA needs ("in_place": written in place, for
    searches that never reorder rows; `MultiHeadAttention.empty_cache`). use_cache=False
    recomputes the whole prefix with `model.decode` at every step; it is the slow reference that
    the cached path is tested and benchmarked against.

    `columns` [n] (a vocabulary shortlist's ids, ascending, the reserved ones first): the step
    takes and returns positions in that list, logits [rows, n] computed for those ids alone.
    """
    if use_cache:
        step, cache, state = sentence_step_fn(model, inputs, max_length, fixed_shapes, columns)
        return (lambda ids, index, cache: step(ids, index, cache, state)), cache
    to_vocab = (lambda ids: ids) if columns is None else (lambda ids: tf.gather(columns, ids))
    memory, memory_mask = model.encode(inputs)

    def recompute_step(ids, index, cache):
        # fed: [batch, max_length + 1], the ids fed so far; the extra column stays zero.
        fed = write_column(cache["fed"], index, to_vocab(ids))
        # decode() shifts its targets right behind the start id 0, so fed[:, 1 : index + 2]
        # becomes the decoder input fed[:, : index + 1] (fed[:, 0] is the start id 0).
        logits = model.decode(fed[:, 1 : index + 2], cache["memory"], cache["memory_mask"])
        # logits: [batch, index + 1, vocab] --> the last position's [batch, vocab]
        last = logits[:, -1] if columns is None else tf.gather(logits[:, -1], columns, axis=1)
        return last, {**cache, "fed": fed}

    batch = tf.shape(inputs)[0]
    fed = tf.zeros([batch, tf.cast(max_length, tf.int32) + 1], tf.int32)
    return recompute_step, {"memory": memory, "memory_mask": memory_mask, "fed": fed}


def sentence_step_fn(
    model,
    inputs: tf.Tensor,
    max_length: int | tf.Tensor,
    fixed_shapes: bool | str = False,
    columns: tf.Tensor | None = None,
) -> tuple[Callable, Any, Any]:
    """`model_step_fn`'s cached step with its sentences' state as an argument:
    (step_fn(ids, index, cache, state), the initial cache, the state of `inputs`' sentences).
    The state is the encoder's keys and values and the padding mask (`project_memory`), one
    copy per sentence, leading dimension batch, never tiled to the beams nor reordered with
    them; `beam_search(compact=True)` gathers it as sentences leave the batch."""
    to_vocab = (lambda ids: ids) if columns is None else (lambda ids: tf.gather(columns, ids))
    memory, memory_mask = model.encode(inputs)
    state = model.project_memory(memory, memory_mask)
    weights = compute_dtype_weights(model)
    with weights:  # the pre-softmax matrix, transposed (and cut to `columns`) once
        kernel = model.output_kernel(columns)

    def step(ids, index, cache, state):
        with weights:
            return model.decode_step(to_vocab(ids), index, cache, state, columns, kernel)

    return step, model.init_cache(tf.shape(inputs)[0], max_length, fixed_shapes), state


class _WeightsAs(keras.StatelessScope):
    """Inside it, each variable of the (variable, tensor) pairs reads as its tensor, in that
    tensor's dtype. (`keras.StatelessScope` itself converts the values it is given to the
    variables' dtype, which is what this scope exists to avoid.)"""

    def __init__(self, pairs: list):
        super().__init__()
        self.state_mapping.update({id(variable): value for variable, value in pairs})


def compute_dtype_weights(model) -> contextlib.AbstractContextManager:
    """A scope in which a mixed-precision model's matrices read as copies in its compute dtype,
    cast once here, before a search's loop, instead of at every step of it.

    Under mixed precision, Keras casts each float32 variable to the compute dtype where a layer
    reads it, so a search's loop would cast every kernel and the embedding table again at each
    step (19 % of greedy search's GPU time in bfloat16, docs/results/benchmarks.md). The copies are
    the same casts, so the outputs are unchanged. Only matrices (2 or more dimensions) that Keras
    autocasts are copied: layer norms, biases and the float32 scales of int8 weights keep their
    own reads. A float32 model gets a scope that changes nothing. An `Ensemble` gets each
    member's copies.
    """
    pairs = []
    for member in members(model):
        compute = tf.as_dtype(member.compute_dtype)
        pairs += [
            (variable, tf.cast(variable.value, compute))
            for variable in member.variables
            if len(variable.shape) >= 2
            and variable._autocast  # noqa: SLF001 (Keras has no public name for it)
            and tf.as_dtype(variable.dtype).is_floating
            and tf.as_dtype(variable.dtype) != compute
        ]
    return _WeightsAs(pairs) if pairs else contextlib.nullcontext()


def output_lengths(model, inputs: tf.Tensor, extra_length: int | tf.Tensor) -> tf.Tensor:
    """[batch, source] ids --> [batch] maximum output lengths: the input length (EOS included)
    plus `extra_length`, capped at the model's number of positions, and at least 1."""
    input_lengths = tf.reduce_sum(tf.cast(padding_mask(inputs), tf.int32), axis=1)
    lengths = tf.minimum(input_lengths + tf.cast(extra_length, tf.int32), model.max_positions)
    return tf.maximum(lengths, 1)


def _search_length(
    model, inputs: tf.Tensor, extra_length: int | tf.Tensor, fixed_shapes: bool
) -> tuple[tf.Tensor, tf.Tensor | None]:
    """([batch] maximum output lengths, the positions of the search state). With
    `fixed_shapes` the state holds the longest any input of this width allows, source width +
    `extra_length` (capped like the lengths), known from shapes and constants alone."""
    max_lengths = output_lengths(model, inputs, extra_length)  # --> [batch]
    if not fixed_shapes:
        return max_lengths, None
    width = tf.shape(inputs)[1] + tf.cast(extra_length, tf.int32)
    return max_lengths, tf.maximum(tf.minimum(width, model.max_positions), 1)


def translate_ids(
    model,
    inputs: tf.Tensor,
    *,
    beam_size: int = 4,
    alpha: float | tf.Tensor = 0.6,
    extra_length: int | tf.Tensor = 50,
    nbest: int = 1,
    use_cache: bool = True,
    constraint: Constraint | None = None,
    fixed_shapes: bool = False,
    prefix: tf.Tensor | None = None,
    terms: tf.Tensor | None = None,
    continuations: Any = None,
    shortlist: Shortlist | None = None,
    compact: bool = True,
    controls: Controls | None = None,
    patience: float = 0.0,
) -> SearchResult:
    """Beam search with a `Transformer` on zero-padded source ids [batch, source] (each ending
    in EOS); each output is at most its input length + `extra_length` long. Sentences leave
    the batch as they finish (`compaction`; `compact=False`: all are stepped to the end) except
    under `fixed_shapes`, a constraint, a prefix, terms or `controls`, which keep every row
    (the compacting search's step takes the sentences' state apart from the cache, which the
    wrappers' state would need to follow). With a
    `constraint`, only the tokens it allows are searched (`constrained_step_fn`).
    `fixed_shapes` keeps every shape of the search fixed by the input's shape, so that the
    search compiles with XLA (`tf.function(jit_compile=True)`): a fixed-length cache, and
    state of source width + `extra_length` positions. It finds the same hypotheses.
    `prefix` [batch, P] forces each output's first tokens (`PrefixConstraint`); `terms` [batch,
    C, T] are target phrases each output must contain (`t2t_lite.search.terminology`), none
    of `continuations` ([vocab] bool) right after one. `shortlist`: each batch searched over
    the target ids of its `Shortlist.columns` (not with a constraint, prefix or terms).
    `controls`: repetition and length controls (`t2t_lite.search.controls`), applied after
    the constraint, prefix and terms.

    Returns:
      SearchResult with ids [batch, nbest, length] and scores [batch, nbest], best first.
    """
    inputs = tf.convert_to_tensor(inputs, tf.int32)
    max_lengths, buffer = _search_length(model, inputs, extra_length, fixed_shapes)
    step_length = tf.reduce_max(max_lengths) if buffer is None else buffer
    constraint, banks = guided(constraint, prefix, terms, continuations)
    columns = _columns(shortlist, inputs, constraint)
    batch = tf.shape(inputs)[0]
    plain = constraint is None and banks is None and controls is None
    compact = compact and use_cache and not fixed_shapes and plain
    if compact:  # the encoder's state per sentence, gathered as sentences leave the batch
        step_fn, cache, state = sentence_step_fn(model, inputs, step_length, columns=columns)
    else:
        step_fn, cache = model_step_fn(model, inputs, step_length, use_cache, fixed_shapes, columns)
        state = None
    if constraint is not None:
        step_fn, cache = constrained_step_fn(step_fn, cache, constraint, inputs, max_lengths)
    if controls is not None:
        step_fn, cache = controlled_step_fn(step_fn, cache, controls, batch, step_length)
        if banks is not None:  # the terms' state, one level down the cache now
            banks = banks.under("model")
    found = beam_search(
        step_fn,
        cache,
        batch,
        beam_size,
        alpha,
        max_lengths,
        nbest=nbest,
        buffer_length=buffer,
        banks=banks,
        sentence_state=state,
        compact=compact,
        patience=patience,
    )
    return _to_vocabulary(found, columns)


def _columns(
    shortlist: Shortlist | None, inputs: tf.Tensor, constraint: Constraint | None
) -> tf.Tensor | None:
    """The shortlist's target ids for this batch (None: the whole vocabulary)."""
    if shortlist is None:
        return None
    if constraint is not None:
        raise ValueError(
            "a vocabulary shortlist searches without constraints, prefixes or terms: they may "
            "need tokens outside it"
        )
    return shortlist.columns(inputs)


def _to_vocabulary(found: SearchResult, columns: tf.Tensor | None) -> SearchResult:
    """A shortlisted search's ids (positions in `columns`) as vocabulary ids."""
    if columns is None:
        return found
    return found._replace(ids=tf.gather(columns, found.ids))


def guided(
    constraint: Constraint | None,
    prefix: tf.Tensor | None,
    terms: tf.Tensor | None,
    continuations: Any = None,
) -> tuple[Constraint | None, TermBanks | None]:
    """The problem's constraint joined with a target prefix and terminology constraints
    (`AllOf`), and the beam-allocation hook that the terms need (None without terms)."""
    if prefix is None and terms is None:
        return constraint, None
    parts = [c for c in (constraint,) if c is not None]
    if prefix is not None:
        parts.append(PrefixConstraint(prefix))
    if terms is None:
        return AllOf(parts), None
    index = len(parts)
    parts.append(TermConstraint(terms, continuations))
    return AllOf(parts), TermBanks(lambda cache: cache["constraint"][index])


def sample_ids(
    model,
    inputs: tf.Tensor,
    *,
    temperature: float = 0.0,
    top_k: int = 0,
    top_p: float = 1.0,
    seed: int | tf.Tensor = 0,
    extra_length: int | tf.Tensor = 50,
    constraint: Constraint | None = None,
    fixed_shapes: bool = False,
    prefix: tf.Tensor | None = None,
    shortlist: Shortlist | None = None,
    controls: Controls | None = None,
) -> SearchResult:
    """Greedy decoding (temperature 0) or sampling with a `Transformer`; see `sample_search`
    (and `translate_ids` for `constraint`, `fixed_shapes`, `prefix`, `shortlist` and
    `controls`).
    Terminology constraints need beam search."""
    inputs = tf.convert_to_tensor(inputs, tf.int32)
    max_lengths, buffer = _search_length(model, inputs, extra_length, fixed_shapes)
    step_length = tf.reduce_max(max_lengths) if buffer is None else buffer
    # Rows are never reordered here, so a fixed cache is written in place.
    fixed = "in_place" if fixed_shapes else False
    constraint, _ = guided(constraint, prefix, None)
    columns = _columns(shortlist, inputs, constraint)
    step_fn, cache = model_step_fn(model, inputs, step_length, fixed_shapes=fixed, columns=columns)
    if constraint is not None:
        step_fn, cache = constrained_step_fn(step_fn, cache, constraint, inputs, max_lengths)
    if controls is not None:
        batch = tf.shape(inputs)[0]
        step_fn, cache = controlled_step_fn(step_fn, cache, controls, batch, step_length)
    found = sample_search(
        step_fn,
        cache,
        tf.shape(inputs)[0],
        max_lengths,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        seed=seed,
        buffer_length=buffer,
    )
    return _to_vocabulary(found, columns)


def score_ids(model, inputs: tf.Tensor, targets: tf.Tensor) -> tf.Tensor:
    """log p(targets | inputs) [batch] under the model (float32), summed over the non-padding
    target tokens (EOS included). inputs [batch, source], targets [batch, target], zero-padded."""
    logits = model({"inputs": inputs, "targets": targets}, training=False)  # [b, t, vocab]
    log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
    token_lp = tf.gather(log_probs, targets, batch_dims=2)  # --> [batch, target]
    return tf.reduce_sum(tf.where(padding_mask(targets), token_lp, 0.0), axis=1)


def search_function(
    model,
    settings: SearchSettings,
    constraint: Constraint | None = None,
    fixed_shapes: bool = False,
    guided: bool = False,
    continuations: Callable[[], Any] | None = None,
    shortlist: Shortlist | None = None,
    alpha: float | tf.Tensor | None = None,
) -> Callable[..., SearchResult]:
    """The search `settings` ask for, as a function of source ids [batch, source]: beam search
    (`translate_ids`), or sampling (`sample_ids`) when `settings.sampling`. `fixed_shapes`: a
    search that XLA compiles (`translate_ids`). `guided`: a function of (source ids, prefix
    [batch, P], terms [batch, C, T]) instead (target prefixes and terminology constraints;
    sampling takes the prefix only), with `continuations()` ([vocab] bool, asked for when the
    search is traced) as `translate_ids` takes them. `shortlist`: the plain search runs over
    its ids (`translate_ids`); a guided one over the whole vocabulary, which the prefixes and
    terms may need. `alpha`: beam search's length penalty in place of `settings.alpha` (a
    tensor: one traced search for every alpha)."""
    shared = {
        "extra_length": settings.extra_length,
        "constraint": constraint,
        "fixed_shapes": fixed_shapes,
        "shortlist": None if guided else shortlist,
        "controls": Controls.of(settings),
    }
    if settings.sampling:
        sampling = {k: getattr(settings, k) for k in ("temperature", "top_k", "top_p", "seed")}
        search = functools.partial(sample_ids, model, **sampling, **shared)
        if guided:
            return lambda inputs, prefix, terms: search(inputs, prefix=prefix)
        return search
    beam = {k: getattr(settings, k) for k in ("beam_size", "alpha", "nbest", "patience")}
    if alpha is not None:
        beam["alpha"] = alpha
    search = functools.partial(translate_ids, model, **beam, **shared)
    if guided:
        return lambda inputs, prefix, terms: search(
            inputs,
            prefix=prefix,
            terms=terms,
            continuations=continuations() if continuations else None,
        )
    return search
