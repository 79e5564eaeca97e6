"""Inline markup and placeholders carried through translation by word alignment.

`mask(text)` takes a paragraph with inline tags (`<b>...</b>`, `<a href="...">`, `<ph/>`) and
placeholders (`{name}`, `%s`, `%(count)d`, `%1$s`, URLs, e-mail addresses, and numbers the
tokenizer would break) out of the text, leaving plain text for the model and a `Mark` for each
piece taken out: a pair of tags over a range of the plain text, or a point (an empty tag or a
placeholder) at an offset. `restore(masked, translation, alignment)` puts every mark back into
the translation at the target words aligned to its source words:

- a pair of tags spans the target words aligned to the source words it spanned (first to last);
  with none aligned it becomes an empty pair where its start would go;
- a point goes after the target words aligned to the source word before it (or before those of
  the word after it), with the source's spacing;
- the source's nesting is kept: a child is clamped inside its parent's target span and siblings
  never overlap (a later one that would is moved to the end of the earlier one), so the output is
  well nested whenever the input is, and every mark in is out, once;
- punctuation at the edge of a span stays inside only where the source put it inside:
  `<b>Save</b>.` and `<b>Finish</b> to` keep the target's full stop or comma outside.

Alignments are Pharaoh pairs (source word, target word) over whitespace-separated words, as
`t2t_lite.decode.details` gives them; without one, source words map to target words in
proportion to their position.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence

_TAG = re.compile(r"<(/?)([A-Za-z][\w:.-]*)((?:\s+[^<>]*?)?)\s*(/?)>")
_PLACEHOLDER = re.compile(
    r"\{[\w.]*\}"  # {name}, {0}
    r"|%\(\w+\)[-+ #0]*\d*(?:\.\d+)?[sdifxXeEgGr]"  # %(count)d
    r"|%\d+\$[sdif]"  # %1$s
    r"|%[-+#0]*\d*(?:\.\d+)?[sdifxX](?![\w])"  # %s, %d, %.2f
    r"|(?:https?://|www\.)[^\s<>\"']*[^\s<>\"'.,;:!?)\]]"  # URLs, without trailing punctuation
    r"|[\w.+-]+@[\w-]+(?:\.[\w-]+)+"  # e-mail addresses
)
_NUMBER = re.compile(r"\d+(?:[.,\u00a0\u202f]\d+)+")  # 1,234.56  3.14  10 000 (with NBSP)
_PUNCT = set(".,;:!?)]}\"'»«“”„‘’…")


@dataclasses.dataclass(frozen=True)
class Mark:
    """A pair of tags over plain[start:end] (`close` non-empty), or a point at plain[start]
    (`close` empty: an empty tag or a placeholder, `text` written back as it was)."""

    text: str  # the opening tag, or the point's text
    close: str  # the closing tag; "" for a point
    start: int  # offsets in the plain text
    end: int
    parent: int  # the enclosing pair's index in `Masked.marks`, -1 at the top
    space_before: bool = True  # a point: whitespace before it in the source
    space_after: bool = True  # a point: whitespace after it in the source

    @property
    def is_point(self) -> bool:
        return not self.close


@dataclasses.dataclass(frozen=True)
class Masked:
    """A paragraph's plain text (whitespace collapsed, stripped) and what was taken out."""

    plain: str
    marks: tuple[Mark, ...]

    def words(self) -> list[tuple[int, int]]:
        """(start, end) offsets of the plain text's whitespace-separated words."""
        return [m.span() for m in re.finditer(r"\S+", self.plain)]


def _pieces(text: str, breaks: Callable[[str], bool] | None) -> list[tuple[str, str, str]]:
    """text --> [(kind, tag name, text)]: kind "text", "open", "close", "empty" (a tag) or
    "point" (a placeholder)."""
    found = []
    for m in _TAG.finditer(text):
        kind = "close" if m.group(1) else ("empty" if m.group(4) else "open")
        found.append((m.start(), m.end(), kind, m.group(2).lower()))
    tags = list(found)
    pattern = _PLACEHOLDER.pattern + (f"|{_NUMBER.pattern}" if breaks else "")
    for m in re.finditer(pattern, text):
        if any(s < m.end() and m.start() < e for s, e, _, _ in tags):
            continue  # inside a tag (an href's URL)
        if breaks and _NUMBER.fullmatch(m.group()) and not breaks(m.group()):
            continue
        found.append((m.start(), m.end(), "point", ""))
    found.sort()
    pieces, at = [], 0
    for start, end, kind, name in found:
        pieces += [("text", "", text[at:start]), (kind, name, text[start:end])]
        at = end
    pieces.append(("text", "", text[at:]))
    return [piece for piece in pieces if piece[2]]


