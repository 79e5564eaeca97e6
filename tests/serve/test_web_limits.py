"""What t2t-serve refuses before any work and how much work it runs at once: one limiter
(--max_concurrent) for every route that searches or scores, the body limit counted on the bytes
read (chunked or not), the Host allow-list against DNS rebinding, and JSON for all of it."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import types

import pytest
import serve_helpers
from fastapi.testclient import TestClient
from tf_serving_helpers import ToySignature

from t2t_lite.serve.web.api import Limits
from t2t_lite.serve.web.app import create_app
from t2t_lite.serve.web.guards import host_name

LOCAL = "http://localhost"
TREE = "(S (NN a))"


class BlockingExport(serve_helpers.BlockingBackend):
    """A blocking backend with an export: TF Serving's :predict (model "toy") blocks too,
    then echoes its inputs. It says it streams, so that /api/translate_stream reaches the gate."""

    capabilities = dataclasses.replace(serve_helpers.BlockingBackend.capabilities, streams=True)

    def __init__(self):
        super().__init__()
        signature = ToySignature(self._echo)
        self.exported = types.SimpleNamespace(
            signatures={"serving_default": signature}, path="/models/toy/1"
        )
        self.model_name = "toy"

    def _echo(self, columns: dict) -> dict:
        self.started.release()
        self.release.wait(30)
        return {"outputs": columns["inputs"]}


def test_one_limiter_for_every_route_that_searches_or_scores():
    backend = BlockingExport()
    with TestClient(create_app(backend, Limits(max_concurrent=2)), base_url=LOCAL) as client:
        answers = {}
        requests = {
            "translate": ("/api/translate", {"sentences": ["a"]}),
            "predict": ("/v1/models/toy:predict", {"instances": ["a", "b"]}),
        }

        def post(name):
            path, body = requests[name]
            answers[name] = client.post(path, json=body)

        threads = [threading.Thread(target=post, args=(name,)) for name in requests]
        for thread in threads:
            thread.start()
        for _ in threads:  # both hold a slot, blocked in their worker threads
            assert backend.started.acquire(timeout=30)
        # The event loop is free: what does not search answers at once.
        assert client.get("/api/info").status_code == 200
        assert client.get("/v1/models/toy").status_code == 200
        busy = "busy: 2 requests are running (--max_concurrent=2); try again in a moment"
        for path, body in [
            ("/api/translate", {"sentences": ["a"]}),
            ("/api/evalb", {"gold": TREE, "test": TREE}),
            ("/api/document", {"text": "a", "stream": False}),
            ("/api/translate_stream", {"sentence": "a"}),
        ]:
            answer = client.post(path, json=body)
            assert (answer.status_code, answer.json()) == (429, {"error": busy, "field": None})
        answer = client.post("/v1/models/toy:predict", json={"instances": ["c"]})
        assert (answer.status_code, answer.json()) == (429, {"error": busy})  # TF Serving's shape
        backend.release.set()
        for thread in threads:
            thread.join(30)
        assert answers["translate"].status_code == 200
        assert answers["predict"].json() == {"predictions": ["a", "b"]}
        evalb = client.post("/api/evalb", json={"gold": TREE, "test": TREE})
        assert evalb.status_code == 200 and evalb.json()["f1"] == 100.0


def chunks(total: int, size: int = 1000):
    """A body of `total` bytes sent in pieces, without a Content-Length (chunked)."""
    for start in range(0, total, size):
        yield b" " * min(size, total - start)


@pytest.mark.parametrize(
    ("path", "shape"),
    [("/api/translate", {"error", "field"}), ("/v1/models/toy:predict", {"error"})],
)
def test_a_chunked_body_beyond_the_limit_gets_413(path, shape):
    backend, limits = BlockingExport(), Limits(max_sentences=2, max_characters=10)
    with TestClient(create_app(backend, limits), base_url=LOCAL) as client:
        answer = client.post(path, content=chunks(limits.max_body_bytes + 1))
        assert answer.status_code == 413 and set(answer.json()) == shape, answer.text
        assert f"{limits.max_body_bytes} bytes" in answer.json()["error"]
        assert answer.json().get("field", "body") == "body"
        assert not backend.started.acquire(blocking=False)  # nothing ran
        within = client.post(
            path, content=chunks(100), headers={"Content-Type": "application/json"}
        )
        assert within.status_code in (400, 422)  # read whole, then refused as not JSON


def asgi_request(app, headers: list[tuple[bytes, bytes]], body_chunks: list[bytes]):
    """Sends one POST /api/translate to the ASGI `app` directly; returns (status, body, how many
    of `body_chunks` the app read)."""
    sent, read = [], [0]

    async def receive():
        if read[0] < len(body_chunks):
            read[0] += 1
            more = read[0] < len(body_chunks)
            return {"type": "http.request", "body": body_chunks[read[0] - 1], "more_body": more}
        await asyncio.sleep(3600)  # the client waits for an answer

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/api/translate", "raw_path": b"/api/translate",
        "query_string": b"", "root_path": "", "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8080), "headers": [(b"host", b"localhost"), *headers],
    }  # fmt: skip
    asyncio.run(asyncio.wait_for(app(scope, receive, send), 30))
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, body, read[0]


def test_reading_stops_at_the_limit():
    limits = Limits(max_sentences=2, max_characters=10)
    app = create_app(serve_helpers.BlockingBackend(), limits)
    pieces = [b" " * 1000] * 1000  # 1 MB, chunked
    status, body, read = asgi_request(app, [(b"transfer-encoding", b"chunked")], pieces)
    assert status == 413 and json.loads(body)["field"] == "body"
    assert read == limits.max_body_bytes // 1000 + 1  # not one piece past the limit


def test_a_content_length_that_is_not_a_number_gets_json():
    app = create_app(serve_helpers.BlockingBackend())
    status, body, _ = asgi_request(app, [(b"content-length", b"12abc")], [b'{"a": 1}'])
    assert status == 400
    assert (
        body == b'{"error": "Content-Length: \'12abc\' is not a number", "field": "Content-Length"}'
    )


@pytest.mark.parametrize(
    ("allowed", "host", "served"),
    [
        ((), "localhost", True),
        ((), "localhost:8080", True),
        ((), "LOCALHOST:8080", True),
        ((), "127.0.0.1:8080", True),
        ((), "[::1]:8080", True),
        ((), "attacker.example", False),  # a DNS name rebound to 127.0.0.1
        ((), "attacker.example:8080", False),
        ((), "127.0.0.1.attacker.example", False),
        ((), "", False),
        (("translate.lan",), "translate.lan:443", True),
        (("translate.lan",), "other.lan", False),
        (("10.0.0.5",), "10.0.0.5:8080", True),
        (("*",), "anything.example", True),
    ],
)
def test_host_allow_list(allowed, host, served):
    app = create_app(BlockingExport(), allowed_hosts=allowed)
    with TestClient(app, base_url=LOCAL) as client:
        for path in ("/api/info", "/", "/v1/models/toy"):
            answer = client.get(path, headers={"Host": host})
            if served:
                assert answer.status_code == 200, (path, answer.text)
                continue
            assert answer.status_code == 400, (path, answer.text)
            error = answer.json()["error"]
            assert error.startswith(f"Host: {host!r} is not one of this server's names")
            assert "--allowed_hosts" in error
            shape = {"error"} if path.startswith("/v1/") else {"error", "field"}
            assert set(answer.json()) == shape and answer.json().get("field", "Host") == "Host"


def test_host_names_lose_their_port_and_brackets():
    assert [host_name(h) for h in ("[::1]:8080", "::1", "Example.org:80", "[fe80::1]")] == [
        "::1", "::1", "example.org", "fe80::1"
    ]  # fmt: skip
