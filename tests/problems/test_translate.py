"""WMT14 problems through mocked tfds builders and --raw_dir, and text2text with bad inputs."""

import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from t2t_lite.data import LineError, WordPieceTokenizer
from t2t_lite.hparams import get_hparams
from t2t_lite.problems import get_problem, read_metadata

WORDS = "the a house cat dog sees small big red green runs sleeps near far".split()


def _sentences(seed: int, count: int, capitalize: bool) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        words = [WORDS[i] for i in rng.integers(0, len(WORDS), size=rng.integers(2, 9))]
        sentence = " ".join(words) + "."
        out.append(sentence.upper() if capitalize else sentence)
    return out


SPLIT_SIZES = {"train": 120, "validation": 12, "test": 9}


@pytest.fixture(autouse=True)
def _no_bucket(monkeypatch):
    """No look for tfds's metadata in its cloud bucket: the look fails offline, and leaves a
    temporary folder behind for every builder made without prepared data (mocked ones)."""
    monkeypatch.setattr(tfds.core.DatasetInfo, "initialize_from_bucket", lambda self: None)


def _mock_wmt(target_language: str):
    """A stand-in for tfds's as_dataset: literal parallel sentences per split."""

    def as_dataset(self, split, **kwargs):
        assert self.name == "wmt14_translate"
        seed = list(SPLIT_SIZES).index(split)
        english = _sentences(seed, SPLIT_SIZES[split], capitalize=False)
        other = [s.upper() for s in english]
        return tf.data.Dataset.from_tensor_slices({"en": english, target_language: other})

    return tfds.testing.mock_data(as_dataset_fn=as_dataset)


@pytest.mark.parametrize(
    "name, language, vocab", [("wmt14_ende", "de", "bpe"), ("wmt14_enfr", "fr", "wordpiece")]
)
def test_wmt14_from_mocked_tfds(tmp_path, name, language, vocab):
    problem = get_problem(name)
    with _mock_wmt(language):
        meta = problem.generate_data(str(tmp_path), tfds_dir=str(tmp_path / "tfds"))
    assert meta["vocab"]["type"] == vocab and meta["metric"] == "bleu"
    assert {s: e["examples"] for s, e in meta["splits"].items()} == {
        "train": 120,
        "dev": 12,
        "test": 9,
    }
    tok = problem.tokenizer(str(tmp_path))
    ds = problem.make_dataset(
        str(tmp_path), "dev", get_hparams("transformer_tiny"), shuffle=False, repeat=False
    )
    pairs = set()
    for batch in ds:
        sources = tok.decode(batch["inputs"]).numpy()
        targets = tok.decode(batch["targets"]).numpy()
        pairs |= {(s.decode(), t.decode()) for s, t in zip(sources, targets, strict=True)}
    dev = _sentences(1, 12, capitalize=False)
    assert pairs == {(s, s.upper()) for s in dev}


