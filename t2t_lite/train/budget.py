"""The time budget of a `--train_minutes` run, which shapes its learning-rate schedule.

Unless the hparams name a schedule, `--train_minutes=M` trains with `linear_budget`: the peak of
the paper's schedule, reached at warmup_steps, then a linear decay to zero when the M minutes
are spent (linear decay to zero did best under a fixed budget in Li et al., "Budgeted Training",
ICLR 2020); with `budget_decay_fraction` below 1 (transformer_small: 0.2) the peak holds until
that share of the steps after the warmup is left, and the decay takes the rest. How many steps
fit in the budget is not known in advance: `BudgetClock` measures the step rate over the last
minute of training once start-up is over, and after every step the schedule's horizon becomes
step + rate * time left. A machine that slows down or speeds up moves the horizon; the rate
still reaches zero when the time runs out. The loop's pauses (dev evaluations and checkpoint
saves, `BudgetPolicy.paused`) are left out of the rate: a minute that held a 20-second
evaluation would otherwise read as a machine a third slower, and revise the rate factor for
a few hundred steps (docs/training.md). The time they take is still spent, so the horizon comes
down by a pause's steps once it is over.

How high the peak should be depends on the budget too: at 1,500 updates transformer_small did
best at the rate factor 0.5, at 4,400 at 0.7 (docs/training.md, "The peak from the expected
steps"). With hparams `budget_long_learning_rate` > 0 the run chooses its factor from the step
count it expects (`rate_factor`): for a budget of steps at the start, on a clock once the rate
is measured over a full minute, as late dropout decides, and again whenever the count moves by
more than a tenth (train/decisions.py). Until then the peak is `learning_rate`'s. The factor is
kept in each checkpoint, so a resumed run starts with it.

In a multi-worker run the chief's clock decides for every worker (train/consensus.py).

The budget is the run's, not the process's: the minutes spent are stored in each checkpoint, so
a resumed run continues with what is left, and a run whose budget is spent trains no more. A
different `--train_minutes` on a resume is refused (hparams.budget_minutes is part of
hparams.json); to train longer, start a new run from this one with `--init_from`.
"""

from __future__ import annotations

import collections
import contextlib
import json
import math
import os
import time

import tensorflow as tf
from absl import logging

from t2t_lite.hparams import HParams
from t2t_lite.hparams.hparams_base import override_keys
from t2t_lite.run.layout import BUDGET_FILE, RATE_FILE
from t2t_lite.runtime import atomic_io
from t2t_lite.train import decisions
from t2t_lite.train.consensus import Agreed, Consensus

# Steps of each process not used for the rate: tracing and the first batches' caches.
STARTUP_STEPS = 20
# The rate is measured over the steps of the last this many seconds (at least 2 steps).
RATE_WINDOW_SECONDS = 60.0
# A budget run saves this many checkpoints over this share of its last expected steps, so that
# its end-of-run choice can average them (final_choice.NUM_AVERAGED averages the last five),
# however seldom --save_every saves.
AVERAGED_SAVES = 5
AVERAGED_SPAN = 0.1
# The EMA of the weights a budget run keeps for the end-of-run choice, unless set. A run of a
# few thousand steps changes fast; 0.995 averages over about the last 200 steps.
DEFAULT_EMA_MOMENTUM = 0.995
# budget.json's entry for the budget's choice of model (train/model_probe.py), which the clock's
# records keep, as they keep the forecast (train/forecast.py).
MODEL_CHOICE = "model_choice"
FORECAST = "forecast"
KEPT_ENTRIES = (MODEL_CHOICE, FORECAST)


def budget_hparams(hparams: HParams, train_minutes: float, overrides: str = "") -> HParams:
    """The hparams of a run with `--train_minutes` and `--hparams=overrides`.

    A `learning_rate` in `overrides` (without budget_long_learning_rate) turns off the choice of
    the rate factor from the expected steps. Without a time budget (a linear_budget schedule then
    ends at train_steps), or when
    `overrides` sets learning_rate_schedule to another schedule
    (or the hparams set chose one other than rsqrt_warmup), they are unchanged: the clock only
    stops training. Otherwise: linear_budget over `train_minutes`, with an EMA of the weights
    (DEFAULT_EMA_MOMENTUM) unless `overrides` sets ema_momentum.
    """
    given = override_keys(overrides)
    if "learning_rate" in given and "budget_long_learning_rate" not in given:
        hparams = hparams.replace(budget_long_learning_rate=0.0)  # the user's rate wins
    if not train_minutes:  # linear_budget then decays to zero at the last of train_steps
        return hparams
    chosen = hparams.learning_rate_schedule
    named = "learning_rate_schedule" in given or chosen != "rsqrt_warmup"
    if chosen != "linear_budget" and named:
        return hparams
    changes = {"learning_rate_schedule": "linear_budget", "budget_minutes": float(train_minutes)}
    if "ema_momentum" not in given:
        changes["ema_momentum"] = DEFAULT_EMA_MOMENTUM
    return hparams.replace(**changes)


