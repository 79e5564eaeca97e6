"""The frozen search settings that decoding, export and serving share.

One type for every place that searches: a problem's suggested defaults (`Problem.decode_defaults`),
what `t2t-decode` and `t2t-visualize` search with, and what `t2t-export` fixes into the SavedModel.
`Run.restore` resolves them once (given values over the problem's defaults) so decode and export
can never disagree.
"""

from __future__ import annotations

import dataclasses
from typing import Any


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
    """

    beam_size: int = 4
    alpha: float = 0.6
    extra_length: int = 50
    nbest: int = 1
    constrained: bool = False
    max_input_length: int = 0

    def override(self, **given: Any) -> SearchSettings:
        """These settings with the given values that are not None; unknown names are an error
        that lists the known ones."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(given) - names)
        if unknown:
            raise ValueError(f"unknown search settings {unknown}; known: {sorted(names)}")
        return dataclasses.replace(self, **{k: v for k, v in given.items() if v is not None})

    def check(self, max_positions: int | None = None) -> None:
        """Raises ValueError naming the flag that is out of range."""
        if self.beam_size < 1:
            raise ValueError(f"--beam_size must be at least 1, got {self.beam_size}")
        if not 1 <= self.nbest <= self.beam_size:
            raise ValueError(f"--nbest={self.nbest} must be in [1, --beam_size={self.beam_size}]")
        if self.alpha < 0:
            raise ValueError(f"--alpha must be >= 0, got {self.alpha}")
        if self.extra_length < 0:
            raise ValueError(f"--extra_length must be >= 0, got {self.extra_length}")
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
        return dataclasses.asdict(self)