def test_wmt14_raw_dir(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    for split, (seed, count) in {"train": (0, 60), "dev": (1, 5), "test": (2, 4)}.items():
        english = _sentences(seed, count, capitalize=False)
        (raw / f"{split}.en").write_text("\n".join(english) + "\n")
        (raw / f"{split}.de").write_text("\n".join(s.upper() for s in english) + "\n")
    meta = get_problem("wmt14_ende").generate_data(str(tmp_path / "data"), raw_dir=str(raw))
    assert [meta["splits"][s]["examples"] for s in ("train", "dev", "test")] == [60, 5, 4]
    # A dev file with a missing line: an error naming both files and counts, nothing written.
    (raw / "dev.de").write_text("ONE\nTWO\n")
    out = tmp_path / "data2"
    with pytest.raises(LineError, match=r"dev\.en has 5 lines, .*dev\.de has 2 lines"):
        get_problem("wmt14_ende").generate_data(str(out), raw_dir=str(raw))
    assert os.listdir(out) == []


def _text2text_files(tmp_path, train_tgt: bytes | None = None):
    src = "\n".join(_sentences(5, 40, capitalize=False)).encode()
    files = {
        "train_src": src,
        "train_tgt": train_tgt if train_tgt is not None else src.upper(),
        "dev_src": b"a cat.\n\nthe dog.\n",
        "dev_tgt": b"A CAT.\r\nX\r\nTHE DOG.\r\n",
    }
    paths = {}
    for key, data in files.items():
        paths[key] = str(tmp_path / f"{key}.txt")
        with open(paths[key], "wb") as f:
            f.write(data)
    return paths


def test_text2text_own_files(tmp_path):
    paths = _text2text_files(tmp_path)
    problem = get_problem("text2text")
    data_dir = str(tmp_path / "data")
    meta = problem.generate_data(data_dir, vocab_type="wordpiece", vocab_size="200", **paths)
    assert set(meta["splits"]) == {"train", "dev"}
    assert meta["splits"]["dev"]["examples"] == 2 and meta["splits"]["dev"]["skipped_empty"] == 1
    assert meta["vocab"]["type"] == "wordpiece"
    tok = problem.tokenizer(data_dir)
    assert isinstance(tok, WordPieceTokenizer)
    assert tok.decode_py(tok.encode_py("THE DOG.")) == "THE DOG."
    assert read_metadata(data_dir)["splits"]["train"]["examples"] == 40


@pytest.mark.parametrize(
    "train_tgt, error, message",
    [
        (
            b"ONE\nTWO\n",
            LineError,
            r"--train_src .*train_src\.txt has 40 lines, --train_tgt .*train_tgt\.txt has 2 lines",
        ),
        (b"ONE\rTWO\r", LineError, r"train_tgt\.txt:1: carriage return"),
        (b"ONE\nT\x00WO\n", LineError, r"train_tgt\.txt:2: NUL byte"),
        (b"ONE\n\xc3\x28\n", LineError, r"train_tgt\.txt:2: invalid UTF-8"),
    ],
)
def test_text2text_bad_files_write_nothing(tmp_path, train_tgt, error, message):
    paths = _text2text_files(tmp_path, train_tgt)
    data_dir = tmp_path / "data"
    with pytest.raises(error, match=message):
        get_problem("text2text").generate_data(str(data_dir), **paths)
    assert os.listdir(data_dir) == []


def test_text2text_missing_flag_and_file(tmp_path):
    paths = _text2text_files(tmp_path)
    del paths["dev_tgt"]
    with pytest.raises(ValueError, match="text2text needs --dev_tgt"):
        get_problem("text2text").generate_data(str(tmp_path / "d"), **paths)
    paths["dev_tgt"] = str(tmp_path / "absent.txt")
    with pytest.raises(FileNotFoundError, match=r"--dev_tgt: file not found: .*absent\.txt"):
        get_problem("text2text").generate_data(str(tmp_path / "d"), **paths)


def test_wmt14_makes_one_tfds_builder_for_all_its_splits(tmp_path, monkeypatch):
    """tfds leaves a temporary folder behind for each builder made before the data is
    prepared, so datagen makes one and reads every split through it."""
    made = []

    def builder(*args, **kwargs):
        made.append(args)
        return real(*args, **kwargs)

    real = tfds.builder
    monkeypatch.setattr(tfds, "builder", builder)
    with _mock_wmt("de"):
        get_problem("wmt14_ende").generate_data(str(tmp_path), tfds_dir=str(tmp_path / "tfds"))
    assert made == [("wmt14_translate/de-en",)]


def test_wmt14_without_tfds_data_points_to_raw_dir(tmp_path, monkeypatch):
    def offline(self, *args, **kwargs):
        raise ConnectionError("no route to host")

    monkeypatch.setattr(tfds.core.DatasetBuilder, "download_and_prepare", offline)
    out = tmp_path / "data"
    with pytest.raises(OSError, match=r"could not download .*de-en.*--raw_dir.*\.\{en,de\}"):
        get_problem("wmt14_ende").generate_data(str(out), tfds_dir=str(tmp_path / "tfds"))
    assert os.listdir(out) == []
