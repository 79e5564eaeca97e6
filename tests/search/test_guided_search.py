"""Target prefixes and terminology constraints against exhaustive search and the unguided
search."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from decoding_helpers import (
    all_hypotheses,
    check_one_eos,
    eos_after_input,
    np_log_softmax,
    padded,
    random_inputs,
    reference_nbest,
    tiny_model,
)

from t2t_lite.decode import transformer_step
from t2t_lite.search import beam as search_module
from t2t_lite.search.constraint import constrained_step_fn
from t2t_lite.search.terminology import TermConstraint, advance, bank, phrases_met

INPUTS = np.array([[2, 3, 4, 1], [4, 4, 3, 1]], np.int32)


def _exhaustive(model, row, keep, alpha, first=lambda h: True):
    """Every output of sentence `row` of INPUTS that `keep` accepts (at most 4 tokens over
    vocabulary 5), scored by the full forward pass: [(score, hyp)], those that `first` accepts
    ranked before the rest, then by score; and hyp -> log-prob."""
    hyps = [h for h in all_hypotheses(vocab_size=5, max_length=4) if keep(h)]
    targets = np.array([padded(h, 4) for h in hyps], np.int32)
    inputs = np.repeat(INPUTS[row : row + 1], len(hyps), 0)
    logits = model({"inputs": inputs, "targets": targets}).numpy()
    token_lp = np.take_along_axis(np_log_softmax(logits), targets[..., None], -1)[..., 0]
    by_hyp = {h: token_lp[i, : len(h)].sum() for i, h in enumerate(hyps)}
    ranked = reference_nbest(by_hyp.get, hyps, alpha)
    return sorted(ranked, key=lambda s: not first(s[1])), by_hyp


def _check_nbest(result, row, expected, count):
    """The first `count` of `expected` (fewer when it has fewer: the rest empty slots)."""
    ranked, by_hyp = expected
    ids, n = result.ids.numpy()[row], min(count, len(ranked))
    ranked = ranked[:n]
    assert ids[:n].tolist() == [padded(h, 4) for _, h in ranked]
    if n == len(expected[0]):
        assert not ids[n:].any() and (result.scores.numpy()[row, n:] == -np.inf).all()
    scores, log_probs = result.scores.numpy()[row, :n], result.log_probs.numpy()[row, :n]
    np.testing.assert_allclose(scores, [s for s, _ in ranked], atol=1e-5)
    np.testing.assert_allclose(log_probs, [by_hyp[h] for _, h in ranked], atol=1e-5)


def test_prefix_wide_beam_equals_exhaustive_search_over_the_prefixed_outputs():
    """A beam wide enough to hold every output returns exactly the outputs that start with the
    prefix, ranked and scored (prefix included) as the full forward pass scores them."""
    model = tiny_model(vocab_size=5, seed=3)
    prefix = np.array([[3, 2], [4, 0]], np.int32)
    result = transformer_step.translate_ids(
        model, INPUTS, beam_size=128, alpha=0.6, extra_length=0, nbest=20, prefix=prefix
    )
    for row, start in enumerate([(3, 2), (4,)]):
        expected = _exhaustive(model, row, lambda h, s=start: h[: len(s)] == s, 0.6)
        _check_nbest(result, row, expected, 20)


def test_terms_wide_beam_equals_exhaustive_search_over_the_outputs_holding_them():
    """With every output in the beam, the n-best are exactly the best outputs that contain the
    phrase (EOS never ends an output before it); outputs that reach the maximum length
    without it come after all of those."""
    model = tiny_model(vocab_size=5, seed=3)
    terms = np.array([[[4, 2]], [[3, 0]]], np.int32)  # sentence 0: "4 2"; sentence 1: "3"
    result = transformer_step.translate_ids(
        model, INPUTS, beam_size=128, alpha=0.6, extra_length=0, nbest=128, terms=terms
    )
    for row, phrase in enumerate([[4, 2], [3]]):

        def holds(h, p=phrase):
            return phrases_met(list(h), [p])[0]

        expected = _exhaustive(model, row, lambda h: holds(h) or h[-1] != 1, 0.6, holds)
        met = sum(holds(h) for _, h in expected[0])
        assert 0 < met < len(expected[0])
        _check_nbest(result, row, expected, met)
        # The unmet ones follow, all of them, each with its own score; their order is only
        # as fine as float32 resolves scores offset by the penalty (search.UNMET_PENALTY).
        rest = result.ids.numpy()[row, met : len(expected[0])].tolist()
        assert sorted(rest) == sorted(padded(h, 4) for _, h in expected[0][met:])
        unmet_scores = dict((tuple(h), s) for s, h in expected[0][met:])
        np.testing.assert_allclose(
            result.scores.numpy()[row, met : len(expected[0])],
            [unmet_scores[tuple(t for t in h if t)] for h in rest],
            atol=1e-5,
        )


@pytest.mark.parametrize("beam_size", [1, 4])
def test_no_prefix_and_no_terms_equal_the_unguided_search(beam_size):
    model = tiny_model(vocab_size=40, seed=11)
    inputs = random_inputs(5, 5, 40, seed=2)
    # Every row stepped to the end, as the guided search does: the scores then agree to the
    # bit (a product over fewer rows may round its last bit differently).
    plain = transformer_step.translate_ids(
        model, inputs, beam_size=beam_size, nbest=beam_size, extra_length=6, compact=False
    )
    guided = transformer_step.translate_ids(
        model,
        inputs,
        beam_size=beam_size,
        nbest=beam_size,
        extra_length=6,
        prefix=np.zeros([5, 0], np.int32),
        terms=np.zeros([5, 0, 0], np.int32),
    )
    np.testing.assert_array_equal(plain.ids.numpy(), guided.ids.numpy())
    np.testing.assert_array_equal(plain.scores.numpy(), guided.scores.numpy())
    empty_terms = transformer_step.translate_ids(
        model, inputs, beam_size=beam_size, extra_length=6, terms=np.zeros([5, 2, 3], np.int32)
    )
    np.testing.assert_array_equal(plain.ids.numpy()[:, :1], empty_terms.ids.numpy())


def test_beam_four_places_every_phrase_in_every_output():
    """A random model (EOS made likely once the output is as long as the input) never writes
    these phrases by itself; with them as constraints the best output of every sentence holds
    all of them, every n-best output that ends with EOS does, and those that ran to the maximum
    length without them come last."""
    model = tiny_model(vocab_size=40, seed=11)
    inputs = random_inputs(12, 7, 40, seed=4)
    rng = np.random.default_rng(0)
    terms = np.zeros([12, 2, 3], np.int32)
    wanted = []
    for row in range(12):
        phrases = [rng.integers(2, 40, size=n).tolist() for n in rng.integers(1, 4, size=2)]
        for c, p in enumerate(phrases):
            terms[row, c, : len(p)] = p
        wanted.append(phrases)

    def search(x, t):
        step_fn, cache = eos_after_input(
            *transformer_step.model_step_fn(model, x, 16), x, vocab_size=40
        )
        constraint, banks = transformer_step.guided(None, None, t)
        step_fn, cache = constrained_step_fn(step_fn, cache, constraint, x, 16)
        return search_module.beam_search(step_fn, cache, 12, 4, 0.6, 16, nbest=4, banks=banks)

    plain = transformer_step.translate_ids(model, inputs, beam_size=4, extra_length=8)
    found = tf.function(search)(inputs, terms)
    ids = found.ids.numpy()
    check_one_eos(ids)
    unplaced = sum(
        not all(phrases_met(plain.ids.numpy()[r, 0].tolist(), wanted[r])) for r in range(12)
    )
    assert unplaced >= 10  # the constraints change what the model writes
    for row in range(12):
        met = [all(phrases_met(hyp.tolist(), wanted[row])) for hyp in ids[row]]
        assert met[0], (row, ids[row, 0], wanted[row])
        assert met == sorted(met, reverse=True)
        assert all(m for m, hyp in zip(met, ids[row], strict=True) if 1 in hyp)
    # Each returned hypothesis carries its own log-prob (the EOS bias is part of the model
    # here, so the ranking scores are checked against the log-probs instead).
    lengths = (ids > 0).sum(-1)
    np.testing.assert_allclose(
        found.scores.numpy(), found.log_probs.numpy() / ((5 + lengths) / 6) ** 0.6, rtol=1e-5
    )


def test_prefix_under_greedy_search_and_beam_one_agree():
    model = tiny_model(vocab_size=40, seed=11)
    inputs = random_inputs(6, 7, 40, seed=5)
    prefix = np.array([[5, 6, 7], [8, 0, 0], [0, 0, 0], [9, 9, 0], [2, 3, 4], [30, 0, 0]])
    beam = transformer_step.translate_ids(model, inputs, beam_size=1, alpha=0.0, prefix=prefix)
    greedy = transformer_step.sample_ids(model, inputs, prefix=prefix)
    np.testing.assert_array_equal(beam.ids.numpy(), greedy.ids.numpy())
    for row, p in enumerate(prefix.tolist()):
        p = [t for t in p if t]
        assert greedy.ids.numpy()[row, 0, : len(p)].tolist() == p


def test_phrase_tracking_on_literal_token_sequences():
    """The state machine, token by token: progress, a phrase left half-written, a restart, and
    the bank (phrase tokens met) after each token."""
    constraint = TermConstraint(np.array([[[5, 6, 7], [6, 0, 0]]], np.int32))
    state = constraint.initial_state(None, None)
    banks = []
    for token in [0, 5, 6, 2, 5, 6, 7, 6, 1]:
        state = constraint.update(state, tf.constant([token]))
        banks.append(int(bank(state)[0]))
    # 5 6 starts phrase 0 (2 tokens), 2 drops it, 5 6 7 meets it (3), 6 meets phrase 1 (4);
    # the padding phrase is met from the start.
    assert banks == [0, 1, 2, 0, 1, 2, 3, 4, 4]
    assert state.met.numpy().tolist() == [[True, True, True]]
    # From the start: 5 begins phrase 0, 6 meets phrase 1, 3 nothing.
    moved = advance(constraint.initial_state(None, None), tf.constant([[5, 6, 3]]))
    assert moved.active.numpy().tolist() == [[0, -1, -1]]
    assert bank(moved).numpy().tolist() == [[1, 1, 0]]


def test_no_word_continuation_right_after_a_phrase():
    continuations = np.zeros(10, bool)
    continuations[[7, 8]] = True  # ids 7 and 8 continue the word before them
    constraint = TermConstraint(np.array([[[5, 6]]], np.int32), continuations)
    state = constraint.initial_state(None, None)
    allowed = []
    for token in [0, 5, 6, 7]:
        state = constraint.update(state, tf.constant([token]))
        allowed.append(np.where(constraint.allowed(state, 10).numpy()[0])[0].tolist())
    # Before the phrase EOS (1) is forbidden; right after it, 7 and 8 are; then all again.
    assert allowed[0] == allowed[1] == [2, 3, 4, 5, 6, 7, 8, 9]
    assert allowed[2] == [1, 2, 3, 4, 5, 6, 9]
    assert allowed[3] == [1, 2, 3, 4, 5, 6, 7, 8, 9]
