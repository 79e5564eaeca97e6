"""The training step: accumulation and replicas give the same update as one big batch; a
non-finite gradient is caught before the update."""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf
from command_helpers import run_json
from train_helpers import SMOOTH_ADAM, FakeReverse, one_batch, padded_concat, step_once

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _single_device():
    return tf.distribute.MirroredStrategy(devices=["/cpu:0"])


def _numpy_smoothed_loss(weights, batch, eps=0.1) -> float:
    """Label-smoothed cross entropy per target token, in float64 from the model's logits."""
    from t2t_lite.hparams import get_hparams
    from t2t_lite.model.transformer import Transformer

    vocab = FakeReverse().vocab_size
    model = Transformer.from_hparams(get_hparams("transformer_tiny"), vocab)
    model.build()
    model.set_weights(weights)
    logits = model({k: tf.constant(v) for k, v in batch.items()}, training=False).numpy()
    logits = logits.astype(np.float64)
    log_probs = logits - np.log(np.sum(np.exp(logits), -1, keepdims=True))
    targets = batch["targets"]
    weights = (targets != 0).astype(np.float64)
    nll = -np.take_along_axis(log_probs, targets[..., None], -1)[..., 0]
    smoothed = (1 - eps) * nll - eps / (vocab - 1) * (log_probs.sum(-1) + nll)
    return float(np.sum(smoothed * weights) / np.sum(weights))


def test_accumulating_two_batches_equals_one_double_batch():
    problem = FakeReverse()
    # Unequal token counts: a plain mean of the two micro-batch means would differ.
    a, b = one_batch(problem, 0, 30, 9), one_batch(problem, 30, 9, 9)
    accumulated, deltas2, initial = step_once(
        _single_device(), SMOOTH_ADAM + ",accum_steps=2", [a, b]
    )
    single, deltas1, _ = step_once(_single_device(), SMOOTH_ADAM, [padded_concat(a, b)], initial)
    assert (
        accumulated["target_tokens"]
        == single["target_tokens"]
        == np.sum(np.concatenate([a["targets"], b["targets"]]) != 0)
    )
    assert abs(accumulated["loss"] - single["loss"]) < 1e-5
    # ... and that loss is the smoothed token losses' sum over all tokens: a NumPy reference
    # on the same weights (transformer_tiny has no dropout).
    assert abs(single["loss"] - _numpy_smoothed_loss(initial, padded_concat(a, b))) < 1e-5
    assert abs(accumulated["grad_norm"] - single["grad_norm"]) < 1e-5
    assert max(np.max(np.abs(x)) for x in deltas1) > 1e-3  # the step did move the weights
    for x, y in zip(deltas1, deltas2, strict=True):
        np.testing.assert_allclose(x, y, atol=1e-6)


def test_non_finite_gradient_is_not_applied():
    from t2t_lite.hparams import get_hparams
    from t2t_lite.train.step import Trainer

    strategy = _single_device()
    trainer = Trainer(get_hparams("transformer_tiny"), FakeReverse().vocab_size, strategy)
    weights = trainer.model.get_weights()
    weights[0][5, 0] = np.inf  # one embedding entry of a token the batch uses
    trainer.model.set_weights(weights)
    batch = one_batch(FakeReverse(), 0, 8, 9)
    iterator = iter(strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensors(batch)))
    result = trainer.train_step(iterator)
    assert not bool(result["finite"]) and not bool(result["applied"])
    assert int(trainer.optimizer.iterations.numpy()) == 0
    for before, after in zip(weights, trainer.model.get_weights(), strict=True):
        np.testing.assert_array_equal(before, after)


