"""Atomic file writes: write a temporary file in the same folder, then rename it into place.

A reader never sees a half-written file, and an interrupted writer leaves only a `.tmp` file that
the next run overwrites or removes. Files get the permissions the process's umask gives a new
file (0644 under umask 022), not `mkstemp`'s private 0600, so a team can share data and exports.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from typing import IO, Any

TMP_SUFFIX = ".tmp"
# When this run started, near enough (the first import of t2t_lite's runtime): temporary folders
# older than this were left by an earlier, interrupted run.
RUN_START = time.time()


def temporary_path(path: str) -> str:
    """A fresh temporary name next to `path` (same folder, so the rename is atomic)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(
        dir=directory, prefix="." + os.path.basename(path) + "-", suffix=TMP_SUFFIX
    )
    os.fchmod(fd, 0o666 & ~current_umask())
    os.close(fd)
    return tmp


def current_umask() -> int:
    """The process's umask (reading it means setting it, so it is set back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def commit(tmp: str, path: str) -> None:
    """Renames a finished temporary file into place, flushing it to disk first."""
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


# The errors of a write the disk refused: full, over quota, too large, failing, read-only.
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS})


def disk_refused(error: BaseException) -> bool:
    """Whether `error` is the disk refusing a write (not, say, a file the writer's input lacks)."""
    return isinstance(error, OSError) and error.errno in WRITE_ERRNOS


def write_failed(path: str, error: BaseException) -> OSError:
    """The one-line OSError of a write into `path` that failed (a full disk, mostly): the path,
    the reason and the space free there. The caller has removed its temporary file."""
    return OSError(
        f"could not write {path}: {error_line(error)} ({free_megabytes(path):.1f} MB free "
        "there); what was there before is kept, and no temporary file is left"
    )


def free_megabytes(path: str) -> float:
    """The space free on the file system that holds `path` (or its nearest existing folder)."""
    folder = os.path.abspath(path)
    while folder and not os.path.isdir(folder):
        folder = os.path.dirname(folder)
    return shutil.disk_usage(folder).free / 2**20 if folder else 0.0


def error_line(error: BaseException) -> str:
    """An OSError's or a TensorFlow error's own words, first line only."""
    text = getattr(error, "strerror", None) or getattr(error, "message", None) or str(error)
    return (str(text).strip().splitlines() or [type(error).__name__])[0][:300]


@contextlib.contextmanager
def open_atomic(path: str, mode: str = "w", **open_args: Any) -> Iterator[IO]:
    """Opens a temporary file next to `path` for writing (`mode` "w" or "wb", `open_args` as for
    `open`); on leaving the block the file is renamed into place, or removed if the block raised,
    leaving `path` as it was. For writers that stream their output."""
    tmp = temporary_path(path)
    try:
        with open(tmp, mode, **open_args) as handle:
            yield handle
        commit(tmp, path)
    except OSError as error:
        _remove(tmp)
        if disk_refused(error):  # a full disk: one line naming `path`
            raise write_failed(path, error) from None
        raise
    except BaseException:
        _remove(tmp)
        raise


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


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


def remove_stale_folders(directory: str, pattern: str, before: float | None = None) -> list[str]:
    """Deletes the folders in `directory` matching the glob `pattern` whose newest entry is
    older than `before` (default `RUN_START`): what a killed earlier run left, such as a
    checkpoint's `ckpt-N_temp/` or an export's `.tmp-export-*`. Returns the paths removed."""
    before = RUN_START if before is None else before
    removed = []
    for path in sorted(glob.glob(os.path.join(directory, pattern))):
        if not os.path.isdir(path) or _newest_mtime(path) >= before:
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _newest_mtime(folder: str) -> float:
    """The latest modification time of `folder` and everything under it."""
    newest = os.path.getmtime(folder)
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            try:
                newest = max(newest, os.path.getmtime(os.path.join(root, name)))
            except OSError:  # removed meanwhile
                continue
    return newest


def file_sha256(path: str) -> str:
    """The SHA-256 of a file's bytes, in hex, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
