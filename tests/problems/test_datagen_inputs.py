"""Datagen notices changed inputs (issue 17, probe 6): metadata.json and datagen.json record the
size and SHA-256 of each input file (folders: a listing digest), and a rerun over changed inputs
is an error naming the file, whether the data_dir is finished or interrupted."""

import json
import logging
import os

import pytest

from t2t_lite.problems import get_problem, inputs

LINES = [f"w{i} w{i + 1} w{i + 2}" for i in range(30)]


def _files(folder, target_lines=None):
    paths = {}
    for split, lines in (("train", LINES), ("dev", LINES[:5])):
        for side, text in (("src", lines), ("tgt", target_lines or [t.upper() for t in lines])):
            paths[f"{split}_{side}"] = str(folder / f"{split}.{side}")
            (folder / f"{split}.{side}").write_text("\n".join(text[: len(lines)]) + "\n")
    return paths


def _datagen(data_dir, paths):
    return get_problem("text2text").generate_data(
        str(data_dir), vocab_type="words", vocab_size="80", **paths
    )


def test_inputs_are_recorded_with_size_and_sha256(tmp_path):
    paths = _files(tmp_path)
    meta = _datagen(tmp_path / "data", paths)
    entry = meta["inputs"]["train_tgt"]
    data = open(paths["train_tgt"], "rb").read()
    assert entry["path"] == paths["train_tgt"] and entry["size"] == len(data)
    assert entry["sha256"] == __import__("hashlib").sha256(data).hexdigest()
    assert set(meta["inputs"]) == {"train_src", "train_tgt", "dev_src", "dev_tgt"}
    state = json.loads((tmp_path / "data" / "datagen.json").read_text())
    assert state["inputs"] == meta["inputs"]
    assert _datagen(tmp_path / "data", paths) == meta  # unchanged: nothing to do


@pytest.mark.parametrize("finished", [True, False])
def test_a_changed_input_at_the_same_path_is_an_error_naming_it(tmp_path, finished):
    paths = _files(tmp_path)
    data_dir = tmp_path / "data"
    _datagen(data_dir, paths)
    if not finished:  # as if killed before metadata.json
        os.remove(data_dir / "metadata.json")
    # The same size, other bytes: only the digest tells.
    _files(tmp_path, target_lines=[t.lower() for t in LINES])
    with pytest.raises(ValueError) as error:
        _datagen(data_dir, paths)
    message = str(error.value)
    assert message.startswith(f"{data_dir} was written from other input files: ")
    assert f"--train_tgt {paths['train_tgt']} changed: " in message
    assert "--train_src" not in message
    assert message.endswith(f"write to a new --data_dir, or delete {data_dir}")


def test_a_missing_input_is_a_warning_only(tmp_path, caplog):
    paths = _files(tmp_path)
    meta = _datagen(tmp_path / "data", paths)
    os.remove(paths["dev_src"])
    with caplog.at_level(logging.WARNING):
        assert _datagen(tmp_path / "data", paths) == meta
    assert f"--dev_src {paths['dev_src']} is gone: cannot check" in caplog.text


def test_folders_are_recorded_by_listing_and_globs_file_by_file(tmp_path):
    raw = tmp_path / "raw"
    (raw / "sub").mkdir(parents=True)
    (raw / "a.txt").write_text("one\n")
    (raw / "sub" / "b.txt").write_text("two\n")
    options = {"raw_dir": str(raw), "train_trees": f"{raw}/*.txt,{raw}/sub/*.txt", "size": 3}
    before = inputs.fingerprint(options, None)
    assert before["raw_dir"]["files"] == 2 and before["raw_dir"]["size"] == 8
    assert sorted(before["train_trees"]["files"]) == [str(raw / "a.txt"), str(raw / "sub/b.txt")]
    assert inputs.changes(before, inputs.fingerprint(options, None)) == []
    (raw / "sub" / "b.txt").write_text("TWO\n")
    (raw / "sub" / "c.txt").write_text("new\n")
    changed = inputs.changes(before, inputs.fingerprint(options, None))
    assert changed[0].startswith(f"--raw_dir {raw} changed: 2 files, 8 bytes")
    assert changed[1].startswith(f"--train_trees {raw}/sub/b.txt changed: 4 bytes, SHA-256 ")
    assert changed[2] == f"--train_trees {raw}/sub/c.txt: new (it was not an input when the " + (
        "data was written)"
    )
    # A problem's own list wins over the naming convention.
    assert list(inputs.fingerprint(options, {"raw_dir": "path"})) == ["raw_dir"]


def test_wmt14_raw_dir_change_is_noticed(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    for split in ("train", "dev", "test"):
        (raw / f"{split}.en").write_text("\n".join(LINES[:10]) + "\n")
        (raw / f"{split}.de").write_text("\n".join(t.upper() for t in LINES[:10]) + "\n")
    problem = get_problem("wmt14_ende")
    problem.vocab_type, problem.vocab_size = "words", 60
    meta = problem.generate_data(str(tmp_path / "data"), raw_dir=str(raw))
    assert list(meta["inputs"]) == ["raw_dir"]  # tfds_dir is not fingerprinted
    (raw / "train.de").write_text("\n".join(t.lower() for t in LINES[:10]) + "\n")
    with pytest.raises(ValueError, match=f"--raw_dir {raw} changed: 6 files"):
        problem.generate_data(str(tmp_path / "data"), raw_dir=str(raw))
