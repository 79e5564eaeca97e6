"""Beam search, greedy search and sampling against exhaustive NumPy search, scripted logits and
their slow paths."""

from __future__ import annotations

import contextlib
from functools import partial

import numpy as np
import pytest
import tensorflow as tf
from decoding_helpers import (
    all_hypotheses,
    check_one_eos,
    eos_after_input,
    lp,
    np_log_softmax,
    padded,
    random_inputs,
    reference_nbest,
    scripted_step_fn,
    table_log_prob,
    tiny_model,
)

from t2t_lite.decode import transformer_step
from t2t_lite.search import beam as search
from t2t_lite.search import contract, sampling, top_k


def test_length_penalty_is_gnmt():
    assert contract.length_penalty(4, 0.6).numpy() == pytest.approx(1.5**0.6)
    assert contract.length_penalty(1, 0.0).numpy() == 1.0
    assert contract.length_penalty(7, 1.0).numpy() == pytest.approx(2.0)


@pytest.mark.parametrize("alpha", [0.6, 1.5])
def test_wide_beam_equals_exhaustive_enumeration_on_tiny_model(alpha):
    """Vocab 5, length 4: 121 possible outputs; a beam of 128 must rank them all exactly as the
    model's full forward pass does."""
    model = tiny_model(vocab_size=5, seed=3)
    inputs = np.array([[2, 3, 4, 1], [4, 4, 1, 0]], np.int32)
    hyps = all_hypotheses(vocab_size=5, max_length=4)
    assert len(hyps) == 121
    step_fn, cache = transformer_step.model_step_fn(model, inputs, 4)
    result = search.beam_search(step_fn, cache, 2, 128, alpha, 4, nbest=121)
    targets = np.array([padded(h, 4) for h in hyps], np.int32)
    for row in range(2):
        logits = model(
            {"inputs": np.repeat(inputs[row : row + 1], len(hyps), 0), "targets": targets}
        )
        log_probs = np_log_softmax(logits.numpy())  # [121, 4, 5]
        token_lp = np.take_along_axis(log_probs, targets[..., None], -1)[..., 0]
        by_hyp = {h: token_lp[i, : len(h)].sum() for i, h in enumerate(hyps)}
        expected = reference_nbest(by_hyp.get, hyps, alpha)
        got_ids = result.ids.numpy()[row].tolist()
        assert got_ids == [padded(h, 4) for _, h in expected]
        np.testing.assert_allclose(result.scores.numpy()[row], [s for s, _ in expected], atol=1e-5)
        np.testing.assert_allclose(
            result.log_probs.numpy()[row], [by_hyp[h] for _, h in expected], atol=1e-5
        )


@pytest.mark.parametrize("alpha", [0.0, 0.6, 3.0])
def test_beam_one_is_greedy_search_at_any_alpha(alpha):
    """One beam stops a sentence at its first EOS, as greedy search does, whatever the length
    penalty: at alpha 3.0 a search that went on after it would find longer hypotheses of a
    better score for some of these sentences (it did before one beam stopped there)."""
    model = tiny_model(vocab_size=11, seed=5)
    inputs = random_inputs(16, 6, 11, seed=0)
    step_fn, cache = eos_after_input(*transformer_step.model_step_fn(model, inputs, 9), inputs)
    beam = search.beam_search(step_fn, cache, 16, 1, alpha, 9)
    greedy = sampling.greedy_search(step_fn, cache, 16, 9)
    ids = beam.ids.numpy()
    # Both ends are exercised: some outputs stop at EOS, some run to the maximum length.
    assert 0 < (ids == 1).any(axis=-1).sum() < 16
    np.testing.assert_array_equal(ids, greedy.ids.numpy())
    np.testing.assert_allclose(beam.log_probs.numpy(), greedy.scores.numpy(), atol=1e-5)
    lengths = (ids[:, 0] > 0).sum(-1)
    expected = greedy.scores.numpy()[:, 0] / lp(lengths, alpha)
    np.testing.assert_allclose(beam.scores.numpy()[:, 0], expected, rtol=1e-5)
    check_one_eos(ids)
    # t2t-decode's search (compacting, the model's own EOS) is greedy search too.
    decoded = transformer_step.translate_ids(model, inputs, beam_size=1, alpha=alpha).ids
    limits = transformer_step.output_lengths(model, inputs, 50)
    step_fn, cache = transformer_step.model_step_fn(model, inputs, int(tf.reduce_max(limits)))
    plain = sampling.greedy_search(step_fn, cache, 16, limits).ids
    np.testing.assert_array_equal(decoded.numpy(), plain.numpy())


