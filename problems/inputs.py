"""The input files of a datagen run: which problem options name them, their fingerprints, and
what changed since a data_dir was written.

An option names inputs by the end of its name: `*_src`, `*_tgt`, `*_file`, `*_model` and
`*_dir` a path (a file or a folder), `*_trees` and `*_files` comma-separated globs of files. A
problem lists its own instead in `Problem.input_options` ({option: "path" | "glob"}).

Files, and each file a glob matches, are recorded with their size and SHA-256. Folders can be
large (a treebank, a corpus of raw files, an unpacked help tree), so a folder is recorded by its
number of files, their total size and one SHA-256 over every file's relative name, size and
modification time: a file added, removed, resized or touched is noticed without reading every
byte on each rerun (a copy that keeps the bytes but not the times counts as a change).
"""

from __future__ import annotations

import glob
import hashlib
import os
from typing import Any

from absl import logging

_PATH_SUFFIXES = ("_src", "_tgt", "_file", "_model", "_dir")
_GLOB_SUFFIXES = ("_trees", "_files")


def input_kinds(options: dict[str, Any], declared: dict[str, str] | None) -> dict[str, str]:
    """{option: "path" | "glob"} for the options of `options` that name inputs and are set."""
    if declared is None:
        declared = {
            name: "glob" if name.endswith(_GLOB_SUFFIXES) else "path"
            for name in options
            if name.endswith(_PATH_SUFFIXES + _GLOB_SUFFIXES)
        }
    return {name: kind for name, kind in declared.items() if options.get(name)}


def fingerprint(options: dict[str, Any], declared: dict[str, str] | None) -> dict[str, dict]:
    """{option: its fingerprint} for the options that name inputs (`declared` by the problem, or
    by their names; see the module doc)."""
    entries = {}
    for name, kind in sorted(input_kinds(options, declared).items()):
        value = str(options[name])
        if kind == "glob":
            files = _glob_files(value)
            entries[name] = {"glob": value, "files": {f: _file_entry(f) for f in files}}
        else:
            entries[name] = {"path": value, **_path_entry(os.path.expanduser(value))}
    return entries


def check_unchanged(data_dir: str, recorded: dict[str, dict], current: dict[str, dict]) -> None:
    """A ValueError naming every input file that changed since datagen wrote `data_dir` (a
    warning for those that are gone: they cannot be compared)."""
    for gone in missing(current):
        logging.warning("%s is gone: cannot check that %s was made from it", gone, data_dir)
    changed = changes(recorded, current)
    if changed:
        raise ValueError(
            f"{data_dir} was written from other input files: "
            + "; ".join(changed)
            + f". Datagen does not mix data; write to a new --data_dir, or delete {data_dir}"
        )


def changes(recorded: dict[str, dict], current: dict[str, dict]) -> list[str]:
    """What differs between two fingerprints, one line per file or folder, each naming it and
    its option; inputs that are gone are not listed (they cannot be compared)."""
    found = []
    for name in sorted(set(recorded) | set(current)):
        was, now = recorded.get(name, {}), current.get(name, {})
        if "glob" in now or "glob" in was:
            files = sorted(set(was.get("files", {})) | set(now.get("files", {})))
            found += [
                _describe(f"--{name} {f}", was.get("files", {}).get(f), now.get("files", {}).get(f))
                for f in files
                if was.get("files", {}).get(f) != now.get("files", {}).get(f)
            ]
        elif was != now and not now.get("missing"):
            found.append(_describe(f"--{name} {now.get('path') or was.get('path')}", was, now))
    return found


def missing(current: dict[str, dict]) -> list[str]:
    """The recorded paths that no longer exist (a warning: nothing to compare)."""
    return [f"--{name} {entry['path']}" for name, entry in current.items() if entry.get("missing")]


def _describe(what: str, was: dict | None, now: dict | None) -> str:
    if not was:
        return f"{what}: new (it was not an input when the data was written)"
    if not now:
        return f"{what}: no longer matched"
    return f"{what} changed: {_summary(was)} when the data was written, now {_summary(now)}"


def _summary(entry: dict) -> str:
    if entry.get("missing"):
        return "missing"
    if "sha256" in entry:
        return f"{entry['size']} bytes, SHA-256 {entry['sha256'][:12]}"
    listing = entry["listing_sha256"][:12]
    return f"{entry['files']} files, {entry['size']} bytes, listing SHA-256 {listing}"


def _glob_files(patterns: str) -> list[str]:
    """The files matching comma-separated globs, sorted (as the parsing problems read them)."""
    files = set()
    for pattern in patterns.split(","):
        matches = glob.glob(os.path.expanduser(pattern.strip()))
        files.update(m for m in matches if os.path.isfile(m))
    return sorted(files)


def _path_entry(path: str) -> dict:
    if os.path.isfile(path):
        return _file_entry(path)
    if os.path.isdir(path):
        return _folder_entry(path)
    return {"missing": True}


def _file_entry(path: str) -> dict:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
            size += len(block)
    return {"size": size, "sha256": digest.hexdigest()}


def _folder_entry(folder: str) -> dict:
    listing = hashlib.sha256()
    count = total = 0
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            try:
                stat = os.stat(path)
            except OSError:  # a dangling link: not something datagen can read either
                continue
            relative = os.path.relpath(path, folder)
            listing.update(f"{relative}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
            count, total = count + 1, total + stat.st_size
    return {"files": count, "size": total, "listing_sha256": listing.hexdigest()}
