"""The paper's learning-rate formula (section 5.3) and the Adam optimizer it is used with."""

from __future__ import annotations

import keras
import tensorflow as tf

from t2t_lite.hparams import HParams


def paper_learning_rate(
    step: float, d_model: int, warmup_steps: int, multiplier: float = 1.0
) -> float:
    """lrate = d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5), for step >= 1."""
    return multiplier * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


@keras.saving.register_keras_serializable(package="t2t_lite")
class RsqrtWarmupSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup for `warmup_steps`, then decay with the inverse square root of the step.

    Keras calls a schedule with the optimizer's iteration count, which is 0 before the first
    update; the paper counts steps from 1, so the update made at iteration i uses the paper's
    step i + 1 and never a learning rate of 0.
    """

    def __init__(self, d_model: int, warmup_steps: int, multiplier: float = 1.0):
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.multiplier = multiplier

    def __call__(self, iteration):
        step = tf.cast(iteration, tf.float32) + 1.0
        warmup = tf.cast(self.warmup_steps, tf.float32)
        return (
            self.multiplier
            * self.d_model**-0.5
            * tf.minimum(tf.math.rsqrt(step), step * warmup**-1.5)
        )

    def get_config(self):
        return {
            "d_model": self.d_model,
            "warmup_steps": self.warmup_steps,
            "multiplier": self.multiplier,
        }


def create_schedule(hparams: HParams):
    """The learning-rate schedule named by `hparams.learning_rate_schedule`."""
    if hparams.learning_rate_schedule == "constant":
        return hparams.learning_rate
    return RsqrtWarmupSchedule(hparams.d_model, hparams.warmup_steps, hparams.learning_rate)


def create_optimizer(hparams: HParams) -> keras.optimizers.Optimizer:
    """Adam with the paper's beta1 0.9, beta2 0.98, epsilon 1e-9 (set by the hparams)."""
    return keras.optimizers.Adam(
        learning_rate=create_schedule(hparams),
        beta_1=hparams.adam_beta1,
        beta_2=hparams.adam_beta2,
        epsilon=hparams.adam_epsilon,
        global_clipnorm=hparams.clip_grad_norm or None,
    )
