import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.hparams import get_hparams
from t2t_lite.model.layers import attention_mask, padding_mask
from t2t_lite.model.quantize import one_garbage_collection
from t2t_lite.model.transformer import Transformer

INPUTS = np.array([[5, 6, 7, 8, 1, 0], [9, 10, 1, 0, 0, 0]], np.int32)
TARGETS = np.array([[11, 12, 13, 1, 0], [14, 1, 0, 0, 0]], np.int32)


def _model(**overrides):
    hparams = get_hparams("transformer_tiny").replace(**overrides)
    model = Transformer.from_hparams(hparams, vocab_size=20)
    model.build()
    return model


def test_future_targets_never_change_earlier_outputs():
    model = _model()
    logits = model({"inputs": INPUTS, "targets": TARGETS}).numpy()
    for position in range(TARGETS.shape[1]):
        changed = TARGETS.copy()
        changed[:, position:] = (changed[:, position:] + 3) % 20 + 1
        other = model({"inputs": INPUTS, "targets": changed}).numpy()
        # The logits at `position` read targets < position only (shifted right).
        np.testing.assert_allclose(other[:, : position + 1], logits[:, : position + 1], atol=1e-5)
        if position + 1 < TARGETS.shape[1]:
            assert np.abs(other[:, position + 1 :] - logits[:, position + 1 :]).max() > 1e-4


def test_extra_source_padding_changes_nothing():
    model = _model()
    logits = model({"inputs": INPUTS, "targets": TARGETS})
    padded = np.pad(INPUTS, [[0, 0], [0, 7]])
    np.testing.assert_allclose(model({"inputs": padded, "targets": TARGETS}), logits, atol=1e-5)


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"norm_position": "pre"},
        {"position_encoding": "learned"},
        {"position_encoding": "sinusoid_concat", "shared_embeddings": False, "d_k": 8, "d_v": 24},
    ],
)
def test_cached_decoding_equals_teacher_forcing(overrides):
    model = _model(**overrides)
    full = model({"inputs": INPUTS, "targets": TARGETS}).numpy()
    memory, mask = model.encode(INPUTS)
    state = model.project_memory(memory, mask)
    cache = model.init_cache(INPUTS.shape[0], max_length=TARGETS.shape[1])
    previous = np.pad(TARGETS, [[0, 0], [1, 0]])[:, :-1]  # id 0 starts decoding

    @tf.function
    def step(ids, index, cache):
        return model.decode_step(ids, index, cache, state)

    steps = []
    for i in range(TARGETS.shape[1]):
        logits, cache = step(previous[:, i], tf.constant(i), cache)
        steps.append(logits.numpy())
    assert np.abs(np.stack(steps, 1) - full).max() < 1e-5


def test_dropout_only_in_training():
    model = _model(dropout=0.5)
    features = {"inputs": INPUTS, "targets": TARGETS}
    np.testing.assert_array_equal(model(features), model(features))
    assert np.abs(model(features, training=True) - model(features)).max() > 1e-3


def test_model_config_round_trip():
    model = _model(norm_position="pre")
    clone = Transformer.from_config(model.get_config())
    clone.build()
    clone.set_weights(model.get_weights())
    assert clone.get_config() == model.get_config()
    features = {"inputs": INPUTS, "targets": TARGETS}
    np.testing.assert_allclose(clone(features), model(features), rtol=1e-6)


