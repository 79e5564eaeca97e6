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

# Ids of the largest vocabulary a run may record (SentencePiece models stop far below).
MAX_VOCAB_SIZE = 16_777_216


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
    # SHA-256 of the vocabulary file the run trained with ("": a run written before it was
    # recorded, not checked); decode, export, serve and a resume refuse another vocabulary.
    vocab_sha256: str = ""
    # The problem options t2t-datagen wrote the data_dir with ({}: not known); a resume on a
    # data_dir generated with other options is refused, naming them.
    problem_options: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("vocab_size", "output_vocab_size"):
            if not isinstance(getattr(self, name), int) or isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be an integer, got {getattr(self, name)!r}")
        if not 1 <= self.vocab_size <= MAX_VOCAB_SIZE:
            raise ValueError(
                f"vocab_size must be in [1, {MAX_VOCAB_SIZE:,}], got {self.vocab_size}"
            )
        if not 0 <= self.output_vocab_size <= self.vocab_size:
            raise ValueError(
                f"output_vocab_size must be in [0, vocab_size={self.vocab_size}], got "
                f"{self.output_vocab_size}"
            )

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

    def check_vocabulary(self, vocab_file: str, output_dir: str) -> None:
        """Raises ValueError naming both hashes and the file when `vocab_file` is not the
        vocabulary the run in `output_dir` trained with."""
        if not self.vocab_sha256:
            return
        found = atomic_io.file_sha256(vocab_file)
        if found != self.vocab_sha256:
            raise ValueError(
                f"{vocab_file} (sha256 {found[:16]}) is not the vocabulary the run in "
                f"{output_dir} trained with (sha256 {self.vocab_sha256[:16]} in its "
                f"{RUN_INFO_FILE}): its data_dir was regenerated or replaced; pass the "
                "--data_dir the run trained on"
            )

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
