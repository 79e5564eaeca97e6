"""LoRA on the Transformer (t2t_lite.model.lora): which projections are adapted, the trainable
weights of a rank-r adapter against the formula, the adapter's weights apart from the base's,
and merging, held to the unmerged model's logits."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.hparams import get_hparams
from t2t_lite.model import Transformer, lora

LAYERS = "num_encoder_layers=1,num_decoder_layers=1"  # d_model 64, 4 heads, d_ff 256
VOCAB = 13


def _model(seed: int = 3, overrides: str = LAYERS) -> Transformer:
    keras.utils.set_random_seed(seed)
    model = Transformer.from_hparams(get_hparams("transformer_tiny", overrides), VOCAB)
    model.build()
    return model


def _randomize_adapter(model: Transformer, seed: int = 5) -> None:
    """B is zero in a new adapter; random A and B make the adapter change the outputs."""
    rng = np.random.default_rng(seed)
    for variable in lora.adapter_weights(model).weights:
        variable.assign(rng.normal(0.0, 0.05, variable.shape).astype(np.float32))


def _features(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    inputs = rng.integers(3, VOCAB, size=(4, 7)).astype(np.int32)
    inputs[1, 4:] = 0  # padding
    targets = rng.integers(3, VOCAB, size=(4, 6)).astype(np.int32)
    return {"inputs": tf.constant(inputs), "targets": tf.constant(targets)}


def test_the_attention_and_feed_forward_projections_are_adapted():
    names = [name for name, _ in lora.adapted_layers(_model())]
    # per layer: FFN hidden and output, then q, k, v, o of each attention
    assert len(names) == 6 + 10
    assert names[:6] == [
        "encoder/layer_0/feed_forward/hidden",
        "encoder/layer_0/feed_forward/output",
        "encoder/layer_0/self_attention/query",
        "encoder/layer_0/self_attention/key",
        "encoder/layer_0/self_attention/value",
        "encoder/layer_0/self_attention/output",
    ]
    assert not any("embedding" in name for name in names)
    assert names == [name for name, _ in lora.adapted_layers(_model(seed=4))]  # stable names


@pytest.mark.parametrize("rank", [1, 4, 8])
def test_trainable_weights_of_a_rank_r_adapter_are_the_formula(rank):
    model = _model()
    lora.enable(model, rank)
    trainable = sum(int(np.prod(w.shape)) for w in model.trainable_variables)
    # Dense [in, out] and the attention output [h, d, d_model]: r * (in + out); a query, key or
    # value kernel [d_model, h, d] has Keras' per-head A [d_model, h, r] and B [r, d].
    ffn = 2 * rank * (64 + 256)
    qkv, output = rank * (64 * 4 + 16), rank * (4 * 16 + 64)
    attentions = 1 + 2  # encoder self; decoder self and cross
    expected = 2 * ffn + attentions * (3 * qkv + output)
    assert trainable == expected == lora.adapter_size(model, rank)
    assert rank * 16_448 // 4 == expected  # the rank-4 figure, 16,448 weights
    assert {id(w) for w in model.trainable_variables} == {
        id(w) for w in lora.adapter_weights(model).weights
    }


def test_a_new_adapter_changes_nothing_and_the_base_identity_ignores_it():
    model = _model()
    before = model(_features()).numpy()
    identity = lora.weights_sha256(model)
    lora.enable(model, 4)
    assert lora.is_adapted(model)
    np.testing.assert_array_equal(model(_features()).numpy(), before)  # B starts at zero
    _randomize_adapter(model)
    assert lora.weights_sha256(model) == identity  # the base's, adapter or not
    assert lora.weights_sha256(_model(seed=4)) != identity


def test_merged_model_gives_the_adapted_models_logits():
    model = _model()
    lora.enable(model, 4, alpha=8.0)
    _randomize_adapter(model)
    features = _features()
    adapted = model(features).numpy()
    base_delta = np.abs(adapted - _model()(features).numpy()).max()
    lora.merge(model)
    assert not lora.is_adapted(model)
    assert len(model.weights) == len(_model().weights)  # the LoRA variables are gone
    merged = model(features).numpy()
    np.testing.assert_allclose(merged, adapted, atol=1e-4, rtol=1e-4)
    np.testing.assert_array_equal(merged.argmax(-1), adapted.argmax(-1))
    assert base_delta > 1e-2  # the adapter mattered


def test_rank_must_be_positive():
    with pytest.raises(ValueError, match="--lora_rank must be positive, got 0"):
        lora.enable(_model(), 0)
