"""Inline markup and placeholders carried through translation by word alignment.

`mask(text)` takes a paragraph's inline marks (`t2t_lite.document.inline_marks`: tags such as
`<b>...</b>`, `<a href="...">`, `<ph/>`; Markdown's `**strong**`, `*emphasis*`, `[links](url)`
and `` `code` ``; placeholders such as `{name}`, `%s`, URLs, and numbers the tokenizer would
break) out of the text, leaving plain text for the model and a `Mark` for each piece taken out:
a pair over a range of the plain text (`<b>` and `</b>`; `**` and `**`; `[` and `](url)`), or a
point (an empty tag, a code span, a placeholder) at an offset. Pairs nest at most `MAX_NESTING`
deep; deeper markup is refused with a ValueError, and every walk over the marks is a loop, so
that no input reaches Python's recursion limit.

`restore(masked, translation, alignment)` puts every mark back into the translation at the
target words aligned to its source words:

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

import bisect
import dataclasses
import re
from collections.abc import Callable, Sequence

from t2t_lite.document import inline_marks

MAX_NESTING = 100  # pairs of marks inside one another in a paragraph; deeper is refused
_PUNCT = set(".,;:!?)]}\"'»«“”„‘’…")
_LEADING = "".join(sorted(_PUNCT - set(".,;:!?…")))  # punctuation a word may start with
_TRAILING = "".join(sorted(_PUNCT))


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
    """text --> [(kind, name, text)]: kind "text", or a mark's (`inline_marks.find`)."""
    pieces, at = [], 0
    for start, end, kind, name in inline_marks.find(text, breaks):
        pieces += [("text", "", text[at:start]), (kind, name, text[start:end])]
        at = end
    pieces.append(("text", "", text[at:]))
    return [piece for piece in pieces if piece[2]]


class _Plain:
    """The plain text as it is built: its pieces, its length, the marks at its end."""

    def __init__(self):
        self.parts: list[str] = []
        self.size = 0
        self.at_end: list[dict] = []  # marks whose start or end is the current length

    def ends_with_space(self) -> bool:
        return bool(self.parts) and self.parts[-1].endswith(" ")

    def add(self, value: str) -> None:
        value = re.sub(r"\s+", " ", value)
        if value.startswith(" ") and (not self.size or self.ends_with_space()):
            value = value[1:]
        if value:
            self.parts.append(value)
            self.size += len(value)
            self.at_end = []

    def drop_space(self) -> None:
        """ "at {url}, then" --> "at, then": the marks at the end move back with it."""
        self.parts[-1] = self.parts[-1][:-1]
        self.size -= 1
        if not self.parts[-1]:
            self.parts.pop()
        for m in self.at_end:
            m["start"], m["end"] = min(m["start"], self.size), min(m["end"], self.size)


def has_text(text: str) -> bool:
    """Whether `text` holds anything but marks and whitespace (what `mask` leaves is not empty)."""
    at = 0
    for start, end, _, _ in inline_marks.find(text):
        if not text[at:start].isspace() and start > at:
            return True
        at = end
    return bool(text[at:].strip())


def mask(text: str, breaks: Callable[[str], bool] | None = None) -> Masked:
    """Takes tags, Markdown's marks and placeholders out of `text`; `breaks(number)` says
    whether the tokenizer would break a number (1,234.5) so that it is masked too (None:
    numbers stay). Tags that do not pair up (a close without its open, an open never closed)
    become points. Pairs nested more than `MAX_NESTING` deep raise a ValueError."""
    plain = _Plain()
    marks: list[dict] = []
    stack: list[int] = []  # indices of the open pairs
    open_names: dict[str, int] = {}  # how many of the open pairs have each name

    def add(value: str, before: bool, **fields) -> None:
        mark = dict(text=value, close="", start=plain.size, end=plain.size, space_before=before,
                    space_after=True, parent=stack[-1] if stack else -1)  # fmt: skip
        mark.update(fields)
        marks.append(mark)
        plain.at_end.append(mark)

    pieces = _pieces(text, breaks)
    for i, (kind, name, value) in enumerate(pieces):
        before = i > 0 and pieces[i - 1][2][-1:].isspace()
        if kind == "text":
            if marks and marks[-1]["close"] == "" and marks[-1]["end"] == plain.size:
                # "{ph}," is glued to its comma by the comma (a trailing item), not by itself
                marks[-1]["space_after"] = value[:1].isspace() or value[:1] in _PUNCT
            if value[:1] in _PUNCT and plain.ends_with_space():
                plain.drop_space()
            plain.add(value)
        elif kind == "open":
            add(value, True, end=-1, name=name)
            stack.append(len(marks) - 1)
            open_names[name] = open_names.get(name, 0) + 1
        elif kind == "close" and open_names.get(name):
            while True:  # closes the matching open pair; those inside it never closed: points
                j = stack.pop()
                open_names[marks[j]["name"]] -= 1
                if marks[j]["name"] == name:
                    marks[j].update(close=value, end=plain.size)
                    plain.at_end.append(marks[j])
                    break
                _to_point(marks[j])
        else:  # an empty tag, a placeholder, a close without its open
            add(value, before)
    for j in stack:
        _to_point(marks[j])
    stripped = "".join(plain.parts).rstrip()
    return Masked(stripped, _settled_marks(marks, len(stripped)))


