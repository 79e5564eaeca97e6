"""Prefixes, constraints and details through t2t-serve's API: a run and its SavedModel answer
as t2t-decode --output_format=jsonl writes, and bad requests get a 422 naming the field."""

from __future__ import annotations

import json

import pytest
import serve_helpers
from fastapi.testclient import TestClient

from t2t_lite.decode.runner import DecodeConfig, run_decode
from t2t_lite.run.run import Run
from t2t_lite.serve import export
from t2t_lite.serve.web.api import Limits
from t2t_lite.serve.web.app import create_app
from t2t_lite.serve.web.run_backend import RunBackend
from t2t_lite.serve.web.saved_model_backend import SavedModelBackend

SEARCH = {"beam_size": 3, "alpha": 0.6, "extra_length": 6}
LINES = ["we saw the red box", "", "I took a door", "the small boxes now"]
PREFIXES = ["", "", "you", "the green"]
CONSTRAINTS = [["doors"], [], ["red box", "then"], []]
LIMITS = Limits(max_sentences=8, max_characters=80, max_concurrent=2, max_beam_size=6)


@pytest.fixture(autouse=True)
def _seed():
    """No reseeding: it would drop the module's SentencePiece resources (serve_helpers)."""
    yield


@pytest.fixture(scope="module")
def clients(tmp_path_factory):
    root = tmp_path_factory.mktemp("web_guided")
    output_dir = serve_helpers.text_run(root)
    run = Run.restore(output_dir, search=SEARCH)
    path, _ = export.export_run(run, str(root / "export"))
    with (
        TestClient(create_app(RunBackend(run), LIMITS)) as from_run,
        TestClient(create_app(SavedModelBackend(path), LIMITS)) as from_export,
    ):
        yield output_dir, root, from_run, from_export


def _decoded(output_dir, root) -> list[dict]:
    (root / "in.txt").write_text("\n".join(LINES) + "\n")
    (root / "prefix.txt").write_text("\n".join(PREFIXES) + "\n")
    (root / "c.tsv").write_text("\n".join("\t".join(c) for c in CONSTRAINTS) + "\n")
    config = DecodeConfig(
        output_dir,
        decode_from_file=str(root / "in.txt"),
        decode_to_file=str(root / "out.jsonl"),
        prefix_file=str(root / "prefix.txt"),
        constraints_file=str(root / "c.tsv"),
        output_format="jsonl",
        **SEARCH,
    )
    run_decode(config)
    lines = (root / "out.jsonl").read_text().splitlines()
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
