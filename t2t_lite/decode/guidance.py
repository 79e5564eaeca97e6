"""What a line may ask of its translation: a target prefix and target phrases (terminology).

A `Guide` per input line comes from `--prefix_file` (one prefix per line), `--constraints_file`
(one tab-separated list of target phrases per line) and `--terminology` (a TSV of source term,
target term: the target term is a constraint of every line where the source term occurs as
whole words, case-insensitively), or from the `prefix` and `constraints` fields of t2t-serve's
API. `encode_guides` turns them into the ids that the search takes
(`transformer_step.translate_ids(prefix=..., terms=...)`), warning for each line whose guide
cannot fit its maximum output length; `report_unplaced` warns for each line whose translation
lacks a phrase after the search.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

import numpy as np
from absl import logging

from t2t_lite.data import iter_raw_lines
from t2t_lite.search.terminology import phrases_met
from t2t_lite.vocabulary import UNK_ID


@dataclasses.dataclass(frozen=True)
class Guide:
    """A line's target prefix ("" for none) and the target phrases its translation must hold."""

    prefix: str = ""
    constraints: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.prefix or self.constraints)


class Terminology:
    """A source term -> target term table (`--terminology`, UTF-8 TSV, two fields a line;
    empty lines and lines starting with # are skipped)."""

    def __init__(self, entries: Sequence[tuple[str, str]]):
        self.entries = list(entries)
        self._patterns = [
            re.compile(rf"(?<!\w){re.escape(source)}(?!\w)", re.IGNORECASE)
            for source, _ in self.entries
        ]

    @classmethod
    def read(cls, path: str, flag: str = "--terminology") -> Terminology:
        entries = []
        for number, line in iter_raw_lines(path, flag):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            fields = [f.strip() for f in line.split("\t")]
            if len(fields) != 2 or not all(fields):
                raise ValueError(
                    f"{flag} {path}:{number}: expected 'source term<TAB>target term', got "
                    f"{len(fields)} field(s)"
                )
            entries.append((fields[0], fields[1]))
        return cls(entries)

    def constraints_for(self, line: str) -> tuple[str, ...]:
        """The target terms of the source terms that occur in `line`, in table order, once."""
        pairs = zip(self.entries, self._patterns, strict=True)
        return tuple(dict.fromkeys(target for (_, target), p in pairs if p.search(line)))


def terminology_guides(terminology: Terminology | None, lines: Sequence[str]) -> list[Guide] | None:
    """One Guide a line held to `terminology` (no prefix, the target terms of the source terms
    in it), or None without a table: what a document's sentences are translated with."""
    if terminology is None:
        return None
    return [Guide("", terminology.constraints_for(line)) for line in lines]


def read_guides(
    count: int,
    lines: Sequence[str],
    prefix_file: str | None = None,
    constraints_file: str | None = None,
    terminology: str | None = None,
) -> list[Guide] | None:
    """One Guide per input line from the three flags (None when none is given); a file with
    another number of lines than the input is refused."""
    if not (prefix_file or constraints_file or terminology):
        return None
    prefixes = _lines_of(prefix_file, "--prefix_file", count) if prefix_file else [""] * count
    listed = (
        [
            tuple(p.strip() for p in row.split("\t") if p.strip())
            for row in _lines_of(constraints_file, "--constraints_file", count)
        ]
        if constraints_file
        else [()] * count
    )
    table = Terminology.read(terminology) if terminology else None
    guides = []
    for line, prefix, own in zip(lines, prefixes, listed, strict=True):
        terms = table.constraints_for(line) if table else ()
        guides.append(Guide(prefix.strip(), tuple(dict.fromkeys(own + terms))))
    return guides


def _lines_of(path: str, flag: str, count: int) -> list[str]:
    lines = [text for _, text in iter_raw_lines(path, flag)]
    if len(lines) != count:
        raise ValueError(f"{flag} {path} has {len(lines)} lines but the input has {count}")
    return lines


@dataclasses.dataclass
class EncodedGuides:
    """The guides of a batch as the search takes them: prefix [rows, P] and terms [rows, C, T]
    (zero-padded), and each row's phrases as id lists (for `report_unplaced`)."""

    prefix: np.ndarray
    terms: np.ndarray
    phrases: list[list[list[int]]]