def _to_point(mark: dict) -> None:
    """An open tag never closed becomes a point (what it held is held by its parent)."""
    mark.update(close="", end=mark["start"], space_before=True, space_after=False)


def _settled_marks(marks: list[dict], length: int) -> tuple[Mark, ...]:
    """The marks with offsets within the stripped text's `length`, each parent the nearest
    enclosing pair (an open that became a point holds nothing); a ValueError past
    `MAX_NESTING`."""
    depth: list[int] = []
    for m in marks:
        parent = m["parent"]
        while parent >= 0 and not marks[parent]["close"]:
            parent = marks[parent]["parent"]  # already settled: a parent comes first
        m.update(parent=parent, start=min(m["start"], length), end=min(m["end"], length))
        depth.append((depth[parent] if parent >= 0 else 0) + bool(m["close"]))
        if depth[-1] > MAX_NESTING:
            raise ValueError(
                f"markup nested more than {MAX_NESTING} levels deep (at {m['text'][:60]!r}); "
                "flatten it"
            )
        m.pop("name", None)
    return tuple(Mark(*(m[f.name] for f in dataclasses.fields(Mark))) for m in marks)


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
    where = _Source(source, links, len(words))
    spans = [_target_span(m, where, items, masked.plain) for m in masked.marks]
    children: dict[int, list[int]] = {}
    for k, m in enumerate(masked.marks):
        children.setdefault(m.parent, []).append(k)
    markdown = {k: m.text[-1] for k, m in enumerate(masked.marks) if m.close and m.text[0] != "<"}
    _settle((0, len(items.texts)), spans, children, markdown)
    return items.render(masked.marks, spans, children)


class _Source:
    """The source words' offsets and alignment links, searched by bisection."""

    def __init__(self, words: Sequence[tuple[int, int]], links: dict[int, list[int]], targets: int):
        self.targets = targets  # how many target words
        self.starts = [s for s, _ in words]
        self.ends = [e for _, e in words]
        self.links = {w: (min(js), max(js)) for w, js in links.items()}
        self.linked = sorted(self.links)  # the source words with a target

    def covered(self, start: int, end: int) -> range:
        """The words overlapping plain[start:end]."""
        return range(bisect.bisect_right(self.ends, start), bisect.bisect_left(self.starts, end))

    def linked_in(self, words: range) -> list[int]:
        lo = bisect.bisect_left(self.linked, words.start)
        return self.linked[lo : bisect.bisect_left(self.linked, words.stop)]


class _Items:
    """The target words as items to write: each word's leading punctuation, core and trailing
    punctuation, so that a tag can close before a word's final full stop."""

    def __init__(self, words: Sequence[str]):
        self.texts: list[str] = []
        self.glue: list[tuple[bool, bool]] = []  # (joins the item before, joins the one after)
        self.first, self.core, self.core_end, self.end = [], [], [], []
        for word in words:
            lead = len(word) - len(word.lstrip(_LEADING))
            trail = len(word) - len(word.rstrip(_TRAILING))
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
        """The items with each mark's tags at its settled span (a walk with a stack of open
        pairs: [children, next child, items written up to, the pair's end, the pair])."""
        out: list[tuple[str, bool, bool]] = []
        frames = [[children.get(-1, []), 0, 0, len(self.texts), -1]]
        while frames:
            frame = frames[-1]
            kids, i, at, hi, node = frame
            if i == len(kids):
                out.extend(self._slice(at, hi))
                frames.pop()
                if node >= 0:  # a tag inside a word ("Datei</b>,") takes no space
                    out.append((marks[node].close, True, self.inside(hi)))
                continue
            k = kids[i]
            start, end = spans[k]
            out.extend(self._slice(at, start))
            frame[1], frame[2] = i + 1, end
            mark = marks[k]
            if mark.is_point:  # spaced as in the source; an empty tag inside a word: none
                glued = mark.text.startswith("<") and self.inside(start)
                out.append((mark.text, glued or not mark.space_before,
                            glued or not mark.space_after))  # fmt: skip
            else:
                out.append((mark.text, self.inside(start), True))
                frames.append([children.get(k, []), 0, start, end, k])
        parts = []
        for k, (piece, left, _) in enumerate(out):
            if k and not (left or out[k - 1][2]):
                parts.append(" ")
            parts.append(piece)
        return "".join(parts)


