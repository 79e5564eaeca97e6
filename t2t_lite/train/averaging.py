"""Checkpoint averaging of a run (the paper's last 5 checkpoints for base, 20 for big)."""

from __future__ import annotations

import os

from t2t_lite.decode.run import build_model
from t2t_lite.runtime import checkpoints
from t2t_lite.runtime.run_info import AVERAGED_DIR, CHECKPOINT_DIR, RunInfo


def average_run(
    output_dir: str, num_last: int = 5, min_minutes: float = 0.0, averaged_dir: str | None = None
) -> tuple[str, list[str]]:
    """Averages the newest `num_last` checkpoints of output_dir/checkpoints (written at least
    `min_minutes` apart) into `averaged_dir` (default output_dir/averaged).

    Returns:
      (the averaged checkpoint's path, the checkpoints averaged).
    """
    model = build_model(RunInfo.load(output_dir))
    source = os.path.join(output_dir, CHECKPOINT_DIR)
    paths = checkpoints.select_for_averaging(source, num_last, min_minutes)
    target = averaged_dir or os.path.join(output_dir, AVERAGED_DIR)
    return checkpoints.average_checkpoints(model, paths, target), paths
