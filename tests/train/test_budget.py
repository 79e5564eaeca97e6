"""The time budget of --train_minutes: the linear_budget schedule against its formula, the step
estimate with a fake clock, what --train_minutes makes of the hparams, a budget run that peaks
and decays to the end of its minutes, its resume, and the end-of-run choice (by dev loss, or by
dev BLEU for a problem scored by BLEU). The budget runs train on a step clock
(tests/step_clock.py: a quarter of a second per step), so they make the same steps on any
machine."""

from __future__ import annotations

import dataclasses
import glob
import json
import math
import os
import types

import keras
import numpy as np
import pytest
import tensorflow as tf
from fake_problem import FakeReverse
from train_helpers import config

from t2t_lite.hparams import get_hparams
from t2t_lite.model.transformer import Transformer
from t2t_lite.run import checkpoints, layout
from t2t_lite.run.layout import FINAL_DIR
from t2t_lite.train import budget, final_choice
from t2t_lite.train import loop as training
from t2t_lite.train.schedules import LinearBudgetSchedule


def _numpy_rate(step, peak, warmup, horizon, decay_fraction=1.0):
    decay = decay_fraction * (horizon + 1 - warmup)
    return peak * np.clip(np.minimum(step / warmup, (horizon + 1 - step) / decay), 0, 1)


def test_linear_budget_schedule_follows_its_formula_and_horizon():
    schedule = LinearBudgetSchedule(d_model=64, warmup_steps=200, multiplier=2.0, total_steps=5000)
    peak = 2.0 * 64**-0.5 * 200**-0.5
    iterations = np.array([0, 99, 199, 200, 1000, 4999, 5000, 6000])
    got = [float(schedule(i)) for i in iterations]
    np.testing.assert_allclose(got, _numpy_rate(iterations + 1.0, peak, 200, 5000), rtol=1e-6)
    assert got[2] == pytest.approx(peak) and got[-2] == 0.0 and got[-1] == 0.0
    # A short horizon shortens the warmup to a tenth of it; the peak stays.
    schedule.set_horizon(1000)
    got = [float(schedule(i)) for i in iterations[:5]]
    np.testing.assert_allclose(got, _numpy_rate(iterations[:5] + 1.0, peak, 100, 1000), rtol=1e-6)
    assert float(schedule(99)) == pytest.approx(peak)
    restored = LinearBudgetSchedule.from_config(schedule.get_config())
    assert restored.peak == schedule.peak


def test_linear_budget_schedule_sqrt_decay():
    # The 1 - sqrt decay over the same last 200 of 1,000 steps: at the linear factor d the rate
    # is 1 - sqrt(1 - d) of the peak; the warmup and the held peak are unchanged.
    schedule = LinearBudgetSchedule(64, 100, 1.0, 1099, decay_fraction=0.2, decay_shape="sqrt")
    peak = 64**-0.5 * 100**-0.5
    iterations = np.array([49, 99, 500, 899, 900, 999, 1049, 1097, 1098, 1099])
    got = np.array([float(schedule(i)) for i in iterations]) / peak
    linear = [0.5, 1, 1, 1, 0.995, 0.5, 0.25, 0.01, 0.005, 0]
    expected = [0.5, 1, 1, 1, 1 - 0.005**0.5, 1 - 0.5**0.5, 1 - 0.75**0.5, 1 - 0.99**0.5]
    expected += [1 - 0.995**0.5, 0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-7)
    assert np.all(got <= np.array(linear) + 1e-6)  # never above the linear decay
    restored = LinearBudgetSchedule.from_config(schedule.get_config())
    assert float(restored(1049)) == pytest.approx(float(schedule(1049)))
    assert get_hparams("transformer_small", "budget_decay_shape=sqrt").budget_decay_shape == "sqrt"
    with pytest.raises(ValueError, match="budget_decay_shape"):
        get_hparams("transformer_small", "budget_decay_shape=cosine")


