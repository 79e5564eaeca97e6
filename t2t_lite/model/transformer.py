"""The Transformer (section 3) as a Keras 3 model, with a cached one-step decoder for search."""

from __future__ import annotations

import dataclasses
from typing import Any

import keras
import tensorflow as tf

from t2t_lite.hparams import HParams
from t2t_lite.model.layers import (
    Decoder,
    Encoder,
    PositionalEncoding,
    SharedEmbedding,
    attention_mask,
    padding_mask,
)
from t2t_lite.model.layers.transformer_layers import BLOCK_ARGUMENTS
from t2t_lite.runtime.precision import resolve_precision

_HPARAMS_FIELDS = frozenset(field.name for field in dataclasses.fields(HParams))


# The HParams fields the model reads, beside the layers' BLOCK_ARGUMENTS (key_dim and value_dim
# are d_k and d_v resolved); the rest of HParams (rates, batches, schedules) is training's.
MODEL_FIELDS = (
    "num_encoder_layers", "num_decoder_layers", *BLOCK_ARGUMENTS, "shared_embeddings",
    "position_encoding", "max_positions",
)  # fmt: skip


# HParams fields that are not model arguments: a config holding one was written before the model
# took plain arguments.
_LEGACY_ONLY = _HPARAMS_FIELDS - set(MODEL_FIELDS)


def model_arguments(hparams: HParams) -> dict[str, Any]:
    """The Transformer's constructor arguments (`MODEL_FIELDS`) that `hparams` sets."""
    return {name: getattr(hparams, name) for name in MODEL_FIELDS}


