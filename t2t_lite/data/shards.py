"""Writes tokenized examples as TFRecord shards, atomically and resumably.

A split is cut into chunks of `examples_per_shard` source pairs in generation order; chunk k
becomes shard `<split>-<k:05d>.tfrecord` (examples shuffled within it from a fixed seed) and then
its statistics file `<split>-<k:05d>.stats.json`. Both are written under a temporary name and
renamed, the statistics last, so a shard counts as done only when its statistics exist. A rerun
skips the chunks that are done without tokenizing them again.
"""

from __future__ import annotations

import collections
import itertools
import json
import os
import time
from collections.abc import Iterable, Iterator

import numpy as np
import tensorflow as tf
from absl import logging

from t2t_lite.data.tokenizers import Tokenizer
from t2t_lite.runtime import atomic_io
from t2t_lite.vocabulary import EOS_ID

FEATURES = ("inputs", "targets")
ENCODE_BATCH = 1024


def shard_name(split: str, index: int) -> str:
    return f"{split}-{index:05d}.tfrecord"


def _stats_name(split: str, index: int) -> str:
    return f"{split}-{index:05d}.stats.json"


def serialize_example(inputs: list[int], targets: list[int]) -> bytes:
    """Two id lists (EOS included) --> a serialized tf.train.Example, the same bytes in every
    process: the feature map is written in key order (protobuf's own map order varies between
    processes), so equal data gives byte-identical shards."""
    feature = {
        name: tf.train.Feature(int64_list=tf.train.Int64List(value=ids))
        for name, ids in zip(FEATURES, (inputs, targets), strict=True)
    }
    example = tf.train.Example(features=tf.train.Features(feature=feature))
    return example.SerializeToString(deterministic=True)


def _encode_all(tokenizer: Tokenizer, texts: list[str]) -> list[list[int]]:
    ids: list[list[int]] = []
    for start in range(0, len(texts), ENCODE_BATCH):
        batch = tokenizer.encode(tf.constant(texts[start : start + ENCODE_BATCH])).to_list()
        ids.extend(row + [EOS_ID] for row in batch)
    return ids


def _write_chunk(
    data_dir: str, split: str, index: int, chunk: list[tuple[str, str]], tokenizer, stamp: dict
) -> dict:
    """Tokenizes and writes one shard and then its statistics; returns the statistics."""
    kept = [(s, t) for s, t in chunk if s.strip() and t.strip()]
    inputs = _encode_all(tokenizer, [s for s, _ in kept])
    targets = _encode_all(tokenizer, [t for _, t in kept])
    order = np.random.default_rng([stamp["seed"], index]).permutation(len(kept))
    path = os.path.join(data_dir, shard_name(split, index))
    tmp = atomic_io.temporary_path(path)
    try:
        with tf.io.TFRecordWriter(tmp) as writer:
            for i in order:
                writer.write(serialize_example(inputs[i], targets[i]))
        atomic_io.commit(tmp, path)
    except (tf.errors.ResourceExhaustedError, OSError) as error:  # a full disk (ENOSPC)
        if os.path.exists(tmp):
            os.remove(tmp)  # the shards finished before stay; a rerun goes on from them
        if isinstance(error, OSError) and not atomic_io.disk_refused(error):
            raise
        raise atomic_io.write_failed(path, error) from None
    stats = {
        **stamp,
        "shard": shard_name(split, index),
        "examples": len(kept),
        "skipped_empty": len(chunk) - len(kept),
        "input_lengths": dict(collections.Counter(len(x) for x in inputs)),
        "target_lengths": dict(collections.Counter(len(x) for x in targets)),
    }
    atomic_io.write_json(os.path.join(data_dir, _stats_name(split, index)), stats)
    return stats


def _chunks(pairs: Iterable[tuple[str, str]], size: int) -> Iterator[list[tuple[str, str]]]:
    iterator = iter(pairs)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


def _finished_shard(data_dir: str, split: str, index: int, stamp: dict) -> dict | None:
    """The statistics of a shard an earlier run finished with the same vocabulary, else None."""
    stats_path = os.path.join(data_dir, _stats_name(split, index))
    if not (
        os.path.isfile(stats_path)
        and os.path.isfile(os.path.join(data_dir, shard_name(split, index)))
    ):
        return None
    with open(stats_path) as f:
        stats = json.load(f)
    return stats if all(stats.get(k) == v for k, v in stamp.items()) else None


def write_split(
    data_dir: str,
    split: str,
    pairs: Iterable[tuple[str, str]],
    tokenizer: Tokenizer,
    examples_per_shard: int,
    vocab_sha256: str,
    seed: int = 0,
) -> dict:
    """Writes (or finishes writing) one split; returns its summary for metadata.json.

    Pairs with an empty side are skipped and counted. A shard left by an earlier run is kept
    only if it was finished with the same vocabulary (`vocab_sha256`) and seed. Progress goes
    to the absl log.
    """
    stamp = {"vocab_sha256": vocab_sha256, "seed": seed}
    shard_stats, start, written = [], time.monotonic(), 0
    for index, chunk in enumerate(_chunks(pairs, examples_per_shard)):
        finished = _finished_shard(data_dir, split, index, stamp)
        if finished:
            shard_stats.append(finished)
            logging.info("%s: shard %d already written, skipped", split, index)
            continue
        shard_stats.append(_write_chunk(data_dir, split, index, chunk, tokenizer, stamp))
        written += shard_stats[-1]["examples"]
        elapsed = time.monotonic() - start
        logging.info(
            "%s: shard %d done, %d examples written in %.0fs (%.0f examples/s)",
            split,
            index,
            written,
            elapsed,
            written / max(elapsed, 1e-9),
        )
    return summarize(split, shard_stats)


def _length_summary(histogram: collections.Counter) -> dict:
    lengths = np.array(sorted(histogram), dtype=np.int64)
    counts = np.array([histogram[n] for n in lengths], dtype=np.int64)
    if not counts.sum():
        return {"tokens": 0}
    cumulative = np.cumsum(counts) / counts.sum()
    percentile = {f"p{p}": int(lengths[np.searchsorted(cumulative, p / 100)]) for p in (50, 90, 99)}
    return {
        "tokens": int((lengths * counts).sum()),
        "min": int(lengths[0]),
        "max": int(lengths[-1]),
        "mean": round(float((lengths * counts).sum() / counts.sum()), 2),
        **percentile,
    }


def summarize(split: str, shard_stats: list[dict]) -> dict:
    """Merges per-shard statistics into the split's entry of metadata.json."""
    hist = {name: collections.Counter() for name in ("input_lengths", "target_lengths")}
    for stats in shard_stats:
        for name, counter in hist.items():
            counter.update({int(k): v for k, v in stats[name].items()})
    return {
        "examples": sum(s["examples"] for s in shard_stats),
        "skipped_empty": sum(s["skipped_empty"] for s in shard_stats),
        "shards": [s["shard"] for s in shard_stats],
        "input_lengths": _length_summary(hist["input_lengths"]),
        "target_lengths": _length_summary(hist["target_lengths"]),
    }
