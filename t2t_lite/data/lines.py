"""One definition of a line of text, shared by datagen, decode and line counts.

A line ends at "\\n"; a "\\r\\n" ending is accepted and a leading UTF-8 byte-order mark on the first
line is dropped. A carriage return anywhere else (CR-only endings, which `tf.data.TextLineDataset`
would silently merge into one line), a NUL byte or invalid UTF-8 is an error naming the file and the
line. Surrounding whitespace is stripped; empty or whitespace-only lines are skipped and counted.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Iterator

_BOM = b"\xef\xbb\xbf"


class LineError(ValueError):
    """A file that breaks the definition of a line; the message names the file and line."""


@dataclasses.dataclass
class LineStats:
    """What reading one file (or a pair of files) saw."""

    lines: int = 0  # physical lines (pairs of lines for parallel files)
    kept: int = 0
    skipped_empty: int = 0


def _check_exists(path: str, what: str) -> None:
    if not path:
        raise FileNotFoundError(f"{what}: no file given")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{what}: file not found: {path}")


def _decode_line(raw: bytes, path: str, number: int) -> str:
    """Bytes of one physical line (without "\\n") --> its text, stripped."""
    if number == 1 and raw.startswith(_BOM):
        raw = raw[len(_BOM) :]
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    if b"\r" in raw:
        raise LineError(
            f"{path}:{number}: carriage return inside a line (CR-only line endings?); "
            "convert the file to LF or CRLF line endings"
        )
    if b"\x00" in raw:
        column = raw.index(b"\x00") + 1
        raise LineError(f"{path}:{number}: NUL byte at byte {column} of the line")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise LineError(
            f"{path}:{number}: invalid UTF-8 at byte {e.start + 1} of the line"
        ) from None
    return text.strip()


def iter_raw_lines(path: str, what: str = "text file") -> Iterator[tuple[int, str]]:
    """Yields (1-based line number, stripped text) for every physical line, empty ones included."""
    _check_exists(path, what)
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            yield number, _decode_line(raw.removesuffix(b"\n"), path, number)


def read_lines(
    path: str, stats: LineStats | None = None, what: str = "text file"
) -> Iterator[tuple[int, str]]:
    """Yields (1-based line number, stripped text) of the non-empty lines of a UTF-8 file.

    Args:
      path: the file.
      stats: if given, counts physical, kept and skipped (empty or whitespace-only) lines.
      what: how errors name the file's role, e.g. the flag that gave it ("--train_src").

    Raises:
      FileNotFoundError: naming `what` and the path.
      LineError: CR-only endings, NUL bytes or invalid UTF-8, naming the file and line.
    """
    stats = stats if stats is not None else LineStats()
    for number, text in iter_raw_lines(path, what):
        stats.lines += 1
        if text:
            stats.kept += 1
            yield number, text
        else:
            stats.skipped_empty += 1


def count_lines(path: str, what: str = "text file") -> LineStats:
    """Validates a whole file and returns its line counts (physical, kept, skipped)."""
    stats = LineStats()
    for _ in read_lines(path, stats, what):
        pass
    return stats


def check_parallel(
    source: str, target: str, source_what: str = "source", target_what: str = "target"
) -> LineStats:
    """Validates both files and checks that they have the same number of physical lines.

    Run this before writing anything: `tf.data.Dataset.zip` would silently truncate.

    Returns:
      counts of line pairs: `lines` pairs, `kept` pairs with both sides non-empty.
    """
    src = count_lines(source, source_what)
    tgt = count_lines(target, target_what)
    if src.lines != tgt.lines:
        raise LineError(
            f"parallel files differ in line count: {source_what} {source} has {src.lines} lines, "
            f"{target_what} {target} has {tgt.lines} lines"
        )
    stats = LineStats()
    for _ in read_parallel(source, target, stats, source_what, target_what):
        pass
    return stats


def read_parallel(
    source: str,
    target: str,
    stats: LineStats | None = None,
    source_what: str = "source",
    target_what: str = "target",
    skip_empty: bool = True,
) -> Iterator[tuple[int, str, str]]:
    """Yields (line number, source text, target text) where both lines are non-empty.

    A pair with an empty or whitespace-only side is counted in `stats` and skipped (or yielded
    when `skip_empty` is False, for a writer that counts them itself). Call
    `check_parallel` first when nothing may be written before a mismatch is found; this reader
    raises as soon as one file ends before the other.
    """
    stats = stats if stats is not None else LineStats()
    src_lines = iter_raw_lines(source, source_what)
    tgt_lines = iter_raw_lines(target, target_what)
    for src_item, tgt_item in itertools.zip_longest(src_lines, tgt_lines):
        if src_item is None or tgt_item is None:
            raise LineError(
                f"parallel files differ in line count: {source_what} {source} and {target_what} "
                f"{target} disagree after line {stats.lines}"
            )
        stats.lines += 1
        (number, src), (_, tgt) = src_item, tgt_item
        if src and tgt:
            stats.kept += 1
            yield number, src, tgt
        else:
            stats.skipped_empty += 1
            if not skip_empty:
                yield number, src, tgt
