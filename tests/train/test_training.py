"""t2t-train's loop end to end on a tiny model: learning, hparams.json, best checkpoint,
summaries, and stopping on a non-finite loss without a bad checkpoint."""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import signal

import numpy as np
import pytest
import tensorflow as tf
from fake_problem import FakeReverse
from train_helpers import config as config_for
from train_helpers import run_training

# One layer each way learns reversal as well as two, in half the time.
FAST = "num_encoder_layers=1,num_decoder_layers=1,label_smoothing=0.0"


def test_tiny_model_learns_reverse(tmp_path):
    from t2t_lite import problems
    from t2t_lite.hparams import get_hparams
    from t2t_lite.run.run import restore_model
    from t2t_lite.train import loop as training
    from t2t_lite.train.step import batch_stats, sum_stats

    data_dir, out = str(tmp_path / "data"), str(tmp_path / "run")
    problem = problems.get_problem("algorithmic_reverse")
    sizes = dict(num_symbols=8, max_sequence_length=6, train_size=2000, dev_size=200)
    problem.generate_data(data_dir, **sizes)
    overrides = FAST + ",warmup_steps=60,learning_rate=0.6,batch_size=2048,jit_compile=true"
    hparams = get_hparams("transformer_tiny", overrides)
    config = config_for(out, 250, 1000, eval_every=250, best_metric="dev_accuracy")
    config = dataclasses.replace(config, data_dir=data_dir, deterministic=False)
    metrics = training.train(problem, config, hparams, "transformer_tiny")
    assert metrics["step"] == 250
    assert metrics["dev_accuracy"] > 0.99, metrics
    assert np.isclose(metrics["dev_perplexity"], np.exp(metrics["dev_loss"]))
    # decode/export read the run back: hparams.json, the final checkpoint, the best one.
    model, info, path = restore_model(out)
    assert path.endswith("ckpt-250") and info.problem == "algorithmic_reverse"
    assert info.vocab_size == problem.tokenizer(data_dir).vocab_size
    best, _, _ = restore_model(out, os.path.join(out, "best"))
    dev = problem.make_dataset(data_dir, "dev", hparams, shuffle=False, repeat=False)
    totals = sum_stats(batch_stats(best(batch, training=False), batch, 0.0) for batch in dev)
    assert totals.target_tokens == metrics["dev_tokens"]
    accuracy = totals.correct_tokens / totals.target_tokens
    assert accuracy == pytest.approx(metrics["dev_accuracy"], abs=1e-6)
    assert glob.glob(os.path.join(out, "summaries", "train", "events.*"))
    assert glob.glob(os.path.join(out, "summaries", "dev", "events.*"))


def test_non_finite_loss_stops_before_update_and_checkpoint(tmp_path, tf_iterators):
    from t2t_lite.run.checkpoints import checkpoint_step, list_checkpoints
    from t2t_lite.train.config import NonFiniteError

    out = str(tmp_path / "run")
    # A learning rate of 1e25 makes the weights overflow within a few steps.
    overrides = FAST + ",learning_rate_schedule=constant,learning_rate=1e25"
    with pytest.raises(NonFiniteError, match=r"step (\d+): non-finite") as error:
        run_training(out, 20, 1, overrides)
    # The error is kept (`error`), yet its frames no longer hold the input pipeline.
    assert tf_iterators and all(ref() is None for ref in tf_iterators)
    failed_step = int(error.value.args[0].split()[1].rstrip(":"))
    saved = list_checkpoints(os.path.join(out, "checkpoints"))
    assert saved and checkpoint_step(saved[-1]) == failed_step - 1
    reader = tf.train.load_checkpoint(saved[-1])
    for name, _ in tf.train.list_variables(saved[-1]):
        if name.endswith("VARIABLE_VALUE"):
            assert np.all(np.isfinite(reader.get_tensor(name))), name


def test_resume_with_other_hparams_names_the_difference(tmp_path):
    from t2t_lite.hparams import get_hparams
    from t2t_lite.run.run_info import RunInfo
    from t2t_lite.train.loop import _check_run_info

    out = str(tmp_path)
    info = RunInfo("fake_reverse", "/data", "transformer_tiny", get_hparams("transformer_tiny"), 12)
    _check_run_info(info, out)
    _check_run_info(info, out)  # the same flags resume
    other = RunInfo(
        "fake_reverse", "/data", "transformer_tiny", get_hparams("transformer_tiny", "d_ff=128"), 12
    )
    with pytest.raises(ValueError, match=r"hparams\.d_ff: 256 != 128"):
        _check_run_info(other, out)