def rate_factor(hparams: HParams, expected_steps: int) -> float:
    """The rate factor of a budget run expecting `expected_steps` updates: `learning_rate` up to
    budget_short_steps, budget_long_learning_rate from budget_long_steps, linear in log(steps)
    between them; `learning_rate` when budget_long_learning_rate is 0."""
    short, long = hparams.learning_rate, hparams.budget_long_learning_rate
    if not long:
        return short
    low, high = math.log(hparams.budget_short_steps), math.log(hparams.budget_long_steps)
    share = (math.log(max(expected_steps, 1)) - low) / (high - low)
    return short + (long - short) * min(1.0, max(0.0, share))


class BudgetState(tf.Module):
    """What a checkpoint keeps of the budget: the seconds of training spent so far, the
    schedule's horizon, warmup and peak, so that a resumed run goes on with the same rate, and
    the rate factor chosen from the expected steps (0 until chosen)."""

    def __init__(self, schedule):
        super().__init__(name="budget")
        self.seconds = tf.Variable(0.0, dtype=tf.float64, trainable=False, name="seconds")
        self.horizon, self.warmup = schedule.horizon, schedule.warmup
        self.peak = schedule.peak_rate
        self.factor = tf.Variable(0.0, trainable=False, name="rate_factor")
        self._decided = False  # once True, stays so: no host read of `factor` at every step
        self._basis: int | None = None  # the expected steps of the last decision

    @property
    def rate_decided(self) -> bool:
        """Whether the factor is chosen (this run, or the run a checkpoint restored)."""
        self._decided = self._decided or float(self.factor.numpy()) > 0.0
        return self._decided

    def choose_rate(self, schedule, hparams: HParams, step: int, expected: int, output_dir=None):
        """Sets `schedule`'s peak from `expected` steps (hparams with budget_long_learning_rate
        > 0): the first time, and again when `expected` moved away from the count of the last
        decision (train/decisions.py); logs each decision and records it in
        output_dir/peak_rate.json (None: not the chief)."""
        if not hparams.budget_long_learning_rate:
            return
        decided = self.rate_decided
        if decided and not decisions.moved(self._basis, expected):
            return
        factor = rate_factor(hparams, expected)
        self._basis = expected
        if decided and abs(factor - float(self.factor.numpy())) < 5e-4:
            return  # a restored or earlier factor that the count still calls for
        self.factor.assign(factor)
        self._decided = True
        schedule.set_multiplier(factor)
        logging.info(
            "peak rate%s: %d steps expected, so the rate factor %.3g (%g up to %d steps, %g "
            "from %d) from step %d: a peak of %.3g",
            " revised" if decided else "",
            expected,
            factor,
            hparams.learning_rate,
            hparams.budget_short_steps,
            hparams.budget_long_learning_rate,
            hparams.budget_long_steps,
            step + 1,
            schedule.peak,
        )
        if output_dir is not None:
            entry = {
                "step": step,
                "expected_steps": expected,
                "learning_rate": round(factor, 4),
                "peak": schedule.peak,
            }
            decisions.record(os.path.join(output_dir, RATE_FILE), entry)


