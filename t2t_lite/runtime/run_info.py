"""What a training run records in `output_dir/hparams.json`, and how decode and export read it back.

Layout of an output_dir:
  hparams.json        RunInfo: problem, data_dir, hparams set name, resolved hparams, vocab size
  checkpoints/        tf.train.CheckpointManager checkpoints; the model is stored under key "model"
  last_checkpoint.json  the last checkpoint t2t-train saved (a run whose checkpoints are all gone
                      is refused rather than restarted from step 0)
  averaged/           checkpoints written by t2t-avg-checkpoints (same key)
  final/              the model a budget run kept at its end, and choice.json saying why
                      (t2t_lite.train.final_choice)
  budget.json         a budget run's minutes spent and steps expected (t2t_lite.train.budget)
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os

import tensorflow as tf

from t2t_lite.hparams import HParams
from t2t_lite.runtime import atomic_io
from t2t_lite.runtime.checkpoints import (
    CheckpointError,
    list_checkpoints,
    restore_first_readable,
    unreadable_reason,
)

RUN_INFO_FILE = "hparams.json"
CHECKPOINT_DIR = "checkpoints"
LAST_CHECKPOINT_FILE = "last_checkpoint.json"
AVERAGED_DIR = "averaged"
FINAL_DIR = "final"


@dataclasses.dataclass(frozen=True)
class RunInfo:
    """The resolved description of a training run; decode and export never re-derive it."""

    problem: str
    data_dir: str
    hparams_set: str
    hparams: HParams
    vocab_size: int
    # The leading ids the model outputs (problem metadata); 0: the whole vocabulary.
    output_vocab_size: int = 0

    def to_dict(self) -> dict:
        values = dataclasses.asdict(self)
        values["hparams"] = self.hparams.to_dict()
        return values

    def save(self, output_dir: str) -> str:
        """Writes output_dir/hparams.json atomically; returns its path."""
        path = os.path.join(output_dir, RUN_INFO_FILE)
        atomic_io.write_json(path, self.to_dict())
        return path

    @classmethod
    def load(cls, output_dir: str) -> RunInfo:
        path = os.path.join(output_dir, RUN_INFO_FILE)
        if not os.path.exists(path):
            raise FileNotFoundError(
                f"{path} does not exist: --output_dir must be a directory written by t2t-train"
            )
        try:
            with open(path) as f:
                values = json.load(f)
            values["hparams"] = HParams.from_dict(values["hparams"])
            return cls(**values)
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path} is not a valid run description: {e}") from None

    def diff(self, other: RunInfo) -> list[str]:
        """Human-readable differences, e.g. ["hparams.d_model: 512 != 256"]."""
        mine, theirs = _flatten(self.to_dict()), _flatten(other.to_dict())
        return [
            f"{k}: {mine.get(k)!r} != {theirs.get(k)!r}"
            for k in sorted(set(mine) | set(theirs))
            if mine.get(k) != theirs.get(k)
        ]


def _flatten(values: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in values.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


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
    folders = [os.path.join(output_dir, d) for d in (FINAL_DIR, AVERAGED_DIR, CHECKPOINT_DIR)]
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
