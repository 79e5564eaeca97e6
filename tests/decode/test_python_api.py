"""The Python API for text, as the README shows it: `Translator.from_run(path).translate(lines)`
over a run folder and over an export, held to what t2t-decode writes and to the search's own
hypotheses."""

from __future__ import annotations

import pytest
import tensorflow_text  # noqa: F401  (the SavedModel's tokenizer ops)
from decoding_helpers import decode_flags, write_tiny_run

from t2t_lite.decode.exported import ExportedTranslator
from t2t_lite.decode.runner import run_decode
from t2t_lite.decode.translator import Translator
from t2t_lite.run.run import Run
from t2t_lite.serve import export

LINES = ["1 2 3", "", "4 5 6 7 8", "9 9"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("api")
    write_tiny_run(root, max_positions=32, seed=5)
    (root / "in.txt").write_text("\n".join(LINES) + "\n")
    return root


def test_translate_gives_what_t2t_decode_writes(run_dir):
    config = decode_flags(
        output_dir=str(run_dir / "out"),
        decode_from_file=str(run_dir / "in.txt"),
        decode_to_file=str(run_dir / "decoded.txt"),
        beam_size=2,
        alpha=0.6,
    )
    assert run_decode(*config) == len(LINES)
    written = (run_dir / "decoded.txt").read_text().split("\n")[:-1]
    found = Translator.from_run(str(run_dir / "out"), beam_size=2, alpha=0.6).translate(LINES)
    assert found == written and found[1] == ""
    assert all(isinstance(text, str) for text in found)


def test_nbest_and_scores_are_the_searchs_hypotheses(run_dir):
    translator = Translator.from_run(str(run_dir / "out"), beam_size=4, nbest=3)
    found = translator.translate(LINES, nbest=3, scores=True)
    hypotheses = translator.hypotheses(LINES)
    for line, pairs, hyps in zip(LINES, found, hypotheses, strict=True):
        assert len(pairs) == 3
        if line:
            assert pairs == [(h.text, pytest.approx(h.score)) for h in hyps]
        else:
            assert pairs == [("", 0.0)] * 3
    assert translator.translate(LINES, nbest=2) == [[t for t, _ in p[:2]] for p in found]
    for wrong in (0, -2, 1.5):
        with pytest.raises(ValueError, match=rf"^nbest={wrong} must be a whole number >= 1$"):
            translator.translate(LINES, nbest=wrong)


@pytest.mark.parametrize("beam_size", [1, 2])
def test_nbest_beyond_the_search_widens_the_beam_for_the_call(run_dir, beam_size):
    # A translator made without nbest: nbest=3 searches 3 in a beam of 3, as one made so.
    translator = Translator.from_run(str(run_dir / "out"), beam_size=beam_size, alpha=0.6)
    widened = translator.translate(LINES, nbest=3, scores=True)
    explicit = Translator.from_run(str(run_dir / "out"), beam_size=3, alpha=0.6, nbest=3)
    expected = explicit.translate(LINES, nbest=3, scores=True)
    for pairs, want in zip(widened, expected, strict=True):
        assert len(pairs) == 3
        assert [t for t, _ in pairs] == [t for t, _ in want]
        assert [s for _, s in pairs] == pytest.approx([s for _, s in want], abs=1e-5)
    # The translator's own search is unchanged, and the wider search is kept for the next call.
    assert translator.settings.beam_size == beam_size and translator.settings.nbest == 1
    assert translator.translate(LINES) == Translator.from_run(
        str(run_dir / "out"), beam_size=beam_size, alpha=0.6
    ).translate(LINES)
    assert translator._with_nbest(3)._search is translator._with_nbest(3)._search


@pytest.mark.parametrize("guided", [False, True])
def test_with_alpha_searches_as_a_translator_made_with_that_alpha(run_dir, guided):
    """`with_alpha` shares the traced search (alpha is its input): the same hypotheses and
    scores as a translator made with that alpha, and no second trace."""
    base = Translator.from_run(str(run_dir / "out"), beam_size=3, alpha=0.0, nbest=3)
    given = {"prefixes": ["1", "", "4", ""]} if guided else {}
    before = base.translate(LINES, nbest=3, scores=True, **given)
    found = {}
    for alpha in (0.6, 2.0):
        found[alpha] = base.with_alpha(alpha).translate(LINES, nbest=3, scores=True, **given)
        made = Translator.from_run(str(run_dir / "out"), beam_size=3, alpha=alpha, nbest=3)
        expected = made.translate(LINES, nbest=3, scores=True, **given)
        for pairs, want in zip(found[alpha], expected, strict=True):
            assert [t for t, _ in pairs] == [t for t, _ in want]
            assert [s for _, s in pairs] == pytest.approx([s for _, s in want], abs=1e-5)
    assert base._traced_search(guided).experimental_get_tracing_count() == 1
    # The length penalty was applied: the same line scores differently under each alpha.
    assert found[0.6][0][0][1] != pytest.approx(found[2.0][0][0][1], abs=1e-3)
    assert base.settings.alpha == 0.0
    assert base.translate(LINES, nbest=3, scores=True, **given) == before
    with pytest.raises(ValueError, match="--alpha must be >= 0, got -1"):
        base.with_alpha(-1)


def test_an_export_translates_as_its_run(run_dir):
    run = Run.restore(str(run_dir / "out"), search={"beam_size": 3, "alpha": 0.6})
    export.export_run(run, str(run_dir / "exports"), nbest=2)
    exported = Translator.from_run(str(run_dir / "exports"))
    assert isinstance(exported, ExportedTranslator)
    direct = Translator.from_run(str(run_dir / "out"), beam_size=3, alpha=0.6, nbest=2)
    assert exported.translate(LINES) == direct.translate(LINES)
    got = exported.translate(LINES, nbest=2, scores=True)
    want = direct.translate(LINES, nbest=2, scores=True)
    for pairs, expected in zip(got, want, strict=True):
        assert [t for t, _ in pairs] == [t for t, _ in expected]
        assert [s for _, s in pairs] == pytest.approx([s for _, s in expected], abs=1e-4)
    with pytest.raises(ValueError, match="is an export"):
        Translator.from_run(str(run_dir / "exports"), beam_size=4)