def test_block_size_balances_the_two_stages():
    assert top_k.block_size(8000, 9) == 32  # sqrt(8000 / 9) = 29.8
    assert top_k.block_size(640, 9) == 8
    assert top_k.block_size(997, 9) == 0  # a prime: plain top-k
    assert top_k.block_size(500, 9) == 0  # too small to split
    assert top_k.block_size(None, 9) == 0


@pytest.mark.parametrize("vocab,k", [(8000, 9), (8000, 1), (640, 9), (997, 3)])
def test_two_stage_top_k_equals_tf_top_k(vocab, k):
    rng = np.random.default_rng(vocab + k)
    logits = rng.normal(size=(40, vocab)).astype(np.float32) * 3
    logits[:20] = np.round(logits[:20])  # many ties: the lower id must come first
    logits[5, :] = 2.0  # a row of one value
    logits[6, 10:] = -np.inf  # a masked row, fewer finite entries than blocks
    logits[7, ::2] = -1e9
    expected = tf.math.top_k(logits, k)
    values, ids = top_k.top_k(tf.constant(logits), k)
    np.testing.assert_array_equal(ids.numpy(), expected.indices.numpy())
    np.testing.assert_array_equal(values.numpy(), expected.values.numpy())


def test_best_log_probs_are_log_softmax_at_the_best_tokens():
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(6, 800)).astype(np.float32) * 4
    logits[2, 0] = 50.0  # padding is the best token of row 2
    log_probs, ids = contract.best_log_probs(tf.constant(logits), 4, pad_id=0)
    order = np.argsort(-logits, axis=1, kind="stable")[:, :5]
    np.testing.assert_array_equal(ids.numpy(), order)
    expected = np.take_along_axis(np_log_softmax(logits.astype(np.float64)), order, 1)
    expected[ids.numpy() == 0] = -np.inf
    np.testing.assert_allclose(log_probs.numpy(), expected, atol=1e-5)


@pytest.mark.parametrize("vocab", [11, 8000])  # 8000: the two-stage top-k
def test_greedy_choice_is_argmax_of_log_softmax_without_padding(vocab):
    rng = np.random.default_rng(vocab)
    logits = rng.normal(size=(6, vocab)).astype(np.float32) * 4
    logits[2, 0] = 50.0  # padding is the best token of row 2: its second best is chosen
    logits[3, [4, 9]] = 40.0  # a tie: the lower id, as argmax gives it
    logits[4] = 0.0  # all equal: the first id after padding
    token, token_lp = sampling.greedy_choice(tf.constant(logits), pad_id=0)
    log_probs = np_log_softmax(logits.astype(np.float64))
    log_probs[:, 0] = -np.inf
    expected = np.argmax(log_probs, axis=1)
    assert expected[3] == 4 and expected[4] == 1
    np.testing.assert_array_equal(token.numpy(), expected)
    np.testing.assert_allclose(token_lp.numpy(), log_probs[np.arange(6), expected], atol=1e-5)
    # Without a padding id every token can be chosen.
    token, _ = sampling.greedy_choice(tf.constant(logits), pad_id=None)
    np.testing.assert_array_equal(token.numpy(), np.argmax(logits, axis=1))