@pytest.mark.parametrize("precision", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_keeps_float32_variables_and_logits(precision):
    model = _model(precision=precision)
    logits = model({"inputs": INPUTS, "targets": TARGETS})
    assert logits.dtype == tf.float32
    assert all(v.dtype == "float32" for v in model.weights)
    reference = _model()
    reference.set_weights(model.get_weights())
    full = reference({"inputs": INPUTS, "targets": TARGETS})
    assert np.abs(logits - full).max() < 0.1 * np.abs(full).max()


def test_output_vocab_size_keeps_the_first_logits():
    """A model restricted to the first k ids (parsing's target symbols) computes exactly the
    first k logits of the unrestricted model with the same weights, teacher-forced and cached."""
    full = _model(norm_position="pre")
    limited = Transformer.from_config({**full.get_config(), "output_vocab_size": 7})
    limited.build()
    limited.set_weights(full.get_weights())
    features = {"inputs": INPUTS, "targets": TARGETS % 7}
    expected = full(features).numpy()[..., :7]
    np.testing.assert_allclose(limited(features), expected, rtol=1e-5, atol=1e-6)
    memory, mask = limited.encode(INPUTS)
    state = limited.project_memory(memory, mask)
    cache = limited.init_cache(INPUTS.shape[0], TARGETS.shape[1])
    logits, _ = limited.decode_step(tf.zeros([INPUTS.shape[0]], tf.int32), 0, cache, state)
    np.testing.assert_allclose(logits, expected[:, 0], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="output_vocab_size=21"):
        Transformer(20, output_vocab_size=21)


def test_int8_quantization_reaches_every_projection():
    """Keras' `Model.quantize` swaps the kernels of the Dense / EinsumDense sub-layers; the model
    uses them (the attention calls its projection layers), so its logits move, a little."""
    model = _model()
    features = {"inputs": INPUTS, "targets": TARGETS}
    full = model(features).numpy()
    # The layers without a quantized form say so; Keras collects garbage at every kernel it
    # swaps, once at the end here (as t2t_lite's quantize_model does).
    with warnings.catch_warnings(), one_garbage_collection():
        warnings.simplefilter("ignore")
        model.quantize("int8")
    int8 = [w.path for w in model.weights if w.dtype == "int8"]
    # Per encoder layer 4 attention + 2 feed-forward kernels, per decoder layer 8 + 2, and the
    # shared embedding (its lookups and the logits; per-row scales).
    assert len(int8) == 2 * 6 + 2 * 10 + 1, int8
    assert any(path.endswith("shared_embedding/embeddings") for path in int8)
    quantized = model(features).numpy()
    error = np.abs(quantized - full).max() / np.abs(full).max()
    assert 0 < error < 0.1


@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_attention_maps_come_with_the_stacks_own_outputs(norm_position):
    """Encoder and Decoder `attention_maps` return what their call returns (final pre-norm
    LayerNorm included) beside one [batch, heads, query, key] map per layer."""
    model = _model(norm_position=norm_position)
    maps = model.attention_maps(INPUTS, TARGETS)
    batch, source, target = INPUTS.shape[0], INPUTS.shape[1], TARGETS.shape[1]
    heads, layers = model.get_config()["num_heads"], model.num_encoder_layers
    assert [np.shape(m) for m in maps["encoder"]] == [(batch, heads, source, source)] * layers
    assert [np.shape(m) for m in maps["decoder_cross"]] == [(batch, heads, target, source)] * 2
    self_maps = np.stack(maps["decoder_self"])  # --> [layers, batch, heads, target, target]
    np.testing.assert_array_equal(np.triu(self_maps, k=1), 0.0)  # causal
    x = model.positions(model.embedding(INPUTS))
    mask = attention_mask(source, padding_mask(INPUTS))
    memory, _ = model.encoder.attention_maps(x, mask)
    np.testing.assert_allclose(memory, model.encoder(x, attention_mask=mask), atol=1e-6)
    y = model.positions(model.embedding(np.pad(TARGETS, [[0, 0], [1, 0]])[:, :-1]))
    self_mask = attention_mask(target, tf.ones_like(TARGETS, tf.bool), causal=True)
    cross_mask = attention_mask(target, padding_mask(INPUTS))
    output, _, _ = model.decoder.attention_maps(y, memory, self_mask, cross_mask)
    expected = model.decoder(y, memory, self_mask, cross_mask)
    np.testing.assert_allclose(output, expected, atol=1e-6)


def test_keras_file_round_trip(tmp_path):
    """Registered layers and a flat config let Keras' own `.keras` format rebuild the model."""
    model = _model(norm_position="pre", shared_embeddings=False)
    features = {"inputs": INPUTS, "targets": TARGETS}
    model.save(tmp_path / "model.keras")
    loaded = keras.models.load_model(tmp_path / "model.keras")
    assert type(loaded) is Transformer and loaded.get_config() == model.get_config()
    np.testing.assert_array_equal(loaded(features), model(features))


def test_the_model_takes_plain_arguments_and_no_training_settings():
    """The model's config is the fields it reads (keras-hub's contract): the same model from plain
    arguments and from a named set, no learning rate, batch or schedule in it, and a config
    written before (the set's HParams fields, flat) still builds the same model."""
    hparams = get_hparams("transformer_tiny", "d_k=12,norm_position=pre,shared_embeddings=false")
    from_set = Transformer.from_hparams(hparams, vocab_size=20)
    plain = Transformer(
        20, num_encoder_layers=2, num_decoder_layers=2, d_model=64, num_heads=4, d_ff=256,
        key_dim=12, value_dim=16, dropout=hparams.dropout, norm_position="pre",
        shared_embeddings=False, max_positions=hparams.max_positions,
        position_encoding=hparams.position_encoding, layer_norm_epsilon=hparams.layer_norm_epsilon,
        attention_dropout=hparams.attention_dropout, relu_dropout=hparams.relu_dropout,
    )  # fmt: skip
    config = from_set.get_config()
    assert {k: v for k, v in plain.get_config().items() if k != "name"} == {
        k: v for k, v in config.items() if k != "name"
    }
    training = {"learning_rate", "batch_size", "warmup_steps", "label_smoothing", "adam_beta1",
                "learning_rate_schedule", "train_steps", "precision", "d_k", "d_v"}  # fmt: skip
    assert not training & set(config), sorted(training & set(config))
    from_set.build()
    legacy = {**hparams.to_dict(), "vocab_size": 20, "output_vocab_size": 0, "name": "old"}
    old = Transformer.from_config(legacy)
    assert {k: v for k, v in old.get_config().items() if k != "name"} == {
        k: v for k, v in config.items() if k != "name"
    }
    old.build()
    old.set_weights(from_set.get_weights())  # the same variables, in the same order
    features = {"inputs": INPUTS, "targets": TARGETS}
    np.testing.assert_array_equal(old(features), from_set(features))
