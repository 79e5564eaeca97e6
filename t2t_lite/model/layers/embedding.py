"""Token embeddings shared with the pre-softmax projection (section 3.4) and positions (3.5)."""

from __future__ import annotations

import math

import keras
import numpy as np
import tensorflow as tf

from t2t_lite.model.layers import int8_product
from t2t_lite.vocabulary import PAD_ID


@keras.saving.register_keras_serializable(package="t2t_lite")
class SharedEmbedding(keras.layers.Layer):
    """One [vocab_size, d_model] matrix for embedding lookup and the pre-softmax projection.

    `call(ids)` returns the embeddings multiplied by sqrt(d_model), as section 3.4 says; id 0
    (padding, and the decoder's start symbol) embeds to zeros, as in tensor2tensor.
    `logits(x)` returns x W^T, [batch, length, vocab_size].

    `quantize("int8")` (what `Model.quantize` calls, for decoding) keeps the matrix as int8 rows
    with one float32 scale per row (W ~ W_int8 / scale); lookups dequantize their rows and
    `logits` multiplies the float inputs by the int8 rows (weight-only int8, `_int8_logits`).
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

    def compute_output_shape(self, input_shape):
        """ids [...] --> [..., d_model]."""
        return (*input_shape, self.d_model)

    def call(self, ids):
        x = tf.gather(tf.cast(self.embeddings, self.compute_dtype), ids)
        return self._scale_and_mask(x, ids)

    def _scale_and_mask(self, x, ids):
        x *= tf.cast(math.sqrt(self.d_model), self.compute_dtype)
        return x * tf.expand_dims(tf.cast(tf.not_equal(ids, PAD_ID), self.compute_dtype), -1)

    def logits(
        self,
        x,
        limit: int | None = None,
        columns: tf.Tensor | None = None,
        kernel: tf.Tensor | None = None,
    ):
        """[..., d_model] --> [..., vocab_size], or [..., limit] for the first `limit` ids, or
        [..., n] for the ids `columns` [n] (a vocabulary shortlist). `kernel`: those rows
        already transposed by `output_kernel` (a search makes it once, before its loop)."""
        if self.quantization_mode == "int8":
            return self._int8_logits(x, limit, columns)
        # One 2-D product over all positions. tf.matmul of a [batch, length, d_model] tensor by
        # the [vocab, d_model] matrix is a batched matmul that broadcasts the matrix, and its
        # gradient builds a [batch, vocab, d_model] tensor and sums it: 3x slower in training.
        flat = tf.reshape(x, [-1, self.d_model])  # --> [batch * length, d_model]
        if kernel is None:
            logits = tf.matmul(flat, self.output_rows(limit, columns), transpose_b=True)
        else:
            logits = tf.matmul(flat, kernel)
        shape = tf.concat([tf.shape(x)[:-1], [_size(logits, -1)]], axis=0)
        return tf.reshape(logits, shape)  # --> [..., vocab_size]

    def output_rows(self, limit: int | None = None, columns: tf.Tensor | None = None) -> tf.Tensor:
        """The rows that `logits` multiplies by ([vocab_size, d_model], the first `limit`, or
        the ids `columns`), in the compute dtype; float weights only."""
        return tf.cast(_rows(self.embeddings, limit, columns), self.compute_dtype)

    def output_kernel(
        self, limit: int | None = None, columns: tf.Tensor | None = None
    ) -> tf.Tensor | None:
        """The pre-softmax matrix as `logits` multiplies by it, transposed to [d_model, n] in
        the compute dtype, for a search to make once: a decoding step's product by a
        transposed float32 matrix took 1.5x as long as by this copy (AMD EPYC, oneDNN; the
        same in bfloat16). None for int8 weights, whose 8-bit product keeps its own copy."""
        if self.quantization_mode == "int8":
            return None
        return tf.transpose(self.output_rows(limit, columns))

    def quantize(self, mode=None, type_check=True, config=None):
        """Keras' quantization hook: mode "int8" replaces `embeddings` by int8 rows and
        `embeddings_scale` [vocab, 1] (127 / max |row|, per row: per output channel of the
        logits, and per looked-up vector); the inputs stay float whatever `config` says. Other
        modes raise NotImplementedError, which `Model.quantize` turns into a warning."""
        if type_check and type(self) is not SharedEmbedding:
            raise NotImplementedError(  # as Keras' own layers refuse their subclasses
                f"{type(self).__name__} does not quantize: only SharedEmbedding itself does"
            )
        if mode != "int8":
            raise NotImplementedError(f"SharedEmbedding quantizes to int8 only, not {mode!r}")
        if getattr(self, "_is_quantized", False):
            raise ValueError(f"{self.name} is already quantized")
        values, scale = keras.quantizers.abs_max_quantize(self.embeddings, axis=-1, to_numpy=True)
        del self.embeddings  # untracks the float matrix
        self.embeddings = self.add_weight(
            name="embeddings", shape=values.shape, initializer="zeros", dtype="int8",
            trainable=False,
        )  # fmt: skip
        self.embeddings_scale = self.add_weight(
            name="embeddings_scale", shape=scale.shape, initializer="ones", trainable=False,
            autocast=False,  # float32 under a mixed policy too
        )  # fmt: skip
        self.embeddings.assign(values)
        self.embeddings_scale.assign(scale)
        self._is_quantized = True
        # Keras' int8 policy: __call__ now runs `_int8_call`, and quantization_mode says "int8".
        self.dtype_policy = keras.dtype_policies.get(f"int8_from_{self.dtype_policy.name}")

    def _int8_call(self, ids, training=None):
        rows = tf.gather(self.embeddings, ids)  # --> [..., d_model] int8
        scale = tf.gather(self.embeddings_scale, ids)  # --> [..., 1] float32
        x = tf.cast(tf.cast(rows, tf.float32) / scale, self.compute_dtype)
        return self._scale_and_mask(x, ids)

    def _int8_logits(self, x, limit: int | None, columns: tf.Tensor | None):
        """x W^T with W in int8: the float inputs times the int8 rows (exact in the compute
        dtype), divided by each row's scale."""
        flat = tf.reshape(x, [-1, self.d_model])  # --> [batch * length, d_model]
        weights = _rows(self.embeddings, limit, columns)  # [vocab, d_model] int8
        shape = tf.concat([tf.shape(x)[:-1], [_size(weights, 0)]], axis=0)
        fast = None
        if limit in (None, self.vocab_size):
            fast = int8_product.logits(self, flat, columns)
        if fast is not None:  # both operands in 8 bits (`int8_product.prepare` readied it)
            return tf.reshape(tf.cast(fast, flat.dtype), shape)
        scale = _rows(self.embeddings_scale, limit, columns)  # [vocab, 1] float32
        products = tf.matmul(flat, tf.cast(weights, flat.dtype), transpose_b=True)
        logits = products / tf.cast(tf.transpose(scale), flat.dtype)
        return tf.reshape(logits, shape)  # --> [..., vocab_size]

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, d_model=self.d_model)
        return config


def _rows(matrix, limit: int | None, columns: tf.Tensor | None):
    """The rows of an embedding matrix (or of its scales) that logits are computed for: the ids
    `columns`, else the first `limit`, else all."""
    if columns is not None:
        return tf.gather(matrix, columns)
    return matrix if limit is None else matrix[:limit]


def _size(tensor, axis: int) -> int | tf.Tensor:
    """A tensor's size along `axis`: static where it is known (the search's top-k splits a
    known vocabulary into blocks), else from its shape at run time."""
    static = tensor.shape[axis]
    return static if static is not None else tf.shape(tensor)[axis]


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

    def compute_output_shape(self, input_shape, *args, **kwargs):
        """x [batch, length, d_model] --> the same shape."""
        return tuple(input_shape)

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
