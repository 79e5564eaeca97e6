"""A loopback stand-in for TF Serving's REST predict API, for testing t2t-query.

It speaks the documented protocol (https://www.tensorflow.org/tfx/serving/api_rest):
POST /v1/models/NAME[/versions/N]:predict with {"signature_name": ..., "instances": [...]}
(rows) or {"inputs": ...} (columns); answers {"predictions": [...]} or {"outputs": ...}, a bare
list or value in place of a dict when the signature has a single output, and {"error": ...}
with HTTP 400 (bad request) or 404 (unknown model or signature). Signatures are Python
functions over columns, or the signatures of a SavedModel loaded in the test.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

# A signature: (its input names, fn(columns: {input: list}) -> {output: list}).
Signature = tuple[list[str], Callable[[dict[str, list]], dict[str, list]]]
_PATH = re.compile(r"^/v1/models/([^/:]+)(?:/versions/(\d+))?:predict$")


def saved_model_signatures(loaded: Any) -> dict[str, Signature]:
    """The signatures of a `tf.saved_model.load`ed model as stand-in signatures."""
    import tensorflow as tf

    def wrap(function):
        names = sorted(function.structured_input_signature[1])
        specs = function.structured_input_signature[1]

        def call(columns: dict[str, list]) -> dict[str, list]:
            feeds = {n: tf.constant(columns[n], dtype=specs[n].dtype) for n in names}
            return {k: _to_json(v.numpy()) for k, v in function(**feeds).items()}

        return names, call

    return {name: wrap(fn) for name, fn in loaded.signatures.items()}


def _to_json(array: np.ndarray) -> list:
    if array.dtype == object:  # tf.string: TF Serving sends UTF-8 text
        return np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(array).tolist()
    return array.tolist()


class StandIn:
    """`with StandIn({"name": {"serving_default": signature}}) as url:` serves on 127.0.0.1.

    Every request is recorded in `requests` as (path, body) and its answer in `responses`.
    """

    def __init__(self, models: dict[str, dict[str, Signature]]):
        self.models = models
        self.requests: list[tuple[str, Any]] = []
        self.responses: list[tuple[int, Any]] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802  (the name http.server calls)
                length = int(self.headers.get("Content-Length", 0))
                status, answer = stand_in.answer(self.path, self.rfile.read(length))
                data = json.dumps(answer).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):  # keep test output quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> str:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self.url

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, path: str, raw: bytes) -> tuple[int, Any]:
        try:
            body = json.loads(raw)
        except ValueError as error:
            status, answer = 400, {"error": f"JSON Parse error: {error}"}
        else:
            self.requests.append((path, body))
            status, answer = self._predict(path, body)
        self.responses.append((status, answer))
        return status, answer

    def _predict(self, path: str, body: Any) -> tuple[int, Any]:
        match = _PATH.match(path)
        if not match or match.group(1) not in self.models:
            return 404, {"error": f"Servable not found for request: {path}"}
        signatures = self.models[match.group(1)]
        name = body.get("signature_name", "serving_default")
        if name not in signatures:
            return 404, {"error": f'Serving signature name: "{name}" not found in signature def'}
        inputs, fn = signatures[name]
        rows = "instances" in body
        if rows == ("inputs" in body):
            return 400, {"error": "Missing 'inputs' or 'instances' key"}
        try:
            columns = _columns(body, inputs, rows)
            outputs = fn(columns)
        except (KeyError, TypeError, ValueError) as error:
            return 400, {"error": str(error)}
        if rows:
            count = len(next(iter(outputs.values())))
            predictions = [{k: v[i] for k, v in outputs.items()} for i in range(count)]
            if len(outputs) == 1:
                predictions = [next(iter(p.values())) for p in predictions]
            return 200, {"predictions": predictions}
        return 200, {"outputs": outputs if len(outputs) > 1 else next(iter(outputs.values()))}


def _columns(body: dict, inputs: list[str], rows: bool) -> dict[str, list]:
    """The request's inputs as {input name: list over the batch}."""
    if rows:
        instances = body["instances"]
        if instances and isinstance(instances[0], dict):
            return {n: [row[n] for row in instances] for n in inputs}
        if len(inputs) != 1:
            raise ValueError(f"instances without names, but the signature has inputs {inputs}")
        return {inputs[0]: instances}
    given = body["inputs"]
    if isinstance(given, dict):
        return {n: given[n] for n in inputs}
    if len(inputs) != 1:
        raise ValueError(f"inputs without names, but the signature has inputs {inputs}")
    return {inputs[0]: given}


def toy_reverse(columns: dict[str, list]) -> dict[str, list]:
    """A toy serving_default for protocol tests: each input reversed, score -length,
    truncated when longer than 10 characters."""
    texts = columns["inputs"]
    return {
        "outputs": [t[::-1] for t in texts],
        "scores": [-float(len(t)) for t in texts],
        "truncated": [len(t) > 10 for t in texts],
    }


def toy_nbest(columns: dict[str, list]) -> dict[str, list]:
    """A toy nbest signature: two hypotheses per input (reversed, upper case)."""
    texts = columns["inputs"]
    return {
        "outputs": [[t[::-1], t.upper()] for t in texts],
        "scores": [[-1.0, -2.5] for _ in texts],
        "truncated": [False for _ in texts],
    }
