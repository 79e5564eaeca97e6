"""Markup and placeholders taken out of a paragraph and put back into its translation by word
alignment (`t2t_lite.decode.markup`): literal examples, and random trees of tags over random
alignments, where every tag in must be out once, well nested, around the translation's words."""

from __future__ import annotations

import html.parser
import random

import pytest

from t2t_lite.decode.markup import Mark, mask, proportional_alignment, restore


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
