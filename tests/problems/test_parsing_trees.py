"""Linearization, repairing de-linearization and tree sources (t2t_lite.problems.parsing_trees)."""

import os
import random

import pytest

from t2t_lite.problems.parsing_trees import (
    delinearize,
    glob_files,
    glob_pairs,
    gum_files,
    gum_pairs,
    gum_split,
    linearize,
    normalize_tree,
    normalized_trees,
    parse_tree,
    tree_pairs,
    wsj_files,
    wsj_pairs,
)

# The development data sits next to the repository (../shared/data); tests skip without it.
GUM_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data", "gum")

# raw treebank tree -> (normalized tree, linearization)
CASES = [
    (
        "( (S (NP-SBJ (NNP John)) (VP (VBZ has) (NP (DT a) (NN dog))) (. .)) )",
        "(S (NP (NNP John)) (VP (VBZ has) (NP (DT a) (NN dog))) (. .))",
        "(S (NP NNP )NP (VP VBZ (NP DT NN )NP )VP . )S",
    ),
    (  # traces, indices, an empty SBAR, -LRB-/-RRB-
        "( (S (NP-SBJ-1 (PRP We)) (VP (VBD tried) (S (NP-SBJ (-NONE- *-1)) (VP (TO to) "
        "(VP (VB leave) (SBAR (-NONE- 0) (S (-NONE- *T*-2))))))) (PRN (-LRB- -LRB-) "
        "(ADVP-TMP (RB again)) (-RRB- -RRB-)) (. .)) )",
        "(S (NP (PRP We)) (VP (VBD tried) (S (VP (TO to) (VP (VB leave))))) "
        "(PRN (-LRB- -LRB-) (ADVP (RB again)) (-RRB- -RRB-)) (. .))",
        "(S (NP PRP )NP (VP VBD (S (VP TO (VP VB )VP )VP )S )VP (PRN -LRB- (ADVP RB )ADVP -RRB- "
        ")PRN . )S",
    ),
    (  # unary chains stay: S -> VP -> VP, NP -> NP
        "(ROOT (S (VP (VP (VB Go))) (NP-TMP (NP (NN today))) (. !)))",
        "(S (VP (VP (VB Go))) (NP (NP (NN today))) (. !))",
        "(S (VP (VP VB )VP )VP (NP (NP NN )NP )NP . )S",
    ),
    ("(ROOT (UH Hello))", "(TOP (UH Hello))", "(TOP UH )TOP"),
]


@pytest.mark.parametrize("raw, normalized, linear", CASES)
def test_linearize_then_delinearize_gives_the_normalized_tree(raw, normalized, linear):
    tree = normalize_tree(parse_tree(raw))
    assert str(tree) == normalized
    assert linearize(tree) == linear
    assert delinearize(linear, tree.leaves()) == tree
    assert list(tree_pairs([parse_tree(raw)])) == [(" ".join(tree.leaves()), linear)]


def test_round_trip_on_real_gum_trees():
    if not os.path.isdir(GUM_DIR):
        pytest.skip("../shared/data/gum is absent")
    paths = sorted(os.path.join(GUM_DIR, n) for n in os.listdir(GUM_DIR))[::10]
    count = 0
    for tree in normalized_trees(paths):
        assert delinearize(linearize(tree), tree.leaves()) == tree, str(tree)
        count += 1
    assert count > 1000


WORDS = ["The", "dog", "barks", "."]


@pytest.mark.parametrize(
    "prediction, expected",
    [
        # unbalanced: missing closing brackets
        ("(S (NP DT NN )NP (VP VBZ .", "(S (NP (DT The) (NN dog)) (VP (VBZ barks) (. .)))"),
        # unbalanced: extra closing brackets are ignored; the pieces get one S root
        (
            ")S (NP DT NN )NP )NP )S (VP VBZ )VP . )S )S",
            "(S (NP (DT The) (NN dog)) (VP (VBZ barks)) (. .))",
        ),
        # mismatched closing labels: a closing bracket closes the innermost open phrase
        ("(S (NP DT NN )VP (VP VBZ )NP . )S", "(S (NP (DT The) (NN dog)) (VP (VBZ barks)) (. .))"),
        # too few leaves: the rest is appended with a guessed tag
        ("(S (NP DT )NP )S", "(S (NP (DT The)) (XX dog) (XX barks) (. .))"),
        # too many leaves: extra tags are dropped, and the phrase left empty with them
        (
            "(S (NP DT NN NN )NP (VP VBZ )VP . . )S",
            "(S (NP (DT The) (NN dog) (NN barks)) (VP (VBZ .)))",
        ),
        (
            "(S (NP DT NN NN NN NN )NP (VP VBZ )VP )S",
            "(S (NP (DT The) (NN dog) (NN barks) (NN .)))",
        ),
        # empty output: a flat tree
        ("", "(S (XX The) (XX dog) (XX barks) (. .))"),
        # tags only, no brackets
        ("DT NN VBZ .", "(S (DT The) (NN dog) (VBZ barks) (. .))"),
        # empty phrases and a bare "(" are removed / relabelled
        ("(NP )NP ( (VP )VP DT NN VBZ . )", "(S (DT The) (NN dog) (VBZ barks) (. .))"),
    ],
)
def test_delinearize_repairs_broken_outputs(prediction, expected):
    tree = delinearize(prediction, WORDS)
    assert str(tree) == expected
    assert tree.leaves() == WORDS


