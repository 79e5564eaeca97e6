"""Multi-head scaled dot-product attention (section 3.2) with an incremental decoding cache."""

from __future__ import annotations

import keras
import tensorflow as tf

from t2t_lite.model.layers import int8_product
from t2t_lite.model.layers.projection import Projection


@keras.saving.register_keras_serializable(package="t2t_lite")
class MultiHeadAttention(keras.layers.Layer):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = softmax(Q_i K_i^T / sqrt(d_k)) V_i.

    Projections have no bias, as in tensor2tensor. `key_dim` (d_k) may differ from `value_dim`
    (d_v), as Table 3 row (B) needs; either defaults to d_model // num_heads, the paper's.

    Call modes:
      * `layer(query, memory=None, attention_mask=m)`: full attention; `memory=None` is
        self-attention. `m` is [batch, query, key] bool.
      * `layer(query, cache=c, decode_index=i)`: incremental self-attention. `query` is
        [batch, 1, d_model], position `i`; the cache holds the keys and values [batch, heads, i,
        d] of the positions before it (`empty_cache` for i = 0), the query attends to them and to
        itself, and the cache grown by its key and value is returned. No mask is needed: every
        cached position precedes the query. A fixed-length cache (`empty_cache(..., fixed=True)`,
        buffers [batch, heads, max_length, d]) is written at position `i` instead, and the query
        attends to positions 0..i of it: the same result in shapes that never change, as XLA
        (`jit_compile`) needs.
      * `layer(query, attention_mask=m, cache=c)`: attention over precomputed
        `project_memory_heads(memory)` of b sentences, where `query` has b * g rows (g beams per
        sentence, consecutive). `m` is [b, query, key] bool.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        key_dim: int | None = None,
        value_dim: int | None = None,
        attention_dropout: float = 0.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.d_model = d_model
        self.num_heads = num_heads
        self.key_dim = key_dim or d_model // num_heads
        self.value_dim = value_dim or d_model // num_heads
        self.attention_dropout = attention_dropout

    def build(self, query_shape=None):
        # Each projection is a `Projection` (an EinsumDense, whose decoding runs `tf.matmul`)
        # applied to the 2-D view [positions, d_model] of its input: one 2-D product, forward
        # and backward. On the 3-D input ("btd,dhk->bthk") it was a batched matmul broadcasting
        # the kernel, whose gradient built [batch, d_model, h * d] and summed it over the batch
        # (docs/results/benchmarks.md). The kernels keep their [d_model, h, d] and [h, d_v,
        # d_model] shapes and attribute names, so checkpoints (Adam's slots included) are
        # unchanged; being Keras layers, `Model.quantize` can reach them.
        self.query_dense = self._projection("query", self.key_dim)
        self.key_dense = self._projection("key", self.key_dim)
        self.value_dense = self._projection("value", self.value_dim)
        self.output_dense = Projection(
            "ahv,hvd->ad", output_shape=(self.d_model,), name="output", dtype=self.dtype_policy
        )
        self.output_dense.build((None, self.num_heads, self.value_dim))
        self.dropout = keras.layers.Dropout(self.attention_dropout, dtype=self.dtype_policy)
        self.built = True

    def _projection(self, name: str, width: int) -> Projection:
        """[positions, d_model] --> [positions, h, width], kernel [d_model, h, width]."""
        layer = Projection(
            "ad,dhk->ahk",
            output_shape=(self.num_heads, width),
            name=name,
            dtype=self.dtype_policy,
        )
        layer.build((None, self.d_model))
        return layer

    def _project(self, x: tf.Tensor, layer: Projection) -> tf.Tensor:
        """x [batch, length, d_model] --> [batch, length, h, d] through `layer` on the 2-D view."""
        heads = int8_product.apply(layer, tf.reshape(x, [-1, self.d_model]))  # [b * l, h, d]
        return _unflatten(heads, x, [self.num_heads, heads.shape[-1]])

    def _project_output(self, context: tf.Tensor, like: tf.Tensor) -> tf.Tensor:
        """context [..., h, d_v], its rows those of like [batch, length, ...] --> [batch,
        length, d_model] through W^O."""
        flat = tf.reshape(context, [-1, self.num_heads, self.value_dim])
        output = int8_product.apply(self.output_dense, flat)  # --> [batch * length, d_model]
        return _unflatten(output, like, [self.d_model])

    def project_memory(self, memory: tf.Tensor) -> dict[str, tf.Tensor]:
        """[batch, length, d_model] --> keys [b, length, h, d_k] and values [b, length, h, d_v]."""
        return {
            "key": self._project(memory, self.key_dense),
            "value": self._project(memory, self.value_dense),
        }

    def project_memory_heads(self, memory: tf.Tensor) -> dict[str, tf.Tensor]:
        """The decoding layout of `project_memory`: keys [b, h, length, d_k], values [b, h,
        length, d_v], so that each search step multiplies them without moving them."""
        return {name: _heads_first(value) for name, value in self.project_memory(memory).items()}

    def empty_cache(
        self, batch: tf.Tensor | int, max_length: tf.Tensor | int = 0, fixed: bool | str = False
    ) -> dict:
        """Self-attention keys [batch, h, 0, d_k] and values [batch, h, 0, d_v]: no positions yet.

        The cache grows by one position per step (a concatenation), so a step copies and attends
        over the positions so far, not a `max_length` buffer. Its zero-length axis tells the
        searches (`t2t_lite.search.contract.shape_invariants`) which axis grows.

        fixed=True: zero buffers "key_buffer" [batch, h, max_length, d_k] and "value_buffer"
        [batch, h, max_length, d_v] instead, written one position per step. Every step then has
        the same shapes, which XLA compiles (`jit_compile`); on the CPU without XLA the growing
        cache is faster (docs/design.md). A step writes them with a `tf.where` over the whole
        buffer, which measured faster than an in-place write where beam search reorders the
        cache's rows at every step (docs/results/benchmarks.md, change 11).
        fixed="in_place": the same buffers as "key_slots" and "value_slots", which a step writes
        at its one position (a dynamic-update-slice, in place under XLA): for the searches that
        never reorder the cache's rows (greedy search, sampling), where rewriting the whole
        buffer is the larger cost.
        """
        if fixed:
            kind = "slots" if fixed == "in_place" else "buffer"
            return {
                f"{name}_{kind}": tf.zeros(
                    [batch, self.num_heads, max_length, dim], self.compute_dtype
                )
                for name, dim in (("key", self.key_dim), ("value", self.value_dim))
            }
        return {
            name: tf.zeros([batch, self.num_heads, 0, dim], self.compute_dtype)
            for name, dim in (("key", self.key_dim), ("value", self.value_dim))
        }

    def _decode_position(self, query, cache: dict, index) -> tuple[tf.Tensor, dict]:
        """One decoding position: query [batch, 1, d_model] at `index` over `cache`
        (`empty_cache`) --> (output [batch, 1, d_model], the cache with the position added)."""
        q = self._project(query, self.query_dense)  # --> [batch, 1, heads, d_k]
        step = {name: _heads_first(t) for name, t in self.project_memory(query).items()}
        if "key" in cache:
            # [batch, heads, index, d] --> [batch, heads, index + 1, d]
            cache = {name: tf.concat([cache[name], step[name]], axis=2) for name in step}
            return self._attend_heads(q, cache["key"], cache["value"], None), cache
        kind = "slots" if "key_slots" in cache else "buffer"
        buffers = {name: cache[f"{name}_{kind}"] for name in step}
        positions = tf.range(tf.shape(buffers["key"])[2])  # --> [max_length]
        if kind == "slots":
            buffers = {name: _write_position(buffers[name], step[name], index) for name in step}
        else:
            written = tf.equal(positions, index)[:, None]  # --> [max_length, 1]
            buffers = {name: tf.where(written, step[name], buffers[name]) for name in step}
        seen = (positions <= index)[None, None, :]  # --> [1, 1, max_length]
        output = self._attend_heads(q, buffers["key"], buffers["value"], seen)
        return output, {f"{name}_{kind}": buffer for name, buffer in buffers.items()}

    def compute_output_shape(self, query_shape, memory_shape=None, *args, **kwargs):
        """query [batch, query_length, any] --> [batch, query_length, d_model] (without a
        decoding cache, whose calls also return the new cache)."""
        return (*query_shape[:-1], self.d_model)

    def call(
        self, query, memory=None, attention_mask=None, cache=None, decode_index=None, training=None
    ):
        """Returns [batch, query_length, d_model], and the new cache when decoding."""
        if decode_index is not None:
            return self._decode_position(query, cache, decode_index)
        q = self._project(query, self.query_dense)  # --> [batch, q, heads, d_k]
        if cache is not None:
            return self._attend_heads(q, cache["key"], cache["value"], attention_mask)
        kv = self.project_memory(query if memory is None else memory)
        return self._attend(q, kv["key"], kv["value"], attention_mask, training)

    def attention_weights(self, query, memory=None, attention_mask=None):
        """Softmax attention weights [batch, heads, query, key], for visualization."""
        kv = self.project_memory(query if memory is None else memory)
        q = self._project(query, self.query_dense)
        return self._weights(q, kv["key"], attention_mask, training=False)

    def _weights(self, q, k, mask, training):
        """q [batch, q, h, d_k], k [batch, key, h, d_k] --> weights [batch, h, q, key]."""
        return self._weights_heads(_heads_first(q), _heads_first(k), mask, training)

    def _weights_heads(self, q, k, mask, training):
        """The same in the heads-first layout: q [b, h, q, d_k], k [b, h, key, d_k]."""
        scores = tf.matmul(q, k, transpose_b=True) * tf.cast(self.key_dim**-0.5, q.dtype)
        # The softmax runs in float32 so that mixed precision cannot overflow the mask value.
        scores = tf.cast(scores, tf.float32)
        if mask is not None:
            scores = tf.where(tf.expand_dims(mask, 1), scores, -1e9)  # mask: [batch, q, key]
        weights = tf.cast(tf.nn.softmax(scores, axis=-1), self.compute_dtype)
        return self.dropout(weights, training=training)

    def _attend(self, q, k, v, mask, training):
        # Plain batched matmuls over [batch, heads] in the heads-first layout; tf.einsum in the
        # projections' [batch, length, heads, d] layout transposed its operands itself on every
        # call (5% of the whole training step, docs/results/benchmarks.md).
        weights = self._weights_heads(_heads_first(q), _heads_first(k), mask, training)
        context = tf.matmul(weights, _heads_first(v))  # --> [batch, heads, q, d_v]
        return self._project_output(_heads_first(context), q)  # --> [batch, q, d_model]

    def _attend_heads(self, q, k, v, mask):
        """Attention of queries q [rows, q, h, d_k] over keys k [b, h, key, d_k] and values
        v [b, h, key, d_v] in the decoding layout, where rows = b * g: the g consecutive rows of
        each batch entry (the beams of one sentence) share its keys and values. mask: [b or 1,
        q, key] bool. No dropout: this path only decodes."""
        # Keras' shape: Python ints where the trace knows them (a decoding step's length 1).
        rows, length = keras.ops.shape(q)[:2]
        batch = tf.shape(k)[0]
        group = rows // batch
        # [b * g, q, h, d] --> [b, h, g * q, d]: the only transposes are of the small queries.
        queries = tf.reshape(q, [batch, group * length, self.num_heads, -1])
        queries = tf.transpose(queries, [0, 2, 1, 3])
        scores = tf.matmul(queries, k, transpose_b=True) * tf.cast(self.key_dim**-0.5, q.dtype)
        scores = tf.cast(scores, tf.float32)  # --> [b, h, g * q, key]
        if mask is not None:
            # [b, q, key] --> [b, 1, g * q, key], row j * q + i of group j is query i.
            mask = tf.tile(mask, [1, group, 1])[:, None]
            scores = tf.where(mask, scores, -1e9)
        weights = tf.cast(tf.nn.softmax(scores, axis=-1), self.compute_dtype)
        context = tf.matmul(weights, v)  # --> [b, h, g * q, d_v]
        context = tf.transpose(context, [0, 2, 1, 3])  # --> [b, g * q, h, d_v], rows of q
        return self._project_output(context, q)

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


