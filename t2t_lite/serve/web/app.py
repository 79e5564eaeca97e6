"""The `t2t-serve` application: the page (static HTML, CSS and JavaScript) and its JSON API.

  GET  /                 the page
  GET  /api/info         the run's facts, what requests may change, the limits
  POST /api/translate    sentences --> translations with scores, n-best, trees (parsing runs)
  POST /api/attention    one sentence --> its best translation's attention maps
  POST /api/translate_stream  one sentence --> its translation as server-sent events, a
                         token at a time under greedy settings (token_stream.py)
  POST /api/document     a document --> its translation in the same layout, streamed
                         sentence by sentence (server-sent events; documents.py)
  POST /api/evalb        a gold tree and a test tree --> EVALB's F1 for the sentence
  GET  /docs, /redoc     the API described (Swagger UI, ReDoc; scripts served locally)
  GET  /openapi.json     the API's OpenAPI description
  /v1/models/NAME...     an export only: TF Serving's REST API (tf_serving.py)

Inference and scoring run in worker threads (`asyncio.to_thread`), so the server keeps answering
while a search runs; at most `Limits.max_concurrent` of them run at once, through one `Gate`, and
a request beyond that gets 429 at once rather than waiting. Bad input gets a 4xx answer naming
the field (`api`). In front of every route (`guards`): the Host allow-list and the body limit.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Sequence

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline
from starlette.exceptions import HTTPException as StarletteHTTPException

from t2t_lite.data.trees import TreeParseError, parse_tree
from t2t_lite.serve.web import adapters, api, tf_serving
from t2t_lite.serve.web.backend import Backend
from t2t_lite.serve.web.documents import add_document_route
from t2t_lite.serve.web.gate import Gate
from t2t_lite.serve.web.guards import LOOPBACK_HOSTS, RequestGuard
from t2t_lite.serve.web.token_stream import add_stream_route
from t2t_lite.serve.web.trees import sentence_evalb, text_tree_json

STATIC_DIR = os.path.join(os.path.dirname(__file__), "static")


def is_loopback(host: str) -> bool:
    """Whether `host` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# The deepest tree /api/evalb reads: far deeper than any treebank's (GUM's and the WSJ's are
# under 40), shallow enough that scoring one stays quick (a 3,990-deep tree took seconds).
MAX_TREE_DEPTH = 300


def tree_depth(text: str) -> int:
    """The deepest nesting of brackets in `text`, read in one pass."""
    depth = deepest = 0
    for char in text:
        if char == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif char == ")":
            depth -= 1
    return deepest


def _parse_field(text: str, field: str):
    depth = tree_depth(text)
    if depth > MAX_TREE_DEPTH:
        raise api.ApiError(
            413, field, f"{field} is nested {depth} deep, more than {MAX_TREE_DEPTH} levels"
        )
    try:
        return parse_tree(text)
    except TreeParseError as error:
        raise api.ApiError(422, field, f"{field} is not one bracketed tree: {error}") from None


def _add_error_handlers(app: FastAPI, error_body) -> None:
    @app.exception_handler(api.ApiError)
    async def api_error(request: Request, error: api.ApiError) -> JSONResponse:
        return JSONResponse(error.body(), status_code=error.status)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        found = api.validation_error(list(error.errors()))
        return JSONResponse(found.body(), status_code=found.status)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        """Starlette's own answers (404 for an unknown path, 405 for a wrong method) in the
        API's shape, {"error", "field"}, instead of {"detail"}."""
        path = request.url.path
        body = error_body(path, None, f"{path}: {error.detail}")
        return JSONResponse(body, status_code=error.status_code, headers=error.headers)


