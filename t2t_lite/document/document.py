"""Whole documents: plain text, Markdown or HTML-like text in, the same layout out.

A document is read as a list of pieces kept as they are (blank lines, Markdown markers, fenced
code, table pipes, lines of markup only) and `Unit`s to translate:

- a paragraph is a run of non-blank lines; a heading (`#`), a list item (`-`, `*`, `+`, `1.`)
  or a quote (`>`) starts a new one and keeps its marker; a table row's cells are units each,
  and its separator row is kept;
- lines between ``` or ~~~ fences are code, kept;
- a paragraph of several lines is translated as one text and wrapped again to the width of its
  longest line (tags are never broken across lines).

Each unit's inline markup (tags and Markdown's bold, italics, links and code spans; nested at most
`markup.MAX_NESTING` deep, else a ValueError naming the line) and placeholders are masked
(`t2t_lite.document.markup`), its plain text split into sentences (`t2t_lite.document.sentences`),
the sentences of the whole document translated in batches, and the markup put back by the
sentences' word alignments.
`translate_events` yields the progress as it goes (the sentences of each batch, each finished
paragraph, then the document), which t2t-serve streams; `translate_document` returns the text.
"""

from __future__ import annotations

import dataclasses
import re
import textwrap
from collections.abc import Callable, Iterator, Sequence

from t2t_lite.document import markup
from t2t_lite.document.sentences import Sentence, fit_sentences, split_sentences

_FENCE = re.compile(r"^\s*(```|~~~)")
_MARKER = re.compile(r"^(\s*(?:#{1,6}\s+|[-*+]\s+|\d{1,9}[.)]\s+|>\s?)+)(?=\S)")
_TABLE_SEPARATOR = re.compile(r"^\s*\|?[\s:|-]+\|?\s*$")
Alignment = Sequence[tuple[int, int]]


@dataclasses.dataclass(frozen=True)
class Engine:
    """What a document needs of a model: `translate` (sentences --> (translation, word
    alignment or None) each), `token_counts` (sentences --> tokens each, EOS included, or None
    when the model does not say) and the most tokens a sentence may have."""

    translate: Callable[[list[str]], list[tuple[str, Alignment | None]]]
    token_counts: Callable[[list[str]], list[int]] | None = None
    max_tokens: int = 0
    breaks: Callable[[str], bool] | None = None  # whether the tokenizer breaks a number


@dataclasses.dataclass(frozen=True)
class Unit:
    """A text to translate: where it starts (line, from 1), and how to wrap it (width 0: one
    line; `indent`, the continuation lines' indentation)."""

    text: str
    line: int
    width: int = 0
    indent: str = ""


def parse(text: str) -> list[str | Unit]:
    """A document --> its pieces, in order: strings kept as they are, and `Unit`s."""
    lines = text.replace("\r\n", "\n").split("\n")
    pieces: list[str | Unit] = []
    paragraph: list[tuple[int, str]] = []  # (line number, line)
    code = False

    def close() -> None:
        if paragraph:
            pieces.extend(_paragraph(paragraph))
            paragraph.clear()

    for number, line in enumerate(lines, start=1):
        newline = "\n" if number < len(lines) else ""
        if _FENCE.match(line) or code:
            close()
            code = code != bool(_FENCE.match(line))
            pieces.append(line + newline)
        elif not markup.has_text(line):
            close()  # a blank line, or a line of markup only (<ul>, </p>)
            pieces.append(line + newline)
        elif line.lstrip().startswith("|"):
            close()
            pieces.extend(_table_row(line, number) + [newline])
        else:
            if _MARKER.match(line):
                close()
            paragraph.append((number, line + newline))
    close()
    return pieces


def _paragraph(lines: list[tuple[int, str]]) -> list[str | Unit]:
    """The pieces of one paragraph: its marker and indentation, the unit, the final newline."""
    first = lines[0][1]
    marker = _MARKER.match(first)
    prefix = marker.group(1) if marker else first[: len(first) - len(first.lstrip())]
    texts = [first[len(prefix) :]] + [line for _, line in lines[1:]]
    body = " ".join(t.strip() for t in texts)
    width = max(len(line.rstrip("\n")) for _, line in lines) if len(lines) > 1 else 0
    indent = " " * len(prefix) if marker else prefix
    if len(lines) > 1:
        second = lines[1][1]
        indent = second[: len(second) - len(second.lstrip())]
    unit = Unit(body, lines[0][0], max(width - len(prefix), 0), indent)
    return [prefix, unit, "\n" if lines[-1][1].endswith("\n") else ""]


def _table_row(line: str, number: int) -> list[str | Unit]:
    """A table row's pipes kept and its cells as units; a separator row kept whole."""
    if _TABLE_SEPARATOR.match(line):
        return [line]
    pieces: list[str | Unit] = []
    for k, cell in enumerate(re.split(r"(?<!\\)\|", line)):
        if k:
            pieces.append("|")
        stripped = cell.strip()
        if markup.has_text(stripped):
            lead = cell[: len(cell) - len(cell.lstrip())]
            pieces += [lead, Unit(stripped, number), cell[len(lead) + len(stripped) :]]
        else:
            pieces.append(cell)
    return pieces


