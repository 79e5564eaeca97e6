"""Products with an int8 weight matrix computed in 8 bits, by oneDNN's u8 x s8 matmul.

After `Model.quantize` (`t2t_lite.model.quantize`), a Dense or EinsumDense layer holds an int8
kernel W_q [k, n] with one float32 scale s per output column (W ~ W_q / s), and Keras multiplies
the float inputs by W_q cast to float ("weight-only" int8: 4x smaller weights, float products).
TensorFlow's oneDNN build on x86 has a product in 8 bits, `QuantizedMatMulWithBiasAndDequantize`:
unsigned 8-bit inputs times signed 8-bit weights, summed in int32 and returned as float32. For
it each input row x [k] is quantized as well:

    a = x / m + 1,  m = max |x| over the row        (a in [0, 2], non-negative for uint8)
    a_q = round(a * 255 / 2)                        (uint8; TensorFlow's QuantizeV2, SCALED)
    x W = m (a - 1) W_q / s ~ m (a_q (2 / 255) W_q - colsum(W_q)) / s

The op applies the factor 2 / 255 and adds the bias -colsum(W_q) (column sums of the int8
weights, computed once by `prepare`); the row scale m and the column scale 1 / s follow. The
inputs' rounding error is at most m / 255 per entry. `tests/model/test_int8_product.py` checks
the op against this formula in NumPy, and each layer against its weight-only self.

The formula needs exact integer sums, and not every oneDNN kernel gives them: those for CPUs
without VNNI sum pairs of products in int16 and clip (`int8_kernel`). So `check` runs the op
once per process on probes whose exact answer NumPy knows, and `available` says yes only where
the op exists and matched. It exists where TensorFlow runs its oneDNN ops: by default only on
x86 CPUs with AVX-512 VNNI, AVX-512 BF16 or AMX (TF_ENABLE_ONEDNN_OPTS=1 turns them on
elsewhere). Where they are off, as on an AMD EPYC with AVX2 only, TensorFlow's op returns an
empty tensor without an error, which `check` reads as no op. Elsewhere, and for a layer
`prepare` has not seen, `apply` calls the layer as Keras does: the same int8 weights times float
inputs, which loses no accuracy and only speed.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import keras
import numpy as np
import tensorflow as tf

from t2t_lite.model.layers import int8_kernel, projection

# Where `prepare` keeps a layer's constants: (negated column sums [n], 1 / s [n], and for a
# `SharedEmbedding` its int8 matrix transposed to [d_model, vocab]), float32 / int8 tensors.
_ATTRIBUTE = "_t2t_int8_product"


# The largest distance from exact integer sums that `check` accepts, in units of one input step
# times the largest weight (2 / 255 x 127): float32's rounding of exact int32 sums stays below
# 0.03 on the probes; one lost input bit or one clipped pair sum costs about 1, and measured
# kernels that clip missed by over 100 (tests/model/test_int8_kernel.py).
EXACT_TOLERANCE = 0.5
# The probes of `check`: rows x contracted x output sizes, few rows (a decoding step) and many (a
# whole batch teacher-forced), since oneDNN may dispatch them to different kernels.
PROBES = ((7, 48, 30), (64, 256, 64), (1600, 64, 24), (300, 512, 48), (4096, 32, 16))


# What int8 does where no product runs in 8 bits, and what speeds decoding there instead.
WEIGHT_ONLY = (
    "float inputs times the int8 weights, 4x smaller weights and no faster than float32; what "
    "speeds decoding on this CPU is --shortlist (e.g. 100,50) and, on files of many batches, "
    "--inter_threads=2, or t2t-export --format=ctranslate2"
)


@dataclasses.dataclass(frozen=True)
class Check:
    """What `check` found: the oneDNN ISA expected from the CPU (`int8_kernel.isa`), whether the
    op ran, and its largest distance from the exact sums (`sums_error`) and from the exact input
    rounding (in input steps: at most 0.5 when rounded to the nearest)."""

    isa: str
    runs: bool
    sums_error: float = math.inf
    rounding_error: float = math.inf

    @property
    def exact(self) -> bool:
        """Whether the op computes what the module docstring says, to float32's rounding."""
        return self.runs and self.sums_error <= EXACT_TOLERANCE and self.rounding_error <= 0.501

    def describe(self) -> str:
        """One line for the log of `--quantize=int8`; where no product runs in 8 bits, it says
        that int8 saves memory only and what speeds decoding on this CPU instead."""
        kernel = f"oneDNN's {self.isa} kernel ({int8_kernel.sums(self.isa)} sums)"
        if self.exact:
            return f"8-bit products by {kernel}, exact on this CPU"
        if not self.runs:
            why = (
                "no 8-bit product op here (TensorFlow runs its oneDNN ops by default only on CPUs "
                "with AVX-512 VNNI, AVX-512 BF16 or AMX)"
            )
        else:
            why = (
                f"{kernel} is not exact on this CPU (sums off by up to {self.sums_error:.3g} "
                f"x 2/255 x 127, inputs by {self.rounding_error:.3g} steps)"
            )
        return f"{why}: {WEIGHT_ONLY}"


