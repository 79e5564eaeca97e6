"""Training checkpoints: save, resume with fall-back, best-on-metric, and weight averaging.

tf.train.CheckpointManager writes `ckpt-<step>.index` / `.data-*` and then rewrites the small
`checkpoint` state file atomically, so a kill during a save leaves the previous checkpoint usable.
On resume the newest readable checkpoint wins; unreadable newer ones are skipped with a warning
naming the file, and if checkpoints exist but none can be read, training stops with an error
rather than restarting from step 0. `restore_first_readable` is that fall-back, shared by training
(`CheckpointKeeper.restore_latest`) and by decode and export (`restore_checkpoint`, below).
A run whose checkpoints were all deleted is refused (`last_checkpoint.json` records the last
save), and a save's `ckpt-N_temp/` folder left by a killed run is removed by the next.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator, Sequence

import numpy as np
from absl import logging

from t2t_lite.extras import lazy_import
from t2t_lite.run.layout import BEST_DIR, BEST_INFO, MODEL_DIRS, STATE_FILE
from t2t_lite.runtime import atomic_io

tf = lazy_import("tensorflow")

_CKPT_NAME = re.compile(r"(^|/)ckpt-\d+$")


class CheckpointError(OSError):
    """A checkpoint could not be written or read; the message names the files. An OSError, so
    that the commands report it as one line like any other unreadable file."""


def checkpoint_step(path: str) -> int:
    """The number in `.../ckpt-<number>`."""
    match = re.search(r"-(\d+)$", path)
    if not match:
        raise ValueError(f"{path} is not a path of the form <dir>/ckpt-<number>")
    return int(match.group(1))


def list_checkpoints(directory: str, strict: bool = True) -> list[str]:
    """Checkpoint prefixes in `directory`, oldest first: those the state file lists, and any
    `ckpt-N.index` or `ckpt-N.data-*` beside them (the state file may be lost or damaged, and a
    checkpoint may have lost its index). An unparsable state file is a CheckpointError naming
    it, or with `strict=False` a warning (the files beside it are listed)."""
    files = glob.glob(os.path.join(directory, "ckpt-*.index"))
    files += glob.glob(os.path.join(directory, "ckpt-*.data-*"))
    prefixes = {os.path.normpath(re.sub(r"\.(index|data-.*)$", "", f)) for f in files}
    try:
        prefixes.update(os.path.normpath(p) for p in _state_file_paths(directory))
    except CheckpointError as e:
        if strict:
            raise
        logging.warning("%s; using the ckpt-* files beside it", e)
    return sorted((p for p in prefixes if _CKPT_NAME.search(p)), key=checkpoint_step)


def _state_file_paths(directory: str) -> list[str]:
    """The paths the `checkpoint` state file lists ([] without one); a CheckpointError naming
    the file when it cannot be parsed (garbage text, bytes that are not UTF-8)."""
    state_path = os.path.join(directory, STATE_FILE)
    if not os.path.exists(state_path):
        return []
    try:
        # TensorFlow logs a parse error and returns None; bytes that are not UTF-8 raise.
        state = tf.train.get_checkpoint_state(directory)
    except (ValueError, tf.errors.OpError) as e:
        reason = f"{type(e).__name__}: {str(e)[:200]}"
        raise CheckpointError(
            f"checkpoint state file {state_path} is unreadable ({reason})"
        ) from None
    if state is None:
        if os.path.getsize(state_path):
            raise CheckpointError(f"checkpoint state file {state_path} is unreadable")
        return []
    # (TensorFlow has joined relative entries to `directory` already.)
    return [p for p in [*state.all_model_checkpoint_paths, state.model_checkpoint_path] if p]


def _set_aside_bad_state(directory: str) -> None:
    """Renames an unparsable state file out of the way (CheckpointManager cannot start with it)."""
    try:
        _state_file_paths(directory)
    except CheckpointError as e:
        state_path = os.path.join(directory, STATE_FILE)
        aside = f"{state_path}.corrupt-{int(time.time())}"
        os.replace(state_path, aside)
        logging.warning("%s; moved it to %s and looking for ckpt-* files instead", e, aside)


def unreadable_reason(path: str, error: BaseException) -> str:
    """Which file of checkpoint `path` is bad, and TensorFlow's words for it, in one line."""
    data = sorted(glob.glob(glob.escape(path) + ".data-*"))
    if not os.path.exists(path + ".index"):
        return f"{path}.index is missing"
    if not data:
        return f"its data file {path}.data-00000-of-00001 is missing"
    detail = f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0][:300]}"
    if isinstance(error, AssertionError):  # read, but not the variables of this model
        return f"{path} does not hold this model's variables ({detail})"
    try:
        tf.train.load_checkpoint(path)  # reads the index only
    except Exception:  # noqa: BLE001  (any failure here means the index is bad)
        return f"{path}.index is damaged ({detail})"
    return f"{' or '.join(data)} is damaged or truncated ({detail})"


