"""Which oneDNN kernel runs the 8-bit products (t2t_lite.model.layers.int8_kernel) and the check
that keeps an inexact one away from the model (`int8_product.check`).

The same checks run on any x86 machine: NumPy models of each kind of kernel's integer semantics
(int32 sums as VNNI and AMX compute them, int16 pair sums that clip as VPMADDUBSW computes them,
and an input bit lost) against `integer_sums_error`, and the real op under oneDNN's own kernels,
forced with ONEDNN_MAX_CPU_ISA in a fresh process: the CPU's best one, and one that clips."""

from __future__ import annotations

import os
import platform

import numpy as np
import pytest
from command_helpers import python_json

from t2t_lite.model.layers import int8_kernel, int8_product

X86 = platform.machine().lower() in ("x86_64", "amd64")
needs_op = pytest.mark.skipif(not X86, reason="oneDNN's int8 product is an x86 CPU kernel")


def test_the_isa_follows_the_flags_and_the_cap():
    amx = {"avx2", "avx512bw", "avx512_vnni", "amx_int8", "amx_tile", "sse4_1"}
    epyc = {"avx2", "avx512bw", "avx512_vnni", "avx512_bf16", "sse4_1"}
    assert int8_kernel.isa(amx, cap="") == "avx512_core_amx"
    assert int8_kernel.isa(epyc, cap="ALL") == "avx512_core_vnni"
    assert int8_kernel.isa({"avx2", "avx_vnni"}, cap="") == "avx2_vnni"
    assert int8_kernel.isa({"avx2", "sse4_1"}, cap="") == "avx2"
    assert int8_kernel.isa(amx, cap="AVX512_CORE_VNNI") == "avx512_core_vnni"
    assert int8_kernel.isa(amx, cap="avx512_core") == "avx512_core"
    assert int8_kernel.isa(epyc, cap="AVX512_CORE_AMX") == "avx512_core_vnni"  # caps only lower
    assert int8_kernel.isa(epyc, cap="no_such_isa") == "avx512_core_vnni"
    assert int8_kernel.isa(set(), cap="") == "unknown"
    assert int8_kernel.forcible(amx) == ["AVX512_CORE_VNNI", "AVX512_CORE"]
    assert int8_kernel.forcible(epyc) == ["AVX512_CORE"]
    assert int8_kernel.forcible({"avx2", "avx_vnni"}) == ["AVX2"]
    assert int8_kernel.forcible({"avx2"}) == []
    assert [int8_kernel.sums(n) for n in ("avx512_core_amx", "avx512_core_vnni", "avx2_vnni")] == [
        "int32"
    ] * 3
    assert [int8_kernel.sums(n) for n in ("avx512_core", "avx2", "sse41")] == ["int16 pair"] * 3


def _quantized_inputs(x: np.ndarray) -> np.ndarray:
    """The module's a_q in NumPy: round((x / m + 1) 127.5), half away from zero."""
    m = np.maximum(np.abs(x).max(axis=1, keepdims=True), np.finfo(np.float32).tiny)
    return np.floor((x / m + np.float32(1.0)).astype(np.float32) * np.float32(127.5) + 0.5)


