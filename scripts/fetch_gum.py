"""Fetch GUM's constituency trees for `make demo-parse`: cached, checked, resumable.

    python scripts/fetch_gum.py [--dest=DIR]     # prints the folder holding the *.ptb files

GUM (the Georgetown University Multilayer corpus, https://github.com/amir-zeldes/gum) keeps one
Penn-Treebank-style file per document in `const/`. This fetches the files listed in
`gum_trees.sha256` (beside this script: the SHA-256 of each file at the pinned commit) one by
one from GitHub's raw file host, each into a `.part` file renamed into place once its checksum
matches, so an interrupted fetch resumes with the files it lacks and a damaged file is fetched
again. The trees are CC-BY 4.0 annotations over texts with per-genre licences (some
non-commercial): for development and testing.

The default folder is $XDG_CACHE_HOME/t2t_lite/gum-<commit> (~/.cache/... without it). A
failure ends in one line, `fetch-gum: error: ...`, saying what to download and where to put it.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path

# The GUM commit whose const/*.ptb the manifest lists (2025-05-12, 281 documents).
COMMIT = "72ce5ac14978a324c2fd18d49484e65292cbe316"
BASE_URL = f"https://raw.githubusercontent.com/amir-zeldes/gum/{COMMIT}/const/"
MANIFEST = Path(__file__).with_name("gum_trees.sha256")
TIMEOUT_S = 30


class FetchError(Exception):
    """A file could not be fetched or did not match its checksum; the message says what to do."""


def read_manifest(path: Path = MANIFEST) -> dict[str, str]:
    """{file name: SHA-256 hex} from lines `<sha256>  <name>` (sha256sum's format)."""
    entries = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        digest, _, name = line.partition("  ")
        if len(digest) != 64 or not name or "/" in name:
            raise FetchError(f"{path}:{number}: expected '<sha256>  <file name>', got {line!r}")
        entries[name] = digest
    return entries


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def default_dest() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(cache) / "t2t_lite" / f"gum-{COMMIT[:12]}"


def fetch(dest: Path, base_url: str = BASE_URL, manifest: dict[str, str] | None = None) -> int:
    """Fetches into `dest` every manifest file that is missing or does not match its checksum;
    returns how many were fetched. A FetchError names the file and the URL on any failure."""
    manifest = read_manifest() if manifest is None else manifest
    dest.mkdir(parents=True, exist_ok=True)
    fetched = 0
    for name, digest in sorted(manifest.items()):
        target = dest / name
        if target.is_file() and sha256(target) == digest:
            continue
        url = base_url + name
        part = target.with_name(name + ".part")
        try:
            with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
                part.write_bytes(response.read())
        except (urllib.error.URLError, OSError) as e:
            part.unlink(missing_ok=True)
            reason = getattr(e, "reason", e)
            raise FetchError(
                f"cannot fetch {url} ({reason}): download the const/*.ptb files of GUM at commit "
                f"{COMMIT} from https://github.com/amir-zeldes/gum into {dest}, or set GUM_DIR "
                "to a folder holding them"
            ) from None
        if sha256(part) != digest:
            part.unlink()
            raise FetchError(
                f"{url} does not match its SHA-256 in {MANIFEST.name} ({digest[:12]}...): the "
                "file was changed or damaged on the way; try again, or set GUM_DIR"
            )
        os.replace(part, target)
        fetched += 1
    return fetched


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fetch-gum", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dest", type=Path, default=None, help="Where the *.ptb files go.")
    parser.add_argument("--base_url", default=BASE_URL, help="Where the files are fetched from.")
    args = parser.parse_args(argv)
    dest = args.dest or default_dest()
    try:
        count = fetch(dest, args.base_url)
    except FetchError as e:
        print(f"fetch-gum: error: {e}", file=sys.stderr)
        return 2
    print(f"fetch-gum: {count} files fetched, {len(read_manifest())} in {dest}", file=sys.stderr)
    print(dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
