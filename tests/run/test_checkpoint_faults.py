"""Damaged run directories (issue 17): every restore falls back to the newest readable checkpoint
with a warning naming the bad file, refuses with an error naming the files when none is
readable, and never restarts silently at step 0."""

from __future__ import annotations

import json
import logging
import os
import time

import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.hparams import get_hparams
from t2t_lite.run.checkpoints import BestKeeper, CheckpointError, CheckpointKeeper
from t2t_lite.run.layout import CHECKPOINT_DIR
from t2t_lite.run.run import build_model, restore_model
from t2t_lite.run.run_info import RunInfo

SMALL = get_hparams("transformer_tiny", "num_encoder_layers=1,num_decoder_layers=1,d_ff=64")
INFO = RunInfo("p", "d", "transformer_tiny", SMALL, 12)
DATA = ".data-00000-of-00001"


def _keeper(directory, record_file=None):
    step = tf.Variable(0, dtype=tf.int64)
    model = build_model(INFO)
    checkpoint = tf.train.Checkpoint(model=model, step=step)
    keeper = CheckpointKeeper(checkpoint, directory, 5, record_file=record_file)
    return keeper, model, step


def _run_with_two_checkpoints(out):
    """output_dir with hparams.json and checkpoints/ckpt-50, ckpt-100 of different weights;
    returns the weights of each."""
    INFO.save(out)
    keeper, model, step = _keeper(os.path.join(out, CHECKPOINT_DIR))
    return {number: _save_shifted(keeper, model, step, number) for number in (50, 100)}


def _save_shifted(keeper, model, step, number):
    """Adds `number` to every weight, saves ckpt-<number>; returns the weights saved."""
    model.set_weights([w + number for w in model.get_weights()])
    step.assign(number)
    keeper.save(number)
    return model.get_weights()


