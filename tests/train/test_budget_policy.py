"""The one deadline of a run (train/budget.py's BudgetPolicy) on a fake clock: a budget of
minutes that goes on from a checkpoint's spent seconds and moves its schedule, a budget of steps,
a clock that only stops a run of another schedule, and no clock without minutes."""

from __future__ import annotations

import contextlib
import json
import types

import pytest

from t2t_lite.hparams import get_hparams
from t2t_lite.train import budget
from t2t_lite.train.budget import BudgetPolicy, BudgetState
from t2t_lite.train.consensus import Agreed
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


# Rate factor 0.5 up to 2,000 expected steps, 0.7 from 3,000: a 20-minute run at 0.35 s a step
# expects about 3,400 steps (0.7), at 0.7 s a step about 1,700 (0.5).
REVISED = (
    "warmup_steps=4,learning_rate=0.5,budget_long_learning_rate=0.7,"
    "budget_short_steps=2000,budget_long_steps=3000"
)


def _run_on_clock(tmp_path, seconds_per_step, change_at: float = 0.0, after: float = 0.0):
    """A 20-minute budget on a fake clock: `seconds_per_step`, then `after` from `change_at`
    seconds on; returns the final rate factor and the decisions recorded."""
    clock = FakeClock()
    trainer = _trainer(REVISED, minutes=20)
    limits = BudgetPolicy(trainer, 20, 10**6, str(tmp_path), clock=clock)
    limits.start(0)
    step, started = 0, clock.now
    while not limits.expired():
        late = change_at and clock.now - started >= change_at
        clock.now += after if late else seconds_per_step
        step += 1
        limits.observe(step, log=False)
    with open(tmp_path / "peak_rate.json") as f:
        record = json.load(f)
    return float(trainer.budget.factor.numpy()), record


@pytest.mark.parametrize(
    ("first", "then", "ends_like"),
    [(0.35, 0.7, 0.7), (0.7, 0.35, 0.35)],  # the rate halves; the rate doubles
)
def test_the_rate_factor_follows_a_step_rate_that_changes(tmp_path, first, then, ends_like):
    (tmp_path / "changed").mkdir()
    (tmp_path / "steady").mkdir()
    factor, record = _run_on_clock(tmp_path / "changed", first, change_at=90.0, after=then)
    steady, steady_record = _run_on_clock(tmp_path / "steady", ends_like)
    assert steady in (pytest.approx(0.5), pytest.approx(0.7))
    first_decision, last_decision = record["decisions"][0], record["decisions"][-1]
    assert abs(first_decision["learning_rate"] - steady) > 0.15  # decided for the first rate,
    assert abs(factor - steady) < 0.02  # then revised to a steady run's, within the fraction
    assert last_decision["learning_rate"] == pytest.approx(factor, abs=1e-4)
    assert last_decision["step"] > first_decision["step"]
    assert len(steady_record["decisions"]) == 1  # a steady rate is decided once


def _evaluation_pause(tmp_path, inside_pause: bool):
    """A 10-minute budget at 0.25 s a step (4 steps/s) with a 20-second dev evaluation after
    step 1,000, inside BudgetPolicy.paused or not; returns the steps expected before it and 10
    steps after it, and the rate decisions recorded."""
    clock = FakeClock()
    trainer = _trainer(REVISED, minutes=10)
    limits = BudgetPolicy(trainer, 10, 10**6, str(tmp_path), clock=clock)
    limits.start(0)
    for step in range(1, 1001):
        clock.now += 0.25
        before = limits.observe(step, log=False).expected
    with limits.paused() if inside_pause else contextlib.nullcontext():
        clock.now += 20.0
    for step in range(1001, 1011):
        clock.now += 0.25
        after = limits.observe(step, log=False).expected
    with open(tmp_path / "peak_rate.json") as f:
        return before, after, json.load(f)["decisions"], trainer.hparams


