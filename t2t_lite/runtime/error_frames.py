"""Letting go, when an error ends a job, of what the job's frames held.

An error keeps every frame it passed through, and each frame keeps its locals: for a training
run, the tf.data iterator and the threads of its input pipeline. A caller that keeps the error
(a notebook's last exception, `pytest.raises`, a retry loop) keeps all of that until Python's
cycle collector happens to find it, and destroying an iterator then waits for its threads in
the middle of whatever runs at that moment. `frames_cleared` clears the finished frames' locals
as the error leaves, as `unittest`'s `assertRaises` does with `traceback.clear_frames`; the
error, its message and its traceback's lines are kept (a debugger opened afterwards sees no
locals in those frames).
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Iterator


def clear_error_frames(error: BaseException) -> None:
    """Clears the locals of the finished frames in `error`'s traceback and in those of the
    errors it chains (`__cause__`, `__context__`). Frames still running are left as they are."""
    pending, seen = [error], set()
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        traceback.clear_frames(current.__traceback__)
        pending += [current.__cause__, current.__context__]


@contextlib.contextmanager
def frames_cleared() -> Iterator[None]:
    """Re-raises any error that leaves the block after `clear_error_frames`."""
    try:
        yield
    except BaseException as error:
        clear_error_frames(error)
        raise
