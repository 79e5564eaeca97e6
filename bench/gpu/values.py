"""The starting values of the exported training step's arguments, and the benchmark batch, made
the same way on both sides:
by bench/gpu/export_step.py (with TensorFlow) and bench/gpu/run_step.py (without). NumPy only.

The weights are not shipped (transformer_base with its Adam slots is about 750 MB). A manifest
record per argument says how to remake it: a constant `fill` where TensorFlow's initial value is
constant (LayerNorm gains, Adam slots, counters), `uniform` numbers from a NumPy generator
seeded by the argument's index otherwise, or `constant`, a captured tensor stored in
constants.npz under `arg{index}` (the sinusoid table).
"""

from __future__ import annotations

import os

import numpy as np


def batch(sentences: int, length: int, vocab: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded source and target ids, int32 [sentences, length] in 2..vocab-1, EOS (1) last, no
    padding: the batch of t2t_lite's exported step and of the GPU peers."""
    rng = np.random.default_rng(length)
    source, target = (rng.integers(2, vocab, (sentences, length), dtype=np.int32) for _ in "st")
    source[:, -1] = target[:, -1] = 1
    return source, target


def uniform_values(index: int, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """U(-limit, limit) with limit = sqrt(3 / fan_in), fan_in the product of all axes but the
    last: a scale like Glorot's, so that the activations stay in range."""
    fan_in = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
    rng = np.random.default_rng(1000 + index)
    return ((rng.random(shape) * 2 - 1) * np.sqrt(3.0 / fan_in)).astype(dtype)


def initial_values(folder: str, records: list[dict]) -> list[np.ndarray]:
    """The argument values the manifest `records` describe, in argument order."""
    constants = np.load(os.path.join(folder, "constants.npz"))
    values = []
    for index, record in enumerate(records):
        shape, dtype = tuple(record["shape"]), record["dtype"]
        if record["kind"] == "constant":
            values.append(constants[f"arg{index}"])
        elif "fill" in record:
            values.append(np.full(shape, record["fill"], dtype))
        else:
            values.append(uniform_values(index, shape, dtype))
    return values
