"""Keras 3 layers of the Transformer."""

from t2t_lite.layers.attention import MultiHeadAttention
from t2t_lite.layers.embedding import PositionalEncoding, SharedEmbedding, sinusoid_table
from t2t_lite.layers.feed_forward import FeedForward
from t2t_lite.layers.masks import EOS_ID, PAD_ID, attention_mask, padding_mask
from t2t_lite.layers.transformer_layers import Decoder, DecoderLayer, Encoder, EncoderLayer

__all__ = [
    "MultiHeadAttention",
    "PositionalEncoding",
    "SharedEmbedding",
    "sinusoid_table",
    "FeedForward",
    "EOS_ID",
    "PAD_ID",
    "attention_mask",
    "padding_mask",
    "Decoder",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
]
