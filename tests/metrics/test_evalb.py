"""EVALB with COLLINS.prm conventions: hand-computed bracket counts (t2t_lite.metrics.evalb)."""

import dataclasses
import os
import subprocess
import sys

import pytest

from t2t_lite.data.trees import parse_tree
from t2t_lite.metrics import evalb

# (gold, test) pairs; the expected counts below are worked out by hand in the comments.
PAIRS = {
    # Gold S(0,4) NP(0,2) VP(2,4); test S(0,4) NP(0,1) VP(1,3). Only S matches. Test VP(1,3)
    # crosses gold NP and gold VP but counts once (crossings are counted per test bracket);
    # test NP(0,1) lies inside gold NP: no crossing. Tags: NNS for NN is wrong, 3 of 4 right.
    "crossing": (
        "(S (NP (DT a) (NN b)) (VP (VB c) (NN d)))",
        "(S (NP (DT a)) (VP (NNS b) (VB c)) (NN d))",
    ),
    # Punctuation goes with its brackets, so spans count John a friend left = 0..4:
    # gold S(0,4) NP(0,3) NP(1,3) VP(3,4); test S(0,4) NP(0,1) NP(1,3) VP(3,4): 3 match.
    # NP-SBJ compares as NP. Length 7 counts the punctuation (only -NONE- is left out).
    "punctuation": (
        "(S (NP-SBJ (NNP John) (, ,) (NP (DT a) (NN friend)) (, ,)) (VP (VBD left)) (. .))",
        "(S (NP (NNP John)) (, ,) (NP (DT a) (NN friend)) (, ,) (VP (VBD left) (. .)))",
    ),
    # Gold has NP(0,1) twice (unary chain), test once: multisets match one. ADVP = PRT.
    # Gold 5 brackets, test 4, matched 4. RB vs RP: 2 of 3 tags right.
    "multiset": (
        "(S (NP (NP (PRP it))) (VP (VBD ran) (ADVP (RB away))))",
        "(S (NP (PRP it)) (VP (VBD ran) (PRT (RP away))))",
    ),
    "identical": ("(S (NP (PRP I)) (VP (VBP see)))", "(S (NP (PRP I)) (VP (VBP see)))"),
    # Tagging "b" as "." deletes it from the test side only: 3 words against 2 is an error.
    "length": ("(S (NP (DT a) (NN b)) (VP (VBZ c)))", "(S (NP (DT a) (. b)) (VP (VBZ c)))"),
    # Only punctuation left on the test side: a skip sentence.
    "skip": ("(S (NP (DT a) (NN b)) (VP (VBZ c)))", "(S (. a) (, b) (: c))"),
}


def score(name, **params):
    gold, test = PAIRS[name]
    return evalb.score_sentence(
        parse_tree(gold), parse_tree(test), 1, dataclasses.replace(evalb.COLLINS, **params)
    )


def counts(row):
    return (row.status, row.length, row.matched, row.gold_brackets, row.test_brackets,
            row.crossing, row.words, row.correct_tags)  # fmt: skip


@pytest.mark.parametrize(
    "name, expected",
    [
        # status, length, matched, gold, test, crossing, words, correct tags
        ("crossing", (evalb.OK, 4, 1, 3, 3, 1, 4, 3)),
        ("punctuation", (evalb.OK, 7, 3, 4, 4, 0, 4, 4)),
        ("multiset", (evalb.OK, 3, 4, 5, 4, 0, 3, 2)),
        ("identical", (evalb.OK, 2, 3, 3, 3, 0, 2, 2)),
        ("length", (evalb.ERROR, 3, 0, 0, 0, 0, 0, 0)),
        ("skip", (evalb.SKIP, 3, 0, 0, 0, 0, 0, 0)),
    ],
)
def test_sentence_counts(name, expected):
    assert counts(score(name)) == expected


def test_error_messages_follow_evalb():
    assert score("length").message == "Length unmatch (3|2)"
    gold, test = parse_tree("(S (NN a) (NN b))"), parse_tree("(S (NN a) (NN c))")
    row = evalb.score_sentence(gold, test)
    assert (row.status, row.message) == (evalb.ERROR, "Words unmatch (b|c)")


def test_unlabeled_and_without_equivalence():
    assert score("crossing", labeled=False).matched == 1
    # Unlabelled, test NP(0,1) also meets one of gold's two NP(0,1) brackets: still 4 of 4.
    assert score("multiset", labeled=False).matched == 4
    assert score("multiset", equivalent_labels=()).matched == 3


def test_root_wrappers_score_alike():
    test = parse_tree("(S (NP (DT a)) (VP (NNS b) (VB c)) (NN d))")
    gold = "(S (NP (DT a) (NN b)) (VP (VB c) (NN d)))"
    for wrapped in (f"( {gold} )", f"(ROOT {gold})", f"(TOP {gold})", gold):
        row = evalb.score_sentence(parse_tree(wrapped), test)
        assert counts(row) == (evalb.OK, 4, 1, 3, 3, 1, 4, 3), wrapped


