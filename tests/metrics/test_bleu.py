"""BLEU as sacreBLEU and as the paper reports it (t2t_lite.metrics.bleu)."""

import math
import os
import subprocess
import sys

import pytest
import sacrebleu

from t2t_lite.metrics import bleu

HYP = ["a well-known fact is here .", "The cat sat on the mat.", "It is state-of-the-art work!"]
REF = ["a well-known fact is there .", "The cat sat on a mat.", "It is state-of-the-art work."]


@pytest.mark.parametrize(
    "line, expected",
    [
        ("rich-text format", "rich ##AT##-##AT## text format"),
        ("state-of-the-art", "state ##AT##-##AT## of ##AT##-##AT## the ##AT##-##AT## art"),
        # perl's s{(\S)-(\S)}{...}g does not overlap matches: the "y" is used up by "x-y".
        ("x-y-z", "x ##AT##-##AT## y-z"),
        ("pages 3-4", "pages 3 ##AT##-##AT## 4"),
        ("a - b -- c", "a - b -- c"),
        ("e-", "e-"),
    ],
)
def test_split_compounds(line, expected):
    assert bleu.split_compounds(line) == expected


def test_paper_tokenize_uses_13a_then_splits():
    assert bleu.paper_tokenize('A well-known "fact".') == 'A well ##AT##-##AT## known " fact " .'


def test_hand_computed_compound_split_bleu():
    # Tokens: a well ##AT##-##AT## known fact is here|there . (8 each). The n-grams touching
    # the one wrong word are wrong: matches 7/8, 5/7, 4/6, 3/5; product 1/4, BLEU 100 * 4th
    # root = 70.71. Without the split (6 tokens): 5/6, 3/5, 2/4, 1/3; product 1/12: 53.73.
    split = bleu.tokenized_bleu(HYP[:1], [REF[:1]])
    assert split.score.counts == [7, 5, 4, 3]
    assert split.score.totals == [8, 7, 6, 5]
    assert split.bleu == pytest.approx(100 * 0.25**0.25)
    assert bleu.sacre_bleu(HYP[:1], [REF[:1]]).bleu == pytest.approx(100 * (1 / 12) ** 0.25)


def test_sacre_bleu_is_sacrebleu_with_its_signature():
    ours = bleu.sacre_bleu(HYP, [REF])
    theirs = sacrebleu.corpus_bleu(HYP, [REF])
    assert ours.bleu == pytest.approx(theirs.score, abs=1e-9)
    assert (
        ours.signature
        == f"nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:{sacrebleu.__version__}"
    )
    assert bleu.sacre_bleu(HYP, [REF], tokenize="intl").signature.split("|")[3] == "tok:intl"


def test_tokenized_bleu_is_sacrebleu_on_pretokenized_text():
    pretokenized_hyp = [
        "a well ##AT##-##AT## known fact is here .",
        "The cat sat on the mat .",
        "It is state ##AT##-##AT## of ##AT##-##AT## the ##AT##-##AT## art work !",
    ]
    pretokenized_ref = [
        "a well ##AT##-##AT## known fact is there .",
        "The cat sat on a mat .",
        "It is state ##AT##-##AT## of ##AT##-##AT## the ##AT##-##AT## art work .",
    ]
    theirs = sacrebleu.corpus_bleu(
        pretokenized_hyp, [pretokenized_ref], tokenize="none", smooth_method="none", force=True
    )
    ours = bleu.tokenized_bleu(HYP, [REF])
    assert ours.bleu == pytest.approx(theirs.score, abs=1e-9)
    assert ours.score.counts == theirs.counts
    assert ours.signature.endswith("tok:none|smooth:none|" f"version:{sacrebleu.__version__}"
                                   "|pretok:13a+compound-split")  # fmt: skip
    assert ours.bleu > bleu.sacre_bleu(HYP, [REF]).bleu  # splitting adds easy matches


def test_no_smoothing_like_multi_bleu():
    # No 4-gram in common: multi-bleu.perl (and sacreBLEU without smoothing) give 0.
    assert bleu.tokenized_bleu(["a b c d"], [["a b c e"]]).bleu == 0.0
    assert bleu.sacre_bleu(["a b c d"], [["a b c e"]]).bleu > 0.0  # sacreBLEU's exp smoothing


def test_several_references():
    refs = [REF, ["a well-known fact is here .", "The cat sat on the mat.", "x"]]
    assert bleu.sacre_bleu(HYP, refs).bleu == pytest.approx(sacrebleu.corpus_bleu(HYP, refs).score)
    assert bleu.sacre_bleu(HYP, refs).signature.startswith("nrefs:2|")


def write(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def test_read_lines_accepts_bom_and_crlf(tmp_path):
    path = write(tmp_path, "a.txt", b"\xef\xbb\xbfone\r\ntwo\r\n\r\nfour")
    assert bleu.read_lines(path) == ["one", "two", "", "four"]


@pytest.mark.parametrize(
    "data, message",
    [
        (b"one\rtwo\r", r"a\.txt:1: carriage return"),
        (b"one\ntw\x00o\n", r"a\.txt:2: NUL byte"),
        (b"one\ntwo\n\xc3(\n", r"a\.txt:3: invalid UTF-8"),
    ],
)
def test_read_lines_rejects_what_would_change_the_line_count(tmp_path, data, message):
    with pytest.raises(ValueError, match=message):
        bleu.read_lines(write(tmp_path, "a.txt", data))


def test_line_count_mismatch_names_both_files(tmp_path):
    hyp = write(tmp_path, "hyp.txt", "\n".join(HYP).encode() + b"\n")
    ref = write(tmp_path, "ref.txt", "\n".join(REF[:2]).encode() + b"\n")
    with pytest.raises(ValueError, match=r"hyp\.txt has 3 lines but .*ref\.txt has 2"):
        bleu.bleu_files(hyp, [ref])


def test_t2t_bleu_command(tmp_path):
    hyp = write(tmp_path, "hyp.txt", "\n".join(HYP).encode() + b"\n")
    ref = write(tmp_path, "ref.txt", "\n".join(REF).encode() + b"\n")
    command = [sys.executable, "-m", "t2t_lite.bin.t2t_bleu", f"--translation={hyp}"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run(
        command + [f"--reference={ref}", "--score_only"], capture_output=True, text=True, env=env
    )
    sacre, tokenized = (float(x) for x in done.stdout.split())
    assert math.isclose(sacre, round(sacrebleu.corpus_bleu(HYP, [REF]).score, 2))
    assert math.isclose(tokenized, round(bleu.tokenized_bleu(HYP, [REF]).bleu, 2))
    short = write(tmp_path, "short.txt", b"x\n")
    done = subprocess.run(
        command + [f"--reference={short}"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 2, done.stderr  # a user error: one line, status 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("t2t-bleu: error: ") and "has 3 lines but" in line
    assert "short.txt has 1" in line
