"""An adapter run: a LoRA adapter over a parent run's frozen weights (`t2t-train --init_from=RUN
--lora_rank=R`), restored as base + adapter.

Its checkpoints hold the adapter's weights alone (`t2t_lite.model.lora.AdapterWeights`, under
the key "model"), and `output_dir/adapter.json` (`AdapterRecord`) names the parent: its run
folder, the checkpoint the base came from, and the base's identity, the SHA-256 of its weights'
values (`lora.weights_sha256`). The identity is that of the numbers, not of the files: a parent
checkpoint copied, moved or rewritten with the same weights is the same base; one trained on,
averaged or replaced is another, and restoring the adapter over it is refused, naming both
hashes.
"""

from __future__ import annotations

import dataclasses
import json
import os

import tensorflow as tf

from t2t_lite.model import lora
from t2t_lite.run.checkpoints import restore_checkpoint
from t2t_lite.run.layout import ADAPTER_FILE
from t2t_lite.runtime import atomic_io


class AdapterMismatchError(ValueError):
    """An adapter restored over other base weights than the ones it was trained on."""


@dataclasses.dataclass(frozen=True)
class AdapterRecord:
    """What `output_dir/adapter.json` records about an adapter run."""

    rank: int
    alpha: float
    parent_dir: str  # the parent run's folder, absolute
    parent_checkpoint: str  # the checkpoint the base weights were restored from, absolute
    parent_sha256: str  # lora.weights_sha256 of the base weights
    trainable_weights: int  # the adapter's weights (lora.adapter_size)

    def save(self, output_dir: str) -> None:
        atomic_io.write_json(os.path.join(output_dir, ADAPTER_FILE), dataclasses.asdict(self))

    @classmethod
    def load(cls, output_dir: str) -> AdapterRecord:
        path = os.path.join(output_dir, ADAPTER_FILE)
        try:
            with open(path, encoding="utf-8") as f:
                return cls(**json.load(f))
        except (ValueError, TypeError) as e:
            raise ValueError(f"{path} is damaged ({e}); retrain the adapter") from None


def is_adapter_run(output_dir: str) -> bool:
    """Whether `output_dir` holds an adapter run (its adapter.json)."""
    return os.path.isfile(os.path.join(output_dir, ADAPTER_FILE))


def restore_base(model, record: AdapterRecord) -> str:
    """Restores the parent's weights into the plain (not yet adapted) `model`: the recorded
    checkpoint, or the parent's newest when that one is gone (the identity check then decides).
    Returns the path restored."""
    checkpoint = record.parent_checkpoint if tf.io.gfile.exists(
        record.parent_checkpoint + ".index"
    ) else None  # fmt: skip
    return restore_checkpoint(tf.train.Checkpoint(model=model), record.parent_dir, checkpoint)


def check_base(model, record: AdapterRecord, adapter_dir: str, base: str) -> None:
    """Refuses `model`'s base weights (restored from `base`) unless they are the ones the
    adapter in `adapter_dir` was trained on, naming both hashes."""
    found = lora.weights_sha256(model)
    if found != record.parent_sha256:
        raise AdapterMismatchError(
            f"the adapter in {adapter_dir} was trained on base weights sha256 "
            f"{record.parent_sha256[:16]}, but {base} has sha256 {found[:16]}; serve it over "
            f"the checkpoint it was trained on ({record.parent_checkpoint}) or retrain it"
        )


def restore_adapted(model, output_dir: str, checkpoint: str | None = None) -> str:
    """Restores the adapter run `output_dir` into the plain, built `model` as base + adapter:
    the parent's weights (checked against the recorded identity), LoRA enabled at the recorded
    rank, then the adapter's checkpoint (`checkpoint`, default the run's newest). Returns the
    adapter checkpoint's path."""
    record = AdapterRecord.load(output_dir)
    base = restore_base(model, record)
    check_base(model, record, output_dir, base)
    lora.enable(model, record.rank, record.alpha)
    return restore_checkpoint(
        tf.train.Checkpoint(model=lora.adapter_weights(model)), output_dir, checkpoint
    )
