"""t2t-distill (t2t_lite.train.distill) on a tiny copy problem of three training shards and a
random teacher: N examples in give N out in the same order, the targets are what `Translator`
gives for the same source lines (the slow path), a rerun rewrites only a missing shard, the
student's data reads as a data_dir, and each refusal comes before anything is written."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import types
from typing import ClassVar

import numpy as np
import pytest
import tensorflow as tf
from command_helpers import command
from decoding_helpers import model_hparams, tiny_model

from t2t_lite.data import load_tokenizer, shard_check
from t2t_lite.decode.translator import Translator
from t2t_lite.hparams import get_hparams
from t2t_lite.problems import datagen_options, get_problem, read_metadata
from t2t_lite.problems.algorithmic import AlgorithmicCopy
from t2t_lite.problems.registry import register_problem
from t2t_lite.run.layout import CHECKPOINT_DIR
from t2t_lite.run.run_flags import RunFlags
from t2t_lite.run.run_info import RunInfo
from t2t_lite.runtime.atomic_io import file_sha256
from t2t_lite.train import distill as distilling
from t2t_lite.train.distill import DistillConfig, distill
from t2t_lite.train.distill_progress import DistillProgress

PROBLEM = "distill_test_copy"
SHARDS = ["train-00000.tfrecord", "train-00001.tfrecord", "train-00002.tfrecord"]


@register_problem(PROBLEM)
class ShardedCopy(AlgorithmicCopy):
    """algorithmic_copy in shards of 40 examples, so that 100 make three."""

    examples_per_shard: ClassVar[int] = 40


def _save_teacher(output_dir, data_dir, vocab_sha256: str) -> None:
    """A run folder of a random tiny model over the copy problem's 13 ids, whose EOS embedding
    is near that of id 9: its translations end at varied lengths, a few at once (empty)."""
    model = tiny_model(13, seed=7, overrides=",max_positions=16")
    embeddings = next(w for w in model.weights if w.path.endswith("shared_embedding/embeddings"))
    table = embeddings.numpy()
    table[1] = 1.05 * table[9]
    embeddings.assign(table)
    hparams = model_hparams(model)
    RunInfo(
        PROBLEM, str(data_dir), "transformer_tiny", hparams, 13, vocab_sha256=vocab_sha256
    ).save(str(output_dir))
    tf.train.CheckpointManager(
        tf.train.Checkpoint(model=model), str(output_dir / CHECKPOINT_DIR), 1
    ).save()


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    """(data_dir, teacher run folder): 100 training examples in three shards, 10 dev and test."""
    root = tmp_path_factory.mktemp("distill")
    data_dir = root / "data"
    get_problem(PROBLEM).generate_data(
        str(data_dir), max_sequence_length=6, train_size=100, dev_size=10, test_size=10
    )
    _save_teacher(root / "teacher", data_dir, file_sha256(str(data_dir / "vocab.words.txt")))
    return data_dir, root / "teacher"


@pytest.fixture(scope="module")
def distilled(teacher, tmp_path_factory):
    """The student's data_dir, distilled once with beam 2 and the metadata it returned."""
    data_dir, teacher_dir = teacher
    output = tmp_path_factory.mktemp("student") / "data"
    teacher_flags = RunFlags(str(teacher_dir), data_dir=str(data_dir), beam_size=2)
    config = DistillConfig(teacher_flags, str(output))
    return config, distill(config)


def _examples(path) -> tuple[list[list[int]], list[list[int]]]:
    return distilling.read_shard(str(path))


def test_n_in_n_out_and_the_targets_are_the_translators(teacher, distilled):
    data_dir, teacher_dir = teacher
    config, metadata = distilled
    tokenizer = load_tokenizer(str(data_dir))
    translator = Translator.from_run(str(teacher_dir), beam_size=2)
    total = 0
    for name in SHARDS:
        inputs, references = _examples(data_dir / name)
        outputs, targets = _examples(os.path.join(config.output_data_dir, name))
        assert outputs == inputs  # the same examples, in the same order
        lines = [tokenizer.decode_py(x) for x in inputs]
        expected = translator.translate(lines)  # the slow path: text in, text out
        for want, target, reference in zip(expected, targets, references, strict=True):
            assert target[-1] == 1  # EOS
            if want:
                assert tokenizer.decode_py(target) == want
            else:  # an empty translation keeps the reference
                assert target == reference
        total += len(inputs)
    assert total == metadata["splits"]["train"]["examples"] == 100
    assert 0 < metadata["distilled"]["kept_reference"] < 20  # a few empty translations
    assert metadata["distilled"]["search"]["beam_size"] == 2
    source = read_metadata(str(data_dir))
    assert {k: metadata["splits"][k] for k in ("dev", "test")} == {
        k: source["splits"][k] for k in ("dev", "test")
    }
    assert metadata["splits"]["train"]["shards"] == SHARDS
    for name in ["vocab.words.txt", "dev-00000.tfrecord", "test-00000.tfrecord"]:
        copied = os.path.join(config.output_data_dir, name)
        assert file_sha256(copied) == file_sha256(str(data_dir / name)), name


