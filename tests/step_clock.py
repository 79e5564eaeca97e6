"""A clock for the time budget of --train_minutes (t2t_lite.train.budget) that moves a fixed
number of seconds with each training step and stands still otherwise: a budget run then makes
the same steps, peaks and decays alike on any machine, however loaded. The tests of what a
budget does with its minutes use it (the `step_clock` fixture, or `python
tests/train_helpers.py t2t_train_step_clock FLAGS...` for t2t-train in a process of its own);
what the clock itself does with real seconds is tested with a fake clock of its own
(tests/train/test_budget.py)."""

from __future__ import annotations

import types

import pytest

SECONDS_PER_STEP = 0.25


class StepClock:
    """`monotonic()` for the budget: SECONDS_PER_STEP more after each `Trainer.train_step`."""

    def __init__(self, seconds_per_step: float = SECONDS_PER_STEP):
        self.seconds_per_step = seconds_per_step
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def install(self, assign=setattr) -> None:
        """The budget reads this clock, and every Trainer made from now on moves it with each
        step; through `assign` (monkeypatch.setattr undoes it after the test)."""
        from t2t_lite.train import budget
        from t2t_lite.train.step import Trainer

        clock, make = self, Trainer.__init__

        def __init__(trainer, *args, **kwargs):
            make(trainer, *args, **kwargs)
            step = trainer.train_step

            def train_step(iterator):
                result = step(iterator)
                clock.now += clock.seconds_per_step
                return result

            trainer.train_step = train_step

        assign(Trainer, "__init__", __init__)
        assign(budget, "time", types.SimpleNamespace(monotonic=self.monotonic))


@pytest.fixture
def step_clock(monkeypatch) -> StepClock:
    clock = StepClock()
    clock.install(monkeypatch.setattr)
    return clock
