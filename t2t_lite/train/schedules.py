"""The paper's learning-rate formula (section 5.3), the time-budget schedule of `--train_minutes`
runs, and the Adam optimizer they are used with."""

from __future__ import annotations

import keras
import tensorflow as tf

from t2t_lite.hparams import HParams
from t2t_lite.train.adam import FusedAdam


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


@keras.saving.register_keras_serializable(package="t2t_lite")
class LinearBudgetSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """A linear warmup to RsqrtWarmupSchedule's peak (the rate it reaches at `warmup_steps`),
    then a linear decay that reaches zero after the update at `total_steps`:

        peak * min(1, step / warmup, (total + 1 - step) / (decay * (total + 1 - warmup)))

    for step >= 1. With `decay_fraction` (`decay` above) 1 the decay starts where the warmup
    ends; with less, the rate holds at its peak until that share of the steps after the warmup
    is left ("warmup-stable-decay", Hägele et al., 2024). With `decay_shape` "sqrt" the decay
    is that paper's 1 - sqrt: the factor 1 - sqrt(1 - d) where the linear one is d.

    The horizon is not known when training starts: t2t_lite.train.budget estimates it from the
    time left and calls `set_horizon` as it goes (until then it is `total_steps`). The warmup
    is then `warmup_steps`, but at most a tenth of the horizon. Once the horizon is known, the
    budget may also set the peak's rate factor from it (`set_multiplier`). All three live in
    variables, so the compiled training step reads their current values.
    """

    def __init__(
        self,
        d_model: int,
        warmup_steps: int,
        multiplier: float = 1.0,
        total_steps: int = 100000,
        decay_fraction: float = 1.0,
        decay_shape: str = "linear",
    ):
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.multiplier = multiplier
        self.total_steps = total_steps
        self.decay_fraction = decay_fraction
        self.decay_shape = decay_shape
        self.horizon = tf.Variable(float(total_steps), trainable=False, name="budget_horizon")
        self.warmup = tf.Variable(float(warmup_steps), trainable=False, name="budget_warmup")
        self.peak_rate = tf.Variable(0.0, trainable=False, name="budget_peak")
        self.set_horizon(total_steps)
        self.set_multiplier(multiplier)

    @property
    def peak(self) -> float:
        return float(self.peak_rate.numpy())

    def set_multiplier(self, multiplier: float) -> None:
        """Sets the peak to RsqrtWarmupSchedule's at `warmup_steps` with this rate factor."""
        self.peak_rate.assign(multiplier * self.d_model**-0.5 * self.warmup_steps**-0.5)

    def set_horizon(self, total_steps: int) -> None:
        """Sets the step at whose update the rate reaches zero."""
        self.horizon.assign(float(total_steps))
        self.warmup.assign(float(max(1, min(self.warmup_steps, total_steps // 10))))

    def __call__(self, iteration):
        step = tf.cast(iteration, tf.float32) + 1.0
        horizon, warmup = self.horizon.read_value(), self.warmup.read_value()
        peak = self.peak_rate.read_value()
        up = step / warmup
        decay = tf.maximum(self.decay_fraction * (horizon + 1.0 - warmup), 1.0)
        down = tf.clip_by_value((horizon + 1.0 - step) / decay, 0.0, 1.0)
        if self.decay_shape == "sqrt":
            down = 1.0 - tf.sqrt(1.0 - down)
        return peak * tf.clip_by_value(tf.minimum(up, down), 0.0, 1.0)

    def get_config(self):
        return {
            "d_model": self.d_model,
            "warmup_steps": self.warmup_steps,
            "multiplier": self.multiplier,
            "total_steps": self.total_steps,
            "decay_fraction": self.decay_fraction,
            "decay_shape": self.decay_shape,
        }


def create_schedule(hparams: HParams):
    """The learning-rate schedule named by `hparams.learning_rate_schedule`."""
    if hparams.learning_rate_schedule == "constant":
        return hparams.learning_rate
    if hparams.learning_rate_schedule == "linear_budget":
        return LinearBudgetSchedule(
            hparams.d_model,
            hparams.warmup_steps,
            hparams.learning_rate,
            hparams.train_steps,
            hparams.budget_decay_fraction,
            hparams.budget_decay_shape,
        )
    return RsqrtWarmupSchedule(hparams.d_model, hparams.warmup_steps, hparams.learning_rate)


def create_optimizer(hparams: HParams, schedule=None) -> keras.optimizers.Optimizer:
    """Adam (`FusedAdam`, Keras' Adam in one kernel per variable) with the paper's beta1 0.9,
    beta2 0.98, epsilon 1e-9 (set by the hparams), on `schedule` (default:
    `create_schedule(hparams)`)."""
    return FusedAdam(
        learning_rate=create_schedule(hparams) if schedule is None else schedule,
        beta_1=hparams.adam_beta1,
        beta_2=hparams.adam_beta2,
        epsilon=hparams.adam_epsilon,
        global_clipnorm=hparams.clip_grad_norm or None,
        use_ema=hparams.ema_momentum > 0,
        ema_momentum=hparams.ema_momentum or 0.99,
    )
