"""Multi-head scaled dot-product attention (section 3.2) with an incremental decoding cache."""

from __future__ import annotations

import keras
import tensorflow as tf


class MultiHeadAttention(keras.layers.Layer):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = softmax(Q_i K_i^T / sqrt(d_k)) V_i.

    Projections have no bias, as in tensor2tensor. `key_dim` (d_k) may differ from `value_dim`
    (d_v), as Table 3 row (B) needs.

    Call modes:
      * `layer(query, memory=None, attention_mask=m)`: full attention; `memory=None` is
        self-attention. `m` is [batch, query, key] bool.
      * `layer(query, attention_mask=m, cache=c, decode_index=i)`: incremental self-attention.
        `query` is [batch, 1, d_model]; its key/value are written at position `i` of the cache's
        fixed-size [batch, max_length, heads, d] tensors, and the updated cache is returned.
      * `layer(query, attention_mask=m, cache=c)`: attention over precomputed
        `project_memory(memory)`.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        key_dim: int,
        value_dim: int,
        attention_dropout: float = 0.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.d_model = d_model
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.attention_dropout = attention_dropout

    def build(self, query_shape=None):
        def projection(name, heads_dim):
            layer = keras.layers.EinsumDense(
                "btd,dhk->bthk",
                output_shape=(None, self.num_heads, heads_dim),
                name=name,
                dtype=self.dtype_policy,
            )
            layer.build((None, None, self.d_model))
            return layer

        self.query_dense = projection("query", self.key_dim)
        self.key_dense = projection("key", self.key_dim)
        self.value_dense = projection("value", self.value_dim)
        self.output_dense = keras.layers.EinsumDense(
            "bthv,hvd->btd",
            output_shape=(None, self.d_model),
            name="output",
            dtype=self.dtype_policy,
        )
        self.output_dense.build((None, None, self.num_heads, self.value_dim))
        self.dropout = keras.layers.Dropout(self.attention_dropout, dtype=self.dtype_policy)
        self.built = True

    def project_memory(self, memory: tf.Tensor) -> dict[str, tf.Tensor]:
        """[batch, length, d_model] --> keys [b, length, h, d_k] and values [b, length, h, d_v]."""
        return {"key": self.key_dense(memory), "value": self.value_dense(memory)}

    def call(
        self, query, memory=None, attention_mask=None, cache=None, decode_index=None, training=None
    ):
        """Returns [batch, query_length, d_model], and the new cache when decoding."""
        q = self.query_dense(query)  # --> [batch, q, heads, d_k]
        if decode_index is not None:
            step = self.project_memory(query)  # --> [batch, 1, heads, d]
            cache = {
                name: _write_at(cache[name], step[name], decode_index) for name in ("key", "value")
            }
            kv = cache
        elif cache is not None:
            kv = cache
        else:
            kv = self.project_memory(query if memory is None else memory)
        output = self._attend(q, kv["key"], kv["value"], attention_mask, training)
        return (output, cache) if decode_index is not None else output

    def attention_weights(self, query, memory=None, attention_mask=None):
        """Softmax attention weights [batch, heads, query, key], for visualization."""
        kv = self.project_memory(query if memory is None else memory)
        return self._weights(self.query_dense(query), kv["key"], attention_mask, training=False)

    def _weights(self, q, k, mask, training):
        scores = tf.einsum("bqhk,bthk->bhqt", q, k) * (self.key_dim**-0.5)
        # The softmax runs in float32 so that mixed precision cannot overflow the mask value.
        scores = tf.cast(scores, tf.float32)
        if mask is not None:
            scores = tf.where(mask[:, None, :, :], scores, -1e9)  # mask: [batch, q, key]
        weights = tf.cast(tf.nn.softmax(scores, axis=-1), self.compute_dtype)
        return self.dropout(weights, training=training)

    def _attend(self, q, k, v, mask, training):
        weights = self._weights(q, k, mask, training)  # --> [batch, heads, q, key]
        context = tf.einsum("bhqt,bthv->bqhv", weights, v)  # --> [batch, q, heads, d_v]
        return self.output_dense(context)

    def get_config(self):
        config = super().get_config()
        config.update(
            d_model=self.d_model,
            num_heads=self.num_heads,
            key_dim=self.key_dim,
            value_dim=self.value_dim,
            attention_dropout=self.attention_dropout,
        )
        return config


def _write_at(buffer: tf.Tensor, update: tf.Tensor, index: tf.Tensor) -> tf.Tensor:
    """Writes `update` [b, 1, h, d] into `buffer` [b, max_length, h, d] at position `index`.

    A scatter keeps the cache's static shape (what `tf.while_loop` needs), costs only the size of
    the update, and is a core op that TF Serving runs.
    """
    batch = tf.shape(buffer)[0]
    index = tf.fill([batch], tf.cast(index, tf.int32))
    indices = tf.stack([tf.range(batch), index], axis=1)  # --> [batch, 2]
    return tf.tensor_scatter_nd_update(buffer, indices, update[:, 0])
