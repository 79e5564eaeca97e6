"""The budget's choice of model (train/model_choice.py, train/model_probe.py) without timing: the
rule from given rates and corpus sizes, the probe's timing on a fake clock with a stub step,
the choice recorded and kept by a resumed run, and an explicit --hparams_set winning."""

from __future__ import annotations

import dataclasses
import json
import math
import types

import pytest
from fake_problem import FakeReverse

from t2t_lite.hparams import get_hparams
from t2t_lite.model.flops import forward_flops_per_token
from t2t_lite.train import loop, model_choice, model_probe
from t2t_lite.train.budget import BudgetClock
from t2t_lite.train.config import TrainConfig
from t2t_lite.train.info import count_parameters
from t2t_lite.train.model_choice import Measured

LADDER = ("narrow", "middle", "wide")
PARAMETERS = {"narrow": 1_000_000, "middle": 2_000_000, "wide": 4_000_000}


def _measure(rates: dict[str, float], probed=None, seconds: float = 0.0):
    """Probes that find `rates` and 1,000 target tokens a step, taking `seconds` each."""

    def measure(name: str) -> Measured:
        if probed is not None:
            probed.append(name)
        return Measured(name, PARAMETERS[name], rates[name], 1000.0, seconds)

    return measure


def test_effective_tokens_count_the_first_pass_whole_and_repeats_by_the_decay():
    assert model_choice.effective_tokens(500.0, 1000) == 500.0
    assert model_choice.effective_tokens(1000.0, 1000) == 1000.0
    # 3 passes over 1,000 tokens: 2 repeats, D' = U (1 + 15.4 (1 - exp(-2 / 15.4)))
    expected = 1000 * (1 + 15.4 * (1 - math.exp(-2 / 15.4)))
    assert model_choice.effective_tokens(3000.0, 1000) == pytest.approx(expected)
    assert 2800 < expected < 3000
    # however many passes, at most U (1 + R*)
    assert model_choice.effective_tokens(1e9, 1000) == pytest.approx(16_400.0)
    assert model_choice.effective_tokens(700.0, 0) == 700.0  # no corpus count: as processed


def test_a_fast_machine_trains_the_widest_set_and_probes_it_alone():
    probed: list[str] = []
    # wide: 5 steps/s * 1,200 s * 1,000 tokens = 6M tokens for 4M parameters (1.5 per parameter)
    rates = {"narrow": 20.0, "middle": 10.0, "wide": 5.0}
    choice = model_choice.choose(LADDER, _measure(rates, probed=probed), lambda n: 1200.0, 10**8)
    assert choice.hparams_set == "wide" and probed == ["wide"]
    (wide,) = choice.candidates
    assert wide.steps == 6000 and wide.tokens_per_parameter == pytest.approx(1.5)
    assert wide.passes == pytest.approx(0.06)


def test_a_slow_machine_trains_the_widest_set_that_reaches_the_bar():
    probed: list[str] = []
    # 1,200 s, 1,000 tokens a step, a corpus of 10M tokens (no repeats):
    # wide 0.2 steps/s -> 240k tokens / 4M = 0.06; middle 1.0 -> 1.2M / 2M = 0.6 >= 0.5
    rates = {"narrow": 2.0, "middle": 1.0, "wide": 0.2}
    choice = model_choice.choose(LADDER, _measure(rates, probed=probed), lambda n: 1200.0, 10**7)
    assert choice.hparams_set == "middle" and probed == ["wide", "middle"]
    assert [c.enough for c in choice.candidates] == [False, True]
    assert choice.candidates[1].tokens_per_parameter == pytest.approx(0.6)


def test_the_corpus_size_moves_the_choice_through_repeats():
    # middle at 1.0 steps/s: 1.2M tokens. Over a 10M-token corpus all of it counts (0.6 per
    # parameter); over 40k tokens it is 30 passes, worth 40k * (1 + 15.4 (1 - e^(-29/15.4)))
    # = 562k, 0.28 per parameter: the narrow set, which sees 2.4M tokens (60 passes, worth
    # 643k: 0.64 per parameter), is trained.
    rates = {"narrow": 2.0, "middle": 1.0, "wide": 0.2}
    big = model_choice.choose(LADDER, _measure(rates), lambda n: 1200.0, 10**7)
    small = model_choice.choose(LADDER, _measure(rates), lambda n: 1200.0, 40_000)
    assert big.hparams_set == "middle"
    assert small.hparams_set == "narrow"  # not probed: it trains once the wider ones fail
    assert [c.measured.name for c in small.candidates] == ["wide", "middle"]
    middle = small.candidates[1]
    assert middle.passes == pytest.approx(30.0)
    assert middle.tokens_per_parameter == pytest.approx(
        40_000 * (1 + 15.4 * (1 - math.exp(-29 / 15.4))) / 2e6
    )
    narrow = model_choice.Assessed(_measure(rates)("narrow"), 1200.0, 40_000)
    assert narrow.enough and narrow.tokens_per_parameter == pytest.approx(
        40_000 * (1 + 15.4 * (1 - math.exp(-59 / 15.4))) / 1e6
    )


