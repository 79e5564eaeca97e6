"""Without Debian's tools the LibreOffice help problems say what to do instead."""

import pytest

from t2t_lite.problems import lohelp


def test_missing_apt_get_says_pass_help_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no apt-get, no dpkg-deb
    with pytest.raises(lohelp.HelpFetchError, match="apt-get is not available on this machine"):
        lohelp.fetch_help(str(tmp_path / "cache"), "de")
    with pytest.raises(OSError, match="pass --help_dir with an unpacked"):
        lohelp.fetch_help(str(tmp_path / "cache"), "de")
