"""One writer per run directory: t2t-train holds an exclusive `fcntl` lock on output_dir/train.lock
while it trains (the chief alone in a multi-worker run), so a second t2t-train on the same
output_dir stops at once, naming the holder, instead of both writing checkpoints.

The operating system releases the lock when its process ends, however it ends, so a killed run
never blocks the next one. The file holds the holder's PID, emptied on a clean exit; a PID left
in it (the holder was killed) is reported when the next run takes the lock over.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator

from absl import logging

from t2t_lite.run.layout import LOCK_FILE


class RunLockedError(ValueError):
    """Another process holds the run directory's lock."""


@contextlib.contextmanager
def run_lock(output_dir: str) -> Iterator[None]:
    """Holds output_dir's lock for the block; RunLockedError names the PID holding it."""
    os.makedirs(output_dir, exist_ok=True)
    path = os.path.join(output_dir, LOCK_FILE)
    handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115  (held for the whole block)
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise RunLockedError(
                f"{output_dir} is being trained by another process (PID {holder}, holding "
                f"{path}); wait for it to end or stop it, or train into another --output_dir"
            ) from None
        handle.seek(0)
        left = handle.read().strip()
        if left and left != str(os.getpid()):
            logging.warning(
                "%s: took over the lock of PID %s, which ended without releasing it (killed)",
                path,
                left,
            )
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield
        handle.seek(0)
        handle.truncate()  # a clean end: no PID left behind
    finally:
        handle.close()  # releases the lock