class BudgetClock:
    """The time left of a budget and the step count expected to fit in it.

    `clock` is injectable for tests; `spent_seconds` is what earlier processes used.
    """

    def __init__(
        self,
        budget_minutes: float,
        spent_seconds: float,
        max_steps: int,
        clock=time.monotonic,
    ):
        self.budget_seconds = 60.0 * budget_minutes
        self.reserved_minutes = 0.0  # kept after training, for the search tuning
        self._kept: dict = {}  # budget.json's KEPT_ENTRIES (`keep`, and `record` reads them)
        self._kept_read = False  # read once per process
        self.spent_before = spent_seconds
        self.max_steps = max_steps
        self.clock = clock
        self.started = clock()
        self.first_step: int | None = None
        # (seconds of training, step): the clock less this process's pauses
        self.samples: collections.deque[tuple[float, int]] = collections.deque()
        self.paused_seconds = 0.0

    @contextlib.contextmanager
    def pause(self):
        """A stretch of the loop that is not training (an evaluation, a save): its seconds count
        against the budget but not in the step rate."""
        started = self.clock()
        try:
            yield
        finally:
            self.paused_seconds += self.clock() - started

    def spent(self) -> float:
        """Seconds of the budget used, this process included."""
        return self.spent_before + self.clock() - self.started

    def remaining(self) -> float:
        return max(0.0, self.budget_seconds - self.spent())

    def expired(self) -> bool:
        return self.spent() >= self.budget_seconds

    def closing(self) -> bool:
        """Whether at most AVERAGED_SPAN of the budget's seconds are left."""
        return self.remaining() <= AVERAGED_SPAN * self.budget_seconds

    def observe(self, step: int) -> int | None:
        """Records that `step` is done; returns the step count expected at the end of the
        budget (at most max_steps), or None while start-up is not over."""
        now = self.clock() - self.paused_seconds
        if self.first_step is None:
            self.first_step = step
        if step - self.first_step < STARTUP_STEPS:
            return None
        self.samples.append((now, step))
        while len(self.samples) > 2 and now - self.samples[1][0] >= RATE_WINDOW_SECONDS:
            self.samples.popleft()
        rate = self.steps_per_second()
        if rate <= 0:
            return None
        return min(self.max_steps, step + int(rate * self.remaining()))

    def settled(self) -> bool:
        """Whether the rate is measured over a full RATE_WINDOW_SECONDS window of training."""
        return len(self.samples) > 1 and (
            self.samples[-1][0] - self.samples[0][0] >= RATE_WINDOW_SECONDS
        )

    def steps_per_second(self) -> float:
        if len(self.samples) < 2:
            return 0.0
        (t0, s0), (t1, s1) = self.samples[0], self.samples[-1]
        return (s1 - s0) / (t1 - t0) if t1 > t0 else 0.0

    def keep(self, name: str, value: dict) -> None:
        """Sets budget.json's entry `name` (one of KEPT_ENTRIES) from the next record on."""
        self._kept[name] = value

    def record(self, output_dir: str, step: int, expected: int) -> str:
        """Writes output_dir/budget.json (minutes spent, rate, steps expected); returns the
        line to log."""
        spent, budget = self.spent() / 60, self.budget_seconds / 60
        rate = self.steps_per_second()
        path = os.path.join(output_dir, BUDGET_FILE)
        entries = {
            "budget_minutes": budget + self.reserved_minutes,
            "training_minutes": budget,
            "spent_minutes": round(spent, 3),
            "step": step,
            "steps_per_second": round(rate, 3),
            "expected_steps": expected,
        }
        if not self._kept_read and os.path.isfile(path):
            # written before training (the choice of model) or by an earlier process of the run
            with open(path) as f:
                earlier = json.load(f)
            self._kept = {k: earlier[k] for k in KEPT_ENTRIES if k in earlier} | self._kept
        self._kept_read = True
        entries.update(self._kept)
        atomic_io.write_json(path, entries)
        return (
            f"budget: {spent:.1f} of {budget:g} minutes spent, {rate:.2f} steps/s, "
            f"{expected} steps expected"
        )


