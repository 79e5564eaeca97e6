"""Which rows of a step function's cache a search tiles and reorders with the beams.

A cache's tensors have one row per hypothesis, [batch * beams, ...]: beam search tiles them to
the beams at the start and gathers them by each live beam's parent at every step. An entry
under the key `PER_SENTENCE` (at any depth of the cache's dicts) has one row per sentence
instead, its beams side by side within it, and is written by the step at each beam's own slot;
the search never tiles or reorders it, and a compaction (`t2t_lite.search.compaction`) keeps
the kept sentences' rows of it. A step that reads such an entry follows each beam's history
itself, from a per-row tensor of its cache that the search does reorder (the Transformer's
beams cache, `MultiHeadAttention.empty_cache(..., beams=k)`, and its ancestry).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

PER_SENTENCE = "per_sentence"


def map_rows(fn: Callable[[tf.Tensor], tf.Tensor], cache: Any) -> Any:
    """`fn` applied to every per-hypothesis tensor of `cache`; `PER_SENTENCE` entries kept."""
    return _map(fn, cache, per_sentence=False, inside=False)


def map_sentences(fn: Callable[[tf.Tensor], tf.Tensor], cache: Any) -> Any:
    """`fn` applied to every tensor under a `PER_SENTENCE` key of `cache`; the rest kept."""
    return _map(fn, cache, per_sentence=True, inside=False)


def _map(fn, cache, per_sentence: bool, inside: bool):
    if isinstance(cache, dict):
        return {
            key: _map(fn, value, per_sentence, inside or key == PER_SENTENCE)
            for key, value in cache.items()
        }
    if isinstance(cache, (list, tuple)) and not hasattr(cache, "_fields"):
        return type(cache)(_map(fn, value, per_sentence, inside) for value in cache)
    if inside != per_sentence:
        return cache
    return tf.nest.map_structure(fn, cache)
