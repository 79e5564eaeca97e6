"""The JSON API of `t2t-serve`: request and response models, limits, and the checks that turn
bad input into a 4xx answer naming the field.

Every error answer is {"error": message, "field": the field's name or null}: 400 for a body
that is not JSON, a Host header that is not one of the server's names or a Content-Length that
is not a number, 413 beyond a limit (sentences per request, characters per sentence, constraints
per sentence, body size), 422 for a wrong type or an out-of-range setting, 429 when
`max_concurrent` requests are already running. The models below are what FastAPI's OpenAPI
page (/docs) shows.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from t2t_lite.hparams import SearchSettings
from t2t_lite.hparams.search_settings import CONTROL_FLAGS, parse_sampling
from t2t_lite.serve.web.backend import Capabilities

MAX_ALPHA = 10.0  # the length penalty lp = ((5 + |y|) / 6) ** alpha; the paper uses 0.6
# Beam search's patience (--patience): past the beam's last step a larger one stops nothing
# sooner than the exact bound, so this is a bound on the input, not on what it can mean.
MAX_PATIENCE = 100.0


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one request may ask for; `t2t-serve`'s flags of the same names."""

    max_sentences: int = 32
    max_characters: int = 1000
    max_concurrent: int = 2
    max_beam_size: int = 16
    max_constraints: int = 16

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            if getattr(self, field.name) < 1:
                raise ValueError(
                    f"--{field.name} must be at least 1, got {getattr(self, field.name)}"
                )

    @property
    def max_tree_characters(self) -> int:
        """A bracketed tree (EVALB's gold and test) is several times its sentence's length."""
        return 8 * self.max_characters

    @property
    def max_body_bytes(self) -> int:
        """The largest request body read: every sentence, its prefix and its constraints at
        their limits, JSON-escaped (up to 12 bytes a character, 8 more a phrase), and room for
        the settings."""
        per_sentence = 3 * (self.max_characters * 12 + 16) + 8 * self.max_constraints
        return self.max_sentences * per_sentence + 4096


class ApiError(Exception):
    """An answer other than 200: HTTP status, the field at fault (or None) and a message."""

    def __init__(self, status: int, field: str | None, message: str):
        super().__init__(message)
        self.status, self.field, self.message = status, field, message

    def body(self) -> dict[str, Any]:
        return {"error": self.message, "field": self.field}


def too_large(path: str, limit: int) -> str:
    """The message of a body beyond `limit` bytes (413)."""
    return (
        f"{path}: the body is larger than the limits allow ({limit} bytes: --max_sentences x "
        "--max_characters)"
    )


def error_body(path: str, field: str | None, message: str, tf_serving: bool = False) -> dict:
    """The JSON of an error answer at `path`: {"error", "field"}, or TF Serving's {"error"}
    under /v1/ when the server speaks its API (`tf_serving`)."""
    if tf_serving and path.startswith("/v1/"):
        return {"error": message}
    return ApiError(400, field, message).body()


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt setting is an error, not ignored


class SearchFields(_Request):
    # Strict: true or "3" is a mistake to report, not a beam of 1 or 3.
    beam_size: int | None = Field(None, strict=True, description="Beam width; default: the run's.")
    alpha: float | None = Field(
        None, strict=True, description="Length-penalty exponent; default: the run's."
    )
    nbest: int | None = Field(
        None, strict=True, description="Hypotheses per sentence, at most beam_size; default 1."
    )
    patience: float | None = Field(
        None,
        strict=True,
        description="Beam search also stops a sentence once patience x beam_size hypotheses "
        "have finished (0: the exact bound); default: the server's --patience.",
    )
    sampling: str | None = Field(
        None,
        strict=True,
        description="Sample one hypothesis instead of beam search, as t2t-decode's --sampling: "
        "comma-separated name:value of temperature, top_k, top_p and seed, e.g. "
        "'temperature:0.8,top_k:40,seed:1'; '' samples with temperature 1. A run only.",
    )
    no_repeat_ngram_size: int | None = Field(
        None,
        strict=True,
        description="No N-gram of this size twice in a translation (0: off); default: the run's.",
    )
    repetition_penalty: float | None = Field(
        None,
        strict=True,
        description="Logits of tokens already in the translation divided by this where positive, "
        "multiplied where negative (1: off); default: the run's.",
    )
    min_length: int | None = Field(
        None,
        strict=True,
        description="EOS banned until the translation holds this many tokens, EOS not counted "
        "(0: off); default: the run's.",
    )
    disable_unk: bool | None = Field(
        None, strict=True, description="Never generate the unknown piece; default: the run's."
    )
    adapter: str | None = Field(
        None,
        strict=True,
        description="A LoRA adapter the server holds over its run (t2t-serve --adapters=NAME=RUN), "
        "by name; default: the run itself.",
    )


