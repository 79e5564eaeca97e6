"""An export folder's numbered versions, as TF Serving watches them: `export_dir/1`, `/2`, ...

Every export format (the SavedModel, CTranslate2, LiteRT) writes its version into a hidden
temporary folder in `export_dir` and renames it once complete, so a server never sees half a
version, and an existing version is never overwritten.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable

from absl import logging

from t2t_lite.runtime import atomic_io

_TMP_PREFIX = ".tmp-export-"


def next_version(export_dir: str) -> int:
    """1 + the largest numeric version folder in `export_dir` (1 if there is none)."""
    if not os.path.isdir(export_dir):
        return 1
    versions = [int(name) for name in os.listdir(export_dir) if name.isdigit()]
    return max(versions, default=0) + 1


def check_target(export_dir: str, version: int | None) -> None:
    """Refuses an `export_dir` that is not a folder and a `version` that exists or is negative
    (t2t-export checks this before it restores the run)."""
    if os.path.exists(export_dir) and not os.path.isdir(export_dir):
        raise NotADirectoryError(
            f"--export_dir={export_dir} is a file; pass a folder (versions are written in it)"
        )
    if version is None:
        return
    if version < 0:
        raise ValueError(f"--version must be a non-negative integer, got {version}")
    final = os.path.join(export_dir, str(version))
    if os.path.exists(final):
        raise FileExistsError(
            f"--version={version}: {final} already exists; pass another --version (default: "
            "one more than the largest)"
        )


def write_version(export_dir: str, version: int | None, write: Callable[[str], None]) -> str:
    """Calls `write(folder)` on a fresh hidden folder in `export_dir`, then renames it to
    `export_dir/<version>` and returns that path. The version folder appears whole or not at
    all: on any error the temporary folder is removed and the error propagates.

    `version` defaults to `next_version(export_dir)`; an existing version is never overwritten.
    Temporary folders an interrupted export left (older than this run) are removed first.
    """
    check_target(export_dir, version)
    os.makedirs(export_dir, exist_ok=True)
    for stale in atomic_io.remove_stale_folders(export_dir, f"{_TMP_PREFIX}*"):
        logging.warning("removed %s, left by an interrupted export", stale)
    import tensorflow as tf  # here: t2t-export checks its target before TensorFlow loads

    version = next_version(export_dir) if version is None else version
    check_target(export_dir, version)
    final = os.path.join(export_dir, str(version))
    tmp = tempfile.mkdtemp(dir=export_dir, prefix=f"{_TMP_PREFIX}{version}-")
    try:
        # mkdtemp makes it private; a server may run as another user.
        os.chmod(tmp, 0o777 & ~atomic_io.current_umask())
        write(tmp)
        # A folder rename is atomic within one file system; TF Serving skips non-numeric names.
        os.rename(tmp, final)
    except (tf.errors.ResourceExhaustedError, OSError) as error:  # a full disk (ENOSPC)
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(error, OSError) and not atomic_io.disk_refused(error):
            raise  # not the disk: a folder that exists, a file the export reads, ...
        raise atomic_io.write_failed(final, error) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final
