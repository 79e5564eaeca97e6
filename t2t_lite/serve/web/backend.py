"""What `t2t-serve` needs from a model, and the two places a model comes from.

A `Backend` translates a batch of sentences with given search settings and returns the attention
of one sentence's best translation. `RunBackend` (`t2t_lite.serve.web.run_backend`) restores a
training run as `t2t-decode` does; `SavedModelBackend` (`t2t_lite.serve.web.saved_model_backend`)
calls the signatures of a `t2t-export` SavedModel, whose search settings are fixed at export.

Results are plain JSON-able values:

  translate --> one `Translation` per sentence, in order: {"source": the stripped sentence,
    "truncated": bool, "hypotheses": [{"text": str, "score": float}, ...] best first (none for
    an empty sentence)};
  attention --> {"source": [S] token labels, "target": [T] token labels, "translation": str,
    "encoder": [layers][heads][S][S], "decoder_self": [layers][heads][T][T],
    "decoder_cross": [layers][heads][T][S]} (weights rounded to 4 decimals).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from t2t_lite.hparams import SearchSettings

ATTENTION_KINDS = ("encoder", "decoder_self", "decoder_cross")
PARSING_METRIC = "parse_f1"  # the parsing problems' metric: their outputs are trees


@dataclasses.dataclass(frozen=True)
class Capabilities:
    """What a backend lets a request change and show.

    defaults: the search settings a request starts from (nbest 1, as t2t-decode);
    search_fixed: beam_size and alpha cannot change (a SavedModel's are fixed at export);
    max_nbest: the largest nbest (None: up to the beam size);
    attention: whether attention maps are available;
    parsing: whether outputs are bracketed trees (drawn as trees, scored with EVALB);
    guided: whether prefixes, constraints and details can be asked for, and up to which
      n-best (0: not at all; a SavedModel's guided signature gives the best only);
    streams: whether /api/translate_stream can search (a run; not a SavedModel).
    controls_nbest: the same for the repetition and length controls (None: with any n-best).
    """

    defaults: SearchSettings
    search_fixed: bool
    max_nbest: int | None
    attention: bool
    parsing: bool
    guided_nbest: int | None = None
    streams: bool = False
    controls_nbest: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "defaults": self.defaults.to_dict()}


class Backend(Protocol):
    """A model `t2t-serve` can serve; its methods are called from worker threads."""

    capabilities: Capabilities

    def facts(self) -> dict[str, Any]:
        """Problem, hparams set, step, checkpoint, vocabulary size, parameter count, ..."""
        ...

    def translate(
        self,
        sentences: Sequence[str],
        settings: SearchSettings,
        guides: Sequence[Any] | None = None,
        details: bool = False,
    ) -> list[dict]:
        """One `Translation` dict per sentence (see the module's docstring); `guides`, one
        `t2t_lite.decode.guidance.Guide` per sentence, or None; `details` adds each
        hypothesis's tokens, token_probs, alignment and confidence."""
        ...

    def attention(self, sentence: str, settings: SearchSettings) -> dict:
        """The attention of `sentence`'s best translation (a non-empty sentence)."""
        ...


def translation(source: str, truncated: bool, hypotheses: Sequence[tuple]) -> dict:
    """A `Translation` dict from (text, score) or (text, score, details dict) tuples;
    hypotheses with a non-finite score (empty n-best slots) are left out, as JSON has no
    infinity."""
    kept = [
        {"text": found[0], "score": float(found[1]), **(found[2] if len(found) > 2 else {})}
        for found in hypotheses
        if math.isfinite(float(found[1]))
    ]
    return {"source": source, "truncated": bool(truncated), "hypotheses": kept}


def details_json(tokens, token_probs, alignment: str, confidence: float) -> dict:
    """A hypothesis's details as the API gives them (probabilities rounded to 6 decimals)."""
    return {
        "tokens": [str(t) for t in tokens],
        "token_probs": [round(float(p), 6) for p in token_probs],
        "alignment": alignment,
        "confidence": round(float(confidence), 6),
    }


def attention_json(
    source: Sequence[str], target: Sequence[str], text: str, maps: dict[str, Any]
) -> dict:
    """Token labels, the translation and maps {kind: [layers, heads, q, k] arrays or lists of
    [heads, q, k]} --> the attention dict, weights rounded to 4 decimals."""
    result: dict[str, Any] = {"source": list(source), "target": list(target), "translation": text}
    for kind in ATTENTION_KINDS:
        weights = np.stack([np.asarray(layer, np.float32) for layer in maps[kind]])
        result[kind] = np.round(weights.astype(np.float64), 4).tolist()
    return result
