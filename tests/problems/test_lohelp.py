"""The LibreOffice-help extractor on small hand-made pages with the real pages' structure."""

import collections

import pytest

from t2t_lite.problems import get_problem, lohelp

PAGE = """<!DOCTYPE html>
<html lang="{lang}"><head><title>{title}</title>
<script type="text/javascript">var par_id999 = "not text";</script></head>
<body><div id="DisplayArea">
<h1 id="hd_id3145136" dir="auto">{heading}</h1>
<p id="par_id3153527" class="paragraph" dir="auto"><span class="avis">{first}</span></p>
<table><tr><td><p id="par_id1" class="tablecontent">{cell} <a href="x.html">{link}</a>.</p></td>
</tr></table>
<p id="par_id7">{dup}</p><p id="par_id7">{dup} again</p>
<p id="other_id5">{ignored}</p>
<p id="par_id8">A&amp;B &lt;ok&gt;<br>{line}</p>
</div></body></html>
"""
EN = dict(
    lang="en-US",
    title="Writing Aids",
    heading="Writing Aids",
    first="Specifies the properties of the spelling.",
    cell="Click",
    link="here",
    dup="Duplicated",
    ignored="Not a paragraph",
    line="second line",
)
DE = dict(
    lang="de",
    title="Linguistik",
    heading="Linguistik",
    first="Legt die Eigenschaften der Rechtschreibung fest.",
    cell="Klicken Sie",
    link="hier",
    dup="Doppelt",
    ignored="Kein Absatz",
    line="zweite Zeile",
)


def test_extract_paragraphs():
    paragraphs = lohelp.extract_paragraphs(PAGE.format(**EN))
    assert paragraphs == {
        "hd_id3145136": "Writing Aids",
        "par_id3153527": "Specifies the properties of the spelling.",
        "par_id1": "Click here.",
        "par_id8": "A&B <ok>second line",
    }


def _tree(root, pages):
    for lang, values in (("en-US", EN), ("de", DE)):
        for name, extra in pages.items():
            path = root / lang / "text" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(PAGE.format(**{**values, **extra.get(lang, {})}), encoding="utf-8")


def test_align_by_page_and_id(tmp_path):
    _tree(tmp_path, {"a.html": {}, "b.html": {"de": {"first": "Anders."}}})
    (tmp_path / "en-US" / "text" / "only_english.html").write_text(PAGE.format(**EN))
    aligned = list(lohelp.align_help(str(tmp_path), "de"))
    assert len(aligned) == 8
    assert (
        "text/b.html#par_id3153527",
        "Specifies the properties of the spelling.",
        "Anders.",
    ) in aligned
    with pytest.raises(FileNotFoundError, match="help folder .*fr not found"):
        list(lohelp.align_help(str(tmp_path), "fr"))


@pytest.mark.parametrize(
    "english, other, keep",
    [
        ("Specifies the properties of the spelling.", "Legt die Eigenschaften fest.", True),
        ("Writing Aids", "Linguistik", False),  # under 3 words
        ("=SUM(A1:B2) + 3 * C4", "=SUMME(A1:B2) + 3 * C4", False),  # a formula
        ("A1 B2 C3 D4 E5 F6", "A1 B2 C3 D4 E5 G6", False),  # mostly not letters
        ("Click the OK button.", "Click the OK button.", False),  # untranslated
        (
            "Click the OK button.",
            "Klicken Sie auf die Schaltfl\u00e4che OK, um das Dialogfeld "
            "zu schlie\u00dfen und alle \u00c4nderungen zu speichern.",
            False,
        ),  # ratio over 2
    ],
)
def test_keep_pair(english, other, keep):
    assert lohelp.keep_pair(english, other) is keep


def test_filter_keeps_first_of_each_english_sentence():
    aligned = [
        ("p#1", "Open the file menu.", "\u00d6ffnen Sie das Men\u00fc."),
        ("p#2", "Open the file menu.", "Men\u00fc \u00f6ffnen."),
        ("p#3", "OK", "OK"),
    ]
    pairs, counts = lohelp.filtered_pairs(iter(aligned))
    assert pairs == [("Open the file menu.", "\u00d6ffnen Sie das Men\u00fc.")]
    assert counts == {"aligned": 3, "filtered": 1, "duplicate_english": 1, "kept": 1}


def test_split_is_a_deterministic_hash_of_english():
    sentences = [f"Sentence number {i} of the help." for i in range(4000)]
    splits = [lohelp.split_of(s) for s in sentences]
    assert splits == [lohelp.split_of(s) for s in sentences]
    counts = collections.Counter(splits)
    assert 60 < counts["dev"] < 180 and 60 < counts["test"] < 180  # about 3% each


def test_generate_data_from_a_help_dir(tmp_path):
    pages = {
        f"p{i}.html": {
            lang: {"first": f"{v['first'][:-1]} number {i}."}
            for lang, v in (("en-US", EN), ("de", DE))
        }
        for i in range(200)
    }
    _tree(tmp_path / "help", pages)
    problem = get_problem("translate_ende_lohelp")
    meta = problem.generate_data(str(tmp_path / "data"), help_dir=str(tmp_path / "help"))
    counts = meta["raw_counts"]
    # Per page 4 aligned (the duplicated id is dropped); kept: each numbered sentence, and
    # "A&B <ok>second line" once (its English repeats on every page).
    assert counts["aligned"] == 800 and counts["kept"] == 201
    assert sum(meta["splits"][s]["examples"] for s in ("train", "dev", "test")) == 201
    assert counts["dev_pairs"] == meta["splits"]["dev"]["examples"] > 0
    # No vocab_size: sized from the training pairs (auto_vocab_size: the floor of 2000 for this
    # tiny corpus, which yields fewer pieces than that); a given size is honoured.
    assert meta["options"]["vocab_size"] == 0 and 300 < meta["vocab"]["size"] <= 2000
    smaller = problem.generate_data(
        str(tmp_path / "data300"), help_dir=str(tmp_path / "help"), vocab_size="300"
    )
    assert smaller["options"]["vocab_size"] == 300 and smaller["vocab"]["size"] == 300


def test_modules_keep_or_leave_out_the_pages_of_help_modules(tmp_path):
    pages = {
        f"{module}/01/p{i}.html": {
            lang: {"first": f"{v['first'][:-1]} {module} number {i}."}
            for lang, v in (("en-US", EN), ("de", DE))
        }
        for module in ("scalc", "swriter", "shared")
        for i in range(3)
    }
    _tree(tmp_path / "help", pages)
    root = str(tmp_path / "help")

    def modules_of(option):
        return sorted({key.split("/")[1] for key, _, _ in lohelp.align_help(root, "de", option)})

    assert modules_of("") == ["scalc", "shared", "swriter"]
    assert modules_of("scalc") == ["scalc"]
    assert modules_of("scalc+shared") == ["scalc", "shared"]
    assert modules_of("-scalc") == ["shared", "swriter"]
    with pytest.raises(ValueError, match=r"modules='scal': unknown module\(s\) \['scal'\]"):
        modules_of("scal")


def test_auto_vocab_size_follows_its_rule():
    from t2t_lite.data import auto_vocab_size

    # 4000 * sqrt(pairs / 27000), rounded to a thousand, within [2000, 37000].
    pairs = [10, 20_000, 27_000, 60_750, 108_000, 1_000_000, 4_500_000]
    assert [auto_vocab_size(n) for n in pairs] == [2000, 3000, 4000, 6000, 8000, 24000, 37000]
