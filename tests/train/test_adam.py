"""FusedAdam against keras.optimizers.Adam: the same updates, moments and checkpoints."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.train.adam import FusedAdam
from t2t_lite.train.schedules import RsqrtWarmupSchedule

SHAPES = [(5, 3), (3,), (7, 2)]


def _optimizer(cls, **kwargs):
    return cls(
        learning_rate=RsqrtWarmupSchedule(d_model=16, warmup_steps=3),
        beta_1=0.9, beta_2=0.98, epsilon=1e-9, **kwargs,
    )  # fmt: skip


def _start_weights(rng):
    return [rng.normal(size=s).astype(np.float32) for s in SHAPES]


def _kind(variable) -> str:
    """momentum, velocity, average, iteration, ...: the name without its numbering."""
    return variable.path.rsplit("/", 1)[-1].rsplit("_", 1)[-1]


def _train(cls, steps, use_function, **kwargs):
    rng = np.random.default_rng(0)
    variables = [keras.Variable(w) for w in _start_weights(rng)]
    optimizer = _optimizer(cls, **kwargs)
    optimizer.build(variables)

    def apply(grads):
        optimizer.apply(grads, variables)

    if use_function:
        apply = tf.function(apply)
    for _ in range(steps):  # gradients of every scale, some of them large
        grads = [tf.constant(rng.normal(size=s) * 10.0 ** rng.integers(-3, 2), tf.float32)
                 for s in SHAPES]  # fmt: skip
        apply(grads)
    return optimizer, variables


@pytest.mark.parametrize("use_function", [False, True])
@pytest.mark.parametrize("extra", [{}, {"global_clipnorm": 1.0, "use_ema": True}])
def test_fused_adam_updates_as_keras_adam(use_function, extra):
    fused, fused_vars = _train(FusedAdam, 4, use_function, **extra)
    plain, plain_vars = _train(keras.optimizers.Adam, 4, use_function, **extra)
    start = _start_weights(np.random.default_rng(0))
    for a, b, s in zip(fused_vars, plain_vars, start, strict=True):
        # The same updates up to float32 rounding (the two compute them in another order).
        fused_update, plain_update = a.numpy() - s, b.numpy() - s
        scale = np.abs(plain_update).max()
        np.testing.assert_allclose(fused_update, plain_update, atol=1e-5 * scale)
        assert np.abs(plain_update).min() > 1e-4  # every weight moved
    for a, b in zip(fused.variables, plain.variables, strict=True):  # moments, EMA, iterations
        assert _kind(a) == _kind(b)
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-9)
    assert int(fused.iterations) == 4


def test_a_keras_adam_checkpoint_restores_into_fused_adam(tmp_path):
    plain, plain_vars = _train(keras.optimizers.Adam, 2, True)
    path = tf.train.Checkpoint(optimizer=plain, weights=plain_vars).save(str(tmp_path / "ckpt"))
    fused, fused_vars = _train(FusedAdam, 0, True)
    tf.train.Checkpoint(optimizer=fused, weights=fused_vars).restore(path).assert_consumed()
    for a, b in zip(fused.variables, plain.variables, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_amsgrad_is_refused():
    with pytest.raises(ValueError, match="amsgrad"):
        FusedAdam(amsgrad=True)


def test_an_update_makes_its_scalars_once_for_all_variables():
    """The step's powers, rates and constants are made once per update, not per variable: a
    traced update of three variables holds two powers (beta_1^t, beta_2^t) and three kernels."""
    variables = [keras.Variable(w) for w in _start_weights(np.random.default_rng(0))]
    optimizer = FusedAdam(learning_rate=0.01)  # a schedule would add its own power
    optimizer.build(variables)
    grads = [tf.ones(s) for s in SHAPES]
    graph = tf.function(lambda g: optimizer.apply(g, variables)).get_concrete_function(grads).graph
    types = [op.type for op in graph.get_operations()]
    assert types.count("ResourceApplyAdam") == len(SHAPES)
    assert types.count("Pow") == 2
