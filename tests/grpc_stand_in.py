"""A loopback stand-in for TF Serving's gRPC PredictionService, for testing t2t-query.

It implements `Predict` with tensorflow-serving-api's own protos on 127.0.0.1 (a free port) and
answers with `Signature`s: plain Python functions over columns, or a loaded SavedModel's
signatures via `saved_model_signatures`. As TF
Serving does, an unknown model is NOT_FOUND and an unknown signature INVALID_ARGUMENT; a
signature's own error is INVALID_ARGUMENT. `unavailable=N` answers the first N calls UNAVAILABLE
(a server still starting), to exercise the client's retries.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc
import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

# A signature: (its input names, fn(columns: {input: list}) -> {output: list}).
Signature = tuple[list[str], Callable[[dict[str, list]], dict[str, list]]]


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


def _column(proto: Any) -> list:
    """A request's input tensor --> a list over the batch (bytes decoded as UTF-8)."""
    values = tf.make_ndarray(proto)
    if values.dtype == object:
        return [v.decode("utf-8") for v in values.ravel()]
    return values.tolist()


def tensor_proto(values: list) -> Any:
    """A signature's output list --> a TensorProto: text as DT_STRING, floats as DT_FLOAT."""
    array = np.array(values)
    if array.dtype.kind == "U" or (array.size == 0 and array.dtype == object):
        array = np.vectorize(lambda s: s.encode("utf-8"), otypes=[object])(array)
    elif array.dtype == np.float64:
        array = array.astype(np.float32)
    return tf.make_tensor_proto(array)


class GrpcStandIn(prediction_service_pb2_grpc.PredictionServiceServicer):
    """`with GrpcStandIn({"name": {"serving_default": signature}}) as address:` serves on
    127.0.0.1; `address` is host:port. Every request is recorded in `requests` as (model,
    signature, version or None, the input texts)."""

    def __init__(self, models: dict[str, dict[str, Signature]], unavailable: int = 0):
        self.models = models
        self.unavailable = unavailable
        self.requests: list[tuple[str, str, int | None, list]] = []
        self.calls = 0
        self._lock = threading.Lock()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(self, self.server)
        self.address = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"

    def __enter__(self) -> str:
        self.server.start()
        return self.address

    def __exit__(self, *exc) -> None:
        self.server.stop(grace=None)

    def Predict(self, request, context):  # noqa: N802  (the name gRPC calls)
        with self._lock:
            self.calls += 1
            if self.unavailable > 0:
                self.unavailable -= 1
                context.abort(grpc.StatusCode.UNAVAILABLE, "Socket closed (the stand-in starts)")
        spec = request.model_spec
        name = spec.signature_name or "serving_default"
        columns = {key: _column(proto) for key, proto in request.inputs.items()}
        version = spec.version.value if spec.HasField("version") else None
        self.requests.append((spec.name, name, version, columns.get("inputs")))
        if spec.name not in self.models:
            context.abort(grpc.StatusCode.NOT_FOUND, f"Servable not found for {spec.name}")
        if name not in self.models[spec.name]:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f'Serving signature name: "{name}" not found in signature def',
            )
        _, fn = self.models[spec.name][name]
        try:
            outputs = fn(columns)
        except (KeyError, TypeError, ValueError) as error:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        response = predict_pb2.PredictResponse()
        response.model_spec.CopyFrom(spec)
        for key, values in outputs.items():
            response.outputs[key].CopyFrom(tensor_proto(values))
        return response
