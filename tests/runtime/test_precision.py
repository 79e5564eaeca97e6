"""precision=auto (t2t_lite/runtime/precision.py): bfloat16 where the hardware has it natively."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from command_helpers import ENV, python_json
from train_helpers import run_training

from t2t_lite.hparams import get_hparams
from t2t_lite.model import Transformer
from t2t_lite.run.run import build_model, decoding_info
from t2t_lite.run.run_info import RunInfo
from t2t_lite.runtime import precision
from t2t_lite.runtime.precision import decoding_precision, native_bfloat16, resolve_precision


@pytest.mark.parametrize(
    "flags, gpus, expected",
    [
        ({"avx2", "avx512_bf16"}, [], "mixed_bfloat16"),
        ({"avx2", "amx_bf16", "amx_tile"}, [], "mixed_bfloat16"),
        ({"avx2", "avx512f"}, [], "float32"),
        (set(), [], "float32"),
        # With GPUs, they compute: bfloat16 from Ampere (8.0) on, whatever the CPU has.
        (set(), [(8, 0)], "mixed_bfloat16"),
        ({"avx512_bf16"}, [(7, 5)], "float32"),
        (set(), [(9, 0), (7, 0)], "float32"),
    ],
)
def test_auto_resolves_from_the_hardware(flags, gpus, expected):
    assert resolve_precision("auto", flags, gpus) == expected
    assert native_bfloat16(flags, gpus) == (expected == "mixed_bfloat16")


@pytest.mark.parametrize("onednn", [True, False])
def test_this_cpu_computes_bfloat16_only_with_tensorflows_onednn_ops(monkeypatch, onednn):
    """This machine's bfloat16 CPU counts only where TensorFlow runs its oneDNN ops; flags given
    describe a CPU with TensorFlow's defaults, whatever this process runs."""
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx2", "amx_bf16"}))
    monkeypatch.setattr(precision, "gpu_capabilities", lambda: [])
    monkeypatch.setattr(precision, "onednn_enabled", lambda: onednn)
    expected = "mixed_bfloat16" if onednn else "float32"
    assert native_bfloat16() == onednn
    assert resolve_precision("auto") == expected
    assert decoding_precision("mixed_bfloat16") == expected
    assert native_bfloat16({"amx_bf16"}, []) and decoding_precision("float32") == "float32"


@pytest.mark.parametrize("setting", ["0", "1"])
def test_onednn_enabled_follows_tf_enable_onednn_opts(setting):
    code = (
        "import json; from t2t_lite.runtime.precision import onednn_enabled, resolve_precision; "
        "print(json.dumps([onednn_enabled(), resolve_precision('auto', gpus=[])]))"
    )
    enabled, policy = python_json(code, env={**ENV, "TF_ENABLE_ONEDNN_OPTS": setting})
    assert enabled == (setting == "1")
    if setting == "0":  # TensorFlow's own kernels compute: float32 on any CPU
        assert policy == "float32"


@pytest.mark.parametrize("precision", ["float32", "mixed_bfloat16", "mixed_float16"])
def test_named_policies_are_kept(precision):
    assert resolve_precision(precision, {"avx512_bf16"}, []) == precision
    assert resolve_precision(precision, set(), []) == precision


def test_an_auto_model_and_run_use_this_machines_policy(tmp_path):
    expected = resolve_precision("auto")  # this machine's flags and GPUs
    assert expected == ("mixed_bfloat16" if native_bfloat16() else "float32")
    model = Transformer.from_hparams(
        get_hparams("transformer_tiny", "precision=auto"), vocab_size=20
    )
    assert model.dtype_policy.name == expected
    run_training(str(tmp_path / "run"), steps=2, save_every=2, overrides="precision=auto")
    assert RunInfo.load(str(tmp_path / "run")).hparams.precision == expected


@pytest.mark.parametrize(
    "recorded, flags, gpus, expected",
    [
        # A mixed bfloat16 run decodes in float32 where the device has no bfloat16 arithmetic.
        ("mixed_bfloat16", {"avx2"}, [], "float32"),
        ("mixed_bfloat16", {"avx2", "avx512f"}, [], "float32"),
        ("mixed_bfloat16", {"avx2", "amx_bf16"}, [], "mixed_bfloat16"),
        ("mixed_bfloat16", {"avx512_bf16"}, [], "mixed_bfloat16"),
        ("mixed_bfloat16", set(), [(8, 0)], "mixed_bfloat16"),
        ("mixed_bfloat16", {"avx512_bf16"}, [(7, 5)], "float32"),
        ("auto", {"avx2"}, [], "float32"),
        ("auto", {"amx_bf16"}, [], "mixed_bfloat16"),
        # Every other policy is the run's own.
        ("float32", {"amx_bf16"}, [], "float32"),
        ("mixed_float16", set(), [], "mixed_float16"),
    ],
)
def test_a_run_decodes_in_its_policy_unless_bfloat16_would_be_emulated(
    recorded, flags, gpus, expected
):
    assert decoding_precision(recorded, flags, gpus) == expected


def test_a_bfloat16_run_restores_as_a_float32_model_with_its_weights_on_an_avx2_cpu(
    tmp_path, monkeypatch
):
    """Run.restore's model (`build_model` of `decoding_info`): on a CPU with AVX2 only a mixed
    bfloat16 run's model computes in float32, with the same float32 weights, so its logits are
    those of a float32 model restored from the same checkpoint; on this machine's own flags it
    keeps the run's policy where the machine has bfloat16 arithmetic. `build_model` alone (the
    model averaging reads checkpoints into) keeps the run's policy."""
    hparams = get_hparams(
        "transformer_tiny",
        "num_encoder_layers=1,num_decoder_layers=1,d_ff=64,precision=mixed_bfloat16",
    )
    info = RunInfo("p", "d", "transformer_tiny", hparams, 12)
    assert build_model(decoding_info(info)).dtype_policy.name == decoding_precision(
        "mixed_bfloat16"
    )
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx2", "fma"}))
    monkeypatch.setattr(precision, "gpu_capabilities", lambda: [])
    assert build_model(info).dtype_policy.name == "mixed_bfloat16"  # averaging's model: as trained
    model = build_model(decoding_info(info))
    assert model.dtype_policy.name == "float32"
    reference = build_model(
        RunInfo("p", "d", "transformer_tiny", hparams.replace(precision="float32"), 12)
    )
    path = tf.train.Checkpoint(model=model).write(str(tmp_path / "ckpt"))
    tf.train.Checkpoint(model=reference).read(path).assert_consumed()
    ids = tf.constant([[3, 4, 5, 1], [6, 7, 1, 0]])
    features = {"inputs": ids, "targets": ids}
    np.testing.assert_array_equal(model(features).numpy(), reference(features).numpy())