def _int32_kernel(a_q: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """VNNI and AMX: u8 x s8 products summed exactly in int32, then read back in float32 as
    a_q (2 / 255) W_q - colsum(W_q)."""
    sums = a_q.astype(np.int64) @ kernel.astype(np.int64)
    assert np.abs(sums).max() < 2**31
    dequantized = sums.astype(np.float32) * np.float32(2 / 255)
    return dequantized - kernel.astype(np.float32).sum(axis=0)


def _int16_pair_kernel(a_q: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """VPMADDUBSW then VPMADDWD: adjacent pairs of products summed in int16 with saturation,
    then the pairs summed in int32."""
    a = a_q.astype(np.int64)
    w = kernel.astype(np.int64)
    if a.shape[1] % 2:
        a, w = np.pad(a, ((0, 0), (0, 1))), np.pad(w, ((0, 1), (0, 0)))
    pairs = a[:, 0::2, None] * w[None, 0::2] + a[:, 1::2, None] * w[None, 1::2]  # [rows, k/2, n]
    sums = np.clip(pairs, -(2**15), 2**15 - 1).sum(axis=1)
    return sums.astype(np.float32) * np.float32(2 / 255) - kernel.astype(np.float32).sum(axis=0)


@pytest.mark.parametrize("rows,k,n", int8_product.PROBES)
def test_the_measure_tells_exact_sums_from_clipped_and_coarser_ones(rows, k, n):
    x, kernel = int8_product.probe(np.random.default_rng(1), rows, k, n)
    a_q = _quantized_inputs(x)
    assert a_q.min() >= 0 and a_q.max() == 255  # the first row
    exact = int8_product.integer_sums_error(a_q, kernel, _int32_kernel(a_q, kernel))
    assert exact < int8_product.EXACT_TOLERANCE / 10, exact  # float32's rounding only
    clipped = int8_product.integer_sums_error(a_q, kernel, _int16_pair_kernel(a_q, kernel))
    # Row 0 x column 0: k / 2 pairs of 2 x 255 x 127 = 64,770, each clipped to 32,767.
    assert clipped > (k / 2) * (64_770 - 32_767) * (2 / 255) / (2 / 255 * 127) - 1, clipped
    seven_bits = np.floor(a_q / 2) * 2  # an input bit lost
    coarse = int8_product.integer_sums_error(a_q, kernel, _int32_kernel(seven_bits, kernel))
    assert coarse > 2 * int8_product.EXACT_TOLERANCE, coarse


def _check_in_a_process(cap: str | None) -> dict:
    """`int8_product.check()` and `available()` in a fresh process with oneDNN on and capped at
    `cap` (None: the CPU's best), and whether a quantized Dense layer takes the 8-bit path."""
    # oneDNN on, as TensorFlow has it by default only on CPUs with AVX-512 VNNI, BF16 or AMX.
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "1"}
    env.pop("ONEDNN_MAX_CPU_ISA", None)
    if cap:
        env["ONEDNN_MAX_CPU_ISA"] = cap
    script = (
        "import json, keras\n"
        "from t2t_lite.model.layers import int8_product\n"
        "c = int8_product.check()\n"
        "layer = keras.layers.Dense(8)\nlayer.build((None, 16))\nlayer.quantize('int8')\n"
        "print(json.dumps({'isa': c.isa, 'runs': c.runs, 'exact': c.exact,\n"
        "    'sums_error': c.sums_error, 'available': int8_product.available(),\n"
        "    'prepared': int8_product.prepare(layer), 'line': c.describe()}))\n"
    )
    return python_json(script, env=env)


@needs_op
def test_a_clipping_kernel_is_caught_and_left_unused():
    # AVX512_CORE or AVX2, or none where the CPU's best kernel sums int16 pairs already.
    cap = next((c for c in int8_kernel.forcible() if int8_kernel.sums(c.lower()) != "int32"), None)
    found = _check_in_a_process(cap)
    assert found["isa"] == (cap.lower() if cap else int8_kernel.isa()) and found["runs"], found
    assert not found["exact"] and not found["available"] and not found["prepared"], found
    assert found["sums_error"] > 100 * int8_product.EXACT_TOLERANCE, found
    assert "is not exact on this CPU" in found["line"] and "int16 pair sums" in found["line"]


@needs_op
def test_the_best_kernel_of_this_cpu_is_named_and_used_only_where_exact():
    found = _check_in_a_process(None)
    assert found["isa"] == int8_kernel.isa() and found["runs"], found
    assert found["available"] == found["exact"] == found["prepared"], found
    if found["exact"]:
        assert found["line"].startswith(f"8-bit products by oneDNN's {found['isa']} kernel")
    else:  # what an inexact kernel gets: the layers keep their weight-only products
        assert "float inputs times the int8 weights instead" in found["line"], found
