"""One writer per run directory: t2t-train holds an exclusive `fcntl` lock on output_dir/train.lock
while it trains (the chief alone in a multi-worker run), so a second t2t-train on the same
output_dir stops at once, naming the holder, instead of both writing checkpoints.

The file holds the holder's PID. However the holder ends, the operating system releases the lock,
so a killed run never blocks the next one. A run that ends in Python (finished, failed, or stopped
by SIGINT or SIGTERM, which raise KeyboardInterrupt while the lock is held unless training's own
handler turned them into a clean stop) removes the file; a file left with a PID means its holder
was killed (SIGKILL, out of memory) or crashed, and the next run says so as it takes the lock
over.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import threading
from collections.abc import Iterator
from typing import IO

from absl import logging

from t2t_lite.run.layout import LOCK_FILE


class RunLockedError(ValueError):
    """Another process holds the run directory's lock."""


@contextlib.contextmanager
def run_lock(output_dir: str) -> Iterator[None]:
    """Holds output_dir's lock for the block; RunLockedError names the PID holding it."""
    os.makedirs(output_dir, exist_ok=True)
    path = os.path.join(output_dir, LOCK_FILE)
    handle = _locked(output_dir, path)
    try:
        handle.seek(0)
        left = handle.read().strip()
        if left and left != str(os.getpid()):
            logging.warning(
                "%s: took over the lock of PID %s, which ended without releasing it (killed or "
                "crashed)",
                path,
                left,
            )
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        with _sigterm_raises():
            yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)  # while still locked: the next run finds no file, so no PID
        handle.close()  # releases the lock


def _locked(output_dir: str, path: str) -> IO[str]:
    """The lock file, opened and locked. A file removed by its holder between this process's
    open and lock is not the lock any more: it opens the new one."""
    while True:
        handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115  (held by run_lock)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise RunLockedError(
                f"{output_dir} is being trained by another process (PID {holder}, holding "
                f"{path}); wait for it to end or stop it, or train into another --output_dir"
            ) from None
        try:
            current = os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino
        except FileNotFoundError:
            current = False
        if current:
            return handle
        handle.close()


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt, as SIGINT does, so that the block ends in Python
    (its default action ends the process at once, leaving the lock file as a kill would)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread
        return

    def interrupt(signum, frame):
        del frame
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