def restore_first_readable(
    restore: Callable[[str], object], candidates: Sequence[str], where: str, refusal: str = ""
) -> str | None:
    """Calls `restore(path)` on each candidate in turn (newest first) until one succeeds and
    returns its path; each failure is a warning naming the bad file. None if there are no
    candidates; a CheckpointError listing every failure (after `refusal`, e.g. "refusing to
    restart from step 0") if none could be read."""
    failures = []
    for path in candidates:
        try:
            restore(path)
        except Exception as e:  # noqa: BLE001  (damaged files raise OpError, IndexError, ...)
            reason = unreadable_reason(path, e)
            logging.warning("checkpoint %s is unreadable: %s; trying an older one", path, reason)
            failures.append((path, reason))
            continue
        if failures:
            logging.warning(
                "restored %s, the newest readable checkpoint; skipped %d unreadable newer: %s",
                path,
                len(failures),
                ", ".join(bad for bad, _ in failures),
            )
        return path
    if failures:
        raise CheckpointError(
            f"no readable checkpoint in {where}{', ' + refusal if refusal else ''}: "
            + "; ".join(reason for _, reason in failures)  # each names its file
        )
    return None


class CheckpointKeeper:
    """Saves and restores a run's tf.train.Checkpoint in `directory`, keeping the last
    `max_to_keep` (and, with `keep_every_minutes`, one per that many minutes forever).

    `record_file` (output_dir/last_checkpoint.json for t2t-train) remembers the last save, so a
    run whose checkpoints were all deleted is refused rather than restarted from step 0.
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
        record_file: str | None = None,
    ):
        self.checkpoint = checkpoint
        self.directory = directory
        self.chief = chief
        self.record_file = record_file
        target = directory if chief else os.path.join(directory, f".worker-{worker_id}")
        os.makedirs(target, exist_ok=True)
        if chief:
            _set_aside_bad_state(directory)
            for stale in atomic_io.remove_stale_folders(directory, "ckpt-*_temp"):
                logging.warning("removed %s, left by an interrupted save", stale)
        self.manager = tf.train.CheckpointManager(
            checkpoint,
            target,
            max_to_keep=max_to_keep,
            keep_checkpoint_every_n_hours=(keep_every_minutes / 60.0) or None,
        )

    def restore_latest(self) -> str | None:
        """Restores the newest readable checkpoint and returns its path (unreadable newer ones
        are skipped with a warning naming the file); None if there is none and none was ever
        saved. A CheckpointError naming the files if none is readable or all were deleted."""
        path = restore_first_readable(
            lambda p: self.checkpoint.restore(p).assert_existing_objects_matched(),
            list_checkpoints(self.directory, strict=False)[::-1],
            self.directory,
            refusal="refusing to restart from step 0",
        )
        if path is None and self.record_file and os.path.exists(self.record_file):
            raise CheckpointError(
                f"{self.directory} holds no checkpoint, but {self.record_file} records "
                f"{_recorded(self.record_file)} saved there: refusing to restart from step 0. "
                f"Put the checkpoints back, or delete {self.record_file} to start over at step 0."
            )
        return path

    def save(self, step: int) -> str:
        """Writes ckpt-<step>; a failed write is a CheckpointError and leaves older ones intact."""
        previous = self.manager.latest_checkpoint
        try:
            path = self.manager.save(checkpoint_number=step)
            if self.chief and self.record_file:
                atomic_io.write_json(self.record_file, {"checkpoint": path, "step": step})
        except (tf.errors.OpError, OSError) as e:
            raise CheckpointError(
                f"could not write the checkpoint of step {step} in {self.manager.directory} "
                f"(disk full?): {str(e).strip()[:500]}. The previous checkpoint "
                f"{previous or '(none)'} is intact; free space and rerun the same command."
            ) from e
        if not self.chief:
            shutil.rmtree(self.manager.directory, ignore_errors=True)
        return path


def _recorded(record_file: str) -> str:
    """What a last_checkpoint.json says, for messages (its damage does not matter here)."""
    try:
        with open(record_file) as f:
            return str(json.load(f)["checkpoint"])
    except (OSError, ValueError, KeyError, TypeError):
        return "a checkpoint"


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
            os.makedirs(self.directory, exist_ok=True)
            _set_aside_bad_state(self.directory)
            self.manager = tf.train.CheckpointManager(
                tf.train.Checkpoint(model=model), self.directory, max_to_keep=1
            )
        self.best = self._load()

    def _load(self) -> float | None:
        path = os.path.join(self.directory, BEST_INFO)
        if not os.path.exists(path):
            return None
        try:
            with open(path, encoding="utf-8") as f:
                info = json.load(f)
            float(info["value"])
        except (ValueError, KeyError, TypeError) as e:  # truncated, not JSON, not UTF-8
            aside = f"{path}.corrupt-{int(time.time())}"
            if self.save:
                os.replace(path, aside)
            logging.warning(
                "%s is unreadable (%s: %s)%s; the best %s so far is unknown, so the next "
                "evaluation replaces the model in %s",
                path,
                type(e).__name__,
                str(e)[:200],
                f"; moved it to {aside}" if self.save else "",
                self.metric,
                self.directory,
            )
            return None
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
            with saving(self.directory, step, self.manager.checkpoint):
                self.manager.save(checkpoint_number=step)
                atomic_io.write_json(
                    os.path.join(self.directory, BEST_INFO),
                    {"metric": self.metric, "value": value, "step": step, "metrics": metrics},
                )
        self.best = value
        return True


def restore_model_weights(model, path: str) -> None:
    """Restores the "model" part of checkpoint `path` into `model` (a training checkpoint's
    optimizer state is left unread); an error if any of the model's weights is missing."""
    tf.train.Checkpoint(model=model).restore(
        path
    ).expect_partial().assert_existing_objects_matched()


