"""Token probabilities, word alignments and confidence: literal examples, and the alignments of
trained copy and reverse models."""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest
from decoding_helpers import tiny_model, train_in_one_loop, write_tiny_run

from t2t_lite.decode import confidence, details
from t2t_lite.decode.translator import Translator


def test_tokens_merge_to_words_on_literal_examples():
    # Ids 2..8: "▁Hel", "lo", "▁wor", "ld", "!", "▁", "▁a"; "lo", "ld" and "!" join the text
    # before them.
    joins = np.array([False, False, False, True, False, True, True, False, False])
    # "Hello world!" then EOS: the word of each token, -1 for EOS.
    assert details.token_words(joins, [2, 3, 4, 5, 6, 1]) == [0, 0, 1, 1, 1, -1]
    # An output that starts with a joining token still starts word 0.
    assert details.token_words(joins, [3, 8, 7, 8, 1]) == [0, 1, 2, 3, -1]


def test_joins_previous_on_a_sentencepiece_vocabulary(tmp_path):
    from serve_helpers import text_run

    from t2t_lite.problems import get_problem

    text_run(tmp_path)
    tokenizer = get_problem("text2text").tokenizer(str(tmp_path / "data"))
    joins, continues = tokenizer.joins_previous()
    assert not joins[:2].any() and (continues <= joins).all()
    for i in range(3, tokenizer.vocab_size):
        piece = tokenizer.decode_py([i])
        after = tokenizer.decode_py([*tokenizer.encode_py("a"), i])
        assert joins[i] == (after == "a" + piece), (i, piece, after)
        assert continues[i] == (joins[i] and piece[:1].isalnum())
    assert 0 < continues.sum() < joins.sum() < tokenizer.vocab_size


def test_word_alignment_takes_each_target_tokens_strongest_source_token():
    attention = np.array(
        [
            [0.7, 0.1, 0.1, 0.1],  # target word 0 <- source token 0 (word 0)
            [0.1, 0.1, 0.6, 0.2],  # target word 1 <- source token 2 (word 1)
            [0.1, 0.5, 0.3, 0.1],  # target word 1 <- source token 1 (word 0)
            [0.0, 0.0, 0.1, 0.9],  # EOS row: left out
        ]
    )
    pairs = details.word_alignment(attention, [0, 0, 1, -1], [0, 1, 1, -1])
    assert pairs == [(0, 0), (0, 1), (1, 1)]
    assert details.pharaoh(pairs) == "0-0 0-1 1-1"
    # The source EOS column is never chosen, even where it is strongest.
    assert details.word_alignment(attention, [0, 0, 1, -1], [-1, -1, -1, 0]) == [(1, 0)]


def _trained(reverse: bool, steps: int):
    """A 1+1-layer model trained to copy (or reverse) 3-8 words of algorithmic_copy's ids."""
    model = tiny_model(13, seed=1, overrides=",d_model=32,d_ff=64")
    rng = np.random.default_rng(0)
    x, y = np.zeros((2, steps, 64, 9), np.int32)  # every step's batch, drawn up front
    for s in range(steps):
        for r, k in enumerate(rng.integers(3, 9, size=64)):
            words = rng.integers(3, 13, size=k)
            x[s, r, :k], y[s, r, :k] = words, words[::-1] if reverse else words
            x[s, r, k] = y[s, r, k] = 1
    train_in_one_loop(model, keras.optimizers.Adam(3e-3), x, y)
    return model


@pytest.mark.parametrize("reverse", [False, True])
def test_trained_copy_and_reverse_models_align_on_the_diagonal_and_anti_diagonal(tmp_path, reverse):
    model = _trained(reverse, 700)
    write_tiny_run(tmp_path, max_positions=32, model=model)
    translator = Translator.from_run(str(tmp_path / "out"), beam_size=2, alpha=0.6)
    rng = np.random.default_rng(7)
    lines = [" ".join(map(str, rng.integers(0, 10, size=n))) for n in rng.integers(3, 9, size=30)]
    found = translator.hypotheses(lines, details=True)
    on_line, near, total, wrong = 0, 0, 0, 0
    for line, (hyp,) in zip(lines, found, strict=True):
        n = len(line.split())
        expected = line.split()[::-1] if reverse else line.split()
        if hyp.text.split() != expected:  # the model has not learned this one
            wrong += 1
            continue
        for pair in hyp.details.alignment.split():
            i, j = map(int, pair.split("-"))
            want = n - 1 - j if reverse else j
            on_line += i == want
            near += abs(i - want) <= 1
            total += 1
        assert total and len(hyp.details.token_probs) == n + 1
        lp = math.fsum(map(math.log, hyp.details.token_probs))
        assert lp == pytest.approx(hyp.log_prob, abs=1e-5)
    assert wrong <= 3, wrong  # the model has learned its task: 27 of 30 or more
    # docs/control.md reports these shares.
    assert on_line / total >= (0.95 if not reverse else 0.7), on_line / total
    assert near / total >= 0.95