class BudgetPolicy:
    """What the loop asks of a run's limits: the one deadline, the time left, the step count the
    run expects, and the schedule that follows it.

    A linear_budget run with minutes (hparams.budget_minutes) counts the minutes of every
    process from its checkpoints: its clock starts at what the checkpoint says is spent, moves
    the schedule's horizon after each step, and chooses the rate factor once the rate is
    measured. A linear_budget run of steps sets its horizon and factor from `step_limit` at
    the start. A run with `--train_minutes` and another schedule only stops on its clock, which
    starts with each process. Without minutes there is no clock: the run ends at `step_limit`.
    `output_dir` is None on a worker that is not the chief (it writes no records).
    """

    def __init__(
        self,
        trainer,
        train_minutes: float,
        step_limit: int,
        output_dir,
        clock=None,
        consensus=None,
        reserve: float = 0.0,
        spent_before: float = 0.0,
    ):
        self.trainer, self.output_dir = trainer, output_dir
        self.consensus: Consensus = consensus or Consensus(None, 1, chief=True)
        self.agreed: Agreed | None = None  # the last step's values, the same on every worker
        self._averaging: int | None = None  # the spacing of the saves to average (wants_save)
        self.hparams, self.state = trainer.hparams, trainer.budget
        self.step_limit = step_limit
        minutes = self.hparams.budget_minutes or train_minutes
        shapes = self.state is not None and bool(self.hparams.budget_minutes)
        # `spent_before`: seconds spent before this process' training (the choice of model).
        spent = (float(self.state.seconds.numpy()) if shapes else 0.0) + spent_before
        clock = clock or time.monotonic
        # `reserve`: the share of the minutes kept for the search tuning after training.
        self.reserve = reserve
        training = minutes * (1.0 - reserve)
        self.clock = BudgetClock(training, spent, step_limit, clock) if minutes else None
        if self.clock is not None:
            self.clock.reserved_minutes = minutes * reserve
        self.shapes_schedule = shapes  # the horizon follows the clock

    def start(self, step: int) -> None:
        """A linear_budget run of steps: the horizon and the rate factor from `step_limit`."""
        if self.state is not None and not self.shapes_schedule:
            self.trainer.schedule.set_horizon(self.step_limit)
            self.state.choose_rate(
                self.trainer.schedule, self.hparams, step, self.step_limit, self.output_dir
            )

    @property
    def seconds_left(self):
        """A function giving the seconds left, for the progress line's ETA; None without a
        clock."""
        return self.clock.remaining if self.clock is not None else None

    def expired(self) -> bool:
        """Whether the budget is spent: by the last step's agreed values in a multi-worker run
        (the chief's clock), else by this process's clock."""
        if self.agreed is not None and self.consensus.shared:
            return self.agreed.expired
        return self.clock is not None and self.clock.expired()

    def observe(self, step: int, log: bool, stop: bool = False) -> Agreed:
        """Records that `step` is done (`stop`: this process received a signal); returns what
        every worker acts on (consensus.py): the step count the run expects (None while the
        clock's start-up lasts), whether it is settled, and whether to stop. A budget run moves
        its horizon there, chooses its rate factor once settled, and with `log` writes
        budget.json and logs its line (the chief)."""
        if self.clock is None:
            mine = (self.step_limit, True, False, False)
        else:
            expected = self.clock.observe(step)
            mine = (expected, self.clock.settled(), self.clock.expired(), self.clock.closing())
        agreed = self.agreed = self.consensus.agree(stop, *mine)
        expected = agreed.expected
        if self.clock is not None and self.shapes_schedule and expected is not None:
            self.trainer.schedule.set_horizon(expected)
            if agreed.settled:
                self.state.choose_rate(
                    self.trainer.schedule, self.hparams, step, expected, self.output_dir
                )
            if log and self.output_dir is not None:
                logging.info("%s", self.clock.record(self.output_dir, step, expected))
        return agreed

    def paused(self):
        """A context for the loop's evaluations and saves: their time is left out of the step
        rate (BudgetClock.pause); nothing without a clock."""
        return self.clock.pause() if self.clock is not None else contextlib.nullcontext()

    def seconds_kept(self) -> float:
        """The seconds kept from training for the search tuning (the end-of-run choice before
        it takes its own time, as it did before the tuning)."""
        return 60.0 * self.clock.reserved_minutes if self.clock is not None else 0.0

    def wants_save(self, step: int) -> bool:
        """Whether a budget run saves at `step` so that its end-of-run choice has an average to
        compare: AVERAGED_SAVES checkpoints over the last AVERAGED_SPAN of the steps it
        expects (the same steps on every worker: the agreed count).

        Once a step falls in that span, the run saves at its spacing until it ends, even if
        the expected count moves on: a run that slows down then still saves before its end
        (where a span re-placed at each step would have moved past it), and one that speeds
        up saves on. Only a count that moves the span more than its own length away places
        it anew. The span also begins once the clock has only AVERAGED_SPAN of its seconds
        left (`closing`), whatever the count: a machine that slows near the end, or a run of
        a few dozen steps whose rate is read from a handful of them, ends sooner than the
        count says, and would otherwise reach its end before the span."""
        if self.state is None or self.agreed is None or self.agreed.expected is None:
            return False
        expected = self.agreed.expected
        spacing = max(1, int(expected * AVERAGED_SPAN / AVERAGED_SAVES))
        start = expected - AVERAGED_SAVES * spacing
        closing = self.agreed.closing
        if self._averaging is not None and not closing and step < start - AVERAGED_SAVES * spacing:
            self._averaging = None  # far more steps expected than when the span began
        if self._averaging is None and (step > start or closing):
            self._averaging = spacing
        return self._averaging is not None and step % self._averaging == 0

    def before_save(self) -> None:
        """Keeps the minutes spent in the checkpoint about to be written."""
        if self.shapes_schedule:
            self.state.seconds.assign(self.clock.spent())
