"""t2t-train and t2t-avg-checkpoints as a user runs them (a resumed run with other flags:
tests/train/test_training.py)."""

import json
import os

from command_helpers import command, run_python

HELPERS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "train_helpers.py")


def test_train_then_average(tmp_path):
    from t2t_lite import problems
    from t2t_lite.run.run_info import RunInfo

    data_dir, out = str(tmp_path / "data"), str(tmp_path / "run")
    problems.get_problem("algorithmic_reverse").generate_data(
        data_dir, num_symbols=8, max_sequence_length=6, train_size=200, dev_size=20
    )
    flags = [
        "--problem=algorithmic_reverse", "--hparams_set=transformer_tiny",
        f"--data_dir={data_dir}", f"--output_dir={out}", "--train_steps=4", "--save_every=1",
        "--eval_every=4", "--log_every=2", "--keep_checkpoints=3",
    ]  # fmt: skip
    trained = command("t2t_train", *flags, "--hparams=num_encoder_layers=1,batch_size=256")
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert "step 4/4 loss" in trained.stderr and "step 4 dev: dev_loss" in trained.stderr
    assert RunInfo.load(out).hparams.num_encoder_layers == 1
    # The run records its vocabulary's SHA-256, as metadata.json has it.
    metadata = problems.read_metadata(data_dir)
    assert RunInfo.load(out).vocab_sha256 == metadata["vocab"]["sha256"]
    assert RunInfo.load(out).problem_options == {
        "num_symbols": 8, "max_sequence_length": 6, "train_size": 200, "dev_size": 20,
        "test_size": 500,
    }  # fmt: skip
    assert sorted(os.listdir(os.path.join(out, "checkpoints")))[:3] == [
        "checkpoint", "ckpt-2.data-00000-of-00001", "ckpt-2.index",
    ]  # fmt: skip

    averaged = command("t2t_avg_checkpoints", f"--output_dir={out}", "--num_last=2")
    assert averaged.returncode == 0, averaged.stderr[-3000:]
    assert averaged.stdout.strip() == os.path.join(out, "averaged", "ckpt-4")
    assert "averaged 2 checkpoints" in averaged.stderr


def test_train_minutes_alone_is_not_capped_by_the_sets_train_steps(tmp_path):
    """On the step clock (tests/step_clock.py): the 15 s are 60 steps on any machine."""
    import re

    from t2t_lite import problems

    data_dir, out = str(tmp_path / "data"), str(tmp_path / "run")
    problems.get_problem("algorithmic_reverse").generate_data(
        data_dir, num_symbols=8, max_sequence_length=6, train_size=200, dev_size=20
    )
    flags = [  # no --hparams_set: the budget's choice, the problem's one set
        "--problem=algorithmic_reverse",
        f"--data_dir={data_dir}", f"--output_dir={out}", "--train_minutes=0.25",
        "--save_every=1000", "--eval_every=1000", "--log_every=5",
        "--hparams=num_encoder_layers=1,num_decoder_layers=1,batch_size=256,train_steps=3",
    ]  # fmt: skip
    trained = run_python(HELPERS, "t2t_train_step_clock", *flags)
    # The set says 3 steps; the 15 seconds end the run, well after them.
    last = int(re.search(r"--train_minutes=0.25 reached at step (\d+)", trained.stderr).group(1))
    assert last > 3 * 5, trained.stderr[-3000:]
    line = re.search(r"step 5 loss .* ETA (\d+):(\d\d):(\d\d) ", trained.stderr)
    assert line, trained.stderr[-3000:]  # no step count to show: "step 5", not "step 5/3"
    assert 0 < int(line[2]) * 60 + int(line[3]) <= 15 and line[1] == "0"  # the minutes left
    assert "model choice: transformer_tiny, the problem's one set for a budget" in trained.stderr
    with open(os.path.join(out, "budget.json")) as f:
        assert json.load(f)["model_choice"]["hparams_set"] == "transformer_tiny"


def test_info_prints_the_budgets_choice_and_refuses_half_its_flags(tmp_path):
    from t2t_lite import problems

    data_dir = str(tmp_path / "data")
    problems.get_problem("algorithmic_reverse").generate_data(
        data_dir, num_symbols=8, max_sequence_length=6, train_size=200, dev_size=20
    )
    shown = command("t2t_info", "--train_minutes=20", f"--data_dir={data_dir}")
    assert shown.returncode == 0, shown.stderr[-3000:]
    first, *record = shown.stdout.splitlines()
    assert first == "model choice: transformer_tiny, the problem's one set for a budget"
    assert json.loads("\n".join(record))["hparams_set"] == "transformer_tiny"
    half = command("t2t_info", "--train_minutes=20")
    assert half.returncode == 2
    assert half.stderr.strip().splitlines()[-1] == (
        "t2t-info: error: --train_minutes and --data_dir go together: the budget's choice of "
        "model needs both (e.g. --train_minutes=20 --data_dir=DATA)"
    )
