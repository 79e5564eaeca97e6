"""What a run folder says about the next attempt: done (skip it), resume (t2t-train carries
on from its checkpoints) or new, and how many minutes of its time budget are left.
"""

from __future__ import annotations

import os

from t2t_lite.run.layout import CHECKPOINT_DIR, RUN_INFO_FILE
from t2t_lite.sweep.plan import PlannedRun, SweepConfig
from t2t_lite.sweep.records import DONE_FILE, STATE_FILE, read_json, read_state

DONE, RESUME, NEW = "done", "resume", "new"


class ConflictingRecordError(ValueError):
    """A run folder holds a run with other settings than the sweep plans for it."""


def _check_identity(run: PlannedRun, config: SweepConfig, record: dict, path: str) -> None:
    recorded, planned = record.get("identity", {}), run.identity(config)
    differences = [
        f"{key}: {recorded.get(key)!r} != {planned[key]!r}"
        for key in planned
        if recorded.get(key) != planned[key]
    ]
    if differences:
        raise ConflictingRecordError(
            f"{path} (recorded != planned) is another run: {'; '.join(differences)}. Use the "
            f"flags it was run with, a new --sweep_dir, or delete {run.output_dir}"
        )


def run_status(run: PlannedRun, config: SweepConfig) -> str:
    """DONE (finished and evaluated), RESUME (trained before, not finished) or NEW.

    Raises ConflictingRecordError when the folder's records are of another run (other
    hparams, seed, budget, problem or data)."""
    for name in (DONE_FILE, STATE_FILE):
        path = os.path.join(run.output_dir, name)
        record = read_json(path)
        if record is not None:
            _check_identity(run, config, record, path)
            return DONE if name == DONE_FILE else RESUME
    if os.path.exists(os.path.join(run.output_dir, RUN_INFO_FILE)):
        return RESUME  # t2t-train started it, the sweep's record of it was lost
    return NEW


def plan_work(runs: list[PlannedRun], config: SweepConfig) -> list[tuple[PlannedRun, str]]:
    """Each run with its status; every folder is checked before anything trains."""
    return [(run, run_status(run, config)) for run in runs]


def has_checkpoint(output_dir: str) -> bool:
    return os.path.isfile(os.path.join(output_dir, CHECKPOINT_DIR, "checkpoint"))


def keeps_own_budget(output_dir: str) -> bool:
    """Whether t2t-train records the run's time budget itself (hparams.budget_minutes in
    hparams.json): it then resumes with the minutes left, and wants the same --train_minutes."""
    info = read_json(os.path.join(output_dir, RUN_INFO_FILE)) or {}
    return float(info.get("hparams", {}).get("budget_minutes", 0.0) or 0.0) > 0.0


def minutes_for_attempt(run: PlannedRun, config: SweepConfig) -> float | None:
    """The --train_minutes of the next t2t-train process, 0.0 when none is needed (the run
    spent its budget and has a checkpoint), or None without a time budget.

    A resumed run gets what is left of its budget, not a fresh one: the minutes its attempts
    spent are recorded (start-up included, so a resumed run trains a little less than an
    unbroken one). When t2t-train keeps the budget itself (`keeps_own_budget`), it gets the
    same --train_minutes and counts for itself.
    """
    if not config.train_minutes:
        return None
    if keeps_own_budget(run.output_dir):
        return config.train_minutes
    state = read_state(run) or {}
    left = config.train_minutes - float(state.get("minutes_spent", 0.0))
    if left > 0:
        return left
    # Spent without a checkpoint (every attempt failed before saving): nothing was trained.
    return 0.0 if has_checkpoint(run.output_dir) else config.train_minutes
