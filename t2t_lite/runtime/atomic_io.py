"""Atomic file writes: write a temporary file in the same folder, then rename it into place.

A reader never sees a half-written file, and an interrupted writer leaves only a `.tmp` file that
the next run overwrites or removes.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

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


def write_bytes(path: str, data: bytes) -> None:
    tmp = temporary_path(path)
    with open(tmp, "wb") as f:
        f.write(data)
    commit(tmp, path)


def write_text(path: str, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_json(path: str, value: Any) -> None:
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
