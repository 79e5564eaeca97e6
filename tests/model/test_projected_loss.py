"""The training step's fast loss, `projected_cross_entropy` (the pre-softmax product inside the
loss's gradient), against its slow path: the same product and `label_smoothed_cross_entropy`
apart, differentiated by the tape, and against the model's own logits."""

import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.hparams import get_hparams
from t2t_lite.model.losses import label_smoothed_cross_entropy, projected_cross_entropy
from t2t_lite.model.transformer import Transformer
from t2t_lite.runtime.precision import onednn_enabled
from t2t_lite.train.step import training_stats

TOKENS, D_MODEL, VOCAB = (2, 29), 48, 500


def _inputs(dtype):
    rng = np.random.default_rng(4)
    hidden = tf.cast(rng.normal(size=(*TOKENS, D_MODEL)), dtype)
    matrix = tf.Variable(rng.normal(size=(VOCAB, D_MODEL)).astype(np.float32) * 0.6)
    targets = rng.integers(1, VOCAB, size=TOKENS)
    targets[1, 21:] = 0
    targets[0, 3] = targets[0, 4] = 17  # one id twice: its reference terms add up
    return hidden, matrix, tf.constant(targets)


def _both(dtype, label_smoothing, on_smoothed, on_nll, matrix_gradient=True):
    """(smoothed, nll, d hidden, d matrix) of the fast and of the slow path."""
    hidden, matrix, targets = _inputs(dtype)
    results = []
    for fast in (True, False):
        with tf.GradientTape() as tape:
            tape.watch(hidden)
            rows = tf.cast(matrix, dtype)
            if fast:
                smoothed, nll, _ = projected_cross_entropy(
                    hidden, rows, targets, label_smoothing, matrix_gradient
                )
            else:
                logits = tf.cast(tf.einsum("btd,vd->btv", hidden, rows), tf.float32)
                smoothed, nll, _ = label_smoothed_cross_entropy(logits, targets, label_smoothing)
            total = on_smoothed * smoothed + on_nll * nll
        d_hidden, d_matrix = tape.gradient(total, [hidden, matrix])
        assert d_hidden.dtype == hidden.dtype and d_matrix.dtype == tf.float32
        results.append(
            [float(smoothed), float(nll)]
            + [tf.cast(g, tf.float32).numpy() for g in (d_hidden, d_matrix)]
        )
    return results


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
@pytest.mark.parametrize("on_smoothed,on_nll", [(1.0, 0.0), (0.0, 1.0), (2.0, -3.0)])
def test_float32_equals_the_tape_through_the_logits(label_smoothing, on_smoothed, on_nll):
    fast, slow = _both(tf.float32, label_smoothing, on_smoothed, on_nll)
    np.testing.assert_allclose(fast[:2], slow[:2], rtol=1e-5)
    for got, expected in zip(fast[2:], slow[2:], strict=True):
        assert np.abs(expected).max() > 0.5
        np.testing.assert_allclose(got, expected, atol=1e-5 * np.abs(expected).max())
    assert not fast[2][1, 21:].any()  # padding gets no gradient


@pytest.mark.skipif(
    not onednn_enabled(),
    reason="without oneDNN (an AVX2-only CPU) TensorFlow's bfloat16 products are coarser than "
    "one rounding of their float32 sums, and precision=auto keeps float32 there",
)
def test_bfloat16_is_within_its_rounding_of_the_tape():
    # The products take bfloat16 inputs in both paths; the fast path's softmax comes out in
    # bfloat16 from the logits, the slow path's gradient is cast to bfloat16 after it.
    fast, slow = _both(tf.bfloat16, 0.1, 1.0, 0.5)
    np.testing.assert_allclose(fast[:2], slow[:2], rtol=1e-4)
    for got, expected in zip(fast[2:], slow[2:], strict=True):
        np.testing.assert_allclose(got, expected, atol=1e-2 * np.abs(expected).max())


def test_a_frozen_matrix_gets_zeros_and_the_same_hidden_gradient():
    fast, slow = _both(tf.float32, 0.1, 1.0, 0.0, matrix_gradient=False)
    assert not fast[3].any() and np.abs(slow[3]).max() > 0.5
    np.testing.assert_allclose(fast[2], slow[2], atol=1e-5 * np.abs(slow[2]).max())


def test_a_bfloat16_model_gives_the_same_loss_and_gradients_as_through_its_logits():
    # A parsing-style model: the output vocabulary is the first 40 ids of the shared embedding.
    # training_stats takes the fast path in bfloat16 without XLA, the logits otherwise.
    hparams = get_hparams("transformer_tiny", "label_smoothing=0.1,precision=mixed_bfloat16")
    model = Transformer.from_hparams(hparams, vocab_size=90, output_vocab_size=40)
    model.build()
    assert model.compute_dtype == "bfloat16"
    rng = np.random.default_rng(5)
    batch = {
        "inputs": tf.constant(rng.integers(1, 90, (3, 11)), tf.int32),
        "targets": tf.constant(np.where(np.arange(9) < 7, rng.integers(1, 40, (3, 9)), 0)),
    }
    results = []
    for jit_compile in (False, True):  # the fast path, and the logits (run here without XLA)
        with tf.GradientTape() as tape:
            stats = training_stats(model, batch, 0.1, jit_compile=jit_compile)
        grads = tape.gradient(stats.smoothed_sum, model.trainable_variables)
        results.append((stats, [tf.convert_to_tensor(g).numpy() for g in grads]))
    (fast, fast_grads), (slow, slow_grads) = results
    np.testing.assert_allclose(fast.vector().numpy(), slow.vector().numpy(), rtol=1e-4)
    largest = max(np.abs(g).max() for g in slow_grads)
    for got, expected in zip(fast_grads, slow_grads, strict=True):
        np.testing.assert_allclose(got, expected, atol=2e-2 * largest)
    # Not vacuous: the embedding's gradient (logits and lookups) is there in both.
    assert np.abs(slow_grads[0]).max() > 0.1 * largest
