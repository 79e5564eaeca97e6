"""Every registered t2t_lite layer keeps the Keras 3 layer contract (layer_test_case.py)."""

import numpy as np
import pytest
import tensorflow as tf
from layer_test_case import check_layer_contract, registered_layer_classes

import t2t_lite.model  # noqa: F401  (registers every layer)
from t2t_lite.hparams import get_hparams
from t2t_lite.model import Transformer
from t2t_lite.model.layers import (
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    FeedForward,
    MultiHeadAttention,
    PositionalEncoding,
    SharedEmbedding,
    attention_mask,
    padding_mask,
)

D = 8
BLOCK = dict(
    d_model=D,
    num_heads=2,
    d_ff=16,
    key_dim=3,
    value_dim=5,
    dropout=0.1,
    attention_dropout=0.1,
    relu_dropout=0.1,
    layer_norm_epsilon=1e-6,
)
SOURCE_IDS = np.array([[3, 4, 5, 1, 0], [6, 1, 0, 0, 0]], np.int32)  # [batch 2, source 5]
TARGET_IDS = np.array([[7, 8, 1], [9, 1, 0]], np.int32)  # [batch 2, target 3]
ATTENTION, FFN, NORM = 4, 4, 2  # weights of one MultiHeadAttention, FeedForward, LayerNorm
ENCODER_LAYER = ATTENTION + NORM + FFN + NORM
DECODER_LAYER = 2 * (ATTENTION + NORM) + FFN + NORM


def _x(length: int, seed: int = 0) -> np.ndarray:
    """[batch 2, length, D] float32 sample inputs."""
    return np.random.default_rng(seed).normal(size=(2, length, D)).astype(np.float32)


def _masks() -> dict:
    """Encoder, decoder self- and encoder-decoder masks of SOURCE_IDS / TARGET_IDS."""
    source = padding_mask(SOURCE_IDS)
    return dict(
        encoder=attention_mask(5, source),
        self_mask=attention_mask(3, tf.ones([2, 3], tf.bool), causal=True),
        cross_mask=attention_mask(3, source),
    )


# (class, id, factory --> (layer, args, kwargs), number of weights)
CASES = [
    (
        MultiHeadAttention,
        "self",
        lambda: (MultiHeadAttention(D, 2, 3, 5), (_x(5),), {"attention_mask": _masks()["encoder"]}),
        ATTENTION,
    ),
    (
        MultiHeadAttention,
        "cross",
        lambda: (
            MultiHeadAttention(D, 2),
            (_x(3), _x(5, 1)),
            {"attention_mask": _masks()["cross_mask"]},
        ),
        ATTENTION,
    ),
    (FeedForward, "", lambda: (FeedForward(D, 16, relu_dropout=0.1), (_x(3),), {}), FFN),
    (SharedEmbedding, "", lambda: (SharedEmbedding(11, D), (SOURCE_IDS,), {}), 1),
    *[
        (
            PositionalEncoding,
            kind,
            lambda kind=kind: (PositionalEncoding(kind, D, 9), (_x(3),), {"start_index": 2}),
            1 if kind == "learned" else 0,
        )
        for kind in ("sinusoid", "sinusoid_concat", "learned")
    ],
    *[
        case
        for norm in ("post", "pre")
        for case in (
            (
                EncoderLayer,
                norm,
                lambda norm=norm: (
                    EncoderLayer(**BLOCK, norm_position=norm),
                    (_x(5),),
                    {"attention_mask": _masks()["encoder"]},
                ),
                ENCODER_LAYER,
            ),
            (
                DecoderLayer,
                norm,
                lambda norm=norm: (
                    DecoderLayer(**BLOCK, norm_position=norm),
                    (_x(3), _x(5, 1)),
                    {"self_mask": _masks()["self_mask"], "cross_mask": _masks()["cross_mask"]},
                ),
                DECODER_LAYER,
            ),
            (
                Encoder,
                norm,
                lambda norm=norm: (
                    Encoder(2, **BLOCK, norm_position=norm),
                    (_x(5),),
                    {"attention_mask": _masks()["encoder"]},
                ),
                2 * ENCODER_LAYER + (NORM if norm == "pre" else 0),
            ),
            (
                Decoder,
                norm,
                lambda norm=norm: (
                    Decoder(2, **BLOCK, norm_position=norm),
                    (_x(3), _x(5, 1)),
                    {"self_mask": _masks()["self_mask"], "cross_mask": _masks()["cross_mask"]},
                ),
                2 * DECODER_LAYER + (NORM if norm == "pre" else 0),
            ),
        )
    ],
    (
        Transformer,
        "variant",
        lambda: (
            Transformer.from_hparams(
                get_hparams(
                    "transformer_tiny",
                    "d_model=8,d_ff=16,num_heads=2,d_k=3,d_v=5,norm_position=pre,"
                    "shared_embeddings=false,position_encoding=learned,max_positions=16",
                ),
                vocab_size=11,
                output_vocab_size=10,
            ),
            ({"inputs": SOURCE_IDS, "targets": TARGET_IDS},),
            {},
        ),
        # 2 embeddings, positions, encoder, decoder (2 layers each, final norms: pre-norm).
        2 + 1 + (2 * ENCODER_LAYER + NORM) + (2 * DECODER_LAYER + NORM),
    ),
]


@pytest.mark.parametrize(
    "factory,num_weights",
    [pytest.param(f, n, id=f"{cls.__name__}-{name}".rstrip("-")) for cls, name, f, n in CASES],
)
def test_layer_contract(factory, num_weights):
    layer, args, kwargs = factory()
    check_layer_contract(layer, args, kwargs, num_weights)


def test_every_registered_layer_has_a_case():
    """A layer registered under "t2t_lite" without a case above fails here."""
    assert registered_layer_classes() == {cls for cls, *_ in CASES}


def test_head_sizes_default_to_the_papers():
    layer = EncoderLayer(d_model=12, num_heads=3, d_ff=8)
    assert (layer.key_dim, layer.value_dim) == (4, 4)
    assert layer.get_config()["key_dim"] == 4
    with pytest.raises(ValueError, match="norm_position"):
        Decoder(1, d_model=8, num_heads=2, d_ff=8, norm_position="middle")


def test_every_layer_says_its_output_shape():
    """keras-hub's layers implement `compute_output_shape`; so does every t2t_lite layer below
    the model, and `check_layer_contract` holds it to the shape each call returns."""
    from layer_test_case import _own_output_shape

    layers = registered_layer_classes() - {Transformer}
    assert layers and all(_own_output_shape(cls) for cls in layers), [
        cls.__name__ for cls in layers if not _own_output_shape(cls)
    ]
    wrong = FeedForward(D, 16)
    wrong.compute_output_shape = lambda shape: (*shape[:-1], D + 1)  # a shape that lies
    with pytest.raises(AssertionError):
        check_layer_contract(wrong, (_x(3),), {}, FFN)
