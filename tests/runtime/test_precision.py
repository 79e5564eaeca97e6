"""precision=auto (t2t_lite/runtime/precision.py): bfloat16 where the hardware has it natively."""

from __future__ import annotations

import pytest
from train_helpers import run_training

from t2t_lite.hparams import get_hparams
from t2t_lite.model import Transformer
from t2t_lite.run.run_info import RunInfo
from t2t_lite.runtime.precision import native_bfloat16, resolve_precision


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
