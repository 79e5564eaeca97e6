"""SIGTERM and SIGINT during training: a flag the loop checks after each step (and, in a
multi-worker run, shares with the other workers: train/consensus.py), so that the run saves a
checkpoint and stops cleanly; a second signal stops at once."""

from __future__ import annotations

import signal

from absl import logging


class StopSignal:
    """Turns SIGTERM and SIGINT into a flag the loop checks after each step."""

    def __init__(self):
        self.received: str | None = None
        self._previous = {}

    def __enter__(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        del frame
        if self.received:  # a second signal: stop now, without a checkpoint
            raise KeyboardInterrupt(f"second {signal.Signals(signum).name}")
        self.received = signal.Signals(signum).name
        logging.warning(
            "%s: stopping after this step (send it again to stop at once)", self.received
        )

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
