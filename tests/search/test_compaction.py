"""Batch compaction (`beam_search(compact=True)`) against the search that steps every sentence
to the end (`compact=False`): the same hypotheses, with fewer rows stepped."""

import numpy as np
import pytest
import tensorflow as tf
from decoding_helpers import random_inputs, rising_eos_table, scripted_step_fn, tiny_model

from t2t_lite.decode import transformer_step
from t2t_lite.runtime.precision import onednn_enabled
from t2t_lite.search import beam as search

ONEDNN = onednn_enabled()


def _ulps(steps: int) -> int:
    """How far apart (units in the last place) the scores of a search of `steps` steps may be
    with and without compaction: not at all where oneDNN computes. TensorFlow's own kernels (an
    AVX2-only CPU) may round a log-softmax over fewer rows 1 unit apart at each step (2 were
    seen over 12 steps with TF_ENABLE_ONEDNN_OPTS=0): a log-prob sums up to `steps` such terms,
    each no larger than the sum, each addition rounding once more, and a score divides once."""
    return 0 if ONEDNN else 2 * steps + 1


# Beam 1 is t2t-decode's greedy search, whose steps never gather the cache: the compaction
# gathers it (`compaction.compact`), which the cache check below holds.
@pytest.mark.parametrize("beam,nbest", [(4, 1), (4, 3), (1, 1)])
def test_scripted_search_is_the_uncompacted_one(beam, nbest):
    batch, steps, vocab = 16, 12, 9
    table = rising_eos_table(batch, steps, vocab, seed=nbest)
    max_lengths = np.random.default_rng(0).integers(3, steps + 1, size=batch)
    step_fn, cache, _ = scripted_step_fn(table)
    full = search.beam_search(step_fn, cache, batch, beam, 0.6, max_lengths, nbest=nbest)

    rows_seen, states_seen = [], []

    def with_state(ids, index, cache, state):
        # The state must follow the rows: each kept sentence's own id, in the cache's order.
        rows_seen.append(int(tf.shape(ids)[0]))
        states_seen.append(state["sentence"].numpy())
        np.testing.assert_array_equal(np.repeat(state["sentence"], beam), cache["row"])
        return step_fn(ids, index, cache)

    state = {"sentence": tf.range(batch)}
    found = search.beam_search(
        with_state,
        cache,
        batch,
        beam,
        0.6,
        max_lengths,
        nbest=nbest,
        sentence_state=state,
        compact=True,
    )
    np.testing.assert_array_equal(found.ids.numpy(), full.ids.numpy())
    for got, expected in ((found.scores, full.scores), (found.log_probs, full.log_probs)):
        np.testing.assert_array_max_ulp(got.numpy(), expected.numpy(), maxulp=_ulps(steps))
    assert (full.ids.numpy() == 1).any()
    # Sentences left: the rows stepped shrink from the whole batch, and so does the work.
    assert rows_seen[0] == batch * beam and rows_seen[-1] < batch * beam
    assert sum(rows_seen) < len(rows_seen) * batch * beam


@pytest.mark.parametrize("dtype,beam", [("float32", 4), ("mixed_bfloat16", 4), ("float32", 1)])
def test_the_model_finds_the_same_hypotheses_with_and_without_compaction(dtype, beam):
    # Sentences of 1 to 14 tokens, each output at most 6 longer: short ones finish early.
    model = tiny_model(vocab_size=40, seed=3, overrides=f",precision={dtype}")
    inputs = random_inputs(batch=24, max_length=14, vocab_size=40, seed=5)
    results = []
    for compact in (False, True):
        search_fn = tf.function(
            lambda x, compact=compact: transformer_step.translate_ids(
                model, x, beam_size=beam, extra_length=6, nbest=min(beam, 2), compact=compact
            ),
            input_signature=[tf.TensorSpec([None, None], tf.int32)],
        )
        results.append(search_fn(inputs))
    full, compacted = results
    # A kernel may round a product of fewer rows differently in its last bits (float32 scores
    # 1 ulp apart were seen), so a near tie may go the other way: one sentence may differ
    # (none did on an Intel Xeon with AMX).
    same = (compacted.ids.numpy() == full.ids.numpy()).all(axis=(1, 2))
    assert same.sum() >= len(same) - 1
    for got, expected in ((compacted.scores, full.scores), (compacted.log_probs, full.log_probs)):
        np.testing.assert_allclose(got.numpy()[same], expected.numpy()[same], atol=1e-5)
    lengths = (full.ids.numpy()[:, 0] > 0).sum(-1)
    assert lengths.min() < lengths.max()  # the sentences did finish at different steps


def test_a_compacting_search_without_sentence_state_is_the_uncompacted_one():
    # A step function of three arguments (no state of its own per sentence) compacts too: only
    # the search's state and the cache's rows follow the kept sentences.
    batch, steps, vocab = 12, 10, 7
    table = rising_eos_table(batch, steps, vocab, seed=7)
    max_lengths = np.random.default_rng(1).integers(2, steps + 1, size=batch)
    step_fn, cache, _ = scripted_step_fn(table)
    rows_seen = []

    def counted(ids, index, cache):
        rows_seen.append(int(tf.shape(ids)[0]))
        return step_fn(ids, index, cache)

    full = search.beam_search(step_fn, cache, batch, 3, 0.6, max_lengths, nbest=2)
    compacted = search.beam_search(
        counted, cache, batch, 3, 0.6, max_lengths, nbest=2, compact=True
    )
    assert rows_seen[0] == batch * 3 and rows_seen[-1] < batch * 3  # sentences did leave
    np.testing.assert_array_equal(compacted.ids.numpy(), full.ids.numpy())
    np.testing.assert_array_max_ulp(
        compacted.log_probs.numpy(), full.log_probs.numpy(), maxulp=_ulps(steps)
    )


@pytest.mark.parametrize("option", ["buffer_length", "banks"])
def test_a_compacting_search_refuses_fixed_buffers_and_banks(option):
    table = rising_eos_table(2, 4, 5, seed=0)
    step_fn, cache, _ = scripted_step_fn(table)
    with pytest.raises(ValueError, match="compacting beam search takes no buffer_length"):
        search.beam_search(step_fn, cache, 2, 2, 0.6, 4, compact=True, **{option: 4})
