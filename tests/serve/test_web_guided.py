"""Prefixes, constraints and details in the exported `guided` signature and through t2t-serve's
API: the signature computes what `Translator.hypotheses(guides, details=True)` does (outputs,
scores, tokens, token probabilities, alignments, calibrated confidence), a run and its
SavedModel answer as t2t-decode --output_format=jsonl writes, and bad requests get a 4xx naming
the field."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import serve_helpers
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the SavedModel's tokenizer ops)
from decoding_helpers import t2t_decode
from fastapi.testclient import TestClient

from t2t_lite.decode import confidence
from t2t_lite.decode.guidance import Guide
from t2t_lite.decode.translator import Translator
from t2t_lite.run.run import Run
from t2t_lite.serve import export
from t2t_lite.serve.guided_graph import MAX_CONSTRAINTS, calibrated
from t2t_lite.serve.web.api import Limits
from t2t_lite.serve.web.app import create_app
from t2t_lite.serve.web.run_backend import RunBackend
from t2t_lite.serve.web.saved_model_backend import SavedModelBackend

SEARCH = {"beam_size": 3, "alpha": 0.6, "extra_length": 6}
LINES = ["we saw the red box", "", "I took a door", "the small boxes now"]
PREFIXES = ["", "", "you", "the green"]
CONSTRAINTS = [["doors"], [], ["red box", "then"], []]
LOCAL = "http://localhost"
LIMITS = Limits(max_sentences=8, max_characters=80, max_concurrent=2, max_beam_size=6)
# The guided signature's repetition and length controls, off (they search as before them).
OFF = {"no_repeat_ngram_size": 0, "repetition_penalty": 1.0, "min_length": 0, "disable_unk": False}
DTYPES = {"repetition_penalty": tf.float32, "disable_unk": tf.bool}  # the others int32


def control_inputs(count: int, **given) -> dict:
    """The control inputs for `count` sentences: OFF, with `given` values [count] on top."""
    values = {name: [value] * count for name, value in OFF.items()}
    values.update(given)
    return {k: tf.constant(v, DTYPES.get(k, tf.int32)) for k, v in values.items()}


@pytest.fixture(autouse=True)
def _seed():
    """No reseeding: it would drop the module's SentencePiece resources (serve_helpers)."""
    yield


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(root, a SentencePiece run with a fitted confidence calibration, its export's path)."""
    root = tmp_path_factory.mktemp("guided")
    output_dir = serve_helpers.text_run(root)
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(-4, 0, 12))
    confidence.Calibration(tuple(x), tuple(np.linspace(0.05, 0.9, 12)), 12).save(output_dir)
    run = Run.restore(output_dir, search=SEARCH)
    path, _ = export.export_run(run, str(root / "export"))
    return root, output_dir, path


@pytest.fixture(scope="module")
def clients(exported):
    root, output_dir, path = exported
    run = Run.restore(output_dir, search=SEARCH)
    with (
        TestClient(create_app(RunBackend(run), LIMITS), base_url="http://localhost") as from_run,
        TestClient(
            create_app(SavedModelBackend(path), LIMITS), base_url="http://localhost"
        ) as from_export,
    ):
        yield output_dir, root, from_run, from_export


def _decoded(output_dir, root) -> list[dict]:
    (root / "in.txt").write_text("\n".join(LINES) + "\n")
    (root / "prefix.txt").write_text("\n".join(PREFIXES) + "\n")
    (root / "c.tsv").write_text("\n".join("\t".join(c) for c in CONSTRAINTS) + "\n")
    lines = t2t_decode(
        root / "in.txt",
        root / "out.jsonl",
        output_dir=output_dir,
        prefix_file=str(root / "prefix.txt"),
        constraints_file=str(root / "c.tsv"),
        output_format="jsonl",
        **SEARCH,
    )
    return [json.loads(line)["hypotheses"] for line in lines]