@dataclasses.dataclass
class _Planned:
    unit: Unit
    masked: markup.Masked
    words: list[str]
    sentences: list[Sentence]


def translate_events(
    text: str, engine: Engine, language: str = "en", name: str = "document", batch: int = 16
) -> Iterator[dict]:
    """Translates a document, yielding as it goes:
    {"event": "start", "paragraphs": [source texts], "sentences": count};
    {"event": "sentence", "index", "paragraph", "source", "translation"} for each sentence;
    {"event": "paragraph", "paragraph", "text"} when a paragraph's sentences are all done
    (its markup put back); {"event": "done", "document": the translated document}.
    The first batch has one sentence, so that a page shows progress at once."""
    pieces = parse(text)
    planned = [_plan(p, engine, language, name) for p in pieces if isinstance(p, Unit)]
    todo = [(u, s) for u, plan in enumerate(planned) for s in plan.sentences]
    yield {"event": "start", "paragraphs": [p.unit.text for p in planned], "sentences": len(todo)}
    done: list[list[tuple[str, Alignment | None]]] = [[] for _ in planned]
    finished = {u: _finish(plan, []) for u, plan in enumerate(planned) if not plan.sentences}
    index, size = 0, 1
    while index < len(todo):
        chunk = todo[index : index + size]
        sources = [" ".join(planned[u].words[s.start : s.end]) for u, s in chunk]
        for k, ((u, _), found) in enumerate(zip(chunk, engine.translate(sources), strict=True)):
            done[u].append(found)
            yield {"event": "sentence", "index": index + k, "paragraph": u,
                   "source": sources[k], "translation": found[0]}  # fmt: skip
            if len(done[u]) == len(planned[u].sentences):
                finished[u] = text = _finish(planned[u], done[u])
                text = text.replace("\0", " ") if planned[u].unit.width else text
                yield {"event": "paragraph", "paragraph": u, "text": text}
        index, size = index + len(chunk), batch
    texts = iter(_wrap(finished[u], plan.unit) for u, plan in enumerate(planned))
    out = "".join(p if isinstance(p, str) else next(texts) for p in pieces)
    yield {"event": "done", "document": out}


def translate_document(
    text: str, engine: Engine, language: str = "en", name: str = "document"
) -> str:
    """The translated document (`translate_events`' last event)."""
    *_, last = translate_events(text, engine, language, name)
    return last["document"]


def _plan(unit: Unit, engine: Engine, language: str, name: str) -> _Planned:
    masked = _mask(unit.text, f"{name}:{unit.line}", engine.breaks)
    spans = masked.words()
    words = [masked.plain[s:e] for s, e in spans]
    sentences = split_sentences(masked.plain, spans, language) if words else []
    if engine.token_counts and engine.max_tokens:
        where = f"{name}:{unit.line}"
        sentences = fit_sentences(sentences, words, engine.token_counts, engine.max_tokens, where)
    return _Planned(unit, masked, words, sentences)


def check(text: str, name: str = "document") -> None:
    """Raises the ValueError `translate_events` would for `text` (markup nested too deep,
    naming `name` and the line), without a model."""
    for unit in parse(text):
        if isinstance(unit, Unit):
            _mask(unit.text, f"{name}:{unit.line}")


def _mask(text: str, where: str, breaks=None) -> markup.Masked:
    """`markup.mask`, its ValueError (markup nested too deep) naming `where` ("doc.md:3")."""
    try:
        return markup.mask(text, breaks)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None


def _finish(plan: _Planned, found: list[tuple[str, Alignment | None]]) -> str:
    """A paragraph's sentence translations joined, its markup put back over their alignments
    (offset to the paragraph's words; without one, a sentence's words in proportion). In a
    paragraph to wrap, each space inside a mark is written as "\\0", so that `_wrap` never
    breaks a line inside a tag, a link's destination or a code span."""
    words: list[str] = []
    pairs: list[tuple[int, int]] = []
    for sentence, (translation, alignment) in zip(plan.sentences, found, strict=True):
        target = translation.split()
        size = sentence.end - sentence.start
        if alignment is None:
            alignment = markup.proportional_alignment(size, len(target))
        pairs += [(sentence.start + i, len(words) + j) for i, j in alignment if i < size]
        words += target
    masked = plan.masked
    if plan.unit.width:
        marks = [
            dataclasses.replace(m, text=m.text.replace(" ", "\0"), close=m.close.replace(" ", "\0"))
            for m in masked.marks
        ]
        masked = dataclasses.replace(masked, marks=tuple(marks))
    return markup.restore(masked, " ".join(words), pairs)


def _wrap(text: str, unit: Unit) -> str:
    """A paragraph's translation (`_finish`) wrapped to its source's width."""
    if not unit.width:
        return text
    lines = textwrap.wrap(
        text,
        unit.width,
        subsequent_indent=unit.indent,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return "\n".join(lines).replace("\0", " ")
