"""Sequence-level knowledge distillation (Kim and Rush, 2016): a data directory whose training
targets are a teacher's translations, for a student to train on (`t2t-distill`).

    data_dir (t2t-datagen's)                  output_data_dir (t2t-distill's)
      vocabulary, datagen.json, dev and  -->    the same files, copied
        test shards, a problem's own files
      train-NNNNN.tfrecord               -->    the same inputs in the same order, the
                                                teacher's translations as targets
      metadata.json                      -->    the same, with the new train split and a
                                                "distilled" entry; written last

The sources are the ids of the training shards, what the teacher itself trained on: the teacher
searches those ids (`Translator.search_ids`, in t2t-decode's length-sorted batches), so it sees
exactly what the student will be fed, with no detokenize-and-tokenize round trip. A target is the
teacher's best hypothesis as it searched it, its ids up to EOS, before a problem's `postprocess`
(parsing's tree repair), so it has the form the training data has. An example whose translation
is empty (EOS first) keeps its reference target and is counted (`kept_reference`): N examples in,
N out, and the student is never taught to say nothing.

Resumable by shards: output shard k is translated from input shard k, written under a temporary
name and renamed, then its statistics `train-NNNNN.stats.json`. A shard counts as done when both
exist and the statistics name the same source shard (its SHA-256), teacher checkpoint, search
settings and vocabulary; a rerun keeps those and translates the others. metadata.json is removed
before a shard is written and written again at the end, so a folder with one is always whole.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import re
import shutil
from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from t2t_lite.data import VOCAB_FILES, shard_check
from t2t_lite.data.pipeline import parse_examples
from t2t_lite.data.shards import serialize_example, summarize
from t2t_lite.decode.batches import token_batches
from t2t_lite.decode.translator import Translator
from t2t_lite.problems.base import METADATA, read_metadata
from t2t_lite.run.run import Run
from t2t_lite.run.run_flags import RunFlags
from t2t_lite.run.run_info import RunInfo
from t2t_lite.runtime import atomic_io
from t2t_lite.runtime.error_frames import frames_cleared
from t2t_lite.runtime.threads import map_batches, split_cpus
from t2t_lite.train.distill_progress import DistillProgress
from t2t_lite.vocabulary import EOS_ID

STATE = "distill.json"  # written first: the folder is t2t-distill's, made from this data_dir
SPLIT = "train"
# The train split's files as t2t-datagen names them (t2t_lite.data.shards): not copied.
_TRAIN_FILE = re.compile(rf"{SPLIT}-\d+\.(tfrecord|stats\.json)")


@dataclasses.dataclass(frozen=True)
class DistillConfig:
    """What t2t-distill is asked for: the `teacher`'s run flags (--teacher as the output_dir;
    --checkpoint, several for an ensemble; --data_dir, whose train split is translated and whose
    vocabulary the teacher's must be; the search flags over the teacher's own; --quantize), the
    output_data_dir, `batch_tokens` and `inter_threads` (batches searched at once:
    `t2t_lite.runtime.threads`)."""

    teacher: RunFlags
    output_data_dir: str
    batch_tokens: int = 4096
    inter_threads: int = 1

    @property
    def data_dir(self) -> str:
        """The data_dir whose train split is translated (--data_dir)."""
        if not self.teacher.data_dir:
            raise ValueError("--data_dir: the data directory to translate is missing")
        return self.teacher.data_dir


def distill(config: DistillConfig) -> dict:
    """Writes (or finishes writing) output_data_dir; returns its metadata.json.

    Refuses, before anything is written, a data_dir without a finished train split, an
    output_data_dir that is the data_dir, holds another vocabulary or is neither empty nor
    t2t-distill's, and a teacher trained with another vocabulary or problem (ValueError)."""
    split_cpus(config.inter_threads)  # before TensorFlow runs an op
    metadata = source_metadata(config.data_dir)
    vocab_sha256 = check_teacher(config.teacher.output_dir, config.data_dir, metadata)
    check_destination(config.data_dir, config.output_data_dir, metadata, vocab_sha256)
    prepare_destination(config.data_dir, config.output_data_dir, metadata, vocab_sha256)
    run = config.teacher.restore()
    translator = Translator.from_run(
        run, batch_tokens=config.batch_tokens, inter_threads=config.inter_threads
    )
    stamp = teacher_stamp(run, vocab_sha256)
    shards = metadata["splits"][SPLIT]["shards"]
    progress = DistillProgress(len(shards), int(metadata["splits"][SPLIT]["examples"]))
    written = []
    for index, name in enumerate(shards):
        source = os.path.join(config.data_dir, name)
        shard_stamp = {**stamp, "source_sha256": atomic_io.file_sha256(source)}
        stats = finished_shard(config.output_data_dir, name, shard_stamp)
        if stats:
            progress.kept(name, int(stats["examples"]))
        else:
            _remove(os.path.join(config.output_data_dir, METADATA))  # no longer whole
            progress.start(name, index)
            stats = distill_shard(translator, source, config.output_data_dir, shard_stamp, progress)
        written.append(stats)
    return write_metadata(config, metadata, written)


