"""A full disk (ENOSPC, injected where the write fails) in each writer outside the training
checkpoint: t2t-decode's output file, t2t-datagen's shards and t2t-export's version folder each
end in one error naming the path and the space free, keep what was there, and leave no
temporary file (tests/run/test_checkpoints.py covers best/, final/ and averaged/)."""

from __future__ import annotations

import errno
import os

import pytest
import tensorflow as tf

from t2t_lite.decode.runner import write_lines
from t2t_lite.problems import get_problem, read_metadata
from t2t_lite.runtime import atomic_io
from t2t_lite.serve import versions


def _full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_decode_output(tmp_path, monkeypatch):
    target = tmp_path / "out.txt"
    target.write_text("the earlier output\n")
    monkeypatch.setattr(atomic_io, "commit", _full)
    with pytest.raises(OSError) as refused:
        write_lines(["a", "b"], str(target))
    assert str(refused.value).startswith(f"could not write {target}: No space left on device (")
    assert "MB free there" in str(refused.value)
    assert target.read_text() == "the earlier output\n"
    assert os.listdir(tmp_path) == ["out.txt"]  # no .out.txt-*.tmp


def test_datagen_shards(tmp_path, monkeypatch):
    data_dir = tmp_path / "data"
    options = {"max_sequence_length": 4, "train_size": 20, "dev_size": 5, "test_size": 5}

    def full(self, record):
        raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(tf.io.TFRecordWriter, "write", full)
        with pytest.raises(OSError, match=r"could not write .*train-00000.*: No space left on"):
            get_problem("algorithmic_copy").generate_data(str(data_dir), **options)
    assert not [n for n in os.listdir(data_dir) if n.endswith(".tmp")]
    assert not (data_dir / "metadata.json").exists()
    get_problem("algorithmic_copy").generate_data(str(data_dir), **options)  # space again
    assert read_metadata(str(data_dir))["splits"]["train"]["examples"] == 20


def test_export_version_folder(tmp_path):
    export_dir = tmp_path / "exports"

    def partial(folder):
        with open(os.path.join(folder, "saved_model.pb"), "wb") as f:
            f.write(b"x" * 10)
        raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")

    with pytest.raises(OSError, match=rf"could not write {export_dir}/1: No space left on"):
        versions.write_version(str(export_dir), None, partial)
    assert os.listdir(export_dir) == []  # neither a version nor its temporary folder


def test_datagen_vocabulary_and_metadata(tmp_path, monkeypatch):
    data_dir = tmp_path / "data"
    options = {"max_sequence_length": 4, "train_size": 20, "dev_size": 5, "test_size": 5}
    commit = atomic_io.commit

    def full_for(name):
        def maybe_full(tmp, target):
            if os.path.basename(target) == name:
                raise OSError(errno.ENOSPC, "No space left on device")
            commit(tmp, target)

        return maybe_full

    for name in ("vocab.words.txt", "metadata.json"):
        with monkeypatch.context() as patch:
            patch.setattr(atomic_io, "commit", full_for(name))
            with pytest.raises(OSError, match=rf"could not write .*{name}: No space left on"):
                get_problem("algorithmic_copy").generate_data(str(data_dir), **options)
        assert not [n for n in os.listdir(data_dir) if n.endswith(".tmp")], name
    get_problem("algorithmic_copy").generate_data(str(data_dir), **options)  # space again
    assert read_metadata(str(data_dir))["splits"]["dev"]["examples"] == 5


def test_an_error_of_the_writer_itself_passes_through_unchanged(tmp_path):
    # Only the disk refusing a write becomes "could not write": an error raised by the code
    # producing the lines (an input file missing, a server's refusal) keeps its own words.
    target = tmp_path / "out.txt"
    with pytest.raises(FileNotFoundError, match="in.txt"):
        with atomic_io.open_atomic(str(target)) as f:
            f.write("a\n")
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", "in.txt")
    assert os.listdir(tmp_path) == []