def create_app(
    backend: Backend, limits: api.Limits | None = None, allowed_hosts: Sequence[str] = ()
) -> FastAPI:
    """The FastAPI application serving `backend` within `limits` (default `api.Limits()`),
    under the Host names localhost, 127.0.0.1, [::1] and `allowed_hosts` (`*`: any)."""
    limits = limits or api.Limits()
    exported = getattr(backend, "exported", None)  # an export: TF Serving's REST API too
    # FastAPI's /docs (Swagger UI) and /redoc with their scripts served from the package
    # (fastapi-offline) instead of a CDN, so the API page works offline.
    app = FastAPIOffline(
        title="t2t-serve",
        summary="Translate with a t2t_lite model and look at its attention.",
        version="1",
    )

    def error_body(path: str, field: str | None, message: str) -> dict:
        return api.error_body(path, field, message, tf_serving=exported is not None)

    _add_error_handlers(app, error_body)
    gate = Gate(limits.max_concurrent)
    hosts = (*LOOPBACK_HOSTS, *allowed_hosts)
    guard = {"hosts": hosts, "max_body_size": limits.max_body_bytes, "error_body": error_body}
    app.add_middleware(RequestGuard, **guard)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(os.path.join(STATIC_DIR, "index.html"))

    @app.get("/api/info", response_model=api.InfoResponse)
    def info() -> dict:
        """The run's facts, what a request may change (capabilities) and the limits."""
        caps = backend.capabilities.to_dict()
        return {"facts": backend.facts(), "capabilities": caps, "limits": vars(limits)}

    @app.post("/api/evalb", response_model=api.EvalbResponse, responses=api.ERRORS)
    async def evalb(request: api.EvalbRequest) -> dict:
        """EVALB (COLLINS.prm) of one sentence: the test tree against a pasted gold tree."""
        for field, text in (("gold", request.gold), ("test", request.test)):
            api.check_text(text, field, limits.max_tree_characters, "8 x --max_characters")
        return await gate.run(_evalb, request.gold, request.test)

    _add_search_routes(app, backend, limits, gate)
    if exported is not None:
        served = tf_serving.ServedModel(
            exported,
            backend.model_name,
            limits.max_sentences,
            getattr(backend, "version_labels", None),
            limits.max_constraints,
        )
        app.include_router(tf_serving.router(served, gate.run))
    return app


def _evalb(gold: str, test: str) -> dict:
    """Both trees read, then scored: in a worker thread, as a tree may be long."""
    return sentence_evalb(_parse_field(gold, "gold"), _parse_field(test, "test"))


def _add_search_routes(app: FastAPI, backend: Backend, limits: api.Limits, gate: Gate) -> None:
    """/api/translate, /api/attention, /api/document and /api/translate_stream: searches in
    worker threads, through `gate`."""
    caps = backend.capabilities
    add_document_route(app, backend, limits, gate)
    add_stream_route(app, backend, limits, gate)

    @app.post("/api/translate", response_model=api.TranslateResponse, responses=api.ERRORS)
    async def translate(request: api.TranslateRequest) -> dict:
        """Translates each sentence: hypotheses best first (`nbest` of them), with their
        scores; for a parsing run each hypothesis also comes as a tree."""
        settings = api.resolve_settings(request, caps, limits)
        sentences = api.check_sentences(request.sentences, limits)
        guides = api.check_guides(request, limits)
        if guides is not None or request.details:
            field = "details" if guides is None else "constraints"
            constrained = any(g.constraints for g in guides or ())
            api.check_guided(settings, caps, field, constrained)
        chosen = adapters.chosen(backend, request.adapter)

        def search() -> list[dict]:  # in a worker thread: the search, then the trees
            results = chosen.translate(sentences, settings, guides, request.details)
            if caps.parsing:
                for result in results:
                    for hypothesis in result["hypotheses"]:
                        hypothesis["tree"] = text_tree_json(hypothesis["text"])
            return results

        return {"settings": settings.to_dict(), "results": await gate.run(search)}

    @app.post("/api/attention", response_model=api.AttentionResponse, responses=api.ERRORS)
    async def attention(request: api.AttentionRequest) -> dict:
        """The attention of the sentence's best translation under the given settings: every
        layer's and head's encoder, decoder and encoder-decoder weights."""
        if not caps.attention:
            raise api.ApiError(
                404,
                None,
                "this model has no attention maps (an ensemble, or a SavedModel "
                "exported without the attention signature: export it again)",
            )
        settings = api.resolve_settings(request, caps, limits)
        api.check_fixed_controls(settings, caps, "/api/attention")
        sentence = api.check_text(request.sentence, "sentence", limits.max_characters)
        if not sentence.strip():
            raise api.ApiError(422, "sentence", "sentence is empty")
        chosen = adapters.chosen(backend, request.adapter)
        found = await gate.run(chosen.attention, sentence, settings)
        return {**found, "settings": settings.to_dict()}
