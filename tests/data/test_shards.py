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