def test_greedy_search_follows_the_scripted_argmax_with_its_log_prob():
    batch, steps, vocab = 8, 6, 7
    rng = np.random.default_rng(3)
    table = rng.normal(size=(batch, steps, vocab, vocab)).astype(np.float32) * 2
    table[:, :, :, 0] += rng.uniform(-1, 3, size=(batch, steps, vocab))  # padding often best
    table[:, 4:, :, 1] += 5.0  # EOS likely late
    step_fn, cache, _ = scripted_step_fn(table)
    found = sampling.greedy_search(step_fn, cache, batch, steps)
    for row in range(batch):
        hyp, prev = [], 0
        while len(hyp) < steps and (not hyp or hyp[-1] != 1):
            log_probs = np_log_softmax(table[row, len(hyp), prev].astype(np.float64))
            log_probs[0] = -np.inf
            prev = int(np.argmax(log_probs))
            hyp.append(prev)
        np.testing.assert_array_equal(found.ids.numpy()[row, 0], padded(hyp, steps))
        np.testing.assert_allclose(
            found.scores.numpy()[row, 0], table_log_prob(table, row, tuple(hyp)), atol=1e-5
        )


@pytest.mark.parametrize("vocab", [11, 640])  # 640: beam 4 takes the two-stage top-k
def test_cached_search_equals_full_prefix_recomputation(vocab):
    model = tiny_model(vocab_size=vocab, seed=7)
    inputs = np.array([[5, 6, 7, 1, 0, 0], [2, 3, 4, 5, 6, 1], [9, 1, 0, 0, 0, 0]], np.int32)
    results = []
    for use_cache in (True, False):
        step_fn, cache = transformer_step.model_step_fn(model, inputs, 8, use_cache=use_cache)
        step_fn, cache = eos_after_input(step_fn, cache, inputs, vocab_size=vocab)
        results.append(search.beam_search(step_fn, cache, 3, 4, 0.6, 8, nbest=4))
    cached, recomputed = results
    assert (cached.ids.numpy() == 1).any()
    np.testing.assert_array_equal(cached.ids.numpy(), recomputed.ids.numpy())
    np.testing.assert_allclose(cached.scores.numpy(), recomputed.scores.numpy(), atol=1e-5)
    check_one_eos(cached.ids.numpy())
    # Every returned hypothesis carries the log-prob that the full forward pass, with the same
    # EOS bias added in NumPy, gives it.
    rows, targets = np.repeat(inputs, 4, axis=0), cached.ids.numpy().reshape(12, -1)
    logits = model({"inputs": rows, "targets": targets}).numpy()  # [12, 8, vocab]
    positions = np.arange(1, targets.shape[1] + 1)[None, :]  # the output length at each step
    logits[:, :, 1] += positions - (rows > 0).sum(axis=1, keepdims=True)  # slope 1
    token_lp = np.take_along_axis(np_log_softmax(logits), targets[..., None], -1)[..., 0]
    rescored = np.where(targets > 0, token_lp, 0.0).sum(axis=1)
    np.testing.assert_allclose(rescored, cached.log_probs.numpy().reshape(-1), atol=1e-4)
    # The model-level entry point agrees inside tf.function (a graph, as in an export).
    decode = tf.function(
        lambda x, fast: transformer_step.translate_ids(
            model, x, beam_size=3, alpha=0.6, extra_length=4, use_cache=fast
        )
    )
    fast, slow = decode(inputs, True), decode(inputs, False)
    np.testing.assert_array_equal(fast.ids.numpy(), slow.ids.numpy())
    np.testing.assert_allclose(fast.scores.numpy(), slow.scores.numpy(), atol=1e-5)
    np.testing.assert_allclose(
        transformer_step.score_ids(model, inputs, fast.ids[:, 0]).numpy(),
        fast.log_probs[:, 0],
        atol=1e-5,
    )


