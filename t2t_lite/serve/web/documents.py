"""`POST /api/document`: a whole document translated in its layout, streamed sentence by sentence.

The document goes through `t2t_lite.document.document` as `t2t-decode --input_format=document`
and `Translator.translate_document` take it. With `"stream": true` (the default) the answer is
server-sent events (`text/event-stream`), one per step of `translate_events`:

  event: start       data: {"paragraphs": [source paragraphs], "sentences": count}
  event: sentence    data: {"index", "paragraph", "source", "translation"}
  event: paragraph   data: {"paragraph", "text"}   (its markup put back)
  event: done        data: {"document": the translated document}
  event: error       data: {"error": message}       (the search failed midway)

With `"stream": false` the answer is {"document": ..., "settings": ...} once all is done. A
document holds up to --max_sentences x --max_characters characters; it takes one of the
--max_concurrent slots for as long as it runs. A document that cannot be read (markup nested
deeper than `t2t_lite.document.markup.MAX_NESTING`) is a 422 naming its line, streamed or not,
before any event.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Sequence

from absl import logging
from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from t2t_lite.decode.guidance import Terminology, terminology_guides
from t2t_lite.document.document import Engine, translate_events
from t2t_lite.document.markup import read_pharaoh
from t2t_lite.hparams import SearchSettings
from t2t_lite.serve.web import adapters, api
from t2t_lite.serve.web.backend import Backend


class DocumentRequest(api.SearchFields):
    text: str = Field(description="The document: plain text, Markdown or HTML-like text.")
    language: str | None = Field(
        None, strict=True, description="The source's language code for sentence splitting."
    )
    stream: bool = Field(True, strict=True, description="Server-sent events as it goes.")
    terminology: list[list[str]] | None = Field(
        None,
        description="[source term, target term] pairs: each sentence's translation contains the "
        "target terms of the source terms in it (as t2t-decode --terminology).",
    )


class DocumentResponse(BaseModel):
    document: str
    settings: dict


def backend_engine(
    backend: Backend, settings: SearchSettings, terminology: Terminology | None = None
) -> Engine:
    """The backend's `Engine`: a run's translator (alignments and token counts), or for a
    SavedModel its `translate` with details where its guided signature gives them (a
    truncated sentence is logged; its tokenizer is inside the graph). `terminology`: each
    sentence guided by the target terms of the source terms in it."""
    own = getattr(backend, "document_engine", None)
    if own is not None:
        return own(settings, terminology)
    details = backend.capabilities.guided_nbest != 0

    def translate(sentences: list[str]) -> list[tuple[str, Sequence | None]]:
        found = []
        guides = terminology_guides(terminology, sentences)
        for result in backend.translate(sentences, settings, guides, details):
            if result["truncated"]:
                logging.warning("a document's sentence was truncated: %.60s", result["source"])
            best = result["hypotheses"][0] if result["hypotheses"] else {"text": ""}
            pairs = read_pharaoh(best["alignment"]) if "alignment" in best else None
            found.append((best["text"], pairs))
        return found

    return Engine(translate)


def add_document_route(app: FastAPI, backend: Backend, limits: api.Limits, gate) -> None:
    """POST /api/document on `app`, searching through `gate` (`gate.Gate`)."""

    @app.post(
        "/api/document",
        response_model=DocumentResponse,
        responses={**api.ERRORS, 200: {"content": {"text/event-stream": {}}}},
    )
    async def document(request: DocumentRequest):
        """A document translated in its layout, its markup and placeholders kept: server-sent
        events sentence by sentence (`stream`), or the whole document at the end."""
        chosen = adapters.chosen(backend, request.adapter)  # a LoRA adapter, by name
        settings = api.resolve_settings(request, chosen.capabilities, limits)
        api.check_fixed_controls(settings, chosen.capabilities, "/api/document")
        if settings.nbest != 1:
            raise api.ApiError(422, "nbest", "a document is translated with nbest 1")
        most = limits.max_sentences * limits.max_characters
        text = api.check_text(request.text, "text", most, "--max_sentences x --max_characters")
        if not text.strip():
            raise api.ApiError(422, "text", "text is empty")
        language = request.language or getattr(backend, "source_language", "en")
        # (compiling thousands of terms takes seconds: not on the event loop)
        terms = await asyncio.to_thread(check_terminology, request.terminology, limits)
        if terms is not None:
            api.check_guided(settings, chosen.capabilities, "terminology", constrained=True)
        events = translate_events(text, backend_engine(chosen, settings, terms), language, "text")
        release = gate.hold()  # 429 at once when every slot is busy
        try:  # the document read and split before anything is sent: its faults are a 422
            start = await asyncio.to_thread(next, events)
        except ValueError as error:  # markup nested too deep, named by its line
            release()
            raise api.ApiError(422, "text", str(error)) from None
        except BaseException:
            release()
            raise
        events = itertools.chain([start], events)
        if not request.stream:
            try:
                *_, last = await asyncio.to_thread(list, events)
            finally:
                release()
            return {"document": last["document"], "settings": settings.to_dict()}
        return StreamingResponse(
            server_sent_events(events, release, "document"), media_type="text/event-stream"
        )


def check_terminology(pairs: list[list[str]] | None, limits: api.Limits) -> Terminology | None:
    """The request's term pairs as a `Terminology` (None without them); an ApiError names a
    pair that is not two non-empty terms within the limits, or more pairs than a document's
    sentences may have constraints (--max_sentences x --max_constraints)."""
    if pairs is None:
        return None
    most = limits.max_sentences * limits.max_constraints
    if len(pairs) > most:
        raise api.ApiError(
            413, "terminology", f"{len(pairs)} term pairs, more than {most} "
            "(--max_sentences x --max_constraints)",
        )  # fmt: skip
    for i, pair in enumerate(pairs):
        if len(pair) != 2 or not all(term.strip() for term in pair):
            raise api.ApiError(422, f"terminology[{i}]", "give [source term, target term]")
        for j, term in enumerate(pair):
            api.check_text(term, f"terminology[{i}][{j}]", limits.max_characters)
    return Terminology([(source.strip(), target.strip()) for source, target in pairs])


async def server_sent_events(events, release, what: str) -> AsyncIterator[str]:
    """The event dicts of `events` (each with its name under "event") as server-sent events,
    each computed in a worker thread; `release` (`Gate.hold`'s) called at the end; a failure
    midway, logged as `what`'s, is an event of its own."""
    try:
        while True:
            event = await asyncio.to_thread(next, events, None)
            if event is None:
                return
            name = event.pop("event")
            yield f"event: {name}\ndata: {json.dumps(event, ensure_ascii=False)}\n\n"
    except Exception as error:  # the stream has begun: the error is an event of its own
        logging.exception("%s translation failed", what)
        yield f"event: error\ndata: {json.dumps({'error': str(error)})}\n\n"
    finally:
        release()
