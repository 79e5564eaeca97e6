import math

import numpy as np
import pytest

from t2t_lite.model.layers import FeedForward, PositionalEncoding, SharedEmbedding, sinusoid_table

from conftest import assert_close
from numpy_reference import feed_forward, positional_encoding


def test_feed_forward_matches_numpy():
    layer = FeedForward(d_model=6, d_ff=10)
    layer.build((None, None, 6))
    x = np.random.default_rng(0).normal(size=(2, 3, 6)).astype(np.float32)
    weights = [
        w.numpy().astype(np.float64)
        for w in (
            layer.hidden.kernel,
            layer.hidden.bias,
            layer.output_dense.kernel,
            layer.output_dense.bias,
        )
    ]
    assert_close(layer(x), feed_forward(x.astype(np.float64), *weights))


def test_sinusoid_is_section_3_5():
    reference = positional_encoding(50, 16)
    assert_close(sinusoid_table(50, 16), reference, rtol=1e-12)
    # Literal values: PE(pos, 0) = sin(pos), PE(pos, 1) = cos(pos), PE(3, 2) = sin(3 / 10^(1/2)).
    table = sinusoid_table(4, 16)
    assert table[1, 0] == pytest.approx(math.sin(1.0))
    assert table[1, 1] == pytest.approx(math.cos(1.0))
    assert table[3, 2] == pytest.approx(math.sin(3 / 10000 ** (2 / 16)))


def test_concat_variant_is_tensor2tensor_timing_signal():
    table = sinusoid_table(10, 8, interleaved=False)
    # tensor2tensor: 4 timescales from 1 to 10000, geometrically spaced; sin block then cos block.
    inv = 1.0 / np.array([1.0, 10000 ** (1 / 3), 10000 ** (2 / 3), 10000.0])
    angles = np.arange(10)[:, None] * inv
    assert_close(table, np.concatenate([np.sin(angles), np.cos(angles)], 1), rtol=1e-12)


@pytest.mark.parametrize("kind", ["sinusoid", "sinusoid_concat"])
def test_positional_layer_adds_table_from_start_index(kind):
    layer = PositionalEncoding(kind, d_model=8, max_positions=20)
    layer.build(None)
    x = np.zeros((1, 3, 8), np.float32)
    table = sinusoid_table(20, 8, interleaved=kind == "sinusoid")
    assert_close(layer(x, start_index=5)[0], table[5:8])


def test_learned_positions_are_trainable_table():
    layer = PositionalEncoding("learned", d_model=4, max_positions=6)
    layer.build(None)
    assert [w.shape for w in layer.trainable_weights] == [(6, 4)]
    x = np.ones((2, 3, 4), np.float32)
    assert_close(layer(x, start_index=2)[1], 1 + layer.table.numpy()[2:5])


def test_shared_embedding_scales_and_projects():
    layer = SharedEmbedding(vocab_size=7, d_model=4)
    layer.build(None)
    table = layer.embeddings.numpy()
    ids = np.array([[3, 1, 0]])
    embedded = layer(ids).numpy()
    assert_close(embedded[0, :2], table[[3, 1]] * 2.0)  # sqrt(4) = 2
    np.testing.assert_array_equal(embedded[0, 2], 0.0)  # padding embeds to zeros
    x = np.random.default_rng(0).normal(size=(1, 2, 4)).astype(np.float32)
    assert_close(layer.logits(x), x.astype(np.float64) @ table.T.astype(np.float64))


def test_feed_forward_is_keras_dense_on_its_input_without_tensordot():
    """The layer runs its two Dense layers on the 2-D view of its input: the same numbers, bit
    for bit, as Keras' Dense on the 3-D input (a `tf.tensordot`), and a traced call holds none
    of tensordot's shape arithmetic."""
    import tensorflow as tf

    layer = FeedForward(d_model=6, d_ff=10)
    layer.build((None, None, 6))
    x = tf.constant(np.random.default_rng(1).normal(size=(2, 3, 6)), tf.float32)
    keras_dense = layer.output_dense(layer.hidden(x))
    np.testing.assert_array_equal(layer(x).numpy(), keras_dense.numpy())
    graph = tf.function(layer).get_concrete_function(tf.TensorSpec([None, None, 6])).graph
    types = {op.type for op in graph.get_operations()}
    assert "MatMul" in types and not types & {"Transpose", "GatherV2", "Prod"}