@pytest.mark.parametrize("vocab", [11, 640])
def test_fixed_shapes_under_xla_equal_the_growing_cache(vocab):
    """The XLA path (fixed-length cache, state of source width + extra_length positions, one
    `jit_compile` function) finds the same hypotheses as the default path, for beam search with
    n-best lists and for greedy search, on sentences of several lengths."""
    model = tiny_model(vocab_size=vocab, seed=7)
    inputs = np.array([[5, 6, 7, 1, 0, 0], [2, 3, 4, 5, 6, 1], [9, 1, 0, 0, 0, 0]], np.int32)
    # With an EOS bias some hypotheses end before their maximum length and some do not.
    results = []
    for fixed in (False, True):
        step_fn, cache = transformer_step.model_step_fn(model, inputs, 9, fixed_shapes=fixed)
        step_fn, cache = eos_after_input(step_fn, cache, inputs, vocab_size=vocab)
        buffer = 9 if fixed else None
        results.append(search.beam_search(step_fn, cache, 3, 4, 0.6, 8, 1, 0, 3, buffer))
    growing, fixed = results
    assert (growing.ids.numpy() == 1).any()
    np.testing.assert_array_equal(fixed.ids.numpy()[..., :8], growing.ids.numpy())
    np.testing.assert_array_equal(fixed.ids.numpy()[..., 8:], 0)  # the unused position
    np.testing.assert_allclose(fixed.scores.numpy(), growing.scores.numpy(), atol=1e-5)

    def translate(x, fixed_shapes):
        return transformer_step.translate_ids(
            model, x, beam_size=4, extra_length=5, nbest=2, fixed_shapes=fixed_shapes
        )

    def greedy(x, fixed_shapes):
        return transformer_step.sample_ids(model, x, extra_length=5, fixed_shapes=fixed_shapes)

    for decode in (translate, greedy):
        slow = decode(inputs, False)
        fast = tf.function(partial(decode, fixed_shapes=True), jit_compile=True)(inputs)
        assert fast.ids.shape[-1] == inputs.shape[1] + 5  # the state's width
        width = slow.ids.shape[-1]
        np.testing.assert_array_equal(fast.ids.numpy()[..., :width], slow.ids.numpy())
        np.testing.assert_array_equal(fast.ids.numpy()[..., width:], 0)
        np.testing.assert_allclose(fast.scores.numpy(), slow.scores.numpy(), atol=1e-5)
        np.testing.assert_allclose(fast.log_probs.numpy(), slow.log_probs.numpy(), atol=1e-5)


def test_buffer_shorter_than_a_max_length_is_rejected():
    step_fn, cache, _ = scripted_step_fn(np.zeros([2, 4, 7, 7], np.float32))
    with pytest.raises(tf.errors.InvalidArgumentError, match="buffer_length"):
        search.beam_search(step_fn, cache, 2, 2, 0.6, [3, 4], buffer_length=3)


def _table(batch, steps, vocab, rng, eos_logit=None):
    """Random scripted logits [batch, steps, prev, vocab]; optionally a fixed EOS logit."""
    table = rng.normal(size=(batch, steps, vocab, vocab)).astype(np.float32)
    if eos_logit is not None:
        table[..., 1] = eos_logit
    return table


def test_scripted_wide_beam_equals_exhaustive_with_per_sentence_max_length():
    table = _table(2, 4, 5, np.random.default_rng(1))
    step_fn, cache, _ = scripted_step_fn(table)
    result = search.beam_search(step_fn, cache, 2, 128, 0.6, tf.constant([4, 3]), nbest=40)
    for row, max_length in enumerate([4, 3]):
        hyps = all_hypotheses(5, max_length)
        expected = reference_nbest(partial(table_log_prob, table, row), hyps, 0.6)[:40]
        assert result.ids.numpy()[row].tolist() == [padded(h, 4) for _, h in expected]
        np.testing.assert_allclose(result.scores.numpy()[row], [s for s, _ in expected], atol=1e-5)


