import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.model.layers import MultiHeadAttention, attention_mask, padding_mask

from conftest import assert_close
from numpy_reference import multi_head_attention


def _weights(layer):
    return [
        layer.query_dense.kernel.numpy(),
        layer.key_dense.kernel.numpy(),
        layer.value_dense.kernel.numpy(),
        layer.output_dense.kernel.numpy(),
    ]


@pytest.mark.parametrize("key_dim,value_dim", [(4, 4), (2, 6)])
@pytest.mark.parametrize("masked", [False, True])
def test_attention_matches_numpy(key_dim, value_dim, masked):
    rng = np.random.default_rng(0)
    layer = MultiHeadAttention(d_model=8, num_heads=3, key_dim=key_dim, value_dim=value_dim)
    layer.build((None, None, 8))
    query = rng.normal(size=(2, 5, 8)).astype(np.float32)
    memory = rng.normal(size=(2, 7, 8)).astype(np.float32)
    ids = np.array([[3, 4, 5, 6, 7, 0, 0], [3, 4, 0, 0, 0, 0, 0]])
    mask = attention_mask(5, padding_mask(ids)).numpy() if masked else None
    out = layer(query, memory, attention_mask=mask)
    expected = multi_head_attention(
        query.astype(np.float64), memory.astype(np.float64), *_weights(layer), mask=mask
    )
    assert_close(out, expected)


def test_masked_keys_get_no_weight():
    layer = MultiHeadAttention(d_model=8, num_heads=2, key_dim=4, value_dim=4)
    layer.build((None, None, 8))
    memory = np.random.default_rng(1).normal(size=(1, 4, 8)).astype(np.float32)
    mask = attention_mask(3, tf.constant([[True, True, False, False]]))
    weights = layer.attention_weights(memory[:, :3], memory, attention_mask=mask).numpy()
    np.testing.assert_array_equal(weights[..., 2:], 0.0)
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-6)


def test_causal_mask_literal():
    mask = attention_mask(3, tf.constant([[True, True, True, False]]), causal=True).numpy()
    expected = np.array([[[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0]]], bool)
    np.testing.assert_array_equal(mask, expected)
    offset = attention_mask(1, tf.ones([1, 4], tf.bool), causal=True, query_offset=2).numpy()
    np.testing.assert_array_equal(offset, [[[1, 1, 1, 0]]])


def test_incremental_cache_equals_full_self_attention():
    rng = np.random.default_rng(2)
    layer = MultiHeadAttention(d_model=8, num_heads=2, key_dim=4, value_dim=4)
    layer.build((None, None, 8))
    x = rng.normal(size=(2, 5, 8)).astype(np.float32)
    full = layer(x, attention_mask=attention_mask(5, tf.ones([2, 5], tf.bool), causal=True))
    cache = layer.empty_cache(2)
    steps = []
    for i in range(5):
        assert cache["key"].shape == (2, 2, i, 4)  # the positions before i
        out, cache = layer(x[:, i : i + 1], cache=cache, decode_index=i)
        steps.append(out.numpy())
    assert np.abs(np.concatenate(steps, 1) - full.numpy()).max() < 1e-5


def test_a_decoding_step_traces_no_shape_arithmetic():
    """A traced decoding position, whose query has one position, reshapes by constants: its
    only concatenations are the cache's growth (keys and values), none of them shapes."""
    layer = MultiHeadAttention(d_model=8, num_heads=2, key_dim=4, value_dim=6)
    layer.build((None, None, 8))
    cache = {name: tf.TensorSpec([None, 2, None, dim]) for name, dim in (("key", 4), ("value", 6))}
    step = tf.function(lambda query, cache, i: layer(query, cache=cache, decode_index=i))
    graph = step.get_concrete_function(tf.TensorSpec([None, 1, 8]), cache, 0).graph
    types = [op.type for op in graph.get_operations()]
    assert types.count("ConcatV2") == 2 and types.count("MatMul") == 4


@pytest.mark.parametrize("fixed, kind", [(True, "buffer"), ("in_place", "slots")])
@pytest.mark.parametrize("compiled", [False, True])
def test_fixed_length_cache_equals_full_self_attention(fixed, kind, compiled):
    """The fixed-length cache (XLA's shapes) is written one position per step, by a `tf.where`
    over the buffer or in place, and attends to the positions written so far only: zeros in the
    rest of the buffer must not leak into the softmax. The same in a graph and under XLA."""
    rng = np.random.default_rng(4)
    layer = MultiHeadAttention(d_model=8, num_heads=2, key_dim=4, value_dim=6)
    layer.build((None, None, 8))
    x = rng.normal(size=(2, 5, 8)).astype(np.float32)
    full = layer(x, attention_mask=attention_mask(5, tf.ones([2, 5], tf.bool), causal=True))
    cache = layer.empty_cache(2, max_length=7, fixed=fixed)
    position = tf.function(
        lambda query, cache, i: layer(query, cache=cache, decode_index=i), jit_compile=compiled
    )
    steps = []
    for i in range(5):
        out, cache = position(x[:, i : i + 1], cache, tf.constant(i))
        assert sorted(cache) == [f"key_{kind}", f"value_{kind}"]
        assert cache[f"key_{kind}"].shape == (2, 2, 7, 4)
        assert cache[f"value_{kind}"].shape == (2, 2, 7, 6)
        steps.append(out.numpy())
    assert np.abs(np.concatenate(steps, 1) - full.numpy()).max() < 1e-5
    # Positions 5 and 6 were never written.
    np.testing.assert_array_equal(cache[f"key_{kind}"].numpy()[:, :, 5:], 0.0)
    assert np.abs(cache[f"key_{kind}"].numpy()[:, :, :5]).min() > 0.0


def test_grouped_queries_over_shared_memory_equal_tiled_memory():
    """Decoding keeps one copy of the encoder's keys/values per sentence for all its beams: b * g
    query rows over b memories must equal ordinary attention over the memory tiled g times."""
    rng = np.random.default_rng(3)
    layer = MultiHeadAttention(d_model=8, num_heads=2, key_dim=4, value_dim=6)
    layer.build((None, None, 8))
    memory = rng.normal(size=(2, 5, 8)).astype(np.float32)
    queries = rng.normal(size=(6, 2, 8)).astype(np.float32)  # 2 sentences x 3 beams, 2 positions
    key_mask = tf.constant([[True, True, True, False, False], [True] * 5])
    mask = attention_mask(2, key_mask)  # --> [2, 2, 5]
    tiled = layer(queries, np.repeat(memory, 3, axis=0), attention_mask=tf.repeat(mask, 3, 0))
    shared = layer(queries, attention_mask=mask, cache=layer.project_memory_heads(memory))
    assert np.abs(shared.numpy() - tiled.numpy()).max() < 1e-5
