"""Periodic progress lines: one rate meter, read by two line formats.

`RateMeter` counts units of work (steps, sentences) and tokens and turns them into rates per
second. `ProgressLog` is the training line (step, loss, learning rate, steps/s, tokens/s, ETA,
rates since the previous line); `DecodeProgress` the decoding line (sentences/s, tokens/s, rates
since the start, and a summary at the end).
"""

from __future__ import annotations

import datetime
import os
import resource
import sys
import time

from absl import logging


class RateMeter:
    """Units and tokens counted since the start and since the last `mark`, and their rates."""

    def __init__(self) -> None:
        self.start = self._mark = time.monotonic()
        self.units = self.tokens = 0.0  # since the start
        self._marked_units = self._marked_tokens = 0.0  # the counts at the last mark

    def add(self, units: float, tokens: float) -> None:
        """Counts `units` of work (steps, sentences) that held `tokens` tokens."""
        self.units += units
        self.tokens += tokens

    def seconds_since_mark(self) -> float:
        return time.monotonic() - self._mark

    def rates_since_start(self) -> tuple[float, float]:
        """(units/s, tokens/s) since the meter was made."""
        elapsed = max(time.monotonic() - self.start, 1e-9)
        return self.units / elapsed, self.tokens / elapsed

    def mark(self) -> tuple[float, float]:
        """(units/s, tokens/s) since the previous mark (or the start); then starts a new window."""
        now = time.monotonic()
        elapsed = max(now - self._mark, 1e-9)
        rates = (
            (self.units - self._marked_units) / elapsed,
            (self.tokens - self._marked_tokens) / elapsed,
        )
        self._mark, self._marked_units, self._marked_tokens = now, self.units, self.tokens
        return rates


def resident_memory() -> tuple[float, float]:
    """(resident set size now, its peak so far) of this process, in bytes. The current size
    comes from /proc/self/statm (Linux); elsewhere it is reported as the peak."""
    peak = float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    peak *= 1.0 if sys.platform == "darwin" else 1024.0  # bytes on macOS, KiB on Linux
    try:
        with open("/proc/self/statm") as f:
            now = float(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        now = peak
    return now, max(peak, now)


class ProgressLog:
    """Logs a training line every `every` steps with rates measured since the previous line.

    Example: `step 1200/100000 loss 3.412 nll 3.101 lr 6.1e-04 |g| 0.93 4.1 steps/s
    21,050 tok/s ETA 6:41:10 rss 1.42 GB (peak 1.50)`: rss is the process's resident memory.
    `total_steps` 0: no step limit (the line shows `step 1200`); `seconds_left`, the seconds left
    of a time budget, caps the ETA.
    """

    def __init__(self, total_steps: int, start_step: int, every: int, seconds_left=None):
        self.total_steps = total_steps
        self.seconds_left = seconds_left
        self.every = max(1, every)
        self._meter = RateMeter()
        self._step = start_step
        self.steps_per_second = 0.0
        self.tokens_per_second = 0.0
        self.rss = self.peak_rss = 0.0  # bytes, at the last line

    def update(self, step: int, result: dict) -> None:
        """Counts the step's tokens; logs and refreshes the rates on every `every`-th step."""
        self._meter.add(step - self._step, float(result["source_tokens"] + result["target_tokens"]))
        self._step = step
        if step % self.every and step != self.total_steps:
            return
        self.steps_per_second, self.tokens_per_second = self._meter.mark()
        remaining = float("inf")
        if self.total_steps:
            remaining = (self.total_steps - step) / max(self.steps_per_second, 1e-9)
        if self.seconds_left is not None:
            remaining = min(remaining, self.seconds_left())
        self.rss, self.peak_rss = resident_memory()
        logging.info(
            "step %d%s loss %.4f nll %.4f lr %.3g |g| %.3g %.2f steps/s %s tok/s ETA %s "
            "rss %.2f GB (peak %.2f)",
            step,
            f"/{self.total_steps}" if self.total_steps else "",
            result["loss"],
            result["nll"],
            result["learning_rate"],
            result["grad_norm"],
            self.steps_per_second,
            f"{self.tokens_per_second:,.0f}",
            datetime.timedelta(seconds=round(min(remaining, 1e9))),
            self.rss / 1e9,
            self.peak_rss / 1e9,
        )

    def scalars(self, result: dict) -> dict[str, float]:
        """What TensorBoard shows for a training step."""
        return {
            "loss": float(result["loss"]),
            "nll": float(result["nll"]),
            "learning_rate": float(result["learning_rate"]),
            "grad_norm": float(result["grad_norm"]),
            "loss_scale": float(result["loss_scale"]),
            "steps_per_second": self.steps_per_second,
            "tokens_per_second": self.tokens_per_second,
            "rss_gb": self.rss / 1e9,
        }


class DecodeProgress:
    """Logs sentences/s and tokens/s since the start about every `every` seconds, and a summary
    at `finish`. `what` names the work ("decoded", "scored"); `total` is the sentences to do.

    Example: `decoded 1200/3003 sentences, 41.3 sentences/s, 1302.7 tokens/s, rss 1.02 GB (peak
    1.05)`, rss being the process's resident memory as in the training line.
    """

    def __init__(self, total: int, what: str, every: float = 10.0, enabled: bool = True):
        self.total, self.what, self.every, self.enabled = total, what, every, enabled
        self._meter = RateMeter()

    def update(self, sentences: int, tokens: int) -> None:
        """Counts a finished batch; logs when `every` seconds have passed since the last line."""
        self._meter.add(sentences, tokens)
        if self._meter.seconds_since_mark() >= self.every:
            self._meter.mark()
            self._log("%s %d/%d sentences")

    def finish(self) -> None:
        """Logs the summary line."""
        self._log("%s %d/%d sentences done")

    def _log(self, message: str) -> None:
        if not self.enabled:
            return
        sentences_per_second, tokens_per_second = self._meter.rates_since_start()
        rss, peak_rss = resident_memory()
        logging.info(
            message + ", %.1f sentences/s, %.1f tokens/s, rss %.2f GB (peak %.2f)",
            self.what,
            self._meter.units,
            self.total,
            sentences_per_second,
            tokens_per_second,
            rss / 1e9,
            peak_rss / 1e9,
        )
