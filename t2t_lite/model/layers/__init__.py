"""Keras 3 layers of the Transformer."""

from t2t_lite.model.layers.attention import MultiHeadAttention
from t2t_lite.model.layers.embedding import PositionalEncoding, SharedEmbedding, sinusoid_table
from t2t_lite.model.layers.feed_forward import FeedForward
from t2t_lite.model.layers.masks import attention_mask, padding_mask
from t2t_lite.model.layers.transformer_layers import Decoder, DecoderLayer, Encoder, EncoderLayer

__all__ = [
    "MultiHeadAttention",
    "PositionalEncoding",
    "SharedEmbedding",
    "sinusoid_table",
    "FeedForward",
    "attention_mask",
    "padding_mask",
    "Decoder",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
]