def mask(text: str, breaks: Callable[[str], bool] | None = None) -> Masked:
    """Takes tags and placeholders out of `text`; `breaks(number)` says whether the tokenizer
    would break a number (1,234.5) so that it is masked too (None: numbers stay). Tags that do
    not pair up (a close without its open, an open never closed) become points."""
    plain: list[str] = []
    marks: list[dict] = []
    stack: list[int] = []  # indices of the open pairs

    def offset() -> int:
        return sum(len(p) for p in plain)

    def add_text(value: str) -> None:
        value = re.sub(r"\s+", " ", value)
        if value.startswith(" ") and (offset() == 0 or "".join(plain).endswith(" ")):
            value = value[1:]
        plain[:] = ["".join(plain) + value]

    def add_point(value: str, before: bool) -> None:
        parent = stack[-1] if stack else -1
        marks.append(dict(text=value, close="", start=offset(), end=offset(), parent=parent,
                          space_before=before, space_after=True))  # fmt: skip

    pieces = _pieces(text, breaks)
    for i, (kind, name, value) in enumerate(pieces):
        before = i > 0 and pieces[i - 1][2][-1:].isspace()
        if kind == "text":
            if marks and marks[-1]["close"] == "" and marks[-1]["end"] == offset():
                # "{ph}," is glued to its comma by the comma (a trailing item), not by itself
                marks[-1]["space_after"] = value[:1].isspace() or value[:1] in _PUNCT
            if value[:1] in _PUNCT and "".join(plain).endswith(" "):
                plain[-1] = plain[-1][:-1]  # "at {url}, then" --> "at, then"
                for m in marks:
                    m["start"], m["end"] = min(m["start"], offset()), min(m["end"], offset())
            add_text(value)
        elif kind == "open":
            parent = stack[-1] if stack else -1
            marks.append(dict(text=value, close="", start=offset(), end=-1, parent=parent,
                              name=name))  # fmt: skip
            stack.append(len(marks) - 1)
        elif kind == "close" and any(marks[j].get("name") == name for j in stack):
            while True:  # closes the matching open pair; those inside it never closed: points
                j = stack.pop()
                if marks[j].get("name") == name:
                    marks[j].update(close=value, end=offset())
                    break
                _to_point(marks, j)
        else:  # an empty tag, a placeholder, a close without its open
            add_point(value, before)
    for j in stack:
        _to_point(marks, j)
    joined = "".join(plain)
    stripped = joined.rstrip()
    for m in marks:  # offsets past a dropped space or the stripped text's end
        m["start"], m["end"] = min(m["start"], len(stripped)), min(m["end"], len(stripped))
        m.pop("name", None)
    return Masked(stripped, tuple(Mark(**m) for m in marks))


def _to_point(marks: list[dict], j: int) -> None:
    """An open tag never closed becomes a point; what it held is held by its parent."""
    marks[j].update(close="", end=marks[j]["start"], space_before=True, space_after=False)
    for m in marks:
        if m["parent"] == j:
            m["parent"] = marks[j]["parent"]


def read_pharaoh(text: str) -> list[tuple[int, int]]:
    """ "0-0 1-2" (`t2t_lite.decode.details.pharaoh`) --> [(0, 0), (1, 2)]."""
    return [(int(i), int(j)) for i, j in (pair.split("-") for pair in text.split())]


