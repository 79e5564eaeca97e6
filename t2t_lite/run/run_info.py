"""What a training run records in `output_dir/hparams.json` (`RunInfo`), read back by every
command that restores the run. The run directory's other files: `t2t_lite.run.layout`.
"""

from __future__ import annotations

import dataclasses
import json
import os

from t2t_lite.hparams import HParams
from t2t_lite.run.layout import RUN_INFO_FILE
from t2t_lite.runtime import atomic_io


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
    # The --usr_dir that registered the problem, absolute ("": a problem of t2t_lite's own).
    # Commands do not import it from here (a run folder may come from anyone): they name it
    # when the problem is unknown, so the user passes --usr_dir knowingly.
    usr_dir: str = ""

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
            if mine.get(k) != theirs.get(k) and k != "usr_dir"  # where, not what, the code is
        ]


def _flatten(values: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in values.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat
