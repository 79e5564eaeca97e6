"""Streaming (`t2t_lite.decode.streaming`, `Translator.translate_stream`) on a SentencePiece run:
the streamed ids are `greedy_search`'s, the streamed texts join to `translate`'s output (an
empty line, a truncated one), beam search gives its translation whole, and the step is traced
once, not once per sentence."""

from __future__ import annotations

import pytest
import serve_helpers
import tensorflow as tf

from t2t_lite.decode.streaming import TextIncrements, token_steps, unstreamable
from t2t_lite.decode.transformer_step import model_step_fn, output_lengths
from t2t_lite.decode.translator import Translator
from t2t_lite.search.sampling import greedy_search
from t2t_lite.vocabulary import EOS_ID

LINES = serve_helpers.sentences(6, seed=3)
LONG = " ".join(["the red box"] * 9)  # more tokens than the model's 24 positions


@pytest.fixture(autouse=True)
def _seed():
    """No reseeding: it would drop the module's SentencePiece resources (serve_helpers)."""
    yield


@pytest.fixture(scope="module")
def output_dir(tmp_path_factory):
    return serve_helpers.text_run(tmp_path_factory.mktemp("streaming"))


@pytest.fixture(scope="module")
def greedy(output_dir):
    return Translator.from_run(output_dir, beam_size=1, alpha=0.0)


def greedy_search_ids(translator: Translator, line: str) -> list[int]:
    """`greedy_search` (one `tf.while_loop` over the cached step), its ids cut after EOS."""
    (source,) = translator.encode([line], ["line"])
    inputs = tf.constant([source], tf.int32)
    limits = output_lengths(translator.model, inputs, translator.settings.extra_length)
    step_fn, cache = model_step_fn(translator.model, inputs, tf.reduce_max(limits))
    ids = greedy_search(step_fn, cache, 1, limits).ids[0, 0].numpy().tolist()
    return ids[: ids.index(EOS_ID) + 1] if EOS_ID in ids else ids


@pytest.mark.parametrize("line", [*LINES, LONG])
def test_streamed_ids_are_greedy_searchs_and_the_text_translates(greedy, line):
    steps = list(token_steps(greedy, line))
    assert [s.token_id for s in steps] == greedy_search_ids(greedy, line)
    assert "".join(s.text for s in steps) == greedy.translate([line])[0]
    assert "".join(greedy.translate_stream(line)) == greedy.translate([line])[0]
    # The score of beam 1, alpha 0 is the log-probability: the steps' sum.
    (_, score), *_ = greedy.translate([line], scores=True)
    assert sum(s.log_prob for s in steps) == pytest.approx(score, abs=1e-4)


def test_a_long_line_is_truncated_as_translate_truncates_it(greedy):
    (source,) = greedy.encode([LONG], ["line"])
    assert len(source) == greedy.max_positions == 24
    # Each output is at most its (truncated) input's length + extra_length, within 24.
    steps = list(token_steps(greedy, LONG))
    assert 1 <= len(steps) <= 24


def test_an_empty_line_streams_nothing(greedy):
    assert greedy.translate(["", "   "]) == ["", ""]
    for line in ("", "   "):
        assert list(token_steps(greedy, line)) == []
        assert list(greedy.translate_stream(line)) == []


def test_the_step_is_traced_a_few_times_not_per_sentence(greedy):
    stepper = greedy.token_stepper()
    for line in LINES[:3]:  # sentences of several lengths: their shapes relaxed
        list(token_steps(greedy, line))
    traced = (
        stepper.start.experimental_get_tracing_count(),
        stepper.step.experimental_get_tracing_count(),
    )
    assert traced[0] <= 2 and traced[1] <= 3
    for line in [*LINES[3:], LONG]:
        list(token_steps(greedy, line))
    assert (
        stepper.start.experimental_get_tracing_count(),
        stepper.step.experimental_get_tracing_count(),
    ) == traced


def test_word_starting_pieces_bring_their_space(greedy):
    sentence = "we saw the red boxes now"
    ids = greedy.tokenizer.encode_py(sentence)
    assert len(ids) > len(sentence.split())  # some words are several pieces
    text = TextIncrements(greedy.tokenizer)
    added = [text.add(i) for i in ids[:-1]] + [text.finish(ids[-1])]
    assert "".join(added) == sentence == greedy.tokenizer.decode_py(ids)
    # A space starts each later word's first piece and appears nowhere else.
    assert sum(a.startswith(" ") for a in added) == len(sentence.split()) - 1
    assert not any(" " in a.lstrip(" ") or a.startswith("  ") for a in added)


def test_one_beam_streams_at_any_alpha(output_dir, greedy):
    """Beam size 1 is greedy search whatever the length penalty: the same tokens stream."""
    penalized = Translator.from_run(output_dir, beam_size=1, alpha=1.0)
    assert unstreamable(penalized) is None
    for line in LINES:
        steps = list(token_steps(penalized, line))
        assert [s.token_id for s in steps] == greedy_search_ids(greedy, line)
        assert "".join(s.text for s in steps) == penalized.translate([line])[0]


def test_beam_search_streams_by_sentence(output_dir, greedy):
    beam = Translator.from_run(output_dir, beam_size=3, alpha=0.6)
    assert unstreamable(beam) == "a beam's best hypothesis can change until the search ends"
    for line in LINES[:2]:
        assert list(beam.translate_stream(line)) == beam.translate([line])
    refusal = r"^token_steps: a beam's best hypothesis can change until the search ends; it needs"
    with pytest.raises(ValueError, match=refusal):
        next(token_steps(beam, LINES[0]))
    assert unstreamable(greedy) is None


def test_sampling_at_temperature_0_streams_as_it_searches(output_dir):
    sampler = Translator.from_run(output_dir, sampling=True, temperature=0.0)
    assert unstreamable(sampler) is None
    assert "".join(sampler.translate_stream(LINES[0])) == sampler.translate([LINES[0]])[0]
    drawn = Translator.from_run(output_dir, sampling=True, temperature=0.8)
    assert unstreamable(drawn) == "sampling draws each token for the whole batch at once"


class BytePieces:
    """A tokenizer's `decode` over literal byte pieces (as SentencePiece's byte fallback splits
    a character): the ids' bytes joined, up to the first EOS."""

    PIECES = {10: b"caf", 11: b"\xc3", 12: b"\xa9", 13: b" !", 14: b" "}

    def decode(self, ids: tf.Tensor) -> tf.Tensor:
        kept = []
        for i in ids[0].numpy().tolist():
            if i == EOS_ID:
                break
            kept.append(self.PIECES[i])
        return tf.constant([b"".join(kept)])


def test_text_that_may_still_change_waits_for_the_next_token():
    text = TextIncrements(BytePieces())
    # "é" comes in two byte pieces: nothing until the second; a trailing space waits too.
    added = [text.add(10), text.add(11), text.add(12), text.add(14), text.finish(13)]
    assert added == ["caf", "", "é", "", "  !"]
    assert "".join(added) == "café  !"
    ending = TextIncrements(BytePieces())
    assert [ending.add(10), ending.add(14), ending.finish(EOS_ID)] == ["caf", "", " "]
