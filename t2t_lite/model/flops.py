"""Analytic forward FLOPs of the Transformer, for t2t-info and model FLOPs utilisation."""

from __future__ import annotations

from t2t_lite.hparams import HParams


def forward_flops_per_token(
    hparams: HParams, vocab_size: int, source_length: int, target_length: int
) -> float:
    """Forward-pass FLOPs (2 per multiply-add) per target token, teacher-forced.

    Counts every matrix product: projections, attention scores and weighted sums (over the full
    length, as teacher forcing computes them), the feed-forward layers and the pre-softmax
    projection; element-wise work (softmax, LayerNorm, ReLU) is left out. A training step costs
    about three times this.
    """
    hp, s, t = hparams, source_length, target_length
    d, h, dk, dv = hp.d_model, hp.num_heads, hp.key_dim, hp.value_dim
    projections = 2 * d * h * (2 * dk + dv) + 2 * h * dv * d  # q, k, v and output
    feed_forward = 2 * 2 * d * hp.d_ff

    def attention(length):
        return 2 * length * h * (dk + dv)  # scores and weighted sum, per query

    encoder = s * hp.num_encoder_layers * (projections + attention(s) + feed_forward)
    cross = (
        t * (2 * d * h * dk + 2 * h * dv * d + attention(s))  # queries and output
        + s * 2 * d * h * (dk + dv)
    )  # keys and values of the memory
    decoder = hp.num_decoder_layers * (t * (projections + attention(t) + feed_forward) + cross)
    softmax = t * 2 * d * vocab_size
    return (encoder + decoder + softmax) / t
