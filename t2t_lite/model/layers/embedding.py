"""Token embeddings shared with the pre-softmax projection (section 3.4) and positions (3.5)."""

from __future__ import annotations

import math

import keras
import numpy as np
import tensorflow as tf

from t2t_lite.vocabulary import PAD_ID


@keras.saving.register_keras_serializable(package="t2t_lite")
class SharedEmbedding(keras.layers.Layer):
    """One [vocab_size, d_model] matrix for embedding lookup and the pre-softmax projection.

    `call(ids)` returns the embeddings multiplied by sqrt(d_model), as section 3.4 says; id 0
    (padding, and the decoder's start symbol) embeds to zeros, as in tensor2tensor.
    `logits(x)` returns x W^T, [batch, length, vocab_size].
    """

    def __init__(self, vocab_size: int, d_model: int, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.d_model = d_model

    def build(self, input_shape=None):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.vocab_size, self.d_model),
            initializer=keras.initializers.RandomNormal(stddev=self.d_model**-0.5),
        )
        self.built = True

    def call(self, ids):
        x = tf.gather(tf.cast(self.embeddings, self.compute_dtype), ids)
        x *= tf.cast(math.sqrt(self.d_model), self.compute_dtype)
        return x * tf.cast(tf.not_equal(ids, PAD_ID), self.compute_dtype)[..., None]

    def logits(self, x, limit: int | None = None):
        """[..., d_model] --> [..., vocab_size], or [..., limit] for the first `limit` ids."""
        # One 2-D product over all positions. tf.matmul of a [batch, length, d_model] tensor by
        # the [vocab, d_model] matrix is a batched matmul that broadcasts the matrix, and its
        # gradient builds a [batch, vocab, d_model] tensor and sums it: 3x slower in training.
        flat = tf.reshape(x, [-1, self.d_model])  # --> [batch * length, d_model]
        weights = self.embeddings if limit is None else self.embeddings[:limit]
        logits = tf.matmul(flat, tf.cast(weights, self.compute_dtype), transpose_b=True)
        shape = tf.concat([tf.shape(x)[:-1], [limit or self.vocab_size]], axis=0)
        return tf.reshape(logits, shape)  # --> [..., vocab_size]

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, d_model=self.d_model)
        return config


def sinusoid_table(length: int, d_model: int, interleaved: bool = True) -> np.ndarray:
    """Sinusoidal position encodings [length, d_model] as float64 NumPy, for reference and tests.

    interleaved=True is section 3.5: PE(pos, 2i) = sin(pos / 10000^(2i/d_model)) and
    PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)). interleaved=False is tensor2tensor's timing
    signal: sin in the first half, cos in the second, timescales spaced geometrically from 1 to
    10000 over d_model/2 - 1 steps.
    """
    pos = np.arange(length, dtype=np.float64)[:, None]
    half = d_model // 2
    if interleaved:
        inv_timescales = 10000.0 ** (-2.0 * np.arange(half) / d_model)
        angles = pos * inv_timescales
        table = np.stack([np.sin(angles), np.cos(angles)], axis=-1).reshape(length, 2 * half)
    else:
        increment = math.log(10000.0) / max(half - 1, 1)
        angles = pos * np.exp(-increment * np.arange(half))
        table = np.concatenate([np.sin(angles), np.cos(angles)], axis=-1)
    return np.pad(table, [[0, 0], [0, d_model % 2]])


@keras.saving.register_keras_serializable(package="t2t_lite")
class PositionalEncoding(keras.layers.Layer):
    """Adds position information to [batch, length, d_model] inputs.

    kind: "sinusoid" (section 3.5, interleaved sin/cos), "sinusoid_concat" (tensor2tensor's
    timing signal) or "learned" (Table 3 row (E), a trained [max_positions, d_model] table).
    Sinusoids are precomputed for `max_positions` positions.
    """

    def __init__(self, kind: str, d_model: int, max_positions: int, **kwargs):
        super().__init__(**kwargs)
        if kind not in ("sinusoid", "sinusoid_concat", "learned"):
            raise ValueError(f"unknown position encoding {kind!r}")
        self.kind = kind
        self.d_model = d_model
        self.max_positions = max_positions

    def build(self, input_shape=None):
        if self.kind == "learned":
            self.table = self.add_weight(
                name="position_embeddings",
                shape=(self.max_positions, self.d_model),
                initializer=keras.initializers.RandomNormal(stddev=self.d_model**-0.5),
            )
        else:
            table = sinusoid_table(
                self.max_positions, self.d_model, interleaved=self.kind == "sinusoid"
            )
            self.table = tf.constant(table, tf.float32)
        self.built = True

    def call(self, x, start_index=0):
        """x: [batch, length, d_model]; positions start at `start_index` (for decoding steps)."""
        length = tf.shape(x)[1]
        positions = tf.range(length) + tf.cast(start_index, tf.int32)
        encoding = tf.gather(tf.cast(self.table, self.compute_dtype), positions)
        return x + encoding[None]

    def get_config(self):
        config = super().get_config()
        config.update(kind=self.kind, d_model=self.d_model, max_positions=self.max_positions)
        return config