def test_none_reaching_the_bar_trains_the_narrowest_unprobed_and_seconds_shrink_with_probes():
    probed: list[str] = []
    rates = {"narrow": 0.1, "middle": 0.05, "wide": 0.01}
    measure = _measure(rates, probed=probed, seconds=2.0)
    choice = model_choice.choose(LADDER, measure, lambda n: 602.0, 10**7)
    assert choice.hparams_set == "narrow" and probed == ["wide", "middle"]  # 2 s a probe
    assert [c.seconds for c in choice.candidates] == [600.0, 598.0]
    assert [c.steps for c in choice.candidates] == [6, 29]
    line = choice.line()
    assert line.startswith(
        "model choice: narrow, no wider set reaches 0.5 tokens per parameter: the narrowest, "
        "not timed"
    )
    assert "wide (4.0M parameters, 0.01 steps/s): 6 steps" in line
    assert "probes took 4.0 s of the budget" in line
    record = choice.to_json()
    assert record["hparams_set"] == "narrow" and record["tokens_per_parameter_needed"] == 0.5
    assert [c["hparams_set"] for c in record["candidates"]] == ["wide", "middle"]
    assert record["candidates"][1]["expected_steps"] == 29 and "passed_over" not in record


def _flops_estimate(ratios: dict[str, float], margin: float = model_choice.RATE_MARGIN):
    """`choose`'s estimate for ladders of LADDER's names: a wider rate times the FLOPs ratio
    `ratios[wider] / ratios[name]`, times `margin`."""

    def estimate(name: str, wider: Measured) -> Measured:
        rate = wider.steps_per_second * ratios[wider.name] / ratios[name] * margin
        return Measured(name, PARAMETERS[name], rate, wider.tokens_per_step, 0.0)

    return estimate


def test_a_candidate_that_fails_even_at_its_best_rate_is_passed_over_unprobed():
    flops = {"narrow": 1.0, "middle": 2.0, "wide": 4.0}
    probed: list[str] = []
    # wide 0.1 steps/s: 120k tokens / 4M = 0.03. middle at best 0.1 x 2 x 1.5 = 0.3 steps/s:
    # 360k / 2M = 0.18 < 0.5, so it is not probed; narrow trains, unprobed.
    rates = {"narrow": 0.8, "middle": 0.3, "wide": 0.1}
    measure = _measure(rates, probed=probed, seconds=2.0)
    choice = model_choice.choose(LADDER, measure, lambda n: 1202.0, 10**7, _flops_estimate(flops))
    assert choice.hparams_set == "narrow" and probed == ["wide"]
    (middle,) = choice.passed_over
    assert middle.measured.steps_per_second == pytest.approx(0.3)
    assert middle.seconds == 1200.0 and middle.tokens_per_parameter == pytest.approx(0.18)
    assert (
        "middle (2.0M parameters, at most 0.30 steps/s by FLOPs): at most 0.18 tokens per "
        "parameter: not timed" in choice.line()
    )
    assert "probes took 2.0 s" in choice.line()
    assert [c["hparams_set"] for c in choice.to_json()["passed_over"]] == ["middle"]
    # At 0.2 steps/s for wide, middle could reach 0.6 steps/s (0.36 per parameter at best):
    # still passed over. At 0.3, its best is 0.9 steps/s (0.54): probed, and its own rate rules.
    for wide_rate, probes in ((0.2, ["wide"]), (0.3, ["wide", "middle"])):
        probed.clear()
        rates["wide"] = wide_rate
        again = model_choice.choose(
            LADDER, measure, lambda n: 1202.0, 10**7, _flops_estimate(flops)
        )
        assert probed == probes and again.hparams_set == "narrow"
    # A middle fast enough once probed is chosen, as without the estimate.
    rates["middle"] = 0.9
    chosen = model_choice.choose(LADDER, measure, lambda n: 1202.0, 10**7, _flops_estimate(flops))
    assert chosen.hparams_set == "middle" and chosen.passed_over == ()


class _Clock:
    def __init__(self):
        self.now = 50.0

    def __call__(self):
        return self.now


def test_the_probe_times_steps_after_the_traced_ones_on_a_fake_clock():
    clock = _Clock()
    durations = iter([9.0, 3.0] + [0.5] * 100)  # tracing, a cache, then 0.5 s a step
    tokens = iter([1.0, 1.0] + [800.0, 1200.0] * 50)

    def step() -> float:
        clock.now += next(durations)
        return next(tokens)

    rate, per_step = model_choice.time_steps(step, clock)
    # 2 untimed steps, then steps until PROBE_SECONDS (3 s): 6 steps of 0.5 s
    assert rate == pytest.approx(2.0)
    assert per_step == pytest.approx(1000.0)
    assert next(durations) == 0.5 and clock.now == 50.0 + 12.0 + 3.0