def test_scripted_every_beam_ends_early():
    """EOS is unlikely at step 0 and almost certain at step 1: both beams end at length 2 and
    the search stops after 2 of its 10 steps."""
    table = np.zeros((1, 10, 6, 6), np.float32)
    table[0, 0] = [0, -9, 3, 2, 1, 0]  # step 0: tokens 2 > 3 > 4 > 5, EOS unlikely
    table[0, 1:, :, 1] = 6.0  # later: EOS dominates after any token
    step_fn, cache, calls = scripted_step_fn(table)
    result = search.beam_search(step_fn, cache, 1, 2, 0.6, 10, nbest=2)
    assert calls[0] == 2
    assert result.ids.numpy().tolist() == [[padded((2, 1), 10), padded((3, 1), 10)]]
    expected = [table_log_prob(table, 0, h) / lp(2, 0.6) for h in [(2, 1), (3, 1)]]
    np.testing.assert_allclose(result.scores.numpy()[0], expected, atol=1e-6)


def test_scripted_no_beam_ever_emits_eos():
    """EOS impossible: every hypothesis runs to its sentence's max length (3 and 5) without EOS;
    with position-independent scores, beam 3 finds the exact 3 best."""
    rng = np.random.default_rng(2)
    table = np.repeat(rng.normal(size=(2, 5, 1, 5)), 5, axis=2).astype(np.float32)
    table[..., 1] = -np.inf
    step_fn, cache, calls = scripted_step_fn(table)
    result = search.beam_search(step_fn, cache, 2, 3, 0.6, tf.constant([3, 5]), nbest=3)
    assert calls[0] == 5
    ids = result.ids.numpy()
    assert not (ids == 1).any()
    for row, max_length in enumerate([3, 5]):
        assert (ids[row, :, :max_length] > 1).all() and (ids[row, :, max_length:] == 0).all()
        hyps = all_hypotheses(5, max_length)[-(3**max_length) :]  # the EOS-free ones
        expected = reference_nbest(partial(table_log_prob, table, row), hyps, 0.6)[:3]
        assert ids[row].tolist() == [padded(h, 5) for _, h in expected]
        np.testing.assert_allclose(result.scores.numpy()[row], [s for s, _ in expected], atol=1e-5)


def _mixed_table():
    """Sentence 0 ends at length 2, sentence 1 at length 4, sentence 2 never (max length 3)."""
    table = np.full((3, 6, 6, 6), -5.0, np.float32)
    for row, path, eos_at in [(0, [3, 1], 1), (1, [2, 5, 4, 1], 3), (2, [4, 4, 2], None)]:
        for step, token in enumerate(path):
            table[row, step, :, token] = 5.0
            table[row, step, :, 2 + (token - 1) % 4] = 3.0  # a runner-up for the second beam
        table[row, :, :, 1] = -np.inf if eos_at is None else -5.0
        if eos_at is not None:
            table[row, eos_at:, :, 1] = 5.0
    return table


def test_scripted_mixed_lengths_in_one_batch():
    table = _mixed_table()
    max_lengths = [6, 6, 3]
    step_fn, cache, calls = scripted_step_fn(table)
    together = search.beam_search(step_fn, cache, 3, 2, 0.6, tf.constant(max_lengths))
    assert calls[0] == 4  # sentence 1 is the last to finish, at step 4 of 6
    assert together.ids.numpy()[:, 0].tolist() == [
        padded((3, 1), 6),
        padded((2, 5, 4, 1), 6),
        padded((4, 4, 2), 6),
    ]
    for row in range(3):
        alone_fn, alone_cache, _ = scripted_step_fn(table[row : row + 1])
        alone = search.beam_search(alone_fn, alone_cache, 1, 2, 0.6, max_lengths[row])
        length = alone.ids.shape[-1]
        assert together.ids.numpy()[row, 0, :length].tolist() == alone.ids.numpy()[0, 0].tolist()
        np.testing.assert_allclose(together.scores[row], alone.scores[0], atol=1e-6)
    hyp = (2, 5, 4, 1)
    assert together.scores.numpy()[1, 0] == pytest.approx(
        table_log_prob(table, 1, hyp) / lp(4, 0.6), abs=1e-5
    )


