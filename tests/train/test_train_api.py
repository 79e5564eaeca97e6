"""train() from Python is t2t-train: the same budget resolution (schedule, EMA, the late-dropout
rule and what --hparams leaves alone), recorded in the same hparams.json, and the same
end-of-run choice made in final/, for the same flags and TrainConfig."""

from __future__ import annotations

import json
import os

from command_helpers import run_python

from t2t_lite.hparams import get_hparams
from t2t_lite.problems import get_problem
from t2t_lite.run.layout import CHOICE_FILE, FINAL_DIR
from t2t_lite.run.run_info import RunInfo
from t2t_lite.train import loop as training

MINUTES = 0.05
OVERRIDES = "dropout=0.2,batch_size=512"
HELPERS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "train_helpers.py")


def test_train_from_python_resolves_as_the_command(tmp_path, step_clock):
    """Both runs train on the step clock (tests/step_clock.py): 12 steps in their 3 s."""
    data_dir = str(tmp_path / "data")
    problem = get_problem("algorithmic_reverse")
    problem.generate_data(data_dir, max_sequence_length=5, train_size=300, dev_size=20)
    run_python(
        HELPERS, "t2t_train_step_clock",
        "--problem=algorithmic_reverse", "--hparams_set=transformer_tiny",
        f"--hparams={OVERRIDES}", f"--data_dir={data_dir}",
        f"--output_dir={tmp_path / 'command'}", f"--train_minutes={MINUTES}",
        "--eval_every=50", "--save_every=50", "--log_every=50",
    )  # fmt: skip
    config = training.TrainConfig(
        output_dir=str(tmp_path / "python"),
        data_dir=data_dir,
        train_minutes=MINUTES,
        eval_every=50,
        save_every=50,
        log_every=50,
        hparams_overrides=OVERRIDES,
    )
    training.train(problem, config, get_hparams("transformer_tiny", OVERRIDES), "transformer_tiny")

    runs = {name: RunInfo.load(str(tmp_path / name)) for name in ("command", "python")}
    assert runs["python"].hparams == runs["command"].hparams
    resolved = runs["python"].hparams
    # The budget's settings, and the user's dropout kept from the first step (no late rule).
    assert resolved.learning_rate_schedule == "linear_budget"
    assert resolved.budget_minutes == MINUTES and resolved.ema_momentum > 0
    assert resolved.dropout == 0.2 and resolved.dropout_passes == 0.0
    assert resolved.batch_size == 512
    choices = {
        name: json.load(open(tmp_path / name / FINAL_DIR / CHOICE_FILE))
        for name in ("command", "python")
    }
    assert choices["python"].keys() == choices["command"].keys()
    assert choices["python"]["step"] == choices["command"]["step"]  # the same steps in 3 s
    for choice in choices.values():  # the same metric and candidates: last and EMA at least
        assert choice["metric"] == "dev_loss" and {"last", "ema"} <= set(choice["dev_loss"])
        assert choice["ema_momentum"] == resolved.ema_momentum


def test_resolving_twice_changes_nothing():
    config = training.TrainConfig(output_dir="o", data_dir="d", train_minutes=1.0)
    once = training.resolve_run(config, get_hparams("transformer_small"))
    twice = training.resolve_run(*once)
    assert once == twice and once[0].train_steps == 0
    steps = training.resolve_run(training.TrainConfig("o", "d"), get_hparams("transformer_tiny"))
    assert steps[0].train_steps == get_hparams("transformer_tiny").train_steps
    assert steps[1] == get_hparams("transformer_tiny")  # no budget: the set as it is
