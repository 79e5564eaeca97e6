"""Writes tokenized examples as TFRecord shards, atomically and resumably.

A split is cut into chunks of `examples_per_shard` source pairs in generation order; chunk k
becomes shard `<split>-<k:05d>.tfrecord` (examples shuffled within it from a fixed seed) and then
its statistics file `<split>-<k:05d>.stats.json`. Both are written under a temporary name and
renamed, the statistics last, so a shard counts as done only when its statistics exist; they
record the shard's bytes and SHA-256. A rerun skips the chunks that are done without tokenizing
them again, and writes again a shard whose bytes are not the recorded ones
(`t2t_lite.data.shard_check`).

With `num_processes` > 1 the chunks are tokenized and written by worker processes
(`t2t_lite.data.shard_workers`), each running `_write_chunk` on whole chunks: the same shards,
byte for byte, as one process writes.
"""

from __future__ import annotations

import collections
import datetime
import itertools
import json
import os
import time
from collections.abc import Iterable, Iterator

import numpy as np
import tensorflow as tf
from absl import logging

from t2t_lite.data import shard_check, shard_workers
from t2t_lite.data.tokenizers import Tokenizer
from t2t_lite.runtime import atomic_io
from t2t_lite.runtime.progress import RateMeter, resident_memory
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


def _encode_all(tokenizer: Tokenizer, texts: list[str]) -> list[np.ndarray]:
    """Texts --> their ids followed by EOS, one int32 array each: a shard's ids as lists of
    Python ints would take about five times the memory."""
    ids: list[np.ndarray] = []
    for start in range(0, len(texts), ENCODE_BATCH):
        batch = tokenizer.encode(tf.constant(texts[start : start + ENCODE_BATCH]))
        flat, splits = batch.flat_values.numpy(), batch.row_splits.numpy()
        ids.extend(
            np.append(flat[a:b], EOS_ID) for a, b in zip(splits[:-1], splits[1:], strict=True)
        )
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
                writer.write(serialize_example(inputs[i].tolist(), targets[i].tolist()))
        written = shard_check.fingerprint(tmp)  # its bytes and SHA-256, to check it later
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
        **written,
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
    """The statistics of a shard an earlier run finished with the same vocabulary, else None;
    None too, with a warning, for a damaged shard (`shard_check.damage`), written again."""
    stats_path = os.path.join(data_dir, _stats_name(split, index))
    shard = os.path.join(data_dir, shard_name(split, index))
    if not (os.path.isfile(stats_path) and os.path.isfile(shard)):
        return None
    try:
        with open(stats_path) as f:
            stats = json.load(f)
    except ValueError:  # a damaged statistics file: the shard is written again
        return None
    if not isinstance(stats, dict) or any(stats.get(k) != v for k, v in stamp.items()):
        return None
    if reason := shard_check.damage(shard):
        logging.warning("%s is damaged (%s): writing it again", shard, reason)
        return None
    return stats