def evaluate(names, **params):
    gold = [parse_tree(PAIRS[n][0]) for n in names]
    test = [parse_tree(PAIRS[n][1]) for n in names]
    return evalb.evaluate(gold, test, dataclasses.replace(evalb.COLLINS, **params))


ALL = ["crossing", "punctuation", "multiset", "identical", "length", "skip"]


def test_totals_leave_out_error_and_skip_sentences():
    result = evaluate(ALL)
    a = result.all
    assert (a.sentences, a.errors, a.skips, a.valid) == (6, 1, 1, 4)
    # matched 1+3+4+3, gold 3+4+5+3, test 3+4+4+3
    assert (a.matched, a.gold_brackets, a.test_brackets) == (11, 15, 14)
    assert a.recall == pytest.approx(100 * 11 / 15)
    assert a.precision == pytest.approx(100 * 11 / 14)
    assert a.f1 == pytest.approx(100 * 22 / 29)  # 2PR/(P+R) = 2M/(G+T)
    assert a.percent_of_valid(a.complete) == 25.0
    assert (a.crossing, a.no_crossing, a.two_or_less_crossing) == (1, 3, 4)
    assert (a.words, a.correct_tags) == (13, 11)
    summary = evalb.format_summary(result)
    assert "Bracketing FMeasure       =  75.86" in summary
    assert "Average crossing          =   0.25" in summary
    assert "Tagging accuracy          =  84.62" in summary


def test_cutoff_summary_counts_length_with_punctuation():
    result = evaluate(ALL, cutoff_length=5)  # "punctuation" has length 7
    s = result.short
    assert (s.sentences, s.errors, s.skips) == (5, 1, 1)
    assert (s.matched, s.gold_brackets, s.test_brackets) == (8, 11, 10)
    assert "-- len<=5 --" in evalb.format_summary(result)


def test_rows_format_like_evalb():
    table = evalb.format_rows(evaluate(["crossing", "length"]).rows).splitlines()
    assert table[3].split() == "1 4 0 33.33 33.33 1 3 3 1 4 3 75.00".split()
    assert table[4].split() == "2 3 1 0.00 0.00 0 0 0 0 0 0 0.00".split()


def test_too_many_errors_and_count_mismatch_stop():
    with pytest.raises(evalb.EvalbError, match="more than 1 error sentences"):
        evaluate(["length", "crossing", "length"], max_errors=1)
    assert evaluate(["length", "length"], max_errors=None).all.errors == 2
    gold = [parse_tree(PAIRS["identical"][0])] * 2
    with pytest.raises(evalb.EvalbError, match="g.trees has 2 trees but t.trees has 1"):
        evalb.evaluate(gold, gold[:1], gold_name="g.trees", test_name="t.trees")


def test_t2t_evalb_command(tmp_path):
    gold, test = tmp_path / "gold.trees", tmp_path / "test.trees"
    # Gold spread over lines with WSJ's empty wrapper, test one per line with TOP.
    gold.write_text("".join(f"( {PAIRS[n][0]}\n)\n" for n in ALL))
    test.write_text("".join(f"(TOP {PAIRS[n][1]})\n" for n in ALL))
    command = [sys.executable, "-m", "t2t_lite.bin.t2t_evalb", f"--gold={gold}", f"--test={test}"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    assert "Bracketing FMeasure       =  75.86" in done.stdout
    assert "Number of Error sentence  =      1" in done.stdout
    assert "sentence 5: Length unmatch (3|2)" in done.stderr
    test.write_text(f"(TOP {PAIRS['identical'][1]})\n")
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    assert done.returncode == 2, done.stderr  # a user error: one line, status 2
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"t2t-evalb: error: {gold} has 6 trees but {test} has 1"), last


def test_a_tree_nested_a_thousand_deep_is_scored(tmp_path):
    """A broken model output can nest constituents thousands deep (2,003 characters here, inside
    t2t-serve's limit): reading it needs no recursion, in the library and in t2t-evalb."""
    from t2t_lite.data.trees import normalize_tree

    deep = "(S " * 1000 + "(NN x) (-NONE- *T*) (VB y)" + ")" * 1000
    flat = "(S (NN x) (VB y))"
    tree = parse_tree(deep)
    result = evalb.score_sentence(tree, tree)
    assert (result.matched, result.gold_brackets, result.words) == (1000, 1000, 2)
    assert evalb.score_sentence(parse_tree(flat), tree).matched == 1  # one S over both words
    normalized = normalize_tree(tree)
    assert normalized.leaves() == ["x", "y"] and "-NONE-" not in str(normalized)
    (tmp_path / "gold.trees").write_text(deep + "\n")
    (tmp_path / "test.trees").write_text(deep + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "t2t_lite.bin.t2t_evalb", f"--gold={tmp_path / 'gold.trees'}",
         f"--test={tmp_path / 'test.trees'}", "--summary_only"],
        capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Bracketing FMeasure       = 100.00" in done.stdout, done.stdout
