"""t2t-query against t2t-serve's TF Serving REST API on 127.0.0.1.

The served signatures here are plain Python (reverse a string), so these tests check the
protocol and the command; tests/serve/test_export.py serves a real exported model the same way.
"""

from __future__ import annotations

import io
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from tf_serving_helpers import ToySignature, serving, toy_nbest, toy_reverse

from t2t_lite.serve import query


def _single_output(columns):
    return {"outputs": [t.upper() for t in columns["inputs"]]}


def _models() -> dict[str, ToySignature]:
    return {
        "serving_default": ToySignature(toy_reverse),
        "nbest": ToySignature(toy_nbest),
        "upper": ToySignature(_single_output),
    }


LINES = ["abc", "", "  x y ", "Grüße, 世界", "a much longer line"]


def t2t_query(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "t2t_lite.bin.t2t_query", *args],
        input=stdin,
        capture_output=True,
        timeout=60,
    )


@pytest.mark.parametrize("request_format", ["instances", "inputs"])
def test_lines_in_batches_give_lines_out_in_order(tmp_path, request_format):
    source = tmp_path / "in.txt"
    source.write_bytes(("\ufeff" + "\r\n".join(LINES) + "\r\n").encode("utf-8"))
    signatures = _models()
    with serving(signatures, "demo") as url:
        done = t2t_query(
            f"--server={url}",
            "--model=demo",
            f"--input_file={source}",
            "--batch_size=2",
            f"--request_format={request_format}",
        )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode("utf-8").split("\n") == [t[::-1] for t in LINES] + [""]
    # 5 lines in batches of 2: three requests, whitespace kept as sent, BOM and CR dropped.
    assert signatures["serving_default"].calls == [
        ["abc", ""],
        ["  x y ", "Grüße, 世界"],
        ["a much longer line"],
    ]
    assert "input 5: truncated" in done.stderr.decode()


def test_nbest_signature_version_and_stdin():
    signatures = _models()
    with serving(signatures, "demo", version="3") as url:
        done = t2t_query(
            f"--server={url}",
            "--model=demo",
            "--version=3",
            "--signature_name=nbest",
            stdin=b"ab\ncd\n",
        )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().splitlines() == [
        "0 ||| ba ||| -1.000000",
        "0 ||| AB ||| -2.500000",
        "1 ||| dc ||| -1.000000",
        "1 ||| CD ||| -2.500000",
    ]
    assert signatures["nbest"].calls == [["ab", "cd"]]
    assert signatures["serving_default"].calls == []


def test_single_output_signature_in_both_formats():
    with serving(_models(), "demo") as url:
        answers = [
            query.post_json(query.predict_url(url, "demo"), body)
            for body in ({"signature_name": "upper", "instances": ["AB", "c"]},
                         {"signature_name": "upper", "inputs": ["AB", "c"]})
        ]  # fmt: skip
        for request_format in query.REQUEST_FORMATS:
            rows = query.query_lines(
                ["ab", "c"],
                query.predict_url(url, "demo"),
                signature_name="upper",
                request_format=request_format,
            )
            assert list(rows) == [{"outputs": "AB"}, {"outputs": "C"}]
    # A single output comes back bare: a list of values, not a list of dicts.
    assert answers == [{"predictions": ["AB", "C"]}, {"outputs": ["AB", "C"]}]


def test_server_errors_are_reported_with_the_url(tmp_path):
    with serving(_models(), "demo") as url:
        unknown = t2t_query(f"--server={url}", "--model=nope", stdin=b"a\n")
        bad_signature = t2t_query(
            f"--server={url}", "--model=demo", "--signature_name=zz", stdin=b"a\n"
        )
    assert unknown.returncode == 2
    assert f"error: {url}/v1/models/nope:predict: HTTP 404: Servable not found" in (
        unknown.stderr.decode()
    )
    assert 'HTTP 400: Serving signature name: "zz" not found' in bad_signature.stderr.decode()
    # The server is shut down now: nothing listens on its port.
    gone = t2t_query(f"--server={url}", "--model=demo", stdin=b"a\n")
    assert gone.returncode == 2 and "error: cannot reach" in gone.stderr.decode()


def test_invalid_input_names_file_and_line(tmp_path):
    source = tmp_path / "bad.txt"
    source.write_bytes(b"fine\nab\xffcd\n")
    done = t2t_query("--server=127.0.0.1:9", "--model=demo", f"--input_file={source}")
    assert done.returncode == 2
    assert f"error: {source}:2: invalid UTF-8 at byte 3" in done.stderr.decode()
    missing = t2t_query("--model=demo", f"--input_file={tmp_path / 'none.txt'}")
    assert missing.returncode == 2 and "none.txt" in missing.stderr.decode()


