"""Adapter runs (t2t-train --init_from=RUN --lora_rank=R, t2t_lite.run.adapter): training changes
the adapter alone and saves it alone with its parent's identity; restoring gives base + adapter,
equal to the merged model and to a merged export; other base weights are refused, naming both
hashes."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the SavedModel's tokenizer ops)
from command_helpers import command
from lora_helpers import adapter_run, parent_run

from t2t_lite.decode.translator import Translator
from t2t_lite.model import lora
from t2t_lite.run.adapter import AdapterMismatchError, AdapterRecord
from t2t_lite.run.layout import ADAPTER_FILE
from t2t_lite.run.run import Run, restore_model
from t2t_lite.serve import export
from t2t_lite.train.init_from import model_variable_shapes

RANK = 4
BUDGET = "learning_rate_schedule=linear_budget,learning_rate=0.5"
LINES = ["1 2 3", "4 5 6 7 8", "9 9", "3 4 3 4 5"]


@pytest.fixture(autouse=True)
def _seed():
    """Overrides conftest's reseeding, which would drop the export's loaded resources."""
    yield


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("adapter"))
    data_dir, parent = parent_run(root)
    adapter = os.path.join(root, "adapter")
    # The budget's schedule: the run ends by choosing its final/ model among the last, the
    # averaged and the best adapter weights, as a --train_minutes run does.
    metrics = adapter_run(data_dir, parent, adapter, RANK, overrides=BUDGET)
    return {"root": root, "data": data_dir, "parent": parent, "adapter": adapter, **metrics}


def _checkpoint_bytes(path: str) -> int:
    folder, prefix = os.path.dirname(path), os.path.basename(path) + "."
    return sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder)
               if f.startswith(prefix))  # fmt: skip


def test_training_changes_the_adapter_alone_and_saves_it_alone(runs):
    parent, _, _ = restore_model(runs["parent"])
    model, _, path = restore_model(runs["adapter"])
    assert lora.is_adapted(model) and not lora.is_adapted(parent)
    assert os.path.dirname(path).endswith("final")  # the budget's choice, adapter weights alone
    for base, trained in zip(parent.weights, lora.base_weights(model), strict=True):
        np.testing.assert_array_equal(trained.numpy(), base.numpy())  # bitwise
    assert any(np.abs(v.numpy()).max() > 0 for v in lora.adapter_weights(model).weights[1::2])
    record = AdapterRecord.load(runs["adapter"], 64)  # transformer_tiny's d_model
    assert record.rank == RANK and record.parent_sha256 == lora.weights_sha256(parent)
    assert record.trainable_weights == lora.adapter_size(model, RANK) == 16_448
    saved = model_variable_shapes(path)  # by path from "model", whoever reached them first
    assert len(saved) == 2 * 16 and all(name.endswith(("/a", "/b")) for name in saved), saved
    everything = [name for name, _ in tf.train.list_variables(path)]
    assert len(everything) < 3 * 2 * 16 + 10  # the adapter, its Adam moments, a few scalars
    # final/ keeps the adapter's weights alone: 16,448 float32 numbers, a seventh of the parent
    parent_size = _checkpoint_bytes(restore_model(runs["parent"])[2])
    assert 4 * 16_448 < _checkpoint_bytes(path) < 4 * 16_448 + 8_000 < parent_size / 6


def test_base_plus_adapter_decodes_as_the_merged_model(runs):
    adapted = Run.restore(runs["adapter"], search={"beam_size": 1})
    merged = Run.restore(runs["adapter"], search={"beam_size": 1}, merge_lora=True)
    assert lora.is_adapted(adapted.model) and not lora.is_adapted(merged.model)
    features = {"inputs": tf.constant([[5, 6, 7, 1]]), "targets": tf.constant([[7, 6, 5, 1]])}
    logits, merged_logits = adapted.model(features).numpy(), merged.model(features).numpy()
    np.testing.assert_allclose(merged_logits, logits, atol=1e-4, rtol=1e-4)
    np.testing.assert_array_equal(merged_logits.argmax(-1), logits.argmax(-1))
    parent = restore_model(runs["parent"])[0](features).numpy()
    assert np.abs(parent - logits).max() > 1e-3  # the adapter changed the outputs


@pytest.mark.slow
def test_base_plus_adapter_searches_as_the_merged_model(runs):
    adapted = Run.restore(runs["adapter"], search={"beam_size": 1})
    merged = Run.restore(runs["adapter"], search={"beam_size": 1}, merge_lora=True)
    greedy = Translator.from_run(adapted).translate(LINES, scores=True)
    found = Translator.from_run(merged).translate(LINES, scores=True)
    assert [t for t, _ in found] == [t for t, _ in greedy]  # identical greedy ids
    assert [s for _, s in found] == pytest.approx([s for _, s in greedy], abs=1e-4)


@pytest.mark.slow
def test_merged_export_translates_as_base_plus_adapter(runs):
    search = {"beam_size": 2, "alpha": 0.6}
    merged = Run.restore(runs["adapter"], search=search, merge_lora=True)
    export.export_run(merged, os.path.join(runs["root"], "exports"))
    exported = Translator.from_run(os.path.join(runs["root"], "exports"))
    direct = Translator.from_run(runs["adapter"], **search)  # base + adapter, unmerged
    got, want = exported.translate(LINES, scores=True), direct.translate(LINES, scores=True)
    assert [t for t, _ in got] == [t for t, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-4)


def test_int8_merges_the_adapter_first(runs):
    run = Run.restore(runs["adapter"], quantize="int8")
    assert not lora.is_adapted(run.model) and run.quantize == "int8"


def test_an_adapter_over_other_base_weights_is_refused_naming_both_hashes(runs, tmp_path):
    other_data, other = parent_run(runs["root"], seed=8, name="other_parent")
    moved = str(tmp_path / "adapter")
    shutil.copytree(runs["adapter"], moved)
    record = AdapterRecord.load(moved, 64)
    with open(os.path.join(moved, ADAPTER_FILE), "w") as f:
        json.dump({**record.__dict__, "parent_dir": other, "parent_checkpoint": "gone"}, f)
    wanted = record.parent_sha256[:16]
    with pytest.raises(AdapterMismatchError, match=f"base weights sha256 {wanted}, but"):
        Run.restore(moved)
    (tmp_path / "in.txt").write_text("1 2 3\n")
    decode = command(
        "t2t_decode", f"--output_dir={moved}", f"--decode_from_file={tmp_path / 'in.txt'}",
        timeout=120,
    )  # fmt: skip
    assert decode.returncode == 2, decode.stderr[-2000:]
    line = decode.stderr.strip().splitlines()[-1]
    assert line.startswith("t2t-decode: error: the adapter in ") and wanted in line, line
    assert f"has sha256 {lora.weights_sha256(restore_model(other)[0])[:16]}" in line


def test_averaging_an_adapter_run_averages_the_adapter(runs, tmp_path):
    from t2t_lite.run.averaging import average_run

    path, _ = average_run(runs["adapter"], num_last=2, averaged_dir=str(tmp_path / "avg"))
    averaged, _, restored = restore_model(runs["adapter"], path)
    assert restored == path and lora.is_adapted(averaged)


def test_a_resume_with_another_rank_or_none_is_refused(runs, tmp_path):
    from t2t_lite.train.config import ConflictingRunError

    with pytest.raises(ConflictingRunError, match=r"--lora_rank=2: .* has rank 4"):
        adapter_run(runs["data"], runs["parent"], runs["adapter"], 2, 9, BUDGET)
    with pytest.raises(ConflictingRunError, match=r"holds a LoRA adapter of rank 4: resume it"):
        adapter_run(runs["data"], runs["parent"], runs["adapter"], 0, 9, BUDGET)
    (tmp_path / "last_checkpoint.json").write_text("{}")  # a run that saved a checkpoint
    with pytest.raises(ConflictingRunError, match=r"holds a run that is not an adapter"):
        adapter_run(runs["data"], runs["parent"], str(tmp_path), 4, 9, BUDGET)


def test_lora_rank_needs_init_from_and_no_init_optimizer():
    from t2t_lite.train.config import TrainConfig

    with pytest.raises(ValueError, match="--lora_rank=4: an adapter needs .* --init_from=RUN"):
        TrainConfig(output_dir="o", data_dir="d", lora_rank=4)
    with pytest.raises(ValueError, match="--init_optimizer: an adapter run"):
        TrainConfig(output_dir="o", data_dir="d", lora_rank=4, init_from="p", init_optimizer=True)


def test_a_rank_above_the_model_width_is_refused_before_training(tmp_path):
    data_dir, parent = parent_run(str(tmp_path))
    with pytest.raises(ValueError) as refused:
        adapter_run(data_dir, parent, str(tmp_path / "adapter"), rank=10**6)
    assert str(refused.value) == (
        "--lora_rank=1000000 is above the width of the layers it adapts (d_model=64); pass a "
        "rank in [1, 64]"
    )
    assert not os.path.exists(tmp_path / "adapter" / ADAPTER_FILE)
