import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.model.layers import Encoder, EncoderLayer, attention_mask

from conftest import assert_close
from numpy_reference import feed_forward, layer_norm, multi_head_attention

KWARGS = dict(d_model=8, num_heads=2, d_ff=12, key_dim=4, value_dim=4, dropout=0.0)


def _numpy_encoder_layer(layer, x, mask, norm_position):
    attn = layer.self_attention
    w = [
        v.numpy().astype(np.float64)
        for v in (
            attn.query_dense.kernel,
            attn.key_dense.kernel,
            attn.value_dense.kernel,
            attn.output_dense.kernel,
        )
    ]
    ffn = [
        v.numpy().astype(np.float64)
        for v in (
            layer.feed_forward.hidden.kernel,
            layer.feed_forward.hidden.bias,
            layer.feed_forward.output_dense.kernel,
            layer.feed_forward.output_dense.bias,
        )
    ]

    def norm(which, y):
        return layer_norm(y, which.gamma.numpy(), which.beta.numpy(), 1e-6)

    if norm_position == "post":  # LayerNorm(x + Sublayer(x)), section 3.1
        x = norm(layer.self_attention_norm, x + multi_head_attention(x, x, *w, mask=mask))
        return norm(layer.feed_forward_norm, x + feed_forward(x, *ffn))
    y = norm(layer.self_attention_norm, x)
    x = x + multi_head_attention(y, y, *w, mask=mask)
    return x + feed_forward(norm(layer.feed_forward_norm, x), *ffn)


@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_encoder_layer_matches_numpy(norm_position):
    layer = EncoderLayer(**KWARGS, norm_position=norm_position)
    layer.build((None, None, 8))
    rng = np.random.default_rng(0)
    # Non-trivial LayerNorm parameters, so that a swapped gamma/beta would show.
    for norm in (layer.self_attention_norm, layer.feed_forward_norm):
        norm.gamma.assign(rng.uniform(0.5, 1.5, size=8))
        norm.beta.assign(rng.normal(size=8))
    x = rng.normal(size=(2, 4, 8)).astype(np.float32)
    mask = attention_mask(
        4, tf.constant([[True, True, True, False], [True, True, False, False]])
    ).numpy()
    expected = _numpy_encoder_layer(layer, x.astype(np.float64), mask, norm_position)
    assert_close(layer(x, attention_mask=mask), expected)


@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_padded_positions_never_change_real_outputs(norm_position):
    encoder = Encoder(
        2,
        **KWARGS,
        attention_dropout=0.0,
        relu_dropout=0.0,
        norm_position=norm_position,
        layer_norm_epsilon=1e-6,
    )
    encoder.build((None, None, 8))
    rng = np.random.default_rng(1)
    key_mask = tf.constant([[True, True, True, False, False]])
    mask = attention_mask(5, key_mask)
    x = rng.normal(size=(1, 5, 8)).astype(np.float32)
    changed = x.copy()
    changed[:, 3:] = rng.normal(size=(1, 2, 8)) * 100
    out, out_changed = encoder(x, attention_mask=mask), encoder(changed, attention_mask=mask)
    np.testing.assert_allclose(out[:, :3], out_changed[:, :3], atol=1e-6)
    assert np.abs(out[:, 3:] - out_changed[:, 3:]).max() > 1e-3  # the padding itself did change
