"""Late dropout (t2t_lite.train.late_dropout): the traced step really is without dropout until
the switch and with it after; the decision follows the passes formula, is made once, and a
restored run keeps it; a real run writes the passes it expected."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from fake_problem import FakeReverse
from train_helpers import one_batch, run_training

from t2t_lite.hparams import get_hparams
from t2t_lite.train import budget, late_dropout
from t2t_lite.train.step import Trainer

# A learning rate of 0 keeps the weights, so that every step sees the same model.
FROZEN = "dropout=0.1,dropout_passes=3,learning_rate_schedule=constant,learning_rate=0.0"


def _trainer(overrides: str) -> Trainer:
    strategy = tf.distribute.MirroredStrategy(devices=["/cpu:0"])
    return Trainer(get_hparams("transformer_tiny", overrides), FakeReverse().vocab_size, strategy)


def _losses(trainer: Trainer, batch: dict, steps: int) -> list[float]:
    dataset = tf.data.Dataset.from_tensors(batch).repeat()
    iterator = iter(trainer.strategy.experimental_distribute_dataset(dataset))
    return [float(trainer.train_step(iterator)["loss"]) for _ in range(steps)]


def _rates(trainer: Trainer) -> set[float]:
    model = trainer.model
    blocks = model.encoder.blocks + model.decoder.blocks
    return {model.embedding_dropout.rate} | {block.dropout.rate for block in blocks}


def test_the_step_has_no_dropout_until_the_switch_and_dropout_after_it():
    trainer = _trainer(FROZEN)
    batch = one_batch(FakeReverse(), 0, 32, 9)
    stats = trainer.eval_step({k: tf.constant(v) for k, v in batch.items()})
    eval_loss = float(stats.smoothed_sum / stats.target_tokens)
    before = _losses(trainer, batch, 3)
    assert _rates(trainer) == {0.0}
    # Without dropout the training loss is the evaluation's, step after step.
    np.testing.assert_allclose(before, [eval_loss] * 3, rtol=1e-5)
    trainer.set_dropout(0.1)
    assert _rates(trainer) == {0.1}
    after = _losses(trainer, batch, 3)
    # With dropout each step draws new masks: every loss differs from the dropout-free one.
    assert min(abs(loss - eval_loss) for loss in after) > 1e-4
    assert len(set(after)) == 3
    with pytest.raises(ValueError, match="neither 0 nor the model's dropout"):
        trainer.model.set_dropout(0.3)


def test_a_restored_run_keeps_the_decision(tmp_path):
    first = _trainer(FROZEN)
    first.late_dropout.passes.assign(4.0)  # decided: 4 passes >= 3, dropout on
    path = first.checkpoint().save(str(tmp_path / "on"))
    first.late_dropout.passes.assign(2.5)  # decided: 2.5 < 3, off
    path_off = first.checkpoint().save(str(tmp_path / "off"))
    for saved, rate in ((path, 0.1), (path_off, 0.0)):
        trainer = _trainer(FROZEN)
        assert _rates(trainer) == {0.0}
        trainer.checkpoint().restore(saved).assert_existing_objects_matched()
        trainer.restored()
        assert _rates(trainer) == {rate}
    # Without dropout_passes, dropout is on from the start and no state is kept.
    plain = _trainer("dropout=0.1")
    assert plain.late_dropout is None and _rates(plain) == {0.1}
    assert "late_dropout" not in plain.checkpoint()._trackable_children()


class _StandIn:
    """The parts of a Trainer that LateDropout uses."""

    def __init__(self, threshold: float):
        self.hparams = get_hparams("transformer_tiny", f"dropout=0.1,dropout_passes={threshold}")
        self.late_dropout = late_dropout.LateDropoutState()
        self.rates: list[float] = []

    def set_dropout(self, rate: float) -> None:
        self.rates.append(rate)


@pytest.mark.parametrize("threshold, on", [(5.0, True), (5.01, False)])
def test_the_decision_counts_passes_after_decide_steps(tmp_path, threshold, on):
    trainer = _StandIn(threshold)
    late = late_dropout.LateDropout(trainer, train_tokens=100_000, output_dir=str(tmp_path))
    # Target tokens alternate 400 and 600, then 500: a mean of 500 per step.
    for step in range(1, late_dropout.DECIDE_STEPS):
        late.observe(step, 400.0 if step % 2 else 600.0, expected_steps=1000)
    assert not trainer.late_dropout.decided and not os.path.exists(tmp_path / "dropout.json")
    late.observe(late_dropout.DECIDE_STEPS, 600.0, expected_steps=None)  # the clock not settled
    assert not trainer.late_dropout.decided
    late.observe(late_dropout.DECIDE_STEPS + 1, 500.0, expected_steps=1000)
    # 1000 steps of 500 tokens over 100,000 tokens: 5.0 passes.
    assert float(trainer.late_dropout.passes.numpy()) == pytest.approx(5.0)
    assert trainer.rates == ([0.1] if on else [])
    with open(tmp_path / "dropout.json") as f:
        record = json.load(f)
    assert record["expected_passes"] == pytest.approx(5.0)
    assert record["dropout"] == (0.1 if on else 0.0) and record["step"] == 101
    late.observe(200, 500.0, expected_steps=1080)  # a move within a tenth: nothing changes
    assert float(trainer.late_dropout.passes.numpy()) == pytest.approx(5.0)
    assert trainer.rates == ([0.1] if on else [])


@pytest.mark.parametrize(("first", "then"), [(1400, 700), (700, 1400)])
def test_the_decision_is_revised_when_the_expected_steps_move(tmp_path, first, then):
    """Threshold 5 passes, 500 tokens a step over 100,000: 1,400 expected steps (7 passes) call
    for dropout, 700 (3.5) for none. The rate halves (1,400 --> 700) or doubles (700 -->
    1,400) after the decision: the run ends with the choice of the new count, and the record
    keeps both decisions."""
    trainer = _StandIn(5.0)
    late = late_dropout.LateDropout(trainer, train_tokens=100_000, output_dir=str(tmp_path))
    for step in range(1, late_dropout.DECIDE_STEPS + 1):
        late.observe(step, 500.0, expected_steps=first)
    assert trainer.late_dropout.dropout_on(trainer.hparams) == (first == 1400)
    for step in range(late_dropout.DECIDE_STEPS + 1, 2 * late_dropout.DECIDE_STEPS):
        late.observe(step, 500.0, expected_steps=then)
    assert trainer.late_dropout.dropout_on(trainer.hparams) == (then == 1400)
    assert trainer.rates == ([0.1, 0.0] if first == 1400 else [0.1])
    with open(tmp_path / "dropout.json") as f:
        record = json.load(f)
    assert [d["dropout"] for d in record["decisions"]] == (
        [0.1, 0.0] if first == 1400 else [0.0, 0.1]
    )
    assert record["dropout"] == record["decisions"][-1]["dropout"]
    assert record["decisions"][-1]["step"] == late_dropout.DECIDE_STEPS + 1


def test_a_dropout_given_by_the_user_applies_from_the_first_step():
    small = get_hparams("transformer_small")
    assert small.dropout_passes > 0
    assert late_dropout.dropout_hparams(small, "").dropout_passes == small.dropout_passes
    assert late_dropout.dropout_hparams(small, "dropout=0.2").dropout_passes == 0.0
    both = "dropout=0.2,dropout_passes=9"
    assert late_dropout.dropout_hparams(small, both) is small
    with pytest.raises(ValueError, match="dropout_passes must be >= 0"):
        get_hparams("transformer_small", "dropout_passes=-1")


def test_the_clock_settles_after_a_full_window():
    now = [0.0]
    clock = budget.BudgetClock(10, 0.0, 10**6, clock=lambda: now[0])
    for step in range(1, 200):
        now[0] += 0.5
        clock.observe(step)
        full = now[0] - 0.5 * (budget.STARTUP_STEPS + 1) >= budget.RATE_WINDOW_SECONDS
        assert clock.settled() == full, step


def test_a_run_switches_dropout_on_from_its_expected_passes(tmp_path, monkeypatch):
    # The decision after 20 steps rather than 100: the mean target length of 20 batches of 113
    # examples (more than one pass over the 2,000) is the split's within the 3 % below, and 60
    # steps of them are 3.4 passes.
    monkeypatch.setattr(late_dropout, "DECIDE_STEPS", 20)
    problem = FakeReverse()
    steps = 60
    run_training(str(tmp_path), steps, 30, "dropout=0.1,dropout_passes=3")
    with open(tmp_path / "dropout.json") as f:
        record = json.load(f)
    inputs, targets = problem.arrays("train")
    batch = get_hparams("transformer_tiny").batch_size // (problem.max_symbols + 1)
    # Batches of `batch` examples, whose mean target length is the split's.
    formula = steps * batch / len(targets)
    assert record["step"] == late_dropout.DECIDE_STEPS and record["expected_steps"] == steps
    assert record["train_tokens"] == np.count_nonzero(targets)
    assert record["expected_passes"] == pytest.approx(formula, rel=0.03)
    assert record["dropout"] == 0.1 and formula > 3
