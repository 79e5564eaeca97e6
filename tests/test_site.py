"""The documentation site builds as `make docs` builds it: MkDocs in strict mode, so a broken
link or anchor in the guides, the README, CHANGELOG.md or bench/'s pages, or an API reference
entry naming a symbol that is gone, fails this test (mkdocs.yml, scripts/site_hooks.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MKDOCS = Path(sys.executable).with_name("mkdocs")


def test_the_site_builds_in_strict_mode_with_every_reference_page(tmp_path):
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--target", str(REPO / "build" / "docs"), "--upgrade", str(REPO)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-3000:]
    site = tmp_path / "site"
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    built = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--site-dir", str(site)],
        cwd=REPO, capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-5000:]
    # the home page is the README, its links rewritten to the site's pages
    home = (site / "index.html").read_text(encoding="utf-8")
    assert 'href="training/#the-budgets-choice-of-model"' in home
    # every API page lists the symbols it names, each with its docstring's first words
    for page in sorted((REPO / "docs" / "api").glob("*.md")):
        html = (site / "api" / page.stem / "index.html").read_text(encoding="utf-8")
        for symbol in re.findall(r"^::: ([\w.]+)$", page.read_text(encoding="utf-8"), re.M):
            assert f'id="{symbol}"' in html, (page.name, symbol)
    assert (site / "changelog" / "index.html").is_file()
    assert (site / "bench" / "RESULTS" / "index.html").is_file()