def test_two_replicas_equal_one_device_with_the_same_global_batch():
    result = run_json(os.path.join(TESTS, "train_helpers.py"), "mirrored")
    assert result["replicas"] == 2
    assert result["auto"] == "MirroredStrategy"  # --strategy=auto on two local devices
    assert result["two"]["target_tokens"] == result["one"]["target_tokens"]
    assert abs(result["two"]["loss"] - result["one"]["loss"]) < 1e-5
    assert abs(result["two"]["grad_norm"] - result["one"]["grad_norm"]) < 1e-5
    assert result["max_delta"] > 1e-3
    assert result["max_delta_diff"] < 1e-6
    assert result["two"]["copies"] == result["two_accum"]["copies"] == 2
    assert result["two"]["copies_diff"] == result["two_accum"]["copies_diff"] == 0.0
    # Per-replica accumulators (ON_READ variables) under two replicas: 2 replicas x 2 micro-batches
    # equal one device with the four batches in one.
    assert result["two_accum"]["target_tokens"] == result["one_all"]["target_tokens"]
    assert abs(result["two_accum"]["loss"] - result["one_all"]["loss"]) < 1e-5
    # The accumulated gradient is a sum over replicas and micro-batches in another order than one
    # device's, and it carried differences up to 9e-6 in one run (out of updates of max_delta,
    # above 1e-3) on a loaded machine; a dropped or double-counted micro-batch moves the update by
    # about max_delta itself.
    assert result["accum_delta_diff"] < 1e-4


def test_mixed_float16_scales_the_loss_and_skips_overflow():
    from t2t_lite.hparams import get_hparams
    from t2t_lite.train.step import Trainer

    strategy = _single_device()
    hparams = get_hparams("transformer_tiny", "precision=mixed_float16")
    trainer = Trainer(hparams, FakeReverse().vocab_size, strategy)
    assert trainer.model.compute_dtype == "float16"
    batch = one_batch(FakeReverse(), 0, 8, 9)
    dataset = tf.data.Dataset.from_tensors(batch).repeat()
    iterator = iter(strategy.experimental_distribute_dataset(dataset))
    first = trainer.train_step(iterator)
    assert bool(first["applied"]) and float(first["loss_scale"]) == 2.0**15
    assert np.isfinite(float(first["loss"])) and int(trainer.optimizer.iterations.numpy()) == 1
    weights = trainer.model.get_weights()
    weights[0][5, 0] = 6e4  # overflows float16 once scaled
    trainer.model.set_weights(weights)
    second = trainer.train_step(iterator)
    assert not bool(second["finite"]) and int(trainer.optimizer.iterations.numpy()) == 1
    assert float(trainer.optimizer.dynamic_scale.numpy()) == 2.0**14


def test_bfloat16_step_trains():
    from t2t_lite.hparams import get_hparams
    from t2t_lite.train.step import Trainer

    strategy = _single_device()
    trainer = Trainer(
        get_hparams("transformer_tiny", "precision=mixed_bfloat16"),
        FakeReverse().vocab_size,
        strategy,
    )
    assert trainer.model.compute_dtype == "bfloat16"
    assert trainer.model.trainable_variables[0].dtype == "float32"
    batch = one_batch(FakeReverse(), 0, 8, 9)
    iterator = iter(strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensors(batch)))
    result = trainer.train_step(iterator)
    assert bool(result["applied"]) and np.isfinite(float(result["loss"]))


def test_batch_stats_counts_correct_tokens_only_when_asked():
    from t2t_lite.train.step import batch_stats

    rng = np.random.default_rng(3)
    logits = rng.normal(size=(2, 5, 7)).astype(np.float32)
    targets = np.array([[3, 1, 4, 1, 0], [5, 2, 6, 0, 0]], np.int32)  # 0: padding
    logits[0, 0, 3] = logits[1, 1, 2] = 9.0  # two tokens certainly right
    batch = {"inputs": tf.constant(targets), "targets": tf.constant(targets)}
    with_accuracy = batch_stats(tf.constant(logits), batch, 0.1)
    without = batch_stats(tf.constant(logits), batch, 0.1, accuracy=False)
    right = (logits.argmax(-1) == targets) & (targets != 0)
    assert float(with_accuracy.correct_tokens) == right.sum() >= 2
    assert float(without.correct_tokens) == 0.0
    for field in ("smoothed_sum", "nll_sum", "target_tokens", "source_tokens"):
        assert float(getattr(without, field)) == float(getattr(with_accuracy, field))
