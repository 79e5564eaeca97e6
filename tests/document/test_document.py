"""Whole documents (`t2t_lite.document.document`, `sentences`): the layout read and written back,
sentences split by sentencex, too-long sentences split at clauses, the progress events, and the
same through a Translator and t2t-decode --input_format=document, held to translating each
sentence on its own."""

from __future__ import annotations

import collections
import dataclasses
import html.parser
import logging
import re

import pytest
from decoding_helpers import decode_flags, reverse_engine, write_tiny_run

from t2t_lite.decode.runner import run_decode
from t2t_lite.decode.translator import Translator
from t2t_lite.document import inline_marks
from t2t_lite.document.document import Unit, parse, translate_document, translate_events
from t2t_lite.document.markup import MAX_NESTING, mask
from t2t_lite.document.sentences import Sentence, fit_sentences, split_sentences
from t2t_lite.run.run_flags import RunFlags

DOCUMENT = """# The <b>title</b>

First sentence here. Second one, with {name}
wrapped over two lines.

- An <i>item</i>.
- Another item

```
code = "kept. As it is."
```
| cell one | cell two |
|---|---|
<ul>
<li>Open the <a href="x.html">menu</a>.</li>
</ul>
"""


def test_parse_keeps_the_layout_and_finds_the_units():
    pieces = parse(DOCUMENT)
    units = [p for p in pieces if isinstance(p, Unit)]
    assert [u.text for u in units] == [
        "The <b>title</b>",
        "First sentence here. Second one, with {name} wrapped over two lines.",
        "An <i>item</i>.",
        "Another item",
        "cell one",
        "cell two",
        '<li>Open the <a href="x.html">menu</a>.</li>',
    ]
    assert [u.line for u in units] == [1, 3, 6, 7, 12, 12, 15]
    assert units[1].width == len("First sentence here. Second one, with {name}")
    # every character that is not a unit's is kept as it was
    assert (
        "".join(p if isinstance(p, str) else p.text for p in pieces).replace(
            units[1].text, "First sentence here. Second one, with {name}\nwrapped over two lines."
        )
        == DOCUMENT
    )


def test_a_document_comes_back_in_its_layout():
    assert (
        translate_document(DOCUMENT, reverse_engine())
        == """# <b>TITLE</b> THE

HERE. SENTENCE FIRST LINES. TWO OVER WRAPPED
WITH {name} ONE, SECOND

- <i>ITEM</i>. AN
- ITEM ANOTHER

```
code = "kept. As it is."
```
| ONE CELL | TWO CELL |
|---|---|
<ul>
<li><a href="x.html">MENU</a>. THE OPEN</li>
</ul>
"""
    )


def test_sentences_come_from_sentencex_and_keep_every_word():
    plain = "Dr. Smith came at 3 p.m. today. He left! Was it e.g. late?"
    words = mask(plain).words()
    assert split_sentences(plain, words, "en") == [
        Sentence(0, 7),
        Sentence(7, 9),
        Sentence(9, 13),
    ]
    german = "Das ist z. B. ein Satz. Und noch einer."
    assert split_sentences(german, mask(german).words(), "de") == [Sentence(0, 6), Sentence(6, 9)]


def test_a_long_sentence_is_split_at_a_clause_and_named(caplog):
    words = "one two three, four five six seven; eight nine ten".split()
    counts = lambda texts: [len(t.split()) + 1 for t in texts]  # noqa: E731
    with caplog.at_level(logging.WARNING):
        found = fit_sentences([Sentence(0, 10)], words, counts, 6, "doc.md:7")
    assert found == [Sentence(0, 3), Sentence(3, 7), Sentence(7, 10)]
    assert "doc.md:7: a sentence of 11 tokens, more than the model's 6" in caplog.text
    # no clause boundary: the middle word
    assert fit_sentences([Sentence(0, 4)], list("abcd"), counts, 3, "x") == [
        Sentence(0, 2),
        Sentence(2, 4),
    ]


