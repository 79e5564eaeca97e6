"""t2t-sweep as a user runs it: a tiny sweep (two rows, two seeds, a few steps of
algorithmic_reverse) writes its report with the runs' own numbers; rerun, it trains only the
run that is not recorded as finished; --report_only rebuilds the same report."""

import json
import logging
import math
import os

import pytest
from command_helpers import command

RUNS = (
    "transformer_tiny-seed1",
    "num_heads=2-seed1",
    "transformer_tiny-seed2",
    "num_heads=2-seed2",
)


def read_json(*parts: str) -> dict:
    with open(os.path.join(*parts)) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    from t2t_lite import problems

    root = tmp_path_factory.mktemp("sweep")
    data_dir, sweep_dir = str(root / "data"), str(root / "sweep")
    problems.get_problem("algorithmic_reverse").generate_data(
        data_dir, num_symbols=8, max_sequence_length=6, train_size=200, dev_size=20
    )
    flags = [
        "--problem=algorithmic_reverse", f"--data_dir={data_dir}", f"--sweep_dir={sweep_dir}",
        "--hparams_set=transformer_tiny", "--overrides=num_heads=2", "--seeds=1,2",
        "--hparams=num_encoder_layers=1,num_decoder_layers=1,batch_size=256",
        "--train_steps=4", "--save_every=2", "--eval_every=4", "--log_every=2",
    ]  # fmt: skip
    first = command("t2t_sweep", *flags)
    assert first.returncode == 0, first.stderr[-3000:]
    return sweep_dir, flags, first


def test_the_report_holds_the_runs_own_numbers(swept):
    sweep_dir, _, first = swept
    for k, name in enumerate(RUNS, start=1):
        assert f"run {k} of 4: starting {name}" in first.stderr
        assert f"run {k} of 4: {name} finished: step 4" in first.stderr
    built = read_json(sweep_dir, "report.json")
    assert built["metric"] == "accuracy" and not built["unfinished"]
    for row in built["rows"]:
        for seed, result in row["seeds"].items():
            run_dir = os.path.join(sweep_dir, "runs", f"{row['name']}-seed{seed}")
            # The loop's one evaluation was of the last checkpoint, which the sweep evaluated.
            trained = read_json(run_dir, "best", "best.json")["metrics"]
            assert result["checkpoint"] == os.path.join("checkpoints", "ckpt-4")
            assert result["dev_loss"] == pytest.approx(trained["dev_loss"], rel=1e-6)
            assert result["dev_accuracy"] == pytest.approx(trained["dev_accuracy"], rel=1e-6)
            assert result["decoded_examples"] == 20 and 0 <= result["accuracy"] <= 100
        perplexities = [math.exp(row["seeds"][s]["dev_loss"]) for s in ("1", "2")]
        assert row["dev_perplexity"]["mean"] == pytest.approx(sum(perplexities) / 2)
        assert row["dev_perplexity"]["values"] == pytest.approx(perplexities)
    small, large = (row["params"] for row in built["rows"])
    assert small == large > 0  # num_heads does not change the parameter count
    text = open(os.path.join(sweep_dir, "report.md")).read()
    assert "| num_heads=2 | num_heads=2 |" in text and " ± " in text
    assert "![overrides](overrides.png)" in text
    assert open(os.path.join(sweep_dir, "overrides.png"), "rb").read(4) == b"\x89PNG"


def test_a_rerun_trains_only_what_is_not_finished(swept, caplog):
    from t2t_lite.sweep.plan import load_plan
    from t2t_lite.sweep.runner import run_sweep

    sweep_dir = swept[0]
    runs = os.path.join(sweep_dir, "runs")

    def files(name):
        folder = os.path.join(runs, name, "checkpoints")
        return {f: os.stat(os.path.join(folder, f)).st_mtime_ns for f in os.listdir(folder)}

    before = {name: files(name) for name in RUNS}
    logs = {name: open(os.path.join(runs, name, "train.log")).read() for name in RUNS}
    # As if the sweep was killed after training the last run, before recording it.
    os.remove(os.path.join(runs, RUNS[-1], "sweep_done.json"))
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.INFO, logger="absl")  # whatever verbosity earlier tests left
    run_sweep(*load_plan(sweep_dir))  # the same sweep (the plan the command saved)
    for k, name in enumerate(RUNS[:-1], start=1):
        assert f"run {k} of 4: {name} finished earlier; skipped" in caplog.text
        assert files(name) == before[name]
        assert open(os.path.join(runs, name, "train.log")).read() == logs[name]
    assert f"run 4 of 4: resuming {RUNS[-1]}" in caplog.text
    log = open(os.path.join(runs, RUNS[-1], "train.log")).read()
    assert log.startswith(logs[RUNS[-1]]) and "--- attempt 2:" in log
    assert "resumed from" in log.split("--- attempt 2:")[1]
    assert os.path.isfile(os.path.join(runs, RUNS[-1], "sweep_done.json"))


def test_report_only_rebuilds_the_same_report(swept):
    sweep_dir = swept[0]
    files = ("report.json", "report.md", "overrides.png")
    before = {name: open(os.path.join(sweep_dir, name), "rb").read() for name in files}
    for name in files:
        os.remove(os.path.join(sweep_dir, name))
    rebuilt = command("t2t_sweep", f"--sweep_dir={sweep_dir}", "--report_only")
    assert rebuilt.returncode == 0, rebuilt.stderr[-3000:]
    assert rebuilt.stdout.strip() == os.path.join(sweep_dir, "report.md")
    for name in ("report.json", "report.md"):
        assert open(os.path.join(sweep_dir, name), "rb").read() == before[name]
    assert os.path.getsize(os.path.join(sweep_dir, "overrides.png")) > 1000
    assert "starting" not in rebuilt.stderr and "resuming" not in rebuilt.stderr


def test_usage_errors_are_one_line(tmp_path):
    missing = command("t2t_sweep", f"--sweep_dir={tmp_path}", "--problem=algorithmic_reverse")
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines()[-1] == (
        "t2t-sweep: error: --problem and --data_dir are needed (except with --report_only)"
    )
    nothing = command("t2t_sweep", f"--sweep_dir={tmp_path}", "--report_only")
    assert nothing.returncode == 2 and "no sweep has run in" in nothing.stderr
