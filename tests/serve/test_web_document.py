"""t2t-serve's /api/document on a training run (FastAPI's TestClient): server-sent events in
order, whose paragraphs and document equal `Translator.translate_document`'s; the JSON answer
without streaming; bad input named; a SavedModel's backend through its guided signature. The
page's document panel in headless Chromium is in test_web_browser.py."""

from __future__ import annotations

import pytest
import serve_helpers
from fastapi.testclient import TestClient
from serve_helpers import server_events

from t2t_lite.decode.guidance import Terminology
from t2t_lite.decode.translator import Translator
from t2t_lite.document.markup import MAX_NESTING
from t2t_lite.run.run import Run
from t2t_lite.run.run_flags import RunFlags
from t2t_lite.serve.web.api import Limits
from t2t_lite.serve.web.app import create_app
from t2t_lite.serve.web.server import load_backend

LIMITS = Limits(max_sentences=4, max_characters=100, max_concurrent=1, max_beam_size=6)
DOCUMENT = "# we saw <b>the box</b>\n\nthe red door. we took <i>a</i> box here.\n- the {name}\n"


@pytest.fixture(autouse=True)
def _seed():
    """No reseeding: it would drop the module's SentencePiece resources (serve_helpers)."""
    yield


@pytest.fixture(scope="module")
def output_dir(tmp_path_factory):
    return serve_helpers.text_run(tmp_path_factory.mktemp("web_document"))


@pytest.fixture(scope="module")
def client(output_dir):
    with serve_helpers.run_client(output_dir, LIMITS) as client:
        yield client


def test_a_document_streams_sentence_by_sentence(client, output_dir):
    answer = client.post("/api/document", json={"text": DOCUMENT, "beam_size": 2})
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/event-stream")
    events = server_events(answer.text)
    names = [name for name, _ in events]
    assert names[0] == "start" and names[-1] == "done"
    start = events[0][1]
    assert start["paragraphs"] == [
        "we saw <b>the box</b>",
        "the red door. we took <i>a</i> box here.",
        "the {name}",
    ]
    sentences = [data for name, data in events if name == "sentence"]
    assert [s["index"] for s in sentences] == list(range(start["sentences"])) == [0, 1, 2, 3]
    assert [s["source"] for s in sentences] == [
        "we saw the box", "the red door.", "we took a box here.", "the",
    ]  # fmt: skip
    translator = Translator.from_run(output_dir, beam_size=2)
    assert [s["translation"] for s in sentences] == translator.translate(
        [s["source"] for s in sentences]
    )
    expected = translator.translate_document(DOCUMENT)
    assert events[-1][1]["document"] == expected
    paragraphs = {data["paragraph"]: data["text"] for name, data in events if name == "paragraph"}
    assert expected == f"# {paragraphs[0]}\n\n{paragraphs[1]}\n- {paragraphs[2]}\n"
    assert "<b>" in paragraphs[0] and "</b>" in paragraphs[0] and "{name}" in paragraphs[2]


def test_without_streaming_the_answer_is_the_document(client, output_dir):
    answer = client.post("/api/document", json={"text": DOCUMENT, "stream": False})
    assert answer.status_code == 200
    translator = Translator.from_run(Run.restore(output_dir))
    assert answer.json()["document"] == translator.translate_document(DOCUMENT)


def test_a_document_takes_terminology_as_its_sentences_do(client, output_dir):
    """Each sentence with a source term is held to its target term, as the same sentence
    with that constraint through /api/translate's path (the Translator)."""
    body = {"text": DOCUMENT, "beam_size": 2, "terminology": [["box", "door"]]}
    events = server_events(client.post("/api/document", json=body).text)
    sentences = [data for name, data in events if name == "sentence"]
    translator = Translator.from_run(output_dir, beam_size=2)
    sources = [s["source"] for s in sentences]
    constraints = [["door"] if "box" in source.split() else [] for source in sources]
    assert constraints == [["door"], [], ["door"], []]
    expected = translator.translate(sources, constraints=constraints)
    assert [s["translation"] for s in sentences] == expected
    assert all("door" in e.split() for e, c in zip(expected, constraints, strict=True) if c)
    assert expected != translator.translate(sources)
    terms = Terminology([("box", "door")])
    assert events[-1][1]["document"] == translator.translate_document(DOCUMENT, terminology=terms)


