"""t2t-query against a loopback server that misbehaves each way: a body sent one byte a second
(--timeout is a deadline for the whole answer), an answer too large, JSON nested too deep, 503
while a model loads (retried, with backoff), and no server at all. Each ends in one line or,
once the server is back, in the right answer."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from t2t_lite.serve import query

GOOD = json.dumps({"predictions": [{"outputs": "ba", "scores": -1.0, "truncated": False}]})


class Misbehaving(BaseHTTPRequestHandler):
    """Answers each POST as `self.server.plan` says, one entry per request (the last repeats):
    "ok", "503", "slow" (a byte a second), "huge" (100 kB), "nested" (100,000 brackets)."""

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        plan = self.server.plan
        kind = plan.pop(0) if len(plan) > 1 else plan[0]
        self.server.seen.append(kind)
        status, body = 200, GOOD.encode()
        if kind == "503":
            status, body = 503, b'{"error": "Servable not found for request: Latest(demo)"}'
        elif kind == "huge":
            body = json.dumps({"predictions": ["x" * 100_000]}).encode()
        elif kind == "nested":
            body = b"[" * 100_000 + b"]" * 100_000
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if kind == "slow":
            for byte in body:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(1.0)
        else:
            self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Misbehaving)
    httpd.plan, httpd.seen = ["ok"], []
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    httpd.url = query.predict_url(f"127.0.0.1:{httpd.server_address[1]}", "demo")
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _post(server, **options):
    return query.post_json(server.url, {"instances": ["ab"]}, backoff=0.05, **options)


def test_timeout_is_a_deadline_for_a_body_that_trickles(server):
    server.plan = ["slow"]
    started = time.monotonic()
    with pytest.raises(query.ServingError, match=r"no answer within --timeout=2 s \(\d+ bytes"):
        _post(server, timeout=2.0)
    assert time.monotonic() - started < 3.5  # not the 70 s the body would take


def test_an_answer_over_the_limit_is_refused(server):
    server.plan = ["huge"]
    with pytest.raises(query.ServingError, match=r"100,\d+ bytes, over --max_answer_bytes"):
        _post(server, max_bytes=50_000)
    assert _post(server, max_bytes=200_000)["predictions"][0] == "x" * 100_000


def test_json_nested_too_deep_is_one_error(server):
    server.plan = ["nested"]
    with pytest.raises(query.ServingError, match="nested too deeply"):
        _post(server)


def test_503_is_retried_with_backoff_then_answered(server):
    server.plan = ["503", "503", "ok"]
    assert _post(server, retries=3)["predictions"][0]["outputs"] == "ba"
    assert server.seen == ["503", "503", "ok"]
    server.plan, server.seen = ["503"], []
    with pytest.raises(query.ServingError, match=r"HTTP 503: Servable not found .*\(3 attempts\)"):
        _post(server, retries=2)
    assert server.seen == ["503"] * 3


def test_no_server_is_retried_then_one_line():
    url = query.predict_url("127.0.0.1:9", "demo")  # the discard port: nothing listens
    with pytest.raises(query.ServingError, match=r"cannot reach .*\(2 attempts\)"):
        query.post_json(url, {"instances": ["a"]}, retries=1, backoff=0.05)


def test_t2t_query_reports_each_in_one_line(server):
    server.plan = ["nested"]
    done = subprocess.run(
        [sys.executable, "-m", "t2t_lite.bin.t2t_query", f"--server={server.url.split('/v1')[0]}",
         "--model=demo", "--retries=0"],
        input=b"ab\n", capture_output=True, timeout=120,
    )  # fmt: skip
    err = done.stderr.decode().strip().splitlines()
    assert done.returncode == 2 and len(err) == 1, err
    assert "nested too deeply" in err[0] and "Traceback" not in done.stderr.decode()