def test_an_evaluation_pause_is_left_out_of_the_step_rate(tmp_path):
    (tmp_path / "paused").mkdir()
    (tmp_path / "unmarked").mkdir()
    before, after, decisions, hparams = _evaluation_pause(tmp_path / "paused", inside_pause=True)
    # 350 s left at step 1,000: 2,400 steps. After the pause 327.5 s are left at step 1,010:
    # the pause's 80 steps come off, at the rate of training, and nothing is revised.
    assert before == 1000 + 4 * 350
    assert after == 1010 + 4 * 327.5
    assert len(decisions) == 1
    assert decisions[0]["learning_rate"] == pytest.approx(budget.rate_factor(hparams, 2400), 1e-3)
    # The same pause unmarked: the last minute held 40 s of steps and 20 s of evaluation, read
    # as a machine a third slower, and the run revises its factor for steps it will not lose.
    _, unmarked, revised, _ = _evaluation_pause(tmp_path / "unmarked", inside_pause=False)
    assert unmarked < 1010 + 3 * 327.5
    assert len(revised) == 2
    assert revised[1]["learning_rate"] == pytest.approx(budget.rate_factor(hparams, unmarked), 1e-3)
    assert revised[1]["learning_rate"] < decisions[0]["learning_rate"] - 0.05


def _saves(limits, counts, closing_from=None):
    """The steps at which wants_save says yes, with the agreed count at step i+1 counts[i] and
    the clock's last share begun from step `closing_from`."""
    saves = []
    for step, expected in enumerate(counts, start=1):
        closing = closing_from is not None and step >= closing_from
        limits.agreed = Agreed(False, expected, settled=True, expired=False, closing=closing)
        if limits.wants_save(step):
            saves.append(step)
    return saves


@pytest.mark.parametrize(
    "ends,saves",
    [
        (1000, [920, 940, 960, 980, 1000]),
        # From step 951 the run expects to end at 960. A span placed anew at each step
        # (spacing 19 from 865) would have saved at 920 and 940 only.
        (960, [920, 940, 960]),
        # From step 951 it expects 1,050 steps: the span keeps its spacing and saves on.
        (1050, [920 + 20 * i for i in range(7)]),
    ],
)
def test_saves_to_average_come_before_the_end_however_the_rate_moves(ends, saves):
    # 1,000 steps expected: 5 saves over the last 10 %, every int(1000 * 0.1 / 5) = 20 steps
    # after step 900.
    trainer = _trainer("warmup_steps=4", minutes=2)
    limits = BudgetPolicy(trainer, 2, 10**6, None, clock=FakeClock())
    assert _saves(limits, [1000] * 950 + [ends] * (ends - 950)) == saves


def test_a_span_begun_too_early_is_placed_anew():
    # At step 951 the run expects 3,000 steps, not 1,000: more than the new span's length
    # (300) before it, so the saves wait for it, every 60 steps after step 2,700.
    trainer = _trainer("warmup_steps=4", minutes=2)
    limits = BudgetPolicy(trainer, 2, 10**6, None, clock=FakeClock())
    saves = _saves(limits, [1000] * 950 + [3000] * 2050)
    assert saves == [920, 940, 2760, 2820, 2880, 2940, 3000]


def test_the_clocks_last_share_begins_the_span_when_the_count_runs_ahead():
    # The run expects 1,200 steps to the end (a span every 24 steps after 1,080), but the
    # machine slows and the clock's last 10 % begins at step 900, of 1,000 made.
    trainer = _trainer("warmup_steps=4", minutes=2)
    limits = BudgetPolicy(trainer, 2, 10**6, None, clock=FakeClock())
    assert _saves(limits, [1200] * 1000) == []
    limits = BudgetPolicy(trainer, 2, 10**6, None, clock=FakeClock())
    assert _saves(limits, [1200] * 1000, closing_from=900) == [912, 936, 960, 984]
    # In that share a count far ahead no longer places the span anew.
    limits = BudgetPolicy(trainer, 2, 10**6, None, clock=FakeClock())
    saves = _saves(limits, [1200] * 950 + [5000] * 50, closing_from=900)
    assert saves == [912, 936, 960, 984]


def test_the_clock_closes_at_its_last_share():
    clock = FakeClock()
    budget_clock = budget.BudgetClock(2, 30.0, 10**6, clock)  # 120 s, 30 spent before
    clock.now += 77.9
    assert not budget_clock.closing()  # 12.1 s left
    clock.now += 0.2
    assert budget_clock.closing() and not budget_clock.expired()  # 11.9 s left
