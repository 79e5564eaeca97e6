"""The exported `guided` signature against `Translator.hypotheses(guides, details=True)`: the
same translations, scores, tokens, token probabilities, alignments and confidence for the same
prefixes and constraints, on a SentencePiece run with a fitted calibration."""

from __future__ import annotations

import numpy as np
import pytest
import serve_helpers
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the SavedModel's tokenizer ops)

from t2t_lite.decode import confidence
from t2t_lite.decode.guidance import Guide
from t2t_lite.decode.translator import Translator
from t2t_lite.run.run import Run
from t2t_lite.serve import export
from t2t_lite.serve.guided_graph import calibrated

SEARCH = {"beam_size": 3, "alpha": 0.6, "extra_length": 6}
LINES = ["we saw the red box", "", "  I took a door  ", "the small boxes", "now then here"]
PREFIXES = ["", "", "you", "the green", ""]
CONSTRAINTS = [["doors", "small"], [], ["red box"], [], ["boxes", " ".join(["green"] * 30)]]


@pytest.fixture(autouse=True)
def _seed():
    """No reseeding: it would drop the module's SentencePiece resources (serve_helpers)."""
    yield


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    root = tmp_path_factory.mktemp("guided_export")
    output_dir = serve_helpers.text_run(root)
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(-4, 0, 12))
    confidence.Calibration(tuple(x), tuple(np.linspace(0.05, 0.9, 12)), 12).save(output_dir)
    run = Run.restore(output_dir, search=SEARCH)
    path, _ = export.export_run(run, str(root / "export"))
    return output_dir, path


def test_guided_signature_equals_the_translator(paths):
    output_dir, path = paths
    translator = Translator.from_run(output_dir, **SEARCH)
    assert translator.calibration.sentences == 12
    guides = [Guide(p, tuple(c)) for p, c in zip(PREFIXES, CONSTRAINTS, strict=True)]
    found = translator.hypotheses(LINES, guides=guides, details=True)
    width = max(len(c) for c in CONSTRAINTS)
    table = [c + [""] * (width - len(c)) for c in CONSTRAINTS]
    signature = tf.saved_model.load(path).signatures[export.GUIDED_SIGNATURE]
    out = signature(
        inputs=tf.constant(LINES), prefixes=tf.constant(PREFIXES), constraints=tf.constant(table)
    )
    for i, hyps in enumerate(found):
        text = out["outputs"][i].numpy().decode("utf-8")
        if not hyps:
            assert text == "" and out["alignment"][i].numpy() == b""
            continue
        (hyp,) = hyps
        assert text == hyp.text
        assert float(out["scores"][i]) == pytest.approx(hyp.score, abs=1e-5)
        n = len(hyp.details.tokens)
        tokens = [t.decode("utf-8") for t in out["tokens"][i].numpy()]
        assert tokens[:n] == list(hyp.details.tokens) and not any(tokens[n:])
        np.testing.assert_allclose(out["token_probs"][i, :n], hyp.details.token_probs, atol=1e-5)
        assert out["alignment"][i].numpy().decode() == hyp.details.alignment
        assert float(out["confidence"][i]) == pytest.approx(hyp.details.confidence, abs=1e-5)
    # What was asked for is there: the prefixes, and the constraints that fit.
    assert found[2][0].text.startswith("you") and found[3][0].text.startswith("the green")
    assert "red box" in found[2][0].text and "doors" in found[0][0].text
    assert "boxes" in found[4][0].text  # the 30-word phrase after it did not fit: dropped


def test_graph_calibration_equals_numpy_interp():
    points = confidence.Calibration((-3.0, -2.0, -2.0, -0.5), (0.1, 0.3, 0.5, 0.8), 4)
    values = np.array([-5.0, -3.0, -2.5, -2.0, -1.9, -1.0, -0.5, 0.0], np.float32)
    got = calibrated(points, tf.constant(values)).numpy()
    np.testing.assert_allclose(got, [points([v]) for v in values], atol=1e-6)
    plain = calibrated(confidence.Calibration(), tf.constant(values)).numpy()
    np.testing.assert_allclose(plain, np.exp(values), rtol=1e-6)