@pytest.mark.parametrize(
    "body, status, field",
    [
        ({"text": " \n "}, 422, "text"),
        ({"text": "x" * 401}, 413, "text"),
        ({"text": "a b", "nbest": 2, "beam_size": 2}, 422, "nbest"),
        ({"text": "a b", "stream": "yes"}, 422, "stream"),
        ({"text": "a b", "terminology": [["box"]]}, 422, "terminology[0]"),
        ({"text": "a b", "terminology": [["box", "x" * 101]]}, 413, "terminology[0][1]"),
        # more pairs than 4 sentences x 16 constraints
        ({"text": "a b", "terminology": [["a", "b"]] * 65}, 413, "terminology"),
        ({"text": "a b", "terminology": [["a", "b"]], "sampling": "seed:1"}, 422, "terminology"),
    ],
)
def test_bad_documents_are_named(client, body, status, field):
    answer = client.post("/api/document", json=body)
    assert answer.status_code == status, answer.text
    assert answer.json()["field"] == field


MARKDOWN = 'we saw **the box** and *a [red door](https://x.org/a_b "Door")* `{x} <b>` here\n'


def test_markdown_marks_come_back_as_from_python(client, output_dir):
    """The page's API keeps Markdown's marks as `Translator.translate_document` does (held
    there to each mark once, nested as in the source): the link's destination and the code
    span byte for byte."""
    answer = client.post("/api/document", json={"text": MARKDOWN, "stream": False})
    assert answer.status_code == 200, answer.text
    found = answer.json()["document"]
    assert found == Translator.from_run(Run.restore(output_dir)).translate_document(MARKDOWN)
    for mark, count in (("**", 2), ('](https://x.org/a_b "Door")', 1), ("`{x} <b>`", 1)):
        assert found.count(mark) == count, found
    assert found.count("*") == 6 and found.count("[") == 1


def test_markup_nested_too_deep_is_a_422_streamed_or_not(output_dir):
    """1,000 nested tags (7 KB): refused by line before any event, streamed or not, and the
    one slot is free again for the next document (a `>` quoted in an attribute)."""
    deep = "we saw\n\nthe " + "<b>" * 1000 + "box" + "</b>" * 1000 + "\n"
    limits = Limits(max_sentences=4, max_characters=2500, max_concurrent=1, max_beam_size=6)
    quoted = 'we saw <a title="x>y">the box</a> here\n'
    with TestClient(
        create_app(load_backend(RunFlags(output_dir)), limits), base_url="http://localhost"
    ) as client:
        for stream in (False, True):
            answer = client.post("/api/document", json={"text": deep, "stream": stream})
            assert answer.status_code == 422, answer.text
            assert answer.json() == {
                "field": "text",
                "error": f"text:3: markup nested more than {MAX_NESTING} levels deep (at "
                "'<b>'); flatten it",
            }
        answer = client.post("/api/document", json={"text": quoted, "stream": False})
    assert answer.status_code == 200, answer.text
    found = answer.json()["document"]
    assert found == Translator.from_run(Run.restore(output_dir)).translate_document(quoted)
    assert found.count('<a title="x>y">') == found.count("</a>") == 1
    assert found.index('<a title="x>y">') < found.index("</a>")


@pytest.mark.slow  # an export: about 40 s
def test_a_savedmodel_translates_a_document_as_its_run(output_dir, tmp_path):
    """Through the export's guided signature: the same translations and alignments, so the
    same document, in t2t-serve and from Python, with terminology too."""
    from t2t_lite.serve import export

    run = Run.restore(output_dir, search={"beam_size": 2})
    export.export_run(run, str(tmp_path / "export"), version=1)
    backend = load_backend(export_dir=str(tmp_path / "export"))
    with TestClient(create_app(backend, LIMITS), base_url="http://localhost") as client:
        answer = client.post("/api/document", json={"text": DOCUMENT, "stream": False})
    assert answer.status_code == 200, answer.text
    expected = Translator.from_run(output_dir, beam_size=2).translate_document(DOCUMENT)
    assert answer.json()["document"] == expected
    exported = Translator.from_run(str(tmp_path / "export"))  # the Python API over an export
    assert exported.translate_document(DOCUMENT) == expected
    # Terminology through the guided signature: the run's document under the same terms.
    terms = Terminology([("box", "door")])
    held = Translator.from_run(output_dir, beam_size=2).translate_document(
        DOCUMENT, terminology=terms
    )
    assert held != expected
    assert exported.translate_document(DOCUMENT, terminology=terms) == held
    with TestClient(create_app(backend, LIMITS), base_url="http://localhost") as client:
        body = {"text": DOCUMENT, "stream": False, "terminology": [["box", "door"]]}
        answer = client.post("/api/document", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["document"] == held