def source_metadata(data_dir: str) -> dict:
    """metadata.json of a finished data_dir with a train split (FileNotFoundError or
    ValueError otherwise)."""
    metadata = read_metadata(data_dir)
    splits = metadata["splits"]
    if SPLIT not in splits or not splits[SPLIT].get("shards"):
        raise ValueError(
            f"{data_dir} has no training split to translate (its splits: "
            f"{', '.join(sorted(splits)) or 'none'}); pass a data_dir that t2t-datagen wrote "
            "with one"
        )
    return metadata


def check_teacher(teacher: str, data_dir: str, metadata: dict) -> str:
    """Refuses a teacher trained on another problem or with another vocabulary than data_dir's;
    returns the SHA-256 of data_dir's vocabulary file."""
    info = RunInfo.load(teacher)
    vocab_file = os.path.join(data_dir, metadata["vocab"]["file"])
    found = atomic_io.file_sha256(vocab_file)
    if info.problem != metadata.get("problem", info.problem):
        raise ValueError(
            f"the teacher {teacher} was trained on {info.problem}, but {data_dir} holds data "
            f"of {metadata['problem']}"
        )
    if info.vocab_sha256 and info.vocab_sha256 != found:
        raise ValueError(
            f"the teacher {teacher} was trained with another vocabulary (sha256 "
            f"{info.vocab_sha256[:16]}) than {vocab_file} (sha256 {found[:16]}); pass the "
            "data_dir of the teacher's vocabulary"
        )
    return found


def check_destination(data_dir: str, output_dir: str, metadata: dict, vocab_sha256: str) -> None:
    """Refuses an output_data_dir that is the data_dir, a file, a folder holding another
    vocabulary, or a folder that is neither empty nor an earlier t2t-distill's."""
    if os.path.exists(output_dir) and os.path.samefile(output_dir, data_dir):
        raise ValueError(f"--output_data_dir is --data_dir ({data_dir}): choose a new folder")
    if not os.path.exists(output_dir):
        return
    if not os.path.isdir(output_dir):
        raise ValueError(f"--output_data_dir {output_dir} is a file, not a folder")
    vocab_name = metadata["vocab"]["file"]
    for name in VOCAB_FILES.values():
        path = os.path.join(output_dir, name)
        if not os.path.isfile(path):
            continue
        sha256 = atomic_io.file_sha256(path)
        if name != vocab_name or sha256 != vocab_sha256:
            raise ValueError(
                f"{output_dir} holds another vocabulary ({name}, sha256 {sha256[:16]}) than "
                f"{data_dir} ({vocab_name}, sha256 {vocab_sha256[:16]}); choose a new "
                "--output_data_dir"
            )
    entries = [name for name in os.listdir(output_dir) if not name.startswith(".")]
    if entries and STATE not in entries:
        raise ValueError(
            f"{output_dir} is neither empty nor an earlier output of t2t-distill (it has no "
            f"{STATE}); choose a new --output_data_dir"
        )


