"""Checkpoints: fall-back from a corrupt newest one, never a silent restart, averaging, and
exact resume after kill -9."""

from __future__ import annotations

import glob
import logging
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.hparams import get_hparams
from t2t_lite.run import checkpoints
from t2t_lite.run.averaging import average_checkpoints, average_run, select_for_averaging
from t2t_lite.run.checkpoints import CheckpointError, CheckpointKeeper, list_checkpoints
from t2t_lite.run.run import build_model, restore_model
from t2t_lite.run.run_info import RunInfo

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL = get_hparams("transformer_tiny", "num_encoder_layers=1,num_decoder_layers=1,d_ff=64")


def _keeper(directory):
    step = tf.Variable(0, dtype=tf.int64)
    model = build_model(RunInfo("p", "d", "transformer_tiny", SMALL, 12))
    return CheckpointKeeper(tf.train.Checkpoint(model=model, step=step), directory, 5), model, step


def _save_two(directory):
    """ckpt-10 and ckpt-20 with different weights; returns the weights of each."""
    keeper, model, step = _keeper(directory)
    saved = {}
    for number in (10, 20):
        model.set_weights([w + number for w in model.get_weights()])
        step.assign(number)
        keeper.save(number)
        saved[number] = model.get_weights()
    return saved


def _restore(directory):
    keeper, model, step = _keeper(directory)
    path = keeper.restore_latest()
    return path, int(step.numpy()), model.get_weights()


def _assert_weights(actual, expected):
    for a, e in zip(actual, expected, strict=True):
        np.testing.assert_array_equal(a, e)


