"""Reading, writing and normalizing bracketed trees (t2t_lite.data.trees)."""

import os

import pytest

from t2t_lite.data.trees import (
    Tree,
    TreeParseError,
    normalize_tree,
    parse_tree,
    read_trees,
    strip_function_tags,
    tree_to_string,
    write_trees,
)

# Two WSJ-style trees (empty root wrapper, spread over lines) and a GUM-style ROOT tree.
MULTI = """\
( (S
    (NP-SBJ (DT The) (NN dog) )
    (VP (VBZ barks) )
    (. .) ))
( (S (NP-SBJ (PRP It))
     (VP (VBD ran)
         (ADVP-DIR (RB away)))))
(ROOT
  (NP (NNP GUM)))
"""


def write(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return str(path)


def test_reads_several_multiline_trees_per_file(tmp_path):
    trees = list(read_trees(write(tmp_path, "a.mrg", MULTI)))
    assert len(trees) == 3
    assert [t.label for t in trees] == ["", "", "ROOT"]
    assert [t.leaves() for t in trees] == [
        ["The", "dog", "barks", "."],
        ["It", "ran", "away"],
        ["GUM"],
    ]
    assert trees[1].tagged_words() == [("It", "PRP"), ("ran", "VBD"), ("away", "RB")]
    assert tree_to_string(trees[2]) == "(ROOT (NP (NNP GUM)))"


def test_bom_crlf_and_cr_only_files_read_the_same(tmp_path):
    expected = list(read_trees(write(tmp_path, "plain", MULTI)))
    crlf = b"\xef\xbb\xbf" + MULTI.replace("\n", "\r\n").encode()
    assert list(read_trees(write(tmp_path, "crlf", crlf))) == expected
    assert list(read_trees(write(tmp_path, "cr", MULTI.replace("\n", "\r")))) == expected


@pytest.mark.parametrize(
    "text, line, fragment",
    [
        ("(S (NP (DT a)\n(NN b))\n(VP (VB c))\n", 1, "missing 1 closing bracket"),
        ("(S (NP (DT a)))\n)\n", 2, "unexpected ')'"),
        ("(S (NP (DT a)))\nstray words\n", 2, "outside any bracket"),
        ("(S\n (NN a b))\n", 2, "has 2 words"),
        ("(S\n (NP a (NN b)))\n", 2, "mixes the word 'a'"),
    ],
)
def test_malformed_tree_errors_name_file_and_line(tmp_path, text, line, fragment):
    path = write(tmp_path, "bad.mrg", text)
    with pytest.raises(TreeParseError) as error:
        list(read_trees(path))
    assert f"{path}:{line}:" in str(error.value)
    assert fragment in str(error.value)


def test_invalid_utf8_names_the_line(tmp_path):
    path = write(tmp_path, "bad.ptb", b"(S (NN a))\n(S (NN \xff))\n")
    with pytest.raises(TreeParseError, match=r"bad\.ptb:2: invalid UTF-8"):
        list(read_trees(path))


def test_missing_file_is_an_oserror_naming_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.mrg"):
        list(read_trees(str(tmp_path / "nope.mrg")))


@pytest.mark.parametrize(
    "label, expected",
    [
        ("NP-SBJ-1", "NP"),
        ("NP=2", "NP"),
        ("S-NOM-SBJ", "S"),
        ("PP-LOC-PRD", "PP"),
        ("WHNP-3", "WHNP"),
        ("PRP$", "PRP$"),
        ("-LRB-", "-LRB-"),
        ("-RRB-", "-RRB-"),
        ("-NONE-", "-NONE-"),
        ("ADVP|PRT", "ADVP|PRT"),
    ],
)
def test_strip_function_tags(label, expected):
    assert strip_function_tags(label) == expected


def test_normalize_drops_traces_empty_constituents_and_tags():
    raw = parse_tree(
        "( (S (NP-SBJ-1 (NNP John)) (VP (VBZ wants) (S (NP-SBJ (-NONE- *-1)) (VP (TO to) "
        "(VP (VB go) (SBAR (-NONE- 0) (S (-NONE- *T*-2))))))) (PRN (-LRB- -LRB-) (NP (NN x)) "
        "(-RRB- -RRB-)) (. .)) )"
    )
    expected = (
        "(S (NP (NNP John)) (VP (VBZ wants) (S (VP (TO to) (VP (VB go))))) "
        "(PRN (-LRB- -LRB-) (NP (NN x)) (-RRB- -RRB-)) (. .))"
    )
    assert tree_to_string(normalize_tree(raw)) == expected
    # The input is left untouched.
    assert "NP-SBJ-1" in tree_to_string(raw)


def test_normalize_root_wrappers():
    assert str(normalize_tree(parse_tree("(ROOT (FRAG (NN x)))"))) == "(FRAG (NN x))"
    assert str(normalize_tree(parse_tree("(TOP (S (NN x)))"))) == "(S (NN x))"
    assert str(normalize_tree(parse_tree("(S-HLN (NN x))"))) == "(S (NN x))"
    # A wrapper around a lone word, or around several pieces, stays as TOP.
    assert str(normalize_tree(parse_tree("(ROOT (UH Hello))"))) == "(TOP (UH Hello))"
    assert str(normalize_tree(parse_tree("( (NP (NN a)) (. .))"))) == "(TOP (NP (NN a)) (. .))"
    assert normalize_tree(parse_tree("( (S (-NONE- *)) )")) is None


def test_write_trees_is_atomic_and_reads_back(tmp_path):
    trees = [parse_tree("(S (NP (DT a) (NN b)) (VP (VBZ c)))"), Tree("TOP", [])]
    path = str(tmp_path / "out.trees")
    assert write_trees(trees, path) == 2
    assert open(path).read() == "(S (NP (DT a) (NN b)) (VP (VBZ c)))\n(TOP)\n"
    assert list(read_trees(path)) == trees
    assert os.listdir(tmp_path) == ["out.trees"]

    def failing():
        yield trees[0]
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError):
        write_trees(failing(), path)
    assert os.listdir(tmp_path) == ["out.trees"]  # the old file stays whole, no temp left
    assert list(read_trees(path)) == trees