def prepare_destination(data_dir: str, output_dir: str, metadata: dict, vocab_sha256: str) -> None:
    """Writes output_dir's distill.json, then copies every top-level file of data_dir but the
    train split's shards and statistics and metadata.json: the vocabulary, datagen.json (the
    problem's options, which t2t-train records), the dev and test shards and a problem's own
    files (parsing's tags and evaluation files). A file already there with the same bytes is
    left alone; folders (a raw download cache) are not copied."""
    os.makedirs(output_dir, exist_ok=True)
    atomic_io.remove_stale_temporaries(output_dir)
    state = {
        "source_data_dir": os.path.abspath(data_dir),
        "problem": metadata.get("problem", ""),
        "vocab_sha256": vocab_sha256,
    }
    atomic_io.write_json(os.path.join(output_dir, STATE), state)
    for name in sorted(os.listdir(data_dir)):
        source, target = os.path.join(data_dir, name), os.path.join(output_dir, name)
        if _copied(name, source) and not _same_bytes(source, target):
            with open(source, "rb") as read, atomic_io.open_atomic(target, "wb") as write:
                shutil.copyfileobj(read, write)


def _copied(name: str, path: str) -> bool:
    """Whether prepare_destination copies the entry `name` of the data_dir: a file, not hidden
    (a temporary), not metadata.json nor the train split's."""
    hidden = name.startswith(".") or name in (METADATA, STATE)
    return os.path.isfile(path) and not hidden and not _TRAIN_FILE.fullmatch(name)


def _same_bytes(a: str, b: str) -> bool:
    return os.path.isfile(b) and atomic_io.file_sha256(a) == atomic_io.file_sha256(b)


def teacher_stamp(run: Run, vocab_sha256: str) -> dict:
    """What a finished shard's statistics must name to be kept: the vocabulary, the teacher's
    checkpoint(s) as absolute paths, its search settings and quantization; as JSON reads it
    back (tuples as lists), so that it compares equal to the statistics an earlier run wrote."""
    checkpoints = ",".join(os.path.abspath(path) for path in run.checkpoint.split(","))
    stamp = {
        "vocab_sha256": vocab_sha256,
        "teacher": checkpoints,
        "search": run.search.to_dict(),
        "quantize": run.quantize,
    }
    return json.loads(json.dumps(stamp))


def finished_shard(output_dir: str, shard: str, stamp: dict) -> dict | None:
    """The statistics of `shard` in output_dir if an earlier run finished it with `stamp`."""
    path = os.path.join(output_dir, shard_check.stats_path(shard))
    if not (os.path.isfile(path) and os.path.isfile(os.path.join(output_dir, shard))):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            stats = json.load(f)
    except ValueError:  # damaged: written again
        return None
    if not isinstance(stats, dict) or any(stats.get(k) != v for k, v in stamp.items()):
        return None
    if reason := shard_check.damage(os.path.join(output_dir, shard)):
        logging.warning("%s is damaged (%s): translating it again", shard, reason)
        return None
    return stats


def distill_shard(
    translator: Translator, source: str, output_dir: str, stamp: dict, progress: DistillProgress
) -> dict:
    """Translates one input shard, writes its output shard and then its statistics; returns
    the statistics."""
    name = os.path.basename(source)
    inputs, references = read_shard(source)
    hypotheses = best_hypotheses(translator, inputs, progress.update)
    targets = [h if len(h) > 1 else r for h, r in zip(hypotheses, references, strict=True)]
    kept = sum(len(h) <= 1 for h in hypotheses)
    write_shard(os.path.join(output_dir, name), inputs, targets)
    stats = {
        **stamp,
        "shard": name,
        "examples": len(inputs),
        **shard_check.fingerprint(os.path.join(output_dir, name)),
        "skipped_empty": 0,
        "kept_reference": kept,
        "input_lengths": dict(collections.Counter(len(x) for x in inputs)),
        "target_lengths": dict(collections.Counter(len(y) for y in targets)),
    }
    atomic_io.write_json(os.path.join(output_dir, shard_check.stats_path(name)), stats)
    progress.finished(kept)
    return stats


