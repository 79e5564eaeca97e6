"""How a process shares its CPUs: batches searched at once, and threads per op.

A search step is hundreds of small ops (docs/results/benchmarks.md), and an op split over every CPU
spends much of its time starting and joining threads. On a CPU, more sentences per second come from
searching `inter_threads` batches at once, each op on `cpus // inter_threads` threads, as
CTranslate2 (`inter_threads`, `intra_threads`) and Marian (`--cpu-threads`) do; one batch alone
then runs on fewer threads, so this pays for files of many batches, not for a single line.

Training is the other way round on a machine of two CPUs: a training step of a narrow model is
a chain of small ops, and with each op on one thread two of them run at once
(`training_threads_per_op`).

TensorFlow fixes its threads per op when it first runs one, so `split_cpus` comes before the
model is restored: t2t-decode's `run_decode` and t2t-distill's `distill` call it first thing,
and t2t-train calls `set_threads_per_op` before its distribution strategy.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from absl import logging

from t2t_lite.extras import lazy_import

tf = lazy_import("tensorflow")
T, R = TypeVar("T"), TypeVar("R")

# Training with one thread per op (two ops at once) on a machine of TRAINING_SPLIT_CPUS CPUs, the
# only number measured, for models up to TRAINING_SPLIT_WIDTH wide. On 2 CPUs of an AMD EPYC with
# AVX-512 BF16 (docs/training.md, "Threads per op"), transformer_budget_xs (width 128) made 1.27x
# the steps/s through oneDNN and 1.12x with TensorFlow's own kernels (an AVX2-only CPU's), the
# GUM parser (width 128) 1.17x, and on an Intel Xeon with AMX _xs 1.25x; widths 192 and 256 made
# 0.97-0.99x here, within the runs' spread (0.93-1.07x on the Xeon). Decoding at width 256 ran
# at 0.63-1.11x, most settings slower, so searches keep every CPU per op.
TRAINING_SPLIT_CPUS = 2
TRAINING_SPLIT_WIDTH = 256


def cpu_count() -> int:
    """The CPUs this process may run on (its affinity: `taskset` and container limits)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def cpus_per_part(parts: int) -> int:
    """The CPUs each of `parts` searches or processes gets of this process' (`cpu_count`), at
    least one."""
    return max(1, cpu_count() // parts)


def set_threads_per_op(per_op: int, flag: str) -> None:
    """Runs each of this process' TensorFlow ops on `per_op` threads. Raises ValueError naming
    `flag` once TensorFlow has run an op in this process with another number."""
    try:
        tf.config.threading.set_intra_op_parallelism_threads(per_op)
    except RuntimeError:
        if tf.config.threading.get_intra_op_parallelism_threads() != per_op:
            raise ValueError(
                f"{flag}: TensorFlow has already run in this process and its threads per op "
                "can no longer change; set them before anything of TensorFlow runs"
            ) from None


def training_threads_per_op(d_model: int, given: int | None = None) -> int:
    """Threads per op for training a model of width `d_model` on this machine: `given` where
    set (t2t-train's --intra_threads); 0, left to TensorFlow, where TF_NUM_INTRAOP_THREADS is
    in the environment; 1 (two ops at once) on TRAINING_SPLIT_CPUS CPUs up to
    TRAINING_SPLIT_WIDTH; else 0, TensorFlow's default (each op on every CPU)."""
    if given is not None:
        return given
    if "TF_NUM_INTRAOP_THREADS" in os.environ:
        return 0
    narrow = d_model <= TRAINING_SPLIT_WIDTH and cpu_count() == TRAINING_SPLIT_CPUS
    return 1 if narrow else 0


def split_cpus(inter_threads: int, flag: str = "--inter_threads") -> int:
    """Gives each op `cpu_count() // inter_threads` threads (at least one), for `inter_threads`
    batches searched at once; returns that number. 1 leaves TensorFlow's default (every CPU).
    Raises ValueError naming `flag` once TensorFlow has run an op in this process."""
    if inter_threads < 1:
        raise ValueError(f"{flag}={inter_threads} must be at least 1")
    if inter_threads == 1:
        return cpu_count()
    per_op = cpus_per_part(inter_threads)
    set_threads_per_op(per_op, f"{flag}={inter_threads}")
    logging.info(
        "%s=%d: %d batches searched at once, each op on %d of %d CPUs",
        flag,
        inter_threads,
        inter_threads,
        per_op,
        cpu_count(),
    )
    return per_op


def warn_if_unsplit(inter_threads: int) -> None:
    """Warns where `inter_threads` batches will be searched at once with every op still on
    every CPU (`split_cpus` not called): the threads then contend and gain little."""
    if inter_threads > 1 and tf.config.threading.get_intra_op_parallelism_threads() == 0:
        logging.warning(
            "inter_threads=%d, but each op still runs on every CPU: call "
            "t2t_lite.runtime.threads.split_cpus(%d) before TensorFlow runs",
            inter_threads,
            inter_threads,
        )


def map_batches(
    fn: Callable[[T], R], batches: Iterable[T], inter_threads: int
) -> Iterator[tuple[T, R]]:
    """(batch, `fn(batch)`) for each batch, in order: `inter_threads` batches at a time on as
    many threads (TensorFlow releases the GIL while a search runs), or one after another for 1.
    At most 2 * inter_threads batches are started ahead of the one returned; those not started
    when the caller stops are cancelled."""
    if inter_threads == 1:
        yield from ((batch, fn(batch)) for batch in batches)
        return
    pending: deque[tuple[T, Future]] = deque()
    with ThreadPoolExecutor(inter_threads, thread_name_prefix="search") as pool:
        try:
            for batch in batches:
                pending.append((batch, pool.submit(fn, batch)))
                if len(pending) > 2 * inter_threads:
                    done, future = pending.popleft()
                    yield done, future.result()
            while pending:
                done, future = pending.popleft()
                yield done, future.result()
        finally:
            for _, future in pending:
                future.cancel()
