"""Dropout chosen from the passes over the corpus a run will make ("late dropout").

Dropout pays only when a run sees its data often enough to overfit. P_drop 0.1 lost 3.2 (lohelp
en-de) and 2.6 (en-fr) BLEU at 2.8 passes over the training targets and 2.5 (en-de) at 5.6;
it gained 1.5 BLEU at 9.4 passes (en-de) and 6.5 F1 at about 20 on the GUM treebank
(docs/training.md, "Dropout from the passes over the corpus"). transformer_small's threshold is 8.

How many passes a `--train_minutes` run makes is known only once its step rate is: so with
hparams `dropout_passes` > 0, the run starts without dropout, and after `DECIDE_STEPS` steps (and,
on a clock, once the step rate is measured over a full minute) it estimates

    passes = expected steps * target tokens per step (measured) / target tokens of the train split

and switches `dropout` on for the rest of the run if passes >= dropout_passes. Dropout has no
weights, so turning it on later changes nothing but the traced step. Liu et al. ("Dropout Reduces
Underfitting", ICML 2023) name this "late dropout" and propose it for models that overfit.

The decision is taken again when the expected steps move by more than a tenth (a machine that
got busier or quieter: train/decisions.py), so the run ends with the choice of the steps it
really makes. The estimated passes are kept in each checkpoint (0 until decided), so a resumed
run starts with the choice.
"""

from __future__ import annotations

import os

import tensorflow as tf
from absl import logging

from t2t_lite.hparams import HParams
from t2t_lite.hparams.hparams_base import override_keys
from t2t_lite.run.layout import DROPOUT_FILE
from t2t_lite.train import decisions

# Steps measured before the decision: enough for a mean of the target tokens per step over
# batches of every length bucket.
DECIDE_STEPS = 100


def dropout_hparams(hparams: HParams, overrides: str = "") -> HParams:
    """A `dropout` given in `--hparams` applies from the first step, unless `dropout_passes` is
    given too: the user's choice wins over the rule."""
    given = override_keys(overrides)
    if "dropout" in given and "dropout_passes" not in given and hparams.dropout_passes:
        return hparams.replace(dropout_passes=0.0)
    return hparams


def expected_passes(expected_steps: int, tokens_per_step: float, train_tokens: int) -> float:
    """Passes over the train split's target tokens that `expected_steps` steps make."""
    return expected_steps * tokens_per_step / max(train_tokens, 1)


class LateDropoutState(tf.Module):
    """What a checkpoint keeps of the decision: the passes the run expected when it decided (0:
    not decided yet)."""

    def __init__(self):
        super().__init__(name="late_dropout")
        self.passes = tf.Variable(0.0, dtype=tf.float32, trainable=False, name="passes")

    @property
    def decided(self) -> bool:
        return float(self.passes.numpy()) > 0.0

    def dropout_on(self, hparams: HParams) -> bool:
        """Whether the decision made switches dropout on."""
        return self.decided and float(self.passes.numpy()) >= hparams.dropout_passes


class LateDropout:
    """Measures the target tokens per step and decides, once, whether dropout goes on.

    `trainer` is a t2t_lite.train.step.Trainer whose hparams have dropout_passes > 0.
    """

    def __init__(self, trainer, train_tokens: int, output_dir: str, chief: bool = True):
        self.trainer = trainer
        self.train_tokens = train_tokens
        self.output_dir, self.chief = output_dir, chief
        self.tokens, self.steps = 0.0, 0
        self.done = self.state.decided  # read once: not a variable read on every step
        self.basis: int | None = None  # the expected steps of the last decision

    @property
    def state(self) -> LateDropoutState:
        return self.trainer.late_dropout

    def observe(self, step: int, target_tokens: float, expected_steps: int | None) -> None:
        """After each step: `expected_steps` is the run's expected step count, None while a clock
        has not measured its rate over a full window. Decides after DECIDE_STEPS steps, and
        again when the count moves away from that of the last decision (train/decisions.py)."""
        self.tokens += float(target_tokens)
        self.steps += 1
        if self.steps < DECIDE_STEPS or expected_steps is None:
            return
        if self.done and not decisions.moved(self.basis, expected_steps):
            return
        self.basis = expected_steps
        passes = expected_passes(expected_steps, self.tokens / self.steps, self.train_tokens)
        hparams = self.trainer.hparams
        was_on = self.state.dropout_on(hparams) if self.done else None
        self.state.passes.assign(max(passes, 1e-6))
        on = self.state.dropout_on(hparams)
        if was_on is not None and on == was_on:
            return  # the same choice from the new count
        revised = was_on is not None
        self.done = True
        if on or revised:
            self.trainer.set_dropout(hparams.dropout if on else 0.0)
        self._record(step, expected_steps, passes, on, revised)

    def _record(self, step: int, expected: int, passes: float, on: bool, revised: bool) -> None:
        threshold, rate = self.trainer.hparams.dropout_passes, self.trainer.hparams.dropout
        line = (
            f"dropout{' revised' if revised else ''}: {passes:.2f} passes over the "
            f"{self.train_tokens} training target tokens expected ({expected} steps of "
            f"{self.tokens / self.steps:.0f} tokens); {'at least' if on else 'fewer than'} "
            f"dropout_passes={threshold:g}, so P_drop {rate if on else 0.0:g} from step {step + 1}"
        )
        logging.info("%s", line)
        if self.chief:
            entry = {
                "step": step,
                "expected_steps": expected,
                "tokens_per_step": round(self.tokens / self.steps, 1),
                "train_tokens": self.train_tokens,
                "expected_passes": round(passes, 3),
                "dropout_passes": threshold,
                "dropout": rate if on else 0.0,
            }
            decisions.record(os.path.join(self.output_dir, DROPOUT_FILE), entry)