def _point_gap(offset: int, where: _Source, items: _Items) -> int:
    """Where a point at plain[offset] goes: after the targets of the source word before it,
    else before those of the word after it, else at the end it is nearest."""
    w = bisect.bisect_right(where.starts, offset) - 1  # the word starting at or before it
    if w >= 0 and where.starts[w] < offset < where.ends[w] and w in where.links:
        return items.core_end[where.links[w][1]]  # "at{url}," --> after the core of "at,"
    before = bisect.bisect_right(where.ends, offset)  # words [0, before) end at or before it
    k = bisect.bisect_left(where.linked, before) - 1
    if k >= 0:
        return items.end[where.links[where.linked[k]][1]]
    after = bisect.bisect_left(where.starts, offset)  # words [after, ...) start at or after it
    k = bisect.bisect_left(where.linked, after)
    if k < len(where.linked):
        return items.first[where.links[where.linked[k]][0]]
    return 0 if offset == 0 else len(items.texts)


def _target_span(mark: Mark, where: _Source, items: _Items, plain: str) -> tuple[int, int]:
    """A mark's (start gap, end gap) among the target items, before nesting is settled."""
    covered = where.covered(mark.start, mark.end) if not mark.is_point else range(0)
    linked = where.linked_in(covered)
    if linked:
        first = min(where.links[w][0] for w in linked)
        last = max(where.links[w][1] for w in linked)
    elif covered and where.targets and not mark.text.startswith("<"):
        # Markdown's pairs cannot be empty ("****" is no strong emphasis): in proportion
        first, last = (w * where.targets // len(where.starts) for w in (covered[0], covered[-1]))
    else:
        gap = _point_gap(mark.start, where, items)
        return gap, gap
    # Punctuation at a span's edge stays inside only where the source put it inside:
    # "<b>Save</b>." and "<b>Finish</b> to" both give "<b>Fertigstellen</b>," not "...,</b>".
    start = items.first[first] if plain[mark.start] in _PUNCT else items.core[first]
    end = items.end[last] if plain[mark.end - 1] in _PUNCT else items.core_end[last]
    return start, max(start, end)


def _settle(bounds: tuple[int, int], spans: list, children: dict, markdown: dict) -> None:
    """Clamps each pair's children into its span, orders them by target position and moves a
    sibling that would overlap the one before it to that one's end: the top first, then each
    settled pair's children (a walk with a stack, however deep the nesting). A Markdown pair
    (`markdown`: its index --> its delimiter's first character) left empty takes an item
    next to it (`_fill`): `****` would be no strong emphasis but a word of stars."""
    todo = [(-1, bounds)]
    while todo:
        node, (lo, hi) = todo.pop()
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
        if lo < hi and any(k in markdown and spans[k][0] == spans[k][1] for k in kids):
            _fill(kids, spans, children, markdown, (lo, hi))
        todo += [(k, spans[k]) for k in kids]


def _fill(kids: list[int], spans: list, children: dict, markdown: dict, bounds: tuple) -> None:
    """Gives each empty Markdown pair among `kids` the item before it or the one after it:
    on its own where no sibling holds it, else inside a sibling of another mark (`**` inside
    `*` around one word would read as one `***`) or, failing both, the one before."""
    lo, hi = bounds
    held = sorted((spans[j][0], spans[j][1], j) for j in kids if spans[j][0] < spans[j][1])
    starts = [start for start, _, _ in held]  # siblings that hold items do not overlap
    claimed: dict[int, int] = {}  # an item a filled pair took on its own --> that pair

    def holder(item: int) -> int | None:
        i = bisect.bisect_right(starts, item) - 1
        return held[i][2] if i >= 0 and held[i][1] > item else claimed.get(item)

    for k in [k for k in kids if k in markdown and spans[k][0] == spans[k][1]]:
        choices = []
        for item in (spans[k][0] - 1, spans[k][0]):
            if lo <= item < hi:
                j = holder(item)
                rank = 0 if j is None else 1 if markdown.get(j) != markdown[k] else 2
                choices.append((rank, item, j))
        _, item, j = min(choices)
        spans[k] = (item, item + 1)
        if j is None:
            claimed[item] = k
        else:
            kids.remove(k)
            children.setdefault(j, []).append(k)
    kids.sort(key=lambda k: (spans[k][0], spans[k][1], k))
