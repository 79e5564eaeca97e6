"""The beams cache (`Transformer.init_cache(..., beams=k)`): beam search without a copy of the
self-attention cache per step, against the cache gathered by the beams' parents (the layout
before it) and the ancestry mask against literal arrays."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from decoding_helpers import eos_after_input, random_inputs, tiny_model

from t2t_lite.decode import transformer_step
from t2t_lite.model.ensemble import Ensemble
from t2t_lite.model.layers import attention
from t2t_lite.search import beam as search
from t2t_lite.search import cache_rows


def test_ancestry_mask_is_each_beams_own_history():
    # 2 sentences of 3 beams after 2 steps; row r is beam r % 3 of sentence r // 3.
    ancestry = tf.constant([[0, 0], [0, 2], [1, 1], [2, 0], [2, 1], [0, 0]], tf.int32)
    grown, seen = attention.beam_ancestry(ancestry, tf.constant(2))
    np.testing.assert_array_equal(
        grown, [[0, 0, 0], [0, 2, 1], [1, 1, 2]] + [[2, 0, 0], [2, 1, 1], [0, 0, 2]]
    )
    assert seen.shape == (2, 1, 3, 9)
    # Key t * 3 + j is slot j at position t: row 1 (sentence 0, beam 1) sees slots 0, 2, 1.
    np.testing.assert_array_equal(
        seen[0, 0, 1].numpy(), [True, False, False, False, False, True, False, True, False]
    )
    expected = np.zeros((6, 3, 3), bool)
    for row, slots in enumerate(grown.numpy()):
        expected[row, np.arange(3), slots] = True
    np.testing.assert_array_equal(seen.numpy().reshape(6, 3, 3), expected)


def test_cache_rows_maps_rows_and_sentences_apart():
    cache = {
        "layers": [{"per_sentence": {"key": tf.constant([1.0])}}, {"other": tf.constant([2.0])}],
        "ancestry": tf.constant([3.0]),
    }
    rows = cache_rows.map_rows(lambda t: t * 10, cache)
    sentences = cache_rows.map_sentences(lambda t: t * 10, cache)
    assert float(rows["layers"][0]["per_sentence"]["key"][0]) == 1.0
    assert float(rows["layers"][1]["other"][0]) == 20.0
    assert float(rows["ancestry"][0]) == 30.0
    assert float(sentences["layers"][0]["per_sentence"]["key"][0]) == 10.0
    assert float(sentences["layers"][1]["other"][0]) == 2.0
    assert float(sentences["ancestry"][0]) == 3.0
    assert attention.PER_SENTENCE == cache_rows.PER_SENTENCE


def _both_layouts(model, inputs, k, compact, nbest):
    """Beam search of k beams with the cache gathered by the parents (beams=1) and with the
    beams cache, on the same inputs, an EOS bias making outputs end at varied lengths."""
    batch, found = inputs.shape[0], []
    for beams in (1, k):
        if compact:
            step_fn, cache, state = transformer_step.sentence_step_fn(model, inputs, 9, beams=beams)
            step_fn = eos_after_input_with_state(step_fn, inputs, 40)
        else:
            step_fn, cache = transformer_step.model_step_fn(model, inputs, 9, beams=beams)
            step_fn, cache = eos_after_input(step_fn, cache, inputs, vocab_size=40)
            state = None
        found.append(
            search.beam_search(
                step_fn, cache, batch, k, 0.6, 9, nbest=nbest, sentence_state=state, compact=compact
            )
        )
    return found


def eos_after_input_with_state(step_fn, inputs, vocab_size):
    """`eos_after_input` for a step function of four arguments (a compacting search), with the
    input lengths read from the sentences' state so that they follow the compaction."""
    eos = tf.one_hot(1, vocab_size)

    def step(ids, index, cache, state):
        logits, cache = step_fn(ids, index, cache, state)
        lengths = tf.reduce_sum(tf.cast(state["mask"], tf.float32), axis=-1)  # [b]
        rows = tf.repeat(lengths, tf.shape(ids)[0] // tf.shape(lengths)[0])
        return logits + (tf.cast(index + 1, tf.float32) - rows)[:, None] * eos, cache

    return step


@pytest.mark.parametrize("k,compact", [(2, False), (4, False), (4, True), (5, True)])
def test_the_beams_cache_finds_the_gathered_caches_hypotheses(k, compact):
    model = tiny_model(vocab_size=40, seed=3)
    inputs = random_inputs(batch=9, max_length=7, vocab_size=40, seed=11)
    gathered, beams = _both_layouts(model, inputs, k, compact, nbest=min(k, 3))
    assert (gathered.ids.numpy() == 1).any()
    lengths = (gathered.ids.numpy()[:, 0] > 0).sum(-1)
    assert lengths.min() < lengths.max()  # sentences ended at different steps
    np.testing.assert_array_equal(beams.ids.numpy(), gathered.ids.numpy())
    np.testing.assert_allclose(beams.scores.numpy(), gathered.scores.numpy(), atol=1e-5)
    np.testing.assert_allclose(beams.log_probs.numpy(), gathered.log_probs.numpy(), atol=1e-5)


def test_the_beams_cache_keeps_one_row_per_sentence_and_the_ancestry_per_beam():
    model = tiny_model(vocab_size=40, seed=3)
    inputs = random_inputs(batch=3, max_length=5, vocab_size=40, seed=2)
    step_fn, cache = transformer_step.model_step_fn(model, inputs, 6, beams=4)
    own = cache["layers"][0][cache_rows.PER_SENTENCE]["key"]
    assert own.shape[0] == 3 and own.shape[2] == 0 and own.shape[3] == 4
    rows = cache_rows.map_rows(lambda t: tf.repeat(t, 4, axis=0), cache)
    logits, after = step_fn(tf.zeros([12], tf.int32), tf.constant(0), rows)
    assert logits.shape[0] == 12
    assert after["layers"][0][cache_rows.PER_SENTENCE]["key"].shape[:4] == (3, 2, 1, 4)
    np.testing.assert_array_equal(after["ancestry"], np.tile(np.arange(4), 3)[:, None])


@pytest.mark.parametrize("precision", ["float32", "mixed_bfloat16"])
def test_translate_ids_with_the_beams_cache_and_an_ensemble(precision):
    """t2t-decode's entry point (beams cache, compaction) against the gathered cache, for one
    model in float32 and mixed bfloat16 and an ensemble of two; in a graph, as exports run."""
    first = tiny_model(vocab_size=40, seed=3, overrides=f",precision={precision}")
    second = tiny_model(vocab_size=40, seed=4, overrides=f",precision={precision}")
    inputs = random_inputs(batch=12, max_length=9, vocab_size=40, seed=5)
    for model in (first, Ensemble([first, second])):
        fast = tf.function(
            lambda x, model=model: transformer_step.translate_ids(
                model, x, beam_size=4, extra_length=4, nbest=2
            )
        )(inputs)
        step_fn, cache = transformer_step.model_step_fn(
            model, inputs, int(tf.reduce_max(transformer_step.output_lengths(model, inputs, 4)))
        )
        slow = search.beam_search(
            step_fn, cache, 12, 4, 0.6, transformer_step.output_lengths(model, inputs, 4), nbest=2
        )
        # A near tie may go the other way where the kernels round a sum in another order
        # (bfloat16 above all): at most one sentence may differ.
        same = (fast.ids.numpy() == slow.ids.numpy()).all(axis=(1, 2))
        assert same.sum() >= len(same) - (1 if precision == "mixed_bfloat16" else 0)
        tolerance = 1e-5 if precision == "float32" else 2e-2
        np.testing.assert_allclose(
            fast.scores.numpy()[same], slow.scores.numpy()[same], atol=tolerance
        )


def test_the_fixed_beams_cache_under_xla_finds_the_gathered_buffers_hypotheses():
    """`t2t-decode --jit_compile`'s beam search: the beams cache's buffers written in place at
    the step's position, against the buffers gathered by the parents, both compiled by XLA."""
    model = tiny_model(vocab_size=40, seed=3)
    inputs = random_inputs(batch=6, max_length=7, vocab_size=40, seed=11)
    found = []
    for beams in (1, 4):
        step_fn, cache = transformer_step.model_step_fn(
            model, inputs, 9, fixed_shapes=True, beams=beams
        )
        step_fn, cache = eos_after_input(step_fn, cache, inputs, vocab_size=40)
        if beams > 1:  # buffers per sentence, written in place
            assert set(cache["model"]["layers"][0][cache_rows.PER_SENTENCE]) == {
                "key_slots",
                "value_slots",
            }
        search_fn = tf.function(
            lambda step_fn=step_fn, cache=cache: search.beam_search(
                step_fn, cache, 6, 4, 0.6, 9, nbest=2, buffer_length=9
            ),
            jit_compile=True,
        )
        found.append(search_fn())
    gathered, beams = found
    assert (gathered.ids.numpy() == 1).any()
    np.testing.assert_array_equal(beams.ids.numpy(), gathered.ids.numpy())
    np.testing.assert_allclose(beams.scores.numpy(), gathered.scores.numpy(), atol=1e-5)