def test_scripted_at_most_one_eos_per_hypothesis():
    """EOS is the most likely token everywhere, after EOS too; each hypothesis holds one EOS."""
    table = np.zeros((1, 5, 6, 6), np.float32)
    table[..., 1] = 4.0
    table[0, 0, 0] = [0, 4, 3, 2, 1, 0]
    step_fn, cache, _ = scripted_step_fn(table)
    result = search.beam_search(step_fn, cache, 1, 4, 0.6, 5, nbest=4)
    ids = result.ids.numpy()
    check_one_eos(ids)
    assert ids[0].tolist() == [padded(h, 5) for h in [(1,), (2, 1), (3, 1), (4, 1)]]
    expected = [table_log_prob(table, 0, h) / lp(len(h), 0.6) for h in [(1,), (2, 1), (3, 1)]]
    np.testing.assert_allclose(result.scores.numpy()[0, :3], expected, atol=1e-6)


def test_batch_invariance_sizes_1_7_64_shuffled():
    model = tiny_model(vocab_size=11, seed=11)
    inputs = random_inputs(64, 6, 11, seed=4)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
    def decode_batch(x):
        max_lengths = tf.reduce_sum(tf.cast(x > 0, tf.int32), axis=1) + 2  # --> [batch]
        step_fn, cache = transformer_step.model_step_fn(model, x, tf.reduce_max(max_lengths))
        step_fn, cache = eos_after_input(step_fn, cache, x)
        return search.beam_search(step_fn, cache, tf.shape(x)[0], 4, 0.6, max_lengths, nbest=2)

    def trim(x):  # drop the padding columns a smaller batch does not need
        return x[:, : max(1, int((x > 0).sum(axis=1).max()))]

    full = decode_batch(inputs)
    ids, scores = full.ids.numpy(), full.scores.numpy()
    assert 0 < (ids[:, 0] == 1).any(axis=-1).sum() < 64
    order = np.random.default_rng(5).permutation(64)
    for size in (7, 1):
        for start in range(0, 64, size):
            rows = order[start : start + size]
            part = decode_batch(trim(inputs[rows]))
            width = part.ids.shape[-1]
            np.testing.assert_array_equal(part.ids.numpy(), ids[rows, :, :width])
            assert not ids[rows, :, width:].any()
            np.testing.assert_allclose(part.scores.numpy(), scores[rows], atol=1e-5)


def _fixed_distribution_step(probs):
    logits = tf.math.log(tf.constant([probs], tf.float32))

    def step_fn(ids, index, cache):
        return tf.repeat(logits, tf.shape(ids)[0], axis=0), cache

    return step_fn


