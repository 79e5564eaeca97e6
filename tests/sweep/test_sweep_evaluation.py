"""The problem metrics a sweep reports, on literal examples (a whole run's evaluation:
test_sweep_end_to_end.py)."""

import dataclasses

import pytest
from sacrebleu.metrics import CHRF, TER

from t2t_lite.data.trees import parse_tree
from t2t_lite.metrics import evalb
from t2t_lite.sweep.evaluation import checkpoint_step, score, translation_scores

GOLD = "(S (NP (DT the) (NN dog)) (VP (VBZ barks)))"


def test_bleu_is_sacrebleu_in_percent():
    assert score("bleu", ["the dog barks ."], ["the dog barks ."]) == pytest.approx(100.0)
    assert score("bleu", ["a b c d"], ["w x y z"]) == 0.0


def test_parse_f1_is_evalb_over_the_brackets():
    assert score("parse_f1", [GOLD], [GOLD]) == pytest.approx(100.0)
    # EVALB's totals over both sentences, COLLINS.prm rules, no limit on error sentences.
    flat = "(S (DT the) (NN dog) (VBZ barks))"
    trees = [parse_tree(GOLD)] * 2, [parse_tree(flat), parse_tree(GOLD)]
    expected = evalb.evaluate(*trees, dataclasses.replace(evalb.COLLINS, max_errors=None)).f1
    assert score("parse_f1", [flat, GOLD], [GOLD, GOLD]) == pytest.approx(expected)
    assert 0 < expected < 100
    # An empty output has no words: EVALB skips the sentence.
    assert score("parse_f1", ["", GOLD], [GOLD, GOLD]) == pytest.approx(100.0)


def test_accuracy_counts_exact_sequences():
    assert score("accuracy", ["1 2 3", "3  2", "1"], ["1 2 3", "3 2", "2"]) == pytest.approx(
        200 / 3
    )
    with pytest.raises(ValueError, match="unknown metric 'wer'; known: bleu, parse_f1, accuracy"):
        score("wer", [], [])


def test_checkpoint_steps_from_names():
    assert checkpoint_step("/r/checkpoints/ckpt-1200") == 1200
    assert checkpoint_step("/r/final/ckpt-7") == 7
    assert checkpoint_step("/r/elsewhere/model") is None


def test_translation_scores_are_sacrebleus_chrf_and_ter():
    hypotheses = ["the dog barks loudly .", "a cat sat on the mat", ""]
    references = ["the dog is barking .", "the cat sat on the mat", "nothing here"]
    found = translation_scores(hypotheses, references)
    assert found == {
        "chrf": pytest.approx(CHRF().corpus_score(hypotheses, [references]).score),
        "ter": pytest.approx(TER().corpus_score(hypotheses, [references]).score),
    }
    assert 0 < found["chrf"] < 100 and 0 < found["ter"] < 100
    assert translation_scores(["the dog ."], ["the dog ."]) == {"chrf": 100.0, "ter": 0.0}
