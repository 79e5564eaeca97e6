"""bench/gpu/export_step.py and export_decode.py: the manifests they write remake the exported
training step's state and the search's weights, so that the GPU side (bench/gpu/run_step.py and
run_decode.py, which have no TensorFlow) starts from the values that TensorFlow's reference losses,
ids and scores were computed from."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

GPU = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "gpu")
sys.path.insert(0, GPU)
import export_decode  # noqa: E402
import export_step  # noqa: E402
import profile_kernels  # noqa: E402
import values  # noqa: E402

from t2t_lite.hparams import get_hparams  # noqa: E402
from t2t_lite.model.transformer import Transformer  # noqa: E402
from t2t_lite.runtime import distribute  # noqa: E402
from t2t_lite.train.step import Trainer  # noqa: E402

VOCAB = 300


def _hparams():
    return get_hparams("transformer_tiny", "jit_compile=true,dropout=0.0,max_positions=64")


def _fresh_step(seed: int):
    tf.keras.utils.set_random_seed(seed)
    trainer = Trainer(_hparams(), VOCAB, distribute.create_strategy("default"))
    return trainer, export_step.make_step(trainer)


def test_uniform_values_are_seeded_by_index_and_bounded_by_the_fan_in():
    a = values.uniform_values(3, (40, 2, 8), "float32")
    assert a.shape == (40, 2, 8) and a.dtype == np.float32
    assert np.abs(a).max() <= np.sqrt(3.0 / 80) and np.abs(a).max() > 0.9 * np.sqrt(3.0 / 80)
    np.testing.assert_array_equal(a, values.uniform_values(3, (40, 2, 8), "float32"))
    assert not np.array_equal(a, values.uniform_values(4, (40, 2, 8), "float32"))


def test_the_manifest_remakes_the_state_that_gives_tensorflows_reference_losses(tmp_path):
    folder = str(tmp_path)
    manifest = export_step.export(folder, _hparams(), VOCAB, (4, 8))
    with open(os.path.join(folder, "manifest.json")) as f:
        assert json.load(f) == manifest
    for name in ("check", "time"):
        assert os.path.getsize(os.path.join(folder, f"{name}.pb")) > 1000
    assert manifest["shapes"]["time"]["batch"] == [4, 8]
    assert manifest["shapes"]["check"]["batch"] == list(export_step.CHECK_SHAPE)
    records = manifest["arguments"]
    kinds = {r["kind"] for r in records} | {"fill" for r in records if "fill" in r}
    assert kinds == {"variable", "constant", "fill"}  # weights, the sinusoids, gains and slots
    reference = manifest["shapes"]["check"]["tensorflow_losses"]
    assert len(reference) == 3 and abs(reference[0] - np.log(VOCAB)) < 0.5

    # A trainer of another seed, given the manifest's values, takes the same three steps.
    trainer, step = _fresh_step(seed=7)
    batch = export_step.batch(*export_step.CHECK_SHAPE, VOCAB)
    arguments = export_step.captured_arguments(step, *batch, trainer)
    assert len(arguments) == len(records)
    untouched = float(step(*batch)[0])  # its own initial values: a different first loss
    assert abs(untouched - reference[0]) > 1e-4
    for argument, value in zip(arguments, values.initial_values(folder, records), strict=True):
        if isinstance(argument, tf.Tensor):
            np.testing.assert_array_equal(argument.numpy(), value)
        else:
            argument.assign(value)
    losses = [float(step(*batch)[0]) for _ in range(3)]
    np.testing.assert_allclose(losses, reference, rtol=1e-6)


@pytest.mark.parametrize("beam_size", [4, 1])  # beam search, greedy search
def test_the_decode_manifest_remakes_the_weights_of_tensorflows_reference_search(
    tmp_path, beam_size
):
    folder = str(tmp_path)
    hparams = get_hparams("transformer_tiny", "max_positions=64")
    manifest = export_decode.export(folder, hparams, VOCAB, (3, 8), beam_size=beam_size, extra=5)
    assert manifest["beam_size"] == beam_size
    check = manifest["shapes"]["check"]
    source_length = export_decode.CHECK_SHAPE[1]
    assert check["width"] == source_length + 5 and manifest["shapes"]["time"]["batch"] == [3, 8]
    ids = np.array(check["tensorflow_ids"])  # the best hypotheses, [batch, width]
    assert ids.shape == (export_decode.CHECK_SHAPE[0], source_length + 5) and ids.max() < VOCAB
    records = manifest["arguments"]
    assert {r["kind"] for r in records} == {"variable", "constant"}  # weights, the sinusoids

    # A model of another seed, given the manifest's values, finds the same hypotheses.
    tf.keras.utils.set_random_seed(7)
    model = Transformer.from_hparams(hparams, VOCAB)
    model.build()
    decode = export_decode.make_decode(model, beam_size, 5)
    source = values.batch(*export_decode.CHECK_SHAPE, VOCAB)[0]
    arguments = export_decode.captured_arguments(decode, source, model)
    assert len(arguments) == len(records)
    untouched = decode(source)[1].numpy()[:, 0]  # its own weights: other scores
    assert np.abs(untouched - check["tensorflow_scores"]).max() > 1e-3
    for argument, value in zip(arguments, values.initial_values(folder, records), strict=True):
        if isinstance(argument, tf.Tensor):
            np.testing.assert_array_equal(argument.numpy(), value)
        else:
            argument.assign(value)
    found_ids, scores = decode(source)
    np.testing.assert_array_equal(found_ids.numpy()[:, 0], ids)
    np.testing.assert_allclose(scores.numpy()[:, 0], check["tensorflow_scores"], rtol=1e-6)


def test_kernel_profile_sums_each_kind_and_the_idle_time():
    # bench/gpu/profile_kernels.py on a made-up Perfetto trace: two calls, GPU rows only, kinds
    # by kernel name or else by the HLO instruction the kernel ran, idle time between kernels.
    def kernel(name, start, duration, pid=7, **args):
        return {"ph": "X", "pid": pid, "name": name, "ts": start, "dur": duration, "args": args}

    trace = {
        "traceEvents": [
            {"ph": "M", "name": "process_name", "pid": 7, "args": {"name": "/device:GPU:0"}},
            {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/host:CPU"}},
            kernel("nvjet_sm90_tst_128x160", 0, 10),  # cuBLAS: a matrix product
            kernel("loop_add_fusion", 5, 10),  # overlaps it: busy 0-15
            kernel("input_reduce_fusion_2", 20, 10),  # idle 15-20
            kernel("kernel_x", 40, 6, hlo_op="custom-call.3"),  # idle 30-40; kind from the HLO
            kernel("memcpy128", 46, 4),
            kernel("ThunkExecutor::Execute", 0, 500, pid=1),  # host: not counted
        ]
    }
    hlo = (
        "ENTRY %main {\n"
        "  %custom-call.3 = (bf16[8,8]{1,0}, s8[0]) custom-call(%a, %b), "
        'custom_call_target="__cublas$gemm"\n'
        "}\n"
    )
    kernels = profile_kernels.gpu_kernels(trace)
    assert [k[0] for k in kernels] == [
        "nvjet_sm90_tst_128x160",
        "loop_add_fusion",
        "input_reduce_fusion_2",
        "kernel_x",
        "memcpy128",
    ]
    assert profile_kernels.busy_time(kernels) == (35.0, 50.0)
    summary = profile_kernels.summarize(
        kernels, profile_kernels.hlo_instructions(hlo), calls=2, flops=8e6, peak=1.0
    )
    ms = {kind: row["ms"] for kind, row in summary["kinds"].items()}
    assert ms == pytest.approx(
        {"matmul": 0.008, "element-wise": 0.005, "reduction": 0.005, "copy / transpose": 0.002}
    )
    assert summary["idle_share"] == pytest.approx(15 / 50)
    assert summary["kernel_ms_per_call"] == pytest.approx(0.020)
    assert summary["span_ms_per_call"] == pytest.approx(0.025)
    # 8 MFLOP per call over 8 us of matrix products per call: 1 TFLOP/s.
    assert summary["matmul_tflops"] == pytest.approx(1.0)
    assert summary["slowest"][0] == {
        "kind": "matmul",
        "name": "nvjet_sm90_tst_128x160",
        "ms": 0.005,
    }