def test_long_sentences_reach_the_model_in_parts_and_no_word_is_lost():
    seen = []
    engine = reverse_engine(token_counts=lambda ts: [len(t.split()) + 1 for t in ts], max_tokens=4)
    inner = engine.translate
    engine = dataclasses.replace(engine, translate=lambda ss: seen.extend(ss) or inner(ss))
    translate_document("a b, c d e; f g h i.\n", engine)
    assert all(len(s.split()) + 1 <= 4 for s in seen)
    assert " ".join(seen).split() == "a b, c d e; f g h i.".split()


def test_events_show_progress_sentence_by_sentence():
    document = "Cats sleep. Dogs run.\n\nBirds fly.\n"
    events = list(translate_events(document, reverse_engine(), batch=2))
    assert [e["event"] for e in events] == [
        "start", "sentence", "sentence", "paragraph", "sentence", "paragraph", "done",
    ]  # fmt: skip
    paragraphs = ["Cats sleep. Dogs run.", "Birds fly."]
    assert events[0] == {"event": "start", "paragraphs": paragraphs, "sentences": 3}
    assert events[1] == {"event": "sentence", "index": 0, "paragraph": 0, "source": "Cats sleep.",
                         "translation": "SLEEP. CATS"}  # fmt: skip
    assert events[3] == {"event": "paragraph", "paragraph": 0, "text": "SLEEP. CATS RUN. DOGS"}
    assert events[-1]["document"] == "SLEEP. CATS RUN. DOGS\n\nFLY. BIRDS\n"


class _Tags(html.parser.HTMLParser):
    def __init__(self, text):
        super().__init__()
        self.tags, self.words = [], []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_endtag(self, tag):
        self.tags.append("/" + tag)

    def handle_data(self, data):
        self.words += data.split()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("document")
    write_tiny_run(root, max_positions=32, seed=5)
    return root


def test_a_translator_translates_a_document_as_its_sentences(run_dir):
    """The slow path: each paragraph's sentences translated on their own, joined."""
    translator = Translator.from_run(str(run_dir / "out"), beam_size=2)
    document = "1 2 <b>3 4</b> 5\n\n<i>6 7</i> 8\n9\n"
    found = translator.translate_document(document)
    paragraphs = found.rstrip("\n").split("\n\n")
    assert len(paragraphs) == 2
    expected = translator.translate(["1 2 3 4 5", "6 7 8 9"])
    for paragraph, plain, source in zip(paragraphs, expected, document.split("\n\n"), strict=True):
        tags = _Tags(paragraph)
        assert tags.words == plain.split()
        assert sorted(tags.tags) == sorted(_Tags(source).tags)


def test_a_document_takes_terminology_as_its_lines_do(run_dir, tmp_path):
    """--terminology with a document: each sentence is held to the target terms of the source
    terms in it, as the same sentence on a line of its own with those constraints."""
    (tmp_path / "terms.tsv").write_text("# source<TAB>target\n3\t9 9\n6\t2\n")
    flags = _document_flags(run_dir, tmp_path, "1 2 <b>3 4</b> 5\n\n6 7 8\n")
    assert run_decode(*decode_flags(**flags, terminology=str(tmp_path / "terms.tsv"))) == 3
    translator = Translator.from_run(str(run_dir / "out"), beam_size=2)
    expected = translator.translate(["1 2 3 4 5", "6 7 8"], constraints=[["9 9"], ["2"]])
    assert "9 9" in expected[0] and "2" in expected[1].split()
    assert expected != translator.translate(["1 2 3 4 5", "6 7 8"])  # the terms changed them
    paragraphs = (tmp_path / "out.md").read_text().rstrip("\n").split("\n\n")
    assert [_Tags(p).words for p in paragraphs] == [e.split() for e in expected]
    assert _Tags(paragraphs[0]).tags == _Tags("<b></b>").tags


def _document_flags(run_dir, tmp_path, document: str) -> dict:
    """t2t-decode --input_format=document of `document` (written to doc.md) into out.md."""
    (tmp_path / "doc.md").write_text(document)
    return {
        "output_dir": str(run_dir / "out"),
        "decode_from_file": str(tmp_path / "doc.md"),
        "decode_to_file": str(tmp_path / "out.md"),
        "input_format": "document",
        "beam_size": 2,
    }