@functools.cache
def check() -> Check:
    """Runs the op on `PROBES` (random inputs, int8 weights, and one row and column that clip a
    16-bit pair sum) and compares its inputs and sums with exact integer arithmetic in NumPy."""
    name = int8_kernel.isa()
    rng = np.random.default_rng(0)
    sums_error = rounding_error = 0.0
    for rows, k, n in PROBES:
        x, kernel = probe(rng, rows, k, n)
        x = tf.constant(x)
        try:
            shifted, low, high, row_max = _quantize_rows(x)
            found = _integer_product(shifted, low, high, tf.constant(kernel), _neg_sums(kernel))
        except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError, tf.errors.UnknownError):
            return Check(name, runs=False)
        if found.shape != (rows, n):  # oneDNN off: TensorFlow's op returns an empty tensor
            return Check(name, runs=False)
        a_q = tf.bitcast(shifted, tf.uint8).numpy()
        exact_a = (x.numpy() / row_max.numpy() + 1.0).astype(np.float64) * 127.5
        rounding_error = max(rounding_error, float(np.abs(a_q - exact_a).max()))
        sums_error = max(sums_error, integer_sums_error(a_q, kernel, found.numpy()))
    return Check(name, runs=True, sums_error=sums_error, rounding_error=rounding_error)