def _write_position(buffer: tf.Tensor, value: tf.Tensor, index) -> tf.Tensor:
    """buffer [batch, h, max_length, d] with value [batch, h, 1, d] at position `index`.

    `keras.ops.slice_update` is XLA's dynamic-update-slice on TensorFlow, which XLA writes in
    place where nothing else reads the old buffer (`empty_cache(..., fixed="in_place")`)."""
    zero = tf.zeros([], tf.int32)
    return keras.ops.slice_update(buffer, [zero, zero, tf.cast(index, tf.int32), zero], value)


def _unflatten(flat: tf.Tensor, like: tf.Tensor, trailing: list) -> tf.Tensor:
    """flat [batch * length, ...] --> [batch, length, *trailing], batch and length those of
    like's first two axes: a reshape by constants where the length is known when traced (a
    decoding step's one position), so that the step holds no shape arithmetic for it."""
    if like.shape[1]:  # known and not 0 (-1 cannot stand for the batch of an empty tensor)
        return tf.reshape(flat, [-1, like.shape[1], *trailing])
    return tf.reshape(flat, tf.concat([tf.shape(like)[:2], trailing], axis=0))


def _heads_first(x: tf.Tensor) -> tf.Tensor:
    """[batch, length, heads, d] <--> [batch, heads, length, d] (the same swap both ways)."""
    return tf.transpose(x, [0, 2, 1, 3])
