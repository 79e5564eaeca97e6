"""The sweep's records of each run, kept in the run's output_dir beside t2t-train's files
(what they mean for the next attempt: resume.py).

  sweep_state.json  written while the run trains: the run's identity, the attempts so far and
                    the minutes of training they spent (the wall time of each t2t-train process)
  sweep_done.json   written once, atomically, after the run finished training and was
                    evaluated: the identity, the evaluation and the machine it ran on
                    (runtime/cpu.py); a run with it is never trained or evaluated again
  train.log         what each t2t-train process printed, attempts appended
"""

from __future__ import annotations

import json
import os
from typing import Any

from t2t_lite.runtime import atomic_io
from t2t_lite.runtime.cpu import describe_machine
from t2t_lite.sweep.plan import PlannedRun, SweepConfig

STATE_FILE = "sweep_state.json"
DONE_FILE = "sweep_done.json"
LOG_FILE = "train.log"


def read_json(path: str) -> dict[str, Any] | None:
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as e:  # written atomically, so only by hand
            raise ValueError(f"{path} is not JSON ({e}); delete it to redo the run") from None


def read_done(run: PlannedRun) -> dict[str, Any] | None:
    """The finished run's record (identity, evaluation, minutes), or None."""
    return read_json(os.path.join(run.output_dir, DONE_FILE))


def read_state(run: PlannedRun) -> dict[str, Any] | None:
    return read_json(os.path.join(run.output_dir, STATE_FILE))


def write_state(run: PlannedRun, config: SweepConfig, attempts: int, minutes: float) -> None:
    atomic_io.write_json(
        os.path.join(run.output_dir, STATE_FILE),
        {"identity": run.identity(config), "attempts": attempts, "minutes_spent": minutes},
    )


def write_done(run: PlannedRun, config: SweepConfig, evaluation: dict, minutes: float) -> None:
    atomic_io.write_json(
        os.path.join(run.output_dir, DONE_FILE),
        {
            "identity": run.identity(config),
            "evaluation": evaluation,
            "minutes_spent": minutes,
            "machine": describe_machine(),
        },
    )
