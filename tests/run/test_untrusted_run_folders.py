"""A run folder or data_dir from someone else is input: a crafted hparams.json cannot make a
command build a model no machine holds or compute with NaN, and a crafted metadata.json cannot
point training outside its data_dir; each is refused in one line naming the file and field."""

from __future__ import annotations

import json
import shutil

import pytest
from command_helpers import command as run_command
from decoding_helpers import write_tiny_run

from t2t_lite.problems import get_problem, read_metadata
from t2t_lite.run.adapter import AdapterRecord
from t2t_lite.run.layout import ADAPTER_FILE
from t2t_lite.run.run_info import RunInfo


def _edit_hparams(output_dir, **changes) -> str:
    path = output_dir / "hparams.json"
    values = json.loads(path.read_text())
    values["hparams"].update(changes)
    path.write_text(json.dumps(values))  # json writes NaN for float("nan"), as a crafted file may
    return str(path)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"num_encoder_layers": 1_000_000}, "hparam num_encoder_layers=1000000 is above the limit"),
        ({"d_model": 10**12}, "hparam d_model=1000000000000 is above the limit"),
        ({"d_model": 1e12}, "hparam d_model expects int in json"),
        ({"layer_norm_epsilon": float("nan")}, "hparam layer_norm_epsilon must be a finite number"),
        ({"layer_norm_epsilon": 0.0}, "hparam layer_norm_epsilon must be > 0"),
        ({"learning_rate": float("inf")}, "hparam learning_rate must be a finite number"),
    ],
)  # fmt: skip
def test_a_crafted_hparams_json_is_refused_naming_file_and_field(tmp_path, changes, message):
    output_dir, _, _ = write_tiny_run(tmp_path)
    path = _edit_hparams(output_dir, **changes)
    with pytest.raises(ValueError) as refused:
        RunInfo.load(str(output_dir))
    assert str(refused.value).startswith(f"{path} is not a valid run description: ")
    assert message in str(refused.value)


def test_t2t_decode_refuses_it_in_one_line(tmp_path):
    output_dir, _, _ = write_tiny_run(tmp_path)
    path = _edit_hparams(output_dir, num_encoder_layers=1_000_000)
    done = run_command("t2t-decode", f"--output_dir={output_dir}", stdin="1 2\n")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert lines[-1].startswith(f"t2t-decode: error: {path} is not a valid run description")


# Each within its bound (LIMITS), together 939,741,184 weights: 3.8 GB to restore.
BIG = {"d_model": 4096, "d_ff": 16384, "num_heads": 8, "d_k": 0, "d_v": 0,
       "num_encoder_layers": 2, "num_decoder_layers": 2}  # fmt: skip


def test_a_run_above_the_memory_left_is_refused_before_it_is_built(tmp_path, monkeypatch):
    from t2t_lite.model import footprint
    from t2t_lite.run.run import restore_model

    output_dir, _, _ = write_tiny_run(tmp_path)
    restore_model(str(output_dir))  # the tiny run fits
    path = _edit_hparams(output_dir, **BIG)
    monkeypatch.setattr(footprint, "available_memory", lambda: (2 * 10**9, "available memory"))
    with pytest.raises(footprint.ModelTooLargeError) as refused:
        restore_model(str(output_dir))
    assert str(refused.value) == (
        f"{path}: the model it describes needs at least 3.8 GB (939,741,184 float32 weights), "
        "but this process may take 2.0 GB (available memory); use a machine with more memory, "
        "or a smaller model (d_model, d_ff, layers, vocabulary, adapter rank)"
    )
    _crafted_adapter(output_dir, json.dumps({**ADAPTER, "rank": 4096}))
    with pytest.raises(footprint.ModelTooLargeError, match=r"hparams.json with adapter.json: "):
        restore_model(str(output_dir))


def test_t2t_decode_refuses_a_model_no_machine_holds_in_one_line(tmp_path):
    output_dir, _, _ = write_tiny_run(tmp_path)
    path = _edit_hparams(output_dir, d_model=65_536, d_ff=262_144, num_heads=64, d_k=0, d_v=0)
    done = run_command("t2t-decode", f"--output_dir={output_dir}", stdin="1 2\n")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    # 1 + 1 layers: 4 x 65,536^2 + 2 x 65,536 x 262,144 and 8 x 65,536^2 + 2 x 65,536 x 262,144
    # weights, and the biases, norms and embedding: 120 billion, 481 GB
    assert lines[-1].startswith(
        f"t2t-decode: error: {path}: the model it describes needs at least 481.0 GB "
        "(120,261,246,976 float32 weights), but this process may take "
    ), lines[-1]


@pytest.mark.parametrize("vocab_size", [0, 10**9, True])
def test_a_crafted_vocabulary_size_is_refused(tmp_path, vocab_size):
    output_dir, _, _ = write_tiny_run(tmp_path)
    path = output_dir / "hparams.json"
    values = json.loads(path.read_text())
    values["vocab_size"] = vocab_size
    path.write_text(json.dumps(values))
    with pytest.raises(ValueError, match=r"hparams.json is not a valid run description: vocab"):
        RunInfo.load(str(output_dir))


# What t2t-train --lora_rank=4 records over the tiny run of write_tiny_run (d_model 16).
ADAPTER = {
    "rank": 4, "alpha": 4.0, "parent_dir": "/runs/parent",
    "parent_checkpoint": "/runs/parent/checkpoints/ckpt-1", "parent_sha256": "0a" * 32,
    "trainable_weights": 16_448,
}  # fmt: skip


