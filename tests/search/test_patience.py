"""Beam search's patience rule (`beam_search(patience=P)`): a sentence also stops once
ceil(P * beam_size) hypotheses have finished, checked against a search written out in Python."""

import math

import numpy as np
import pytest
import tensorflow as tf
from decoding_helpers import (
    lp,
    np_log_softmax,
    padded,
    random_inputs,
    rising_eos_table,
    scripted_step_fn,
    tiny_model,
)

from t2t_lite.decode import transformer_step
from t2t_lite.hparams import SearchSettings
from t2t_lite.search import beam as search

ALPHA = 0.6


def _reference(table, row, k, max_length, nbest, enough, alpha=ALPHA):
    """One sentence's beam search as beam_search's docstring tells it, in float64: the 2k best
    continuations; those among the best k that end finish, the best k that do not stay live;
    the sentence stops when its nbest-th finished score reaches the best a live hypothesis
    could still reach, or (enough > 0) once `enough` hypotheses have finished. Returns the
    nbest (score, hypothesis), best first."""
    live, finished, count = [(0.0, ())], [], 0
    for i in range(max_length):
        best = max(p for p, _ in live)
        bound = max(best / lp(i + 1, alpha), best / lp(max_length, alpha))
        if len(finished) >= nbest and finished[nbest - 1][0] >= bound:
            break
        if enough and count >= enough:
            break
        candidates = []
        for log_prob, hyp in live:
            log_probs = np_log_softmax(table[row, i, hyp[-1] if hyp else 0])
            candidates += [(log_prob + log_probs[t], hyp + (t,)) for t in range(1, len(log_probs))]
        candidates = sorted(candidates, key=lambda c: -c[0])[: 2 * k]
        stops = [h[-1] == 1 or i + 1 >= max_length for _, h in candidates]
        ends = [c for c, stop in zip(candidates[:k], stops[:k], strict=True) if stop]
        finished = sorted(
            finished + [(p / lp(i + 1, alpha), h) for p, h in ends], key=lambda f: -f[0]
        )
        count += len(ends)
        live = [c for c, stop in zip(candidates, stops, strict=True) if not stop][:k]
    return finished[:nbest]


def _peaked_table(seed):
    """[8, 10, 9, 9] logits peaked as a trained model's: beams that end at different steps and,
    at alpha 1.2, long hypotheses that can still win after the first ones finish."""
    return (2.0 * np.random.default_rng(seed).normal(size=(8, 10, 9, 9))).astype(np.float32)


def _search(table, max_lengths, beam, nbest, patience, compact=False, alpha=ALPHA):
    step_fn, cache, calls = scripted_step_fn(table)
    found = search.beam_search(
        step_fn, cache, len(table), beam, alpha, max_lengths, nbest=nbest, patience=patience,
        compact=compact,
    )  # fmt: skip
    return found, calls[0]


@pytest.mark.parametrize("compact", [False, True])
@pytest.mark.parametrize(
    "beam,patience,nbest", [(4, 1.0, 1), (4, 0.5, 2), (3, 2.0, 1), (4, 1.0, 4)]
)
@pytest.mark.parametrize("alpha", [ALPHA, 1.2])
def test_patience_search_equals_the_search_written_out(beam, patience, nbest, compact, alpha):
    table = _peaked_table(seed=1) if alpha > 1 else rising_eos_table(8, 10, 9, seed=3)
    max_lengths = np.random.default_rng(4).integers(4, 11, size=8)
    found, _ = _search(table, max_lengths, beam, nbest, patience, compact, alpha)
    enough = max(nbest, math.ceil(patience * beam))
    for row, max_length in enumerate(max_lengths):
        expected = _reference(table, row, beam, int(max_length), nbest, enough, alpha)
        assert found.ids.numpy()[row].tolist() == [padded(h, 10) for _, h in expected]
        np.testing.assert_allclose(found.scores.numpy()[row], [s for s, _ in expected], atol=1e-5)


def test_patience_stops_sooner_and_enough_of_it_is_the_exact_search():
    table, steps, alpha = _peaked_table(seed=1), 10, 1.2
    exact, exact_steps = _search(table, steps, 4, 1, 0.0, alpha=alpha)
    # The exact rule, written out, is what patience 0 searches.
    for row in range(len(table)):
        (expected,) = _reference(table, row, 4, steps, 1, 0, alpha)
        assert exact.ids.numpy()[row, 0].tolist() == padded(expected[1], steps)
    patient, _ = _search(table, steps, 4, 1, 1.0, alpha=alpha)
    assert (patient.ids.numpy() != exact.ids.numpy()).any(), "the rule changed nothing here"
    # Each sentence alone: never more steps, fewer in all.
    alone = [
        [_search(table[r : r + 1], steps, 4, 1, p, alpha=alpha)[1] for r in range(len(table))]
        for p in (0.0, 1.0)
    ]
    assert all(a <= b for a, b in zip(alone[1], alone[0], strict=True))
    assert sum(alone[1]) < sum(alone[0])
    # Every sentence's n-best list is final by the exact bound before 100 * 4 finish.
    endless, endless_steps = _search(table, steps, 4, 1, 100.0, alpha=alpha)
    np.testing.assert_array_equal(endless.ids.numpy(), exact.ids.numpy())
    assert endless_steps == exact_steps


def test_a_sentence_done_by_patience_is_what_it_is_alone():
    # Stepped along with the batch after it stopped, a sentence finishes nothing more.
    table = _peaked_table(seed=1)
    together, _ = _search(table, 10, 4, 1, 1.0, alpha=1.2)
    for row in range(len(table)):
        alone, _ = _search(table[row : row + 1], 10, 4, 1, 1.0, alpha=1.2)
        assert together.ids.numpy()[row].tolist() == alone.ids.numpy()[0].tolist()


@pytest.mark.parametrize("patience", [-0.5, float("nan"), float("inf")])
def test_a_patience_out_of_range_is_refused(patience):
    with pytest.raises(ValueError, match="--patience must be a number >= 0"):
        SearchSettings(patience=patience).check()
    if patience < 0:
        step_fn, cache, _ = scripted_step_fn(np.zeros((1, 3, 4, 4), np.float32))
        with pytest.raises(ValueError, match="patience must be >= 0"):
            search.beam_search(step_fn, cache, 1, 2, ALPHA, tf.constant(3), patience=patience)


@pytest.mark.parametrize("patience", [0.0, 1.5])
def test_the_settings_patience_reaches_the_models_search(monkeypatch, patience):
    model, inputs = tiny_model(20, seed=3), random_inputs(3, 5, 20, seed=4)
    expected = transformer_step.translate_ids(
        model, inputs, beam_size=3, alpha=1.2, extra_length=5, patience=patience
    )
    given = []

    def recorded(*args, **kwargs):
        given.append(kwargs["patience"])
        return search.beam_search(*args, **kwargs)

    monkeypatch.setattr(transformer_step, "beam_search", recorded)
    settings = SearchSettings(beam_size=3, alpha=1.2, extra_length=5, patience=patience)
    found = transformer_step.search_function(model, settings)(tf.constant(inputs))
    assert given == [patience]
    np.testing.assert_array_equal(found.ids.numpy(), expected.ids.numpy())