def test_delinearize_keeps_every_word_in_order_on_random_garbage():
    rng = random.Random(7)
    vocab = ["(S", ")S", "(NP", ")NP", "(VP", ")VP", "(", ")", "NN", "DT", "VBZ", ".", "(PP"]
    for trial in range(300):
        words = [f"w{i}" for i in range(rng.randint(1, 12))]
        prediction = [rng.choice(vocab) for _ in range(rng.randint(0, 40))]
        tree = delinearize(prediction, words)
        assert tree.leaves() == words, (trial, prediction)
        assert str(parse_tree(str(tree))) == str(tree)  # well-formed: it parses back


def test_delinearize_survives_deep_nesting_and_no_words():
    tree = delinearize("(NP " * 400 + "NN", ["x"])
    assert tree.leaves() == ["x"]
    assert str(delinearize("(S NN )S", [])) == "(S)"


def make_wsj(root, sections=range(0, 25)):
    for section in sections:
        folder = os.path.join(root, f"{section:02d}")
        os.makedirs(folder)
        for k in (1, 0):
            with open(os.path.join(folder, f"wsj_{section:02d}{k:02d}.mrg"), "w") as f:
                f.write(f"( (S (NP-SBJ (NN s{section}f{k})) (VP (VBZ is) (NP (-NONE- *)))) )\n")


def test_wsj_files_by_section(tmp_path):
    root = str(tmp_path / "wsj")
    make_wsj(root)
    train = wsj_files(root, "train")
    assert len(train) == 40
    assert os.path.basename(train[0]) == "wsj_0200.mrg"
    assert os.path.basename(train[-1]) == "wsj_2101.mrg"
    assert [os.path.basename(p) for p in wsj_files(root, "dev")] == ["wsj_2200.mrg", "wsj_2201.mrg"]
    pairs = list(wsj_pairs(root, "test"))
    target = "(S (NP NN )NP (VP VBZ )VP )S"  # the trace and the NP it left empty are gone
    assert pairs == [("s23f0 is", target), ("s23f1 is", target)]


def test_wsj_files_accepts_the_ldc_layout(tmp_path):
    make_wsj(str(tmp_path / "parsed" / "mrg" / "wsj"), sections=[22, 23])
    assert len(wsj_files(str(tmp_path), "test")) == 2


def test_wsj_errors_name_the_flag_and_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"--ptb_dir=.*nowhere: no such folder"):
        wsj_files(str(tmp_path / "nowhere"), "train")
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match="not a folder"):
        wsj_files(str(tmp_path / "file"), "dev")
    with pytest.raises(FileNotFoundError, match="expected WSJ section folders"):
        wsj_files(str(tmp_path), "dev")
    root = str(tmp_path / "wsj")
    make_wsj(root, sections=[23])
    with pytest.raises(FileNotFoundError, match=r"section folder .*22 is missing"):
        wsj_files(root, "dev")
    with pytest.raises(ValueError, match="unknown split 'valid'"):
        wsj_files(root, "valid")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every folder")
def test_wsj_unreadable_folder(tmp_path):
    root = tmp_path / "wsj"
    make_wsj(str(root), sections=[23])
    root.chmod(0)
    try:
        with pytest.raises(PermissionError, match="not readable"):
            wsj_files(str(root), "test")
    finally:
        root.chmod(0o755)


def test_glob_files(tmp_path):
    for name in ("b.mrg", "a.mrg", "c.txt"):
        (tmp_path / name).write_text("(S (NN x))\n")
    assert [os.path.basename(p) for p in glob_files(str(tmp_path / "*.mrg"))] == ["a.mrg", "b.mrg"]
    both = glob_files(f"{tmp_path}/c.txt,{tmp_path}/a.*", flag="--dev_trees")
    assert [os.path.basename(p) for p in both] == ["c.txt", "a.mrg"]
    with pytest.raises(FileNotFoundError, match=r"--test_trees=.*\*\.ptb: no file matches"):
        glob_files(str(tmp_path / "*.ptb"), flag="--test_trees")
    assert list(glob_pairs(str(tmp_path / "*.mrg"))) == [("x", "(S NN )S")] * 2


def test_gum_split_is_by_document_name_only():
    names = [f"GUM_genre_doc{i}" for i in range(2000)]
    splits = [gum_split(n) for n in names]
    assert gum_split("/a/b/GUM_genre_doc5.ptb") == gum_split("GUM_genre_doc5") == splits[5]
    counts = {s: splits.count(s) for s in ("train", "dev", "test")}
    assert 1700 < counts["train"] < 1900 and 60 < counts["dev"] < 140 and 60 < counts["test"] < 140
    wider = [gum_split(n, dev_percent=10, test_percent=20) for n in names]
    # Growing the held-out share only moves documents out of train, never between dev and test.
    assert all(w == "test" for s, w in zip(splits, wider, strict=True) if s == "test")


def test_gum_files_split_of_the_shared_corpus():
    if not os.path.isdir(GUM_DIR):
        pytest.skip("../shared/data/gum is absent")
    files = {split: gum_files(GUM_DIR, split) for split in ("train", "dev", "test")}
    assert {k: len(v) for k, v in files.items()} == {"train": 254, "dev": 11, "test": 16}
    assert not set(files["train"]) & (set(files["dev"]) | set(files["test"]))
    pairs = list(gum_pairs(GUM_DIR, "test"))
    assert len(pairs) == 981
    assert all(
        len(words.split()) == len(target.split()) - 2 * target.count("(") for words, target in pairs
    )
