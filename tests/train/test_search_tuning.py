"""The end of a --train_minutes budget on a tiny problem: the share kept from training, the
averaging candidate, and the search tuned on dev, which later decodes use unless told otherwise."""

from __future__ import annotations

import json
import logging
import os

import pytest
from step_clock import StepClock

from t2t_lite import problems
from t2t_lite.hparams import get_hparams
from t2t_lite.run.checkpoints import list_checkpoints
from t2t_lite.run.run import Run
from t2t_lite.train import budget, search_tuning
from t2t_lite.train import loop as training

OVERRIDES = (
    "num_encoder_layers=1,num_decoder_layers=1,batch_size=256,budget_tune_share=0.25,"
    "budget_tune_min_seconds=0"
)
MINUTES = 0.25


@pytest.fixture(scope="module")
def tuned_run(tmp_path_factory):
    data_dir = str(tmp_path_factory.mktemp("data"))
    problem = problems.get_problem("algorithmic_reverse")
    problem.generate_data(
        data_dir, num_symbols=8, max_sequence_length=6, train_size=400, dev_size=30
    )
    out = str(tmp_path_factory.mktemp("run"))
    config = training.TrainConfig(
        output_dir=out, data_dir=data_dir, train_minutes=MINUTES, save_every=10**6,
        eval_every=10**6, log_every=1, hparams_overrides=OVERRIDES,
    )  # fmt: skip
    hparams = get_hparams("transformer_tiny", OVERRIDES)
    with pytest.MonkeyPatch.context() as patch:
        # Training on the step clock (tests/step_clock.py): its 11.25 s are 45 steps on any
        # machine; the tuning's 3.75 s are real seconds. The rate read after 5 steps, not 20.
        StepClock().install(patch.setattr)
        patch.setattr(budget, "STARTUP_STEPS", 5)
        training.train(problem, config, hparams, "transformer_tiny")
    return out


def test_the_budget_keeps_its_share_from_training(tuned_run):
    with open(os.path.join(tuned_run, "budget.json")) as f:
        record = json.load(f)
    # The clock of training is 75 % of the minutes; the last record is a step before its end.
    assert record["budget_minutes"] == pytest.approx(MINUTES)
    assert record["training_minutes"] == pytest.approx(MINUTES * 0.75)
    assert abs(record["spent_minutes"] - MINUTES * 0.75) < 0.01  # a step after the clock's end


def test_a_budget_run_saves_an_average_to_choose_from(tuned_run):
    saved = list_checkpoints(os.path.join(tuned_run, "checkpoints"))
    assert len(saved) >= 3  # --save_every never came: the budget's own saves
    with open(os.path.join(tuned_run, "final", "choice.json")) as f:
        choice = json.load(f)
    assert "average" in choice[choice["metric"]] and len(choice["averaged"]) >= 3


def test_the_tuned_search_is_the_grids_best_and_decodes_use_it(tuned_run):
    with open(os.path.join(tuned_run, "search.json")) as f:
        record = json.load(f)
    metric, grid = record["metric"], record["grid"]
    assert metric == "accuracy" and record["examples"] == 30
    assert (grid[0]["beam_size"], grid[0]["alpha"]) == (1, 0.0)  # the problem's own first
    best = max(e[metric] for e in grid)
    first_best = next(e for e in grid if e[metric] == best)
    assert (record["beam_size"], record["alpha"]) == (first_best["beam_size"], first_best["alpha"])
    assert search_tuning.tuned(tuned_run)
    run = Run.restore(tuned_run)
    assert (run.search.beam_size, run.search.alpha) == (record["beam_size"], record["alpha"])
    flags = Run.restore(tuned_run, search={"beam_size": 2, "alpha": 0.2, "extra_length": None})
    assert (flags.search.beam_size, flags.search.alpha) == (2, 0.2)


