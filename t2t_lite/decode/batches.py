"""How t2t-decode groups lines into batches of source ids.

Lines are sorted by length and grouped so that rows x width stays within a token budget
(`token_batches`), then zero-padded into one [rows, width] array (`pad_batch`).

Under `--jit_compile` XLA compiles the search once for every input shape it sees, about 2 s each
on a 2-core CPU, so the shapes are held to a few: the width is rounded up to a bucket
(`bucket_width`: multiples of 8 up to 64, then four buckets per doubling, at most 25 % of
padding past 32 tokens), and the rows to a power of two within the bucket's budget
(`bucket_rows`), filled with copies of the batch's last row, whose results are dropped. A copy
ends its search when the row it copies does, so it never makes the search longer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


def token_batches(
    lengths: Sequence[int], batch_tokens: int, width: Callable[[int], int] | None = None
) -> list[list[int]]:
    """Indices of `lengths`, sorted by length, grouped so that rows * width(longest) <=
    batch_tokens (a longer single row still gets its own batch). `width`: the padded width of a
    row of a given length (`bucket_width` under --jit_compile); the length itself by default."""
    width = width or (lambda n: n)
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    for i in order:
        if batches and (len(batches[-1]) + 1) * width(lengths[i]) <= batch_tokens:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def bucket_width(length: int) -> int:
    """`length` rounded up to its bucket: the next multiple of 8 up to 64, past that of a
    quarter of the power of two below it (80, 96, 112, 128, 160, ...)."""
    step = max(8, 1 << max(0, (length - 1).bit_length() - 3))
    return -(-length // step) * step


def bucket_rows(rows: int, width: int, batch_tokens: int) -> int:
    """`rows` rounded up to a power of two, but never past what `token_batches` puts into a
    batch of `width` (batch_tokens // width rows, at least `rows`)."""
    return max(rows, min(1 << (rows - 1).bit_length(), batch_tokens // width))


def pad_batch(
    rows: Sequence[Sequence[int]], width: int | None = None, count: int | None = None
) -> np.ndarray:
    """Ragged id lists --> [count, width] int32, zero-padded on the right (width: the longest
    row's by default), rows past the given ones copies of the last (count: len(rows))."""
    longest = max(len(r) for r in rows)
    width = longest if width is None else width
    count = len(rows) if count is None else count
    if width < longest or count < len(rows):
        raise ValueError(
            f"pad_batch: {len(rows)} rows of up to {longest} ids into {count} x {width}"
        )
    out = np.zeros((count, width), np.int32)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    out[len(rows) :] = out[len(rows) - 1]
    return out