def test_sampling_follows_temperature_top_k_and_top_p():
    probs = [0.0, 0.1, 0.4, 0.3, 0.15, 0.05]
    step_fn = _fixed_distribution_step(probs)
    n = 20000

    def frequencies(**kwargs):
        result = sampling.sample_search(step_fn, {}, n, 1, seed=7, **kwargs)
        ids = result.ids.numpy()[:, 0, 0]
        return np.bincount(ids, minlength=6) / n, result

    freq, result = frequencies(temperature=1.0)
    np.testing.assert_allclose(freq, probs, atol=0.015)
    np.testing.assert_allclose(
        result.scores.numpy()[:, 0], np.log(np.array(probs)[result.ids.numpy()[:, 0, 0]]), atol=1e-6
    )
    # Temperature 0.5 squares the odds: p^2 renormalized.
    sharp = np.array(probs) ** 2 / np.sum(np.array(probs) ** 2)
    np.testing.assert_allclose(frequencies(temperature=0.5)[0], sharp, atol=0.015)
    # Top-2 keeps tokens 2 and 3, renormalized.
    np.testing.assert_allclose(
        frequencies(temperature=1.0, top_k=2)[0], [0, 0, 4 / 7, 3 / 7, 0, 0], atol=0.015
    )
    # Nucleus 0.75: 0.4 + 0.3 < 0.75, so tokens 2, 3 and 4 (0.85) stay.
    np.testing.assert_allclose(
        frequencies(temperature=1.0, top_p=0.75)[0],
        [
            0,
            0,
            0.4 / 0.85,
            0.3 / 0.85,
            0.15 / 0.85,
            0,
        ],
        atol=0.015,
    )


def test_sampling_is_seeded_and_degenerates_to_greedy():
    model = tiny_model(vocab_size=11, seed=13)
    inputs = random_inputs(6, 4, 11, seed=6)
    first = transformer_step.sample_ids(model, inputs, temperature=1.0, seed=1, extra_length=6)
    again = transformer_step.sample_ids(model, inputs, temperature=1.0, seed=1, extra_length=6)
    other = transformer_step.sample_ids(model, inputs, temperature=1.0, seed=2, extra_length=6)
    np.testing.assert_array_equal(first.ids.numpy(), again.ids.numpy())
    assert (first.ids.numpy() != other.ids.numpy()).any()
    # A top_k beyond the vocabulary's 11 ids filters nothing: the same draws as top_k 0.
    wide = transformer_step.sample_ids(
        model, inputs, temperature=1.0, top_k=40, seed=1, extra_length=6
    )
    np.testing.assert_array_equal(first.ids.numpy(), wide.ids.numpy())
    greedy = transformer_step.sample_ids(model, inputs, extra_length=6)
    top1 = transformer_step.sample_ids(
        model, inputs, temperature=1.0, top_k=1, seed=3, extra_length=6
    )
    np.testing.assert_array_equal(greedy.ids.numpy(), top1.ids.numpy())
    np.testing.assert_allclose(
        transformer_step.score_ids(model, inputs, first.ids[:, 0]).numpy(),
        first.log_probs.numpy()[:, 0],
        atol=1e-5,
    )


def test_bad_arguments_are_rejected():
    step_fn, cache, _ = scripted_step_fn(np.zeros((1, 2, 4, 4), np.float32))
    with pytest.raises(ValueError, match="nbest"):
        search.beam_search(step_fn, cache, 1, 2, 0.6, 2, nbest=3)
    with pytest.raises(ValueError, match="top_p"):
        sampling.sample_search(step_fn, cache, 1, 2, temperature=1.0, top_p=0.0)
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_length"):
        search.beam_search(step_fn, cache, 1, 2, 0.6, 0)


def test_search_survives_savedmodel_export(tmp_path):
    """The search is core TF ops in a tf.while_loop: a SavedModel reloads it with equal outputs."""
    model = tiny_model(vocab_size=11, seed=17)

    class Serving(tf.Module):
        def __init__(self):
            super().__init__()
            self.model = model
            self.weights = model.variables  # tracked explicitly, for loaders without Keras

        @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
        def search(self, inputs):
            found = transformer_step.translate_ids(self.model, inputs, beam_size=3, extra_length=3)
            return {"ids": found.ids, "scores": found.scores}

    inputs = tf.constant(random_inputs(3, 4, 11, seed=8))
    module = Serving()
    expected = module.search(inputs)
    tf.saved_model.save(module, str(tmp_path / "export"))
    loaded = tf.saved_model.load(str(tmp_path / "export"))  # kept alive: it owns the variables
    got = loaded.search(inputs)
    np.testing.assert_array_equal(got["ids"].numpy(), expected["ids"].numpy())
    np.testing.assert_allclose(got["scores"].numpy(), expected["scores"].numpy(), atol=1e-6)


