"""Periodic progress lines of a training run: step, loss, learning rate, steps/s, tokens/s, ETA."""

from __future__ import annotations

import datetime
import time

from absl import logging


class ProgressLog:
    """Logs a line every `every` steps with rates measured since the previous line.

    Example: `step 1200/100000 loss 3.412 nll 3.101 lr 6.1e-04 |g| 0.93 4.1 steps/s
    21,050 tok/s ETA 6:41:10`.
    """

    def __init__(self, total_steps: int, start_step: int, every: int):
        self.total_steps = total_steps
        self.every = max(1, every)
        self._last_time = time.monotonic()
        self._last_step = start_step
        self._tokens = 0.0
        self.steps_per_second = 0.0
        self.tokens_per_second = 0.0

    def update(self, step: int, result: dict) -> None:
        """Counts the step's tokens; logs and refreshes the rates on every `every`-th step."""
        self._tokens += float(result["source_tokens"] + result["target_tokens"])
        if step % self.every and step != self.total_steps:
            return
        now = time.monotonic()
        elapsed = max(now - self._last_time, 1e-9)
        self.steps_per_second = (step - self._last_step) / elapsed
        self.tokens_per_second = self._tokens / elapsed
        self._last_time, self._last_step, self._tokens = now, step, 0.0
        remaining = (self.total_steps - step) / max(self.steps_per_second, 1e-9)
        logging.info(
            "step %d/%d loss %.4f nll %.4f lr %.3g |g| %.3g %.2f steps/s %s tok/s ETA %s",
            step,
            self.total_steps,
            result["loss"],
            result["nll"],
            result["learning_rate"],
            result["grad_norm"],
            self.steps_per_second,
            f"{self.tokens_per_second:,.0f}",
            datetime.timedelta(seconds=round(remaining)),
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
        }
