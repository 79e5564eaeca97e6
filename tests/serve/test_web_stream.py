"""t2t-serve's /api/translate_stream on a training run (FastAPI's TestClient): server-sent
events whose texts join to /api/translate's translation, a token each under greedy settings and
the whole translation under beam search; bad input refused in JSON before any event. A
SavedModel's refusal: test_web_saved_model.py; the route's slot in the one limiter:
test_web_limits.py."""

from __future__ import annotations

import pytest
import serve_helpers
from serve_helpers import server_events

from t2t_lite.serve.web.api import Limits

LIMITS = Limits(max_sentences=4, max_characters=100, max_concurrent=1, max_beam_size=6)
GREEDY = {"beam_size": 1, "alpha": 0.0}


@pytest.fixture(autouse=True)
def _seed():
    """No reseeding: it would drop the module's SentencePiece resources (serve_helpers)."""
    yield


@pytest.fixture(scope="module")
def output_dir(tmp_path_factory):
    return serve_helpers.text_run(tmp_path_factory.mktemp("web_stream"))


@pytest.fixture(scope="module")
def client(output_dir):
    with serve_helpers.run_client(output_dir, LIMITS) as client:
        yield client


def best(client, sentence: str, **search) -> dict:
    answer = client.post("/api/translate", json={"sentences": [sentence], **search})
    assert answer.status_code == 200, answer.text
    return answer.json()["results"][0]


@pytest.mark.parametrize("alpha", [0.0, 1.0])  # one beam is greedy search at any alpha
@pytest.mark.parametrize("sentence", [*serve_helpers.sentences(3, seed=8), " ".join(["a"] * 30)])
def test_greedy_settings_stream_a_token_at_a_time(client, sentence, alpha):
    greedy = {**GREEDY, "alpha": alpha}
    answer = client.post("/api/translate_stream", json={"sentence": f" {sentence} ", **greedy})
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/event-stream")
    events = server_events(answer.text)
    names = [name for name, _ in events]
    assert names[0] == "start" and names[-1] == "done" and set(names[1:-1]) <= {"text"}
    expected = best(client, sentence, **greedy)
    start, done = events[0][1], events[-1][1]
    assert start == {"source": sentence, "truncated": expected["truncated"], "by_token": True}
    texts = [data["text"] for name, data in events if name == "text"]
    assert "".join(texts) == done["translation"] == expected["hypotheses"][0]["text"]
    assert len(texts) > 1 and all(texts)
    assert done["score"] == pytest.approx(expected["hypotheses"][0]["score"], abs=1e-4)
    assert done["settings"]["beam_size"] == 1 and done["settings"]["alpha"] == alpha


def test_beam_search_streams_the_whole_translation(client):
    sentence = serve_helpers.sentences(1, seed=9)[0]
    answer = client.post("/api/translate_stream", json={"sentence": sentence, "beam_size": 3})
    events = server_events(answer.text)
    expected = best(client, sentence, beam_size=3)["hypotheses"][0]
    assert [name for name, _ in events] == ["start", "text", "done"]
    assert events[0][1]["by_token"] is False
    assert events[1][1]["text"] == events[2][1]["translation"] == expected["text"]
    assert events[2][1]["score"] == pytest.approx(expected["score"], abs=1e-5)


def test_an_empty_sentence_is_done_at_once(client):
    events = server_events(client.post("/api/translate_stream", json={"sentence": "  "}).text)
    assert [name for name, _ in events] == ["start", "done"]
    assert events[0][1] == {"source": "", "truncated": False, "by_token": False}
    assert (events[1][1]["translation"], events[1][1]["score"]) == ("", 0.0)


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"sentence": "x" * 101}, 413, "sentence"),
        ({"sentence": 3}, 422, "sentence"),
        ({"sentences": ["we"]}, 422, "sentence"),
        ({"sentence": "we", "beam_size": 2, "nbest": 2}, 422, "nbest"),
        ({"sentence": "we", "beam_size": 0}, 422, "beam_size"),
        ({"sentence": "we", "adapter": "calc"}, 422, "adapter"),
    ],
)
def test_bad_requests_get_json_before_any_event(client, body, status, field):
    answer = client.post("/api/translate_stream", json=body)
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["field"] == field and answer.json()["error"]
