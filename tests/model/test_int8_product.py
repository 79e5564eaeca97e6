"""The 8-bit products (t2t_lite.model.layers.int8_product): oneDNN's u8 x s8 op against the
module's formula in NumPy, and each quantized layer's fast path against its slow path (Keras'
weight-only int8) within the bound the input rounding allows."""

from __future__ import annotations

import platform

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.model.layers import SharedEmbedding, int8_kernel, int8_product
from t2t_lite.runtime.precision import onednn_enabled

WEIGHTS_ONLY = keras.quantizers.Int8QuantizationConfig(
    weight_quantizer=None, activation_quantizer=None
)
X86 = platform.machine().lower() in ("x86_64", "amd64")
on_x86 = pytest.mark.skipif(not X86, reason="oneDNN's int8 product is an x86 CPU kernel")
needs_op = pytest.mark.skipif(
    not (X86 and onednn_enabled()), reason="TensorFlow runs its oneDNN ops only on some x86 CPUs"
)


@on_x86
def test_the_op_runs_where_onednn_does_and_is_used_where_exact():
    check = int8_product.check()
    assert check.runs == onednn_enabled(), check
    if check.runs:  # AMX and VNNI sum in int32; the others clip (test_int8_kernel.py)
        assert check.exact == (int8_kernel.sums(check.isa) == "int32"), check
    else:  # e.g. an AMD EPYC with AVX2 only: the op returns an empty tensor
        assert check.describe().startswith("no 8-bit product op here")
    assert int8_product.available() == check.exact


def _uint8_inputs(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The module's input quantization in NumPy: (a_q as integers, the row maxima m)."""
    m = np.maximum(np.abs(x).max(axis=1, keepdims=True), np.finfo(np.float32).tiny)
    shifted = (x / m + np.float32(1.0)).astype(np.float32)
    return np.floor(shifted * np.float32(127.5) + 0.5), m  # SCALED rounds half away from 0


@needs_op
def test_product_equals_the_formula_in_numpy():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(7, 48)).astype(np.float32) * rng.uniform(0.1, 5, (7, 1)).astype("f4")
    x[3] = 0.0  # an all-zero row
    kernel = rng.integers(-127, 128, size=(48, 30)).astype(np.int8)
    inverse_scale = rng.uniform(0.001, 0.01, 30).astype(np.float32)
    column_sums = kernel.astype(np.float64).sum(axis=0)
    found = int8_product._product(
        tf.constant(x), tf.constant(kernel), tf.constant(-column_sums, tf.float32),
        tf.constant(inverse_scale),
    ).numpy()  # fmt: skip
    a_q, m = _uint8_inputs(x)
    # Integer sums, exact: a_q (2 / 255) W_q - colsum(W_q), then the row and column scales.
    expected = m * ((a_q @ kernel.astype(np.float64)) * (2 / 255) - column_sums) * inverse_scale
    expected[3] = 0.0
    np.testing.assert_allclose(found, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())
    # and it is x W within the input rounding: |error| <= m / 255 * sum_i |W_ij| per entry
    exact = x.astype(np.float64) @ (kernel * inverse_scale)
    bound = m / 255 * (np.abs(kernel) * inverse_scale).sum(axis=0) + 1e-5
    assert np.all(np.abs(found - exact) <= bound)


def _quantized(layer: keras.layers.Layer, input_shape, seed: int) -> keras.layers.Layer:
    layer.build(input_shape)
    rng = np.random.default_rng(seed)
    layer.set_weights([rng.normal(size=w.shape).astype(np.float32) for w in layer.weights])
    layer.quantize("int8", config=WEIGHTS_ONLY)
    return layer


def _float_kernel(layer) -> np.ndarray:
    """The weight-only layer's float matrix [k, n]: W_q / s."""
    kernel = layer._kernel.numpy().astype(np.float64)
    k = int(np.prod(kernel.shape[: len(getattr(layer, "_kernel_reduced_axes", [0]))]))
    return (kernel / layer.kernel_scale.numpy()).reshape(k, -1)


LAYERS = {
    "projection ad,dhk->ahk": (lambda: keras.layers.EinsumDense("ad,dhk->ahk", (4, 8)), (32,)),
    "output ahv,hvd->ad": (lambda: keras.layers.EinsumDense("ahv,hvd->ad", (32,)), (4, 8)),
    "dense (relu, bias)": (lambda: keras.layers.Dense(24, activation="relu"), (2, 32)),
}


@needs_op
@pytest.mark.parametrize("name", list(LAYERS))
def test_fast_path_against_the_weight_only_layer(name):
    make, shape = LAYERS[name]
    layer = _quantized(make(), (None, *shape), seed=1)
    x = np.random.default_rng(2).normal(size=(6, *shape)).astype(np.float32)
    slow = layer(x).numpy()
    assert np.array_equal(int8_product.apply(layer, x).numpy(), slow)  # not readied: the layer
    assert not int8_product.prepared(layer) and int8_product.prepare(layer)
    assert int8_product.prepared(layer)
    fast = int8_product.apply(layer, x).numpy()
    assert fast.shape == slow.shape and fast.dtype == slow.dtype
    # Within the input rounding: per row m / 255 * sum_i |W_ij| (ReLU only narrows it).
    rows = x.reshape(-1, _float_kernel(layer).shape[0])
    m = np.abs(rows).max(axis=1, keepdims=True)
    bound = (m / 255 * np.abs(_float_kernel(layer)).sum(axis=0)).reshape(slow.shape) + 1e-5
    error = np.abs(fast - slow)
    assert np.all(error <= bound), (error / bound).max()
    assert error.max() > 0  # the inputs were quantized: not the slow path again


@needs_op
def test_embedding_logits_fast_path():
    layer = SharedEmbedding(40, 16)
    layer.build()
    layer.quantize("int8")
    x = np.random.default_rng(3).normal(size=(2, 5, 16)).astype(np.float32)
    slow = layer.logits(x).numpy()
    assert int8_product.prepare(layer)
    fast = layer.logits(x).numpy()
    weights = layer.embeddings.numpy().astype(np.float64) / layer.embeddings_scale.numpy()
    m = np.abs(x).max(axis=-1, keepdims=True)
    bound = m / 255 * np.abs(weights).sum(axis=1) + 1e-5
    assert fast.shape == slow.shape and np.all(np.abs(fast - slow) <= bound)
    # A limit below the vocabulary keeps the weight-only product.
    np.testing.assert_allclose(layer.logits(x, limit=9), slow[..., :9], rtol=1e-6, atol=1e-6)


def test_float_layers_are_left_alone():
    layer = keras.layers.Dense(8)
    layer.build((None, 4))
    assert not int8_product.prepare(layer)
    x = np.ones((2, 4), np.float32)
    np.testing.assert_array_equal(int8_product.apply(layer, x), layer(x))


@needs_op
def test_a_bfloat16_layer_keeps_its_bfloat16_products():
    layer = keras.layers.Dense(8, dtype="mixed_bfloat16")
    layer.build((None, 4))
    layer.quantize("int8", config=WEIGHTS_ONLY)
    assert layer.quantization_mode == "int8" and not int8_product.prepare(layer)