class _SignalAt(FakeReverse):
    """FakeReverse whose training stream sends this process `signum` (SIGTERM) when it yields
    batch `at`."""

    def __init__(self, at: int, signum: int = signal.SIGTERM):
        super().__init__()
        self.at, self.signum = at, signum

    def make_dataset(self, data_dir, split, hparams, **kwargs):
        ds = super().make_dataset(data_dir, split, hparams, **kwargs)
        if split != "train":
            return ds

        def signal_once(index):
            if int(index) == self.at:
                os.kill(os.getpid(), self.signum)
            return index

        def tag(index, batch):
            done = tf.py_function(signal_once, [index], tf.int64)
            with tf.control_dependencies([done]):
                return {k: tf.identity(v) for k, v in batch.items()}

        return ds.enumerate().map(tag)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_saves_a_checkpoint_and_the_run_resumes(tmp_path, caplog, signum, tf_iterators):
    from t2t_lite.hparams import get_hparams
    from t2t_lite.run.checkpoints import checkpoint_step, list_checkpoints
    from t2t_lite.run.layout import LOCK_FILE
    from t2t_lite.train import loop as training
    from t2t_lite.train.config import TrainingInterrupted

    out = str(tmp_path / "run")
    hparams = get_hparams("transformer_tiny", FAST + ",batch_size=256")
    config = config_for(out, 40, 100)
    name = signal.Signals(signum).name
    with pytest.raises(TrainingInterrupted, match=rf"{name} at step (\d+)") as stop:
        training.train(_SignalAt(12, signum), config, hparams, "transformer_tiny")
    stopped = int(stop.value.args[0].split("at step ")[1].split(";")[0])
    assert tf_iterators and all(ref() is None for ref in tf_iterators)  # released as it stopped
    assert 1 <= stopped < 40
    saved = list_checkpoints(os.path.join(out, "checkpoints"))
    assert [checkpoint_step(p) for p in saved] == [stopped]
    assert not os.path.exists(os.path.join(out, LOCK_FILE))  # a clean stop releases the run
    with caplog.at_level("WARNING"):
        metrics = training.train(FakeReverse(), config, hparams, "transformer_tiny")
    assert "took over the lock" not in caplog.text  # the stopped run is not called killed
    assert metrics["step"] == 40
    assert checkpoint_step(list_checkpoints(os.path.join(out, "checkpoints"))[-1]) == 40


def test_float16_loss_scale_collapse_stops_training():
    from types import SimpleNamespace

    from t2t_lite.train.config import NonFiniteError
    from t2t_lite.train.step_loop import StepLoop

    loop = StepLoop.__new__(StepLoop)
    loop.trainer = SimpleNamespace(loss_scaled=True)
    loop.keeper = SimpleNamespace(manager=SimpleNamespace(latest_checkpoint=None))
    loop.skipped_steps = 0
    overflow = {"finite": False, "loss": 2.5, "grad_norm": np.inf, "loss_scale": 8.0}
    loop._check_step(7, overflow)  # skipped, the scale halves to 4
    loop._check_step(8, {**overflow, "loss_scale": 4.0})
    assert loop.skipped_steps == 2
    with pytest.raises(NonFiniteError, match=r"step 9: the float16 loss scale collapsed"):
        loop._check_step(9, {**overflow, "loss_scale": 1.0})
    with pytest.raises(NonFiniteError, match=r"step 10: non-finite loss"):
        loop._check_step(10, {**overflow, "loss": np.nan})


def test_best_checkpoint_and_early_stopping_follow_the_metric(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from t2t_lite.run.checkpoints import BestKeeper
    from t2t_lite.train import step_loop
    from t2t_lite.train.step_loop import StepLoop

    model = tf.keras.Sequential([tf.keras.layers.Dense(2)])
    model.build((None, 3))
    scripted = iter([0.5, 0.7, 0.6, 0.6, 0.8])  # dev_accuracy of successive evaluations
    monkeypatch.setattr(
        step_loop, "evaluate", lambda *args: {"dev_accuracy": next(scripted), "dev_loss": 1.0}
    )
    loop = StepLoop.__new__(StepLoop)
    loop.trainer, loop.dev, loop.problem, loop.chief = None, None, None, True
    loop.config = SimpleNamespace(early_stopping=2, best_metric="dev_accuracy", bleu_examples=0)
    loop._dev_scorer = None
    loop.best = BestKeeper(model, str(tmp_path), "dev_accuracy", higher_is_better=True)
    loop.dev_writer, loop.stale_evals = tf.summary.create_noop_writer(), 0
    stops = [loop._evaluate(step) for step in (10, 20, 30, 40)]
    assert stops == [False, False, False, True]  # 0.6 and 0.6 do not beat 0.7
    with open(tmp_path / "best" / "best.json") as f:
        best = json.load(f)
    assert (best["step"], best["value"]) == (20, 0.7)
    assert os.path.exists(tmp_path / "best" / "ckpt-20.index")
    # A resumed run remembers the best value.
    assert BestKeeper(model, str(tmp_path), "dev_accuracy", True).best == 0.7


def test_train_minutes_stops_with_a_checkpoint_and_the_rerun_resumes(tmp_path):
    out = str(tmp_path)
    # A budget of 0.06 s ends training after its first step (which takes longer than that).
    # Naming the schedule keeps it (as t2t-train --hparams does): the clock only stops the run,
    # and the rerun without minutes resumes the same hparams.
    schedule = "learning_rate_schedule=rsqrt_warmup"
    first = run_training(out, steps=6, save_every=100, overrides=schedule, train_minutes=0.001)
    assert first["step"] == 1
    assert tf.train.latest_checkpoint(os.path.join(out, "checkpoints")).endswith("ckpt-1")
    second = run_training(out, steps=6, save_every=100, overrides=schedule)
    assert second["step"] == 6
    assert tf.train.latest_checkpoint(os.path.join(out, "checkpoints")).endswith("ckpt-6")
