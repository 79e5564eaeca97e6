"""Adam whose per-variable update is TensorFlow's fused `ResourceApplyAdam` kernel.

Keras' Adam writes its update as about a dozen element-wise ops per variable (the two moment
updates, the square root, the division, three assignments), each a pass over the variable's
memory. `ResourceApplyAdam` is the same formula in one kernel:

    m <- m + (1 - beta_1) (g - m),   v <- v + (1 - beta_2) (g^2 - v)
    variable <- variable - lr sqrt(1 - beta_2^t) / (1 - beta_1^t) * m / (sqrt(v) + epsilon)

with Keras' own moment variables, so checkpoints, `get_config` and everything around the update
(schedules, global clipping, the EMA, loss scaling, tf.distribute) are Keras'. The kernel's
scalars (beta_1^t, beta_2^t, the rate, epsilon) are made once per update for all variables.
tests/train/test_adam.py holds it to `keras.optimizers.Adam`.
"""

from __future__ import annotations

import keras
import tensorflow as tf


def _handle(variable) -> tf.Tensor:
    """The resource handle of a tf.Variable or of a Keras variable's tf.Variable; under
    tf.distribute, inside `extended.update`, that of the current device's copy."""
    return (variable.value if isinstance(variable, keras.Variable) else variable).handle


@keras.saving.register_keras_serializable(package="t2t_lite")
class FusedAdam(keras.optimizers.Adam):
    """`keras.optimizers.Adam` with the update in one kernel per variable (not amsgrad)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.amsgrad:
            raise ValueError("FusedAdam does not implement amsgrad")

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        # One update's scalars are the same for every variable of a dtype: made once per
        # update (`_scalars`), not once per variable, which in a traced step is about a dozen
        # ops per variable for the graph to hold and the executor to run at every step.
        self._update_scalars = {}
        try:
            super()._backend_update_step(grads, trainable_variables, learning_rate)
        finally:
            self._update_scalars = None

    def _scalars(self, dtype, learning_rate) -> dict:
        """The update's ResourceApplyAdam scalars in `dtype`, made at its first variable of
        that dtype (under tf.distribute, on the first device that updates one)."""
        cache = getattr(self, "_update_scalars", None)
        if cache is not None and dtype in cache:
            return cache[dtype]
        step = tf.cast(self.iterations + 1, dtype)
        beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
        scalars = dict(
            beta1_power=tf.pow(beta_1, step),
            beta2_power=tf.pow(beta_2, step),
            lr=tf.cast(learning_rate, dtype),
            beta1=beta_1,
            beta2=beta_2,
            epsilon=tf.cast(self.epsilon, dtype),
        )
        if cache is not None:
            cache[dtype] = scalars
        return scalars

    def update_step(self, gradient, variable, learning_rate):
        dtype = variable.dtype
        index = self._get_variable_index(variable)
        tf.raw_ops.ResourceApplyAdam(
            var=_handle(variable),
            m=_handle(self._momentums[index]),
            v=_handle(self._velocities[index]),
            grad=tf.cast(gradient, dtype),
            **self._scalars(dtype, learning_rate),
        )