def read_shard(path: str) -> tuple[list[list[int]], list[list[int]]]:
    """(inputs, targets) of a t2t-datagen shard: id lists ending in EOS, in the file's order."""
    inputs: list[list[int]] = []
    targets: list[list[int]] = []
    with frames_cleared(), shard_check.damaged_shards_named(os.path.dirname(path)):
        for batch in tf.data.TFRecordDataset(path).batch(4096).map(parse_examples):
            inputs += batch["inputs"].to_list()
            targets += batch["targets"].to_list()
    return inputs, targets


def best_hypotheses(
    translator: Translator,
    sources: Sequence[list[int]],
    counted: Callable[[int, int], None] | None = None,
) -> list[list[int]]:
    """The teacher's best hypothesis for each source (ids ending in EOS), as ids ending in EOS
    ([EOS] alone for an empty one), in the order given. Sources longer than the teacher's
    positions are cut as `Translator.encode` cuts lines. `counted(sentences, tokens)` hears of
    each batch."""
    limit = translator.max_positions
    rows = [list(s) if len(s) <= limit else [*s[: limit - 1], EOS_ID] for s in sources]
    if cut := sum(len(s) > limit for s in sources):
        logging.warning(
            "%d sources longer than the teacher's %d positions were cut for it (the student's "
            "data keeps them whole)",
            cut,
            limit,
        )
    found: list[list[int]] = [[EOS_ID]] * len(rows)
    batches = token_batches([len(r) for r in rows], translator.batch_tokens)

    def search(batch):
        return translator.search_ids([rows[i] for i in batch]).ids.numpy()

    for batch, found_ids in map_batches(search, batches, translator.inter_threads):
        hypotheses = hypothesis_ids(found_ids[:, 0])  # [rows, nbest, length] --> [rows, length]
        for i, hypothesis in zip(batch, hypotheses, strict=True):
            found[i] = hypothesis
        if counted:
            counted(len(batch), sum(len(h) for h in hypotheses))
    return found


def hypothesis_ids(ids: np.ndarray) -> list[list[int]]:
    """Search outputs [rows, length] --> per row its ids before the first EOS or padding, then
    EOS (a row that ran to the length limit without one gets it too)."""
    rows = []
    for row in ids.tolist():
        end = next((j for j, token in enumerate(row) if token <= EOS_ID), len(row))
        rows.append([*row[:end], EOS_ID])
    return rows


def write_shard(path: str, inputs: Sequence[list[int]], targets: Sequence[list[int]]) -> None:
    """Writes the examples to a TFRecord shard atomically; a full disk is one line naming it."""
    tmp = atomic_io.temporary_path(path)
    try:
        with tf.io.TFRecordWriter(tmp) as writer:
            for x, y in zip(inputs, targets, strict=True):
                writer.write(serialize_example(x, y))
        atomic_io.commit(tmp, path)
    except BaseException as error:
        _remove(tmp)
        if atomic_io.disk_refused(error) or isinstance(error, tf.errors.ResourceExhaustedError):
            raise atomic_io.write_failed(path, error) from None  # a full disk (ENOSPC)
        raise


def write_metadata(config: DistillConfig, metadata: dict, stats: list[dict]) -> dict:
    """output_data_dir/metadata.json: data_dir's, with the translated train split and what made
    it ("distilled"); written last. Returns it."""
    kept = sum(int(s.get("kept_reference", 0)) for s in stats)
    result = {
        **metadata,
        "splits": {**metadata["splits"], SPLIT: summarize(SPLIT, stats)},
        "distilled": {
            "source_data_dir": os.path.abspath(config.data_dir),
            "teacher": os.path.abspath(config.teacher.output_dir),
            "checkpoint": stats[0]["teacher"],
            "search": stats[0]["search"],
            "quantize": stats[0]["quantize"],
            "kept_reference": kept,
        },
    }
    atomic_io.write_json(os.path.join(config.output_data_dir, METADATA), result)
    if kept:
        logging.warning(
            "%d of %d translations were empty: those examples kept their reference targets",
            kept,
            result["splits"][SPLIT]["examples"],
        )
    return result


def _remove(path: str) -> None:
    if os.path.exists(path):
        os.remove(path)
