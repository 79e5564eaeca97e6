"""`POST /api/translate_stream`: one sentence's translation as server-sent events, a token at a
time under greedy settings (`t2t_lite.decode.streaming`).

The body is /api/attention's: {"sentence": "...", and the search fields of /api/translate}. The
answer is `text/event-stream`:

  event: start   data: {"source": the stripped sentence, "truncated": bool, "by_token": bool}
  event: text    data: {"text": what the next token adds}   (under beam search: one event,
                 the whole translation, as a beam's best hypothesis can change until the end)
  event: done    data: {"translation", "score", "settings"}  (the texts joined; the score as
                 /api/translate gives it)
  event: error   data: {"error": message}                   (the search failed midway)

It takes one of the --max_concurrent slots (`gate.Gate`) until the last event, and is refused
as /api/translate refuses, with a JSON 4xx before any event: bad fields, nbest above 1, a
sentence beyond --max_characters, every slot busy (429). A SavedModel searches whole inside its
graph: its server answers 422, naming the route that translates with it.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator

from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from pydantic import Field

from t2t_lite.hparams import SearchSettings
from t2t_lite.serve.web import adapters, api
from t2t_lite.serve.web.documents import server_sent_events

ROUTE = "/api/translate_stream"


class StreamRequest(api.SearchFields):
    sentence: str = Field(description="One sentence, translated as its tokens are found.")


def sentence_events(translator, sentence: str, settings: SearchSettings) -> Iterator[dict]:
    """The events of one sentence's translation by a `Translator` of `settings`."""
    from t2t_lite.decode.streaming import token_steps, unstreamable  # TensorFlow: on use

    source = sentence.strip()
    tokens = translator.tokenizer.encode_py(source) if source else []
    truncated = bool(source) and len(tokens) + 1 > translator.max_positions
    by_token = unstreamable(translator) is None
    yield {"event": "start", "source": source, "truncated": truncated, "by_token": by_token}
    if by_token:
        texts, log_prob = [], 0.0
        for step in token_steps(translator, sentence, "sentence"):
            texts.append(step.text)
            log_prob += step.log_prob
            if step.text:
                yield {"event": "text", "text": step.text}
        text = "".join(texts)
        score = stream_score(log_prob, len(texts), settings)
    else:
        found = translator.hypotheses([sentence], ["sentence"], log_progress=False)[0]
        text, score = (found[0].text, found[0].score) if found else ("", 0.0)
        if text:
            yield {"event": "text", "text": text}
    yield {"event": "done", "translation": text, "score": score, "settings": settings.to_dict()}


def stream_score(log_prob: float, length: int, settings: SearchSettings) -> float:
    """The score the search gives a streamed output of `length` tokens (EOS included): its
    log-probability over greedy search's length penalty, the log-probability when sampling."""
    from t2t_lite.search.contract import length_penalty  # TensorFlow, loaded by the steps already

    if settings.sampling:
        return log_prob
    return log_prob / float(length_penalty(length, settings.alpha))


def add_stream_route(app: FastAPI, backend, limits: api.Limits, gate) -> None:
    """POST /api/translate_stream on `app`, through `gate` (`gate.Gate`)."""

    @app.post(ROUTE, responses={**api.ERRORS, 200: {"content": {"text/event-stream": {}}}})
    async def translate_stream(request: StreamRequest):
        """One sentence's translation as server-sent events: a `text` event per token under
        greedy settings (beam_size 1, or sampling at temperature 0), the whole translation in
        one under beam search; `done` with the translation and its score."""
        chosen = adapters.chosen(backend, request.adapter)  # a LoRA adapter, by name
        if not chosen.capabilities.streams:
            raise api.ApiError(
                422,
                None,
                f"{ROUTE}: a SavedModel searches a whole sentence inside its graph; POST "
                "/api/translate, or serve the training run (t2t-serve --output_dir=RUN) to "
                "stream tokens",
            )
        settings = api.resolve_settings(request, chosen.capabilities, limits)
        if settings.nbest != 1:
            raise api.ApiError(422, "nbest", f"nbest: {ROUTE} streams the best translation only")
        sentence = api.check_text(request.sentence, "sentence", limits.max_characters)
        release = gate.hold()  # 429 at once when every slot is busy
        try:  # the sentence encoded before anything is sent
            events = chosen.translate_stream(sentence, settings)
            start = await asyncio.to_thread(next, events)
        except BaseException:
            release()
            raise
        events = itertools.chain([start], events)
        return StreamingResponse(
            server_sent_events(events, release, "sentence"), media_type="text/event-stream"
        )