def write_split(
    data_dir: str,
    split: str,
    pairs: Iterable[tuple[str, str]],
    tokenizer: Tokenizer,
    examples_per_shard: int,
    vocab_sha256: str,
    seed: int = 0,
    num_processes: int = 1,
    total_pairs: int | None = None,
) -> dict:
    """Writes (or finishes writing) one split; returns its summary for metadata.json.

    Pairs with an empty side are skipped and counted. A shard left by an earlier run is kept
    only if it was finished with the same vocabulary (`vocab_sha256`) and seed. With
    `num_processes` > 1 and more than one shard to write, worker processes tokenize and write
    the shards (`t2t_lite.data.shard_workers`); `pairs` is read here, one chunk at a time, either
    way. Progress goes to the absl log, with an ETA when `total_pairs` (the pairs `pairs` holds)
    is given.
    """
    if num_processes < 1:
        raise ValueError(f"num_processes must be 1 or more, got {num_processes}")
    stamp = {"vocab_sha256": vocab_sha256, "seed": seed}
    progress = _Progress(split, examples_per_shard, total_pairs)
    shard_stats: dict[int, dict] = {}

    def done(index: int, pairs_in_chunk: int, stats: dict) -> None:
        shard_stats[index] = stats
        progress.written(index, pairs_in_chunk, stats)

    jobs = _unfinished_chunks(data_dir, split, pairs, examples_per_shard, stamp, shard_stats)
    first = list(itertools.islice(jobs, 2))  # one shard to write: no workers to start
    jobs = itertools.chain(first, jobs)
    if num_processes > 1 and len(first) > 1:
        logging.info("%s: %d processes write the shards", split, num_processes)
        shard_workers.write_in_workers(
            _write_chunk, jobs, data_dir, split, tokenizer, stamp, num_processes, done
        )
    else:
        for index, chunk in jobs:
            done(index, len(chunk), _write_chunk(data_dir, split, index, chunk, tokenizer, stamp))
    return summarize(split, [shard_stats[index] for index in sorted(shard_stats)])


def _unfinished_chunks(
    data_dir: str,
    split: str,
    pairs: Iterable[tuple[str, str]],
    examples_per_shard: int,
    stamp: dict,
    finished: dict[int, dict],
) -> Iterator[tuple[int, list[tuple[str, str]]]]:
    """(shard index, chunk) of the shards still to write; the statistics of those an earlier
    run finished go into `finished` as they are passed."""
    for index, chunk in enumerate(_chunks(pairs, examples_per_shard)):
        stats = _finished_shard(data_dir, split, index, stamp)
        if stats:
            finished[index] = stats
            logging.info("%s: shard %d already written, skipped", split, index)
        else:
            yield index, chunk


class _Progress:
    """The line logged as each shard is written: examples written, time, rates since the start,
    the pairs done of the split (earlier runs' shards included) with an ETA when the total is
    known, and this process's memory, e.g. `train: shard 7 done, 799800 examples written in
    118s (6778 examples/s, 474,630 tokens/s), 800,000/4,500,000 pairs, ETA 0:09:06, rss 0.83 GB
    (peak 1.21)`. With worker processes the memory is the parent's."""

    def __init__(self, split: str, examples_per_shard: int, total_pairs: int | None):
        self.split, self.examples_per_shard, self.total = split, examples_per_shard, total_pairs
        self.meter = RateMeter()  # units: examples written by this run
        self.pairs_done = 0  # up to the last shard finished, earlier runs' shards included
        self.pairs_written = 0  # in the shards this run wrote

    def written(self, index: int, pairs: int, stats: dict) -> None:
        tokens = sum(
            int(length) * count
            for name in ("input_lengths", "target_lengths")
            for length, count in stats[name].items()
        )
        self.meter.add(stats["examples"], tokens)
        self.pairs_written += pairs
        # Shards finish in index order, and every chunk before the last is full.
        self.pairs_done = index * self.examples_per_shard + pairs
        elapsed = time.monotonic() - self.meter.start
        examples_per_second, tokens_per_second = self.meter.rates_since_start()
        rss, peak = resident_memory()
        logging.info(
            "%s: shard %d done, %d examples written in %.0fs (%.0f examples/s, %s tokens/s)%s, "
            "rss %.2f GB (peak %.2f)",
            self.split,
            index,
            self.meter.units,
            elapsed,
            examples_per_second,
            f"{tokens_per_second:,.0f}",
            self._eta(elapsed),
            rss / 1e9,
            peak / 1e9,
        )

    def _eta(self, elapsed: float) -> str:
        if not self.total:
            return ""
        seconds = (self.total - self.pairs_done) * elapsed / max(self.pairs_written, 1)
        eta = datetime.timedelta(seconds=round(max(seconds, 0.0)))
        return f", {self.pairs_done:,}/{self.total:,} pairs, ETA {eta}"


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
