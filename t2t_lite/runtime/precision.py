"""`precision=auto`: bfloat16 matmuls where the hardware computes them natively, float32 elsewhere.

Mixed bfloat16 keeps float32 weights and computes in bfloat16. On a CPU with AVX-512 BF16 or AMX
it runs the matmuls up to twice as fast as float32 (docs/results/benchmarks.md) with the same
losses to the usual tolerance; on a CPU without them oneDNN emulates bfloat16 and is slower than
float32, and where TensorFlow does not run oneDNN (an AVX2-only CPU) its own bfloat16 products are
also coarser (measured on an AMD EPYC with AVX2 only: a 64 x 48 x 500 bfloat16 einsum off by 1.7 %
of its largest value, where one bfloat16 rounding of each sum costs at most 0.2 %).
So "auto" asks the hardware: a GPU of compute capability 8.0 or more (Ampere and later), or
Linux's CPU flags `avx512_bf16` / `amx_bf16` when there is no GPU, on a CPU only where
TensorFlow runs its oneDNN ops (`onednn_enabled`; TF_ENABLE_ONEDNN_OPTS=0 turns them off, and
TensorFlow's own bfloat16 kernels are then the slower ones even on those CPUs). A run records
the resolved policy in hparams.json, so decoding and export use what training used, except on a
machine without bfloat16 arithmetic, where a mixed bfloat16 run decodes in float32
(`decoding_precision`).
"""

from __future__ import annotations

from collections.abc import Iterable

import tensorflow as tf
from tensorflow.python.util import _pywrap_util_port

from t2t_lite.runtime.cpu import cpu_flags

AUTO = "auto"
NATIVE_BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
NATIVE_BF16_GPU_CAPABILITY = (8, 0)


def gpu_capabilities() -> list[tuple[int, int]]:
    """The compute capability of each visible GPU ((0, 0) where TensorFlow does not say)."""
    found = []
    for device in tf.config.list_physical_devices("GPU"):
        details = tf.config.experimental.get_device_details(device)
        found.append(tuple(details.get("compute_capability") or (0, 0)))
    return found


def onednn_enabled() -> bool:
    """Whether TensorFlow runs its oneDNN ops in this process: by default on x86 CPUs with
    AVX-512 VNNI, AVX-512 BF16 or AMX; TF_ENABLE_ONEDNN_OPTS=0 or 1 says otherwise."""
    return bool(_pywrap_util_port.IsMklEnabled())


def native_bfloat16(
    flags: Iterable[str] | None = None, gpus: list[tuple[int, int]] | None = None
) -> bool:
    """Whether the device that will compute (the GPUs if any, else the CPU) has bfloat16
    arithmetic; `flags` and `gpus` default to this machine's. This machine's CPU counts only
    where TensorFlow runs its oneDNN ops (`onednn_enabled`): without them, on an Intel Xeon
    with AMX, mixed bfloat16 decoded `make demo`'s model at 0.66x of float32's speed (greedy)
    and 0.79x (beam 4), docs/results/benchmarks.md."""
    gpus = gpu_capabilities() if gpus is None else gpus
    if gpus:
        return all(capability >= NATIVE_BF16_GPU_CAPABILITY for capability in gpus)
    if flags is None:
        return bool(NATIVE_BF16_CPU_FLAGS & cpu_flags()) and onednn_enabled()
    return bool(NATIVE_BF16_CPU_FLAGS & set(flags))


def decoding_precision(
    recorded: str, flags: Iterable[str] | None = None, gpus: list[tuple[int, int]] | None = None
) -> str:
    """The policy a run with hparams.precision `recorded` decodes in on this machine: the one it
    trained in (`resolve_precision`), except that a mixed_bfloat16 run decodes in float32
    where the device has no bfloat16 arithmetic (`native_bfloat16`). Its weights are float32
    either way (mixed precision keeps float32 variables), and there bfloat16 is the slower
    and coarser choice: on an AMD EPYC with AVX2 only, beam 4 ran at 0.65x of float32's speed
    and greedy search at 0.83x (docs/decoding.md, "The fastest settings on each CPU kind")."""
    policy = resolve_precision(recorded, flags, gpus)
    if policy == "mixed_bfloat16" and not native_bfloat16(flags, gpus):
        return "float32"
    return policy


def resolve_precision(
    precision: str, flags: Iterable[str] | None = None, gpus: list[tuple[int, int]] | None = None
) -> str:
    """The Keras dtype policy of hparams.precision: "auto" becomes mixed_bfloat16 or float32
    (`native_bfloat16`); other values are returned as they are."""
    if precision != AUTO:
        return precision
    return "mixed_bfloat16" if native_bfloat16(flags, gpus) else "float32"
