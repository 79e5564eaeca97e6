"""Damaged shards found and named: a truncated or bit-flipped TFRecord shard is found by the
size and SHA-256 its statistics file records (`<split>-<k>.stats.json`, written by
`t2t_lite.data.shards`), or, for a shard written before they were recorded, by reading its
records (TFRecord's own CRCs) and counting them against the recorded examples.

t2t-datagen checks the shards it would keep (`damage`) and writes a damaged one again; a
command reading a data_dir (training, evaluation, t2t-distill) turns TensorFlow's
DataLossError, which names no file, into one line naming the damaged shard
(`damaged_shards_named`).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
from collections.abc import Iterator

import tensorflow as tf

from t2t_lite.runtime import atomic_io

SUFFIX = ".tfrecord"
STATS_SUFFIX = ".stats.json"


class DamagedShardError(ValueError):
    """A shard of a data_dir that cannot be read as t2t-datagen wrote it."""


def stats_path(shard: str) -> str:
    """The statistics file beside `shard` (`train-00000.tfrecord` -> `train-00000.stats.json`)."""
    return shard[: -len(SUFFIX)] + STATS_SUFFIX if shard.endswith(SUFFIX) else shard + STATS_SUFFIX


def fingerprint(shard: str) -> dict:
    """What the statistics file records of a shard to check it later: its bytes and SHA-256."""
    return {"bytes": os.path.getsize(shard), "sha256": atomic_io.file_sha256(shard)}


def damage(shard: str) -> str | None:
    """Why `shard` is damaged (e.g. "52,011 bytes where train-00000.stats.json records
    115,982"), or None when it is as t2t-datagen wrote it."""
    stats = _recorded(shard)
    name = os.path.basename(stats_path(shard))
    if "sha256" in stats and "bytes" in stats:
        size = os.path.getsize(shard)
        if size != stats["bytes"]:
            return f"{size:,} bytes where {name} records {stats['bytes']:,}"
        if atomic_io.file_sha256(shard) != stats["sha256"]:
            return f"its SHA-256 is not the one {name} records"
        return None
    try:
        count = sum(1 for _ in tf.data.TFRecordDataset(shard))
    except tf.errors.DataLossError as error:
        found = re.search(r"(truncated|corrupted) record at \d+", str(error))
        return found.group(0) if found else "unreadable records"
    expected = stats.get("examples")
    if isinstance(expected, int) and count != expected:
        return f"{count:,} records where {name} records {expected:,}"
    return None


def _recorded(shard: str) -> dict:
    try:
        with open(stats_path(shard), encoding="utf-8") as f:
            stats = json.load(f)
    except (OSError, ValueError):
        return {}
    return stats if isinstance(stats, dict) else {}


def refusal(shard: str, reason: str) -> DamagedShardError:
    """The one-line error for a damaged `shard`, with what to do."""
    return DamagedShardError(
        f"{shard}: a damaged shard ({reason}); rerun t2t-datagen with the data_dir's --problem "
        "and options, which checks the shards and writes the damaged ones again"
    )


@contextlib.contextmanager
def damaged_shards_named(data_dir: str) -> Iterator[None]:
    """Turns a DataLossError raised while reading `data_dir`'s shards into a DamagedShardError
    naming the first damaged shard (`refusal`); re-raises it when no shard is found damaged."""
    try:
        yield
    except tf.errors.DataLossError:
        if not data_dir:
            raise
        for shard in sorted(glob.glob(os.path.join(glob.escape(data_dir), "*" + SUFFIX))):
            reason = damage(shard)
            if reason:
                raise refusal(shard, reason) from None
        raise