class TranslateRequest(SearchFields):
    sentences: list[str] = Field(description="Sentences to translate, one per item.")
    prefixes: list[str] | None = Field(
        None,
        description="A target prefix per sentence ('' for none): its translation starts with it.",
    )
    constraints: list[list[str]] | None = Field(
        None,
        description="Per sentence, target phrases its translation must contain (terminology).",
    )
    details: bool = Field(
        False,
        strict=True,
        description="Add each hypothesis's tokens, token probabilities, word alignment (Pharaoh "
        "i-j) and confidence in [0, 1].",
    )


class AttentionRequest(SearchFields):
    sentence: str = Field(description="One sentence; its best translation's attention.")


class EvalbRequest(_Request):
    gold: str = Field(description="The gold tree, bracketed, e.g. (ROOT (S (NP ...) ...)).")
    test: str = Field(description="The tree to score (a translation of a parsing run).")


class ErrorResponse(BaseModel):
    error: str
    field: str | None


class Hypothesis(BaseModel):
    text: str
    score: float = Field(description="log p / lp(length), what the beam ranks by.")
    tokens: list[str] | None = Field(None, description="With details: the output's tokens.")
    token_probs: list[float] | None = Field(
        None, description="With details: p of each token given the source and those before it."
    )
    alignment: str | None = Field(None, description="With details: Pharaoh i-j word pairs.")
    confidence: float | None = Field(
        None, description="With details: the calibrated sentence confidence in [0, 1]."
    )
    tree: dict[str, Any] | None = Field(
        None, description="Parsing runs: the output as a tree, {label, children | word}."
    )


class Translation(BaseModel):
    source: str
    truncated: bool = Field(description="The input was cut to the model's positions.")
    hypotheses: list[Hypothesis]


class TranslateResponse(BaseModel):
    settings: dict[str, Any]
    results: list[Translation]


class AttentionResponse(BaseModel):
    source: list[str] = Field(description="Source token labels, S of them (EOS: </s>).")
    target: list[str] = Field(description="Target token labels, T of them.")
    translation: str
    settings: dict[str, Any]
    encoder: list[list[list[list[float]]]] = Field(description="[layers][heads][S][S]")
    decoder_self: list[list[list[list[float]]]] = Field(description="[layers][heads][T][T]")
    decoder_cross: list[list[list[list[float]]]] = Field(description="[layers][heads][T][S]")


class EvalbResponse(BaseModel):
    status: str = Field(description='"ok", or "error"/"skip" as EVALB reports them.')
    message: str
    f1: float
    precision: float
    recall: float
    matched: int
    gold_brackets: int
    test_brackets: int
    crossing: int
    tagging_accuracy: float
    gold_tree: dict[str, Any] | None


class InfoResponse(BaseModel):
    facts: dict[str, Any] = Field(description="Problem, hparams set, step, checkpoint, ...")
    capabilities: dict[str, Any]
    limits: dict[str, Any]


ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse, "description": text}
    for code, text in (
        (400, "The body is not JSON; a Host not allowed (--allowed_hosts); a bad Content-Length."),
        (413, "Beyond a limit (sentences, characters, constraints, body size)."),
        (422, "A field of the wrong type or out of range."),
        (429, "max_concurrent requests are running; try again."),
    )
}