def test_linear_budget_schedule_holds_its_peak_before_a_shorter_decay():
    # decay_fraction 0.2: the peak from the end of warmup until a fifth of the steps after the
    # warmup is left, then linear to zero (warmup-stable-decay).
    schedule = LinearBudgetSchedule(64, 100, 1.0, total_steps=1099, decay_fraction=0.2)
    peak = 64**-0.5 * 100**-0.5
    iterations = np.array([0, 49, 99, 500, 898, 899, 900, 1000, 1097, 1098, 1099])
    got = np.array([float(schedule(i)) for i in iterations])
    np.testing.assert_allclose(got, _numpy_rate(iterations + 1.0, peak, 100, 1099, 0.2), rtol=1e-6)
    # The decay spans the last 200 of the 1,000 steps after the warmup: literal values.
    np.testing.assert_allclose(
        got / peak, [0.01, 0.5, 1, 1, 1, 1, 0.995, 0.495, 0.01, 0.005, 0], rtol=1e-5, atol=1e-7
    )
    restored = LinearBudgetSchedule.from_config(schedule.get_config())
    assert restored.decay_fraction == 0.2
    assert float(restored(1000)) == pytest.approx(float(schedule(1000)))
    for bad in ("0", "1.5"):
        with pytest.raises(ValueError, match=r"budget_decay_fraction must be in \(0, 1\]"):
            get_hparams("transformer_small", f"budget_decay_fraction={bad}")


class _FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_budget_clock_turns_the_time_left_into_steps():
    clock = _FakeClock()  # t = 100
    timer = budget.BudgetClock(budget_minutes=3, spent_seconds=30.0, max_steps=10**6, clock=clock)
    clock.now += 10.0  # start-up: tracing
    for step in range(1, budget.STARTUP_STEPS + 1):
        clock.now += 0.5
        assert timer.observe(step) is None
    for step in range(21, 41):  # 2 steps/s
        clock.now += 0.5
        estimate = timer.observe(step)
    # t = 130: 180 - 30 (earlier processes) - 30 (this one) = 120 s left, 240 steps more.
    assert timer.steps_per_second() == pytest.approx(2.0)
    assert timer.remaining() == pytest.approx(120.0) and estimate == 40 + 240
    for step in range(41, 101):  # the machine halves its speed; the last minute's rate counts
        clock.now += 1.0
        estimate = timer.observe(step)
    assert timer.steps_per_second() == pytest.approx(1.0)
    assert timer.remaining() == pytest.approx(60.0) and estimate == 100 + 60
    clock.now += 60.0
    assert timer.expired() and timer.remaining() == 0.0 and timer.observe(101) == 101
    capped = budget.BudgetClock(1, 0.0, max_steps=25, clock=clock)
    for step in range(1, 30):
        clock.now += 0.01
        estimate = capped.observe(step)
    assert estimate == 25


def test_train_minutes_chooses_the_budget_schedule_unless_told_otherwise():
    small = get_hparams("transformer_small")
    budgeted = budget.budget_hparams(small, 20, "")
    assert budgeted.learning_rate_schedule == "linear_budget"
    assert budgeted.budget_minutes == 20 and budgeted.ema_momentum == budget.DEFAULT_EMA_MOMENTUM
    assert budget.budget_hparams(small, 0, "") is small
    told = small.override("learning_rate_schedule=rsqrt_warmup")
    assert budget.budget_hparams(told, 20, "learning_rate_schedule=rsqrt_warmup") is told
    no_ema = budget.budget_hparams(small.override("ema_momentum=0"), 5, "ema_momentum=0")
    assert no_ema.learning_rate_schedule == "linear_budget" and no_ema.ema_momentum == 0
    constant = small.replace(learning_rate_schedule="constant")
    assert budget.budget_hparams(constant, 20, "") is constant
    # Without minutes, linear_budget is a budget of steps (below).
    steps_only = small.replace(learning_rate_schedule="linear_budget")
    assert (
        budget.budget_hparams(steps_only, 0, "learning_rate_schedule=linear_budget") is steps_only
    )


def test_the_rate_factor_follows_the_expected_steps():
    small = get_hparams("transformer_small")  # 0.5 up to 1,500 steps, 0.7 from 4,400
    assert (small.learning_rate, small.budget_long_learning_rate) == (0.5, 0.7)
    factors = [budget.rate_factor(small, n) for n in (1, 1000, 1500, 4400, 20000)]
    assert factors == pytest.approx([0.5, 0.5, 0.5, 0.7, 0.7], abs=1e-12)
    # Linear in log(steps): halfway at the geometric mean of 1,500 and 4,400, a quarter of the
    # way at the geometric mean of 1,500 and that.
    middle = (1500 * 4400) ** 0.5
    assert budget.rate_factor(small, round(middle)) == pytest.approx(0.6, abs=1e-4)
    assert budget.rate_factor(small, round((1500 * middle) ** 0.5)) == pytest.approx(0.55, abs=1e-4)
    assert budget.rate_factor(small.replace(budget_long_learning_rate=0.0), 9000) == 0.5
    # A rate the user gives is the rate: the rule is off, unless it is named too.
    told = budget.budget_hparams(small, 20, "learning_rate=0.6")
    assert told.budget_long_learning_rate == 0.0 and budget.rate_factor(told, 9000) == 0.5
    both = "learning_rate=0.6,budget_long_learning_rate=0.9"
    assert budget.budget_hparams(small.override(both), 0, both).budget_long_learning_rate == 0.9
    with pytest.raises(ValueError, match="budget_short_steps and budget_long_steps"):
        small.override("budget_short_steps=5000")


