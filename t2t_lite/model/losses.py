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
    eight, one of them a scatter into a dense zero matrix (docs/results/benchmarks.md).

    Args:
      logits: [batch, length, vocab] float.
      targets: [batch, length] int ids.
      label_smoothing: eps_ls, 0.1 in the paper.
      one_hot_gradient: subtract the reference term as a one-hot comparison rather than scatter
        it into the gradient. Under XLA (`jit_compile`) the comparison fuses with the rest of
        the gradient and its cast to the logits' dtype into one pass over [tokens, vocab], where
        the scatter splits that pass in two (GPU profile, docs/results/benchmarks.md); without XLA
        each op is its own pass and the scatter is the cheaper.

    Returns:
      (smoothed loss sum, negative log-likelihood sum, token count), float32 scalars. Divide by
      the count for per-token values; exp(nll / count) is the perplexity.
    """
    vocab = tf.shape(logits)[-1]
    flat_logits = tf.reshape(tf.cast(logits, tf.float32), [-1, vocab])
    flat_targets, weights, where, confidence, low = _token_terms(targets, vocab, label_smoothing)

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
            on_probs, shift, on_target = _gradient_terms(
                d_smoothed, d_nll, weights, confidence, low
            )
            gradient = tf.exp(log_probs) * on_probs[:, None]
            if label_smoothing:
                gradient -= shift[:, None]
            if one_hot_gradient:
                return gradient - tf.one_hot(flat_targets, vocab) * on_target[:, None]
            return tf.tensor_scatter_nd_sub(gradient, where, on_target)

        return (tf.reduce_sum(smoothed * weights), tf.reduce_sum(nll * weights)), grad

    smoothed_sum, nll_sum = sums(flat_logits)
    return smoothed_sum, nll_sum, tf.reduce_sum(weights)


def projected_cross_entropy(
    hidden: tf.Tensor,
    matrix: tf.Tensor,
    targets: tf.Tensor,
    label_smoothing: float,
    matrix_gradient: bool = True,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """`label_smoothed_cross_entropy` of the logits hidden @ matrix^T, with the pre-softmax
    product inside the loss's gradient (what a training step without XLA runs).

    The gradient w * (p - q) per token is a scaled softmax, minus a shift per token, minus a
    term at each reference id. The two products by the softmax take the softmax alone; the
    scale, the shift and the reference terms are applied to their [tokens, d_model] and
    [vocab, d_model] results. The [tokens, vocab] gradient is never formed: its scale, shift,
    scatter and cast were four passes over 16 M values in a bfloat16 step on an Intel Xeon with
    AMX (docs/results/benchmarks.md). For the same reason the sum of a token's log-probs, which
    label smoothing needs, is sum_v z_v - vocab * logsumexp(z), with sum_v z_v = hidden . sum_v W_v.

    Args:
      hidden: [batch, length, d_model], the decoder's output in the compute dtype.
      matrix: [vocab, d_model], the pre-softmax matrix in the same dtype.
      targets, label_smoothing: as `label_smoothed_cross_entropy`.
      matrix_gradient: False when the matrix is frozen (an adapter run): its gradient, a
        product as large as the logits', is then not computed (zeros are returned).

    Returns:
      As `label_smoothed_cross_entropy`.
    """
    vocab = tf.shape(matrix)[0]
    flat_hidden = tf.reshape(hidden, [-1, tf.shape(matrix)[1]])
    flat_targets, weights, where, confidence, low = _token_terms(targets, vocab, label_smoothing)

    @tf.custom_gradient
    def sums(flat_hidden, matrix):
        logits = tf.matmul(flat_hidden, matrix, transpose_b=True)  # --> [tokens, vocab]
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
        nll = -tf.gather_nd(log_probs, where)  # --> [tokens]
        hidden32, matrix32 = tf.cast(flat_hidden, tf.float32), tf.cast(matrix, tf.float32)
        column_sums = tf.reduce_sum(matrix32, axis=0)  # --> [d_model], sum_v W_v
        if label_smoothing:
            log_normalizer = nll + tf.cast(tf.gather_nd(logits, where), tf.float32)
            logit_sums = tf.linalg.matvec(hidden32, column_sums)
            log_prob_sums = logit_sums - tf.cast(vocab, tf.float32) * log_normalizer
            smoothed = confidence * nll - low * (log_prob_sums + nll)
        else:
            smoothed = nll

        def grad(d_smoothed, d_nll):
            on_probs, shift, on_target = _gradient_terms(
                d_smoothed, d_nll, weights, confidence, low
            )
            # A float32 softmax from the log-probs at hand; in a 16-bit dtype, one kernel
            # from the logits, already in the dtype that the products take.
            if logits.dtype == tf.float32:
                probs = tf.exp(log_probs)
            else:
                probs = tf.nn.softmax(logits, axis=-1)
            # d hidden = G matrix, G = on_probs * p - shift - on_target * onehot.
            d_hidden = (
                on_probs[:, None] * tf.cast(tf.matmul(probs, matrix), tf.float32)
                - shift[:, None] * column_sums[None, :]
                - on_target[:, None] * tf.gather(matrix32, flat_targets)
            )
            if not matrix_gradient:
                return tf.cast(d_hidden, flat_hidden.dtype), tf.zeros_like(matrix)
            # d matrix = G^T hidden.
            scaled = tf.cast(on_probs[:, None] * hidden32, flat_hidden.dtype)
            d_matrix = (
                tf.cast(tf.matmul(probs, scaled, transpose_a=True), tf.float32)
                - tf.reduce_sum(shift[:, None] * hidden32, axis=0)[None, :]
                - tf.math.unsorted_segment_sum(on_target[:, None] * hidden32, flat_targets, vocab)
            )
            return tf.cast(d_hidden, flat_hidden.dtype), tf.cast(d_matrix, matrix.dtype)

        return (tf.reduce_sum(smoothed * weights), tf.reduce_sum(nll * weights)), grad

    smoothed_sum, nll_sum = sums(flat_hidden, matrix)
    return smoothed_sum, nll_sum, tf.reduce_sum(weights)


def _token_terms(targets: tf.Tensor, vocab: tf.Tensor, label_smoothing: float):
    """The flat targets [tokens], their weights (0 for padding), where each reference sits in
    the flat [tokens, vocab] logits ([tokens, 2]: row, id), and the smoothed target's values
    on the reference (confidence) and on every other id (low)."""
    flat_targets = tf.reshape(tf.cast(targets, tf.int32), [-1])
    weights = tf.cast(tf.not_equal(flat_targets, PAD_ID), tf.float32)
    where = tf.stack([tf.range(tf.shape(flat_targets)[0]), flat_targets], axis=1)
    low = label_smoothing / (tf.cast(vocab, tf.float32) - 1.0)
    return flat_targets, weights, where, 1.0 - label_smoothing, low


def _gradient_terms(d_smoothed, d_nll, weights, confidence, low):
    """Per token, from the upstream gradients of the two sums: the softmax's scale, the shift
    on every id (label smoothing) and the extra amount taken off at the reference id."""
    d_smoothed = tf.zeros([]) if d_smoothed is None else d_smoothed
    d_nll = tf.zeros([]) if d_nll is None else d_nll
    on_probs = (d_smoothed + d_nll) * weights
    shift = d_smoothed * low * weights
    on_target = (d_smoothed * (confidence - low) + d_nll) * weights
    return on_probs, shift, on_target
