"""Encoder and decoder layers and stacks (section 3.1), post-norm as the paper or pre-norm."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import keras
import tensorflow as tf

from t2t_lite.model.layers.attention import MultiHeadAttention
from t2t_lite.model.layers.feed_forward import FeedForward

NORM_POSITIONS = ("post", "pre")


def _residual(x, sublayer: Callable, norm, dropout, norm_position: str, training):
    """post: LayerNorm(x + Dropout(Sublayer(x))), the paper's; pre: x + Dropout(Sublayer(LN(x)))."""
    if norm_position == "post":
        return norm(x + dropout(sublayer(x), training=training))
    return x + dropout(sublayer(norm(x)), training=training)


class _BlockArguments(keras.layers.Layer):
    """The constructor arguments that layers and stacks share, stored as attributes and listed
    flat in `get_config`. `key_dim` / `value_dim` (d_k, d_v) default to d_model // num_heads.

    `dropout` is the residual dropout (section 5.4, P_drop); `attention_dropout` drops attention
    weights and `relu_dropout` the feed-forward's hidden activations (tensor2tensor's).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        key_dim: int | None = None,
        value_dim: int | None = None,
        dropout: float = 0.1,
        attention_dropout: float = 0.0,
        relu_dropout: float = 0.0,
        norm_position: str = "post",
        layer_norm_epsilon: float = 1e-6,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if norm_position not in NORM_POSITIONS:
            raise ValueError(
                f"norm_position must be one of {NORM_POSITIONS}, not {norm_position!r}"
            )
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_ff = d_ff
        self.key_dim = key_dim or d_model // num_heads
        self.value_dim = value_dim or d_model // num_heads
        # Stored as `dropout_rate` (`_ATTRIBUTES`): `self.dropout` is the layers' Dropout sub-layer.
        self.dropout_rate = dropout
        self.attention_dropout = attention_dropout
        self.relu_dropout = relu_dropout
        self.norm_position = norm_position
        self.layer_norm_epsilon = layer_norm_epsilon

    def block_arguments(self) -> dict:
        """The shared constructor arguments (`BLOCK_ARGUMENTS`), as plain values."""
        return {name: getattr(self, _ATTRIBUTES.get(name, name)) for name in BLOCK_ARGUMENTS}

    def _norm(self, name: str) -> keras.layers.LayerNormalization:
        layer = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, name=name, dtype=self.dtype_policy
        )
        layer.build((None, None, self.d_model))
        return layer

    def get_config(self):
        config = super().get_config()
        config.update(self.block_arguments())
        return config


# The names of the shared constructor arguments, in order: `_BlockArguments.__init__`'s own, so the
# list is written once. Each is kept in the attribute of the same name but those in `_ATTRIBUTES`.
BLOCK_ARGUMENTS = tuple(
    name
    for name, parameter in inspect.signature(_BlockArguments.__init__).parameters.items()
    if name != "self" and parameter.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
)
_ATTRIBUTES = {"dropout": "dropout_rate"}


class _TransformerLayer(_BlockArguments):
    """Shared construction of the sub-layers common to encoder and decoder layers."""

    def compute_output_shape(self, input_shape, *args, **kwargs):
        """x [batch, length, d_model] --> the same shape (teacher forcing; with a decoding
        cache the call also returns the new cache)."""
        return tuple(input_shape)

    def _attention(self, name: str) -> MultiHeadAttention:
        layer = MultiHeadAttention(
            self.d_model,
            self.num_heads,
            self.key_dim,
            self.value_dim,
            self.attention_dropout,
            name=name,
            dtype=self.dtype_policy,
        )
        layer.build((None, None, self.d_model))
        return layer

    def _build_common(self):
        self.feed_forward = FeedForward(
            self.d_model, self.d_ff, self.relu_dropout, name="feed_forward", dtype=self.dtype_policy
        )
        self.feed_forward.build((None, None, self.d_model))
        self.feed_forward_norm = self._norm("feed_forward_norm")
        self.dropout = keras.layers.Dropout(self.dropout_rate, dtype=self.dtype_policy)

    def _weights_of(self, attention, norm, x, memory, attention_mask):
        """The attention weights [batch, heads, query, key] a sub-layer computes for input x."""
        query = x if self.norm_position == "post" else norm(x)
        if memory is None:
            return attention.attention_weights(query, attention_mask=attention_mask)
        return attention.attention_weights(query, memory, attention_mask=attention_mask)

    def _ffn(self, x, training):
        return _residual(
            x,
            lambda y: self.feed_forward(y, training=training),
            self.feed_forward_norm,
            self.dropout,
            self.norm_position,
            training,
        )


@keras.saving.register_keras_serializable(package="t2t_lite")
class EncoderLayer(_TransformerLayer):
    """Self-attention then feed-forward; [batch, length, d_model] in and out."""

    def build(self, input_shape=None):
        self.self_attention = self._attention("self_attention")
        self.self_attention_norm = self._norm("self_attention_norm")
        self._build_common()
        self.built = True

    def call(self, x, attention_mask=None, training=None):
        """attention_mask: [batch, length, length] bool attention mask."""
        x = _residual(
            x,
            lambda y: self.self_attention(y, attention_mask=attention_mask, training=training),
            self.self_attention_norm,
            self.dropout,
            self.norm_position,
            training,
        )
        return self._ffn(x, training)

    def attention_maps(self, x, attention_mask=None):
        """(output, self-attention weights [batch, heads, length, length]), for visualization."""
        weights = self._weights_of(
            self.self_attention, self.self_attention_norm, x, None, attention_mask
        )
        return self(x, attention_mask=attention_mask), weights


@keras.saving.register_keras_serializable(package="t2t_lite")
class DecoderLayer(_TransformerLayer):
    """Masked self-attention, encoder-decoder attention, feed-forward."""

    def build(self, input_shape=None):
        self.self_attention = self._attention("self_attention")
        self.self_attention_norm = self._norm("self_attention_norm")
        self.cross_attention = self._attention("cross_attention")
        self.cross_attention_norm = self._norm("cross_attention_norm")
        self._build_common()
        self.built = True

    def call(
        self,
        x,
        memory=None,
        self_mask=None,
        cross_mask=None,
        cache=None,
        decode_index=None,
        training=None,
    ):
        """x: [batch, target, d_model]; memory: [batch, source, d_model] encoder output.

        With `cache`, x is the next position of each row, at `decode_index`, and the layer
        returns (output, new self-attention cache). The cache is {"self": the keys and values of
        the positions before x (`empty_cache` before the first), "cross":
        `project_memory_heads(memory)`}; the cross part may have fewer rows (one per sentence,
        shared by its beams) and never changes.
        """
        new_cache = None

        def self_attend(y):
            nonlocal new_cache
            if cache is None:
                return self.self_attention(y, attention_mask=self_mask, training=training)
            out, new_cache = self.self_attention(y, cache=cache["self"], decode_index=decode_index)
            return out

        def cross_attend(y):
            if cache is None:
                return self.cross_attention(y, memory, attention_mask=cross_mask, training=training)
            return self.cross_attention(y, attention_mask=cross_mask, cache=cache["cross"])

        x = _residual(
            x, self_attend, self.self_attention_norm, self.dropout, self.norm_position, training
        )
        x = _residual(
            x, cross_attend, self.cross_attention_norm, self.dropout, self.norm_position, training
        )
        x = self._ffn(x, training)
        return x if cache is None else (x, new_cache)

    def attention_maps(self, x, memory, self_mask=None, cross_mask=None):
        """(output, self-attention weights [batch, heads, target, target], encoder-decoder
        weights [batch, heads, target, source]), for visualization."""
        self_weights = self._weights_of(
            self.self_attention, self.self_attention_norm, x, None, self_mask
        )
        after_self = _residual(
            x,
            lambda y: self.self_attention(y, attention_mask=self_mask),
            self.self_attention_norm,
            self.dropout,
            self.norm_position,
            False,
        )
        cross_weights = self._weights_of(
            self.cross_attention, self.cross_attention_norm, after_self, memory, cross_mask
        )
        return self(x, memory, self_mask, cross_mask), self_weights, cross_weights


class _Stack(_BlockArguments):
    """`num_layers` layers built from the shared arguments; with pre-norm a final LayerNorm,
    since no sub-layer normalizes the output."""

    layer_class: type = EncoderLayer

    def compute_output_shape(self, input_shape, *args, **kwargs):
        """x [batch, length, d_model] --> the same shape (teacher forcing; with a decoding
        cache the call also returns the new cache)."""
        return tuple(input_shape)

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, **kwargs):
        super().__init__(d_model, num_heads, d_ff, **kwargs)
        self.num_layers = num_layers

    def build(self, input_shape=None):
        # Each layer is an attribute of its own (layer_0, layer_1, ...): tf.train.Checkpoint does
        # not follow the lists Keras 3 tracks, so weights kept only in a list would not be saved.
        for i in range(self.num_layers):
            layer = self.layer_class(
                **self.block_arguments(), name=f"layer_{i}", dtype=self.dtype_policy
            )
            layer.build((None, None, self.d_model))
            setattr(self, f"layer_{i}", layer)
        self.final_norm = self._norm("final_norm") if self.norm_position == "pre" else None
        self.built = True

    @property
    def blocks(self) -> list:
        """The layers, first to last."""
        return [getattr(self, f"layer_{i}") for i in range(self.num_layers)]

    def _finish(self, x):
        return x if self.final_norm is None else self.final_norm(x)

    def get_config(self):
        config = super().get_config()
        config.update(num_layers=self.num_layers)
        return config


@keras.saving.register_keras_serializable(package="t2t_lite")
class Encoder(_Stack):
    """[batch, source, d_model] embeddings --> [batch, source, d_model] memory."""

    layer_class = EncoderLayer

    def call(self, x, attention_mask=None, training=None):
        for layer in self.blocks:
            x = layer(x, attention_mask=attention_mask, training=training)
        return self._finish(x)

    def attention_maps(self, x, attention_mask=None) -> tuple[tf.Tensor, list[tf.Tensor]]:
        """(memory [batch, source, d_model], per layer the self-attention weights [batch, heads,
        source, source]), without dropout, for visualization."""
        maps = []
        for layer in self.blocks:
            x, weights = layer.attention_maps(x, attention_mask)
            maps.append(weights)
        return self._finish(x), maps


@keras.saving.register_keras_serializable(package="t2t_lite")
class Decoder(_Stack):
    """[batch, target, d_model] embeddings and memory --> [batch, target, d_model]."""

    layer_class = DecoderLayer

    def call(
        self,
        x,
        memory=None,
        self_mask=None,
        cross_mask=None,
        cache=None,
        decode_index=None,
        training=None,
    ):
        """`DecoderLayer.call`'s arguments, with `cache` a list of one layer cache per layer; with
        it, returns (output, the new caches)."""
        if cache is None:
            for layer in self.blocks:
                x = layer(x, memory, self_mask, cross_mask, training=training)
            return self._finish(x)
        new_cache = []
        for layer, layer_cache in zip(self.blocks, cache, strict=True):
            x, layer_cache = layer(
                x,
                None,
                self_mask,
                cross_mask,
                layer_cache,
                decode_index=decode_index,
                training=training,
            )
            new_cache.append(layer_cache)
        return self._finish(x), new_cache

    def attention_maps(
        self, x, memory, self_mask=None, cross_mask=None
    ) -> tuple[tf.Tensor, list[tf.Tensor], list[tf.Tensor]]:
        """(output [batch, target, d_model], per layer the self-attention weights [batch, heads,
        target, target], per layer the encoder-decoder weights [batch, heads, target, source]),
        without dropout, for visualization."""
        self_maps, cross_maps = [], []
        for layer in self.blocks:
            x, self_weights, cross_weights = layer.attention_maps(x, memory, self_mask, cross_mask)
            self_maps.append(self_weights)
            cross_maps.append(cross_weights)
        return self._finish(x), self_maps, cross_maps

    def init_cache(
        self, batch: tf.Tensor | int, max_length: tf.Tensor | int, fixed: bool | str = False
    ) -> list[dict]:
        """Per layer: empty self-attention keys/values [batch, heads, 0, d] (they grow), or
        with `fixed` (True or "in_place") zero buffers [batch, heads, max_length, d]
        (`empty_cache`)."""
        return [layer.self_attention.empty_cache(batch, max_length, fixed) for layer in self.blocks]

    def project_memory(self, memory: tf.Tensor) -> list[dict]:
        """Per layer: the encoder-decoder keys/values [batch, heads, source, d] of memory
        [batch, source, d_model], projected once per sentence."""
        return [layer.cross_attention.project_memory_heads(memory) for layer in self.blocks]
