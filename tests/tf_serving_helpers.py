"""t2t-serve's TF Serving REST API (t2t_lite/serve/web/tf_serving.py) on 127.0.0.1 for the
t2t-query tests: `serving(signatures, "demo")` serves the real routes under uvicorn in this
process, over a SavedModel's signatures or over `ToySignature`s, Python models that record what
they were sent; `t2t_serve(flags)` runs the command itself.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator

import tensorflow as tf
import uvicorn
from fastapi import FastAPI

from t2t_lite.serve.web import server, tf_serving


class ToySignature:
    """A signature called as a SavedModel's is (a [batch] string tensor `inputs` in, a dict of
    tensors out), computed by `fn(columns: {"inputs": [str]}) -> {output: list}`; each call's
    input strings are kept in `calls`."""

    def __init__(self, fn: Callable[[dict[str, list]], dict[str, list]]):
        self.fn = fn
        self.structured_input_signature = ((), {"inputs": tf.TensorSpec([None], tf.string)})
        self.calls: list[list[str]] = []

    def __call__(self, inputs: tf.Tensor) -> dict[str, tf.Tensor]:
        texts = [b.decode("utf-8") for b in inputs.numpy()]
        self.calls.append(texts)
        return {k: tf.constant(v) for k, v in self.fn({"inputs": texts}).items()}


@contextlib.contextmanager
def serving(signatures: dict, name: str, version: str = "1") -> Iterator[str]:
    """Serves `signatures` as model `name` at `version`; yields the server's URL."""
    exported = types.SimpleNamespace(signatures=signatures, path=f"/models/{name}/{version}")
    app = FastAPI()
    app.include_router(tf_serving.router(tf_serving.ServedModel(exported, name, 1000)))
    sock = server.listen("127.0.0.1", 0)
    uv = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not uv.started and thread.is_alive():
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        uv.should_exit = True
        thread.join(timeout=10)
        sock.close()


@contextlib.contextmanager
def t2t_serve(*flags: str) -> Iterator[str]:
    """`t2t-serve --port=0 ...` in a process of its own; yields its URL once it serves."""
    command = [os.path.join(os.path.dirname(sys.executable), "t2t-serve"), "--port=0", *flags]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()  # "t2t-serve: http://127.0.0.1:PORT/ (API: ...)"
        if not line.startswith("t2t-serve: http://"):
            process.kill()
            raise AssertionError(f"t2t-serve did not start: {process.stderr.read()[-3000:]}")
        yield line.split()[1].rstrip("/")
    finally:
        process.terminate()
        process.communicate(timeout=60)


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
