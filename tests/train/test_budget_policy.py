"""The one deadline of a run (train/budget.py's BudgetPolicy) on a fake clock: a budget of
minutes that goes on from a checkpoint's spent seconds and moves its schedule, a budget of steps,
a clock that only stops a run of another schedule, and no clock without minutes."""

from __future__ import annotations

import types

import pytest

from t2t_lite.hparams import get_hparams
from t2t_lite.train import budget
from t2t_lite.train.budget import BudgetPolicy, BudgetState
from t2t_lite.train.schedules import LinearBudgetSchedule


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def _trainer(overrides: str, minutes: float, spent: float = 0.0):
    hparams = budget.budget_hparams(get_hparams("transformer_tiny", overrides), minutes, overrides)
    schedule, state = None, None
    if hparams.learning_rate_schedule == "linear_budget":
        schedule = LinearBudgetSchedule(hparams.d_model, hparams.warmup_steps)
        state = BudgetState(schedule)
        state.seconds.assign(spent)
    return types.SimpleNamespace(hparams=hparams, schedule=schedule, budget=state)


def test_a_budget_of_minutes_goes_on_from_the_spent_seconds_and_moves_its_horizon(tmp_path):
    clock = FakeClock()
    trainer = _trainer("warmup_steps=4", minutes=2, spent=30.0)
    limits = BudgetPolicy(trainer, 2, 10**6, str(tmp_path), clock=clock)
    assert limits.seconds_left() == 90.0 and not limits.expired()
    limits.start(0)  # a clock's horizon waits for the rate
    assert float(trainer.schedule.horizon.numpy()) == 100000.0
    step = 0
    for _ in range(budget.STARTUP_STEPS + 10):  # 2 steps a second
        clock.now += 0.5
        step += 1
        expected = limits.observe(step, log=True).expected
    left = 90.0 - 0.5 * step
    assert expected == step + int(2.0 * left)
    assert float(trainer.schedule.horizon.numpy()) == expected
    assert (tmp_path / "budget.json").exists()
    limits.before_save()
    assert float(trainer.budget.seconds.numpy()) == pytest.approx(30.0 + 0.5 * step)
    clock.now += left
    assert limits.expired() and limits.seconds_left() == 0.0


def test_a_budget_of_steps_sets_its_horizon_at_the_start_and_has_no_clock(tmp_path):
    trainer = _trainer("learning_rate_schedule=linear_budget,warmup_steps=4", minutes=0)
    limits = BudgetPolicy(trainer, 0, 40, str(tmp_path), clock=FakeClock())
    limits.start(0)
    assert float(trainer.schedule.horizon.numpy()) == 40.0
    assert limits.seconds_left is None and not limits.expired()
    agreed = limits.observe(7, log=True)
    assert agreed.expected == 40 and agreed.settled and not agreed.stop and not agreed.expired
    limits.before_save()
    assert float(trainer.budget.seconds.numpy()) == 0.0


def test_minutes_with_another_schedule_only_stop_the_run():
    clock = FakeClock()
    trainer = _trainer("learning_rate_schedule=rsqrt_warmup", minutes=1)
    assert trainer.budget is None
    limits = BudgetPolicy(trainer, 1, 10**6, None, clock=clock)
    limits.start(0)
    assert limits.seconds_left() == 60.0
    clock.now += 59.0
    assert not limits.expired()
    clock.now += 1.0
    assert limits.expired()


def test_no_minutes_no_clock():
    trainer = _trainer("", minutes=0)
    limits = BudgetPolicy(trainer, 0, 25, None)
    assert limits.clock is None and limits.seconds_left is None
    assert not limits.expired() and limits.observe(3, log=False).expected == 25
