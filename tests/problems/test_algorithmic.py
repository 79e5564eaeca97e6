"""Algorithmic problems end to end: datagen, idempotent rerun, resume, and batches."""

import os

import numpy as np
import pytest

from t2t_lite.hparams import get_hparams
from t2t_lite.problems import get_problem, read_metadata

SMALL = {"train_size": 1200, "dev_size": 50, "test_size": 40}


@pytest.fixture(scope="module")
def reverse_dir(tmp_path_factory):
    data_dir = str(tmp_path_factory.mktemp("reverse"))
    get_problem("algorithmic_reverse").generate_data(data_dir, **SMALL)
    return data_dir


def test_metadata_and_vocabulary(reverse_dir):
    meta = read_metadata(reverse_dir)
    assert meta["problem"] == "algorithmic_reverse"
    assert {s: meta["splits"][s]["examples"] for s in meta["splits"]} == {
        "train": 1200,
        "dev": 50,
        "test": 40,
    }
    assert meta["splits"]["train"]["shards"] == [f"train-0000{i}.tfrecord" for i in range(1)]
    assert meta["vocab"]["size"] == 13 and len(meta["vocab"]["sha256"]) == 64
    lengths = meta["splits"]["train"]["input_lengths"]
    assert lengths["min"] == 2 and lengths["max"] == 21  # 1..20 symbols + EOS


def test_batches_are_reversed_symbols(reverse_dir):
    problem = get_problem("algorithmic_reverse")
    tok = problem.tokenizer(reverse_dir)
    hparams = get_hparams("transformer_tiny")
    count = 0
    for batch in problem.make_dataset(reverse_dir, "dev", hparams, shuffle=False, repeat=False):
        for src, tgt in zip(batch["inputs"].numpy(), batch["targets"].numpy(), strict=True):
            n = int(np.argmax(src == 1))
            assert src[n] == 1 and tgt[n] == 1 and not src[n + 1 :].any()
            np.testing.assert_array_equal(tgt[:n], src[:n][::-1])
            assert all(3 <= i < 13 for i in src[:n])
            count += 1
    assert count == 50
    text = tok.decode(batch["inputs"][:1]).numpy()[0].decode()
    assert text.split() == [str(i - 3) for i in src_ids(batch)]


def src_ids(batch):
    row = batch["inputs"].numpy()[0]
    return row[: int(np.argmax(row == 1))]


def test_rerun_is_a_no_op_and_resume_rebuilds_identically(reverse_dir, tmp_path):
    problem = get_problem("algorithmic_reverse")
    files = sorted(os.listdir(reverse_dir))
    mtimes = {f: os.path.getmtime(os.path.join(reverse_dir, f)) for f in files}
    problem.generate_data(reverse_dir, **SMALL)
    assert {f: os.path.getmtime(os.path.join(reverse_dir, f)) for f in files} == mtimes

    # An interrupted run: metadata never written, one shard's statistics missing, a stray
    # temporary file. The rerun rewrites only what is missing, byte for byte the same.
    options = dict(SMALL, train_size=5000)
    data_dir = str(tmp_path)
    problem.generate_data(data_dir, **options)
    shard = os.path.join(data_dir, "train-00001.tfrecord")
    with open(shard, "rb") as f:
        original = f.read()
    os.remove(os.path.join(data_dir, "metadata.json"))
    os.remove(os.path.join(data_dir, "train-00001.stats.json"))
    with open(shard, "wb") as f:
        f.write(b"half")
    open(os.path.join(data_dir, ".train-00002.tfrecord-x.tmp"), "w").close()
    kept = os.path.getmtime(os.path.join(data_dir, "train-00000.tfrecord"))
    problem.generate_data(data_dir, **options)
    with open(shard, "rb") as f:
        assert f.read() == original
    assert os.path.getmtime(os.path.join(data_dir, "train-00000.tfrecord")) == kept
    assert not [n for n in os.listdir(data_dir) if n.endswith(".tmp")]
    assert read_metadata(data_dir)["splits"]["train"]["examples"] == 5000


def test_other_options_in_the_same_data_dir_is_an_error(reverse_dir):
    with pytest.raises(ValueError, match="holds data of algorithmic_reverse with options"):
        get_problem("algorithmic_reverse").generate_data(reverse_dir, train_size=7)
    with pytest.raises(ValueError, match="holds data of algorithmic_reverse"):
        get_problem("algorithmic_copy").generate_data(reverse_dir, **SMALL)


def test_unknown_option_and_bad_value():
    problem = get_problem("algorithmic_copy")
    with pytest.raises(ValueError, match=r"does not take option\(s\) \['raw_dir'\]"):
        problem.resolve_options({"raw_dir": "/x"})
    with pytest.raises(ValueError, match="option train_size expects int, got 'ten'"):
        problem.resolve_options({"train_size": "ten"})
    assert problem.resolve_options({"train_size": "10"})["train_size"] == 10


def test_make_dataset_before_datagen_finished(tmp_path):
    with pytest.raises(FileNotFoundError, match="datagen has not finished"):
        get_problem("algorithmic_copy").make_dataset(
            str(tmp_path), "train", get_hparams("transformer_tiny"), shuffle=False, repeat=False
        )


def test_bool_options_parse_strictly():
    class WithFlag(get_problem("algorithmic_copy").__class__):
        default_options = {"lowercase": False}

    problem = WithFlag()
    assert problem.resolve_options({"lowercase": "false"}) == {"lowercase": False}
    assert problem.resolve_options({"lowercase": "True"}) == {"lowercase": True}
    with pytest.raises(ValueError, match="option lowercase expects bool, got 'yes please'"):
        problem.resolve_options({"lowercase": "yes please"})