def _damage(prefix, how):
    if how == "remove_index":
        os.remove(prefix + ".index")
    elif how == "truncate_data":
        with open(prefix + DATA, "r+b") as f:
            f.truncate(os.path.getsize(prefix + DATA) // 2)
    elif how == "zero_data":
        size = os.path.getsize(prefix + DATA)
        with open(prefix + DATA, "wb") as f:
            f.write(b"\0" * size)
    else:
        raise ValueError(how)


def _assert_weights(actual, expected):
    for a, e in zip(actual, expected, strict=True):
        np.testing.assert_array_equal(a, e)


def test_state_file_with_bytes_that_are_not_utf8_is_set_aside(tmp_path, caplog):
    """Probe 1: a `checkpoint` state file with non-UTF-8 bytes crashed every resume."""
    out = str(tmp_path)
    saved = _run_with_two_checkpoints(out)
    state = os.path.join(out, CHECKPOINT_DIR, "checkpoint")
    with open(state, "wb") as f:
        f.write(b'model_checkpoint_path: "ckpt-100"\xff\xfe\x00\n')
    with caplog.at_level(logging.WARNING):
        _, _, path = restore_model(out)  # decode and export: read-only, a warning
        keeper, model, step = _keeper(os.path.join(out, CHECKPOINT_DIR))  # training: set aside
        resumed = keeper.restore_latest()
    assert path.endswith("ckpt-100") and resumed.endswith("ckpt-100") and int(step) == 100
    _assert_weights(model.get_weights(), saved[100])
    assert f"checkpoint state file {state} is unreadable (UnicodeDecodeError" in caplog.text
    assert [n for n in os.listdir(os.path.dirname(state)) if n.startswith("checkpoint.corrupt-")]


@pytest.mark.parametrize("how", ["remove_index", "truncate_data", "zero_data"])
def test_decode_and_export_fall_back_to_an_intact_older_checkpoint(tmp_path, how, caplog):
    """Probe 4: restore_model (t2t-decode, t2t-export, t2t-visualize) skips a damaged newest
    checkpoint with a warning naming the file."""
    out = str(tmp_path)
    saved = _run_with_two_checkpoints(out)
    newest = os.path.join(out, CHECKPOINT_DIR, "ckpt-100")
    _damage(newest, how)
    with caplog.at_level(logging.WARNING):
        model, _, path = restore_model(out)
    assert path == os.path.join(out, CHECKPOINT_DIR, "ckpt-50")
    _assert_weights(model.get_weights(), saved[50])
    bad_file = newest + (".index is missing" if how == "remove_index" else DATA)
    assert f"checkpoint {newest} is unreadable: {bad_file}" in caplog.text


def test_training_falls_back_the_same_way(tmp_path, caplog):
    out = str(tmp_path)
    saved = _run_with_two_checkpoints(out)
    _damage(os.path.join(out, CHECKPOINT_DIR, "ckpt-100"), "zero_data")
    with caplog.at_level(logging.WARNING):
        keeper, model, step = _keeper(os.path.join(out, CHECKPOINT_DIR))
        path = keeper.restore_latest()
    assert path.endswith("ckpt-50") and int(step) == 50
    _assert_weights(model.get_weights(), saved[50])
    assert f"ckpt-100{DATA} is damaged or truncated" in caplog.text


def test_nothing_readable_is_an_error_naming_each_file(tmp_path):
    out = str(tmp_path)
    _run_with_two_checkpoints(out)
    folder = os.path.join(out, CHECKPOINT_DIR)
    _damage(os.path.join(folder, "ckpt-100"), "remove_index")
    _damage(os.path.join(folder, "ckpt-50"), "truncate_data")
    with pytest.raises(CheckpointError) as error:
        restore_model(out)
    message = str(error.value)
    assert message.startswith(
        f"no readable checkpoint in {out}/final or {out}/averaged or {folder}:"
    )
    assert f"{folder}/ckpt-100.index is missing" in message
    assert f"{folder}/ckpt-50{DATA} is damaged or truncated" in message
    with pytest.raises(CheckpointError, match="refusing to restart from step 0"):
        _keeper(folder)[0].restore_latest()


def test_an_explicit_unreadable_checkpoint_is_an_error_not_a_fallback(tmp_path):
    out = str(tmp_path)
    _run_with_two_checkpoints(out)
    newest = os.path.join(out, CHECKPOINT_DIR, "ckpt-100")
    _damage(newest, "truncate_data")
    with pytest.raises(CheckpointError, match=f"--checkpoint={newest}: {newest}{DATA} is dam"):
        restore_model(out, newest)
    folder = os.path.join(out, CHECKPOINT_DIR)
    with pytest.raises(CheckpointError, match=f"--checkpoint={folder}: {newest}{DATA} is dam"):
        restore_model(out, folder)
    assert restore_model(out, os.path.join(folder, "ckpt-50"))[2].endswith("ckpt-50")


def test_all_checkpoints_deleted_is_refused_not_restarted(tmp_path):
    """Probe 3: with last_checkpoint.json (written at every save) and no checkpoint left,
    training refuses, naming the folder and the record; deleting the record starts over."""
    folder, record = str(tmp_path / CHECKPOINT_DIR), str(tmp_path / "last_checkpoint.json")
    keeper, _, step = _keeper(folder, record)
    step.assign(30)
    keeper.save(30)
    assert json.loads(open(record).read())["step"] == 30
    for name in os.listdir(folder):
        os.remove(os.path.join(folder, name))
    with pytest.raises(CheckpointError) as error:
        _keeper(folder, record)[0].restore_latest()
    assert str(error.value) == (
        f"{folder} holds no checkpoint, but {record} records {folder}/ckpt-30 saved there: "
        f"refusing to restart from step 0. Put the checkpoints back, or delete {record} to "
        "start over at step 0."
    )
    os.remove(record)
    assert _keeper(folder, record)[0].restore_latest() is None


def test_truncated_best_json_is_set_aside_with_a_warning(tmp_path, caplog):
    """Probe 2: a truncated best/best.json crashed every resume with a JSONDecodeError."""
    model = build_model(INFO)
    best = BestKeeper(model, str(tmp_path), "dev_loss", higher_is_better=False)
    best.update(10, {"dev_loss": 2.0})
    path = tmp_path / "best" / "best.json"
    path.write_text(path.read_text()[:15])
    with caplog.at_level(logging.WARNING):
        resumed = BestKeeper(model, str(tmp_path), "dev_loss", higher_is_better=False)
    assert resumed.best is None
    assert f"{path} is unreadable (JSONDecodeError" in caplog.text
    assert "the next evaluation replaces the model" in caplog.text
    assert resumed.update(20, {"dev_loss": 3.0})  # tracking starts afresh
    assert json.loads(path.read_text())["step"] == 20


def test_stale_temp_folder_of_a_killed_save_is_removed(tmp_path):
    """Probe 9: a save killed mid-write leaves ckpt-N_temp/; the next run removes it (only if it
    is older than the run)."""
    folder = tmp_path / CHECKPOINT_DIR
    stale = folder / "ckpt-40_temp"
    stale.mkdir(parents=True)
    (stale / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"x")
    old = time.time() - 3600
    for p in (stale / "part-00000-of-00001.data-00000-of-00001", stale):
        os.utime(p, (old, old))
    fresh = folder / "ckpt-50_temp"
    fresh.mkdir()
    os.utime(fresh, (time.time() + 60, time.time() + 60))  # as if written during this run
    _keeper(str(folder))
    assert not stale.exists() and fresh.exists()