def resolve_settings(
    fields: SearchFields, capabilities: Capabilities, limits: Limits
) -> SearchSettings:
    """The request's search settings over the backend's defaults --> SearchSettings; an
    ApiError 422 names the first field out of range."""
    defaults = capabilities.defaults
    beam = defaults.beam_size if fields.beam_size is None else fields.beam_size
    alpha = defaults.alpha if fields.alpha is None else fields.alpha
    nbest = defaults.nbest if fields.nbest is None else fields.nbest
    patience = defaults.patience if fields.patience is None else fields.patience
    if capabilities.search_fixed:
        for name, value, fixed in (
            ("beam_size", beam, defaults.beam_size),
            ("alpha", alpha, defaults.alpha),
            ("patience", patience, defaults.patience),
        ):
            if value != fixed:
                raise ApiError(
                    422,
                    name,
                    f"{name}: this SavedModel searches with {name}={fixed}, fixed at "
                    f"export (t2t-export --{name}); got {value}",
                )
    most = max(limits.max_beam_size, defaults.beam_size)  # parsing runs default to 21
    if not 1 <= beam <= most:
        raise ApiError(422, "beam_size", f"beam_size must be in [1, {most}], got {beam}")
    if not (math.isfinite(alpha) and 0.0 <= alpha <= MAX_ALPHA):
        raise ApiError(422, "alpha", f"alpha must be in [0, {MAX_ALPHA:g}], got {alpha}")
    if not (math.isfinite(patience) and 0.0 <= patience <= MAX_PATIENCE):
        raise ApiError(
            422, "patience", f"patience must be in [0, {MAX_PATIENCE:g}], got {patience}"
        )
    top = min(beam, capabilities.max_nbest or beam)
    if not 1 <= nbest <= top:
        raise ApiError(
            422, "nbest", f"nbest must be in [1, {top}] (at most beam_size), got {nbest}"
        )
    controls = resolve_controls(fields, capabilities, nbest)
    search = {"beam_size": beam, "alpha": alpha, "nbest": nbest, "patience": patience}
    if fields.sampling is None:
        return defaults.override(**search, **controls)
    if capabilities.search_fixed:
        raise ApiError(
            422,
            "sampling",
            "sampling: this SavedModel's search is fixed at export; call its sample signature "
            "(TF Serving's API, /v1/models/NAME:predict) to sample",
        )
    try:
        drawn = parse_sampling(fields.sampling)
        settings = defaults.override(**search, **drawn, **controls)
        settings.check()
        return settings
    except ValueError as error:
        message = str(error).removeprefix("--")  # the flag's wording, for a field
        if not message.startswith("sampling"):
            message = f"sampling: {message}"
        raise ApiError(422, "sampling", message) from None


def resolve_controls(fields: SearchFields, capabilities: Capabilities, nbest: int) -> dict:
    """The request's repetition and length controls (t2t_lite.search.controls) that differ
    from the backend's defaults; an ApiError 422 names one out of range, or one this backend
    cannot change (a SavedModel's guided signature gives the best translation only, an older
    export none)."""
    defaults = capabilities.defaults
    given = {
        name: getattr(fields, name)
        for name in CONTROL_FLAGS
        if getattr(fields, name) is not None and getattr(fields, name) != getattr(defaults, name)
    }
    if not given:
        return {}
    name = next(iter(given))
    try:
        defaults.override(**given).check_controls()
    except ValueError as error:
        raise ApiError(422, name, str(error).removeprefix("--")) from None
    if capabilities.controls_nbest == 0:
        raise ApiError(
            422,
            name,
            f"{name}: this model's repetition and length controls are fixed (a SavedModel "
            "exported before they existed: export it again)",
        )
    if capabilities.controls_nbest is not None and nbest > capabilities.controls_nbest:
        raise ApiError(
            422, "nbest", f"nbest: with {name}, this SavedModel gives the best translation only"
        )
    return given


def check_fixed_controls(settings: SearchSettings, capabilities: Capabilities, route: str) -> None:
    """An ApiError 422 where a request asks `route` of a SavedModel for controls other than the
    export's: only /api/translate takes them there (through the guided signature)."""
    defaults = capabilities.defaults
    changed = [n for n in CONTROL_FLAGS if getattr(settings, n) != getattr(defaults, n)]
    if changed and capabilities.controls_nbest is not None:
        raise ApiError(
            422,
            changed[0],
            f"{changed[0]}: {route} of a SavedModel searches with the export's controls; "
            "/api/translate takes them",
        )


def check_text(text: str, field: str, limit: int, flag: str = "--max_characters") -> str:
    """A text of at most `limit` characters that UTF-8 can encode (JSON lets a lone surrogate
    through), else an ApiError naming `field` and the flag that sets the limit."""
    if len(text) > limit:
        raise ApiError(413, field, f"{field} has {len(text)} characters, more than {flag}={limit}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ApiError(
            422, field, f"{field} is not valid Unicode at character {error.start}"
        ) from None
    return text