def test_response_rows_and_urls():
    assert query.predict_url("localhost:8501", "en de", 2) == (
        "http://localhost:8501/v1/models/en%20de/versions/2:predict"
    )
    columns = {"outputs": {"outputs": ["x", "y"], "scores": [-1.0, -2.0]}}
    assert query.response_rows(columns, 2) == [
        {"outputs": "x", "scores": -1.0},
        {"outputs": "y", "scores": -2.0},
    ]
    with pytest.raises(query.ServingError, match="sent 3 inputs but got 2 answers"):
        query.response_rows(columns, 3)
    with pytest.raises(query.ServingError, match="without 'predictions' or 'outputs'"):
        query.response_rows({"error": "x"}, 1)
    with pytest.raises(ValueError, match="--request_format"):
        query.request_body(["a"], request_format="rows")
    out, log = io.StringIO(), io.StringIO()
    rows = [{"outputs": ["a", "b"], "scores": [-0.5, float("-inf")], "truncated": True}]
    assert query.write_rows(rows, out, log) == 1
    assert out.getvalue() == "0 ||| a ||| -0.500000\n0 ||| b ||| -inf\n"
    assert log.getvalue() == "input 1: truncated to the export's max_input_length\n"


def _newline(columns):
    return {"outputs": [t.replace("c", "\n") for t in columns["inputs"]]}


def _fails_on_second_batch(columns, calls=[]):  # noqa: B006  (counts the calls)
    calls.append(1)
    if len(calls) % 2 == 0:
        raise ValueError("the model failed on this batch")
    return toy_reverse(columns)


PROBES = {"newline": ToySignature(_newline), "second": ToySignature(_fails_on_second_batch)}


def test_a_line_break_in_an_answer_is_refused_naming_the_line(tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("ab\nxy\nd\nabc\ne\n", encoding="utf-8")  # 5 inputs, the 4th has a "c"
    with serving(PROBES, "probe") as url:
        done = t2t_query(
            f"--server={url}", "--model=probe", "--signature_name=newline", f"--input_file={source}"
        )
        out, log = io.StringIO(), io.StringIO()
        predict = query.rest_predictor(query.predict_url(url, "probe"), "newline")
        with pytest.raises(query.ServingError, match=r"^input 1: the answer contains a line"):
            query.write_rows(query.predict_lines(["c"], predict), out, log)
    err = done.stderr.decode().strip().splitlines()
    assert done.returncode == 2 and len(err) == 1, err
    assert f"error: {source}:4: the answer contains a line break ('ab\\n')" in err[0]
    assert "the answers to 3 inputs are on stdout" in err[0]
    assert done.stdout.decode().splitlines() == ["ab", "xy", "d"]  # what came before, no more


def test_a_failure_on_the_second_batch_leaves_the_output_file_alone(tmp_path):
    source, target = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("a\nb\nc\nd\n", encoding="utf-8")
    with serving(PROBES, "probe") as url:
        done = t2t_query(
            f"--server={url}",
            "--model=probe",
            "--signature_name=second",
            "--batch_size=2",
            f"--input_file={source}",
            f"--output_file={target}",
        )
    err = done.stderr.decode().strip().splitlines()
    assert done.returncode == 2 and len(err) == 1, err
    assert "HTTP 400: the model failed on this batch" in err[0]
    assert not target.exists() and list(tmp_path.iterdir()) == [source]  # no partial file


class _CutShort(BaseHTTPRequestHandler):
    """Promises 1000 bytes of JSON, sends 20 and closes the connection."""

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "1000")
        self.end_headers()
        self.wfile.write(b'{"predictions": ["ab')
        self.wfile.flush()
        self.close_connection = True

    def log_message(self, *args):
        pass


def test_a_truncated_body_is_one_line():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _CutShort)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        done = t2t_query(f"--server={url}", "--model=demo", stdin=b"ab\n")
    finally:
        server.shutdown()
        server.server_close()
    err = done.stderr.decode().strip().splitlines()
    assert done.returncode == 2 and len(err) == 1 and "Traceback" not in err[0], err
    assert f"{url}/v1/models/demo:predict: the answer was cut short (20 bytes read, 980" in err[0]


@pytest.mark.parametrize("score", ["-1.5", None, True, [1.0]])
def test_a_score_that_is_not_a_number_names_the_answer(score):
    row = {"outputs": ["a b", "b a"], "scores": [-0.5, score]}
    with pytest.raises(query.ServingError) as refused:
        query.format_row(2, row, "in.txt:3")
    assert str(refused.value) == (
        f"in.txt:3: the answer's score of hypothesis 2 is {str(score)!r}, not a number; check "
        "the server's n-best signature"
    )
    assert query.format_row(2, {**row, "scores": [-0.5, -2]}) == [
        "2 ||| a b ||| -0.500000", "2 ||| b a ||| -2.000000"
    ]  # fmt: skip
