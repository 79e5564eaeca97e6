"""bench/markup_bench.py: its documents are of the size asked for, and its engine's translation
through `translate_document` keeps every letter and every tag."""

from __future__ import annotations

import collections
import os
import re
import sys

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
sys.path.insert(0, BENCH)
import markup_bench  # noqa: E402

from t2t_lite.document.document import translate_document  # noqa: E402


def _letters_and_tags(text: str) -> tuple[collections.Counter, collections.Counter]:
    """The text's tags and the characters outside them, spaces left out (a tag may be put
    back between a word and its comma)."""
    tags = collections.Counter(re.findall(r"</?\w+>", text))
    return collections.Counter(re.sub(r"</?\w+>|\s", "", text)), tags


def test_the_documents_are_the_size_asked_and_come_back_with_every_word_and_tag():
    text = markup_bench.document(0.02, seed=3)
    assert 20_000 <= len(text) < 20_000 + 400  # one paragraph past the size at most
    assert text == markup_bench.document(0.02, seed=3)  # the same seed, the same document
    paragraphs = text.rstrip("\n").split("\n\n")
    _, tags = _letters_and_tags(text)
    assert sum(tags.values()) == 8 * len(paragraphs)  # 4 opened and closed in each
    out = translate_document(text, markup_bench.reversing_engine())
    found = out.rstrip("\n").split("\n\n")
    assert len(found) == len(paragraphs)
    for source, translated in zip(paragraphs, found, strict=True):
        assert _letters_and_tags(translated) == _letters_and_tags(source)
        assert translated != source  # the words reversed