def _rule_run(out, steps, overrides):
    overrides += ",learning_rate_schedule=linear_budget,warmup_steps=5,budget_long_learning_rate=2"
    overrides += ",budget_short_steps=20,budget_long_steps=80"
    hparams = get_hparams("transformer_tiny", overrides)
    cfg = config(out, steps, save_every=10, log_every=1, eval_every=10**6)
    training.train(FakeReverse(), cfg, hparams, "transformer_tiny")
    return hparams


def test_a_budget_of_steps_chooses_its_peak_from_them_and_a_resume_keeps_it(tmp_path):
    out = str(tmp_path / "run")
    # 40 steps: between 20 (the factor 1) and 80 (2), so 1 + log(40/20) / log(80/20) = 1.5.
    hparams = _rule_run(out, 40, "learning_rate=1")
    recorded = json.load(open(os.path.join(out, layout.RATE_FILE)))
    assert recorded["learning_rate"] == 1.5 and recorded["expected_steps"] == 40
    assert recorded["step"] == 0
    # The same rates as the schedule of the factor 1.5 from the first step.
    rates = _learning_rates(out)
    steps = np.arange(1, 41)
    expected = _numpy_rate(steps + 1.0, 1.5 * hparams.d_model**-0.5 * 5**-0.5, 4, horizon=40)
    np.testing.assert_allclose([rates[s] for s in steps], expected, rtol=1e-5, atol=1e-9)
    # A resume to 60 steps moves the horizon and, its expected steps having moved by more than
    # a tenth (train/decisions.py), takes the factor of 60 steps from the resumed step on.
    os.remove(os.path.join(out, layout.RATE_FILE))
    _rule_run(out, 60, "learning_rate=1")
    revised = json.load(open(os.path.join(out, layout.RATE_FILE)))
    factor = 1 + math.log(60 / 20) / math.log(80 / 20)
    assert revised["learning_rate"] == pytest.approx(factor, abs=1e-4)
    assert (revised["expected_steps"], revised["step"]) == (60, 40)
    reader = tf.train.load_checkpoint(os.path.join(out, "checkpoints", "ckpt-60"))
    assert reader.get_tensor("budget/factor/.ATTRIBUTES/VARIABLE_VALUE") == pytest.approx(factor)
    rates = _learning_rates(out)
    assert max(rates[s] for s in steps) == pytest.approx(max(expected), rel=1e-6)
    assert max(rates.values()) > max(expected)  # the revised factor's higher peak after step 40


def test_a_clock_chooses_its_peak_once_the_step_rate_is_measured(tmp_path, monkeypatch, step_clock):
    # The rate is measured from step 5 on, over 2 s (8 steps of the step clock): well within the
    # 15 s (60 steps).
    monkeypatch.setattr(budget, "RATE_WINDOW_SECONDS", 2.0)
    monkeypatch.setattr(budget, "STARTUP_STEPS", 5)
    out = str(tmp_path / "run")
    # A short warmup and the peak held until the last fifth: around the choice the rate is the
    # peak itself, whatever the horizon the step rate promises at that moment.
    overrides = "warmup_steps=5,budget_decay_fraction=0.2,budget_long_learning_rate=2.0"
    overrides += ",budget_short_steps=2,budget_long_steps=3"  # longer than 3 steps: the factor 2
    _, hparams = _budget_run(out, 0.25, 10**6, overrides)
    assert hparams.learning_rate == 1.0
    recorded = json.load(open(os.path.join(out, layout.RATE_FILE)))
    first_peak = 64**-0.5 * 5**-0.5
    assert recorded["learning_rate"] == 2.0 and recorded["step"] > budget.STARTUP_STEPS
    assert recorded["peak"] == pytest.approx(2.0 * first_peak, rel=1e-6)
    # The rate logged after step s is the next update's: the first peak up to the choice, twice
    # it from the update after it on.
    rates = _learning_rates(out)
    chosen = recorded["step"] + 1
    assert max(rates) > chosen + 1, "the budget ended at the choice"
    assert rates[chosen - 1] == pytest.approx(first_peak, rel=1e-5)
    assert rates[chosen] == pytest.approx(2.0 * first_peak, rel=1e-5)
    assert max(rates[s] for s in rates if s < chosen) <= first_peak * (1 + 1e-6)
    assert max(rates.values()) <= 2.0 * first_peak * (1 + 1e-6)


