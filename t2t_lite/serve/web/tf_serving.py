"""TF Serving's REST API (https://www.tensorflow.org/tfx/serving/api_rest) over an export, so
that t2t-query, and any TF Serving client, works against `t2t-serve --export_dir=...`.

    GET  /v1/models/NAME[/versions/N]            the version status
    GET  /v1/models/NAME[/versions/N]/metadata   the signatures' inputs and outputs
    POST /v1/models/NAME[/versions/N]:predict    {"signature_name": ..., "instances": [...]}
                                                 or {"inputs": ...}

A request names a signature of the SavedModel (serving_default, nbest, sample, ...) and carries
its inputs row by row ("instances": a list of values, or of {input: value} objects) or as columns
("inputs": a value list, or {input: list}). The answer is {"predictions": [...]} (rows) or
{"outputs": ...} (columns); with a single output, its values stand alone. Errors are
{"error": message} with status 400 (a bad request) or 404 (no such model, version or
signature), as TF Serving answers them. NAME is `--model_name` (default: the export folder's
name); only the version being served exists.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from t2t_lite.decode.exported import strings
from t2t_lite.extras import lazy_import

tf = lazy_import("tensorflow")


class ServingError(Exception):
    """A request TF Serving would refuse: `status` and its message."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def columns(body: dict, inputs: list[str]) -> tuple[dict[str, list], bool]:
    """The request's inputs as {input name: values over the batch}, and whether it was rows."""
    rows = "instances" in body
    if rows == ("inputs" in body):
        raise ServingError(400, "Missing 'inputs' or 'instances' key")
    given = body["instances" if rows else "inputs"]
    if rows and isinstance(given, list) and given and isinstance(given[0], dict):
        missing = [n for n in inputs if any(n not in row for row in given)]
        if missing:
            raise ServingError(400, f"instances lack the input(s) {missing}")
        return {n: [row[n] for row in given] for n in inputs}, rows
    if isinstance(given, dict):
        missing = [n for n in inputs if n not in given]
        if missing:
            raise ServingError(400, f"inputs lack {missing}")
        return {n: given[n] for n in inputs}, rows
    if len(inputs) != 1:
        raise ServingError(400, f"values without names, but the signature has inputs {inputs}")
    return {inputs[0]: given}, rows


def answer(outputs: dict[str, Any], rows: bool) -> dict:
    """TF Serving's JSON of a signature's outputs (tensors)."""
    # tf.string as UTF-8 text, as TF Serving sends it
    outputs = {
        k: strings(v) if v.dtype == tf.string else v.numpy().tolist() for k, v in outputs.items()
    }
    if not rows:
        return {"outputs": outputs if len(outputs) > 1 else next(iter(outputs.values()))}
    count = len(next(iter(outputs.values())))
    predictions = [{k: v[i] for k, v in outputs.items()} for i in range(count)]
    if len(outputs) == 1:
        predictions = [next(iter(p.values())) for p in predictions]
    return {"predictions": predictions}


class ServedModel:
    """An export's signatures under TF Serving's names: `name` at `version`."""

    def __init__(self, exported, name: str, max_rows: int):
        self.signatures, self.name, self.max_rows = exported.signatures, name, max_rows
        self.version = exported.path.rstrip("/").rsplit("/", 1)[-1]
        if not self.version.isdigit():
            self.version = "1"  # a bare SavedModel folder: served as version 1

    def check(self, name: str, version: str | None) -> None:
        if name != self.name or (version is not None and version != self.version):
            where = f"{name}" + (f" version {version}" if version is not None else "")
            raise ServingError(404, f"Servable not found for request: {where}")

    def status(self) -> dict:
        state = {"error_code": "OK", "error_message": ""}
        return {"model_version_status": [{"version": self.version, "state": "AVAILABLE",
                                          "status": state}]}  # fmt: skip

    def metadata(self) -> dict:
        def tensors(specs) -> dict:
            return {k: {"dtype": v.dtype.name, "shape": v.shape.as_list()} for k, v in specs}

        defs = {
            name: {
                "inputs": tensors(fn.structured_input_signature[1].items()),
                "outputs": tensors(fn.structured_outputs.items()),
            }
            for name, fn in self.signatures.items()
        }
        return {"model_spec": {"name": self.name, "version": self.version},
                "metadata": {"signature_def": {"signature_def": defs}}}  # fmt: skip

    def predict(self, body: Any) -> dict:
        if not isinstance(body, dict):
            raise ServingError(400, "the request body must be a JSON object")
        signature = body.get("signature_name") or "serving_default"
        if signature not in self.signatures:
            raise ServingError(
                404, f'Serving signature name: "{signature}" not found in signature def'
            )
        function = self.signatures[signature]
        specs = function.structured_input_signature[1]
        values, rows = columns(body, sorted(specs))
        batch = next((len(v) for v in values.values() if isinstance(v, list)), 0)
        if batch > self.max_rows:
            raise ServingError(400, f"{batch} rows; this server takes at most {self.max_rows}")
        try:
            feeds = {n: tf.constant(values[n], dtype=specs[n].dtype) for n in specs}
            return answer(function(**feeds), rows)
        except (TypeError, ValueError, tf.errors.InvalidArgumentError) as error:
            raise ServingError(400, str(error).splitlines()[0]) from None


def router(served: ServedModel) -> APIRouter:
    """The routes of TF Serving's REST API for `served`."""
    routes = APIRouter(tags=["TF Serving REST API"])

    def fail(error: ServingError) -> JSONResponse:
        return JSONResponse({"error": str(error)}, status_code=error.status)

    def checked(name: str, version: str | None, answer):
        try:
            served.check(name, version)
        except ServingError as error:
            return fail(error)
        return answer()

    @routes.get("/v1/models/{name}")
    @routes.get("/v1/models/{name}/versions/{version}")
    def status(name: str, version: str | None = None):
        return checked(name, version, served.status)

    @routes.get("/v1/models/{name}/metadata")
    @routes.get("/v1/models/{name}/versions/{version}/metadata")
    def metadata(name: str, version: str | None = None):
        return checked(name, version, served.metadata)

    @routes.post("/v1/models/{name}:predict")
    @routes.post("/v1/models/{name}/versions/{version}:predict")
    async def predict(name: str, request: Request, version: str | None = None):
        try:
            served.check(name, version)
            try:
                body = json.loads(await request.body())
            except ValueError as error:
                raise ServingError(400, f"JSON Parse error: {error}") from None
            return await run_in_threadpool(served.predict, body)
        except ServingError as error:
            return fail(error)

    return routes
