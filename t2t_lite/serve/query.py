"""A client for TF Serving's predict API, for models exported by `t2t_lite.serve.export`.

REST (this module): TF Serving answers POST /v1/models/NAME[/versions/N]:predict. A request
names a signature and carries the inputs either row by row, {"instances": ["a", "b"]}, or as
columns, {"inputs": ["a", "b"]}. The answer is {"predictions": [{"outputs": ..., "scores": ...},
...]} for rows and {"outputs": {"outputs": [...], "scores": [...]}} for columns (a bare list or
value in place of the dict when the signature has one output), or {"error": "..."} with an HTTP
error. gRPC: `t2t_lite.serve.grpc_query` (PredictionService.Predict), with the same rows.

Whatever the protocol, N lines in give N lines out, or an error: an answer with a line break, or
with another count than the inputs sent, is refused naming the input line, and `--output_file`
is written whole or not at all. Every failure of the connection or the server is a
`ServingError`, one line naming the server. The REST path uses only the Python standard library
(and `t2t_lite.runtime.atomic_io`), so it runs without TensorFlow.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from typing import Any, BinaryIO, TextIO

from t2t_lite.extras import import_extra
from t2t_lite.runtime import atomic_io

DEFAULT_SERVER = "http://localhost:8501"
REQUEST_FORMATS = ("instances", "inputs")
PROGRESS_SECONDS = 10.0
MAX_ANSWER_BYTES = 64 * 2**20  # --max_answer_bytes: a batch of 32 lines needs far less
MAX_BACKOFF = 8.0  # seconds between retries, at most


# A batch of input texts --> one outputs dict per text ({"outputs": str or [str], "scores": ...}).
Predictor = Callable[[list[str]], list[dict[str, Any]]]


class ServingError(OSError):
    """The server could not be reached, refused the request, or answered something unexpected
    (an OSError, so that the commands report it as one line, like an unreadable file)."""


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


def post_json(
    url: str,
    body: dict[str, Any],
    timeout: float = 60.0,
    retries: int = 0,
    max_bytes: int = MAX_ANSWER_BYTES,
    backoff: float = 0.5,
) -> dict[str, Any]:
    """POSTs `body` as JSON and returns the decoded answer. `timeout` bounds each attempt
    whole, connection and body; an answer over `max_bytes` is refused; a 503 (TF Serving while
    a model loads) or a refused or dropped connection is retried `retries` times, waiting
    `backoff` seconds, doubled each time up to MAX_BACKOFF. Every failure is one ServingError
    naming the URL (and the server's own message)."""
    if timeout <= 0 or retries < 0 or max_bytes < 1:
        raise ValueError(
            f"need --timeout > 0, --retries >= 0 and --max_answer_bytes >= 1, got {timeout}, "
            f"{retries} and {max_bytes}"
        )
    data = json.dumps(body).encode("utf-8")
    wait = backoff
    for attempt in range(retries + 1):
        try:
            return _post_once(url, data, timeout, max_bytes)
        except _Retryable as error:
            if attempt == retries:
                tries = f"{attempt + 1} attempt{'s' if attempt else ''}"
                raise ServingError(f"{error} ({tries})") from None
        time.sleep(wait)
        wait = min(2 * wait, MAX_BACKOFF)
    raise AssertionError("unreachable")


class _Retryable(ServingError):
    """A failure worth another attempt: 503, or a connection refused or dropped."""


def _post_once(url: str, data: bytes, timeout: float, max_bytes: int) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ServingError(f"{url}: not an http:// or https:// URL")
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = kind(parts.hostname, parts.port, timeout=timeout)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    try:
        connection.request("POST", path, data, {"Content-Type": "application/json"})
        sock = connection.sock  # the connection lets go of it once the answer is complete
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        response = connection.getresponse()
        raw = _read_body(sock, response, deadline, max_bytes, url, timeout)
    except TimeoutError:
        raise ServingError(f"{url}: no answer within --timeout={timeout:g} s") from None
    except http.client.IncompleteRead as error:
        raise ServingError(
            f"{url}: the answer was cut short ({len(error.partial)} bytes read, "
            f"{error.expected} more expected)"
        ) from None
    except http.client.HTTPException as error:  # a malformed status line or headers
        raise ServingError(f"{url}: broken HTTP answer ({type(error).__name__}: {error})") from None
    except (ConnectionError, OSError) as error:  # refused, reset, unknown host
        if isinstance(error, ServingError):
            raise
        reason = getattr(error, "strerror", None) or error
        raise _Retryable(f"cannot reach {url}: {reason}") from None
    finally:
        connection.close()
    text = raw.decode("utf-8", errors="replace")
    answer = _json(text, url)
    if response.status >= 400:
        detail = answer.get("error", text) if isinstance(answer, dict) else text
        detail = " ".join(str(detail).split())[:500]  # one line
        error = _Retryable if response.status == 503 else ServingError
        raise error(f"{url}: HTTP {response.status}: {detail}")
    if answer is None:
        raise ServingError(f"{url}: the answer is not JSON: {text[:200]!r}")
    return answer


def _read_body(sock, response, deadline, max_bytes, url, timeout) -> bytes:
    """The answer's body, read in pieces so that the deadline holds however slowly it comes."""
    header = response.getheader("Content-Length") or ""
    length = int(header) if header.isdigit() else None
    if length is not None and length > max_bytes:
        raise ServingError(f"{url}: an answer of {length:,} bytes, over --max_answer_bytes")
    chunks, size = [], 0
    while True:
        left, chunk = deadline - time.monotonic(), b""
        if left > 0:
            sock.settimeout(left)
            try:
                chunk = response.read1(65536)
            except TimeoutError:  # the deadline passed while waiting for the next bytes
                left = 0.0
        if left <= 0:
            raise ServingError(
                f"{url}: no answer within --timeout={timeout:g} s ({size:,} bytes read)"
            )
        if not chunk:
            if length is not None and size < length:
                raise http.client.IncompleteRead(b"".join(chunks), length - size)
            return b"".join(chunks)
        size += len(chunk)
        if size > max_bytes:
            raise ServingError(f"{url}: the answer is over --max_answer_bytes={max_bytes:,}")
        chunks.append(chunk)


def _json(text: str, url: str) -> Any:
    """The answer decoded, or None when it is not JSON; a ServingError when it nests too deep
    to read."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ServingError(f"{url}: the answer is JSON nested too deeply to read") from None
    except ValueError:
        return None


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


def rest_predictor(
    url: str,
    signature_name: str | None = None,
    request_format: str = "instances",
    timeout: float = 60.0,
    retries: int = 0,
    max_bytes: int = MAX_ANSWER_BYTES,
) -> Predictor:
    """A Predictor that POSTs each batch to the REST `url` (`predict_url`), as `post_json`."""
    request_body([], signature_name, request_format)  # checks request_format now

    def predict(texts: list[str]) -> list[dict[str, Any]]:
        body = request_body(texts, signature_name, request_format)
        answer = post_json(url, body, timeout, retries, max_bytes)
        return response_rows(answer, len(texts))

    return predict


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


def make_predictor(
    protocol: str,
    server: str | None,
    model: str,
    version: int | None = None,
    signature_name: str | None = None,
    request_format: str = "instances",
    timeout: float = 60.0,
    retries: int = 3,
    max_bytes: int = MAX_ANSWER_BYTES,
) -> Predictor:
    """The Predictor of t2t-query's flags: REST (`server` default DEFAULT_SERVER) or gRPC
    (`grpc_query.GrpcPredictor`, default localhost:8500); `retries` of a server not yet
    answering (REST 503 or no connection, gRPC UNAVAILABLE)."""
    if protocol == "grpc":
        import_extra("grpc", "grpcio", "grpc", "t2t-query --protocol=grpc")
        import_extra(
            "tensorflow_serving.apis", "tensorflow-serving-api", "grpc", "t2t-query --protocol=grpc"
        )
        from t2t_lite.serve import grpc_query  # grpc and TensorFlow only when asked for

        return grpc_query.GrpcPredictor(server, model, version, signature_name, timeout, retries)
    if protocol != "rest":
        raise ValueError(f"--protocol must be rest or grpc, got {protocol!r}")
    url = predict_url(server or DEFAULT_SERVER, model, version)
    return rest_predictor(url, signature_name, request_format, timeout, retries, max_bytes)


def predict_lines(
    lines: Iterable[str], predict: Predictor, batch_size: int = 32
) -> Iterator[dict[str, Any]]:
    """Sends the lines in batches of `batch_size` through `predict` and yields one outputs dict
    per line, in order; a batch answered with another count is a ServingError."""
    if batch_size < 1:
        raise ValueError(f"--batch_size must be at least 1, got {batch_size}")
    for batch in _batches(lines, batch_size):
        rows = predict(batch)
        if len(rows) != len(batch):
            raise ServingError(f"sent {len(batch)} inputs but got {len(rows)} answers")
        yield from rows


def query_lines(
    lines: Iterable[str],
    url: str,
    *,
    batch_size: int = 32,
    signature_name: str | None = None,
    request_format: str = "instances",
    timeout: float = 60.0,
) -> Iterator[dict[str, Any]]:
    """REST: sends the lines in batches of `batch_size` and yields one outputs dict per line, in
    order."""
    predict = rest_predictor(url, signature_name, request_format, timeout)
    return predict_lines(lines, predict, batch_size)


def format_row(index: int, row: dict[str, Any], name: str | None = None) -> list[str]:
    """Output lines for one input, as t2t-decode writes them: the text for a single output,
    `index ||| text ||| score` lines (Moses n-best) when "outputs" is a list. A text with a line
    break is a ServingError naming the input line (`name`, default "input <index + 1>")."""
    outputs = row.get("outputs")
    texts = outputs if isinstance(outputs, list) else [outputs]
    for text in texts:
        if isinstance(text, str) and ("\n" in text or "\r" in text):
            raise ServingError(
                f"{name or f'input {index + 1}'}: the answer contains a line break "
                f"({text[:80]!r}); refused, so that N lines in still give N lines out"
            )
    if isinstance(outputs, list):
        scores = row.get("scores", [0.0] * len(outputs))
        if not isinstance(scores, list) or len(scores) != len(outputs):
            raise ServingError(f"answer {index}: {len(outputs)} outputs but scores {scores}")
        for rank, score in enumerate(scores, 1):
            if not isinstance(score, (int, float)) or isinstance(score, bool):
                raise ServingError(
                    f"{name or f'input {index + 1}'}: the answer's score of hypothesis {rank} "
                    f"is {str(score)[:80]!r}, not a number; check the server's n-best signature"
                )
        return [
            f"{index} ||| {text} ||| {score:.6f}"
            for text, score in zip(outputs, scores, strict=True)
        ]
    if not isinstance(outputs, str):
        raise ServingError(f"answer {index} has no text 'outputs': {row}")
    return [outputs]


def write_rows(
    rows: Iterable[dict[str, Any]],
    out: TextIO | None = None,
    log: TextIO | None = None,
    source: str | None = None,
) -> int:
    """Writes each row's lines to `out` (stdout) as answers arrive. On `log` (stderr): inputs
    the server truncated, and the rate every PROGRESS_SECONDS. Returns the inputs written.
    `source` names the input in errors ("in.txt" --> "in.txt:7")."""
    out, log = out or sys.stdout, log or sys.stderr
    start = last = time.monotonic()
    count = 0
    for index, row in enumerate(rows):
        if row.get("truncated"):
            log.write(f"input {index + 1}: truncated to the export's max_input_length\n")
        name = f"{source}:{index + 1}" if source else None
        for line in format_row(index, row, name):
            out.write(line + "\n")
        count += 1
        if time.monotonic() - last >= PROGRESS_SECONDS:
            last = time.monotonic()
            log.write(f"{count} lines, {count / (last - start):.1f} lines/s\n")
    out.flush()
    return count


def query_file(
    input_file: str,
    predict: Predictor,
    output_file: str | None = None,
    batch_size: int = 32,
) -> int:
    """t2t-query: the lines of `input_file` ("-": stdin) through `predict`, written to
    `output_file` whole or not at all (a temporary file renamed at the end), or to stdout as they
    arrive. Returns the lines read. On an error after some lines reached stdout, the error says
    how many."""
    stdin = input_file == "-"
    name = "<stdin>" if stdin else input_file
    written = [0]

    def counted(rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for row in rows:
            yield row
            written[0] += 1

    with contextlib.ExitStack() as stack:
        stream = sys.stdin.buffer if stdin else stack.enter_context(open(input_file, "rb"))
        out = None
        if output_file:
            out = stack.enter_context(
                atomic_io.open_atomic(output_file, "w", encoding="utf-8", newline="\n")
            )
        rows = counted(predict_lines(read_lines(stream, name), predict, batch_size))
        try:
            return write_rows(rows, out, source=name)
        except ServingError as error:
            if output_file or not written[0]:
                raise
            raise ServingError(
                f"{error} (the answers to {written[0]} inputs are on stdout)"
            ) from None