@keras.saving.register_keras_serializable(package="t2t_lite")
class Transformer(keras.Model):
    """Encoder-decoder Transformer.

    Inputs are int ids with 0 as padding. `call({"inputs": [b, s], "targets": [b, t]})` returns
    teacher-forced logits [b, t, vocab_size] (float32). The decoder reads the targets shifted
    right by one, starting from id 0.

    For search: `state = project_memory(*encode(inputs))`, `cache = init_cache(batch,
    max_length)`, then repeatedly `logits, cache = decode_step(ids, index, cache, state)` with
    the previous token's ids [b].

    It takes plain arguments, the fields the model reads (`MODEL_FIELDS`), and `get_config()`
    lists them flat beside vocab_size and output_vocab_size; `from_hparams` builds one from a
    named set's HParams, whose training settings stay out of it. The compute precision is Keras'
    `dtype` policy.
    """

    def __init__(
        self,
        vocab_size: int,
        output_vocab_size: int = 0,
        *,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        d_model: int = 512,
        num_heads: int = 8,
        d_ff: int = 2048,
        key_dim: int | None = None,
        value_dim: int | None = None,
        dropout: float = 0.1,
        attention_dropout: float = 0.0,
        relu_dropout: float = 0.0,
        norm_position: str = "post",
        layer_norm_epsilon: float = 1e-6,
        shared_embeddings: bool = True,
        position_encoding: str = "sinusoid",
        max_positions: int = 256,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not 0 <= output_vocab_size <= vocab_size:
            raise ValueError(f"output_vocab_size={output_vocab_size} not in [0, {vocab_size}]")
        self.vocab_size = vocab_size
        # Logits cover ids [0, output_vocab_size) only (all ids when 0): the target symbols that
        # a problem such as parsing lists first in a vocabulary shared with source words.
        self.output_vocab_size = output_vocab_size
        self.num_encoder_layers, self.num_decoder_layers = num_encoder_layers, num_decoder_layers
        self.d_model, self.dropout = d_model, dropout
        self.shared_embeddings, self.position_encoding = shared_embeddings, position_encoding
        self.max_positions = max_positions
        blocks = dict(
            d_model=d_model, num_heads=num_heads, d_ff=d_ff, key_dim=key_dim,
            value_dim=value_dim, dropout=dropout, attention_dropout=attention_dropout,
            relu_dropout=relu_dropout, norm_position=norm_position,
            layer_norm_epsilon=layer_norm_epsilon,
        )  # fmt: skip
        policy = self.dtype_policy
        self.embedding = SharedEmbedding(vocab_size, d_model, name="shared_embedding", dtype=policy)
        if not shared_embeddings:
            self.target_embedding = SharedEmbedding(
                vocab_size, d_model, name="target_embedding", dtype=policy
            )
        self.positions = PositionalEncoding(
            position_encoding, d_model, max_positions, name="positions", dtype=policy
        )
        self.embedding_dropout = keras.layers.Dropout(dropout, dtype=policy)
        self.encoder = Encoder(num_encoder_layers, **blocks, name="encoder", dtype=policy)
        self.decoder = Decoder(num_decoder_layers, **blocks, name="decoder", dtype=policy)

    @classmethod
    def from_hparams(
        cls, hparams: HParams, vocab_size: int, output_vocab_size: int = 0, **kwargs
    ) -> Transformer:
        """The model a named set describes: its model fields, and its precision as the dtype
        policy (`precision=auto` resolved for this hardware)."""
        kwargs.setdefault("dtype", resolve_precision(hparams.precision))
        return cls(vocab_size, output_vocab_size, **model_arguments(hparams), **kwargs)

    def set_dropout(self, rate: float) -> None:
        """Sets P_drop (the embedding and residual dropout) to 0 or hparams.dropout, as late
        dropout does (t2t_lite.train.late_dropout); functions traced before keep the old rate."""
        if rate not in (0.0, self.dropout):
            raise ValueError(f"P_drop {rate} is neither 0 nor the model's dropout={self.dropout}")
        self.embedding_dropout.rate = rate
        for stack in (self.encoder, self.decoder):
            for block in stack.blocks:
                block.dropout_rate = block.dropout.rate = rate

    def build(self, input_shape=None):
        shape = (None, None, self.d_model)
        for layer in (self.embedding, self.positions, self.encoder, self.decoder):
            layer.build(shape)
        if not self.shared_embeddings:
            self.target_embedding.build(shape)
        self.built = True

    @property
    def _target_embedding(self) -> SharedEmbedding:
        return self.embedding if self.shared_embeddings else self.target_embedding

    def _embed(self, embedding, ids, start_index=0, training=None):
        x = self.positions(embedding(ids), start_index=start_index)
        return self.embedding_dropout(x, training=training)

    def _logits(
        self, x: tf.Tensor, columns: tf.Tensor | None = None, kernel: tf.Tensor | None = None
    ) -> tf.Tensor:
        limit = self.output_vocab_size or None
        return self._target_embedding.logits(x, limit, columns, kernel)

    def output_kernel(self, columns: tf.Tensor | None = None) -> tf.Tensor | None:
        """The pre-softmax matrix [d_model, vocab] (or [d_model, n] for a shortlist's
        `columns`) that `decode_step` multiplies by, made once per search
        (`SharedEmbedding.output_kernel`); None for int8 weights."""
        return self._target_embedding.output_kernel(self.output_vocab_size or None, columns)

    def output_matrix(self) -> tf.Tensor:
        """The pre-softmax matrix [vocab, d_model] in the compute dtype, rows as `decode`'s
        logits order them (float weights only)."""
        return self._target_embedding.output_rows(self.output_vocab_size or None)

    def encode(self, inputs: tf.Tensor, training=None) -> tuple[tf.Tensor, tf.Tensor]:
        """[batch, source] ids --> memory [batch, source, d_model] and its padding mask."""
        mask = padding_mask(inputs)
        x = self._embed(self.embedding, inputs, training=training)
        memory = self.encoder(
            x, attention_mask=attention_mask(tf.shape(inputs)[1], mask), training=training
        )
        return memory, mask

    def decode(
        self, targets: tf.Tensor, memory: tf.Tensor, memory_mask: tf.Tensor, training=None
    ) -> tf.Tensor:
        """Teacher forcing: [batch, target] ids --> logits [batch, target, vocab] (float32)."""
        x = self.decoder_output(targets, memory, memory_mask, training=training)
        return tf.cast(self._logits(x), tf.float32)

    def decoder_output(
        self, targets: tf.Tensor, memory: tf.Tensor, memory_mask: tf.Tensor, training=None
    ) -> tf.Tensor:
        """Teacher forcing up to the decoder's last layer: [batch, target, d_model] in the
        compute dtype, which `decode` multiplies by the pre-softmax matrix (`output_matrix`)."""
        decoder_inputs = tf.pad(targets, [[0, 0], [1, 0]])[:, :-1]  # shift right, start id 0
        length = tf.shape(targets)[1]
        # The causal mask alone suffices: padding comes after a target's last real token.
        self_mask = attention_mask(length, tf.ones_like(targets, tf.bool), causal=True)
        cross_mask = attention_mask(length, memory_mask)
        x = self._embed(self._target_embedding, decoder_inputs, training=training)
        return self.decoder(x, memory, self_mask, cross_mask, training=training)

    def call(self, features: dict[str, tf.Tensor], training=None) -> tf.Tensor:
        return tf.cast(self._logits(self.decoder_states(features, training=training)), tf.float32)

    def decoder_states(self, features: dict[str, tf.Tensor], training=None) -> tf.Tensor:
        """`call` up to the decoder's last layer, [batch, target, d_model] in the compute dtype
        (what a training step without XLA gives `losses.projected_cross_entropy`)."""
        memory, memory_mask = self.encode(features["inputs"], training=training)
        return self.decoder_output(features["targets"], memory, memory_mask, training=training)

    def attention_maps(self, inputs: tf.Tensor, targets: tf.Tensor) -> dict[str, list]:
        """Attention weights of every layer and head for a teacher-forced pair (no dropout).

        Returns {"encoder": [...], "decoder_self": [...], "decoder_cross": [...]}, one entry per
        layer of shape [batch, heads, query, key], and "logits" [batch, target, vocab], the
        output of the same pass.
        """
        memory_mask = padding_mask(inputs)
        x = self._embed(self.embedding, inputs)
        memory, encoder_maps = self.encoder.attention_maps(
            x, attention_mask(tf.shape(inputs)[1], memory_mask)
        )
        length = tf.shape(targets)[1]
        self_mask = attention_mask(length, tf.ones_like(targets, tf.bool), causal=True)
        cross_mask = attention_mask(length, memory_mask)
        y = self._embed(self._target_embedding, tf.pad(targets, [[0, 0], [1, 0]])[:, :-1])
        out, self_maps, cross_maps = self.decoder.attention_maps(y, memory, self_mask, cross_mask)
        return {
            "encoder": encoder_maps,
            "decoder_self": self_maps,
            "decoder_cross": cross_maps,
            "logits": self._logits(out),
        }

    def project_memory(self, memory: tf.Tensor, memory_mask: tf.Tensor) -> dict[str, Any]:
        """What every search step reads from the encoder, computed once per sentence: each
        layer's encoder-decoder keys and values [batch, heads, source, d] and the padding mask."""
        return {"layers": self.decoder.project_memory(memory), "mask": memory_mask}

    def init_cache(
        self, batch: int | tf.Tensor, max_length: int | tf.Tensor, fixed: bool | str = False
    ) -> dict[str, Any]:
        """The empty self-attention state of `batch` rows for up to `max_length` steps. It grows
        by a position per step; with `fixed` (True, or "in_place" for searches that never reorder
        rows), it is a `max_length` buffer written one position per step, whose shapes XLA can
        compile (`MultiHeadAttention.empty_cache`)."""
        return {"layers": self.decoder.init_cache(batch, max_length, fixed)}

    def decode_step(
        self,
        ids: tf.Tensor,
        index: tf.Tensor,
        cache: dict[str, Any],
        memory_state: dict[str, Any],
        columns: tf.Tensor | None = None,
        kernel: tf.Tensor | None = None,
    ) -> tuple[tf.Tensor, dict[str, Any]]:
        """One decoder position: previous ids [rows] at position `index` --> logits [rows,
        vocab] (float32) for position `index`, and the updated cache. With `columns` [n] (a
        vocabulary shortlist), the logits of those ids only: [rows, n]. `kernel`: the
        `output_kernel` of the same columns, made once per search.

        `memory_state` (`project_memory`) covers b sentences and `cache` (`init_cache`) rows =
        b * g of them: g consecutive rows (the beams of a search) per sentence share its memory,
        which is never copied per beam.
        """
        x = self._embed(self._target_embedding, tf.expand_dims(ids, 1), start_index=index)
        cross_mask = tf.expand_dims(memory_state["mask"], 1)  # --> [b, 1, source]
        layers = [
            {"self": own, "cross": memory_state["layers"][i]}
            for i, own in enumerate(cache["layers"])
        ]
        x, layers = self.decoder(x, None, None, cross_mask, cache=layers, decode_index=index)
        logits = tf.cast(self._logits(x, columns, kernel)[:, 0], tf.float32)
        return logits, {"layers": layers}

    def get_config(self):
        config = super().get_config()
        config.update(self.encoder.block_arguments())
        config.update(
            vocab_size=self.vocab_size,
            output_vocab_size=self.output_vocab_size,
            num_encoder_layers=self.num_encoder_layers,
            num_decoder_layers=self.num_decoder_layers,
            shared_embeddings=self.shared_embeddings,
            position_encoding=self.position_encoding,
            max_positions=self.max_positions,
        )
        return config

    @classmethod
    def from_config(cls, config):
        """A config of the plain arguments; one written before them, HParams fields (flat, or
        under one "hparams" key), is read as `from_hparams` reads the set."""
        config = dict(config)
        legacy = dict(config.pop("hparams", {}))
        legacy.update({k: config.pop(k) for k in list(config) if k in _LEGACY_ONLY})
        if legacy:
            known = {k: v for k, v in config.items() if k in _HPARAMS_FIELDS}
            hparams = HParams.from_dict({**legacy, **known})
            rest = {k: v for k, v in config.items() if k not in _HPARAMS_FIELDS}
            vocab = rest.pop("vocab_size")
            return cls.from_hparams(hparams, vocab, rest.pop("output_vocab_size", 0), **rest)
        return cls(**config)