def save_model_checkpoint(model, directory: str, step: int) -> str:
    """Writes `model` alone (key "model") to `directory` as ckpt-<step>, the only checkpoint
    kept there; returns its path."""
    checkpoint = tf.train.Checkpoint(model=model)
    manager = tf.train.CheckpointManager(checkpoint, directory, max_to_keep=1)
    with saving(directory, step, checkpoint):
        return manager.save(checkpoint_number=step)


@contextlib.contextmanager
def saving(directory: str, step: int, checkpoint) -> Iterator[None]:
    """A model write into `directory` (best/, averaged/, final/): a failure (a full disk) is a
    CheckpointError naming the folder, the space it needs and the space free; its half-written
    `ckpt-<step>_temp/` is removed, and the checkpoint there before stays as it was."""
    try:
        yield
    except (tf.errors.OpError, OSError) as error:
        shutil.rmtree(os.path.join(directory, f"ckpt-{step}_temp"), ignore_errors=True)
        needed = sum(v.numpy().nbytes for v in tf.nest.flatten(_variables(checkpoint)))
        free = atomic_io.free_megabytes(directory)
        raise CheckpointError(
            f"could not write ckpt-{step} in {directory}: {atomic_io.error_line(error)} (it "
            f"needs about {needed / 2**20:.1f} MB; {free:.1f} MB are free there). What was in "
            f"{directory} before is intact; free space and rerun the same command."
        ) from None


def _variables(checkpoint) -> list:
    model = getattr(checkpoint, "model", None)
    return list(model.weights) if model is not None else []


# --- the one way back: which checkpoint of a run a command restores -------------------------


def checkpoint_candidates(output_dir: str, checkpoint: str | None = None) -> tuple[list[str], str]:
    """(checkpoint paths to try in turn, where they are, for messages).

    Given `checkpoint` (a path prefix, or a folder: its newest), that one alone. By default
    every checkpoint of output_dir/final, output_dir/averaged and output_dir/checkpoints,
    newest step first within each, the folder whose newest checkpoint was written last first.
    Nothing is read but the folder listings and state files (a damaged state file is a
    warning).
    """
    if checkpoint:
        if not os.path.isdir(checkpoint):
            return [checkpoint], f"--checkpoint={checkpoint}"
        return list_checkpoints(checkpoint, strict=False)[-1:], f"--checkpoint={checkpoint}"
    folders = [os.path.join(output_dir, d) for d in MODEL_DIRS]
    listed = [list_checkpoints(f, strict=False)[::-1] for f in folders if os.path.isdir(f)]
    listed.sort(key=lambda paths: _written(paths[0]) if paths else 0.0, reverse=True)
    return [path for paths in listed for path in paths], " or ".join(folders)


def _written(prefix: str) -> float:
    """When checkpoint `prefix` was written: its newest file's modification time."""
    files = glob.glob(glob.escape(prefix) + ".*")
    return max((os.path.getmtime(f) for f in files), default=0.0)


def resolve_checkpoint(output_dir: str, checkpoint: str | None = None) -> str:
    """The checkpoint `restore_checkpoint` tries first (not read here: it may be unreadable)."""
    candidates, where = checkpoint_candidates(output_dir, checkpoint)
    if not candidates:
        raise FileNotFoundError(f"no checkpoint in {where}")
    return candidates[0]


def restore_checkpoint(
    checkpoint_object: tf.train.Checkpoint, output_dir: str, checkpoint: str | None = None
) -> str:
    """Restores into `checkpoint_object` (e.g. tf.train.Checkpoint(model=model)) and returns the
    path restored: `checkpoint` if given (an error naming it if unreadable, never another one),
    else the newest readable of `checkpoint_candidates`, unreadable newer ones skipped with a
    warning naming the bad file. A CheckpointError naming the files when none can be read."""
    candidates, where = checkpoint_candidates(output_dir, checkpoint)
    if not candidates:
        raise CheckpointError(
            f"no checkpoint in {where}" + ("" if checkpoint else ": has t2t-train saved one?")
        )

    def restore(path: str) -> None:
        checkpoint_object.restore(path).expect_partial().assert_existing_objects_matched()

    if checkpoint:
        try:
            restore(candidates[0])
        except Exception as e:  # noqa: BLE001  (damaged files raise OpError, IndexError, ...)
            raise CheckpointError(
                f"--checkpoint={checkpoint}: {unreadable_reason(candidates[0], e)}"
            ) from None
        return candidates[0]
    return restore_first_readable(restore, candidates, where)  # type: ignore[return-value]
