"""int8 decoding: the weights of a restored float model quantized in place.

`quantize_model(model, "int8")` runs Keras 3's own `Model.quantize` over the layers that hold
the matrices: every attention projection and feed-forward layer (Keras `EinsumDense` and
`Dense`: int8 kernels with one float32 scale per output channel, abs-max) and every
`SharedEmbedding` (int8 rows with one scale per row, for the lookups and the pre-softmax
logits; t2t_lite's own `SharedEmbedding.quantize`). The quantization is weight-only (Keras'
`Int8QuantizationConfig` without an activation quantizer): inputs stay in the model's compute
precision and each product is divided by the weights' scales. Quantizing the inputs too (Keras'
default for "int8") made decoding 2.3x slower on a CPU, since TensorFlow multiplies int8 by int8
no faster than floats and the per-position quantization adds a dozen small ops per layer; the
weight-only model decodes at 0.8x to 0.9x float32's speed and errs less (docs/decoding.md).

Layer norms, biases, position tables and the attention products (softmax(QK^T)V, over
activations) stay float. `Run.restore(..., quantize="int8")` applies it after the float
checkpoint is restored, so t2t-decode, t2t-export, t2t-visualize and t2t-serve all decode the
same int8 model.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

import keras

from t2t_lite.decode.search_flags import QUANTIZE_MODES
from t2t_lite.model.layers import SharedEmbedding

# The layer types that `quantize_model` quantizes (Keras refuses its own subclasses).
QUANTIZED_TYPES = (keras.layers.Dense, keras.layers.EinsumDense, SharedEmbedding)


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
    for member in getattr(model, "models", (model,)):  # an Ensemble's members, or the model
        if member.compute_dtype == "float16":
            # Keras refuses int8 with float16 compute (int8 sums overflow its range).
            raise ValueError(
                f"--quantize={mode} needs a float32 or bfloat16 model; this run computes in "
                f"float16 (precision={member.hparams.precision})"
            )
        weights_only = keras.quantizers.Int8QuantizationConfig(
            weight_quantizer=None,
            activation_quantizer=None,  # weights: abs-max per channel
        )
        with _one_garbage_collection():
            member.quantize(config=weights_only, filters=lambda x: type(x) in QUANTIZED_TYPES)


@contextlib.contextmanager
def _one_garbage_collection() -> Iterator[None]:
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
    """The layers of `model` that hold quantized weights, in model order."""
    return [layer for layer in model._flatten_layers() if layer.quantization_mode is not None]
