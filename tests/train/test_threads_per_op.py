"""Threads per op in training (t2t_lite.runtime.threads.training_threads_per_op, t2t-train's
--intra_threads): one per op on a machine of 2 CPUs for a model up to width 256, every CPU
otherwise; the flag wins, then TF_NUM_INTRAOP_THREADS; t2t-train sets it before TensorFlow runs,
from the widest set the run may train, and t2t-info's probes run with what t2t-train takes."""

from __future__ import annotations

import json

import pytest
from command_helpers import last_json, run_python


@pytest.mark.parametrize(
    "cpus, d_model, per_op",
    [(2, 128, 1), (2, 256, 1), (2, 257, 0), (2, 512, 0), (1, 128, 0), (4, 128, 0)],
)
def test_the_rule_splits_two_cpus_for_narrow_models(monkeypatch, cpus, d_model, per_op):
    from t2t_lite.runtime import threads

    monkeypatch.delenv("TF_NUM_INTRAOP_THREADS", raising=False)
    monkeypatch.setattr(threads, "cpu_count", lambda: cpus)
    assert threads.training_threads_per_op(d_model) == per_op


def test_the_flag_wins_then_the_environment(monkeypatch):
    from t2t_lite.runtime import threads

    monkeypatch.setattr(threads, "cpu_count", lambda: 2)
    monkeypatch.setenv("TF_NUM_INTRAOP_THREADS", "2")
    assert threads.training_threads_per_op(128) == 0  # left to TensorFlow, which reads it
    assert threads.training_threads_per_op(128, given=3) == 3
    monkeypatch.delenv("TF_NUM_INTRAOP_THREADS")
    assert threads.training_threads_per_op(128, given=0) == 0
    assert threads.training_threads_per_op(512, given=1) == 1


def test_widest_set_is_the_given_the_resumed_or_the_ladders_widest(tmp_path):
    from t2t_lite.problems import get_problem
    from t2t_lite.train.config import TrainConfig
    from t2t_lite.train.model_probe import DEFAULT_SET, widest_set

    problem = get_problem("translate_ende_lohelp")
    budget = TrainConfig(data_dir="d", output_dir=str(tmp_path), train_minutes=20)
    steps = TrainConfig(data_dir="d", output_dir=str(tmp_path))
    assert widest_set(problem, budget, None) == problem.budget_ladder[-1] == "transformer_budget_m"
    assert widest_set(problem, steps, None) == DEFAULT_SET
    assert widest_set(problem, budget, "transformer_tiny") == "transformer_tiny"
    (tmp_path / "hparams.json").write_text(json.dumps({"hparams_set": "transformer_budget_xs"}))
    assert widest_set(problem, budget, None) == widest_set(problem, steps, None)
    assert widest_set(problem, steps, None) == "transformer_budget_xs"


def test_t2t_info_probes_with_the_threads_t2t_train_would_take(tmp_path, monkeypatch):
    from t2t_lite import problems
    from t2t_lite.train import info, model_probe

    data_dir = str(tmp_path / "data")
    problems.get_problem("algorithmic_reverse").generate_data(
        data_dir, num_symbols=8, max_sequence_length=6, train_size=16, dev_size=4
    )
    calls = []
    monkeypatch.setattr(
        model_probe, "set_training_threads", lambda p, c, given: calls.append(("threads", given))
    )

    def choose(problem, config):
        calls.append(("probes", config.train_minutes))
        return model_probe.model_choice.Choice("transformer_tiny", (), "stand-in")

    monkeypatch.setattr(model_probe, "choose_on_this_machine", choose)
    assert info.describe_choice(data_dir, 20.0, "").startswith("model choice: transformer_tiny")
    assert calls == [("threads", None), ("probes", 20.0)]


def test_t2t_train_sets_them_before_tensorflow_runs(tmp_path):
    """A whole t2t-train in a process of its own that sees 2 CPUs and no TF_NUM_INTRAOP_THREADS:
    transformer_tiny (width 64) trains with one thread per op and says so; with
    --intra_threads=0, with every CPU per op (TensorFlow's 0), silently."""
    from t2t_lite import problems

    data_dir = str(tmp_path / "data")
    problems.get_problem("algorithmic_reverse").generate_data(
        data_dir, num_symbols=8, max_sequence_length=6, train_size=64, dev_size=8
    )
    code = f"""
import json, os, sys
os.environ.pop("TF_NUM_INTRAOP_THREADS", None)  # (the test workers' share; read as TF starts)
from t2t_lite.bin import t2t_train
from t2t_lite.runtime import threads
threads.cpu_count = lambda: 2
sys.argv = ["t2t-train", "--problem=algorithmic_reverse", "--hparams_set=transformer_tiny",
            "--hparams=num_encoder_layers=1,num_decoder_layers=1,batch_size=64",
            "--data_dir={data_dir}", "--output_dir={tmp_path}/" + sys.argv[1],
            "--train_steps=1", "--eval_every=1000", "--log_every=1"] + sys.argv[2:]
try:
    t2t_train.run()
except SystemExit as e:
    assert not e.code, e.code
import tensorflow as tf
print(json.dumps(tf.config.threading.get_intra_op_parallelism_threads()))
"""
    split = run_python("-c", code, "split")
    assert last_json(split.stdout) == 1
    assert "threads per op: 1 of 2 CPUs (a model 64 wide; --intra_threads=0: every CPU)" in (
        split.stderr
    )
    every = run_python("-c", code, "every", "--intra_threads=0")
    assert last_json(every.stdout) == 0 and "threads per op" not in every.stderr