def _crafted_adapter(output_dir, text: str) -> str:
    """Makes the run in `output_dir` an adapter run whose adapter.json holds `text`."""
    path = output_dir / ADAPTER_FILE
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"rank": 10**6}, '"rank": 1000000 is not in [1, 16] (the model\'s width d_model)'),
        ({"rank": 10**9}, '"rank": 1000000000 is not in [1, 16]'),
        ({"rank": 0}, '"rank": 0 is not in [1, 16]'),
        ({"rank": "abc"}, "\"rank\": expects int, got 'abc'"),
        ({"rank": 4.0}, '"rank": expects int, got 4.0'),
        ({"rank": True}, '"rank": expects int, got True'),
        ({"alpha": float("nan")}, '"alpha": nan is not a finite number > 0'),
        ({"alpha": float("inf")}, '"alpha": inf is not a finite number > 0'),
        ({"alpha": -1.0}, '"alpha": -1.0 is not a finite number > 0'),
        ({"alpha": "4"}, "\"alpha\": expects float, got '4'"),
        ({"parent_dir": ""}, '"parent_dir": empty'),
        ({"parent_sha256": "xyz"}, "\"parent_sha256\": 'xyz' is not 64 hex digits"),
        ({"trainable_weights": -1}, '"trainable_weights": -1 is negative'),
        ({"targets": ["query"]}, '"targets": unknown field (known: rank, alpha, '),
        ({"rank": None, "remove": "rank"}, '"rank": missing'),
    ],
)  # fmt: skip
def test_a_crafted_adapter_json_is_refused_naming_file_and_field(tmp_path, changes, message):
    output_dir, _, _ = write_tiny_run(tmp_path)
    values = {**ADAPTER, **changes}
    values.pop(values.pop("remove", "remove"), None)
    path = _crafted_adapter(output_dir, json.dumps(values))  # NaN as a crafted file may hold
    with pytest.raises(ValueError) as refused:
        AdapterRecord.load(str(output_dir), RunInfo.load(str(output_dir)).hparams.d_model)
    assert str(refused.value).startswith(f"{path}: {message}"), str(refused.value)
    assert str(refused.value).endswith("; retrain the adapter")


@pytest.mark.parametrize("text", ["", "{garbage", "[]"])
def test_a_garbage_adapter_json_names_the_file(tmp_path, text):
    output_dir, _, _ = write_tiny_run(tmp_path)
    path = _crafted_adapter(output_dir, text)
    with pytest.raises(ValueError, match=f"^{path}: not "):
        AdapterRecord.load(str(output_dir), 16)


def test_the_recorded_adapter_passes(tmp_path):
    output_dir, _, _ = write_tiny_run(tmp_path)
    _crafted_adapter(output_dir, json.dumps({**ADAPTER, "alpha": 8}))
    record = AdapterRecord.load(str(output_dir), 16)
    assert record == AdapterRecord(**{**ADAPTER, "alpha": 8.0})


@pytest.mark.parametrize(
    ("command", "flags"),
    [
        ("t2t-decode", []),
        ("t2t-export", ["--export_dir={root}/exports"]),
        ("t2t-serve", ["--port=0"]),
        ("t2t-serve", ["--output_dir={root}/base", "--adapters=crafted={root}/out"]),
    ],
)  # fmt: skip
def test_every_command_restoring_an_adapter_refuses_it_in_one_line(tmp_path, command, flags):
    output_dir, _, _ = write_tiny_run(tmp_path)
    shutil.copytree(output_dir, tmp_path / "base")  # the served base of --adapters
    path = _crafted_adapter(output_dir, json.dumps({**ADAPTER, "rank": 10**9}))
    flags = [flag.format(root=tmp_path) for flag in flags]
    if not any(flag.startswith("--output_dir") for flag in flags):
        flags.append(f"--output_dir={output_dir}")
    done = run_command(command, *flags, stdin="1 2\n")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert lines[-1] == (
        f'{command}: error: {path}: "rank": 1000000000 is not in [1, 16] (the model\'s width '
        "d_model); retrain the adapter"
    )


@pytest.fixture
def data_dir(tmp_path):
    get_problem("algorithmic_copy").generate_data(
        str(tmp_path / "data"), max_sequence_length=4, train_size=20, dev_size=5, test_size=5
    )
    return tmp_path / "data"


@pytest.mark.parametrize(
    "shard", ["../../../../../etc/passwd", "/etc/passwd", "sub/train-0.tfrecord", "..", ""]
)
def test_metadata_cannot_point_outside_the_data_dir(data_dir, shard):
    path = data_dir / "metadata.json"
    metadata = json.loads(path.read_text())
    metadata["splits"]["train"]["shards"] = [shard]
    path.write_text(json.dumps(metadata))
    with pytest.raises(ValueError) as refused:
        get_problem("algorithmic_copy").split_files(str(data_dir), "train")
    assert str(refused.value).startswith(f"{path}: not a metadata.json of t2t-datagen")
    assert "splits.train.shards" in str(refused.value)


@pytest.mark.parametrize("text", ["", "{garbage", "[]", '{"splits": 3}'])
def test_a_garbage_metadata_json_names_the_file(data_dir, text):
    (data_dir / "metadata.json").write_text(text)
    with pytest.raises(ValueError, match=r"metadata.json: not a metadata.json of t2t-datagen"):
        read_metadata(str(data_dir))
