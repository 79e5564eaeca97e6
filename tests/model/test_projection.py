"""`Projection`, the attention projections' EinsumDense run as one 2-D matmul, against Keras'
own `EinsumDense` (the slow path: `_MklEinsum`) with the same weights."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.model.layers import MultiHeadAttention
from t2t_lite.model.layers.projection import Projection, contracted_rank

from conftest import assert_close

# (equation, output_shape, input shape): the two of `MultiHeadAttention`, and a 3-D input.
EQUATIONS = {
    "into heads": ("ad,dhk->ahk", (4, 8), (6, 32)),
    "out of heads": ("ahv,hvd->ad", (32,), (6, 4, 8)),
    "batched input": ("btd,dhk->bthk", (None, 4, 8), (2, 3, 32)),
}


def _pair(equation, output_shape, input_shape, dtype="float32", **kwargs):
    """A Projection and an EinsumDense with the same kernel."""
    fast = Projection(equation, output_shape, dtype=dtype, **kwargs)
    slow = keras.layers.EinsumDense(equation, output_shape, dtype=dtype, **kwargs)
    for layer in (fast, slow):
        layer.build((None, *input_shape[1:]))
    slow.set_weights(fast.get_weights())
    return fast, slow


def _ops(layer, x) -> set[str]:
    graph = tf.function(layer).get_concrete_function(tf.TensorSpec(x.shape, x.dtype)).graph
    return {op.type for op in graph.get_operations()}


@pytest.mark.parametrize("name", list(EQUATIONS))
def test_equals_einsum_dense_and_runs_a_matmul(name):
    equation, output_shape, input_shape = EQUATIONS[name]
    fast, slow = _pair(equation, output_shape, input_shape)
    x = tf.constant(np.random.default_rng(0).normal(size=input_shape), tf.float32)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y_fast, y_slow = fast(x), slow(x)
        weights = tf.constant(np.random.default_rng(1).normal(size=y_fast.shape), tf.float32)
        loss_fast, loss_slow = tf.reduce_sum(y_fast * weights), tf.reduce_sum(y_slow * weights)
    assert y_fast.shape == y_slow.shape
    assert_close(y_fast, y_slow)
    assert_close(tape.gradient(loss_fast, x), tape.gradient(loss_slow, x))
    grads = tape.gradient(loss_fast, fast.kernel), tape.gradient(loss_slow, slow.kernel)
    assert_close(*grads)
    ops = _ops(fast, x)
    assert "MatMul" in ops and not ops & {"Einsum", "BatchMatMulV2"}
    if len(input_shape) == 2:
        assert "Einsum" in _ops(slow, x)  # what it replaces in `MultiHeadAttention`


def test_training_keeps_the_einsum():
    equation, output_shape, input_shape = EQUATIONS["into heads"]
    fast, slow = _pair(equation, output_shape, input_shape)
    x = tf.constant(np.random.default_rng(6).normal(size=input_shape), tf.float32)
    graph = tf.function(lambda x: fast(x, training=True)).get_concrete_function(x).graph
    assert "Einsum" in {op.type for op in graph.get_operations()}
    assert_close(fast(x, training=True), slow(x))
    # Keras passes an outer call's training flag down: the attention's projections train with
    # the einsum and decode with the matmul.
    attention = MultiHeadAttention(d_model=32, num_heads=4)
    query = tf.constant(np.random.default_rng(7).normal(size=(2, 3, 32)), tf.float32)
    for training, expected in ((True, "Einsum"), (False, "MatMul")):
        fn = tf.function(lambda q, training=training: attention(q, training=training))
        ops = {op.type for op in fn.get_concrete_function(query).graph.get_operations()}
        assert expected in ops and ("Einsum" in ops) == training, (training, ops)


def test_mixed_bfloat16_casts_as_keras_does():
    equation, output_shape, input_shape = EQUATIONS["into heads"]
    fast, slow = _pair(equation, output_shape, input_shape, dtype="mixed_bfloat16")
    x = tf.constant(np.random.default_rng(2).normal(size=input_shape), tf.float32)
    y_fast, y_slow = fast(x), slow(x)
    assert y_fast.dtype == y_slow.dtype == tf.bfloat16
    assert fast.kernel.dtype == "float32"  # the variable stays float32
    assert_close(tf.cast(y_fast, tf.float32), tf.cast(y_slow, tf.float32), rtol=0.02)


def test_lora_is_merged_into_the_product():
    equation, output_shape, input_shape = EQUATIONS["into heads"]
    fast, slow = _pair(equation, output_shape, input_shape)
    for layer in (fast, slow):
        layer.enable_lora(2)
    rng = np.random.default_rng(3)
    for a, b in (
        (fast.lora_kernel_a, slow.lora_kernel_a),
        (fast.lora_kernel_b, slow.lora_kernel_b),
    ):
        value = rng.normal(size=a.shape).astype(np.float32)
        a.assign(value)
        b.assign(value)
    x = tf.constant(rng.normal(size=input_shape), tf.float32)
    plain = tf.einsum(equation, x, fast._kernel)
    assert np.abs(fast(x) - plain).max() > 0.1  # the adapter changes the output
    assert_close(fast(x), slow(x))


def test_a_quantized_layer_keeps_keras_quantized_call():
    equation, output_shape, input_shape = EQUATIONS["out of heads"]
    fast, slow = _pair(equation, output_shape, input_shape)
    for layer in (fast, slow):
        layer.quantize("int8")
    x = tf.constant(np.random.default_rng(4).normal(size=input_shape), tf.float32)
    assert fast.quantization_mode == "int8"
    np.testing.assert_array_equal(fast(x).numpy(), slow(x).numpy())


def test_other_equations_keep_the_einsum():
    # A bias, or a contraction not at the input's end, is not a plain 2-D product.
    for equation, output_shape, input_shape, bias in (
        ("ad,dhk->ahk", (4, 8), (6, 32), "hk"),
        ("adb,dk->abk", (3, 8), (6, 32, 3), None),
    ):
        fast, slow = _pair(equation, output_shape, input_shape, bias_axes=bias)
        assert not fast._as_matmul
        x = tf.constant(np.random.default_rng(5).normal(size=input_shape), tf.float32)
        assert_close(fast(x), slow(x))


def test_contracted_rank_counts_the_kernel_letters_the_input_contracts():
    assert contracted_rank("ad,dhk->ahk") == 1
    assert contracted_rank("ahv,hvd->ad") == 2
    assert contracted_rank("adb,dk->abk") == 1
    assert contracted_rank("abc,cd->abd") == 1
    assert contracted_rank("ab,bc->abc") == 0  # kept in the output: not contracted
