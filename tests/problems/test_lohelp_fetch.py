"""Without Debian's tools the LibreOffice help problems say what to do instead."""

import pytest

from t2t_lite.problems import lohelp


def test_missing_apt_get_says_pass_help_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no apt-get, no dpkg-deb
    with pytest.raises(lohelp.HelpFetchError, match="apt-get is not available on this machine"):
        lohelp.fetch_help(str(tmp_path / "cache"), "de")
    with pytest.raises(OSError, match="pass --help_dir with an unpacked"):
        lohelp.fetch_help(str(tmp_path / "cache"), "de")


def _tool(folder, name, script):
    path = folder / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)


def test_a_relative_cache_dir_is_unpacked_from_where_the_download_went(tmp_path, monkeypatch):
    tools = tmp_path / "tools"
    tools.mkdir()
    # apt-get download writes the .deb into its working directory; dpkg-deb fails unless the
    # archive path it is given exists from its own working directory.
    _tool(tools, "apt-get", 'echo deb > "$2_1.0_all.deb"\n')
    _tool(tools, "dpkg-deb", 'test -f "$2" || exit 2\nmkdir -p "$3/usr/share"\n')
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin:/bin")
    monkeypatch.chdir(tmp_path)
    root = lohelp.fetch_help("data/raw", "de")
    assert root == str(tmp_path / "data/raw/unpacked" / lohelp.INSTALLED_HELP.lstrip("/"))
    assert sorted(p.name for p in (tmp_path / "data/raw").glob("*.unpacked")) == [
        "libreoffice-help-de.unpacked",
        "libreoffice-help-en-us.unpacked",
    ]
