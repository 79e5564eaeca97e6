"""Markup and placeholders taken out of a paragraph and put back into its translation by word
alignment (`t2t_lite.document.markup`): literal examples, and random trees of tags over random
alignments, where every tag in must be out once, well nested, around the translation's words."""

from __future__ import annotations

import html.parser
import random

import pytest

from t2t_lite.document import inline_marks
from t2t_lite.document.markup import (
    MAX_NESTING,
    Mark,
    has_text,
    mask,
    proportional_alignment,
    restore,
)


def test_mask_takes_tags_and_placeholders_out_of_the_text():
    found = mask("Choose <emph>Format - Cells</emph>, then {name} at https://x.org/a, or <br/> %s.")
    assert found.plain == "Choose Format - Cells, then at, or."  # no space before a stop
    assert found.marks == (
        Mark("<emph>", "</emph>", 7, 21, -1),
        Mark("{name}", "", 28, 28, -1, True, True),
        Mark("https://x.org/a", "", 30, 30, -1, True, True),
        Mark("<br/>", "", 34, 34, -1, True, True),
        Mark("%s", "", 34, 34, -1, True, True),
    )


def test_numbers_are_masked_only_where_the_tokenizer_breaks_them():
    assert mask("It costs 1,234.50 now").plain == "It costs 1,234.50 now"
    found = mask("It costs 1,234.50 now", breaks=lambda number: number == "1,234.50")
    assert found.plain == "It costs now" and found.marks[0].text == "1,234.50"
    assert mask("It costs 3.5 now", breaks=lambda number: False).plain == "It costs 3.5 now"


@pytest.mark.parametrize(
    "source, translation, alignment, expected",
    [
        # the tag follows its word to where the translation puts it; the full stop stays out
        ("Press <b>Enter</b>.", "Drücken Sie die Eingabetaste.", [(0, 0), (0, 1), (1, 3)],
         "Drücken Sie die <b>Eingabetaste</b>."),
        # punctuation the source span did not end in stays outside: the comma here
        ("Click <b>Finish</b> to close", "Klicken Sie auf Fertigstellen, um zu schließen",
         [(0, 0), (1, 3), (2, 4), (3, 6)], "Klicken Sie auf <b>Fertigstellen</b>, um zu schließen"),
        ("<b>Why?</b> Because", "Warum? Weil", [(0, 0), (1, 1)], "<b>Warum?</b> Weil"),
        # a span over several words covers the first to the last of their targets
        ("Choose <emph>File - New</emph> now", "Wählen Sie jetzt Datei – Neu",
         [(0, 0), (1, 3), (2, 4), (3, 5), (4, 2)], "Wählen Sie jetzt <emph>Datei – Neu</emph>"),
        # nesting kept; a child clamped into its parent
        ('See <a href="x y">the <i>Number</i> tab</a>!', "Siehe das Register Zahlen!",
         [(0, 0), (1, 1), (2, 3), (3, 2)], 'Siehe <a href="x y">das Register <i>Zahlen</i></a>!'),
        # a placeholder goes after the target of the word before it, glued to its comma
        ("Open {file} now, then at https://x.org, go", "Öffnen Sie jetzt, dann bei, los",
         [(0, 0), (1, 2), (2, 3), (3, 4), (4, 5)],
         "Öffnen {file} Sie jetzt, dann bei https://x.org, los"),
        # no target aligned: an empty pair where its start goes
        ("a <b>b</b> c", "A C", [(0, 0), (2, 1)], "A <b></b> C"),
        # tags that do not pair up are written back as points
        ("a <x>b</y> c", "A B C", [(0, 0), (1, 1), (2, 2)], "A <x>B</y> C"),
    ],
)  # fmt: skip
def test_restore_literal(source, translation, alignment, expected):
    assert restore(mask(source), translation, alignment) == expected


def test_siblings_that_would_cross_are_kept_apart_and_in_target_order():
    masked = mask("<b>a b</b> <i>c</i>")
    # b's words go to targets 1-2, i's word to target 1: the shorter goes first, b starts
    # where it ends; both kept.
    assert restore(masked, "X Y Z", [(0, 2), (1, 1), (2, 1)]) == "X <i>Y</i> <b>Z</b>"
    # the translation reorders them: the tags follow.
    assert restore(masked, "X Y Z", [(0, 1), (1, 2), (2, 0)]) == "<i>X</i> <b>Y Z</b>"


def test_without_an_alignment_words_map_in_proportion():
    assert proportional_alignment(4, 2) == [(0, 0), (1, 0), (2, 1), (3, 1)]
    assert restore(mask("a b <b>c d</b>"), "A B", None) == "A <b>B</b>"