def check_sentences(sentences: list[str], limits: Limits) -> list[str]:
    """1 to max_sentences sentences, each passing `check_text`."""
    if not sentences:
        raise ApiError(422, "sentences", "sentences is empty; give at least one sentence")
    if len(sentences) > limits.max_sentences:
        raise ApiError(
            413,
            "sentences",
            f"sentences has {len(sentences)} items, more than "
            f"--max_sentences={limits.max_sentences}",
        )
    return [
        check_text(s, f"sentences[{i}]", limits.max_characters) for i, s in enumerate(sentences)
    ]


def check_guides(request: TranslateRequest, limits: Limits) -> list | None:
    """The request's prefixes and constraints as one `Guide` per sentence (None without
    them); an ApiError names a list of the wrong length or a phrase beyond the limits."""
    from t2t_lite.decode.guidance import Guide

    count = len(request.sentences)
    prefixes, constraints = request.prefixes, request.constraints
    if prefixes is None and constraints is None:
        return None
    for name, values in (("prefixes", prefixes), ("constraints", constraints)):
        if values is not None and len(values) != count:
            raise ApiError(
                422, name, f"{name} has {len(values)} items for {count} sentences; give one each"
            )
    prefixes = [
        check_text(p, f"prefixes[{i}]", limits.max_characters)
        for i, p in enumerate(prefixes or [""] * count)
    ]
    listed = constraints or [[] for _ in range(count)]
    for i, phrases in enumerate(listed):
        check_constraints(phrases, f"constraints[{i}]", limits)
    return [Guide(p, tuple(c)) for p, c in zip(prefixes, listed, strict=True)]


def check_constraints(phrases: list[str], field: str, limits: Limits) -> None:
    """One sentence's target phrases: at most --max_constraints of them, together at most
    --max_characters characters (each passing `check_text`); else 413 naming `field`."""
    if len(phrases) > limits.max_constraints:
        raise ApiError(
            413,
            field,
            f"{field} has {len(phrases)} phrases, more than "
            f"--max_constraints={limits.max_constraints}",
        )
    for j, phrase in enumerate(phrases):
        check_text(phrase, f"{field}[{j}]", limits.max_characters)
    total = sum(len(phrase) for phrase in phrases)
    if total > limits.max_characters:
        raise ApiError(
            413,
            field,
            f"{field} has {total} characters in all, more than "
            f"--max_characters={limits.max_characters}",
        )


def check_guided(
    settings: SearchSettings, capabilities: Capabilities, field: str, constrained: bool
) -> None:
    """An ApiError 422 naming `field` where the backend cannot guide or describe this search:
    a model without it (an ensemble, an older export), sampling with constraints
    (`constrained`: the request holds target terms), or more n-best than it gives."""
    most = capabilities.guided_nbest
    if most == 0:
        raise ApiError(
            422,
            field,
            f"{field}: this model cannot take prefixes, constraints or details (an ensemble, or "
            "a SavedModel exported without the guided signature: export it again)",
        )
    if most is not None and settings.nbest > most:
        raise ApiError(
            422, "nbest", f"nbest: with {field}, this SavedModel gives the best translation only"
        )
    if settings.sampling and constrained:
        raise ApiError(422, field, f"{field}: target terms need beam search; drop sampling")


def validation_error(errors: list[dict[str, Any]]) -> ApiError:
    """FastAPI's request validation errors --> one ApiError: 400 for a body that is not
    JSON, else 422 naming the first wrong field (`sentences[2]`, `beam_size`, ...)."""
    first = errors[0] if errors else {"loc": (), "msg": "invalid request", "type": ""}
    loc = [part for part in first.get("loc", ()) if part != "body"]
    if first.get("type") == "json_invalid":
        return ApiError(400, "body", f"the body is not valid JSON: {first.get('msg', '')}")
    field = ""
    for part in loc:
        field += f"[{part}]" if isinstance(part, int) else (f".{part}" if field else str(part))
    if not field:
        return ApiError(
            422,
            "body",
            'the body must be a JSON object such as {"sentences": ["..."]}, sent '
            "with Content-Type: application/json",
        )
    return ApiError(422, field, f"{field}: {first.get('msg', 'invalid')}")