def test_calibration_is_the_isotonic_fit_of_the_min_max_formula():
    """Sentences of one measure are one point, weighted by their number; the fitted value at
    point i is max over j <= i of min over k >= i of the weighted mean chrF of points j..k
    (the isotonic regression's closed form), and of each flat run only its ends are kept."""
    # 0.5 | 0.75, 0.25 (one point: 0.5, weight 2) | 0.25 violate the order and pool into one
    # mean, 1.75 / 4; the flat run keeps its two ends.
    pooled = confidence.fit([-2.0, -1.0, -1.0, 0.0], [50.0, 75.0, 25.0, 25.0])
    assert (pooled.x, pooled.y, pooled.sentences) == ((-2.0, 0.0), (0.4375, 0.4375), 4)
    # Already in order: the run 0.5, 0.5, 0.5 loses its middle point.
    ordered = confidence.fit([-3, -2, -1, -1, 0, 1], [25, 50, 75, 25, 50, 100])
    assert (ordered.x, ordered.y) == ((-3.0, -2.0, 0.0, 1.0), (0.25, 0.5, 0.5, 1.0))
    rng = np.random.default_rng(1)
    measures = np.round(rng.uniform(-3.0, 0.0, 80), 1)
    chrf = 100 * np.clip(0.8 + 0.2 * measures + rng.normal(0, 0.15, 80), 0, 1)
    fitted = confidence.fit(measures, chrf)
    points = np.unique(measures)
    sums = np.array([chrf[measures == v].sum() / 100 for v in points])
    counts = np.array([(measures == v).sum() for v in points])
    n = len(points)

    def mean(j, k):
        return sums[j : k + 1].sum() / counts[j : k + 1].sum()

    expected = [max(min(mean(j, k) for k in range(i, n)) for j in range(i + 1)) for i in range(n)]
    np.testing.assert_allclose([fitted([v]) for v in points], expected, rtol=0, atol=1e-12)
    assert set(fitted.x) <= set(points) and len(fitted.x) < n  # flat runs trimmed
    y = fitted.y
    assert not any(y[i] == y[i + 1] == y[i + 2] for i in range(len(y) - 2))
    with pytest.raises(ValueError, match="no sentences"):
        confidence.fit([], [])


def test_calibration_is_monotone_in_the_mean_log_prob_and_survives_a_save(tmp_path):
    rng = np.random.default_rng(0)
    measures = rng.uniform(-3.0, 0.0, size=400)
    chrf = 100 * np.clip(0.9 + 0.25 * measures + rng.normal(0, 0.05, 400), 0, 1)
    fitted = confidence.fit(measures, chrf)
    assert fitted.sentences == 400 and fitted.spearman > 0.9
    values = [fitted([m]) for m in (-4.0, -2.5, -1.0, -0.1, 0.0)]
    assert values == sorted(values) and 0.0 <= values[0] and values[-1] <= 1.0
    # The fitted curve follows the line it was drawn from (within the noise).
    assert fitted([-1.0, -1.0]) == pytest.approx(0.65, abs=0.05)
    fitted.save(str(tmp_path))
    assert confidence.Calibration.load(str(tmp_path)) == fitted
    plain = confidence.Calibration.load(str(tmp_path / "none"))
    assert plain([-0.5, -1.5]) == pytest.approx(math.exp(-1.0)) and "uncalibrated" in plain.name
    (tmp_path / confidence.CALIBRATION_FILE).write_text('{"x": [1, 0], "y": [0, 1]}')
    with pytest.raises(ValueError, match="confidence.json: not a confidence calibration"):
        confidence.Calibration.load(str(tmp_path))
