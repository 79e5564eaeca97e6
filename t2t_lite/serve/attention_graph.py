"""The attention signature's pieces in TensorFlow ops (`ServingFunctions.attention` in
`t2t_lite.serve.export`): token labels of ids, and every layer's maps stacked and masked."""

from __future__ import annotations

import tensorflow as tf

from t2t_lite.data import Tokenizer
from t2t_lite.vocabulary import EOS_ID, PAD_ID


def stack_attention(maps: dict[str, list], valid: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """`Transformer.attention_maps` (kind --> layers x [batch, heads, q, k]) and the valid
    positions {"source": [batch, S], "target": [batch, T]} --> kind --> [batch, layers, heads,
    q, k] float32, zero at padded queries and keys."""
    sides = {
        "encoder": ("source", "source"),
        "decoder_self": ("target", "target"),
        "decoder_cross": ("target", "source"),
    }
    stacked = {}
    for kind, (rows, columns) in sides.items():
        mask = valid[rows][:, None, None, :, None] & valid[columns][:, None, None, None, :]
        weights = tf.cast(tf.stack(maps[kind], axis=1), tf.float32)
        stacked[kind] = tf.where(mask, weights, 0.0)
    return stacked


def graph_token_labels(tokenizer: Tokenizer, ids: tf.Tensor) -> tf.Tensor:
    """ids [batch, n] --> [batch, n] strings, one label per id as
    `t2t_lite.decode.visualize.token_labels` makes them: the piece's text ("#<id>" when it
    decodes to nothing), "</s>" for EOS, "" for padding."""
    flat = tf.reshape(ids, [-1])
    pieces = tokenizer.decode(flat[:, None])  # --> [batch * n]
    labels = tf.where(pieces == "", tf.strings.join(["#", tf.strings.as_string(flat)]), pieces)
    labels = tf.where(flat == EOS_ID, "</s>", tf.where(flat == PAD_ID, "", labels))
    return tf.reshape(labels, tf.shape(ids))