def test_the_students_data_reads_as_a_data_dir(teacher, distilled):
    data_dir, _ = teacher
    config, _ = distilled
    problem = get_problem(PROBLEM)
    hparams = get_hparams("transformer_tiny")
    batches = problem.make_dataset(
        config.output_data_dir, "train", hparams, shuffle=False, repeat=False
    )
    assert sum(int(b["targets"].shape[0]) for b in batches) == 100
    assert problem.train_tokens(config.output_data_dir) > 0
    assert datagen_options(config.output_data_dir) == datagen_options(str(data_dir))
    problem.check_data_dir(config.output_data_dir)


def _files(folder: str) -> dict[str, tuple[int, str]]:
    """{name: (modification time in ns, SHA-256)} of the files in `folder`."""
    paths = {name: os.path.join(folder, name) for name in sorted(os.listdir(folder))}
    return {name: (os.stat(p).st_mtime_ns, file_sha256(p)) for name, p in paths.items()}


def test_a_rerun_rewrites_only_the_missing_shard(teacher, distilled, caplog):
    config, metadata = distilled
    folder = config.output_data_dir
    before = _files(folder)
    os.remove(os.path.join(folder, SHARDS[1]))
    caplog.set_level(logging.INFO, logger="absl")  # whatever an earlier test left it at
    assert distill(config) == metadata
    after = _files(folder)
    changed = {n for n in before if before[n][0] != after[n][0]}
    assert changed == {SHARDS[1], "train-00001.stats.json", "metadata.json", "distill.json"}
    assert all(before[n][1] == after[n][1] for n in before)  # and written the same again
    assert "train-00000.tfrecord: written by an earlier run, kept" in caplog.text


def test_other_search_settings_translate_again(teacher, distilled, tmp_path):
    """A shard is kept only for the same teacher and search: a copy of the output distilled
    with beam 1 is rewritten whole."""
    config, _ = distilled
    copy = tmp_path / "copy"
    shutil.copytree(config.output_data_dir, copy)
    greedy = DistillConfig(dataclasses.replace(config.teacher, beam_size=1), str(copy))
    metadata = distill(greedy)
    assert metadata["distilled"]["search"]["beam_size"] == 1
    for name in SHARDS:
        stats = json.loads((copy / shard_check.stats_path(name)).read_text())
        assert stats["search"]["beam_size"] == 1


class _ReversingTeacher:
    """A stand-in for `Translator`: the source reversed, nothing for sources of odd length."""

    max_positions, batch_tokens, inter_threads = 5, 12, 1

    def __init__(self):
        self.seen: list[list[int]] = []

    def search_ids(self, rows):
        self.seen += rows
        width = max(len(r) for r in rows)
        ids = np.zeros([len(rows), 2, width], np.int32)  # [rows, nbest, length]
        for i, row in enumerate(rows):
            words = row[:-1][::-1] if len(row) % 2 else []  # odd with EOS: even without
            ids[i, :, : len(words) + 1] = [*words, 1]
        return types.SimpleNamespace(ids=tf.constant(ids))


def test_empty_translations_keep_their_references(tmp_path):
    sources = [[3, 4, 1], [5, 1], [6, 7, 8, 9, 1], [3, 4, 5, 6, 7, 8, 9, 10, 1]]
    references = [[12, 1], [11, 1], [10, 1], [9, 1]]
    source = tmp_path / "in" / "train-00000.tfrecord"
    source.parent.mkdir()
    distilling.write_shard(str(source), sources, references)
    progress = DistillProgress(shards=1, total=4)
    teacher = _ReversingTeacher()
    stats = distilling.distill_shard(teacher, str(source), str(tmp_path), {"x": 1}, progress)
    inputs, targets = _examples(tmp_path / "train-00000.tfrecord")
    assert inputs == sources
    # The longest source is cut to the teacher's 5 positions, as Translator.encode cuts lines.
    assert teacher.seen[-1] == [3, 4, 5, 6, 1]
    assert targets == [[4, 3, 1], [11, 1], [9, 8, 7, 6, 1], [6, 5, 4, 3, 1]]
    assert (stats["examples"], stats["kept_reference"], stats["x"]) == (4, 1, 1)


