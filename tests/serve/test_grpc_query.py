"""t2t-query --protocol=grpc against a loopback PredictionService stand-in: lines in batches,
n-best, versions, truncation reports, retries on UNAVAILABLE, deadlines, and the one-line errors
of an absent or misbehaving server. tests/serve/test_export.py serves a real SavedModel."""

from __future__ import annotations

import io
import subprocess
import sys
import time

import pytest
from grpc_stand_in import GrpcStandIn
from tf_serving_helpers import toy_nbest, toy_reverse

from t2t_lite.serve import grpc_query, query

LINES = ["abc", "", "  x y ", "Grüße, 世界", "a much longer line"]


def _newline(columns):
    return {"outputs": [t.replace("c", "\n") for t in columns["inputs"]]}


def _one_short(columns):
    return {"outputs": columns["inputs"][1:]}


def _slow(columns):
    time.sleep(3)
    return toy_reverse(columns)


MODELS = {
    "demo": {
        "serving_default": (["inputs"], toy_reverse),
        "nbest": (["inputs"], toy_nbest),
        "newline": (["inputs"], _newline),
        "short": (["inputs"], _one_short),
        "slow": (["inputs"], _slow),
    }
}


def t2t_query(address: str, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "t2t_lite.bin.t2t_query", "--protocol=grpc", f"--server={address}"]
        + list(args),
        input=stdin,
        capture_output=True,
        timeout=120,
    )


def test_lines_in_batches_give_lines_out_in_order(tmp_path):
    source, target = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_bytes(("\ufeff" + "\r\n".join(LINES) + "\r\n").encode("utf-8"))
    stand_in = GrpcStandIn(MODELS)
    with stand_in as address:
        done = t2t_query(
            address,
            "--model=demo",
            f"--input_file={source}",
            f"--output_file={target}",
            "--batch_size=2",
        )
        predict = grpc_query.GrpcPredictor(address, "demo", 3, "nbest")
        out = io.StringIO()
        assert query.write_rows(query.predict_lines(["ab", "cd"], predict), out) == 2
    assert done.returncode == 0, done.stderr.decode()
    assert target.read_text(encoding="utf-8").split("\n") == [t[::-1] for t in LINES] + [""]
    assert [texts for *_, texts in stand_in.requests[:3]] == [LINES[:2], LINES[2:4], LINES[4:]]
    assert stand_in.requests[0][:3] == ("demo", "serving_default", None)
    assert "input 5: truncated" in done.stderr.decode()
    assert out.getvalue().splitlines() == [
        "0 ||| ba ||| -1.000000",
        "0 ||| AB ||| -2.500000",
        "1 ||| dc ||| -1.000000",
        "1 ||| CD ||| -2.500000",
    ]
    assert stand_in.requests[-1] == ("demo", "nbest", 3, ["ab", "cd"])


def test_unavailable_is_retried_with_backoff():
    stand_in = GrpcStandIn(MODELS, unavailable=2)
    with stand_in as address:
        predict = grpc_query.GrpcPredictor(address, "demo", retries=2, backoff=0.05)
        assert [row["outputs"] for row in predict(["ab", "c"])] == ["ba", "c"]
        assert stand_in.calls == 3
        stand_in.unavailable = 5
        predict = grpc_query.GrpcPredictor(address, "demo", retries=1, backoff=0.05)
        with pytest.raises(query.ServingError, match=r"UNAVAILABLE, 2 attempts\): Socket closed"):
            predict(["ab"])
        assert stand_in.calls == 5


def test_a_line_break_in_an_answer_fails_the_command_in_one_line(tmp_path):
    source, target = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("abc\nxyz\nd\ne\ncc\n", encoding="utf-8")
    target.write_text("before\n")
    with GrpcStandIn(MODELS) as address:
        done = t2t_query(
            address,
            "--model=demo",
            "--signature_name=newline",
            "--batch_size=2",
            f"--input_file={source}",
            f"--output_file={target}",
        )
    err = done.stderr.decode().strip().splitlines()
    message = f"error: {source}:1: the answer contains a line break ('ab\\n')"
    assert done.returncode == 2 and message in err[-1], err
    assert "Traceback" not in done.stderr.decode()
    assert target.read_text() == "before\n"  # never half-written
    assert not list(tmp_path.glob(".out.txt-*"))  # nor a temporary file left


def test_absent_or_misbehaving_server_is_one_error():
    with GrpcStandIn(MODELS) as address:
        # (the error, the timeout): the short answer comes at once, however loaded the machine
        # (its first call once took over 0.5 s), the slow one after 3 s.
        cases = {
            "short": ("sent 2 inputs but got 1 answers \\(output outputs\\)", 60.0),
            "slow": (f"{address}: no answer within --timeout=0.5 s", 0.5),
        }
        for signature, (message, timeout) in cases.items():
            predict = grpc_query.GrpcPredictor(address, "demo", None, signature, timeout=timeout)
            with pytest.raises(query.ServingError, match=message):
                list(query.predict_lines(["a", "b"], predict))
        unknown = grpc_query.GrpcPredictor(address, "nope")
        with pytest.raises(query.ServingError, match="gRPC NOT_FOUND: Servable not found for nope"):
            unknown(["a"])
    gone = grpc_query.GrpcPredictor(address, "demo", retries=1, backoff=0.05)
    with pytest.raises(query.ServingError, match=rf"cannot reach {address} \(gRPC UNAVAILABLE"):
        gone(["a"])


def test_requests_and_answers_convert_both_ways():
    request = grpc_query.predict_request(["a", "ü"], "m", 2, "nbest")
    assert request.model_spec.version.value == 2 and request.inputs["inputs"].string_val == [
        b"a",
        "ü".encode(),
    ]
    assert grpc_query.predict_request([], "m").inputs["inputs"].tensor_shape.dim[0].size == 0
    assert grpc_query.grpc_target("grpc://host:8500/") == "host:8500"
    assert grpc_query.grpc_target(None) == "localhost:8500"
    with pytest.raises(ValueError, match="host:port"):
        grpc_query.grpc_target("http://host/v1/models")
    with pytest.raises(ValueError, match="--model"):
        grpc_query.predict_request(["a"], "")
