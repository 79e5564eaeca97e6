"""MkDocs hooks for the documentation site (mkdocs.yml, `make docs`): the pages that live
outside docs/ in the repository join the site where a reader of the repository finds them, and
their links are rewritten to the site's paths.

- README.md is the site's home page (index.md), CHANGELOG.md its changelog.md;
- bench/'s Markdown pages and pictures (the benchmark record and its dated results) keep their
  folder: bench/RESULTS.md, bench/results/*.md.
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.structure.files import File

REPO = Path(__file__).resolve().parents[1]
# (path in the repository, path in the site)
OUTSIDE = [("README.md", "index.md"), ("CHANGELOG.md", "changelog.md")]
LINK = re.compile(r"\]\(([^)#\s]+)")


def _outside_files() -> list[tuple[Path, str]]:
    found = [(REPO / src, uri) for src, uri in OUTSIDE]
    for pattern in ("*.md", "*.png", "results/*.md", "results/*.png"):
        found += [(p, str(p.relative_to(REPO))) for p in sorted((REPO / "bench").glob(pattern))]
    return found


def on_files(files, config):
    for path, uri in _outside_files():
        if path.is_file():
            files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files


def _site_target(page_repo_path: str, target: str) -> str:
    """A link `target` written on the repository's page `page_repo_path`, as the site's page of
    the same file sees it."""
    if "://" in target or target.startswith(("mailto:", "/")):
        return target
    repo_target = (Path(page_repo_path).parent / target).as_posix()
    resolved = Path("/" + repo_target).resolve().as_posix().lstrip("/")
    site = dict(OUTSIDE).get(resolved)
    if site is None:
        site = resolved[len("docs/") :] if resolved.startswith("docs/") else resolved
    page_site = dict(OUTSIDE).get(page_repo_path) or (
        page_repo_path[len("docs/") :] if page_repo_path.startswith("docs/") else page_repo_path
    )
    depth = page_site.count("/")
    return "../" * depth + site


def on_page_markdown(markdown, page, config, files):
    src = page.file.src_uri
    repo_path = {uri: source for source, uri in OUTSIDE}.get(src)
    if repo_path is None:
        repo_path = src if src.startswith("bench/") else "docs/" + src
    return LINK.sub(lambda m: "](" + _site_target(repo_path, m.group(1)), markdown)