def test_the_probe_stops_at_its_step_limit_on_a_fast_step():
    clock = _Clock()

    def step() -> float:
        clock.now += 0.001
        return 10.0

    rate, _ = model_choice.time_steps(step, clock)
    assert rate == pytest.approx(1000.0)
    assert clock.now == pytest.approx(50.0 + 0.001 * (2 + model_choice.PROBE_MAX_STEPS))


def _config(tmp_path, minutes: float = 20.0) -> TrainConfig:
    return TrainConfig(str(tmp_path / "run"), str(tmp_path / "data"), train_minutes=minutes)


def _problem():
    return types.SimpleNamespace(budget_ladder=LADDER, check_data_dir=lambda data_dir: None)


def _no_probe(*args, **kwargs):
    raise AssertionError("probed")


def test_an_explicit_set_wins_and_nothing_is_probed(tmp_path, monkeypatch):
    monkeypatch.setattr(model_probe, "choose_on_this_machine", _no_probe)
    chosen = model_probe.hparams_set_for_run(_problem(), _config(tmp_path), "transformer_tiny")
    assert chosen == model_probe.RunSet("transformer_tiny", 0.0)


def test_without_minutes_the_default_is_tensor2tensors(tmp_path, monkeypatch):
    monkeypatch.setattr(model_probe, "choose_on_this_machine", _no_probe)
    chosen = model_probe.hparams_set_for_run(_problem(), _config(tmp_path, 0.0), None)
    assert chosen.name == "transformer_base"


def test_the_choice_is_recorded_and_a_resumed_run_keeps_it(tmp_path, monkeypatch):
    rates = {"narrow": 2.0, "middle": 1.0, "wide": 0.2}
    choice = model_choice.choose(LADDER, _measure(rates), lambda n: 1200.0, 10**7)
    monkeypatch.setattr(model_probe, "choose_on_this_machine", lambda *a, **k: choice)
    config = _config(tmp_path)
    chosen = model_probe.hparams_set_for_run(_problem(), config, None)
    assert chosen == model_probe.RunSet("middle", 0.0)
    recorded = model_probe.recorded_choice(config.output_dir)
    assert recorded["hparams_set"] == "middle"
    assert [c["expected_steps"] for c in recorded["candidates"]] == [240, 1200]
    # The clock's records keep the choice.
    clock = BudgetClock(20.0, 0.0, 10**6, _Clock())
    clock.record(config.output_dir, 100, 5000)
    with open(f"{config.output_dir}/budget.json") as f:
        record = json.load(f)
    assert record["expected_steps"] == 5000 and record["model_choice"] == recorded
    # A resumed run (its hparams.json names its set) keeps it, whatever a probe would say now.
    with open(f"{config.output_dir}/hparams.json", "w") as f:
        json.dump({"hparams_set": "middle"}, f)
    monkeypatch.setattr(model_probe, "choose_on_this_machine", _no_probe)
    assert model_probe.hparams_set_for_run(_problem(), config, None) == model_probe.RunSet("middle")


def test_sizes_in_hparams_without_a_set_are_refused_before_any_probe(tmp_path, monkeypatch):
    monkeypatch.setattr(model_probe, "probe", _no_probe)
    ladder = ("transformer_budget_xs", "transformer_budget_s", "transformer_budget_m")
    problem = types.SimpleNamespace(budget_ladder=ladder, train_tokens=lambda data_dir: 10**6)
    assert model_probe.sizes_overridden(ladder, "d_ff=384,dropout=0.2,d_model=96") == [
        "d_ff",
        "d_model",
    ]
    config = dataclasses.replace(_config(tmp_path), hparams_overrides="d_model=96,d_ff=384")
    with pytest.raises(
        ValueError,
        match=r"^--hparams sets d_ff, d_model, in which the budget's "
        r"candidates \(transformer_budget_xs, transformer_budget_s, "
        r"transformer_budget_m\) differ.*--hparams_set=transformer_budget_xs",
    ):
        model_probe.choose_on_this_machine(problem, config)
    # What every candidate shares (depth, dropout) may be set; a one-set ladder has no sizes.
    assert model_probe.sizes_overridden(ladder, "num_encoder_layers=4,dropout=0.2") == []
    assert model_probe.sizes_overridden(("transformer_tiny",), "d_model=32") == []


