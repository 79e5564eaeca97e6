"""Damaged shards (t2t_lite.data.shard_check): a truncated or bit-flipped shard is named in one
line by whatever reads it (training, evaluation, t2t-distill: tests/train/test_distill.py), and
a t2t-datagen rerun finds it by the bytes and SHA-256 its statistics record and writes it
again, byte for byte, leaving the other files alone."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import tensorflow as tf
from command_helpers import command

from t2t_lite.data import shard_check
from t2t_lite.hparams import get_hparams
from t2t_lite.problems import get_problem, read_metadata
from t2t_lite.runtime.atomic_io import file_sha256

PROBLEM = "algorithmic_reverse"
OPTIONS = {"max_sequence_length": 5, "train_size": 600, "dev_size": 20, "test_size": 20}


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """A finished data_dir of algorithmic_reverse, one shard a split."""
    data_dir = tmp_path_factory.mktemp("reverse") / "data"
    get_problem(PROBLEM).generate_data(str(data_dir), **OPTIONS)
    return data_dir


@pytest.fixture
def data_dir(generated, tmp_path):
    """A copy of `generated` for a test to damage."""
    return shutil.copytree(generated, tmp_path / "data")


def _truncate(path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _flip(path) -> None:
    data = bytearray(path.read_bytes())
    data[100] ^= 0x08  # inside the first records' data: the size stays, a CRC breaks
    path.write_bytes(bytes(data))


DAMAGES = {"truncated": _truncate, "bit-flipped": _flip}


@pytest.mark.parametrize("how", [*DAMAGES, "deleted"])
def test_datagen_rerun_writes_a_damaged_shard_again(generated, data_dir, how, caplog):
    shard = data_dir / "train-00000.tfrecord"
    kept = {name: (data_dir / name).stat().st_mtime_ns for name in os.listdir(data_dir)}
    DAMAGES.get(how, os.remove)(shard)
    reason = shard_check.damage(str(shard)) if shard.exists() else "missing"
    size = (generated / "train-00000.tfrecord").stat().st_size
    expected = {
        "truncated": f"{size // 2:,} bytes where train-00000.stats.json records {size:,}",
        "bit-flipped": "its SHA-256 is not the one train-00000.stats.json records",
        "deleted": "missing",
    }
    assert reason == expected[how]
    caplog.set_level("WARNING", logger="absl")
    metadata = get_problem(PROBLEM).generate_data(str(data_dir), **OPTIONS)
    assert f"{shard} is damaged ({reason}): writing it again" in caplog.text
    assert file_sha256(str(shard)) == file_sha256(str(generated / "train-00000.tfrecord"))
    assert sum(1 for _ in tf.data.TFRecordDataset(str(shard))) == 600
    assert metadata["splits"] == read_metadata(str(generated))["splits"]
    assert shard_check.damage(str(shard)) is None
    rewritten = {n for n in kept if (data_dir / n).stat().st_mtime_ns != kept[n]}
    assert rewritten <= {"train-00000.tfrecord", "train-00000.stats.json", "metadata.json",
                         "datagen.json"}, rewritten  # fmt: skip


def test_a_shard_written_before_its_hash_was_recorded_is_checked_by_its_records(data_dir):
    stats = data_dir / "train-00000.stats.json"
    values = json.loads(stats.read_text())
    del values["bytes"], values["sha256"]
    stats.write_text(json.dumps(values))
    shard = data_dir / "train-00000.tfrecord"
    assert shard_check.damage(str(shard)) is None
    data = shard.read_bytes()
    shard.write_bytes(data[:40])  # cut inside the first record
    assert shard_check.damage(str(shard)) == "truncated record at 0"


@pytest.mark.parametrize("how", DAMAGES)
def test_reading_a_damaged_shard_names_it(data_dir, how):
    DAMAGES[how](data_dir / "train-00000.tfrecord")
    dataset = get_problem(PROBLEM).make_dataset(
        str(data_dir), "train", get_hparams("transformer_tiny"), shuffle=False, repeat=False
    )
    with pytest.raises(shard_check.DamagedShardError) as refused:
        with shard_check.damaged_shards_named(str(data_dir)):
            for _ in dataset:
                pass
    assert str(refused.value).startswith(f"{data_dir / 'train-00000.tfrecord'}: a damaged shard (")
    assert str(refused.value).endswith(
        "; rerun t2t-datagen with the data_dir's --problem and options, which checks the shards "
        "and writes the damaged ones again"
    )


def test_another_data_loss_passes_unchanged(data_dir):
    with pytest.raises(tf.errors.DataLossError, match="a damaged checkpoint"):
        with shard_check.damaged_shards_named(str(data_dir)):
            raise tf.errors.DataLossError(None, None, "a damaged checkpoint")


def test_t2t_train_names_the_damaged_shard_in_one_line(data_dir, tmp_path):
    _flip(data_dir / "train-00000.tfrecord")
    done = command(
        "t2t_train", f"--problem={PROBLEM}", f"--data_dir={data_dir}",
        f"--output_dir={tmp_path / 'run'}", "--hparams_set=transformer_tiny",
        "--hparams=num_encoder_layers=1,num_decoder_layers=1", "--train_steps=3",
    )  # fmt: skip
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert lines[-1] == (
        f"t2t-train: error: {data_dir / 'train-00000.tfrecord'}: a damaged shard (its SHA-256 is "
        "not the one train-00000.stats.json records); rerun t2t-datagen with the data_dir's "
        "--problem and options, which checks the shards and writes the damaged ones again"
    )