def test_run_and_saved_model_answer_as_t2t_decode_writes(clients):
    output_dir, root, from_run, from_export = clients
    expected = _decoded(output_dir, root)
    body = {
        "sentences": LINES,
        "prefixes": PREFIXES,
        "constraints": CONSTRAINTS,
        "details": True,
        "beam_size": 3,
        "alpha": 0.6,
    }
    for client in (from_run, from_export):
        answer = client.post("/api/translate", json=body)
        assert answer.status_code == 200, answer.text
        for result, want in zip(answer.json()["results"], expected, strict=True):
            assert len(result["hypotheses"]) == len(want)
            for got, hyp in zip(result["hypotheses"], want, strict=True):
                assert got["text"] == hyp["text"] and got["alignment"] == hyp["alignment"]
                assert got["tokens"] == hyp["tokens"]
                assert got["score"] == pytest.approx(hyp["score"], abs=1e-5)
                assert got["confidence"] == pytest.approx(hyp["confidence"], abs=1e-5)
                assert got["token_probs"] == pytest.approx(hyp["token_probs"], abs=1e-5)
    assert expected[2][0]["text"].startswith("you") and "red box" in expected[2][0]["text"]
    # Details alone, without guides: the unguided translation, described.
    plain = from_run.post("/api/translate", json={"sentences": LINES[:1], "beam_size": 3})
    described = from_export.post("/api/translate", json={"sentences": LINES[:1], "details": True})
    assert (
        described.json()["results"][0]["hypotheses"][0]["text"]
        == (plain.json()["results"][0]["hypotheses"][0]["text"])
    )


@pytest.mark.parametrize(
    ("body", "status", "field", "words"),
    [
        ({"prefixes": ["a"]}, 422, "prefixes", "prefixes has 1 items for 2 sentences"),
        ({"constraints": [["x"], ["y" * 81]]}, 413, "constraints[1][0]", "--max_characters=80"),
        ({"constraints": [["x"], []], "sampling": ""}, 422, "constraints", "need beam search"),
    ],
)
def test_bad_guides_name_the_field(clients, body, status, field, words):
    answer = clients[2].post("/api/translate", json={"sentences": ["we saw", "a box"], **body})
    assert answer.status_code == status and answer.json()["field"] == field
    assert words in answer.json()["error"]


def test_a_saved_model_describes_the_best_translation_only(clients):
    body = {"sentences": ["we saw"], "details": True, "nbest": 2}
    answer = clients[3].post("/api/translate", json=body)
    assert answer.status_code == 422 and answer.json()["field"] == "nbest"
    assert "best translation only" in answer.json()["error"]


# The guided signature's own cases: a prefix, a phrase of two words, one that cannot fit.
SIG_LINES = ["we saw the red box", "", "  I took a door  ", "the small boxes", "now then here"]
SIG_PREFIXES = ["", "", "you", "the green", ""]
SIG_CONSTRAINTS = [["doors", "small"], [], ["red box"], [], ["boxes", " ".join(["green"] * 30)]]


