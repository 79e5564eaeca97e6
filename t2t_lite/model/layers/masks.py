"""The one mask convention of t2t_lite.

Id 0 is padding. A padding mask is boolean [batch, length], True at real tokens. An attention
mask is boolean [batch, query, key], True where the query may attend to the key.
"""

from __future__ import annotations

import tensorflow as tf

from t2t_lite.vocabulary import PAD_ID


def padding_mask(ids: tf.Tensor) -> tf.Tensor:
    """[batch, length] int ids --> [batch, length] bool, True at non-padding tokens."""
    return tf.not_equal(ids, PAD_ID)


def attention_mask(
    query_length: tf.Tensor | int,
    key_mask: tf.Tensor,
    causal: bool = False,
    query_offset: tf.Tensor | int = 0,
) -> tf.Tensor:
    """Builds a [batch, query, key] boolean attention mask.

    Args:
      query_length: number of query positions.
      key_mask: [batch, key] bool padding mask of the keys.
      causal: if True, query position i (at absolute position i + query_offset) sees only keys
        at positions <= i + query_offset.
      query_offset: absolute position of the first query, for incremental decoding.
    """
    key_mask = tf.convert_to_tensor(key_mask)
    key_length = tf.shape(key_mask)[1]
    mask = tf.tile(tf.expand_dims(key_mask, 1), [1, query_length, 1])  # --> [batch, query, key]
    if causal:
        query_pos = tf.range(query_length)[:, None] + query_offset
        key_pos = tf.range(key_length)[None, :]
        mask = tf.logical_and(mask, (key_pos <= query_pos)[None])
    return mask
