"""LoRA adapters on a Transformer (Hu et al., 2021), by Keras 3's own LoRA.

`enable(model, rank)` freezes every weight of a built model and calls Keras'
`layer.enable_lora(rank)` on the projections of its attention and feed-forward layers (the
`Dense` and `EinsumDense` layers inside `MultiHeadAttention` and `FeedForward`); the shared
embedding, the layer norms and the biases stay frozen. Keras then computes each adapted kernel
as `kernel + (alpha / rank) * A @ B`, with A [kernel.shape[:-1] + (rank,)] (He-uniform) and
B [rank, kernel.shape[-1]] (zeros, so that a new adapter leaves the model as it was), both
float32. A rank-r adapter therefore trains r * (prod(kernel.shape[:-1]) + kernel.shape[-1])
weights per projection (`adapter_size`): r * (in + out) for a Dense kernel [in, out] and for
an attention output [h, d, d_model]; r * (d_model * h + d) for a query, key or value kernel
[d_model, h, d], whose A Keras keeps per head.

`adapter_weights(model)` is what an adapter run checkpoints under the key "model": the A and
B variables alone, named by the layer's path in the model. `merge(model)` folds them into
the kernels and removes them, leaving a plain Transformer (to export, or to quantize).
"""

from __future__ import annotations

import hashlib
import math

import keras
import numpy as np
import tensorflow as tf

from t2t_lite.model.layers.attention import MultiHeadAttention
from t2t_lite.model.layers.feed_forward import FeedForward
from t2t_lite.model.quantize import one_garbage_collection

ADAPTED_TYPES = (keras.layers.Dense, keras.layers.EinsumDense)
OWNER_TYPES = (MultiHeadAttention, FeedForward)


def adapted_layers(model: keras.Model) -> list[tuple[str, keras.layers.Layer]]:
    """(name, layer) of every projection LoRA adapts, in the model's order; the name is the
    layer's path without the model's own name (e.g. encoder/layer_0/self_attention/query), the
    same for every instance of one hparams set."""
    found = []
    for owner in model._flatten_layers(include_self=False):
        if not isinstance(owner, OWNER_TYPES):
            continue
        for layer in owner._flatten_layers(include_self=False):
            if isinstance(layer, ADAPTED_TYPES):
                found.append((layer.path.split("/", 1)[1], layer))
    return found


def is_adapted(model: keras.Model) -> bool:
    """Whether LoRA is enabled on `model` (an Ensemble or other non-Keras model: False)."""
    if not isinstance(model, keras.Model):
        return False
    return any(layer.lora_enabled for _, layer in adapted_layers(model))


def enable(model: keras.Model, rank: int, alpha: float | None = None) -> None:
    """Freezes every weight of the built `model` and enables rank-`rank` LoRA (scale
    alpha / rank; alpha defaults to rank, Keras' default) on its adapted projections."""
    if rank <= 0:
        raise ValueError(f"--lora_rank must be positive, got {rank}")
    for weight in model.weights:
        weight.trainable = False
    for _, layer in adapted_layers(model):
        layer.enable_lora(rank, lora_alpha=alpha)


def adapter_size(model: keras.Model, rank: int) -> int:
    """The weights a rank-`rank` adapter trains on `model`:
    sum over the adapted projections of rank * (prod(kernel.shape[:-1]) + kernel.shape[-1])."""
    total = 0
    for _, layer in adapted_layers(model):
        shape = tuple(layer.kernel.shape)
        total += rank * (math.prod(shape[:-1]) + shape[-1])
    return total


class AdapterWeights(tf.Module):
    """The LoRA variables of an adapted model, what an adapter run's checkpoints hold under
    "model": `layers[name]` = {"a": A, "b": B}. `weights` lists them in the model's order, so
    that the code that averages or snapshots a model's weights takes this object too."""

    def __init__(self, model: keras.Model):
        super().__init__(name="adapter")
        pairs = [(name, layer) for name, layer in adapted_layers(model) if layer.lora_enabled]
        if not pairs:
            raise ValueError("the model has no LoRA adapter (lora.enable was not called)")
        self.layers = {
            name: {"a": layer.lora_kernel_a, "b": layer.lora_kernel_b} for name, layer in pairs
        }
        ordered = [v for _, layer in pairs for v in (layer.lora_kernel_a, layer.lora_kernel_b)]
        object.__setattr__(self, "_ordered", ordered)  # untracked: saved once, under `layers`

    @property
    def weights(self) -> list:
        return list(self._ordered)

    @property
    def trainable_variables(self) -> list:
        return list(self._ordered)


def adapter_weights(model: keras.Model) -> AdapterWeights:
    """The adapted `model`'s LoRA variables, as a checkpoint holds them."""
    return AdapterWeights(model)


def checkpointed(model):
    """What a checkpoint of `model` holds under "model": its adapter weights when it is
    adapted, the model itself otherwise."""
    return AdapterWeights(model) if is_adapted(model) else model


def base_weights(model: keras.Model) -> list:
    """The model's weights other than the LoRA ones, in the model's order."""
    adapter = {id(v) for _, layer in adapted_layers(model) if layer.lora_enabled
               for v in (layer.lora_kernel_a, layer.lora_kernel_b)}  # fmt: skip
    return [w for w in model.weights if id(w) not in adapter]


def weights_sha256(model: keras.Model) -> str:
    """SHA-256 of the base weights' shapes, dtypes and values in the model's order: a model's
    identity that does not depend on the files or folder its checkpoint came from."""
    digest = hashlib.sha256()
    for weight in base_weights(model):
        value = np.ascontiguousarray(keras.ops.convert_to_numpy(weight.value))
        digest.update(f"{value.dtype.str}{value.shape};".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def lora_delta(layer: keras.layers.Layer) -> tf.Tensor:
    """(alpha / rank) * A @ B of an adapted layer, float32 with its kernel's shape."""
    product = tf.matmul(layer.lora_kernel_a.value, layer.lora_kernel_b.value)
    return (layer.lora_alpha / layer.lora_rank) * product  # A [..., r] @ B [r, n] --> kernel


def merge(model: keras.Model) -> None:
    """Folds every adapter into its kernel (kernel + (alpha / rank) * A @ B, in float32) and
    removes the LoRA variables, leaving a plain model whose weights can be exported or
    quantized. Removing the variables is what Keras' own `quantize` does to a kernel (and
    Keras collects garbage at each removal: once here, as in `quantize_model`)."""
    with one_garbage_collection():
        for _, layer in adapted_layers(model):
            if not layer.lora_enabled:
                continue
            kernel = layer._kernel
            kernel.assign(kernel.value + tf.cast(lora_delta(layer), kernel.dtype))
            layer._tracker.unlock()
            del layer.lora_kernel_a
            del layer.lora_kernel_b
            layer._tracker.lock()
            layer.lora_enabled = False
            layer.lora_rank = None
