"""The session fixtures' guard (tests/reverse_words.py): a folder the tests share is read-only
to them, and a test that writes into it anyway (as root, whom file modes do not stop) fails the
session, naming what it changed."""

import os

import pytest
from reverse_words import read_only


def test_a_shared_folder_is_read_only_and_a_write_into_it_fails(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "hparams.json").write_text("{}")
    with read_only(str(tmp_path)):  # left alone: nothing to say
        assert not os.access(tmp_path / "run", os.W_OK) or os.geteuid() == 0
    with pytest.raises(AssertionError, match=r"changed the shared folder .*\['run', 'run/new'\]"):
        with read_only(str(tmp_path)):
            if os.geteuid() != 0:
                with pytest.raises(PermissionError):
                    (tmp_path / "run" / "new").write_text("x")
                os.chmod(tmp_path / "run", 0o755)  # a test that forces its way in
            (tmp_path / "run" / "new").write_text("x")
    assert os.access(tmp_path / "run", os.W_OK)  # writable again, for pytest to remove
