"""Source lines --> the ids a search reads: each line stripped and tokenized, truncated to the
model's positions with a warning that names it, and ended with EOS; None for an empty line.
Then one warning for the lines with pieces the vocabulary lacks."""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf
from absl import logging

from t2t_lite.vocabulary import EOS_ID, UNK_ID

CHUNK_LINES = 10000  # tokenized at once: bounded memory for long files


def encode_lines(
    tokenizer, lines: Sequence[str], names: Sequence[str], max_positions: int
) -> list[list[int] | None]:
    """Texts --> ids ending in EOS, at most `max_positions` long (a longer line is truncated,
    with a warning naming it, e.g. "in.txt:7"); None for empty or whitespace-only lines."""
    texts = [line.strip() for line in lines]
    encoded: list[list[int] | None] = [None] * len(texts)
    nonempty = [i for i, t in enumerate(texts) if t]
    for start in range(0, len(nonempty), CHUNK_LINES):
        chunk = nonempty[start : start + CHUNK_LINES]
        ids = tokenizer.encode(tf.constant([texts[i] for i in chunk])).to_list()
        for i, row in zip(chunk, ids, strict=True):
            if len(row) + 1 > max_positions:
                logging.warning(
                    "%s: %d tokens, truncated to the model's %d positions",
                    names[i],
                    len(row) + 1,
                    max_positions,
                )
                row = row[: max_positions - 1]
            encoded[i] = row + [EOS_ID]
    return encoded


def report_unknown_pieces(
    encoded: Sequence[list[int] | None], names: Sequence[str], what: str = "inputs"
) -> int:
    """Warns `N inputs had unknown pieces` (pieces the vocabulary lacks, read as <unk>: the
    model sees no word there), naming the first few lines; returns N."""
    unknown = [name for ids, name in zip(encoded, names, strict=True) if ids and UNK_ID in ids]
    if unknown:
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        logging.warning(
            "%d %s had unknown pieces (not in the vocabulary, read as <unk>): %s%s",
            len(unknown),
            what if len(unknown) > 1 else what.removesuffix("s"),
            ", ".join(unknown[:5]),
            more,
        )
    return len(unknown)
