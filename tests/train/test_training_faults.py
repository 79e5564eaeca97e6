"""t2t-train under faults (issue 17): a diverged but finite run still finishes with its last
checkpoint and finite summaries; a run whose checkpoints were all deleted is refused, and a
restart at step 0 is never silent."""

from __future__ import annotations

import glob
import logging
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
from train_helpers import run_training


@pytest.fixture(autouse=True)
def _fake_problem_checks_no_data_dir(monkeypatch):
    """t2t-train now checks the data_dir's problem; FakeReverse has none to check. (Does
    nothing once tests/fake_problem.py defines check_data_dir itself.)"""
    from fake_problem import FakeReverse

    if not hasattr(FakeReverse, "check_data_dir"):
        monkeypatch.setattr(FakeReverse, "check_data_dir", lambda *a, **k: None, raising=False)


FAST = "num_encoder_layers=1,num_decoder_layers=1,label_smoothing=0.0,batch_size=256"


def _summary_values(folder: str) -> dict[str, list[float]]:
    values: dict[str, list[float]] = {}
    for path in glob.glob(os.path.join(folder, "events.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                number = tf.make_ndarray(value.tensor).item()
                values.setdefault(value.tag, []).append(number)
    return values


def test_diverged_but_finite_run_finishes_with_its_last_checkpoint(tmp_path):
    """Probe 5: with learning_rate=100 the loss is huge but finite; exp(dev_loss) overflowed
    float32 in the final evaluation's summary and crashed before the last checkpoint. (At 1e3
    and more the gradient norm overflows float32 on an AVX2-only CPU, and the run stops as a
    non-finite one.)"""
    from t2t_lite.train.evaluation import FLOAT32_MAX

    out = str(tmp_path)
    overrides = FAST + ",learning_rate_schedule=constant,learning_rate=100"
    metrics = run_training(out, 4, save_every=100, overrides=overrides, eval_every=2, log_every=1)
    assert metrics["step"] == 4 and metrics["dev_loss"] > 100, metrics
    assert os.path.exists(os.path.join(out, "checkpoints", "ckpt-4.index"))
    dev = _summary_values(os.path.join(out, "summaries", "dev"))
    train = _summary_values(os.path.join(out, "summaries", "train"))
    assert len(dev["dev_loss"]) == 2 and len(train["loss"]) == 4
    for name, numbers in {**dev, **train}.items():
        assert np.all(np.isfinite(numbers)), name
    assert np.isfinite(metrics["dev_perplexity"]) and metrics["dev_perplexity"] <= FLOAT32_MAX


def test_metrics_beyond_float32_are_not_written_to_the_summaries(tmp_path, caplog):
    from t2t_lite.train.step_loop import StepLoop

    loop = StepLoop.__new__(StepLoop)
    loop.chief = True
    writer = tf.summary.create_file_writer(str(tmp_path))
    with caplog.at_level(logging.WARNING):
        loop._summaries(writer, 7, {"big": 1e300, "nan": float("nan"), "ok": 1.5, "step": 7})
    writer.flush()
    assert _summary_values(str(tmp_path)) == {"ok": [1.5]}
    assert "step 7: big 1e+300 not written to the summaries" in caplog.text
    assert "step 7: nan nan not written to the summaries" in caplog.text


def test_last_checkpoint_is_saved_before_the_final_evaluation(tmp_path, monkeypatch):
    from t2t_lite.train import step_loop

    def failing_evaluation(*args):
        raise FloatingPointError("the final evaluation failed")

    monkeypatch.setattr(step_loop, "evaluate", failing_evaluation)
    with pytest.raises(FloatingPointError):
        run_training(str(tmp_path), steps=3, save_every=100, overrides=FAST)
    assert tf.train.latest_checkpoint(str(tmp_path / "checkpoints")).endswith("ckpt-3")


def test_run_with_every_checkpoint_deleted_is_refused(tmp_path, caplog):
    """Probe 3: hparams.json remains but every checkpoint is gone: training refuses, naming the
    folder and output_dir/last_checkpoint.json; once that is deleted it starts over, loudly."""
    from t2t_lite.run.checkpoints import CheckpointError

    out = str(tmp_path)
    run_training(out, steps=2, save_every=1, overrides=FAST)
    shutil.rmtree(os.path.join(out, "checkpoints"))
    record = os.path.join(out, "last_checkpoint.json")
    with pytest.raises(CheckpointError, match="refusing to restart from step 0") as error:
        run_training(out, steps=3, save_every=1, overrides=FAST)
    assert f"{out}/checkpoints holds no checkpoint, but {record} records" in str(error.value)
    os.remove(record)
    with caplog.at_level(logging.WARNING):
        run_training(out, steps=1, save_every=1, overrides=FAST)
    assert f"STARTING OVER AT STEP 0: {out}/hparams.json is from an earlier run" in caplog.text


def test_a_model_above_the_memory_left_is_refused_before_it_is_built(tmp_path, monkeypatch):
    from fake_problem import FakeReverse

    from t2t_lite.hparams import get_hparams
    from t2t_lite.model import footprint

    monkeypatch.setattr(footprint, "available_memory", lambda: (10**6, "available memory"))
    with pytest.raises(footprint.ModelTooLargeError) as refused:
        run_training(str(tmp_path / "out"), 2, 2, FAST)
    hparams = get_hparams("transformer_tiny", FAST)
    weights = footprint.parameter_count(hparams, FakeReverse().vocab_size)
    needed = footprint.estimate_bytes(hparams, FakeReverse().vocab_size, training=True)
    assert needed == 4 * (4 * weights + 256 * 64)  # weights, gradient, Adam's m and v; the table
    assert str(refused.value) == (
        f"--hparams_set=transformer_tiny --hparams={FAST}: the model it describes needs at least "
        f"{needed / 1e6:.1f} MB ({weights:,} float32 weights, with the gradients and Adam's "
        "moments of training), but this process may take 1.0 MB (available memory); use a "
        "machine with more memory, or a smaller model (d_model, d_ff, layers, vocabulary, "
        "adapter rank)"
    )
    assert not os.path.exists(tmp_path / "out" / "checkpoints")
