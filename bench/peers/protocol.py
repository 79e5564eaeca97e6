"""What every benchmark process shares: the one configuration, the data, timing and the result line.

Standard library and NumPy only, since each peer runs in its own virtual environment (different
TensorFlow versions, PyTorch, CTranslate2) where t2t_lite is not installed. A peer script imports
this module from its own folder, times its framework and prints one `RESULT {json}` line that
bench/run_bench.py parses.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

# The one configuration every framework runs (issue 7).
LAYERS = 2  # encoder and decoder layers each
D_MODEL = 256
HEADS = 4
D_FF = 1024
VOCAB = 8000  # shared by source and target, tied to the pre-softmax projection
BATCH = 64  # sentences per batch
SOURCE_LENGTH = 32  # tokens per source sentence, EOS included, no padding
TARGET_LENGTH = 32  # tokens per target sentence (and forced output length when decoding)
DROPOUT = 0.0
LABEL_SMOOTHING = 0.1
BEAM = 4
ALPHA = 0.6
PAD_ID, EOS_ID = 0, 1
TARGET_TOKENS = BATCH * TARGET_LENGTH  # per training step and per decoded batch


def batch(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random source and target ids, int32 [BATCH, length] in 2..VOCAB-1, EOS last, no padding."""
    rng = np.random.default_rng(seed)
    source = rng.integers(2, VOCAB, size=(BATCH, SOURCE_LENGTH), dtype=np.int32)
    target = rng.integers(2, VOCAB, size=(BATCH, TARGET_LENGTH), dtype=np.int32)
    source[:, -1] = EOS_ID
    target[:, -1] = EOS_ID
    return source, target


def set_shape(batch_size: int, length: int) -> None:
    """Changes the batch shape of this process: `batch_size` sentences of `length` source and
    `length` target tokens (the cost curves of bench/curves.py)."""
    global BATCH, SOURCE_LENGTH, TARGET_LENGTH, TARGET_TOKENS
    if batch_size < 1 or length < 2:
        raise ValueError(f"--batch={batch_size} --length={length}: need a batch >= 1, length >= 2")
    BATCH, SOURCE_LENGTH, TARGET_LENGTH = batch_size, length, length
    TARGET_TOKENS = BATCH * TARGET_LENGTH


def parse_args(tasks: tuple[str, ...], dtypes: tuple[str, ...]) -> argparse.Namespace:
    """--task, --dtype, --steps (timed), --warmup (untimed, traces and compiles), and the batch
    shape, --batch and --length (the configuration above unless given)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", choices=tasks, required=True)
    parser.add_argument("--dtype", choices=dtypes, default=dtypes[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--batch", type=int, default=BATCH, help="sentences per batch")
    parser.add_argument("--length", type=int, default=SOURCE_LENGTH, help="tokens per sentence")
    args = parser.parse_args()
    set_shape(args.batch, args.length)
    return args


def time_calls(run: Callable[[], object], steps: int, warmup: int, label: str) -> list[float]:
    """Seconds of each of `steps` calls of `run` (which must block until done), after `warmup`
    untimed calls. Prints a progress line per call to stderr."""
    for _ in range(warmup):
        run()
    seconds = []
    for i in range(steps):
        start = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - start)
        rate = TARGET_TOKENS / seconds[-1]
        print(
            f"{label}: {i + 1}/{steps} {seconds[-1]:.3f} s, {rate:,.0f} tokens/s", file=sys.stderr
        )
    return seconds


def report(seconds: list[float], tokens: int | None = None, **extra) -> None:
    """Prints the result line: target tokens/s over the median call (`tokens` per call,
    TARGET_TOKENS unless given), plus `extra` fields."""
    median = statistics.median(seconds)
    tokens = TARGET_TOKENS if tokens is None else tokens
    result = {"tokens_per_s": tokens / median, "median_s": median, "calls": len(seconds), **extra}
    print("RESULT " + json.dumps(result), flush=True)
