"""scripts/fetch_gum.py (make demo-parse's GUM trees) against an HTTP server on 127.0.0.1 that
serves files the test makes: fetched and checked, cached, resumed after a kill, refetched when
damaged, refused when the server sends other bytes, one line when offline."""

from __future__ import annotations

import functools
import hashlib
import http.server
import importlib.util
import os
import socket
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED_GUM = REPO.parent / "shared" / "data" / "gum"


def _load_script():
    spec = importlib.util.spec_from_file_location("fetch_gum", REPO / "scripts" / "fetch_gum.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fetch_gum = _load_script()


class _Handler(http.server.SimpleHTTPRequestHandler):
    requests: list[str] = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        type(self).requests.append(self.path)
        super().do_GET()

    def log_message(self, *args):  # quiet
        pass


@pytest.fixture
def server(tmp_path):
    """(base URL, the served folder, the request log) of a server on 127.0.0.1."""
    served = tmp_path / "served"
    served.mkdir()
    _Handler.requests = []
    handler = functools.partial(_Handler, directory=str(served))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/", served, _Handler.requests
    httpd.shutdown()
    httpd.server_close()


def _trees(served: Path, count: int = 4) -> dict[str, str]:
    """Writes `count` small tree files into `served`; returns their manifest."""
    manifest = {}
    for i in range(count):
        data = f"(ROOT (S (NP (NN tree{i})) (VP (VBZ is) (ADJP (JJ small)))))\n".encode()
        (served / f"GUM_test_{i}.ptb").write_bytes(data)
        manifest[f"GUM_test_{i}.ptb"] = hashlib.sha256(data).hexdigest()
    return manifest


def test_fetch_checks_caches_and_resumes(server, tmp_path):
    url, served, requests = server
    manifest = _trees(served)
    dest = tmp_path / "cache"
    assert fetch_gum.fetch(dest, url, manifest) == 4
    for name in manifest:
        assert (dest / name).read_bytes() == (served / name).read_bytes()
    assert not list(dest.glob("*.part"))
    requests.clear()
    assert fetch_gum.fetch(dest, url, manifest) == 0 and requests == []  # cached: no request
    # A killed fetch: one file missing, one left as a .part; a third damaged in place.
    names = sorted(manifest)
    (dest / names[0]).unlink()
    (dest / names[1]).rename(dest / (names[1] + ".part"))
    (dest / names[2]).write_text("(ROOT damaged")
    assert fetch_gum.fetch(dest, url, manifest) == 3
    assert sorted(requests) == [f"/{n}" for n in names[:3]]
    assert all(fetch_gum.sha256(dest / n) == d for n, d in manifest.items())
    assert not list(dest.glob("*.part"))


def test_other_bytes_are_refused_and_nothing_is_left(server, tmp_path):
    url, served, _ = server
    manifest = _trees(served, 2)
    (served / "GUM_test_1.ptb").write_text("(ROOT (X changed))\n")
    dest = tmp_path / "cache"
    with pytest.raises(fetch_gum.FetchError, match="does not match its SHA-256") as caught:
        fetch_gum.fetch(dest, url, manifest)
    assert "GUM_test_1.ptb" in str(caught.value) and "\n" not in str(caught.value)
    assert sorted(p.name for p in dest.iterdir()) == ["GUM_test_0.ptb"]  # no .part, no bad file


def test_offline_is_one_line_naming_what_to_download(tmp_path, capsys):
    with socket.socket() as probe:  # a port that nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dest = tmp_path / "cache"
    code = fetch_gum.main([f"--dest={dest}", f"--base_url=http://127.0.0.1:{port}/"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("fetch-gum: error: cannot fetch http://127.0.0.1:")
    assert fetch_gum.COMMIT in err and "GUM_DIR" in err and str(dest) in err
    assert not any(dest.iterdir())


def test_main_prints_the_folder(server, tmp_path, capsys, monkeypatch):
    url, served, _ = server
    manifest = _trees(served, 3)
    monkeypatch.setattr(fetch_gum, "read_manifest", lambda path=None: manifest)
    assert fetch_gum.main([f"--dest={tmp_path / 'd'}", f"--base_url={url}"]) == 0
    out = capsys.readouterr()
    assert out.out.strip() == str(tmp_path / "d") and "3 files fetched" in out.err


def test_the_manifest_pins_gums_trees():
    manifest = fetch_gum.read_manifest()
    assert len(manifest) == 281 and all(name.endswith(".ptb") for name in manifest)
    assert len(fetch_gum.COMMIT) == 40 and fetch_gum.COMMIT in fetch_gum.BASE_URL
    if SHARED_GUM.is_dir():  # the development copy is that commit's const/ folder
        found = {p.name: fetch_gum.sha256(p) for p in SHARED_GUM.glob("*.ptb")}
        assert found == manifest


def test_a_bad_manifest_line_names_the_line(tmp_path):
    bad = tmp_path / "m.sha256"
    bad.write_text("ab  GUM_x.ptb\n")
    with pytest.raises(fetch_gum.FetchError, match=r"m\.sha256:1: expected"):
        fetch_gum.read_manifest(bad)
    assert os.path.exists(bad)
