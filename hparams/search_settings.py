"""The frozen search settings that decoding, export and serving share.

One type for every place that searches: a problem's suggested defaults (`Problem.decode_defaults`),
what `t2t-decode` and `t2t-visualize` search with, and what `t2t-export` fixes into the SavedModel.
`Run.restore` resolves them once (given values over the problem's defaults) so decode and export
can never disagree.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

# What `--quantize` takes (t2t_lite.model.quantize): "none" keeps the checkpoint's float weights.
QUANTIZE_MODES = ("none", "int8")
# What a vocabulary shortlist's stored table keeps (t2t_lite.data.shortlist); `--shortlist`
# takes at most these many frequent ids and translations per source id.
KEEP_FREQUENT = 2000
KEEP_PER_SOURCE = 100
# The repetition and length controls (t2t_lite.search.controls), each a field and a flag.
CONTROL_FLAGS = ("no_repeat_ngram_size", "repetition_penalty", "min_length", "disable_unk")


@dataclasses.dataclass(frozen=True)
class SearchSettings:
    """How to search.

    beam_size: live hypotheses per sentence (1 with alpha 0 is greedy search);
    alpha: the GNMT length-penalty exponent (0: plain log-probability);
    extra_length: an output is at most its input length + extra_length tokens;
    nbest: hypotheses returned per input (t2t-decode's n-best lines, the export's nbest
      signature), at most beam_size;
    constrained: search only what the problem's `decode_constraint` allows (parsing: well-formed
      trees over the sentence's words);
    max_input_length: longer inputs (tokens, EOS included) are truncated; 0 means the model's
      `max_positions`.
    sampling: draw one hypothesis per input instead of beam search (`t2t-decode
      --sampling=temperature:0.8,top_k:40,seed:1`), from softmax(log-probs / temperature) cut to
      the top_k most likely tokens (0: all) and the nucleus of mass top_p; temperature 0 is
      greedy search. The same seed gives the same samples for the same batch. An export's
      `sample` signature uses temperature, top_k and top_p, with the seed as its input.
    shortlist: (frequent, per_source) of a vocabulary shortlist (`t2t-decode
      --shortlist=100,50`, t2t_lite.data.shortlist): each batch searched over the reserved
      ids, the `frequent` most frequent target ids and the `per_source` best translations of
      each of its source ids; (0, 0) searches the whole vocabulary.
    no_repeat_ngram_size, repetition_penalty, min_length, disable_unk: repetition and length
      controls (`t2t_lite.search.controls`): no N-gram twice in an output (0: off), the logits
      of tokens already in it divided by the penalty (1: off), EOS not before min_length
      tokens (0: off), the unknown piece never generated.
    patience: 0 stops a sentence's beam search when no live hypothesis can beat its n-best
      list (the exact bound, tensor2tensor's); P > 0 also stops it once ceil(P * beam_size)
      hypotheses have finished (the patience factor of Kasai et al. 2022, fairseq's and
      CTranslate2's rule at P = 1): faster, and at times a worse hypothesis.
    """

    beam_size: int = 4
    alpha: float = 0.6
    extra_length: int = 50
    nbest: int = 1
    constrained: bool = False
    max_input_length: int = 0
    sampling: bool = False
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0
    shortlist: tuple[int, int] = (0, 0)
    no_repeat_ngram_size: int = 0
    repetition_penalty: float = 1.0
    min_length: int = 0
    disable_unk: bool = False
    patience: float = 0.0

    def __post_init__(self):  # a JSON list (an export's settings) read back stays hashable
        object.__setattr__(self, "shortlist", tuple(self.shortlist))

    @property
    def shortlisted(self) -> bool:
        return self.shortlist != (0, 0)

    def override(self, **given: Any) -> SearchSettings:
        """These settings with the given values that are not None; unknown names are an error
        that lists the known ones."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(given) - names)
        if unknown:
            raise ValueError(f"unknown search settings {unknown}; known: {sorted(names)}")
        return dataclasses.replace(self, **{k: v for k, v in given.items() if v is not None})

    def without_alpha(self) -> SearchSettings:
        """These settings with alpha at 0: what a traced search depends on (alpha is an input
        of it, `Translator.with_alpha`), the key of a cache of traced searches."""
        return dataclasses.replace(self, alpha=0.0)

    def check(self, max_positions: int | None = None) -> None:
        """Raises ValueError naming the flag that is out of range."""
        if self.beam_size < 1:
            raise ValueError(f"--beam_size must be at least 1, got {self.beam_size}")
        if not 1 <= self.nbest <= self.beam_size:
            raise ValueError(f"--nbest={self.nbest} must be in [1, --beam_size={self.beam_size}]")
        if self.alpha < 0:
            raise ValueError(f"--alpha must be >= 0, got {self.alpha}")
        if not (math.isfinite(self.patience) and self.patience >= 0):
            raise ValueError(
                f"--patience must be a number >= 0 (0: the exact bound), got {self.patience}"
            )
        if self.extra_length < 0:
            raise ValueError(f"--extra_length must be >= 0, got {self.extra_length}")
        self._check_sampling()
        self.check_controls()
        frequent, per_source = self.shortlist
        if not (0 <= frequent <= KEEP_FREQUENT and 0 <= per_source <= KEEP_PER_SOURCE):
            raise ValueError(
                f"--shortlist takes at most {KEEP_FREQUENT} frequent ids and {KEEP_PER_SOURCE} "
                f"per source id, got {frequent},{per_source}"
            )
        if self.shortlisted and self.constrained:
            raise ValueError(
                "--shortlist with --constrained: a constrained search needs the whole "
                "vocabulary; pass --noconstrained or drop --shortlist"
            )
        # Positions past max_positions have no encoding: a graph would fail at serving time.
        limit = max_positions or self.max_input_length
        if self.max_input_length < 0 or self.max_input_length > limit:
            raise ValueError(
                f"--max_input_length must be in [1, {limit}] (the model's max_positions; 0 for "
                f"all of them), got {self.max_input_length}"
            )

    def input_limit(self, max_positions: int) -> int:
        """The longest input (tokens, EOS included) searched whole."""
        return self.max_input_length or max_positions

    def to_dict(self) -> dict[str, Any]:
        """The settings as JSON writes and reads them back (the shortlist a list)."""
        return {**dataclasses.asdict(self), "shortlist": list(self.shortlist)}

    def check_controls(self) -> None:
        """Raises ValueError naming the repetition or length control that is out of range."""
        if self.no_repeat_ngram_size < 0:
            raise ValueError(
                f"--no_repeat_ngram_size must be >= 0 (0: off), got {self.no_repeat_ngram_size}"
            )
        if not (math.isfinite(self.repetition_penalty) and self.repetition_penalty > 0):
            raise ValueError(
                f"--repetition_penalty must be a number > 0 (1: off), got {self.repetition_penalty}"
            )
        if self.min_length < 0:
            raise ValueError(f"--min_length must be >= 0 (0: off), got {self.min_length}")

    def _check_sampling(self) -> None:
        if self.temperature < 0 or self.top_k < 0 or not 0.0 < self.top_p <= 1.0:
            raise ValueError(
                "--sampling needs temperature >= 0, top_k >= 0 and 0 < top_p <= 1; got "
                f"temperature={self.temperature}, top_k={self.top_k}, top_p={self.top_p}"
            )
        if self.sampling and self.nbest != 1:
            raise ValueError(f"--sampling draws one hypothesis per input; got --nbest={self.nbest}")


SAMPLING_KEYS = {"temperature": float, "top_k": int, "top_p": float, "seed": int}


def parse_sampling(text: str) -> dict[str, Any]:
    """`temperature:0.8,top_k:40,seed:1` --> SearchSettings fields, `sampling` True; an empty
    string is sampling with the defaults (temperature 1). Names the bad part."""
    values: dict[str, Any] = {"sampling": True}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition(":")
        if not sep or key.strip() not in SAMPLING_KEYS:
            raise ValueError(
                f"--sampling: {part!r} is not name:value with a name in {sorted(SAMPLING_KEYS)}"
            )
        try:
            values[key.strip()] = SAMPLING_KEYS[key.strip()](value)
        except ValueError:
            raise ValueError(f"--sampling: {key.strip()} must be a number, got {value!r}") from None
    return values


def parse_shortlist(text: str) -> tuple[int, int]:
    """`--shortlist=FREQUENT,PER_SOURCE` such as `100,50` --> (100, 50); "0,0" or "" is none.
    Names the bad part."""
    if not text.strip():
        return (0, 0)
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise ValueError(
            f"--shortlist takes FREQUENT,PER_SOURCE, two counts such as 100,50; got {text!r}"
        )
    return int(parts[0]), int(parts[1])
