"""The text side of the exported signatures, in TensorFlow ops: raw strings read as t2t-decode
reads lines (invalid UTF-8 replaced, surrounding whitespace stripped), and token ids made into
model inputs (truncated, EOS, padding)."""

from __future__ import annotations

import tensorflow as tf

from t2t_lite.vocabulary import EOS_ID, PAD_ID


def clean_utf8(strings: tf.Tensor) -> tf.Tensor:
    """[batch] tf.string --> [batch] valid UTF-8: each invalid byte sequence becomes U+FFFD."""
    return tf.strings.unicode_transcode(
        strings, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
    )


# Python's str.strip() whitespace: \t-\r, \x1c-\x1f, space, \x85 and Unicode Z (\xa0, \u3000, ...).
_WHITESPACE = r"[\t-\r\x{1c}-\x{20}\x{85}\p{Z}]"


def strip_whitespace(strings: tf.Tensor) -> tf.Tensor:
    """[batch] valid UTF-8 --> [batch] without leading and trailing whitespace, the characters
    Python's str.strip() removes, so that the graph and t2t-decode see the same text."""
    return tf.strings.regex_replace(strings, f"^{_WHITESPACE}+|{_WHITESPACE}+$", "")


def source_ids(tokens: tf.RaggedTensor, max_input_length: int) -> tuple[tf.Tensor, tf.Tensor]:
    """Ragged ids without EOS [batch, (n)] --> model inputs [batch, length] int32 (truncated to
    `max_input_length - 1` tokens, then EOS, then zero padding) and truncated [batch] bool."""
    keep = max_input_length - 1
    truncated = tokens.row_lengths() > keep  # --> [batch]
    tokens = tf.cast(tokens[:, :keep], tf.int32)
    eos = tf.RaggedTensor.from_tensor(tf.fill([tokens.nrows(), 1], EOS_ID))
    ids = tf.concat([tokens, eos], axis=1).to_tensor(default_value=PAD_ID)  # --> [batch, length]
    return ids, truncated