def test_hypothesis_ids_end_at_the_first_eos_or_padding():
    ids = np.array([[5, 6, 1, 0], [1, 0, 0, 0], [7, 7, 7, 7], [4, 0, 0, 0]])
    assert distilling.hypothesis_ids(ids) == [[5, 6, 1], [1], [7, 7, 7, 7, 1], [4, 1]]


def test_refusals_come_before_anything_is_written(teacher, tmp_path):
    data_dir, teacher_dir = teacher
    data_files = sorted(os.listdir(data_dir))
    config = DistillConfig(
        RunFlags(str(teacher_dir), data_dir=str(data_dir)), str(tmp_path / "out")
    )

    def refused(match: str, **changes) -> None:
        with pytest.raises(ValueError, match=match):
            distill(dataclasses.replace(config, **changes))

    other = tmp_path / "other"  # holds another vocabulary
    other.mkdir()
    (other / "vocab.words.txt").write_text("<pad>\n<EOS>\n<unk>\na\nb\n")
    refused(r"holds another vocabulary \(vocab.words.txt", output_data_dir=str(other))
    (other / "vocab.words.txt").unlink()
    (other / "notes.txt").write_text("mine\n")
    refused("neither empty nor an earlier output of t2t-distill", output_data_dir=str(other))
    refused("--output_data_dir is --data_dir", output_data_dir=str(data_dir))
    # A teacher that trained with another vocabulary.
    stranger = tmp_path / "stranger"
    shutil.copytree(teacher_dir, stranger)
    info = RunInfo.load(str(stranger))
    dataclasses.replace(info, vocab_sha256="0" * 64).save(str(stranger))
    stranger_flags = dataclasses.replace(config.teacher, output_dir=str(stranger))
    refused("was trained with another vocabulary", teacher=stranger_flags)
    assert not (tmp_path / "out").exists()
    assert os.listdir(other) == ["notes.txt"]
    assert sorted(os.listdir(data_dir)) == data_files


def test_cli_refuses_a_data_dir_without_a_train_split(teacher, tmp_path):
    data_dir, teacher_dir = teacher
    no_train = tmp_path / "no_train"
    no_train.mkdir()
    metadata = read_metadata(str(data_dir))
    del metadata["splits"]["train"]
    (no_train / "metadata.json").write_text(json.dumps(metadata))
    shutil.copy(data_dir / "vocab.words.txt", no_train)
    done = command(
        "t2t_distill", f"--teacher={teacher_dir}", f"--data_dir={no_train}",
        f"--output_data_dir={tmp_path / 'out'}",
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == (
        f"t2t-distill: error: {no_train} has no training split to translate (its splits: dev, "
        "test); pass a data_dir that t2t-datagen wrote with one"
    )
    assert not (tmp_path / "out").exists()
    helped = command("t2t_distill", "--help")
    assert helped.returncode == 0
    for flag in ("--teacher", "--data_dir", "--output_data_dir", "--beam_size", "--alpha"):
        assert f"  {flag}:" in helped.stdout, flag


def test_a_damaged_source_shard_is_named(teacher, tmp_path, tf_iterators):
    data_dir, teacher_dir = teacher
    copy = shutil.copytree(data_dir, tmp_path / "data")
    shard = copy / SHARDS[1]
    size = shard.stat().st_size
    shard.write_bytes(shard.read_bytes()[:-20])  # truncated
    config = DistillConfig(RunFlags(str(teacher_dir), data_dir=str(copy)), str(tmp_path / "out"))
    with pytest.raises(shard_check.DamagedShardError) as refused:
        distill(config)
    assert str(refused.value).startswith(
        f"{shard}: a damaged shard ({size - 20:,} bytes where train-00001.stats.json records "
        f"{size:,}); rerun t2t-datagen"
    )
    assert not os.path.exists(tmp_path / "out" / "metadata.json")
    # The kept error does not hold the shard's reader.
    assert tf_iterators and all(ref() is None for ref in tf_iterators)


def test_a_damaged_output_shard_is_translated_again(distilled, tmp_path, caplog):
    config, metadata = distilled
    copy = shutil.copytree(config.output_data_dir, tmp_path / "copy")
    shard = copy / SHARDS[2]
    written = shard.read_bytes()
    shard.write_bytes(written[:50] + bytes([written[50] ^ 1]) + written[51:])
    caplog.set_level(logging.WARNING, logger="absl")
    assert distill(dataclasses.replace(config, output_data_dir=str(copy))) == metadata
    assert f"{SHARDS[2]} is damaged (its SHA-256 is not the one" in caplog.text
    assert shard.read_bytes() == written
