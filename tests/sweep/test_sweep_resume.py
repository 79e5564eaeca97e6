"""What a sweep makes of its run folders: which runs are done, to resume or new, and how many
minutes a resumed run may still train."""

import json
import os

import pytest

from t2t_lite.sweep import records, resume
from t2t_lite.sweep.plan import SweepConfig, definition_from_flags, plan_runs


def planned(tmp_path, **values):
    config = SweepConfig(
        sweep_dir=str(tmp_path), problem="algorithmic_reverse", data_dir="d", seeds=(1,), **values
    )
    definition = definition_from_flags("", [], ["num_heads=1;num_heads=2"], "transformer_tiny")
    return plan_runs(definition, config), config


def write(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(value, f)


def test_folder_states_decide_what_runs(tmp_path):
    (done, partial, new), config = planned(tmp_path, train_minutes=5.0)
    records.write_done(done, config, {"dev_loss": 1.0}, minutes=5.0)
    write(os.path.join(partial.output_dir, "hparams.json"), {"hparams": {}})  # state lost
    work = resume.plan_work([done, partial, new], config)
    assert [status for _, status in work] == [resume.DONE, resume.RESUME, resume.NEW]
    records.write_state(partial, config, attempts=1, minutes=2.0)
    assert resume.run_status(partial, config) == resume.RESUME


def test_a_folder_of_another_run_is_refused(tmp_path):
    (run, _, _), config = planned(tmp_path, train_minutes=5.0)
    records.write_state(run, config, attempts=1, minutes=1.0)
    _, longer = planned(tmp_path, train_minutes=10.0)
    with pytest.raises(resume.ConflictingRecordError, match=r"train_minutes: 5.0 != 10.0"):
        resume.plan_work([run], longer)


def test_a_resumed_run_gets_the_rest_of_its_minutes(tmp_path):
    (run, _, _), config = planned(tmp_path, train_minutes=5.0)
    assert resume.minutes_for_attempt(run, config) == 5.0
    records.write_state(run, config, attempts=1, minutes=3.5)
    assert resume.minutes_for_attempt(run, config) == pytest.approx(1.5)
    records.write_state(run, config, attempts=2, minutes=5.2)  # spent, no checkpoint: redo
    assert resume.minutes_for_attempt(run, config) == 5.0
    write(os.path.join(run.output_dir, "checkpoints", "checkpoint"), {})
    assert resume.minutes_for_attempt(run, config) == 0.0  # spent: evaluate only
    # A run whose t2t-train keeps its own budget gets the same --train_minutes to resume.
    write(os.path.join(run.output_dir, "hparams.json"), {"hparams": {"budget_minutes": 5.0}})
    assert resume.minutes_for_attempt(run, config) == 5.0


def test_step_budgets_pass_no_minutes(tmp_path):
    (run, _, _), config = planned(tmp_path, train_steps=100)
    records.write_state(run, config, attempts=1, minutes=3.5)
    assert resume.minutes_for_attempt(run, config) is None
