"""`Gate`: the one limiter of `t2t-serve --max_concurrent`, used by every route that searches or
scores (/api/translate, /api/attention, /api/document, /api/translate_stream, /api/evalb and TF
Serving's :predict)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from t2t_lite.serve.web.api import ApiError

T = TypeVar("T")


class Gate:
    """At most `limit` calls at once in worker threads; one more is refused at once (429)
    rather than queued."""

    def __init__(self, limit: int):
        self.limit = limit
        self._slots = threading.BoundedSemaphore(limit)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` in a worker thread (`asyncio.to_thread`), holding a slot meanwhile."""
        release = self.hold()
        try:
            return await asyncio.to_thread(fn, *args)
        finally:
            release()

    def hold(self) -> Callable[[], None]:
        """Takes a slot (or refuses with 429) and returns what gives it back: for a stream,
        which holds its slot until it ends."""
        if not self._slots.acquire(blocking=False):
            raise ApiError(
                429,
                None,
                f"busy: {self.limit} requests are running (--max_concurrent="
                f"{self.limit}); try again in a moment",
            )
        return self._slots.release