def _learning_rates(output_dir: str) -> dict[int, float]:
    rates = {}
    for path in glob.glob(os.path.join(output_dir, "summaries", "train", "events*")):
        for record in tf.data.TFRecordDataset(path):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                if value.tag == "learning_rate":
                    rates[event.step] = float(tf.make_ndarray(value.tensor))
    return rates


def _budget_run(output_dir, minutes, steps, overrides="warmup_steps=40", eval_every=50):
    hparams = budget.budget_hparams(get_hparams("transformer_tiny", overrides), minutes, overrides)
    cfg = config(
        output_dir, steps, save_every=25, train_minutes=minutes, log_every=1, eval_every=eval_every
    )
    return training.train(FakeReverse(), cfg, hparams, "transformer_tiny"), hparams


def test_a_budget_run_peaks_early_and_decays_to_zero_when_the_minutes_are_spent(
    tmp_path, monkeypatch, step_clock
):
    # The horizon, and with it the warmup (a tenth of it at most), is known after 5 steps
    # rather than 20; the budget of 30 s is 120 steps of the step clock. No dev evaluation
    # during the run (the end-of-run choice still evaluates).
    monkeypatch.setattr(budget, "STARTUP_STEPS", 5)
    out = str(tmp_path / "run")
    _, hparams = _budget_run(out, minutes=0.5, steps=10**6, eval_every=10**6)
    rates = _learning_rates(out)
    peak = hparams.learning_rate * hparams.d_model**-0.5 * hparams.warmup_steps**-0.5
    last = max(rates)
    assert last == 30 / step_clock.seconds_per_step, f"{last} steps in 30 s"
    # The peak, or close to it: a slow machine's short run spends its warmup on the start-up
    # steps.
    assert 0.85 * peak <= max(rates.values()) <= peak * (1 + 1e-6)
    # An early peak (the paper's schedule would still be warming up at the last step). The
    # warmup is a tenth of the step count expected when it was set; a machine that slows down
    # later in these 30 s makes fewer steps than expected, so the bound leaves room for that
    # (once 23 of 88 steps on a loaded machine).
    assert np.argmax([rates[s] for s in sorted(rates)]) < 0.4 * last
    # Near zero at the end of the budget. A save or an evaluation in the last second ends the
    # run a few steps before the horizon the step rate promised (once 5.1 % of the peak).
    assert rates[last] < 0.1 * peak
    recorded = json.load(open(os.path.join(out, layout.BUDGET_FILE)))
    assert recorded["budget_minutes"] == 0.5 and recorded["expected_steps"] >= recorded["step"]
    saved = json.load(open(os.path.join(out, "hparams.json")))["hparams"]
    assert saved["learning_rate_schedule"] == "linear_budget" and saved["budget_minutes"] == 0.5
    choice = final_choice.recorded_choice(out)
    assert choice["step"] == last
    assert set(choice["dev_loss"]) == {"last", "ema", "average"}
    assert choice["dev_loss"][choice["chosen"]] == min(choice["dev_loss"].values())

    # The budget is spent: a rerun trains no more, and keeps its choice.
    metrics, _ = _budget_run(out, minutes=0.5, steps=10**6, eval_every=10**6)
    assert max(_learning_rates(out)) == last and final_choice.recorded_choice(out) == choice
    # Another budget is another run.
    with pytest.raises(training.ConflictingRunError, match="budget_minutes: 0.5 != 0.25"):
        _budget_run(out, minutes=0.25, steps=10**6)


def test_a_resumed_budget_run_continues_its_schedule_with_the_minutes_left(tmp_path, step_clock):
    out = str(tmp_path / "run")
    _budget_run(out, minutes=2.0, steps=60)  # train_steps stops it first
    before = _learning_rates(out)
    reader = tf.train.load_checkpoint(os.path.join(out, "checkpoints", "ckpt-60"))
    spent = reader.get_tensor("budget/seconds/.ATTRIBUTES/VARIABLE_VALUE")
    horizon = reader.get_tensor("budget/horizon/.ATTRIBUTES/VARIABLE_VALUE")
    assert spent == 60 * step_clock.seconds_per_step and horizon >= 60
    _budget_run(out, minutes=2.0, steps=70)
    after = _learning_rates(out)
    # Step 61 goes on from step 60's horizon: no new warmup, no jump.
    assert after[61] == pytest.approx(before[60], rel=0.2)
    reader = tf.train.load_checkpoint(os.path.join(out, "checkpoints", "ckpt-70"))
    assert (
        reader.get_tensor("budget/seconds/.ATTRIBUTES/VARIABLE_VALUE")
        == 70 * step_clock.seconds_per_step
    )