def encode_guides(
    tokenizer, guides: Sequence[Guide], max_lengths: Sequence[int], names: Sequence[str]
) -> EncodedGuides:
    """Guides --> ids. A line's prefix and phrases must fit its maximum output length (EOS
    included): a prefix that does not fit is dropped, and so is the first phrase that does not
    fit in what is left, with every phrase after it, each with a warning naming the line (the
    exported `guided` signature keeps the same ones)."""
    prefixes, phrases = [], []
    report_unknown_characters(tokenizer, guides, names)
    for guide, limit, name in zip(guides, max_lengths, names, strict=True):
        room = limit - 1  # EOS
        prefix = _encode(tokenizer, guide.prefix.strip()) if guide.prefix.strip() else []
        if len(prefix) > room:
            logging.warning(
                "%s: the prefix has %d tokens but the output at most %d; prefix dropped",
                name,
                len(prefix),
                room,
            )
            prefix = []
        room -= len(prefix)
        kept = []
        for text in guide.constraints:
            ids = _encode(tokenizer, text.strip())
            if len(ids) > room:
                logging.warning(
                    "%s: constraint %r and the ones after it do not fit the output's maximum "
                    "length of %d tokens; dropped (raise --extra_length for more room)",
                    name,
                    text,
                    limit,
                )
                break
            if ids:
                kept.append(ids)
                room -= len(ids)
        prefixes.append(prefix)
        phrases.append(kept)
    width = max((len(p) for p in prefixes), default=0)
    count = max((len(p) for p in phrases), default=0)
    longest = max((len(t) for row in phrases for t in row), default=0)
    prefix_ids = np.zeros([len(guides), width], np.int32)
    terms = np.zeros([len(guides), count, longest], np.int32)
    for r, (prefix, row) in enumerate(zip(prefixes, phrases, strict=True)):
        prefix_ids[r, : len(prefix)] = prefix
        for c, ids in enumerate(row):
            terms[r, c, : len(ids)] = ids
    return EncodedGuides(prefix_ids, terms, phrases)


def _encode(tokenizer, text: str) -> list[int]:
    return [int(i) for i in tokenizer.encode_py(text)]


def report_unknown_characters(tokenizer, guides: Sequence[Guide], names: Sequence[str]) -> str:
    """Warns once for the guides' prefixes and phrases that hold characters the vocabulary
    lacks (each read as the unknown piece, which SentencePiece writes back as ` ⁇ `, so the
    translation would start with it), naming the characters and the lines; returns the
    characters found."""
    found: dict[str, None] = {}
    lines = []
    for guide, name in zip(guides, names, strict=True):
        texts = [t for t in (guide.prefix, *guide.constraints) if t.strip()]
        if not any(UNK_ID in _encode(tokenizer, t) for t in texts):
            continue
        chars = [c for t in texts for c in t if not c.isspace()]
        unknown = [c for c in dict.fromkeys(chars) if UNK_ID in _encode(tokenizer, c)]
        found.update(dict.fromkeys(unknown))
        lines.append(name)
    if lines:
        more = f" and {len(lines) - 5} more" if len(lines) > 5 else ""
        logging.warning(
            "the prefix or constraints of %s hold characters the vocabulary lacks, read as the "
            "unknown piece (shown as ⁇): %s",
            ", ".join(lines[:5]) + more,
            " ".join(repr(c) for c in found) or "(pieces of known characters)",
        )
    return "".join(found)


def report_unplaced(output_ids: Sequence[Sequence[int]], phrases, names) -> int:
    """Warns for each line whose best output lacks one of its phrases (it reached its maximum
    length first); returns the number of such lines."""
    missing = 0
    for ids, row, name in zip(output_ids, phrases, names, strict=True):
        placed = phrases_met([int(i) for i in ids if i > 0], row)
        lost = [p for p, ok in zip(row, placed, strict=True) if not ok]
        if lost:
            missing += 1
            logging.warning(
                "%s: the translation reached its maximum length without %d constraint(s) "
                "(ids %s); raise --extra_length or --beam_size",
                name,
                len(lost),
                "; ".join(" ".join(map(str, t)) for t in lost),
            )
    return missing