def test_one_set_or_a_short_budget_is_not_probed():
    one = model_choice.untimed(("only",), 20)
    assert one.hparams_set == "only" and one.candidates == ()
    assert one.line() == "model choice: only, the problem's one set for a budget"
    short = model_choice.untimed(LADDER, 2.9)
    assert short.hparams_set == "narrow" and short.to_json()["untimed"].startswith("the narrow")
    assert model_choice.untimed(LADDER, 3.0) is None


def test_the_probe_times_a_real_training_step(tmp_path):
    problem = FakeReverse()
    config = TrainConfig(str(tmp_path / "run"), "", train_minutes=20)
    measured = model_probe.probe("transformer_tiny", problem, config)
    assert measured.parameters == count_parameters(get_hparams("transformer_tiny"), 12)
    assert measured.steps_per_second > 0 and measured.seconds > 0
    # a step's batch: at most batch_size tokens of examples of at most 9 targets
    assert 9 <= measured.tokens_per_step <= get_hparams("transformer_tiny").batch_size


def test_best_rate_scales_a_wider_rate_by_flops_and_the_margin(tmp_path, monkeypatch):
    problem = FakeReverse()
    problem.budget_ladder = ("transformer_tiny", "transformer_budget_xs", "transformer_budget_s")
    probed: list[str] = []

    def probe(name, *args):
        probed.append(name)
        return Measured(name, 10**6, 0.01, 50.0, seconds=3.0)

    monkeypatch.setattr(model_probe, "probe", probe)
    config = TrainConfig(str(tmp_path / "run"), "", train_minutes=20)
    choice = model_probe.choose_on_this_machine(problem, config)
    # s at 0.01 steps/s is far from the bar; xs at its best rate too: only s was probed.
    assert probed == ["transformer_budget_s"] and choice.hparams_set == "transformer_tiny"
    (xs,) = choice.passed_over
    flops = {
        name: forward_flops_per_token(get_hparams(name), 12, 32, 32)
        for name in ("transformer_budget_xs", "transformer_budget_s")
    }
    # xs's batches are half of s's tokens (512 against 1,024): twice the steps of half the tokens
    batches = (
        get_hparams("transformer_budget_s").batch_size
        / get_hparams("transformer_budget_xs").batch_size
    )
    assert batches == 2.0
    expected = 0.01 * flops["transformer_budget_s"] / flops["transformer_budget_xs"] * 1.5 * 2.0
    assert model_choice.RATE_MARGIN == 1.5
    assert xs.measured.steps_per_second == pytest.approx(expected)
    assert 4.0 < expected / 0.01 < 12.0  # narrower by width: fewer FLOPs per token
    assert xs.measured.parameters == count_parameters(get_hparams("transformer_budget_xs"), 12)
    assert xs.measured.tokens_per_step == 25.0 and xs.measured.seconds == 0.0
    # what the rule compares is the same as with equal batches: tokens a second
    assert xs.measured.steps_per_second * xs.measured.tokens_per_step == pytest.approx(
        0.01 * 50.0 * flops["transformer_budget_s"] / flops["transformer_budget_xs"] * 1.5
    )


def test_a_budget_run_without_a_set_trains_its_choice_and_a_rerun_keeps_it(tmp_path, monkeypatch):
    problem = FakeReverse()
    problem.budget_ladder = ("transformer_tiny", "transformer_budget_xs")
    # xs too slow for the bar, so tiny trains (unprobed); xs's probe takes 14.5 s of a 15 s budget

    def probe(name, *args):
        assert name == "transformer_budget_xs"
        return Measured(name, 10**6, 0.001, 50.0, seconds=14.5)

    monkeypatch.setattr(model_probe, "probe", probe)
    monkeypatch.setattr(model_choice, "PROBE_MIN_MINUTES", 0.0)
    config = TrainConfig(str(tmp_path / "run"), "", train_minutes=0.25, eval_every=10**6)
    chosen = model_probe.hparams_set_for_run(problem, config, None)
    assert chosen == model_probe.RunSet("transformer_tiny", 14.5)
    record = model_probe.recorded_choice(config.output_dir)
    assert [c["hparams_set"] for c in record["candidates"]] == ["transformer_budget_xs"]
    assert record["candidates"][0]["expected_steps"] == 0  # 0.001 steps/s
    # The run trains its choice with the probes' seconds spent: the 0.5 s left end it at its
    # first step (whose tracing alone takes longer).
    metrics = loop.train(problem, config, get_hparams(chosen.name), chosen.name, None, 14.5)
    assert metrics["step"] == 1
    with open(f"{config.output_dir}/hparams.json") as f:
        assert json.load(f)["hparams_set"] == "transformer_tiny"
    assert model_probe.recorded_choice(config.output_dir) == record
    # A rerun keeps the run's set without probing.
    monkeypatch.setattr(model_probe, "probe", _no_probe)
    assert model_probe.hparams_set_for_run(problem, config, None) == model_probe.RunSet(
        "transformer_tiny"
    )
