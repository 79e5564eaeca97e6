"""The memory a Transformer will take, from its hparams alone (no TensorFlow), checked against
the memory this process may still take before the model is built.

A run folder from elsewhere is input: each hparams.json value may be within its bound
(`t2t_lite.hparams.hparams_base.LIMITS`) and together still describe a model no machine holds.
The estimate counts what is certain to be allocated, so it is a lower bound and a refusal is
never wrong:
the float32 weights (`parameter_count`, the same number Keras counts on the built model), the
sinusoid position table, a LoRA adapter's A and B (`adapter_parameters`), and when training the
gradient and Adam's two moments of every trainable weight (and the moving average with
ema_momentum > 0). Activations, which depend on the batch and the lengths, are left out.
"""

from __future__ import annotations

from t2t_lite.hparams import HParams
from t2t_lite.runtime.memory import available_memory

FLOAT32 = 4
GB = 10**9


class ModelTooLargeError(ValueError):
    """The model a run describes needs more memory than this process may take."""


def parameter_count(hparams: HParams, vocab_size: int) -> int:
    """The weights of `Transformer.from_hparams(hparams, vocab_size)` once built: embeddings
    (one shared, or source and target), a learned position table, and per layer the attention
    projections (no biases), the feed-forward layers (with biases) and the layer norms."""
    hp, d = hparams, hparams.d_model
    h, dk, dv = hp.num_heads, hp.key_dim, hp.value_dim
    attention = d * h * (2 * dk + dv) + h * dv * d
    feed_forward = d * hp.d_ff + hp.d_ff + hp.d_ff * d + d
    norm = 2 * d
    encoder_layer = attention + feed_forward + 2 * norm
    decoder_layer = 2 * attention + feed_forward + 3 * norm
    final_norms = 2 * norm if hp.norm_position == "pre" else 0
    embeddings = vocab_size * d * (1 if hp.shared_embeddings else 2)
    positions = hp.max_positions * d if hp.position_encoding == "learned" else 0
    layers = hp.num_encoder_layers * encoder_layer + hp.num_decoder_layers * decoder_layer
    return embeddings + positions + layers + final_norms


def adapter_parameters(hparams: HParams, rank: int) -> int:
    """The weights of a rank-`rank` LoRA adapter (`t2t_lite.model.lora.adapter_size`): rank *
    (prod(kernel.shape[:-1]) + kernel.shape[-1]) for each attention and feed-forward kernel."""
    hp, d = hparams, hparams.d_model
    h, dk, dv = hp.num_heads, hp.key_dim, hp.value_dim
    attention = 2 * (d * h + dk) + (d * h + dv) + (h * dv + d)  # q, k: [d, h, dk]; v; output
    feed_forward = 2 * (d + hp.d_ff)
    per_layer = hp.num_encoder_layers * (attention + feed_forward) + hp.num_decoder_layers * (
        2 * attention + feed_forward
    )
    return rank * per_layer


def estimate_bytes(
    hparams: HParams, vocab_size: int, adapter_rank: int = 0, training: bool = False
) -> int:
    """The memory the model is certain to take (the module's docstring lists what counts)."""
    weights = parameter_count(hparams, vocab_size)
    adapter = adapter_parameters(hparams, adapter_rank) if adapter_rank else 0
    table = hparams.max_positions * hparams.d_model if hparams.position_encoding != "learned" else 0
    trained = adapter if adapter_rank else weights
    copies = 3 + (1 if hparams.ema_momentum > 0 else 0)  # gradient, Adam's m and v, the EMA
    return FLOAT32 * (weights + adapter + table + (copies * trained if training else 0))


def check_fits(
    hparams: HParams, vocab_size: int, source: str, adapter_rank: int = 0, training: bool = False
) -> None:
    """Refuses, before it is built, a model (from `source`, e.g. a run's hparams.json) whose
    `estimate_bytes` exceeds the memory this process may take, naming both figures."""
    needed = estimate_bytes(hparams, vocab_size, adapter_rank, training)
    free, where = available_memory()
    if needed <= free:
        return
    what = f"{parameter_count(hparams, vocab_size):,} float32 weights"
    if adapter_rank:
        what += f" and a rank-{adapter_rank} adapter"
    if training:
        what += ", with the gradients and Adam's moments of training"
    raise ModelTooLargeError(
        f"{source}: the model it describes needs at least {_size(needed)} ({what}), but this "
        f"process may take {_size(free)} ({where}); use a machine with more memory, "
        "or a smaller model (d_model, d_ff, layers, vocabulary, adapter rank)"
    )


def _size(count: int) -> str:
    """Bytes as GB (MB below 0.1 GB), one decimal: 7.5 GB, 12.3 MB."""
    return f"{count / GB:.1f} GB" if count >= GB / 10 else f"{count / 1e6:.1f} MB"
