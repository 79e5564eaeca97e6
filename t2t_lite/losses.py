"""Label-smoothed cross entropy over non-padding tokens (section 5.4)."""

from __future__ import annotations

import tensorflow as tf

from t2t_lite.layers.masks import PAD_ID


def label_smoothed_cross_entropy(
    logits: tf.Tensor, targets: tf.Tensor, label_smoothing: float
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Sums of the smoothed and unsmoothed token losses, and the number of target tokens.

    The smoothed target puts 1 - eps on the reference token and eps / (vocab - 1) on each other
    token, as tensor2tensor does. Padding (id 0) contributes nothing.

    Args:
      logits: [batch, length, vocab] float.
      targets: [batch, length] int ids.
      label_smoothing: eps_ls, 0.1 in the paper.

    Returns:
      (smoothed loss sum, negative log-likelihood sum, token count), float32 scalars. Divide by
      the count for per-token values; exp(nll / count) is the perplexity.
    """
    logits = tf.cast(logits, tf.float32)
    vocab_size = tf.cast(tf.shape(logits)[-1], tf.float32)
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    weights = tf.cast(tf.not_equal(targets, PAD_ID), tf.float32)
    nll = -tf.gather(log_probs, targets, axis=-1, batch_dims=2)  # --> [batch, length]
    if label_smoothing:
        confidence = 1.0 - label_smoothing
        low = label_smoothing / (vocab_size - 1.0)
        sum_log_probs = tf.reduce_sum(log_probs, axis=-1)
        smoothed = confidence * nll - low * (sum_log_probs + nll)
    else:
        smoothed = nll
    return (tf.reduce_sum(smoothed * weights), tf.reduce_sum(nll * weights), tf.reduce_sum(weights))
