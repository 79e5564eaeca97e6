"""A client for TF Serving's REST predict API, for models exported by `t2t_lite.serve.export`.

TF Serving answers POST /v1/models/NAME[/versions/N]:predict. A request names a signature and
carries the inputs either row by row, {"instances": ["a", "b"]}, or as columns,
{"inputs": ["a", "b"]}. The answer is {"predictions": [{"outputs": ..., "scores": ...}, ...]}
for rows and {"outputs": {"outputs": [...], "scores": [...]}} for columns (a bare list or value
in place of the dict when the signature has one output), or {"error": "..."} with an HTTP error.

Only the Python standard library is used, so the client runs without TensorFlow.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO, TextIO

DEFAULT_SERVER = "http://localhost:8501"
REQUEST_FORMATS = ("instances", "inputs")
PROGRESS_SECONDS = 10.0


class ServingError(RuntimeError):
    """The server could not be reached, refused the request, or answered something unexpected."""


def predict_url(server: str, model: str, version: int | None = None) -> str:
    """http://host:port + /v1/models/NAME[/versions/N]:predict ("host:port" gets http://)."""
    if not model:
        raise ValueError("--model must name the served model (TF Serving's MODEL_NAME)")
    base = server.rstrip("/")
    if "://" not in base:
        base = "http://" + base
    path = f"/v1/models/{urllib.parse.quote(model, safe='')}"
    if version is not None:
        path += f"/versions/{version}"
    return f"{base}{path}:predict"


def request_body(
    texts: list[str], signature_name: str | None = None, request_format: str = "instances"
) -> dict[str, Any]:
    """The JSON body for a batch of texts, in the row ("instances") or column ("inputs") format."""
    if request_format not in REQUEST_FORMATS:
        raise ValueError(
            f"--request_format must be one of {REQUEST_FORMATS}, got {request_format!r}"
        )
    body: dict[str, Any] = {request_format: texts}
    if signature_name:
        body["signature_name"] = signature_name
    return body


def post_json(url: str, body: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
    """POSTs `body` as JSON and returns the decoded answer; ServingError names the URL and the
    server's own error message."""
    data = json.dumps(body).encode("utf-8")
    request = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            text = response.read().decode("utf-8")
    except urllib.error.HTTPError as error:
        detail = error.read().decode("utf-8", errors="replace")
        try:
            detail = json.loads(detail).get("error", detail)
        except (ValueError, AttributeError):
            pass
        raise ServingError(f"{url}: HTTP {error.code}: {detail}") from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise ServingError(f"cannot reach {url}: {reason}") from None
    try:
        return json.loads(text)
    except ValueError:
        raise ServingError(f"{url}: the answer is not JSON: {text[:200]!r}") from None


def response_rows(response: dict[str, Any], expected: int) -> list[dict[str, Any]]:
    """One dict of outputs per input, from either answer format ("outputs" names a signature
    with a single output)."""
    if "predictions" in response:
        rows = [p if isinstance(p, dict) else {"outputs": p} for p in response["predictions"]]
    elif "outputs" in response:
        columns = response["outputs"]
        if not isinstance(columns, dict):
            columns = {"outputs": columns}
        if len({len(values) for values in columns.values()}) > 1:
            raise ServingError(f"columns of different lengths in the answer: {columns}")
        names = list(columns)
        rows = [
            dict(zip(names, values, strict=True)) for values in zip(*columns.values(), strict=True)
        ]
    else:
        raise ServingError(f"unexpected answer without 'predictions' or 'outputs': {response}")
    if len(rows) != expected:
        raise ServingError(f"sent {expected} inputs but got {len(rows)} answers")
    return rows


def read_lines(stream: BinaryIO, name: str) -> Iterator[str]:
    """The lines of a UTF-8 byte stream without their line endings (empty ones kept, so that N
    lines in give N lines out); invalid UTF-8 is an error naming `name` and the line."""
    for number, raw in enumerate(stream, start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{name}:{number}: invalid UTF-8 at byte {e.start + 1}") from None
        if number == 1:
            text = text.removeprefix("\ufeff")
        yield text.rstrip("\r\n")


def _batches(lines: Iterable[str], size: int) -> Iterator[list[str]]:
    batch: list[str] = []
    for line in lines:
        batch.append(line)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def query_lines(
    lines: Iterable[str],
    url: str,
    *,
    batch_size: int = 32,
    signature_name: str | None = None,
    request_format: str = "instances",
    timeout: float = 60.0,
) -> Iterator[dict[str, Any]]:
    """Sends the lines in batches of `batch_size` and yields one outputs dict per line, in order."""
    if batch_size < 1:
        raise ValueError(f"--batch_size must be at least 1, got {batch_size}")
    for batch in _batches(lines, batch_size):
        body = request_body(batch, signature_name, request_format)
        yield from response_rows(post_json(url, body, timeout), len(batch))


def format_row(index: int, row: dict[str, Any]) -> list[str]:
    """Output lines for one input, as t2t-decode writes them: the text for a single output,
    `index ||| text ||| score` lines (Moses n-best) when "outputs" is a list."""
    outputs = row.get("outputs")
    if isinstance(outputs, list):
        scores = row.get("scores", [0.0] * len(outputs))
        if not isinstance(scores, list) or len(scores) != len(outputs):
            raise ServingError(f"answer {index}: {len(outputs)} outputs but scores {scores}")
        return [
            f"{index} ||| {text} ||| {score:.6f}"
            for text, score in zip(outputs, scores, strict=True)
        ]
    if not isinstance(outputs, str):
        raise ServingError(f"answer {index} has no text 'outputs': {row}")
    return [outputs]


def write_rows(
    rows: Iterable[dict[str, Any]], out: TextIO | None = None, log: TextIO | None = None
) -> int:
    """Writes each row's lines to `out` (stdout) as answers arrive. On `log` (stderr): inputs
    the server truncated, and the rate every PROGRESS_SECONDS. Returns the inputs written."""
    out, log = out or sys.stdout, log or sys.stderr
    start = last = time.monotonic()
    count = 0
    for index, row in enumerate(rows):
        if row.get("truncated"):
            log.write(f"input {index + 1}: truncated to the export's max_input_length\n")
        for line in format_row(index, row):
            out.write(line + "\n")
        count += 1
        if time.monotonic() - last >= PROGRESS_SECONDS:
            last = time.monotonic()
            log.write(f"{count} lines, {count / (last - start):.1f} lines/s\n")
    out.flush()
    return count
