"""The facts about a restored run that a served model shows besides `Run.describe()`.

`t2t-export` stores them with each version (assets.extra/t2t_export.json), and `t2t-serve` shows
them on its page, so a SavedModel served on its own still tells what it was made from.
"""

from __future__ import annotations

from typing import Any

from t2t_lite.model.ensemble import parameter_count
from t2t_lite.run.checkpoints import checkpoint_step
from t2t_lite.run.run import Run


def run_facts(run: Run) -> dict[str, Any]:
    """{"step": the checkpoint's step (None for a path without one, several for an ensemble's
    comma-joined paths), "parameters": the parameter count, "metric": the problem's metric
    ("bleu", "parse_f1", ...)}."""
    steps = []
    for path in run.checkpoint.split(","):
        try:
            steps.append(checkpoint_step(path))
        except ValueError:
            steps.append(None)
    return {
        "step": steps[0] if len(steps) == 1 else steps,
        "parameters": parameter_count(run.model),
        "metric": run.problem.metric,
    }