def test_t2t_decode_input_format_document(run_dir, tmp_path):
    flags = _document_flags(run_dir, tmp_path, "# 1 2 3\n\n- 4 <b>5</b>\n- 6\n")
    assert run_decode(*decode_flags(**flags)) == 4
    translator = Translator.from_run(str(run_dir / "out"), beam_size=2)
    written = (tmp_path / "out.md").read_text()
    assert written == translator.translate_document("# 1 2 3\n\n- 4 <b>5</b>\n- 6\n")
    lines = written.split("\n")
    assert lines[0].startswith("# ") and lines[1] == "" and lines[2].startswith("- ")
    for flag, value in (("nbest", 2), ("alignment", True), ("score_file", "x")):
        with pytest.raises(ValueError, match="--input_format=document"):
            run_decode(*decode_flags(**{**flags, flag: value}))


MARKDOWN = '# 1 **2 3** 4\n\n5 *6 [7 8](https://x.org/a_b "t t")* `9 0` __1__ _2_ 3 ![4](x.png)\n'
_MARKDOWN_MARK = re.compile(r"\*|_|`[^`]*`|!?\[|\]\([^)]*\)")


def _markdown_marks(text: str) -> collections.Counter:
    """The pairs and points of a text as a CommonMark reader pairs them (`inline_marks.find`,
    held to markdown-it-py's reading in test_markup.py): (open, close) and (point, "")."""
    found = inline_marks.find(text)
    opens = {name: text[s:e] for s, e, kind, name in found if kind == "open"}
    return collections.Counter(
        (opens.pop(name), text[s:e]) if kind == "close" else (text[s:e], "")
        for s, e, kind, name in found
        if kind != "open"
    )


def test_markdown_marks_come_back_through_a_translator_and_t2t_decode(run_dir, tmp_path):
    """Strong, emphasis, a link and an image (their text translated, the destination kept), a
    code span (kept): each mark once, nested as in the source, around the words the model
    gives for the plain text; t2t-decode writes the same."""
    translator = Translator.from_run(str(run_dir / "out"), beam_size=2)
    found = translator.translate_document(MARKDOWN)
    heading, blank, paragraph, end = found.split("\n")
    assert heading.startswith("# ") and blank == end == ""
    assert _markdown_marks(found) == _markdown_marks(MARKDOWN) == collections.Counter(
        [("**", "**"), ("*", "*"), ("[", '](https://x.org/a_b "t t")'), ("`9 0`", ""),
         ("__", "__"), ("_", "_"), ("![", "](x.png)")]
    )  # fmt: skip
    assert found.count('](https://x.org/a_b "t t")') == found.count("`9 0`") == 1
    expected = translator.translate(["1 2 3 4", "5 6 7 8 1 2 3 4"])
    for text, plain in zip((heading[2:], paragraph), expected, strict=True):
        assert _MARKDOWN_MARK.sub(" ", text).split() == plain.split()
    assert run_decode(*decode_flags(**_document_flags(run_dir, tmp_path, MARKDOWN))) == 3
    assert (tmp_path / "out.md").read_text() == found


def test_markup_nested_too_deep_is_refused_by_line_before_the_model_loads(
    run_dir, tmp_path, monkeypatch
):
    deep = "1 2\n\n3 " + "<b>" * 10_000 + "4" + "</b>" * 10_000 + "\n"
    flags = _document_flags(run_dir, tmp_path, deep)
    message = f"^{tmp_path / 'doc.md'}:3: markup nested more than {MAX_NESTING} levels deep"
    with monkeypatch.context() as patched, pytest.raises(ValueError, match=message):
        patched.setattr(RunFlags, "restore", lambda self: pytest.fail("restored"))
        run_decode(*decode_flags(**flags))
    assert not (tmp_path / "out.md").exists()
    translator = Translator.from_run(str(run_dir / "out"), beam_size=2)
    with pytest.raises(ValueError, match=f"^document:3: markup nested more than {MAX_NESTING}"):
        translator.translate_document(deep)