class _FakeTrainer:
    """A "model" of one weight vector whose dev loss is its squared distance to `target`."""

    def __init__(self, size: int):
        self.model = keras.Sequential([keras.layers.Dense(1, use_bias=False)])
        self.model.build((None, size))
        self.hparams = get_hparams("transformer_tiny")  # ema_momentum 0: no EMA candidate

    def set(self, values):
        self.model.weights[0].assign(np.asarray(values, np.float32).reshape(-1, 1))


@pytest.mark.parametrize("metric", ["dev_loss", "dev_bleu"])
@pytest.mark.parametrize("case", ["average_wins", "last_wins", "best_wins"])
def test_the_end_of_a_budget_keeps_the_model_with_the_best_dev_score(tmp_path, case, metric):
    target = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
    trainer = _FakeTrainer(4)
    noise = np.array([[0.4, -0.4, 0.4, -0.4], [-0.4, 0.4, -0.4, 0.4], [0.4, 0.4, -0.4, -0.4],
                      [-0.4, -0.4, 0.4, 0.4]], np.float32)  # fmt: skip
    # average_wins: checkpoints scattered around the target, the last one far off. last_wins:
    # old checkpoints far off (a model still moving fast), the last one on the target.
    # best_wins: a run that overfits: its best evaluation (step 2) was nearer the target than
    # everything after it.
    saved = target + noise if case == "average_wins" else target + 3 * np.abs(noise)
    last = target if case == "last_wins" else target + 1.5
    best = target + 0.1 if case == "best_wins" else target + 2.5
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=trainer.model), str(tmp_path / "checkpoints"), max_to_keep=10
    )
    for step, values in enumerate([*saved, last], start=1):
        trainer.set(values)
        manager.save(checkpoint_number=step)
    trainer.set(best)
    checkpoints.save_model_checkpoint(trainer.model, str(tmp_path / "best"), 2)
    trainer.set(last)

    sign = -1.0 if metric == "dev_bleu" else 1.0  # BLEU: higher is better

    def score():
        return sign * float(np.sum((trainer.model.weights[0].numpy()[:, 0] - target) ** 2))

    record = final_choice.choose_final(trainer, str(tmp_path), 5, score, metric)
    average = (saved.sum(axis=0) + last) / 5
    candidates = {"last": last, "average": average, "best": best}
    expected = {name: sign * np.sum((v - target) ** 2) for name, v in candidates.items()}
    assert record["metric"] == metric and record[metric] == pytest.approx(expected)
    words = "highest dev BLEU" if metric == "dev_bleu" else "lowest dev loss"
    assert record["why"].startswith(f"{words}: {record['chosen']} ")
    assert record["chosen"] == case.removesuffix("_wins")
    np.testing.assert_allclose(trainer.model.weights[0].numpy()[:, 0], last)  # state kept
    reader = tf.train.load_checkpoint(os.path.join(tmp_path, FINAL_DIR, "ckpt-5"))
    name = [n for n in reader.get_variable_to_shape_map() if n.startswith("model/")][0]
    np.testing.assert_allclose(
        reader.get_tensor(name)[:, 0], candidates[record["chosen"]], rtol=1e-6
    )


def test_the_best_model_of_the_last_step_is_not_a_second_candidate(tmp_path):
    trainer = _FakeTrainer(2)
    trainer.set([1.0, 2.0])
    checkpoints.save_model_checkpoint(trainer.model, str(tmp_path / "best"), 7)
    record = final_choice.choose_final(trainer, str(tmp_path), 7, lambda: 1.0)
    assert set(record["dev_loss"]) == {"last"} and record["best"] is None


