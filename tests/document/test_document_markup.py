"""Hostile markup through the whole document path (`t2t_lite.document.document` over a scripted
engine that reverses each sentence): random deep, unbalanced, unclosed and interleaved tags,
quoted `>` and huge attributes, and one document of about 5 MB. Each document either comes back
with every tag once, its pairs well nested and its words all translated, or is refused with
one ValueError naming its line and `MAX_NESTING`; nothing else is raised."""

from __future__ import annotations

import collections
import html.parser
import random

import pytest
from decoding_helpers import reverse_engine

from t2t_lite.document.document import translate_document
from t2t_lite.document.markup import MAX_NESTING

WORDS = ["w1", "w2", "w3.", "w4,", "w5", "w6?"]
LONG_WORDS = ["configuration", "spreadsheet", "documents.", "alignment,", "translation", "w6?"]


class _Tags(html.parser.HTMLParser):
    """The tags of a text as written ((kind, name, raw text)) and its words, read by Python's
    HTML parser (which reads quoted attributes as HTML does)."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=False)
        self.tags, self.words = [], []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append(("open", tag, self.get_starttag_text()))

    def handle_startendtag(self, tag, attrs):
        self.tags.append(("empty", tag, self.get_starttag_text()))

    def handle_endtag(self, tag):
        self.tags.append(("close", tag, f"</{tag}>"))

    def handle_data(self, data):
        self.words += data.split()


def _attributes(rng: random.Random, huge: bool = True) -> str:
    roll = rng.random()
    if roll < 0.6:
        return ""
    if roll < 0.8:
        return " title=\"a > b\" data-x='c>d'"
    if roll < 0.95 or not huge:
        return f' href="https://x.org/{rng.randrange(99)}"'
    return f' data-huge="{"x>" * rng.randrange(1000, 20000)}"'  # up to 40 KB


def _paragraph(rng: random.Random, number: int, deepest: int = 10_000, huge: bool = True) -> str:
    """One line of words and tags: a deep chain, or a random mix of opens, closes (of the open
    ones in any order, or of none), empty tags and words. Names are unique per open tag."""
    out = []
    if rng.random() < 0.3:  # deep: around the limit, or far past it
        depths = [MAX_NESTING - 1, MAX_NESTING, MAX_NESTING + 1, 300, 10_000]
        depth = rng.choice([d for d in depths if d <= deepest])
        names = [f"d{number}x{k}" for k in range(depth)]
        out += [f"<{n}{_attributes(rng, huge) if depth < 1000 else ''}>" for n in names]
        out += rng.choices(WORDS, k=rng.randint(1, 4))
        out += [f"</{n}>" for n in reversed(names)]
        return "".join(out)
    opened = []
    for k in range(rng.randint(1, 60)):
        roll = rng.random()
        if roll < 0.35:
            name = f"t{number}x{k}"
            opened.append(name)
            out.append(f"<{name}{_attributes(rng, huge)}>")
        elif roll < 0.55 and opened:  # any open one: interleaved
            out.append(f"</{opened.pop(rng.randrange(len(opened)))}>")
        elif roll < 0.6:
            out.append(f"</never{number}x{k}>")
        elif roll < 0.65:
            out.append(rng.choice(["<br/>", "<ph/>", " {name} ", " %s "]))
        else:
            out.append(rng.choice(WORDS))
    return rng.choice([" ", ""]).join(out)  # with and without spaces between


def _reference(paragraph: str) -> tuple[set[str], int]:
    """The names of the tags that pair up, and how deep those pairs nest: a close pairs with
    its open while that is open; opens inside it that are still open stay unpaired."""
    tags = _Tags(paragraph).tags
    stack: list[str] = []
    is_open = collections.Counter()
    paired = set()
    for kind, name, _ in tags:
        if kind == "open":
            stack.append(name)
            is_open[name] += 1
        elif kind == "close" and is_open[name]:
            while stack[-1] != name:
                is_open[stack.pop()] -= 1
            paired.add(stack.pop())
            is_open[name] -= 1
    deepest, stack = 0, []
    for kind, name, _ in tags:
        if kind == "open" and name in paired:
            stack.append(name)
            deepest = max(deepest, len(stack))
        elif kind == "close" and name in paired:
            stack.pop()
    return paired, deepest


def _check_paragraph(source: str, out: str) -> None:
    paired, _ = _reference(source)
    found, expected = _Tags(out), _Tags(source)
    assert collections.Counter(found.tags) == collections.Counter(expected.tags)
    # every letter translated once (words glued by tags, "w1<b>w2", are one word to the model),
    # every placeholder kept once
    out_text, source_text = "".join(found.words), "".join(expected.words)
    for placeholder in ("{name}", "%s"):
        assert out_text.count(placeholder) == source_text.count(placeholder)
        out_text, source_text = (
            out_text.replace(placeholder, ""),
            source_text.replace(placeholder, ""),
        )
    assert sorted(out_text) == sorted(source_text.upper())
    stack = []
    for kind, name, _ in found.tags:  # the pairs well nested, each open before its close
        if name in paired and kind == "open":
            stack.append(name)
        elif name in paired and kind == "close":
            assert stack and stack.pop() == name, out[:300]
    assert not stack


@pytest.mark.parametrize("seed", range(40))
def test_hostile_markup_comes_back_whole_or_is_refused_by_line(seed):
    rng = random.Random(seed)
    paragraphs = [_paragraph(rng, n) for n in range(rng.randint(1, 4))]
    document = "\n\n".join(paragraphs) + "\n"
    too_deep = [2 * n + 1 for n, p in enumerate(paragraphs) if _reference(p)[1] > MAX_NESTING]
    if too_deep:
        expected = f"document:{too_deep[0]}: markup nested more than {MAX_NESTING} levels deep"
        with pytest.raises(ValueError, match=f"^{expected}"):
            translate_document(document, reverse_engine())
        return
    out = translate_document(document, reverse_engine())
    found = out.rstrip("\n").split("\n\n")
    assert len(found) == len(paragraphs)
    for source, translated in zip(paragraphs, found, strict=True):
        _check_paragraph(source, translated)


def test_the_generator_reaches_every_case():
    """The seeds above hold documents refused, kept at the limit, interleaved and huge."""
    kinds = collections.Counter()
    for seed in range(40):
        rng = random.Random(seed)
        for n in range(rng.randint(1, 4)):
            paragraph = _paragraph(rng, n)
            paired, deepest = _reference(paragraph)
            opens = sum(kind == "open" for kind, _, _ in _Tags(paragraph).tags)
            kinds["refused"] += deepest > MAX_NESTING
            kinds["at the limit"] += deepest == MAX_NESTING
            kinds["unpaired opens"] += opens > len(paired)
            kinds["huge attribute"] += len(paragraph) > 10_000 and deepest < 1000
            kinds["quoted >"] += 'title="a > b"' in paragraph
    assert all(kinds[k] >= 2 for k in ("refused", "at the limit", "unpaired opens",
                                        "huge attribute", "quoted >")), kinds  # fmt: skip


def test_a_five_megabyte_document_comes_back_whole():
    rng = random.Random(7)
    paragraphs, size, number = [], 0, 0
    while size < 5_000_000:  # one to 2,000 random paragraphs on a line, each with 30 words
        parts = []
        for _ in range(rng.choice([1, 1, 1, 2000])):
            parts.append(_paragraph(rng, number, deepest=MAX_NESTING, huge=False))
            parts += rng.choices(LONG_WORDS, k=30)
            number += 1
        paragraphs.append(" ".join(parts))
        size += len(paragraphs[-1]) + 2
    document = "\n\n".join(paragraphs) + "\n"
    out = translate_document(document, reverse_engine())  # its time: bench/markup_bench.py
    found = out.rstrip("\n").split("\n\n")
    for source, translated in zip(paragraphs, found, strict=True):
        _check_paragraph(source, translated)
