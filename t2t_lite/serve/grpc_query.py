"""A gRPC client for TF Serving: `PredictionService.Predict` from `tensorflow-serving-api`.

A request holds the model's name, signature and optional version, and the batch as a string
tensor "inputs" [batch]; the answer maps each output name to a tensor whose first axis is the
batch ("outputs" [batch] or [batch, n], "scores", "truncated"). `GrpcPredictor` turns the answer
into the rows the REST client yields (`t2t_lite.serve.query`), so both protocols share the
batching, the n-best lines, the truncation reports and every check.

Every call has a deadline (`timeout`). A call answered UNAVAILABLE (no server yet, a restart) is
retried `retries` times, waiting `backoff` seconds, doubled each time up to MAX_BACKOFF. Any
other gRPC status is a `ServingError` naming the server and the status at once.

The tensor protos live in the `tensorflow` package, so this module imports TensorFlow (the REST
client does not).
"""

from __future__ import annotations

import time
from typing import Any

import grpc
import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from t2t_lite.serve.query import ServingError

DEFAULT_SERVER = "localhost:8500"
MAX_BACKOFF = 8.0
# TF Serving's own limit on a message; gRPC's default of 4 MB is small for long n-best lists.
MAX_MESSAGE_BYTES = 1 << 30


def grpc_target(server: str | None) -> str:
    """host:port for grpc.insecure_channel ("grpc://" or "http://" prefixes are dropped)."""
    target = (server or DEFAULT_SERVER).strip().rstrip("/")
    for prefix in ("grpc://", "http://"):
        target = target.removeprefix(prefix)
    if not target or "/" in target:
        raise ValueError(f"--server for gRPC must be host:port, got {server!r}")
    return target


def predict_request(
    texts: list[str], model: str, version: int | None = None, signature_name: str | None = None
) -> predict_pb2.PredictRequest:
    """The PredictRequest of a batch of texts: inputs "inputs", a string tensor [batch]."""
    if not model:
        raise ValueError("--model must name the served model (TF Serving's MODEL_NAME)")
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = signature_name or "serving_default"
    if version is not None:
        request.model_spec.version.value = version
    inputs = tf.make_tensor_proto(np.array([t.encode("utf-8") for t in texts], dtype=object))
    inputs.tensor_shape.dim[0].size = len(texts)  # an empty batch keeps its shape [0]
    request.inputs["inputs"].CopyFrom(inputs)
    return request


def _python(value: Any) -> Any:
    """A NumPy value of one row --> JSON-like Python: str (UTF-8 text), float, bool, lists."""
    if isinstance(value, np.ndarray):
        return [_python(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value.item() if isinstance(value, np.generic) else value


def response_rows(response: predict_pb2.PredictResponse, expected: int) -> list[dict[str, Any]]:
    """One dict of outputs per input from a PredictResponse (each output's first axis is the
    batch); a ServingError when an output has another count."""
    columns = {name: tf.make_ndarray(proto) for name, proto in response.outputs.items()}
    if not columns:
        raise ServingError("the answer has no outputs")
    for name, values in columns.items():
        count = values.shape[0] if values.ndim else 1
        if count != expected:
            raise ServingError(f"sent {expected} inputs but got {count} answers (output {name})")
    return [{name: _python(values[i]) for name, values in columns.items()} for i in range(expected)]


class GrpcPredictor:
    """A `query.Predictor` over TF Serving's gRPC API: texts --> one outputs dict per text."""

    def __init__(
        self,
        server: str | None,
        model: str,
        version: int | None = None,
        signature_name: str | None = None,
        timeout: float = 60.0,
        retries: int = 3,
        backoff: float = 0.5,
    ):
        if timeout <= 0 or retries < 0 or backoff < 0:
            raise ValueError(
                f"need --timeout > 0 and --retries >= 0, got timeout={timeout}, retries={retries}"
            )
        predict_request([], model)  # checks the model name now
        self.target = grpc_target(server)
        self.model, self.version, self.signature_name = model, version, signature_name
        self.timeout, self.retries, self.backoff = timeout, retries, backoff
        options = [
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ]
        self.channel = grpc.insecure_channel(self.target, options=options)
        self.stub = prediction_service_pb2_grpc.PredictionServiceStub(self.channel)

    def __call__(self, texts: list[str]) -> list[dict[str, Any]]:
        request = predict_request(texts, self.model, self.version, self.signature_name)
        return response_rows(self._predict(request), len(texts))

    def _predict(self, request: predict_pb2.PredictRequest) -> predict_pb2.PredictResponse:
        """Predict with the deadline, retrying UNAVAILABLE with a doubling wait."""
        wait = self.backoff
        for attempt in range(self.retries + 1):
            try:
                return self.stub.Predict(request, timeout=self.timeout)
            except grpc.RpcError as error:
                code, details = error.code(), error.details()
                if code != grpc.StatusCode.UNAVAILABLE or attempt == self.retries:
                    raise ServingError(self._message(code, details, attempt + 1)) from None
            time.sleep(wait)
            wait = min(2 * wait, MAX_BACKOFF)
        raise AssertionError("unreachable")

    def _message(self, code: grpc.StatusCode, details: str | None, attempts: int) -> str:
        details = " ".join((details or "").split())  # one line
        if code == grpc.StatusCode.UNAVAILABLE:
            tries = f"{attempts} attempt{'s' if attempts > 1 else ''}"
            return f"cannot reach {self.target} (gRPC UNAVAILABLE, {tries}): {details}"
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return f"{self.target}: no answer within --timeout={self.timeout:g} s"
        return f"{self.target}: gRPC {code.name}: {details}"

    def close(self) -> None:
        self.channel.close()
