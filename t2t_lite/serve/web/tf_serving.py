"""TF Serving's REST API (https://www.tensorflow.org/tfx/serving/api_rest) over an export, so
that t2t-query, and any TF Serving client, works against `t2t-serve --export_dir=...`.

    GET  /v1/models/NAME[/versions/N|/labels/L]              the version status
    GET  /v1/models/NAME[/versions/N|/labels/L]/metadata     the SignatureDefs
    POST /v1/models/NAME[/versions/N|/labels/L]:predict      {"signature_name": ...,
                                                              "instances": [...]} or {"inputs": ...}
    POST /v1/models/NAME[/versions/N|/labels/L]:classify     refused with TF Serving's error for
    POST /v1/models/NAME[/versions/N|/labels/L]:regress      a signature that is neither

Paths are read as TF Serving reads them, with its two patterns (case-insensitive, the name and
label percent-decoded); anything else under /v1/ is its "Malformed request" (400). Answers and
errors are TF Serving's: {"error": message} with the HTTP status of its gRPC code (400 invalid
argument, 404 not found, 429 busy). NAME is `--model_name` (default: the export folder's name);
only the version being served exists, and `--version_labels` names it. Request JSON and tensors:
`tensor_json`; SignatureDefs: `signature_defs`.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from t2t_lite.serve.web import signature_defs
from t2t_lite.serve.web.api import ApiError
from t2t_lite.serve.web.tensor_json import ServingError, answer, parse_body, request_tensors

SPEC = r"/v1/models/([^/:]+)(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?"
PREDICTION_PATH = re.compile(SPEC + ":(classify|regress|predict)", re.IGNORECASE)
STATUS_PATH = re.compile(
    r"/v1/models(?:/([^/:]+))?(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?(?:/(metadata))?",
    re.IGNORECASE,
)
INT64_MAX = 2**63 - 1


def json_response(body: Any, status: int = 200) -> Response:
    """JSON as TF Serving writes it: NaN and Infinity allowed, UTF-8 as it is."""
    text = json.dumps(body, ensure_ascii=False, allow_nan=True)
    return Response(text.encode("utf-8"), status_code=status, media_type="application/json")


def error_response(status: int, message: str) -> Response:
    return json_response({"error": message}, status)


class ServedModel:
    """An export's signatures under TF Serving's names: `name` at `version`, with `labels`
    ({label: version}) naming it. `max_rows`: rows per predict request; `max_constraints`:
    constraints per sentence of the guided signature."""

    def __init__(
        self,
        exported,
        name: str,
        max_rows: int,
        labels: Mapping[str, str] | None = None,
        max_constraints: int | None = None,
    ):
        self.signatures, self.name, self.max_rows = exported.signatures, name, max_rows
        self.max_constraints = max_constraints
        self.version = exported.path.rstrip("/").rsplit("/", 1)[-1]
        if not self.version.isdigit():
            self.version = "1"  # a bare SavedModel folder: served as version 1
        self.labels = dict(labels or {})
        for label, version in self.labels.items():
            if version != self.version:
                raise ValueError(
                    f"--version_labels={label}={version}: version {version} of {name} is not "
                    f"served; t2t-serve serves version {self.version} only"
                )
        self.defs = signature_defs.load(exported.path)

    def resolve(self, name: str, version: str | None, label: str | None) -> None:
        """TF Serving's servable lookup: a label must be known (400), then name and version
        must be served (404)."""
        if label is not None:
            if label not in self.labels:
                raise ServingError(400, f"Unrecognized servable version label: {label}")
            version = self.labels[label]
        if name != self.name or (version is not None and int(version) != int(self.version)):
            found = f"Latest({name})" if version is None else f"Specific({name}, {int(version)})"
            raise ServingError(404, f"Servable not found for request: {found}")

    def status(self, name: str, version: str | None) -> dict:
        """GetModelStatus: every version, or the one asked for (a label is not looked at)."""
        if name != self.name:
            raise ServingError(404, f"Could not find any versions of model {name}")
        if version is not None and int(version) != int(self.version):
            raise ServingError(404, f"Could not find version {int(version)} of model {name}")
        state = {"error_code": "OK", "error_message": ""}
        return {"model_version_status": [{"version": self.version, "state": "AVAILABLE",
                                          "status": state}]}  # fmt: skip

    def metadata(self) -> dict:
        spec = {"name": self.name, "signature_name": "", "version": self.version}
        signatures = signature_defs.metadata_json(self.defs)
        return {"model_spec": spec, "metadata": {"signature_def": signatures}}

    def signature(self, doc: dict):
        name = doc.get("signature_name") or "serving_default"
        if name not in self.signatures:
            raise ServingError(400, f'Serving signature name: "{name}" not found in signature def')
        return self.signatures[name]

    def predict(self, doc: dict, function) -> dict:
        """Runs `function` (a signature of `doc`'s, `signature`) on the request's inputs."""
        import tensorflow as tf

        specs = function.structured_input_signature[1]
        arrays, rows = request_tensors(doc, {n: s.dtype.name for n, s in specs.items()})
        batch = next((a.shape[0] for a in arrays.values() if a.ndim), 0)
        if batch > self.max_rows:
            raise ServingError(
                400, f"{batch} rows; this server takes at most --max_sentences={self.max_rows}"
            )
        constraints = arrays.get("constraints")
        if self.max_constraints and constraints is not None and constraints.ndim == 2:
            if constraints.shape[1] > self.max_constraints:
                raise ServingError(
                    400,
                    f"constraints: {constraints.shape[1]} per sentence, more than "
                    f"--max_constraints={self.max_constraints}",
                )
        for n, spec in specs.items():
            if not spec.shape.is_compatible_with(arrays[n].shape):
                raise ServingError(
                    400,
                    f"input {n}: a tensor of shape {list(arrays[n].shape)}, but the signature "
                    f"takes {spec.shape.as_list()} (None: any size)",
                )
        try:
            feeds = {n: tf.constant(arrays[n], dtype=specs[n].dtype) for n in specs}
            found = function(**feeds)
        except tf.errors.InvalidArgumentError as error:
            raise ServingError(400, op_message(error.message)) from None
        except (TypeError, ValueError) as error:
            raise ServingError(400, str(error).splitlines()[0]) from None
        return answer({k: v.numpy() for k, v in found.items()}, rows)


def op_message(text: str) -> str:
    """The failing op's own words in TensorFlow's "Graph execution error:" text (the line
    after the node and its stack), as TF Serving reports the op's error."""
    lines = [line for line in text.splitlines() if line.strip()]
    skipped = ("Graph execution error", "Detected at node", "<stack traces", " ", "\t")
    own = [line for line in lines if not line.startswith(skipped)]
    return own[-1] if own else lines[0]


def parse_path(method: str, raw_path: str) -> tuple[str, dict]:
    """(what to do, its arguments) of a /v1/ request, as TF Serving's `ParseModelInfo` reads
    it; a ServingError for what it refuses."""
    malformed = ServingError(400, f"Malformed request: {method} {raw_path}")
    pattern = {"POST": PREDICTION_PATH, "GET": STATUS_PATH}.get(method)
    found = pattern.fullmatch(raw_path) if pattern else None
    if found is None:
        raise malformed
    name, version, label, verb = found.groups()
    if version is not None and int(version) > INT64_MAX:
        raise ServingError(400, f"Failed to convert version: {version} to numeric.")
    name = urllib.parse.unquote(name) if name else ""
    label = urllib.parse.unquote(label) if label else None
    args = {"name": name, "version": version, "label": label}
    if method == "GET":
        if not name:
            raise ServingError(400, "Missing model name in request.")
        return ("metadata" if verb == "metadata" else "status"), args
    if verb not in ("predict", signature_defs.CLASSIFY, signature_defs.REGRESS):
        raise malformed  # ":PREDICT" matches the pattern but names no method
    return verb, args


def router(served: ServedModel, run: Callable | None = None) -> APIRouter:
    """The routes of TF Serving's REST API for `served`; `run(fn, *args)` runs a prediction in
    a worker thread (the app's limiter, `Gate.run`; default: `asyncio.to_thread`)."""
    import asyncio

    routes = APIRouter(tags=["TF Serving REST API"])
    run = run or asyncio.to_thread

    def predict(raw: bytes, args: dict) -> dict:
        doc = parse_body(raw)  # in the worker thread: JSON parsing is work too
        served.resolve(**args)
        return served.predict(doc, served.signature(doc))

    async def dispatch(request: Request) -> Response:
        raw_path = request.scope.get("raw_path", request.url.path.encode()).decode("latin-1")
        try:
            verb, args = parse_path(request.method, raw_path)
            if verb == "status":
                return json_response(served.status(args["name"], args["version"]))
            if verb == "metadata":
                served.resolve(**args)
                return json_response(served.metadata())
            body = await request.body()
            if verb == "predict":
                return json_response(await run(predict, body, args))
            doc = parse_body(body)
            signature_defs.check_examples(doc)
            served.resolve(**args)
            signature_defs.check_signature(served.defs, doc.get("signature_name", ""), verb)
        except ServingError as error:
            return error_response(error.status, str(error))
        except ApiError as error:  # the limiter's 429
            return error_response(error.status, error.message)
        raise AssertionError("check_signature always refuses")  # pragma: no cover

    routes.add_api_route(
        "/v1/{path:path}",
        dispatch,
        methods=["GET", "POST", "PUT", "DELETE", "PATCH"],
        summary="TF Serving's REST API: model status, metadata, predict",
        description=__doc__,
    )
    return routes
