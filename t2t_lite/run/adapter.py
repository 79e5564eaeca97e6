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
import math
import os
import re

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
    def load(cls, output_dir: str, d_model: int) -> AdapterRecord:
        """Reads output_dir/adapter.json, each field checked (`check_record`) against the
        adapted model's width `d_model`: a run folder from elsewhere is input, and its
        adapter.json must not make a command build an adapter no machine holds or compute
        with NaN. A ValueError names the file and the field."""
        path = os.path.join(output_dir, ADAPTER_FILE)
        try:
            with open(path, encoding="utf-8") as f:
                values = json.load(f)
        except ValueError as e:
            raise ValueError(f"{path}: not JSON ({e}); retrain the adapter") from None
        return cls(**check_record(values, path, d_model))


_FIELDS = {f.name: f for f in dataclasses.fields(AdapterRecord)}
_SHA256 = re.compile(r"[0-9a-f]{64}")


def check_record(values: object, path: str, d_model: int) -> dict:
    """`values` (adapter.json's object) when every field is AdapterRecord's, typed and within
    its bound: rank an int in [1, d_model] (a rank above the width of the layers it adapts adds
    nothing), alpha a finite number > 0, the parent's folder and checkpoint non-empty strings,
    parent_sha256 64 hex digits, trainable_weights an int >= 0; else a ValueError
    `<path>: "<field>": ...` saying what is wrong and what to do."""
    if not isinstance(values, dict):
        raise ValueError(f"{path}: not an adapter.json of t2t-train (not a JSON object)")

    def refuse(field: str, problem: str) -> ValueError:
        return ValueError(f'{path}: "{field}": {problem}; retrain the adapter')

    for field in values:
        if field not in _FIELDS:
            raise refuse(field, f"unknown field (known: {', '.join(_FIELDS)})")
    for field in _FIELDS:
        if field not in values:
            raise refuse(field, "missing")
        value = values[field]
        wanted = {"rank": int, "trainable_weights": int, "alpha": (int, float)}.get(field, str)
        if not isinstance(value, wanted) or isinstance(value, bool):
            raise refuse(field, f"expects {_FIELDS[field].type}, got {value!r}")
    rank, alpha = values["rank"], values["alpha"]
    if not 1 <= rank <= d_model:
        raise refuse("rank", f"{rank} is not in [1, {d_model}] (the model's width d_model)")
    if not (math.isfinite(alpha) and alpha > 0):
        raise refuse("alpha", f"{alpha} is not a finite number > 0")
    for field in ("parent_dir", "parent_checkpoint"):
        if not values[field]:
            raise refuse(field, "empty")
    if not _SHA256.fullmatch(values["parent_sha256"]):
        raise refuse("parent_sha256", f"{values['parent_sha256']!r} is not 64 hex digits")
    if values["trainable_weights"] < 0:
        raise refuse("trainable_weights", f"{values['trainable_weights']} is negative")
    return {**values, "alpha": float(alpha)}


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


def restore_adapted(
    model, record: AdapterRecord, output_dir: str, checkpoint: str | None = None
) -> str:
    """Restores the adapter run `output_dir` (its adapter.json: `record`) into the plain, built
    `model` as base + adapter: the parent's weights (checked against the recorded identity),
    LoRA enabled at the recorded rank, then the adapter's checkpoint (`checkpoint`, default the
    run's newest). Returns the adapter checkpoint's path."""
    base = restore_base(model, record)
    check_base(model, record, output_dir, base)
    lora.enable(model, record.rank, record.alpha)
    return restore_checkpoint(
        tf.train.Checkpoint(model=lora.adapter_weights(model)), output_dir, checkpoint
    )