def test_the_grid_in_order_and_bounded_by_its_time(tuned_run):
    """Unbounded: the problem's setting, the alphas at the tuning beam, the beams at the best
    alpha. With no time to spare only the problem's own setting is measured."""
    record = search_tuning.tune_search(tuned_run, examples=30)
    grid, metric = record["grid"], record["metric"]
    assert [(e["beam_size"], e["alpha"]) for e in grid[:5]] == [
        (1, 0.0), (4, 0.6), (4, 1.0), (4, 1.2), (4, 1.4)
    ]  # fmt: skip
    at_four = grid[1:5]
    best_alpha = next(e["alpha"] for e in at_four if e[metric] == max(x[metric] for x in at_four))
    assert [(e["beam_size"], e["alpha"]) for e in grid[5:]] == [(1, best_alpha)]
    assert record["left_out"] == []
    short = search_tuning.tune_search(tuned_run, examples=30, seconds=0.001)
    assert [(e["beam_size"], e["alpha"]) for e in short["grid"]] == [(1, 0.0)]
    # The four alphas at beam 4 and beam 4 at the problem's alpha.
    assert len(short["left_out"]) == 5 and (short["beam_size"], short["alpha"]) == (1, 0.0)


def test_the_grid_is_the_problems(tuned_run, monkeypatch):
    """A problem names its own alphas and beams (parsing: two alphas, the wider beam)."""
    problem_class = type(problems.get_problem("algorithmic_reverse"))
    monkeypatch.setattr(problem_class, "tune_alphas", (0.3, 0.9))
    monkeypatch.setattr(problem_class, "tune_beams", (2, 3))
    record = search_tuning.tune_search(tuned_run, examples=30)
    grid, metric = record["grid"], record["metric"]
    assert [(e["beam_size"], e["alpha"]) for e in grid[:3]] == [(1, 0.0), (2, 0.3), (2, 0.9)]
    best_alpha = max(grid[1:3], key=lambda e: e[metric])["alpha"]
    assert [(e["beam_size"], e["alpha"]) for e in grid[3:]] == [(1, best_alpha), (3, best_alpha)]


def test_a_share_too_short_to_tune_is_not_kept():
    """transformer_small keeps 5 %: a minute of 20, which tunes, and 15 s of 5, which does not."""
    problem = problems.get_problem("translate_ende_lohelp")
    small = get_hparams("transformer_small")
    assert search_tuning.kept_share(problem, small.replace(budget_minutes=20)) == 0.05
    assert search_tuning.kept_share(problem, small.replace(budget_minutes=10)) == 0.05  # 30 s
    assert search_tuning.kept_share(problem, small.replace(budget_minutes=5)) == 0.0
    assert search_tuning.kept_share(problem, small) == 0.0  # no budget
    low = small.replace(budget_minutes=5, budget_tune_min_seconds=15)
    assert search_tuning.kept_share(problem, low) == 0.05


def test_a_short_budget_trains_all_of_it_and_keeps_the_problems_search(
    tmp_path, caplog, step_clock
):
    caplog.set_level(logging.INFO, logger="absl")
    data_dir = str(tmp_path / "data")
    problem = problems.get_problem("algorithmic_reverse")
    problem.generate_data(
        data_dir, num_symbols=8, max_sequence_length=6, train_size=200, dev_size=10
    )
    out = str(tmp_path / "run")
    overrides = "num_encoder_layers=1,num_decoder_layers=1,batch_size=256,budget_tune_share=0.25"
    config = training.TrainConfig(
        output_dir=out, data_dir=data_dir, train_minutes=0.1, save_every=10**6,
        eval_every=10**6, log_every=1, hparams_overrides=overrides,
    )  # fmt: skip
    training.train(problem, config, get_hparams("transformer_tiny", overrides), "transformer_tiny")
    # 1.5 s of share: under 30 s, so none kept (budget.json, written once the step rate is
    # measured, may not come in the 6 s of the step clock; the log line says it at the start).
    said = [r.getMessage() for r in caplog.records if "not in this budget" in r.getMessage()]
    assert len(said) == 1 and "under budget_tune_min_seconds=30" in said[0]
    assert not os.path.exists(os.path.join(out, "search.json"))
    run = Run.restore(out)
    assert (run.search.beam_size, run.search.alpha) == (1, 0.0)  # the problem's own
