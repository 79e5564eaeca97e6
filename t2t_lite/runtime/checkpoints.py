"""Training checkpoints: save, resume with fall-back, best-on-metric, and weight averaging.

tf.train.CheckpointManager writes `ckpt-<step>.index` / `.data-*` and then rewrites the small
`checkpoint` state file atomically, so a kill during a save leaves the previous checkpoint usable.
On resume the newest readable checkpoint wins; unreadable newer ones are skipped with a warning
naming the file, and if checkpoints exist but none can be read, training stops with an error
rather than restarting from step 0.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import time

import numpy as np
import tensorflow as tf
from absl import logging

from t2t_lite.runtime import atomic_io

STATE_FILE = "checkpoint"
BEST_DIR = "best"
BEST_INFO = "best.json"


class CheckpointError(RuntimeError):
    """A checkpoint could not be written or read; the message names the files."""


def checkpoint_step(path: str) -> int:
    """The number in `.../ckpt-<number>`."""
    match = re.search(r"-(\d+)$", path)
    if not match:
        raise ValueError(f"{path} is not a path of the form <dir>/ckpt-<number>")
    return int(match.group(1))


def list_checkpoints(directory: str) -> list[str]:
    """Checkpoint prefixes in `directory`, oldest first: those the state file lists, and any
    `ckpt-N.index` beside them (the state file may be lost or damaged)."""
    prefixes = {p[: -len(".index")] for p in glob.glob(os.path.join(directory, "ckpt-*.index"))}
    state_path = os.path.join(directory, STATE_FILE)
    if os.path.exists(state_path):
        # TensorFlow logs a parse error and returns None for a damaged state file.
        state = tf.train.get_checkpoint_state(directory)
        if state is None and os.path.getsize(state_path):
            raise CheckpointError(f"checkpoint state file {state_path} is unreadable")
        for path in state.all_model_checkpoint_paths if state else []:
            prefixes.add(path if os.path.isabs(path) else os.path.join(directory, path))
    return sorted(prefixes, key=checkpoint_step)


def _set_aside_bad_state(directory: str) -> None:
    """Renames an unparsable state file out of the way (CheckpointManager cannot start with it)."""
    try:
        list_checkpoints(directory)
    except CheckpointError as e:
        state_path = os.path.join(directory, STATE_FILE)
        aside = f"{state_path}.corrupt-{int(time.time())}"
        os.replace(state_path, aside)
        logging.warning("%s; moved it to %s and looking for ckpt-*.index files instead", e, aside)


class CheckpointKeeper:
    """Saves and restores a run's tf.train.Checkpoint in `directory`, keeping the last
    `max_to_keep` (and, with `keep_every_minutes`, one per that many minutes forever).

    In a multi-worker run every worker must save (variables may need collectives to be read);
    only the chief writes to `directory`, the others to a scratch folder removed afterwards.
    """

    def __init__(
        self,
        checkpoint: tf.train.Checkpoint,
        directory: str,
        max_to_keep: int,
        keep_every_minutes: float = 0.0,
        chief: bool = True,
        worker_id: int = 0,
    ):
        self.checkpoint = checkpoint
        self.directory = directory
        self.chief = chief
        target = directory if chief else os.path.join(directory, f".worker-{worker_id}")
        os.makedirs(target, exist_ok=True)
        if chief:
            _set_aside_bad_state(directory)
        self.manager = tf.train.CheckpointManager(
            checkpoint,
            target,
            max_to_keep=max_to_keep,
            keep_checkpoint_every_n_hours=(keep_every_minutes / 60.0) or None,
        )

    def restore_latest(self) -> str | None:
        """Restores the newest readable checkpoint; returns its path, or None if there is none."""
        candidates = list_checkpoints(self.directory)
        failures = []
        for path in reversed(candidates):
            try:
                self.checkpoint.restore(path).assert_existing_objects_matched()
            except Exception as e:  # noqa: BLE001  (damaged files raise OpError, IndexError, ...)
                reason = str(e).strip().splitlines()[0][:300]
                logging.warning(
                    "checkpoint %s is unreadable (%s); trying an older one", path, reason
                )
                failures.append(f"{path}: {reason}")
                continue
            if failures:
                logging.warning("resumed from %s, skipping %d unreadable", path, len(failures))
            return path
        if failures:
            raise CheckpointError(
                f"no readable checkpoint in {self.directory}, refusing to restart from step 0:\n"
                + "\n".join(failures)
            )
        return None

    def save(self, step: int) -> str:
        """Writes ckpt-<step>; a failed write is a CheckpointError and leaves older ones intact."""
        previous = self.manager.latest_checkpoint
        try:
            path = self.manager.save(checkpoint_number=step)
        except (tf.errors.OpError, OSError) as e:
            raise CheckpointError(
                f"could not write the checkpoint of step {step} in {self.manager.directory} "
                f"(disk full?): {str(e).strip()[:500]}. The previous checkpoint "
                f"{previous or '(none)'} is intact; free space and rerun the same command."
            ) from e
        if not self.chief:
            shutil.rmtree(self.manager.directory, ignore_errors=True)
        return path


class BestKeeper:
    """Keeps the model of the best evaluation so far in output_dir/best/ (key "model"), with
    best/best.json recording the step and metric value. Every worker tracks the best value (so
    early stopping agrees everywhere); only the one with `save` writes."""

    def __init__(
        self, model, output_dir: str, metric: str, higher_is_better: bool, save: bool = True
    ):
        self.directory = os.path.join(output_dir, BEST_DIR)
        self.metric = metric
        self.higher_is_better = higher_is_better
        self.save = save
        self.manager = None
        if save:
            self.manager = tf.train.CheckpointManager(
                tf.train.Checkpoint(model=model), self.directory, max_to_keep=1
            )
        self.best = self._load()

    def _load(self) -> float | None:
        path = os.path.join(self.directory, BEST_INFO)
        if not os.path.exists(path):
            return None
        with open(path) as f:
            info = json.load(f)
        if info.get("metric") != self.metric:
            logging.warning(
                "%s records %s, not %s; starting afresh", path, info.get("metric"), self.metric
            )
            return None
        return float(info["value"])

    def is_better(self, value: float) -> bool:
        if self.best is None:
            return True
        return value > self.best if self.higher_is_better else value < self.best

    def update(self, step: int, metrics: dict[str, float]) -> bool:
        """Saves the model if `metrics[self.metric]` beats the best so far; True if it did."""
        value = metrics[self.metric]
        if not np.isfinite(value) or not self.is_better(value):
            return False
        if self.save:
            self.manager.save(checkpoint_number=step)
            atomic_io.write_json(
                os.path.join(self.directory, BEST_INFO),
                {"metric": self.metric, "value": value, "step": step, "metrics": metrics},
            )
        self.best = value
        return True


# --- averaging ----------------------------------------------------------------------------------


def select_for_averaging(directory: str, num: int, min_minutes: float = 0.0) -> list[str]:
    """The newest `num` checkpoints of `directory`, each written at least `min_minutes` before
    the next one chosen (by file time), oldest first."""
    if num < 1:
        raise ValueError(f"--num_last must be at least 1, got {num}")
    chosen: list[str] = []
    last_time = None
    for path in reversed(list_checkpoints(directory)):
        if not os.path.exists(path + ".index"):
            logging.warning("skipping %s: %s.index is missing", path, path)
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


def average_checkpoints(model, paths: list[str], output_directory: str) -> str:
    """Restores each checkpoint's "model" into `model`, averages the weights (in float64) and
    writes them to `output_directory` as ckpt-<step of the newest>; returns that path."""
    if not paths:
        raise ValueError("average_checkpoints needs at least one checkpoint")
    sums = None
    for i, path in enumerate(paths):
        tf.train.Checkpoint(model=model).restore(
            path
        ).expect_partial().assert_existing_objects_matched()
        values = [w.numpy().astype(np.float64) for w in model.weights]
        sums = values if sums is None else [s + v for s, v in zip(sums, values, strict=True)]
        logging.info("averaging %d/%d: %s", i + 1, len(paths), path)
    for weight, total in zip(model.weights, sums, strict=True):
        weight.assign((total / len(paths)).astype(weight.dtype))
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=model), output_directory, max_to_keep=1
    )
    path = manager.save(checkpoint_number=checkpoint_step(paths[-1]))
    atomic_io.write_json(
        os.path.join(output_directory, "averaged.json"), {"checkpoints": paths, "output": path}
    )
    return path
