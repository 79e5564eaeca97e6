"""Every layer's config round-trips and the rebuilt layer computes the same function."""

import numpy as np
import pytest

from t2t_lite.model.layers import (
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    FeedForward,
    MultiHeadAttention,
    PositionalEncoding,
    SharedEmbedding,
)

LAYER_KWARGS = dict(
    d_model=8,
    num_heads=2,
    d_ff=16,
    key_dim=3,
    value_dim=5,
    dropout=0.1,
    attention_dropout=0.1,
    relu_dropout=0.1,
    norm_position="pre",
    layer_norm_epsilon=1e-6,
)

CASES = [
    (
        MultiHeadAttention,
        dict(d_model=8, num_heads=2, key_dim=3, value_dim=5, attention_dropout=0.1),
        4,
    ),
    (FeedForward, dict(d_model=8, d_ff=16, relu_dropout=0.1), 4),
    (SharedEmbedding, dict(vocab_size=11, d_model=8), 1),
    (PositionalEncoding, dict(kind="learned", d_model=8, max_positions=9), 1),
    (PositionalEncoding, dict(kind="sinusoid", d_model=8, max_positions=9), 0),
    (EncoderLayer, LAYER_KWARGS, 4 + 4 + 4),
    (DecoderLayer, LAYER_KWARGS, 4 + 4 + 4 + 6),
    (Encoder, dict(num_layers=2, layer_kwargs=LAYER_KWARGS), 2 * 12 + 2),
    (Decoder, dict(num_layers=2, layer_kwargs=LAYER_KWARGS), 2 * 18 + 2),
]


def _call(layer, ids_or_x):
    if isinstance(layer, DecoderLayer | Decoder):
        return layer(ids_or_x, ids_or_x)
    return layer(ids_or_x)


@pytest.mark.parametrize("cls,kwargs,num_weights", CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_config_round_trip(cls, kwargs, num_weights):
    layer = cls(**kwargs, name="original")
    layer.build((None, None, 8))
    config = layer.get_config()
    clone = cls.from_config(config)
    clone.build((None, None, 8))
    assert clone.get_config() == config
    assert len(layer.weights) == len(clone.weights) == num_weights
    clone.set_weights(layer.get_weights())
    if cls is SharedEmbedding:
        inputs = np.array([[1, 2, 3]])
    else:
        inputs = np.random.default_rng(0).normal(size=(2, 3, 8)).astype(np.float32)
    np.testing.assert_allclose(_call(layer, inputs), _call(clone, inputs), rtol=1e-6)
