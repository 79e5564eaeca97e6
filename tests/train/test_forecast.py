"""What a budget says it will buy (train/forecast.py): the forecast's figures from the counted
tokens and a given rate, the warning with the minutes that reach the bar, the advice for a given
--hparams_set, and a real budget run logging its forecast once and keeping it in budget.json."""

from __future__ import annotations

import json
import logging
import math
import types

import pytest
from fake_problem import FakeReverse

from t2t_lite.hparams import get_hparams
from t2t_lite.model.flops import forward_flops_per_token
from t2t_lite.train import loop, model_choice
from t2t_lite.train.config import TrainConfig
from t2t_lite.train.forecast import Forecast, tokens_for
from t2t_lite.train.info import count_parameters

LADDER = ("transformer_budget_xs", "transformer_budget_s", "transformer_budget_m")


def _messages(caplog, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


def test_tokens_for_inverts_effective_tokens():
    for tokens in (500.0, 1000.0, 3000.0, 40_000.0):
        effective = model_choice.effective_tokens(tokens, 1000)
        assert tokens_for(effective, 1000) == pytest.approx(tokens)
    assert tokens_for(16_500.0, 1000) == math.inf  # over U (1 + R*): no number of passes
    assert tokens_for(700.0, 0) == 700.0


def _forecast(tmp_path, name: str, given: bool, corpus: int = 10**7) -> Forecast:
    problem = types.SimpleNamespace(budget_ladder=LADDER, train_tokens=lambda data_dir: corpus)
    config = TrainConfig(str(tmp_path / "run"), "", train_minutes=20.0)
    return Forecast(problem, config, (name, get_hparams(name)), 4000, given)


def test_the_forecast_counts_steps_passes_and_tokens_per_parameter(tmp_path, caplog):
    forecast, kept = _forecast(tmp_path, "transformer_budget_xs", given=False), []
    with caplog.at_level(logging.INFO, logger="absl"):  # whatever earlier tests left
        assert (
            forecast.observe(900.0, None, None, 2_000_000, 1140.0, kept.append) is None
        )  # not settled
        record = forecast.observe(1100.0, 2.0, 2400, 2_000_000, 1140.0, kept.append)
        assert (
            forecast.observe(1000.0, 2.0, 2400, 2_000_000, 1140.0, kept.append) is None
        )  # once only
    assert kept == [record]  # passed to be kept in budget.json
    # 1,000 target tokens a step over the two counted, 2,400 steps: 2.4M tokens of a 10M corpus
    assert record["target_tokens_per_step"] == 1000.0
    assert record["expected_passes"] == 0.24
    assert record["tokens_per_parameter"] == 1.2
    # 0.5 per parameter: 1M tokens, 500 s at 2,000 target tokens/s, training being 1140/1200 of
    # the budget's minutes
    assert record["minutes_needed"] == round(500.0 / 60.0 / (1140.0 / 1200.0), 1)
    (line,) = _messages(caplog, "budget forecast")
    assert line.startswith(
        "budget forecast: about 2,400 steps of transformer_budget_xs (2.0M parameters) in 20 "
        "minutes at 2.00 steps/s: 0.2 passes over the training targets, 1.20 training tokens "
        "per parameter"
    )
    assert not _messages(caplog, "undertrained") and not _messages(caplog, "model choice")


def test_a_run_below_the_bar_is_warned_with_the_minutes_that_reach_it(tmp_path, caplog):
    forecast, kept = _forecast(tmp_path, "transformer_budget_m", given=True), []
    parameters = count_parameters(get_hparams("transformer_budget_m"), 4000)
    with caplog.at_level(logging.INFO, logger="absl"):
        forecast.observe(1000.0, None, None, parameters, 1200.0, kept.append)
        record = forecast.observe(1000.0, 0.8, 900, parameters, 1200.0, kept.append)
    assert record["tokens_per_parameter"] == round(900_000 / parameters, 3)
    assert record["tokens_per_parameter"] < model_choice.TOKENS_PER_PARAMETER
    # the bar's tokens at 800 target tokens a second, all of the budget training
    minutes = 0.5 * parameters / 800.0 / 60.0
    assert record["minutes_needed"] == round(minutes, 1)
    (warning,) = _messages(caplog, "undertrained")
    assert warning.startswith("budget: transformer_budget_m will be undertrained in 20 minutes")
    assert warning.endswith(
        f"--train_minutes={math.ceil(round(minutes, 1))} would reach it; or leave out "
        "--hparams_set for the budget to choose the model's width"
    )
    # the given set's advice: the others' rates from this run's by FLOPs per token
    flops = {n: forward_flops_per_token(get_hparams(n), 4000, 32, 32) for n in LADDER}
    xs = forecast._estimate("transformer_budget_xs", 0.8)
    # xs takes 512-token batches where m takes 1,024: twice the steps of half the target tokens
    assert xs.steps_per_second == pytest.approx(0.8 * flops[LADDER[2]] / flops[LADDER[0]] * 2)
    assert xs.tokens_per_step == 500.0
    expected = model_choice.choose(
        LADDER, lambda n: forecast._estimate(n, 0.8), lambda n: 1200.0, 10**7
    )
    assert expected.hparams_set != "transformer_budget_m"  # 0.8 steps/s: m is too wide
    (advice,) = _messages(caplog, "model choice")
    assert advice.startswith(
        "model choice: --hparams_set=transformer_budget_m trains as given; the budget would "
        f"have chosen {expected.hparams_set} (rates estimated from this run's 0.80 steps/s"
    )


def test_a_corpus_too_small_for_the_model_says_no_minutes_reach_the_bar(tmp_path, caplog):
    forecast, kept = _forecast(tmp_path, "transformer_budget_xs", given=False, corpus=10_000), []
    with caplog.at_level(logging.INFO, logger="absl"):
        forecast.observe(1000.0, None, None, 2_000_000, 1200.0, kept.append)
        record = forecast.observe(1000.0, 2.0, 2400, 2_000_000, 1200.0, kept.append)
    # 2.4M tokens are 240 passes over 10,000: worth at most 164,000 effective tokens
    assert record["tokens_per_parameter"] == round(
        model_choice.effective_tokens(2.4e6, 10_000) / 2e6, 3
    )
    assert record["minutes_needed"] is None
    (warning,) = _messages(caplog, "undertrained")
    assert warning.endswith(
        "no number of minutes gets there on this corpus: train a narrower model"
    )


def test_a_budget_run_logs_its_forecast_once_and_keeps_it(
    tmp_path, monkeypatch, caplog, step_clock
):
    from t2t_lite.train import budget

    # On the step clock (tests/step_clock.py) the 18 s budget is 72 steps, the second 4.
    monkeypatch.setattr(budget, "RATE_WINDOW_SECONDS", 1.0)  # settled after a second
    problem = FakeReverse()
    problem.budget_ladder = ("transformer_tiny", "transformer_budget_xs")
    config = TrainConfig(
        str(tmp_path / "run"), "", train_minutes=0.3, eval_every=10**6, log_every=10**6
    )
    hparams = get_hparams("transformer_tiny")
    with caplog.at_level(logging.INFO, logger="absl"):
        loop.train(problem, config, hparams, "transformer_tiny", advise=True)
    (line,) = _messages(caplog, "budget forecast")
    assert line.startswith("budget forecast: about ")
    (advice,) = _messages(caplog, "model choice")
    assert advice.startswith(
        "model choice: --hparams_set=transformer_tiny trains as given; the budget would "
        "have chosen transformer_"
    )
    with open(f"{config.output_dir}/budget.json") as f:
        kept = json.load(f)
    # written when the forecast was made (log_every never comes), and kept by later records
    forecast = kept[budget.FORECAST]
    assert forecast["hparams_set"] == "transformer_tiny"
    assert f"about {forecast['expected_steps']:,} steps" in line
    assert forecast["steps_per_second"] > 0 and forecast["parameters"] > 0
