"""Shard writing: contents, empty-pair counting, and which finished shards a rerun keeps."""

import json
import os

import tensorflow as tf

from t2t_lite.data import build_vocab, load_tokenizer, shards
from t2t_lite.data.pipeline import parse_examples

PAIRS = [("a b", "b a"), ("c", ""), ("b", "c c"), ("a", "a")]


def _tokenizer(folder):
    build_vocab(str(folder), "words", [], 0, words=["a", "b", "c"])
    return load_tokenizer(str(folder))


def _read(path):
    records = list(tf.data.TFRecordDataset(path).batch(100).map(parse_examples))[0]
    return sorted(zip(records["inputs"].to_list(), records["targets"].to_list(), strict=True))


def test_shards_hold_ids_with_eos_and_count_empty_pairs(tmp_path):
    tok = _tokenizer(tmp_path)
    summary = shards.write_split(str(tmp_path), "train", PAIRS, tok, 2, vocab_sha256="v1")
    assert summary["shards"] == ["train-00000.tfrecord", "train-00001.tfrecord"]
    assert summary["examples"] == 3 and summary["skipped_empty"] == 1
    # a=3, b=4, c=5; EOS=1 ends every sequence.
    assert _read(str(tmp_path / "train-00000.tfrecord")) == [([3, 4, 1], [4, 3, 1])]
    assert _read(str(tmp_path / "train-00001.tfrecord")) == [([3, 1], [3, 1]), ([4, 1], [5, 5, 1])]
    assert summary["input_lengths"] == {
        "tokens": 7,
        "min": 2,
        "max": 3,
        "mean": 2.33,
        "p50": 2,
        "p90": 3,
        "p99": 3,
    }


def test_rerun_keeps_shards_of_the_same_vocabulary_only(tmp_path):
    tok = _tokenizer(tmp_path)
    shards.write_split(str(tmp_path), "dev", PAIRS, tok, 2, vocab_sha256="v1")
    stats_path = tmp_path / "dev-00000.stats.json"
    before = os.path.getmtime(stats_path)
    shards.write_split(str(tmp_path), "dev", PAIRS, tok, 2, vocab_sha256="v1")
    assert os.path.getmtime(stats_path) == before
    shards.write_split(str(tmp_path), "dev", PAIRS, tok, 2, vocab_sha256="v2")
    assert json.loads(stats_path.read_text())["vocab_sha256"] == "v2"


def test_two_datagen_processes_write_identical_bytes(tmp_path):
    """Issue 17, probe 7: the feature order inside serialized examples varied between processes
    (it follows the hash seed), so two complete runs wrote different shard bytes."""
    import subprocess
    import sys

    folders = [tmp_path / "a", tmp_path / "b"]
    for seed, folder in zip(("1", "2"), folders, strict=True):
        done = subprocess.run(
            [sys.executable, "-m", "t2t_lite.bin.t2t_datagen", "--problem=algorithmic_reverse",
             f"--data_dir={folder}", "--problem_options=train_size=300,dev_size=30,test_size=30"],
            capture_output=True, text=True, timeout=300,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONHASHSEED": seed},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
    names = sorted(os.listdir(folders[0]))
    assert names == sorted(os.listdir(folders[1]))
    assert [n for n in names if n.endswith(".tfrecord")] == [
        "dev-00000.tfrecord", "test-00000.tfrecord", "train-00000.tfrecord"
    ]  # fmt: skip
    for name in names:
        assert (folders[0] / name).read_bytes() == (folders[1] / name).read_bytes(), name
