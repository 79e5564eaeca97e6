"""Worker processes that tokenize and write whole shards, so that datagen uses every core.

`write_in_workers` hands the chunks of a split (one shard each) to a pool of processes started
with "spawn": the parent has loaded TensorFlow, whose threads and locks a fork would copy in a
half-held state. Each worker builds its own tokenizer once, from the vocabulary file, and runs
the one-process path's own `write_chunk` on every chunk it gets, so a shard's bytes do not depend
on which process wrote it. The parent keeps reading the input while the workers encode; it holds
at most `processes + 1` chunks in flight, so memory stays bounded however long the split, and
takes results back in shard order.
"""

from __future__ import annotations

import collections
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

# write_chunk(data_dir, split, index, chunk, tokenizer, stamp) --> the shard's statistics.
WriteChunk = Callable[[str, str, int, list, Any, dict], dict]
# done(index, pairs, statistics): called in shard order as shards finish.
Done = Callable[[int, int, dict], None]

_tokenizer: Any = None  # a worker's own tokenizer, built by _start_worker


def _start_worker(tokenizer_class: type, vocab_path: str, parent: int) -> None:
    global _tokenizer
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()
    _tokenizer = tokenizer_class(vocab_path)


def _exit_with_parent(parent: int) -> None:
    """Ends this worker within a second of its parent's end. A killed datagen's workers would
    otherwise live on, writing the shards they hold (and then waiting forever) while a rerun
    writes the same shards; a shard cut short here leaves only a temporary file, which the
    rerun removes."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def _write(write_chunk: WriteChunk, data_dir: str, split: str, index: int, chunk, stamp) -> dict:
    return write_chunk(data_dir, split, index, chunk, _tokenizer, stamp)


def write_in_workers(
    write_chunk: WriteChunk,
    jobs: Iterable[tuple[int, list[tuple[str, str]]]],
    data_dir: str,
    split: str,
    tokenizer: Any,
    stamp: dict,
    processes: int,
    done: Done,
) -> None:
    """Runs `write_chunk` on every (shard index, chunk of pairs) of `jobs` in `processes`
    worker processes; calls `done` for each shard, in index order, as it finishes.

    A worker rebuilds the tokenizer as `type(tokenizer)(tokenizer.path)` (the tokenizers of
    `t2t_lite.data.tokenizers` are made from their vocabulary file). An error in a worker (a full
    disk) is raised here once the shards already running have ended; the chunks not started are
    dropped, and every shard finished before stays for a rerun.
    """
    if processes < 2:
        raise ValueError(f"write_in_workers needs 2 or more processes, got {processes}")
    in_flight: collections.deque[tuple[int, int, Future]] = collections.deque()
    pool = ProcessPoolExecutor(
        processes,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_worker,
        initargs=(type(tokenizer), tokenizer.path, os.getpid()),
    )
    try:
        for index, chunk in jobs:
            future = pool.submit(_write, write_chunk, data_dir, split, index, chunk, stamp)
            in_flight.append((index, len(chunk), future))
            del chunk  # the pool holds it until a worker takes it
            # One chunk more than workers: a worker that finishes finds the next one waiting.
            while in_flight and (len(in_flight) > processes or in_flight[0][2].done()):
                _finish(in_flight.popleft(), done)
        while in_flight:
            _finish(in_flight.popleft(), done)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _finish(job: tuple[int, int, Future], done: Done) -> None:
    index, pairs, future = job
    done(index, pairs, future.result())
