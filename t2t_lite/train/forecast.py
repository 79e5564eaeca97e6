"""What a budget will buy on this machine, said early: once a `--train_minutes` run's step rate
is measured (about a minute in), one line with the steps the minutes hold, the passes over the
training targets and the training tokens per parameter, against the bar of the budget's choice
of model (train/model_choice.py, TOKENS_PER_PARAMETER), which the figures in docs/training.md
were measured above. A run below the bar gets a warning with what to do: the minutes that
would reach it, or for a given --hparams_set, the budget's own choice. A run given
--hparams_set also logs what the budget would have chosen (its other sets' rates estimated from
this run's by FLOPs per token: probing them would spend the user's minutes).

The forecast is kept in budget.json (budget.FORECAST), for scripts such as `make demo` to read.
"""

from __future__ import annotations

import math

from absl import logging

from t2t_lite.hparams import get_hparams
from t2t_lite.train import model_choice
from t2t_lite.train.config import TrainConfig


def tokens_for(effective: float, corpus_tokens: int) -> float:
    """The training tokens whose `effective_tokens` are `effective` (its inverse); inf when no
    number of passes over `corpus_tokens` gets there (repeats are worth less and less)."""
    if corpus_tokens <= 0 or effective <= corpus_tokens:
        return float(effective)
    share = (effective / corpus_tokens - 1.0) / model_choice.REPEAT_SCALE
    if share >= 1.0:
        return math.inf
    return corpus_tokens * (1.0 - model_choice.REPEAT_SCALE * math.log(1.0 - share))


class Forecast:
    """Counts the run's target tokens per step; at the first settled rate, logs the forecast
    (`observe`). `run_set`: (the hparams set's name, its hparams); `given`: the set was named
    by --hparams_set."""

    def __init__(self, problem, config: TrainConfig, run_set: tuple, vocab_size: int, given: bool):
        self.ladder = problem.budget_ladder
        self.corpus_tokens = problem.train_tokens(config.data_dir)
        self.hparams_set, self.hparams = run_set
        self.vocab_size, self.given = vocab_size, given
        self.overrides, self.minutes = config.hparams_overrides, config.train_minutes
        self.tokens, self.steps, self.done = 0.0, 0, False

    def observe(self, target_tokens: float, rate, expected, parameters: int, train_seconds, keep):
        """Counts a step's target tokens; with the run's settled steps per second `rate` (None
        before) and the steps it `expected` in all, makes the forecast once, passes it to `keep`
        (budget.json), then logs it and returns it; else returns None. `train_seconds`: the
        budget's seconds of training."""
        self.tokens += target_tokens
        self.steps += 1
        if self.done or not rate or rate <= 0 or expected is None:
            return None
        self.done = True
        record = self._record(rate, expected, parameters, train_seconds)
        keep(record)  # before the line: what reads the log finds the record
        logging.info("%s", self._line(record))
        if record["tokens_per_parameter"] < model_choice.TOKENS_PER_PARAMETER:
            logging.warning("%s", self._warning(record))
        if self.given and len(self.ladder) > 1:
            self._advise(rate, train_seconds)
        return record

    def _record(self, rate: float, expected: int, parameters: int, train_seconds: float) -> dict:
        per_step = self.tokens / self.steps
        tokens = expected * per_step
        needed = tokens_for(model_choice.TOKENS_PER_PARAMETER * parameters, self.corpus_tokens)
        # The budget's minutes (its search-tuning share included) that would reach the bar.
        share = train_seconds / (60.0 * self.minutes)
        minutes = needed / (rate * per_step) / 60.0 / share
        effective = model_choice.effective_tokens(tokens, self.corpus_tokens)
        return {
            "hparams_set": self.hparams_set,
            "parameters": parameters,
            "steps_per_second": round(rate, 3),
            "target_tokens_per_step": round(per_step, 1),
            "expected_steps": expected,
            "expected_passes": round(tokens / max(self.corpus_tokens, 1), 2),
            "tokens_per_parameter": round(effective / parameters, 3),
            "tokens_per_parameter_needed": model_choice.TOKENS_PER_PARAMETER,
            "minutes_needed": None if math.isinf(minutes) else round(minutes, 1),
        }

    def _line(self, r: dict) -> str:
        return (
            f"budget forecast: about {r['expected_steps']:,} steps of {self.hparams_set} "
            f"({r['parameters'] / 1e6:.1f}M parameters) in {self.minutes:g} minutes at "
            f"{r['steps_per_second']:.2f} steps/s: {r['expected_passes']:.1f} passes over the "
            f"training targets, {r['tokens_per_parameter']:.2f} training tokens per parameter "
            f"(the budget's choice of model and the figures in docs/training.md ask at least "
            f"{model_choice.TOKENS_PER_PARAMETER:g})"
        )

    def _warning(self, r: dict) -> str:
        if r["minutes_needed"] is None:
            more = "no number of minutes gets there on this corpus: train a narrower model"
        else:
            more = f"--train_minutes={math.ceil(r['minutes_needed'])} would reach it"
        if self.given and len(self.ladder) > 1:
            more += "; or leave out --hparams_set for the budget to choose the model's width"
        return (
            f"budget: {self.hparams_set} will be undertrained in {self.minutes:g} minutes on this "
            f"machine ({r['tokens_per_parameter']:.2f} tokens per parameter, under "
            f"{model_choice.TOKENS_PER_PARAMETER:g}): expect a weaker model than the docs' "
            f"figures; {more}"
        )

    def _advise(self, rate: float, train_seconds: float) -> None:
        choice = model_choice.choose(
            self.ladder,
            lambda name: self._estimate(name, rate),
            lambda name: train_seconds,
            self.corpus_tokens,
        )
        logging.info(
            "model choice: --hparams_set=%s trains as given; the budget would have chosen %s "
            "(rates estimated from this run's %.2f steps/s by FLOPs per token: %s)",
            self.hparams_set,
            choice.hparams_set,
            rate,
            "; ".join(c.describe() for c in choice.candidates),
        )

    def _estimate(self, name: str, rate: float) -> model_choice.Measured:
        return estimate_by_flops(
            name, self.overrides, self.vocab_size, self.hparams, rate, self.tokens / self.steps
        )


def estimate_by_flops(
    name: str, overrides: str, vocab_size: int, measured_hparams, rate: float, tokens: float
) -> model_choice.Measured:
    """Hparams set `name` (with `overrides`) at the rate its forward FLOPs per token allow,
    from `rate` steps/s measured for `measured_hparams` with `tokens` target tokens a step, its
    parameters counted. The tokens a second are what carries over: a set with smaller batches
    takes more steps of fewer tokens each, in the ratio of the two `batch_size`s. Not timed:
    `seconds` 0."""
    from t2t_lite.model.flops import forward_flops_per_token
    from t2t_lite.train.info import count_parameters

    hparams = get_hparams(name, overrides)
    flops = forward_flops_per_token(hparams, vocab_size, 32, 32)
    own = forward_flops_per_token(measured_hparams, vocab_size, 32, 32)
    batches = measured_hparams.batch_size / hparams.batch_size
    return model_choice.Measured(
        name=name,
        parameters=count_parameters(hparams, vocab_size),
        steps_per_second=rate * own / flops * batches,
        tokens_per_step=tokens / batches,
        seconds=0.0,
    )
