"""Position-wise feed-forward network (section 3.3): FFN(x) = max(0, x W1 + b1) W2 + b2."""

from __future__ import annotations

import keras
import tensorflow as tf

from t2t_lite.model.layers import int8_product


@keras.saving.register_keras_serializable(package="t2t_lite")
class FeedForward(keras.layers.Layer):
    """[batch, length, d_model] --> [batch, length, d_model] through a ReLU layer of width d_ff.

    `relu_dropout` (tensor2tensor's, not the paper's) drops the hidden activations.
    """

    def __init__(self, d_model: int, d_ff: int, relu_dropout: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.d_model = d_model
        self.d_ff = d_ff
        self.relu_dropout = relu_dropout

    def build(self, input_shape=None):
        self.hidden = keras.layers.Dense(
            self.d_ff, activation="relu", name="hidden", dtype=self.dtype_policy
        )
        self.hidden.build((None, None, self.d_model))
        self.dropout = keras.layers.Dropout(self.relu_dropout, dtype=self.dtype_policy)
        self.output_dense = keras.layers.Dense(self.d_model, name="output", dtype=self.dtype_policy)
        self.output_dense.build((None, None, self.d_ff))
        self.built = True

    def compute_output_shape(self, input_shape):
        """x [..., d_model] --> the same shape."""
        return tuple(input_shape)

    def call(self, x, training=None):
        # On the 2-D view [positions, d_model], where Keras' Dense is one matmul: on more axes
        # it goes through `tf.tensordot`, the same matmul with a dozen ops of shape arithmetic
        # around it, for every trace to build and every decoding step to run.
        rows = tf.reshape(x, [-1, self.d_model])
        hidden = self.dropout(int8_product.apply(self.hidden, rows), training=training)
        return tf.reshape(int8_product.apply(self.output_dense, hidden), tf.shape(x))

    def get_config(self):
        config = super().get_config()
        config.update(d_model=self.d_model, d_ff=self.d_ff, relu_dropout=self.relu_dropout)
        return config
