"""The `t2t-serve` application: the page (static HTML, CSS and JavaScript) and its JSON API.

  GET  /                 the page
  GET  /api/info         the run's facts, what requests may change, the limits
  POST /api/translate    sentences --> translations with scores, n-best, trees (parsing runs)
  POST /api/attention    one sentence --> its best translation's attention maps
  POST /api/document     a document --> its translation in the same layout, streamed
                         sentence by sentence (server-sent events; documents.py)
  POST /api/evalb        a gold tree and a test tree --> EVALB's F1 for the sentence
  GET  /docs, /redoc     the API described (Swagger UI, ReDoc; scripts served locally)
  GET  /openapi.json     the API's OpenAPI description
  /v1/models/NAME...     an export only: TF Serving's REST API (tf_serving.py)

Inference runs in worker threads (`asyncio.to_thread`), so the server keeps answering while a
search runs; at most `Limits.max_concurrent` searches run at once and a request beyond that gets
429 at once rather than waiting. Bad input gets a 4xx answer naming the field (`api`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

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
from t2t_lite.serve.web.trees import sentence_evalb, text_tree_json

STATIC_DIR = os.path.join(os.path.dirname(__file__), "static")
T = TypeVar("T")


class Gate:
    """At most `limit` calls at once in worker threads; one more is refused (429)."""

    def __init__(self, limit: int):
        self.limit = limit
        self._slots = threading.BoundedSemaphore(limit)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        release = self.hold()
        try:
            return await asyncio.to_thread(fn, *args)
        finally:
            release()

    def hold(self) -> Callable[[], None]:
        """Takes a slot (or refuses with 429) and returns what gives it back: for a stream,
        which holds its slot until it ends."""
        if not self._slots.acquire(blocking=False):
            raise api.ApiError(
                429,
                None,
                f"busy: {self.limit} requests are running (--max_concurrent="
                f"{self.limit}); try again in a moment",
            )
        return self._slots.release


def is_loopback(host: str) -> bool:
    """Whether `host` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _parse_field(text: str, field: str):
    try:
        return parse_tree(text)
    except TreeParseError as error:
        raise api.ApiError(422, field, f"{field} is not one bracketed tree: {error}") from None


def _add_error_handlers(app: FastAPI, limits: api.Limits) -> None:
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
        found = api.ApiError(error.status_code, None, f"{request.url.path}: {error.detail}")
        return JSONResponse(found.body(), status_code=found.status, headers=error.headers)

    @app.middleware("http")
    async def body_size(request: Request, call_next):
        length = request.headers.get("content-length", "0")
        if not length.isdigit() or int(length) > limits.max_body_bytes:
            found = api.ApiError(
                413,
                "body",
                f"the body has {length} bytes, more than the "
                f"{limits.max_body_bytes} the limits allow",
            )
            return JSONResponse(found.body(), status_code=found.status)
        return await call_next(request)


def create_app(backend: Backend, limits: api.Limits | None = None) -> FastAPI:
    """The FastAPI application serving `backend` within `limits` (default `api.Limits()`)."""
    limits = limits or api.Limits()
    # FastAPI's /docs (Swagger UI) and /redoc with their scripts served from the package
    # (fastapi-offline) instead of a CDN, so the API page works offline.
    app = FastAPIOffline(
        title="t2t-serve",
        summary="Translate with a t2t_lite model and look at its attention.",
        version="1",
    )
    _add_error_handlers(app, limits)
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
    def evalb(request: api.EvalbRequest) -> dict:
        """EVALB (COLLINS.prm) of one sentence: the test tree against a pasted gold tree."""
        for field, text in (("gold", request.gold), ("test", request.test)):
            api.check_text(text, field, limits.max_tree_characters, "8 x --max_characters")
        return sentence_evalb(
            _parse_field(request.gold, "gold"), _parse_field(request.test, "test")
        )

    _add_search_routes(app, backend, limits)
    exported = getattr(backend, "exported", None)  # an export: TF Serving's REST API too
    if exported is not None:
        served = tf_serving.ServedModel(exported, backend.model_name, limits.max_sentences)
        app.include_router(tf_serving.router(served))
    return app


def _add_search_routes(app: FastAPI, backend: Backend, limits: api.Limits) -> None:
    """/api/translate, /api/attention and /api/document: searches in worker threads, through
    one `Gate`."""
    gate = Gate(limits.max_concurrent)
    caps = backend.capabilities
    add_document_route(app, backend, limits, gate)

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
        results = await gate.run(chosen.translate, sentences, settings, guides, request.details)
        if caps.parsing:
            for result in results:
                for hypothesis in result["hypotheses"]:
                    hypothesis["tree"] = text_tree_json(hypothesis["text"])
        return {"settings": settings.to_dict(), "results": results}

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
        sentence = api.check_text(request.sentence, "sentence", limits.max_characters)
        if not sentence.strip():
            raise api.ApiError(422, "sentence", "sentence is empty")
        chosen = adapters.chosen(backend, request.adapter)
        found = await gate.run(chosen.attention, sentence, settings)
        return {**found, "settings": settings.to_dict()}