@pytest.mark.parametrize("damage", ["truncate_data", "remove_index", "garbage_index"])
def test_corrupt_newest_checkpoint_falls_back_to_previous(tmp_path, damage, caplog):
    directory = str(tmp_path)
    saved = _save_two(directory)
    newest = os.path.join(directory, "ckpt-20")
    if damage == "truncate_data":
        data = newest + ".data-00000-of-00001"
        with open(data, "r+b") as f:
            f.truncate(os.path.getsize(data) // 2)
    elif damage == "remove_index":
        os.remove(newest + ".index")
    else:
        with open(newest + ".index", "wb") as f:
            f.write(b"\x00not an index" * 10)
    with caplog.at_level(logging.WARNING):
        path, step, weights = _restore(directory)
    assert path.endswith("ckpt-10") and step == 10
    _assert_weights(weights, saved[10])
    assert "ckpt-20 is unreadable" in caplog.text


def test_garbage_state_file_is_set_aside_and_index_files_used(tmp_path, caplog):
    directory = str(tmp_path)
    saved = _save_two(directory)
    with open(os.path.join(directory, "checkpoint"), "w") as f:
        f.write("model_checkpoint_path: {{{ garbage\n")
    with caplog.at_level(logging.WARNING):
        path, step, weights = _restore(directory)
    assert path.endswith("ckpt-20") and step == 20
    _assert_weights(weights, saved[20])
    assert "unreadable" in caplog.text
    assert [f for f in os.listdir(directory) if f.startswith("checkpoint.corrupt-")]


def test_no_readable_checkpoint_is_an_error_naming_the_files(tmp_path):
    directory = str(tmp_path)
    _save_two(directory)
    for data in tf.io.gfile.glob(os.path.join(directory, "ckpt-*.data-*")):
        with open(data, "r+b") as f:
            f.truncate(10)
    with pytest.raises(CheckpointError, match=r"refusing to restart from step 0(.|\n)*ckpt-20"):
        _restore(directory)


def test_empty_directory_starts_fresh(tmp_path):
    assert _restore(str(tmp_path))[:2] == (None, 0)


def _four_checkpoints(out: str, seed: int) -> tuple[str, dict]:
    """A run in `out` with checkpoints 100..400 of random weights: (checkpoints/, {step:
    weights})."""
    RunInfo("p", "d", "transformer_tiny", SMALL, 12).save(out)
    directory = os.path.join(out, "checkpoints")
    keeper, model, _ = _keeper(directory)
    rng = np.random.default_rng(seed)
    written = {}
    for number in (100, 200, 300, 400):
        model.set_weights([rng.normal(size=w.shape).astype(np.float32) for w in model.weights])
        keeper.save(number)
        written[number] = model.get_weights()
    return directory, written


def test_average_equals_numpy_mean(tmp_path):
    out = str(tmp_path)
    directory, written = _four_checkpoints(out, seed=0)
    # ckpt-200 was written 2 minutes before ckpt-300; the others are 10 or more apart.
    now = time.time()
    for number, minutes_ago in ((100, 30), (200, 20), (300, 18), (400, 8)):
        os.utime(os.path.join(directory, f"ckpt-{number}.index"), (now, now - 60 * minutes_ago))
    paths = select_for_averaging(directory, 3)
    assert [os.path.basename(p) for p in paths] == ["ckpt-200", "ckpt-300", "ckpt-400"]
    spaced = select_for_averaging(directory, 3, min_minutes=5)
    assert [os.path.basename(p) for p in spaced] == ["ckpt-100", "ckpt-300", "ckpt-400"]

    average_checkpoints(build_model(RunInfo.load(out)), paths, os.path.join(out, "averaged"))
    averaged, _, path = restore_model(out)  # the newest of averaged/ and checkpoints/
    assert path == os.path.join(out, "averaged", "ckpt-400")
    for i, weight in enumerate(averaged.get_weights()):
        expected = np.mean([written[n][i].astype(np.float64) for n in (200, 300, 400)], axis=0)
        np.testing.assert_allclose(weight, expected, rtol=1e-6, atol=1e-7)


def _train_command(output_dir):
    # Deterministic, one layer each way; ckpt every 10 of 60 steps.
    overrides = "num_encoder_layers=1,num_decoder_layers=1,batch_size=512"
    script = os.path.join(TESTS, "train_helpers.py")
    return [sys.executable, script, "train", output_dir, "60", "10", overrides]


def _final_variables(output_dir):
    path = os.path.join(output_dir, "checkpoints", "ckpt-60")
    reader = tf.train.load_checkpoint(path)
    return {n: reader.get_tensor(n) for n, _ in tf.train.list_variables(path) if "VALUE" in n}


def test_kill_9_then_resume_equals_uninterrupted_run(tmp_path):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    killed, whole = str(tmp_path / "killed"), str(tmp_path / "whole")
    process = subprocess.Popen(_train_command(killed), env=env, stderr=subprocess.PIPE, text=True)
    marker = os.path.join(killed, "checkpoints", "ckpt-20.index")
    deadline = time.time() + 240
    while not os.path.exists(marker) and process.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL, process.stderr.read()[-3000:]
    done = [os.path.basename(p) for p in list_checkpoints(os.path.join(killed, "checkpoints"))]
    assert "ckpt-20" in done and "ckpt-60" not in done

    # The resumed run and an uninterrupted one, side by side.
    runs = [
        subprocess.Popen(_train_command(d), env=env, stderr=subprocess.PIPE, text=True)
        for d in (killed, whole)
    ]
    (_, resumed), (_, full) = (run.communicate(timeout=400) for run in runs)
    assert runs[0].returncode == 0, resumed[-3000:]
    assert runs[1].returncode == 0, full[-3000:]
    assert "resumed from" in resumed and "at step 0" not in resumed
    assert "step 60/60" in resumed

    a, b = _final_variables(killed), _final_variables(whole)
    assert a.keys() == b.keys() and any("step" in k for k in a)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def test_failed_save_is_a_clear_error_and_keeps_the_previous_checkpoint(tmp_path):
    """A write that runs out of space (here: a file-size limit, as a full disk gives EFBIG or
    ENOSPC) names the step and the intact previous checkpoint."""
    import resource

    directory = str(tmp_path)
    keeper, model, step = _keeper(directory)
    step.assign(10)
    keeper.save(10)
    before = model.get_weights()
    size = os.path.getsize(os.path.join(directory, "ckpt-10.data-00000-of-00001"))
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    try:
        resource.setrlimit(resource.RLIMIT_FSIZE, (size // 2, limits[1]))
        model.set_weights([w + 1 for w in before])
        step.assign(20)
        with pytest.raises(CheckpointError, match=r"step 20(.|\n)*ckpt-10 is intact"):
            keeper.save(20)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, handler)
    path, restored_step, weights = _restore(directory)
    assert path.endswith("ckpt-10") and restored_step == 10
    _assert_weights(weights, before)


def test_averaging_passes_over_damaged_checkpoints_and_cleans_its_debris(tmp_path, caplog):
    out = str(tmp_path)
    directory, written = _four_checkpoints(out, seed=1)
    data = glob.glob(os.path.join(directory, "ckpt-400.data-*"))[0]
    with open(data, "r+b") as f:  # the newest checkpoint truncated
        f.truncate(os.path.getsize(data) // 2)
    with open(os.path.join(directory, "checkpoint"), "w"):
        pass  # an empty state file: the ckpt-* files beside it are used
    averaged = os.path.join(out, "averaged")
    os.makedirs(os.path.join(averaged, "ckpt-300_temp"))  # what a killed average leaves
    with open(os.path.join(averaged, ".averaged.json-x.tmp"), "w") as f:
        f.write("{")
    old = time.time() - 3600
    os.utime(os.path.join(averaged, "ckpt-300_temp"), (old, old))
    with caplog.at_level(logging.WARNING):
        path, used = average_run(out, num_last=2)
    assert [os.path.basename(p) for p in used] == ["ckpt-200", "ckpt-300"]
    assert "skipping" in caplog.text and "ckpt-400.data-00000-of-00001" in caplog.text
    assert sorted(os.listdir(averaged)) == ["averaged.json", "checkpoint", *sorted(
        os.path.basename(p) for p in glob.glob(path + ".*"))]  # fmt: skip
    assert os.path.basename(path) == "ckpt-300"
    restored = build_model(RunInfo.load(out))
    checkpoints.restore_model_weights(restored, path)
    for i, weight in enumerate(restored.get_weights()):
        expected = np.mean([written[n][i].astype(np.float64) for n in (200, 300)], axis=0)
        np.testing.assert_allclose(weight, expected, rtol=1e-6, atol=1e-7)


def _disk_full_after_temp(monkeypatch):
    """CheckpointManager.save starts its ckpt-N_temp/ folder, then the disk is full."""

    def full(self, checkpoint_number=None, **kwargs):
        os.makedirs(os.path.join(self.directory, f"ckpt-{checkpoint_number}_temp"))
        raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")

    monkeypatch.setattr(tf.train.CheckpointManager, "save", full)


def test_a_full_disk_while_saving_a_model_folder_is_one_error_and_keeps_the_last(
    tmp_path, monkeypatch
):
    model = build_model(RunInfo("p", "d", "transformer_tiny", SMALL, 12))
    folder = str(tmp_path / "final")
    kept = checkpoints.save_model_checkpoint(model, folder, 100)
    _disk_full_after_temp(monkeypatch)
    with pytest.raises(CheckpointError) as refused:
        checkpoints.save_model_checkpoint(model, folder, 200)
    message = str(refused.value)
    assert message.startswith(f"could not write ckpt-200 in {folder}: No space left on device")
    assert "MB; " in message and "MB are free there" in message and "intact" in message
    assert not os.path.exists(os.path.join(folder, "ckpt-200_temp"))  # no debris
    assert list_checkpoints(folder) == [kept]
    checkpoints.restore_model_weights(model, kept)
    best = checkpoints.BestKeeper(model, str(tmp_path), "dev_loss", False)
    with pytest.raises(CheckpointError, match=r"could not write ckpt-10 in .*best: No space"):
        best.update(10, {"dev_loss": 1.0})
    assert not glob.glob(str(tmp_path / "best" / "ckpt-10*"))
