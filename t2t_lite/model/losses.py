"""Label-smoothed cross entropy over non-padding tokens (section 5.4)."""

from __future__ import annotations

import tensorflow as tf

from t2t_lite.vocabulary import PAD_ID


def label_smoothed_cross_entropy(
    logits: tf.Tensor, targets: tf.Tensor, label_smoothing: float, one_hot_gradient: bool = False
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Sums of the smoothed and unsmoothed token losses, and the number of target tokens.

    The smoothed target q puts 1 - eps on the reference token and eps / (vocab - 1) on each other
    token, as tensor2tensor does; the smoothed loss is the cross entropy -sum_k q_k log p_k.
    Padding (id 0) contributes nothing.

    Both sums carry their gradient in closed form, w * (softmax(logits) - q) per token (q the
    one-hot target for the unsmoothed sum), rather than the chain rule through log-softmax,
    gather and sum: on a [tokens, vocab] matrix that is three element-wise passes instead of about
    eight, one of them a scatter into a dense zero matrix (bench/NOTES.md).

    Args:
      logits: [batch, length, vocab] float.
      targets: [batch, length] int ids.
      label_smoothing: eps_ls, 0.1 in the paper.
      one_hot_gradient: subtract the reference term as a one-hot comparison rather than scatter
        it into the gradient. Under XLA (`jit_compile`) the comparison fuses with the rest of
        the gradient and its cast to the logits' dtype into one pass over [tokens, vocab], where
        the scatter splits that pass in two (GPU profile, bench/RESULTS.md); without XLA each
        op is its own pass and the scatter is the cheaper.

    Returns:
      (smoothed loss sum, negative log-likelihood sum, token count), float32 scalars. Divide by
      the count for per-token values; exp(nll / count) is the perplexity.
    """
    vocab = tf.shape(logits)[-1]
    flat_logits = tf.reshape(tf.cast(logits, tf.float32), [-1, vocab])
    flat_targets = tf.reshape(tf.cast(targets, tf.int32), [-1])
    weights = tf.cast(tf.not_equal(flat_targets, PAD_ID), tf.float32)
    # [tokens, 2] (row, target id): where each token's reference sits in the flat logits.
    where = tf.stack([tf.range(tf.shape(flat_targets)[0]), flat_targets], axis=1)
    confidence = 1.0 - label_smoothing
    low = label_smoothing / (tf.cast(vocab, tf.float32) - 1.0)

    @tf.custom_gradient
    def sums(flat_logits):
        log_probs = tf.nn.log_softmax(flat_logits, axis=-1)
        nll = -tf.gather_nd(log_probs, where)  # --> [tokens]
        if label_smoothing:
            smoothed = confidence * nll - low * (tf.reduce_sum(log_probs, axis=-1) + nll)
        else:
            smoothed = nll

        def grad(d_smoothed, d_nll):
            # d/dlogits of w * smoothed is w * (p - q); of w * nll, w * (p - onehot).
            d_smoothed = tf.zeros([]) if d_smoothed is None else d_smoothed
            d_nll = tf.zeros([]) if d_nll is None else d_nll
            on_probs = (d_smoothed + d_nll) * weights  # --> [tokens]
            gradient = tf.exp(log_probs) * on_probs[:, None]
            on_target = (d_smoothed * (confidence - low) + d_nll) * weights
            if label_smoothing:
                gradient -= (d_smoothed * low * weights)[:, None]
            if one_hot_gradient:
                return gradient - tf.one_hot(flat_targets, vocab) * on_target[:, None]
            return tf.tensor_scatter_nd_sub(gradient, where, on_target)

        return (tf.reduce_sum(smoothed * weights), tf.reduce_sum(nll * weights)), grad

    smoothed_sum, nll_sum = sums(flat_logits)
    return smoothed_sum, nll_sum, tf.reduce_sum(weights)