def test_guided_signature_equals_the_translator(exported):
    _, output_dir, path = exported
    translator = Translator.from_run(output_dir, **SEARCH)
    assert translator.calibration.sentences == 12
    guides = [Guide(p, tuple(c)) for p, c in zip(SIG_PREFIXES, SIG_CONSTRAINTS, strict=True)]
    found = translator.hypotheses(SIG_LINES, guides=guides, details=True)
    width = max(len(c) for c in SIG_CONSTRAINTS)
    table = [c + [""] * (width - len(c)) for c in SIG_CONSTRAINTS]
    signature = tf.saved_model.load(path).signatures[export.GUIDED_SIGNATURE]
    out = signature(
        inputs=tf.constant(SIG_LINES),
        prefixes=tf.constant(SIG_PREFIXES),
        constraints=tf.constant(table),
        **control_inputs(len(SIG_LINES)),
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


def test_guided_signature_refuses_too_many_constraints(exported):
    signature = tf.saved_model.load(exported[2]).signatures[export.GUIDED_SIGNATURE]
    table = [["box"] * (MAX_CONSTRAINTS + 1)]
    with pytest.raises(tf.errors.InvalidArgumentError, match="constraints: more than 64 per"):
        signature(
            inputs=tf.constant(["we"]),
            prefixes=tf.constant([""]),
            constraints=table,
            **control_inputs(1),
        )
    most = signature(
        inputs=tf.constant(["we"]),
        prefixes=tf.constant([""]),
        constraints=[[""] * 64],
        **control_inputs(1),
    )
    assert most["outputs"].shape == [1]


def test_constraint_caps_through_tf_servings_api(exported, clients):
    """t2t-serve's --max_constraints first; past it, the graph's own cap answers (TF Serving
    answers that one the same way: 400 with the op's words)."""

    def body(count: int) -> dict:
        columns = {"inputs": ["we"], "prefixes": [""], "constraints": [["box"] * count]}
        columns.update({name: [value] for name, value in OFF.items()})
        return {"signature_name": "guided", "inputs": columns}

    answer = clients[3].post("/v1/models/export:predict", json=body(17))
    expected = {"error": "constraints: 17 per sentence, more than --max_constraints=16"}
    assert (answer.status_code, answer.json()) == (400, expected)
    assert clients[3].post("/v1/models/export:predict", json=body(16)).status_code == 200
    many = dataclasses.replace(LIMITS, max_constraints=100)
    with TestClient(create_app(SavedModelBackend(exported[2]), many), base_url=LOCAL) as client:
        answer = client.post("/v1/models/export:predict", json=body(MAX_CONSTRAINTS + 1))
    assert answer.status_code == 400 and list(answer.json()) == ["error"]
    assert answer.json()["error"].startswith(
        "assertion failed: [constraints: more than 64 per sentence]"
    )


def test_graph_calibration_equals_numpy_interp():
    points = confidence.Calibration((-3.0, -2.0, -2.0, -0.5), (0.1, 0.3, 0.5, 0.8), 4)
    values = np.array([-5.0, -3.0, -2.5, -2.0, -1.9, -1.0, -0.5, 0.0], np.float32)
    got = calibrated(points, tf.constant(values)).numpy()
    np.testing.assert_allclose(got, [points([v]) for v in values], atol=1e-6)
    plain = calibrated(confidence.Calibration(), tf.constant(values)).numpy()
    np.testing.assert_allclose(plain, np.exp(values), rtol=1e-6)


CONTROLS = {"no_repeat_ngram_size": 1, "repetition_penalty": 1.5, "min_length": 4}


def test_guided_signature_controls_per_sentence_equal_the_translator(exported):
    """Controls on for some sentences, off for the others, in one call: each sentence gets
    what the Translator with those settings gives it."""
    _, output_dir, path = exported
    guides = [Guide(p, tuple(c)) for p, c in zip(SIG_PREFIXES, SIG_CONSTRAINTS, strict=True)]
    plain = Translator.from_run(output_dir, **SEARCH).hypotheses(SIG_LINES, guides=guides)
    controlled = Translator.from_run(output_dir, **SEARCH, **CONTROLS, disable_unk=True)
    found = controlled.hypotheses(SIG_LINES, guides=guides)
    width = max(len(c) for c in SIG_CONSTRAINTS)
    table = [c + [""] * (width - len(c)) for c in SIG_CONSTRAINTS]
    on = [True, False, True, False, True]
    given = {k: [v if row else OFF[k] for row in on] for k, v in CONTROLS.items()}
    signature = tf.saved_model.load(path).signatures[export.GUIDED_SIGNATURE]
    out = signature(
        inputs=tf.constant(SIG_LINES),
        prefixes=tf.constant(SIG_PREFIXES),
        constraints=tf.constant(table),
        **control_inputs(len(SIG_LINES), **given, disable_unk=on),
    )
    for i, row_on in enumerate(on):
        want = (found if row_on else plain)[i]
        text = out["outputs"][i].numpy().decode("utf-8")
        if not want:
            assert text == ""
            continue
        assert text == want[0].text
        assert float(out["scores"][i]) == pytest.approx(want[0].score, abs=1e-5)
    assert [h[0].text for h in found if h] != [h[0].text for h in plain if h]
    with pytest.raises(tf.errors.InvalidArgumentError, match="repetition_penalty: must be > 0"):
        signature(
            inputs=tf.constant(["we"]),
            prefixes=tf.constant([""]),
            constraints=tf.constant([[""]]),
            **control_inputs(1, repetition_penalty=[0.0]),
        )


def test_api_controls_from_a_run_and_a_saved_model(clients):
    """/api/translate takes the controls: a run answers as its Translator with them, a
    SavedModel the same through its guided signature."""
    output_dir, _, from_run, from_export = clients
    lines = [line for line in LINES if line]
    want = Translator.from_run(output_dir, **SEARCH, **CONTROLS).translate(lines)
    body = {"sentences": lines, "beam_size": 3, "alpha": 0.6, **CONTROLS}
    for client in (from_run, from_export):
        answer = client.post("/api/translate", json=body)
        assert answer.status_code == 200, answer.text
        assert [r["hypotheses"][0]["text"] for r in answer.json()["results"]] == want
        assert answer.json()["settings"]["min_length"] == 4
    # The page sends every control, at its default when untouched: the plain search.
    untouched = {"sentences": lines, **OFF, "repetition_penalty": 1}
    plain = Translator.from_run(output_dir, **SEARCH).translate(lines)
    assert plain != want
    for client in (from_run, from_export):
        answer = client.post("/api/translate", json=untouched)
        assert [r["hypotheses"][0]["text"] for r in answer.json()["results"]] == plain


@pytest.mark.parametrize(
    ("client", "route", "body", "field", "words"),
    [
        (2, "translate", {"repetition_penalty": 0.0}, "repetition_penalty", "must be a number > 0"),
        (2, "translate", {"min_length": -1}, "min_length", "min_length must be >= 0"),
        (2, "translate", {"disable_unk": "yes"}, "disable_unk", ""),
        (3, "translate", {"min_length": 2, "nbest": 2}, "nbest", "best translation only"),
        (3, "attention", {"min_length": 2}, "min_length", "/api/translate takes them"),
    ],
)
def test_bad_controls_name_the_field(clients, client, route, body, field, words):
    key = "sentence" if route == "attention" else "sentences"
    value = "we saw" if route == "attention" else ["we saw"]
    answer = clients[client].post(f"/api/{route}", json={key: value, **body})
    assert answer.status_code == 422 and answer.json()["field"] == field, answer.text
    assert words in answer.json()["error"]


def test_export_settings_fix_the_controls_into_the_text_signatures(exported):
    """t2t-export with the controls: serving_default searches with them (the functions the
    SavedModel saves, called before saving), and the sample signature's greedy draw too."""
    _, output_dir, _ = exported
    run = Run.restore(output_dir, search={**SEARCH, **CONTROLS})
    functions = export.ServingFunctions.from_run(run)
    lines = [line for line in LINES if line]
    found = functions.translate(tf.constant(lines))["outputs"].numpy()
    want = Translator.from_run(output_dir, **SEARCH, **CONTROLS).translate(lines)
    assert [text.decode("utf-8") for text in found] == want
    greedy = {**SEARCH, **CONTROLS, "sampling": True, "temperature": 0.0}
    functions = export.ServingFunctions.from_run(Run.restore(output_dir, search=greedy))
    sampled = functions.sample(tf.constant(lines), tf.constant(0))["outputs"].numpy()
    want = Translator.from_run(output_dir, **greedy).translate(lines)
    assert [text.decode("utf-8") for text in sampled] == want
