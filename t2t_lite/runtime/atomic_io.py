"""Atomic file writes: write a temporary file in the same folder, then rename it into place.

A reader never sees a half-written file, and an interrupted writer leaves only a `.tmp` file that
the next run overwrites or removes.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from typing import IO, Any

TMP_SUFFIX = ".tmp"


def temporary_path(path: str) -> str:
    """A fresh temporary name next to `path` (same folder, so the rename is atomic)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(
        dir=directory, prefix="." + os.path.basename(path) + "-", suffix=TMP_SUFFIX
    )
    os.close(fd)
    return tmp


def commit(tmp: str, path: str) -> None:
    """Renames a finished temporary file into place, flushing it to disk first."""
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


@contextlib.contextmanager
def open_atomic(path: str, mode: str = "w", **open_args: Any) -> Iterator[IO]:
    """Opens a temporary file next to `path` for writing (`mode` "w" or "wb", `open_args` as for
    `open`); on leaving the block the file is renamed into place, or removed if the block raised,
    leaving `path` as it was. For writers that stream their output."""
    tmp = temporary_path(path)
    try:
        with open(tmp, mode, **open_args) as handle:
            yield handle
    except BaseException:
        os.remove(tmp)
        raise
    commit(tmp, path)


def write_bytes(path: str, data: bytes) -> None:
    """Writes `data` to `path` atomically."""
    with open_atomic(path, "wb") as f:
        f.write(data)


def write_text(path: str, text: str) -> None:
    """Writes `text` to `path` atomically, as UTF-8."""
    write_bytes(path, text.encode("utf-8"))


def write_json(path: str, value: Any) -> None:
    """Writes `value` to `path` atomically as indented JSON with sorted keys and a final newline."""
    write_text(path, json.dumps(value, indent=2, sort_keys=True) + "\n")


def remove_stale_temporaries(directory: str) -> int:
    """Deletes `.*.tmp` files an interrupted run left in `directory`; returns how many."""
    removed = 0
    if os.path.isdir(directory):
        for name in os.listdir(directory):
            if name.startswith(".") and name.endswith(TMP_SUFFIX):
                os.remove(os.path.join(directory, name))
                removed += 1
    return removed