def proportional_alignment(num_source: int, num_target: int) -> list[tuple[int, int]]:
    """Source word i --> target word i * T // S: the alignment when the model gives none."""
    if not num_source or not num_target:
        return []
    return [(i, min(i * num_target // num_source, num_target - 1)) for i in range(num_source)]


def restore(masked: Masked, translation: str, alignment: Sequence[tuple[int, int]] | None) -> str:
    """The translation of `masked.plain` with every mark put back (see the module's doc)."""
    words = translation.split()
    if not masked.marks:
        return " ".join(words)
    source = masked.words()
    if alignment is None:
        alignment = proportional_alignment(len(source), len(words))
    links: dict[int, list[int]] = {}
    for i, j in alignment:
        if 0 <= i < len(source) and 0 <= j < len(words):
            links.setdefault(i, []).append(j)
    items = _Items(words)
    spans = [_target_span(m, source, links, items, masked.plain) for m in masked.marks]
    children: dict[int, list[int]] = {}
    for k, m in enumerate(masked.marks):
        children.setdefault(m.parent, []).append(k)
    _settle(-1, (0, len(items.texts)), spans, children)
    return items.render(masked.marks, spans, children)


class _Items:
    """The target words as items to write: each word's leading punctuation, core and trailing
    punctuation, so that a tag can close before a word's final full stop."""

    def __init__(self, words: Sequence[str]):
        self.texts: list[str] = []
        self.glue: list[tuple[bool, bool]] = []  # (joins the item before, joins the one after)
        self.first, self.core, self.core_end, self.end = [], [], [], []
        for word in words:
            lead = len(word) - len(word.lstrip("".join(_PUNCT - set(".,;:!?…"))))
            trail = len(word) - len(word.rstrip("".join(_PUNCT)))
            if lead + trail >= len(word):
                lead, trail = 0, 0  # a word of punctuation only is its own core
            self.first.append(len(self.texts))
            if lead:
                self._add(word[:lead], False, True)
            self.core.append(len(self.texts))
            self._add(word[lead : len(word) - trail], False, False)
            self.core_end.append(len(self.texts))
            if trail:
                self._add(word[len(word) - trail :], True, False)
            self.end.append(len(self.texts))

    def _add(self, text: str, left: bool, right: bool) -> None:
        self.texts.append(text)
        self.glue.append((left, right))

    def inside(self, gap: int) -> bool:
        """Whether a gap falls between two items of one word ("Datei" and its ",")."""
        return 0 < gap < len(self.texts) and (self.glue[gap][0] or self.glue[gap - 1][1])

    def _slice(self, start: int, end: int) -> list[tuple[str, bool, bool]]:
        return [(self.texts[k], *self.glue[k]) for k in range(start, end)]

    def render(self, marks: Sequence[Mark], spans: list, children: dict) -> str:
        """The items with each mark's tags at its settled span."""
        out: list[tuple[str, bool, bool]] = []

        def emit(node: int, lo: int, hi: int) -> None:
            at = lo
            for k in children.get(node, []):
                start, end = spans[k]
                out.extend(self._slice(at, start))
                mark = marks[k]
                if mark.is_point:  # spaced as in the source; an empty tag inside a word: none
                    glued = mark.text.startswith("<") and self.inside(start)
                    out.append((mark.text, glued or not mark.space_before,
                                glued or not mark.space_after))  # fmt: skip
                else:  # a tag inside a word ("Datei</b>,") takes no space
                    out.append((mark.text, self.inside(start), True))
                    emit(k, start, end)
                    out.append((mark.close, True, self.inside(end)))
                at = end
            out.extend(self._slice(at, hi))

        emit(-1, 0, len(self.texts))
        text = ""
        for k, (piece, left, _) in enumerate(out):
            if k and not (left or out[k - 1][2]):
                text += " "
            text += piece
        return text


def _covered(mark: Mark, source: Sequence[tuple[int, int]]) -> list[int]:
    return [w for w, (s, e) in enumerate(source) if s < mark.end and mark.start < e]


def _point_gap(offset: int, source, links: dict, items: _Items) -> int:
    """Where a point at plain[offset] goes: after the targets of the source word before it,
    else before those of the word after it, else at the end it is nearest."""
    inside = [w for w, (s, e) in enumerate(source) if s < offset < e and w in links]
    if inside:  # "at{url}," --> after the core of the word "at," is translated to
        return items.core_end[max(links[inside[0]])]
    before = [w for w, (_, e) in enumerate(source) if e <= offset and w in links]
    if before:
        return items.end[max(links[before[-1]])]
    after = [w for w, (s, _) in enumerate(source) if s >= offset and w in links]
    if after:
        return items.first[min(links[after[0]])]
    return 0 if offset == 0 else len(items.texts)


def _target_span(mark: Mark, source, links: dict, items: _Items, plain: str) -> tuple[int, int]:
    """A mark's (start gap, end gap) among the target items, before nesting is settled."""
    covered = _covered(mark, source) if not mark.is_point else []
    targets = sorted(j for w in covered for j in links.get(w, []))
    if not targets:
        gap = _point_gap(mark.start, source, links, items)
        return gap, gap
    # Punctuation at a span's edge stays inside only where the source put it inside:
    # "<b>Save</b>." and "<b>Finish</b> to" both give "<b>Fertigstellen</b>," not "...,</b>".
    start = items.first[targets[0]] if plain[mark.start] in _PUNCT else items.core[targets[0]]
    end = items.end[targets[-1]] if plain[mark.end - 1] in _PUNCT else items.core_end[targets[-1]]
    return start, max(start, end)


def _settle(node: int, bounds: tuple[int, int], spans: list, children: dict) -> None:
    """Clamps `node`'s children into its span, orders them by target position and moves a
    sibling that would overlap the one before it to that one's end; then their children."""
    lo, hi = bounds
    kids = children.get(node, [])
    for k in kids:
        start, end = spans[k]
        start = min(max(start, lo), hi)
        spans[k] = (start, min(max(end, start), hi))
    kids.sort(key=lambda k: (spans[k][0], spans[k][1], k))
    at = lo
    for k in kids:
        start = max(spans[k][0], at)
        spans[k] = (start, max(spans[k][1], start))
        at = spans[k][1]
        _settle(k, spans[k], spans, children)
