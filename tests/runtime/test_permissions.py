"""Files t2t_lite writes get the umask's permissions, not mkstemp's private 0600, so a team can
share a data folder, a run or an export."""

from __future__ import annotations

import os
import stat

import pytest

from t2t_lite.runtime import atomic_io


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_atomic_files_follow_the_umask(tmp_path, umask_022):
    atomic_io.write_text(str(tmp_path / "a.txt"), "x")
    assert _mode(tmp_path / "a.txt") == 0o644
    os.umask(0o077)
    atomic_io.write_json(str(tmp_path / "b.json"), {})
    assert _mode(tmp_path / "b.json") == 0o600


def test_datagen_outputs_are_readable_by_others(tmp_path, umask_022):
    from t2t_lite.problems import get_problem

    data_dir = tmp_path / "data"
    get_problem("algorithmic_reverse").generate_data(
        str(data_dir), max_sequence_length=4, train_size=20, dev_size=5, test_size=5
    )
    names = sorted(os.listdir(data_dir))
    assert "metadata.json" in names and "vocab.words.txt" in names
    assert any(".tfrecord" in n or "-of-" in n for n in names), names
    modes = {name: oct(_mode(data_dir / name)) for name in names}
    assert set(modes.values()) == {"0o644"}, modes