@pytest.mark.parametrize("decay_fraction", [1.0, 0.25])
def test_linear_budget_without_minutes_decays_to_zero_at_train_steps(tmp_path, decay_fraction):
    out = str(tmp_path / "run")
    overrides = "learning_rate_schedule=linear_budget,warmup_steps=5,ema_momentum=0.9"
    overrides += f",budget_decay_fraction={decay_fraction}"
    hparams = get_hparams("transformer_tiny", overrides)
    cfg = config(out, 40, save_every=10, log_every=1, eval_every=10**6)
    training.train(FakeReverse(), cfg, hparams, "transformer_tiny")
    rates = _learning_rates(out)
    peak = hparams.learning_rate * hparams.d_model**-0.5 * 5**-0.5
    # The rate logged after step s is the next update's, the schedule's step s + 1.
    steps = np.arange(1, 41)
    # warmup: a tenth of 40
    expected = _numpy_rate(steps + 1.0, peak, 4, horizon=40, decay_fraction=decay_fraction)
    np.testing.assert_allclose([rates[s] for s in steps], expected, rtol=1e-5, atol=1e-9)
    assert rates[40] == 0.0
    # A quarter of the 37 steps after the warmup (9.25) decays: the schedule's steps 4 to 31
    # (41 - 9.25) are at the peak, the rates logged after steps 3 to 30.
    held = [s for s in steps if rates[s] == pytest.approx(peak, rel=1e-6)]
    assert held == (list(range(3, 31)) if decay_fraction < 1 else [3])
    choice = final_choice.recorded_choice(out)
    assert choice["step"] == 40 and set(choice["dev_loss"]) == {"last", "ema", "average"}


@pytest.mark.parametrize("metric", ["dev_bleu", "dev_ter"])
def test_a_problem_scored_by_bleu_keeps_the_model_with_the_best_decoded_score(
    tmp_path, monkeypatch, metric
):
    """The end of a budget keeps the best of its candidates by dev BLEU, or by the decoded
    score the run keeps its best by (--best_metric=dev_ter: the lowest). With --bleu_examples
    the run's evaluations and its end-of-run choice score through one traced search."""
    from t2t_lite import problems
    from t2t_lite.train import step_loop
    from t2t_lite.train.evaluation import DevScorer, dev_scores

    made = []

    class Counted(DevScorer):
        def __init__(self, *args, **kwargs):
            made.append(args[3].bleu_examples)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(step_loop, "DevScorer", Counted)

    data_dir, out = str(tmp_path / "data"), str(tmp_path / "run")
    problem = problems.get_problem("algorithmic_reverse")
    problem.generate_data(
        data_dir, num_symbols=8, max_sequence_length=6, train_size=400, dev_size=40
    )
    problem.metric = "bleu"  # this instance only: scored like a translation problem
    overrides = "learning_rate_schedule=linear_budget,warmup_steps=20,ema_momentum=0.9"
    hparams = get_hparams("transformer_tiny", overrides)
    # 60 steps, 3 checkpoints to average: the choice is among three models whatever they learned.
    cfg = config(out, 60, save_every=20, eval_every=10**6)
    if metric != "dev_bleu":
        cfg = dataclasses.replace(cfg, best_metric=metric, bleu_examples=40)
    training.train(problem, dataclasses.replace(cfg, data_dir=data_dir), hparams, "tiny")
    choice = final_choice.recorded_choice(out)
    assert choice["metric"] == metric and set(choice[metric]) == {"last", "ema", "average"}
    # dev_ter: the final evaluation's scorer (40 examples) scored the candidates too
    assert made == ([final_choice.BLEU_EXAMPLES] if metric == "dev_bleu" else [40])
    scores = choice[metric]
    best = max if metric == "dev_bleu" else min
    assert scores[choice["chosen"]] == best(scores.values()) and 0.0 <= best(scores.values())
    # The kept model, read back as t2t-decode reads it, scores what choice.json says.
    model = Transformer.from_hparams(hparams, problem.tokenizer(data_dir).vocab_size)
    model.build()
    checkpoints.restore_model_weights(model, os.path.join(out, FINAL_DIR, "ckpt-60"))
    examples = cfg.bleu_examples or final_choice.BLEU_EXAMPLES
    score_config = types.SimpleNamespace(data_dir=data_dir, bleu_examples=examples)
    score = dev_scores(model, hparams, problem, score_config)[metric]
    assert score == pytest.approx(scores[choice["chosen"]])


def test_no_step_limit_only_with_minutes():
    import sys

    assert config("o", 0, 10, train_minutes=1.0).step_limit == sys.maxsize
    assert config("o", 7, 10, train_minutes=1.0).step_limit == 7
    with pytest.raises(ValueError, match="--train_steps must be positive, got 0"):
        config("o", 0, 10)