class _Tags(html.parser.HTMLParser):
    """The tags of a text in order, and whether they nest."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=False)
        self.tags, self.stack, self.nested = [], [], True
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append(f"<{tag}>")
        self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append(f"<{tag}/>")

    def handle_endtag(self, tag):
        self.tags.append(f"</{tag}>")
        self.nested &= bool(self.stack) and self.stack.pop() == tag


def _random_tree(rng: random.Random, words: list[str], depth: int = 0) -> str:
    """Words with random well-nested tags and empty tags around and between them."""
    out, k = [], 0
    while k < len(words):
        roll = rng.random()
        if roll < 0.25 and depth < 3:
            size = rng.randint(1, max(1, len(words) - k))
            name = rng.choice("biuaemph"[: rng.randint(1, 5)]) or "b"
            inner = _random_tree(rng, words[k : k + size], depth + 1)
            out.append(f"<{name}>{inner}</{name}>")
            k += size
        elif roll < 0.35:
            out.append(rng.choice(["<ph/>", "<br/>"]))
        else:
            out.append(words[k])
            k += 1
    return " ".join(out)


@pytest.mark.parametrize("seed", range(200))
def test_every_tag_comes_back_once_and_well_nested(seed):
    rng = random.Random(seed)
    source_words = [f"w{i}" for i in range(rng.randint(1, 12))]
    source = _random_tree(rng, source_words)
    target = [f"t{j}." if rng.random() < 0.2 else f"t{j}" for j in range(rng.randint(1, 12))]
    alignment = [
        (i, rng.randrange(len(target)))
        for i in range(len(source_words))
        for _ in range(rng.randint(0, 2))
    ]
    masked = mask(source)
    assert masked.plain == " ".join(source_words)
    out = restore(masked, " ".join(target), alignment)
    found, expected = _Tags(out), _Tags(source)
    assert found.nested and not found.stack
    assert sorted(found.tags) == sorted(expected.tags)
    stripped = html.parser.HTMLParser()  # the words, in order, once the tags are gone
    pieces = []
    stripped.handle_data = pieces.append
    stripped.feed(out)
    assert "".join(pieces).split() == target


@pytest.mark.parametrize(
    "text, marks",
    [
        ("**a** and __b__", [("**", "open"), ("**", "close"), ("__", "open"), ("__", "close")]),
        ("*a* _b_", [("*", "open"), ("*", "close"), ("_", "open"), ("_", "close")]),
        ("***x***", [("*", "open"), ("**", "open"), ("**", "close"), ("*", "close")]),
        ("**a *b** c*", [("*", "open"), ("*", "open"), ("*", "open"), ("*", "close"),
                         ("*", "close"), ("*", "close")]),
        ("*a **b** c*", [("*", "open"), ("**", "open"), ("**", "close"), ("*", "close")]),
        ('[the menu](https://x.org/a_b "The *menu*")',
         [("[", "open"), ('](https://x.org/a_b "The *menu*")', "close")]),
        ("![a logo](logo.png)", [("![", "open"), ("](logo.png)", "close")]),
        ("`a **b** <i>` c", [("`a **b** <i>`", "point")]),
        ("``a ` b`` c", [("``a ` b``", "point")]),
        # none: spaced stars, underscores inside words, escapes, a bracket without a destination
        ("2 * 3 * 4, snake_case_name, \\*a\\*, [a] b, `open", []),
        ('<a title="x>y" data-v=\'1>2\'>z</a>',
         [('<a title="x>y" data-v=\'1>2\'>', "open"), ("</a>", "close")]),
        ("see <https://x.org> or <me@x.org>",
         [("<https://x.org>", "point"), ("<me@x.org>", "point")]),
    ],
)  # fmt: skip
def test_markdown_marks_are_found_as_commonmark_pairs_them(text, marks):
    """CommonMark's pairing (checked against markdown-it-py's rendering of the same texts)."""
    assert [(text[s:e], kind) for s, e, kind, _ in inline_marks.find(text)] == marks


@pytest.mark.parametrize(
    "source, translation, alignment, expected",
    [
        ("Press **Enter** now.", "Drücken Sie jetzt die Eingabetaste.",
         [(0, 0), (1, 4), (2, 2)], "Drücken Sie jetzt die **Eingabetaste**."),
        ("Open *the [File menu](https://x.org/a_b)* or run `ls -l`.",
         "Öffnen Sie das Menü Datei oder führen Sie aus.",
         [(0, 0), (1, 2), (2, 4), (3, 3), (4, 5), (5, 6)],
         "Öffnen Sie *das [Menü Datei](https://x.org/a_b)* oder führen `ls -l` Sie aus."),
        ('A <a title="x>y">link</a> here', "Ein Link hier", [(0, 0), (1, 1), (2, 2)],
         'Ein <a title="x>y">Link</a> hier'),
        # a Markdown pair is never written empty ("****"): with no target aligned, in
        # proportion; pushed out by a sibling, around the item before it, inside that sibling
        ("a **b** c", "A C", [(0, 0), (2, 1)], "**A** C"),
        ("*a b* __c__", "X Y", [(0, 0), (1, 1), (2, 1)], "*X __Y__*"),
    ],
)  # fmt: skip
def test_markdown_marks_come_back_around_their_words(source, translation, alignment, expected):
    assert restore(mask(source), translation, alignment) == expected


def test_markup_nested_past_the_limit_is_refused_in_one_message():
    deepest = "<b>" * MAX_NESTING + "x y" + "</b>" * MAX_NESTING
    masked = mask(deepest)
    assert masked.plain == "x y" and len(masked.marks) == MAX_NESTING
    assert (
        restore(masked, "Y X", [(0, 1), (1, 0)])
        == "<b>" * MAX_NESTING + "Y X" + "</b>" * MAX_NESTING
    )
    for text in ("<b>" * (MAX_NESTING + 1) + "x" + "</b>" * (MAX_NESTING + 1),
                 "<b>" * 10_000 + "x" + "</b>" * 10_000,
                 "*" * 300 + "x" + "*" * 300):  # fmt: skip
        with pytest.raises(ValueError, match=f"^markup nested more than {MAX_NESTING} levels deep"):
            mask(text)
    # 10,000 opens never closed, or closes never opened, nest nothing: points, each kept once
    for text in ("<b>" * 10_000 + "x", "x" + "</b>" * 10_000):
        out = restore(mask(text), "X", [(0, 0)])
        assert (
            out.count("b>") == 10_000 and out.replace("<b>", "").replace("</b>", "").strip() == "X"
        )


def test_has_text_says_whether_anything_but_marks_is_left():
    assert not has_text(' <ul> </p><br/> `code` <a href="x>y"> ')
    assert has_text("<li>Open") and has_text("**a**") and not has_text("")