def probe(rng: np.random.Generator, rows: int, k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Inputs x [rows, k] float32 of rows at several scales, and an int8 kernel [k, n] whose first
    column is all 127: x's first row quantizes to 255 everywhere, and 2 x 255 x 127 clips an
    int16 pair sum."""
    x = rng.normal(size=(rows, k)) * rng.uniform(0.1, 5.0, (rows, 1))
    x[0] = 1.0
    kernel = rng.integers(-127, 128, (k, n)).astype(np.int8)
    kernel[:, 0] = 127
    return x.astype(np.float32), kernel


def available() -> bool:
    """Whether this TensorFlow runs the 8-bit product (oneDNN on an x86 CPU) and its sums are
    exact on this CPU (`check`); elsewhere the int8 layers keep Keras' weight-only products."""
    return check().exact


def integer_sums_error(a_q: np.ndarray, kernel: np.ndarray, found: np.ndarray) -> float:
    """How far `found` [rows, n], an op's a_q (2 / 255) W_q - colsum(W_q) for a_q [rows, k]
    (uint8) and W_q [k, n] (int8), is from the exact integer sums: the largest difference in
    units of one input step times the largest weight, 2 / 255 x 127."""
    kernel = kernel.astype(np.float64)
    exact = a_q.astype(np.float64) @ kernel * (2 / 255) - kernel.sum(axis=0)
    return float(np.abs(found - exact).max() / (2 / 255 * 127))


def prepare(layer: keras.layers.Layer) -> bool:
    """Readies an int8-quantized Dense, EinsumDense or SharedEmbedding that computes in float32
    for `apply` (`logits`), if the 8-bit product is `available`; returns whether it did. The
    kernel's leading axes must be the ones its inputs contract, as in every t2t_lite layer
    ("ad,dhk->ahk", "ahv,hvd->ad", Dense)."""
    if layer.quantization_mode != "int8" or layer.compute_dtype != "float32" or not available():
        return False  # a bfloat16 model keeps its bfloat16 products (faster; docs/decoding.md)
    if hasattr(layer, "embeddings_scale"):  # SharedEmbedding: logits x E^T, a scale per row of E
        # --> [d_model, vocab], transposed in NumPy: TensorFlow's int8 Transpose logs an error
        # line ("oneDNN supports DT_INT8 only on platforms with AVX-512") on every x86 CPU.
        kernel = tf.constant(np.ascontiguousarray(layer.embeddings.numpy().T))
        scale = tf.convert_to_tensor(layer.embeddings_scale)
    else:
        kernel = _kernel_2d(layer, tf.convert_to_tensor(layer.kernel))
        scale = tf.convert_to_tensor(layer.kernel_scale)
    column_sums = tf.reduce_sum(tf.cast(kernel, tf.float32), axis=0)  # --> [n]
    inverse_scale = 1.0 / tf.reshape(scale, [-1])  # --> [n]
    if not hasattr(layer, "embeddings_scale"):
        kernel = None  # a Dense or EinsumDense reads its own variable at each call: no copy
    # Constants, not weights: set past Keras' attribute tracking.
    object.__setattr__(layer, _ATTRIBUTE, (-column_sums, inverse_scale, kernel))
    return True


def prepared(layer: keras.layers.Layer) -> bool:
    """Whether `prepare` readied `layer`: its products run in 8 bits."""
    return getattr(layer, _ATTRIBUTE, None) is not None


def apply(layer: keras.layers.Layer, x: tf.Tensor) -> tf.Tensor:
    """`layer(x)` for a Dense or EinsumDense layer, x [..., contracted axes]: by the 8-bit product
    where `prepare` readied the layer, by the layer itself otherwise."""
    constants = getattr(layer, _ATTRIBUTE, None)
    if constants is None:
        return layer(x)
    neg_column_sums, inverse_scale, _ = constants
    x = tf.convert_to_tensor(x)
    kernel = _kernel_2d(layer, layer.kernel)  # --> [k, n], the int8 variable itself
    lead = tf.shape(x)[: x.shape.rank - _contracted_rank(layer)]
    y = _product(tf.reshape(x, [-1, kernel.shape[0]]), kernel, neg_column_sums, inverse_scale)
    y = tf.reshape(y, tf.concat([lead, layer.kernel.shape[_contracted_rank(layer) :]], 0))
    if getattr(layer, "bias", None) is not None:
        y += tf.cast(layer.bias, tf.float32)
    if getattr(layer, "activation", None) is not None:
        y = layer.activation(y)
    return tf.cast(y, layer.compute_dtype)


def logits(
    embedding: keras.layers.Layer, x: tf.Tensor, columns: tf.Tensor | None = None
) -> tf.Tensor | None:
    """x [rows, d_model] times the transposed int8 embedding matrix: [rows, vocab] float32 by
    the 8-bit product, or None where `prepare` has not readied `embedding`. With `columns`
    [n] (ids of a vocabulary shortlist), only those columns: [rows, n]."""
    constants = getattr(embedding, _ATTRIBUTE, None)
    if constants is None:
        return None
    neg_column_sums, inverse_scale, kernel = constants
    if columns is not None:
        kernel = tf.gather(kernel, columns, axis=1)
        neg_column_sums = tf.gather(neg_column_sums, columns)
        inverse_scale = tf.gather(inverse_scale, columns)
    return _product(x, kernel, neg_column_sums, inverse_scale)


def _product(x, kernel, neg_column_sums, inverse_scale):
    """x [rows, k] float, kernel [k, n] int8 --> x kernel inverse_scale [rows, n] float32, with
    x quantized to uint8 per row (module docstring)."""
    shifted, low, high, row_max = _quantize_rows(x)
    return _integer_product(shifted, low, high, kernel, neg_column_sums) * row_max * inverse_scale


def _quantize_rows(x):
    """x [rows, k] --> (a_q [rows, k] quint8, its range 0 and 2, the row maxima m [rows, 1])."""
    x = tf.cast(x, tf.float32)
    row_max = tf.reduce_max(tf.abs(x), axis=1, keepdims=True)  # --> [rows, 1]
    row_max = tf.maximum(row_max, np.finfo(np.float32).tiny)  # an all-zero row stays zero
    shifted, low, high = tf.raw_ops.QuantizeV2(
        input=x / row_max + 1.0, min_range=0.0, max_range=2.0, T=tf.quint8, mode="SCALED"
    )  # `tf.quantization.quantize`'s op, without its deprecation warning
    return shifted, low, high, row_max


def _integer_product(shifted, low, high, kernel, neg_column_sums):
    """a_q [rows, k] quint8 in [low, high], kernel [k, n] int8 --> a_q (2 / 255) W_q - colsum(W_q)
    [rows, n] float32, by oneDNN's u8 x s8 op."""
    return tf.raw_ops.QuantizedMatMulWithBiasAndDequantize(
        a=shifted,
        b=tf.bitcast(kernel, tf.qint8),
        bias=neg_column_sums,
        min_a=low,
        max_a=high,
        min_b=-127.0,  # SCALED: the int8 q stands for q itself
        max_b=127.0,
        min_freezed_output=-1.0,  # unused by a float32 output
        max_freezed_output=1.0,
        Toutput=tf.float32,
        input_quant_mode="SCALED",
    )


def _neg_sums(kernel: np.ndarray) -> tf.Tensor:
    """-colsum(W_q) [n] float32 of an int8 kernel [k, n]."""
    return tf.constant(-kernel.astype(np.float64).sum(axis=0), tf.float32)


def _contracted_rank(layer) -> int:
    """How many leading axes of the layer's kernel its inputs contract: an EinsumDense's
    (`projection.contracted_rank`); a Dense's one."""
    equation = getattr(layer, "equation", None)
    return projection.contracted_rank(equation) if equation else 1


def _kernel_2d(layer, kernel) -> tf.Tensor:
    """A Dense or EinsumDense kernel as [contracted size, output size]."""
    contracted = _contracted_rank(layer)
    return tf.reshape(kernel, [math.prod(kernel.shape[:contracted]), -1])