def test_weights_cast_once_give_the_per_step_casts_results():
    """A mixed-bfloat16 model decodes with its matrices cast to bfloat16 once per search
    (`compute_dtype_weights`): the logits of every step, and the search's hypotheses and scores,
    are those of the casts Keras makes at each read, bit for bit; inside the scope a kernel
    reads as the cast copy itself, with no cast of its own."""
    model = tiny_model(vocab_size=40, seed=3, overrides=",precision=mixed_bfloat16")
    inputs = np.array([[5, 6, 7, 1, 0, 0], [2, 3, 4, 5, 6, 1]], np.int32)
    kernel = model.embedding.embeddings
    scope = transformer_step.compute_dtype_weights(model)
    with scope:
        assert kernel.value is scope.state_mapping[id(kernel)]
        assert kernel.value.dtype == tf.bfloat16
    assert kernel.value.dtype == tf.float32  # outside, the variable itself
    copied = {id(v) for v in model.variables if len(v.shape) >= 2}
    assert set(scope.state_mapping) == copied

    memory, mask = model.encode(inputs)
    state = model.project_memory(memory, mask)
    caches = [model.init_cache(2, 5), model.init_cache(2, 5)]
    ids = tf.zeros([2], tf.int32)
    for index in range(5):
        plain, caches[0] = model.decode_step(ids, index, caches[0], state)
        with scope:
            cast_once, caches[1] = model.decode_step(ids, index, caches[1], state)
        np.testing.assert_array_equal(cast_once.numpy(), plain.numpy())
        ids = tf.argmax(plain, axis=-1, output_type=tf.int32)

    @tf.function
    def searches(x):
        step_fn, cache = transformer_step.model_step_fn(model, x, 8)
        fast = search.beam_search(step_fn, cache, 2, 3, 0.6, 8, nbest=2)

        def per_step_casts(ids, index, state):
            return model.decode_step(ids, index, state, model.project_memory(memory, mask))

        slow = search.beam_search(per_step_casts, model.init_cache(2, 8), 2, 3, 0.6, 8, nbest=2)
        return fast, slow

    fast, slow = searches(inputs)
    np.testing.assert_array_equal(fast.ids.numpy(), slow.ids.numpy())
    np.testing.assert_array_equal(fast.scores.numpy(), slow.scores.numpy())


def test_float32_model_gets_an_empty_scope():
    model = tiny_model(vocab_size=20, seed=1)
    assert isinstance(transformer_step.compute_dtype_weights(model), contextlib.nullcontext)


@pytest.mark.parametrize("beam_size", [1, 4])
def test_the_translators_traced_search_equals_the_search_run_eagerly(beam_size):
    """The Translator traces its search without AutoGraph (core ops and tf.while_loop only):
    its ids and scores are those of the same search run eagerly, op by op."""
    import types

    from t2t_lite.decode.batches import pad_batch
    from t2t_lite.decode.translator import Translator
    from t2t_lite.hparams import SearchSettings

    model = tiny_model(20, seed=3)
    settings = SearchSettings(beam_size=beam_size, alpha=0.6, extra_length=5, nbest=beam_size)
    translator = Translator(model, types.SimpleNamespace(vocab_size=20), settings)
    inputs = random_inputs(5, 6, 20, seed=4)
    sources = [[int(x) for x in row[: list(row).index(1) + 1]] for row in inputs]
    traced = translator.search_ids(sources)
    eager = transformer_step.search_function(model, settings, alpha=settings.alpha)(
        tf.constant(pad_batch(sources))
    )
    np.testing.assert_array_equal(traced.ids.numpy(), eager.ids.numpy())
    np.testing.assert_allclose(traced.scores.numpy(), eager.scores.numpy(), rtol=1e-5, atol=1e-6)
