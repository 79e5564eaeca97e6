"""The decisions a budget run takes from the steps it expects (the peak's rate factor,
train/budget.py; dropout, train/late_dropout.py), revised when that count moves.

A decision is taken once the step rate is measured over a full window; the count it was taken
at is its basis. When the machine gets busier or quieter the expected count moves; once it is
more than REVISE_FRACTION away from the basis, the decision is taken again from the new count
(and the new count becomes the basis), so a run ends with the decisions of the steps it really
makes, to within that fraction. Smaller moves, the noise of a measured rate, change nothing; a
revision of the rate factor moves it by a few hundredths at most. Every decision and
revision is logged and kept, in order, in the decision's JSON file in the run directory.

The basis lives in the process: a resumed run takes its first settled count as the basis and
revises the restored decision at once if that count calls for another.
"""

from __future__ import annotations

import json
import os

from t2t_lite.runtime import atomic_io

# How far (a share of the basis) the expected steps move before a decision is taken again.
REVISE_FRACTION = 0.1


def moved(basis: int | None, expected: int) -> bool:
    """Whether `expected` is more than REVISE_FRACTION away from `basis` (None: no basis yet)."""
    return basis is None or abs(expected - basis) > REVISE_FRACTION * basis


def record(path: str, entry: dict) -> None:
    """Writes `entry` as the current decision in `path`, with every decision so far (those of
    earlier processes of the run included) under "decisions"."""
    earlier = []
    if os.path.isfile(path):
        try:
            with open(path, encoding="utf-8") as f:
                previous = json.load(f)
            earlier = previous.get("decisions") or [
                {k: v for k, v in previous.items() if k != "decisions"}
            ]
        except (OSError, ValueError, AttributeError):
            earlier = []  # a damaged record: start the history again
    atomic_io.write_json(path, {**entry, "decisions": [*earlier, entry]})
