"""Checkpoint averaging of a run (the paper's last 5 checkpoints for base, 20 for big): the
chosen checkpoints' weights summed in float64 and written to output_dir/averaged with
averaged.json naming them."""

from __future__ import annotations

import os

import numpy as np
from absl import logging

from t2t_lite.model import lora
from t2t_lite.run import checkpoints
from t2t_lite.run.checkpoints import CheckpointError, checkpoint_step, list_checkpoints
from t2t_lite.run.layout import AVERAGED_DIR, AVERAGED_INFO, CHECKPOINT_DIR
from t2t_lite.run.run import build_model, load_run
from t2t_lite.runtime import atomic_io


def average_run(
    output_dir: str, num_last: int = 5, min_minutes: float = 0.0, averaged_dir: str | None = None
) -> tuple[str, list[str]]:
    """Averages the newest `num_last` checkpoints of output_dir/checkpoints (written at least
    `min_minutes` apart) into `averaged_dir` (default output_dir/averaged).

    Returns:
      (the averaged checkpoint's path, the checkpoints averaged).
    """
    info, record = load_run(output_dir)
    model = build_model(info)
    if record is not None:  # an adapter run: its checkpoints hold the adapter alone
        lora.enable(model, record.rank, record.alpha)
        model = lora.adapter_weights(model)
    source = os.path.join(output_dir, CHECKPOINT_DIR)

    def unreadable(path: str) -> str | None:  # a damaged checkpoint is passed over, as in train
        try:
            checkpoints.restore_model_weights(model, path)
        except Exception as error:  # noqa: BLE001  (damaged files raise OpError, IndexError, ...)
            return checkpoints.unreadable_reason(path, error)
        return None

    paths = select_for_averaging(source, num_last, min_minutes, unreadable)
    target = averaged_dir or os.path.join(output_dir, AVERAGED_DIR)
    return average_checkpoints(model, paths, target), paths


def select_for_averaging(
    directory: str, num: int, min_minutes: float = 0.0, unreadable=None
) -> list[str]:
    """The newest `num` checkpoints of `directory`, each written at least `min_minutes` before
    the next one chosen (by file time), oldest first. `unreadable(path)` (optional) says why a
    checkpoint cannot be read, or None; those are skipped with a warning naming the file. A
    damaged state file is passed over for the ckpt-* files beside it."""
    if num < 1:
        raise ValueError(f"--num_last must be at least 1, got {num}")
    chosen: list[str] = []
    last_time = None
    for path in reversed(list_checkpoints(directory, strict=False)):
        reason = f"{path}.index is missing" if not os.path.exists(path + ".index") else None
        reason = reason or (unreadable(path) if unreadable is not None else None)
        if reason:
            logging.warning("skipping %s: %s", path, reason)
            continue
        written = os.path.getmtime(path + ".index")
        if last_time is None or last_time - written >= 60.0 * min_minutes:
            chosen.append(path)
            last_time = written
        if len(chosen) == num:
            break
    if not chosen:
        raise CheckpointError(f"no checkpoints to average in {directory}")
    if len(chosen) < num:
        logging.warning("averaging %d checkpoints, fewer than the %d asked for", len(chosen), num)
    return chosen[::-1]


def average_into(model, paths: list[str]) -> None:
    """Restores each checkpoint's "model" into `model` in turn and leaves `model` holding the
    average of their weights (summed in float64)."""
    if not paths:
        raise ValueError("averaging needs at least one checkpoint")
    sums = None
    for i, path in enumerate(paths):
        checkpoints.restore_model_weights(model, path)
        values = [w.numpy().astype(np.float64) for w in model.weights]
        sums = values if sums is None else [s + v for s, v in zip(sums, values, strict=True)]
        logging.info("averaging %d/%d: %s", i + 1, len(paths), path)
    for weight, total in zip(model.weights, sums, strict=True):
        weight.assign((total / len(paths)).astype(weight.dtype))


def average_checkpoints(model, paths: list[str], output_directory: str) -> str:
    """Averages the checkpoints' weights into `model` and writes them to `output_directory` as
    ckpt-<step of the newest>; returns that path. What an interrupted average left there (a
    `ckpt-N_temp/` folder, a temporary averaged.json) is removed first, with a warning."""
    for stale in atomic_io.remove_stale_folders(output_directory, "ckpt-*_temp"):
        logging.warning("removed %s, left by an interrupted average", stale)
    target = output_directory
    if atomic_io.remove_stale_temporaries(target):
        logging.warning(
            "removed temporary files an interrupted average left in %s", output_directory
        )
    average_into(model, paths)
    path = checkpoints.save_model_checkpoint(model, output_directory, checkpoint_step(paths[-1]))
    atomic_io.write_json(
        os.path.join(output_directory, AVERAGED_INFO), {"checkpoints": paths, "output": path}
    )
    return path
