"""Keeping TensorFlow's own INFO lines out of a command's output where they say nothing to a
user (saving a SavedModel logs renamed graph inputs, sharding callbacks and fingerprints)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator


class _WarningsAndAbove(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING


@contextlib.contextmanager
def tensorflow_info_hidden() -> Iterator[None]:
    """Within the block, TensorFlow's loggers pass warnings and errors only."""
    loggers = [logging.getLogger("tensorflow"), logging.getLogger("absl"), logging.getLogger()]
    quiet = _WarningsAndAbove()
    for logger in loggers:
        for handler in logger.handlers:
            handler.addFilter(quiet)
    try:
        yield
    finally:
        for logger in loggers:
            for handler in logger.handlers:
                handler.removeFilter(quiet)
