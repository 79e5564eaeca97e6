"""chrF, chrF++ and TER, and the paired tests against a baseline (t2t_lite/metrics/scores.py,
t2t-bleu --metrics / --baseline): literal scores worked by hand, the tests' verdicts on systems
built to differ, and the command's numbers and one-line errors."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys

import pytest

from t2t_lite.metrics import scores

WORDS = "the cat sat on a mat with dog house red green blue small big tree river".split()


def _corpus(seed: int = 0, lines: int = 150) -> tuple[list[str], list[str], list[str]]:
    """(references, a good system with 10 % of words replaced, a worse one with 35 %)."""
    rng = random.Random(seed)
    refs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 12))) for _ in range(lines)]

    def noisy(share: float) -> list[str]:
        return [
            " ".join(w if rng.random() > share else rng.choice(WORDS) for w in line.split())
            for line in refs
        ]

    return refs, noisy(0.1), noisy(0.35)


def test_scores_worked_by_hand():
    refs = ["the cat sat on the mat"]
    same = {s.name: s.score for s in scores.corpus_scores(refs, [refs], ["chrf", "ter"])}
    assert same == {"chrf": 100.0, "ter": 0.0}
    # one word of six substituted, one deleted: TER = 2 edits / 6 reference words
    (ter,) = scores.corpus_scores(["the dog sat on mat"], [refs], ["ter"])
    assert ter.score == pytest.approx(100 * 2 / 6)
    assert ter.text.startswith("TER = 33.33") and "tok:tercom" in ter.signature
    # no character n-gram in common: chrF 0
    (chrf,) = scores.corpus_scores(["xyz"], [["qqq"]], ["chrf"])
    assert chrf.score == 0.0 and "nc:6|nw:0" in chrf.signature
    (plus,) = scores.corpus_scores(refs, [refs], ["chrf++"])
    assert plus.score == 100.0 and "nw:2" in plus.signature


@pytest.mark.parametrize(
    "text, message",
    [
        ("bleu,chrF", None),
        ("bleu,meteor", "meteor is not one of bleu, chrf, chrf++, ter"),
        ("", "no metric is not one of"),
        ("chrf,chrf", "a metric named twice"),
    ],
)
def test_metric_names(text, message):
    if message is None:
        assert scores.parse_metrics(text) == ("bleu", "chrf")
    else:
        with pytest.raises(ValueError, match=re.escape(message)):
            scores.parse_metrics(text)


@pytest.mark.parametrize("test_type", ["bs", "ar"])
def test_a_better_system_is_significant_and_a_worse_one_is_not_better(test_type):
    refs, good, bad = _corpus()
    names = ["bleu", "chrf", "ter"]
    better = scores.paired_test(bad, good, [refs], names, test_type, samples=200)
    assert [c.name for c in better] == names
    expected = {c.name: c for c in scores.corpus_scores(good, [refs], names)}
    for c in better:
        assert c.system == pytest.approx(expected[c.name].score)
        assert c.better and c.p_value < scores.SIGNIFICANCE, c
    ter = better[2]
    assert ter.system < ter.baseline  # TER: lower is better
    worse = scores.paired_test(good, bad, [refs], names, test_type, samples=200)
    assert not any(c.better for c in worse)
    if test_type == "bs":  # each system's mean lies within its own interval of its score
        for c in better:
            assert abs(c.means[1] - c.system) < c.intervals[1], c
    text = scores.format_compared(better, test_type)
    assert text.count("better, significant") == 3


def _t2t_bleu(tmp_path, *flags):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    command = [sys.executable, "-m", "t2t_lite.bin.t2t_bleu", *flags]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path)


def test_t2t_bleu_scores_and_tests_against_a_baseline(tmp_path):
    refs, good, bad = _corpus()
    for name, lines in (("ref", refs), ("good", good), ("bad", bad)):
        (tmp_path / f"{name}.txt").write_text("\n".join(lines) + "\n")
    files = ["--translation=good.txt", "--reference=ref.txt"]
    done = _t2t_bleu(tmp_path, *files, "--metrics=bleu,chrf,ter", "--score_only")
    numbers = [float(x) for x in done.stdout.split()]
    chrf, ter = scores.corpus_scores(good, [refs], ["chrf", "ter"])
    assert numbers[2:] == [round(chrf.score, 2), round(ter.score, 2)]
    done = _t2t_bleu(tmp_path, *files, "--metrics=chrf", "--baseline=bad.txt", "--paired_bs")
    assert done.returncode == 0, done.stderr
    assert "chrF2 = " in done.stdout and "paired bootstrap against the baseline" in done.stdout
    assert "better, significant" in done.stdout and "bs:1000|seed:12345" in done.stdout
    mistakes = {
        ("--metrics=bleu,bertscore",): "--metrics='bleu,bertscore': bertscore is not one of",
        ("--paired_ar",): "--paired_ar needs --baseline=FILE",
        ("--baseline=bad.txt",): "--baseline: give --paired_bs or --paired_ar",
        ("--baseline=bad.txt", "--paired_bs", "--paired_ar"): "choose one test",
    }
    for flags, message in mistakes.items():
        done = _t2t_bleu(tmp_path, *files, *flags)
        assert done.returncode == 2, (flags, done.stderr)
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith("t2t-bleu: error: ") and message in line, line
