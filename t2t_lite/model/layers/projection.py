"""The attention projections' layer: Keras' `EinsumDense`, with its product as one 2-D matmul."""

from __future__ import annotations

import math

import keras
import tensorflow as tf


def contracted_rank(equation: str) -> int:
    """How many of an EinsumDense kernel's letters its input contracts: those the input has and
    the output has not ("ad,dhk->ahk": 1; "ahv,hvd->ad": 2)."""
    operands, output = equation.split("->")
    inputs, kernel = operands.split(",")
    return sum(1 for letter in kernel if letter in inputs and letter not in output)


class Projection(keras.layers.EinsumDense):
    """`EinsumDense` for equations that contract the input's trailing axes with the kernel's
    leading ones, in order, and keep the rest: "ad,dhk->ahk" (d_model into heads) and
    "ahv,hvd->ad" (heads into d_model). Its product is [rows, K] x [K, N] by `tf.matmul`, on 2-D
    views of the input and of `self.kernel` (LoRA merged in, cast by Keras' autocast), and
    the result takes the kernel's trailing axes again.

    TensorFlow's oneDNN einsum (`_MklEinsum`) computes the same product 2-3x slower than its
    matmul on the few rows of a decoding step (docs/results/benchmarks.md). Training
    (`training=True`, which Keras passes down from the model's call) keeps the einsum: there the
    matmul measured no faster, and trained models stay what they were, to the rounding.

    The variables, their names and checkpoints, `Model.quantize` and `enable_lora` are Keras'
    own; a quantized layer keeps Keras' quantized call, and other equations Keras' einsum. It
    is not registered for serialization: `MultiHeadAttention` builds it from its own config,
    and nothing serializes it alone.
    """

    def build(self, input_shape):
        super().build(input_shape)
        operands, output = self.equation.split("->")
        inputs, kernel = operands.split(",")
        rank = contracted_rank(self.equation)
        lead = inputs[: len(inputs) - rank]
        self._contracted_rank = rank
        # The 2-D form holds when the contracted letters end the input and begin the kernel in
        # the same order, and the output is the input's other letters and then the kernel's.
        self._as_matmul = (
            rank > 0
            and inputs[len(inputs) - rank :] == kernel[:rank]
            and output == lead + kernel[rank:]
            and not self.bias_axes
        )

    def quantize(self, mode=None, type_check=True, config=None):
        """Keras' `EinsumDense.quantize`, which refuses subclasses whose call it cannot vouch
        for; once quantized this layer runs Keras' own quantized call (`call` is not used)."""
        if type_check and type(self) is not Projection:
            raise NotImplementedError(f"{type(self).__name__} does not quantize")
        super().quantize(mode, type_check=False, config=config)

    def call(self, inputs, training=None):
        if training or not self._as_matmul:
            # Training keeps Keras' einsum: the matmul measured no faster there, and training
            # stays as it was, to the rounding.
            return super().call(inputs, training=training)
        kernel, rank = self.kernel, self._contracted_rank
        contracted, trailing = math.prod(kernel.shape[:rank]), kernel.shape[rank:]
        lead_rank = inputs.shape.rank - rank
        # The attention layers pass 2-D views (one lead axis): then the rows need no reshape
        # where one axis is contracted, and the output a static one or none, so a traced step
        # holds no shape arithmetic for them.
        rows = inputs if lead_rank == 1 and rank == 1 else tf.reshape(inputs, [-1, contracted])
        product = tf.matmul(rows, tf.reshape(kernel, [contracted, -1]))  # --> [rows, N]
        if lead_rank == 1:
            output = product if len(trailing) == 1 else tf.reshape(product, [-1, *trailing])
        else:
            lead = tf.shape(inputs)[:lead_rank]
            output = tf.reshape(product, tf.concat([lead, trailing], axis=0))
        return output if self.activation is None else self.activation(output)
