"""int8 decoding: the weights of a restored float model quantized in place.

`quantize_model(model, "int8")` runs Keras 3's own `Model.quantize` over the layers that hold
the matrices: every attention projection and feed-forward layer (Keras `EinsumDense` and
`Dense`: int8 kernels with one float32 scale per output channel, abs-max) and every
`SharedEmbedding` (int8 rows with one scale per row, for the lookups and the pre-softmax
logits; t2t_lite's own `SharedEmbedding.quantize`). Keras' quantization is weight-only here
(`Int8QuantizationConfig` without an activation quantizer): the layers multiply float inputs by
the int8 weights cast to float.

A model computing in float32 then has each of those products computed in 8 bits where
TensorFlow runs oneDNN on the CPU (`t2t_lite.model.layers.int8_product`): each input row is
quantized to uint8 and oneDNN multiplies it by the int8 weights with int32 sums. That decoded
1.46x (beam 4) and 1.41x (greedy) float32's tokens/s in `make bench` (2026-11-25), where the
weight-only products ran at 0.89x and 0.85x; it lost 0.45 BLEU on the demo's test set against
float32 (docs/decoding.md). A bfloat16 model keeps the weight-only products in bfloat16, which
were faster there. Keras' own int8 x int8 path ("int8" with its default activation quantizer)
decoded 2.3x slower than float32: TensorFlow's plain int8 matmul is no faster than its float
one.

Layer norms, biases, position tables and the attention products (softmax(QK^T)V, over
activations) stay float. `Run.restore(..., quantize="int8")` applies it after the float
checkpoint is restored, so t2t-decode, t2t-export, t2t-serve and t2t-visualize all decode the
same int8 model.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

import keras

from t2t_lite.hparams.search_settings import QUANTIZE_MODES
from t2t_lite.model.ensemble import members
from t2t_lite.model.layers import SharedEmbedding, int8_product
from t2t_lite.model.layers.projection import Projection

# The layer types that `quantize_model` quantizes (Keras refuses its own subclasses).
QUANTIZED_TYPES = (keras.layers.Dense, keras.layers.EinsumDense, Projection, SharedEmbedding)


def check_mode(mode: str | None) -> str:
    """`mode` ("none" for None) if it is one of QUANTIZE_MODES; a ValueError names it otherwise."""
    mode = mode or "none"
    if mode not in QUANTIZE_MODES:
        raise ValueError(f"--quantize={mode!r} is not one of {', '.join(QUANTIZE_MODES)}")
    return mode


def quantize_model(model, mode: str | None) -> None:
    """Quantizes a built, restored `Transformer` (or each member of an `Ensemble`) in place;
    mode "none" (or None) leaves it as it is."""
    if check_mode(mode) == "none":
        return
    for member in members(model):
        if member.compute_dtype == "float16":
            # Keras refuses int8 with float16 compute (int8 sums overflow its range).
            raise ValueError(
                f"--quantize={mode} needs a float32 or bfloat16 model; this run computes in "
                f"float16 (dtype policy {member.dtype_policy.name})"
            )
        weights_only = keras.quantizers.Int8QuantizationConfig(
            weight_quantizer=None,
            activation_quantizer=None,  # weights: abs-max per channel
        )
        with one_garbage_collection():
            member.quantize(config=weights_only, filters=lambda x: type(x) in QUANTIZED_TYPES)
        for layer in quantized_layers(member):
            int8_product.prepare(layer)  # 8-bit products where oneDNN has them


@contextlib.contextmanager
def one_garbage_collection() -> Iterator[None]:
    """Runs `gc.collect` once at the end instead of at every call inside. Keras' `Layer`
    collects garbage whenever a variable attribute is deleted, which quantizing a layer does:
    0.2 s per layer with a model and TensorFlow loaded, 9 s of the demo's 49 layers."""
    collect = gc.collect
    gc.collect = lambda *args, **kwargs: 0
    try:
        yield
    finally:
        gc.collect = collect
        gc.collect()


def quantized_layers(model: keras.Model) -> list[keras.layers.Layer]:
    """The layers of `model` that hold quantized weights, in model order. Keras 3 has no public
    iterator over nested layers (`Model.layers` lists the top level only); `_flatten_layers` is
    the one its own `Model.quantize` walks, so both see the same layers."""
    return [layer for layer in model._flatten_layers() if layer.quantization_mode is not None]


def multiplies_in_8_bits(model) -> bool:
    """Whether any layer of `model` (of each member of an `Ensemble`) runs its product through
    oneDNN's 8-bit op (`int8_product.prepare`): an op that XLA cannot compile."""
    return any(
        int8_product.prepared(layer) for m in members(model) for layer in quantized_layers(m)
    )
