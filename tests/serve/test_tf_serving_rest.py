"""t2t-serve --export_dir speaks TF Serving's REST API (t2t_lite/serve/web/tf_serving.py): every
request form of TF Serving's documentation (https://www.tensorflow.org/tfx/serving/api_rest:
model status and metadata with /versions/ and /labels/, predict in the row and the columnar
format with plain and base64 strings, classify and regress) against a real export, each answer
and error exactly as TF Serving gives it, and t2t-query against the t2t-serve command itself."""

from __future__ import annotations

import base64
import http.client
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the SavedModel's tokenizer ops)
from command_helpers import command
from decoding_helpers import write_tiny_run
from fastapi.testclient import TestClient
from tf_serving_helpers import t2t_serve

from t2t_lite.decode.exported import ExportedTranslator
from t2t_lite.run.run import Run
from t2t_lite.serve import export
from t2t_lite.serve.web import tensor_json, tf_serving
from t2t_lite.serve.web.app import create_app
from t2t_lite.serve.web.saved_model_backend import SavedModelBackend


@pytest.fixture(autouse=True)
def _seed():
    """No reseeding: the export's tokenizer resources must survive (tests/serve/test_export.py)."""
    yield


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("tf_serving")
    write_tiny_run(root, max_positions=32, seed=3)
    run = Run.restore(str(root / "out"), search={"beam_size": 2, "alpha": 0.6})
    export_dir = str(root / "reverse")
    path, _ = export.export_run(run, export_dir, version=7, nbest=2)
    return export_dir, path


@pytest.fixture(scope="module")
def client(exported):
    backend = SavedModelBackend(exported[0], version_labels={"stable": "7"})
    return TestClient(create_app(backend), base_url="http://localhost")


@pytest.fixture(scope="module")
def direct(exported):
    """The export called directly: what every predict form must answer."""
    return ExportedTranslator(exported[0])


def tensor_info(dtype: str, name: str, dims: int = 1) -> dict:
    """A TensorInfo as TF Serving's metadata prints it (protobuf JSON, every field)."""
    shape = {"dim": [{"size": "-1", "name": ""}] * dims, "unknown_rank": False}
    return {"dtype": dtype, "tensor_shape": shape, "name": name}


OK = {"error_code": "OK", "error_message": ""}
STATUS = {"model_version_status": [{"version": "7", "state": "AVAILABLE", "status": OK}]}
SERVING_DEFAULT = {
    "inputs": {"inputs": tensor_info("DT_STRING", "serving_default_inputs:0")},
    "outputs": {
        "outputs": tensor_info("DT_STRING", "StatefulPartitionedCall_4:0"),
        "scores": tensor_info("DT_FLOAT", "StatefulPartitionedCall_4:1"),
        "truncated": tensor_info("DT_BOOL", "StatefulPartitionedCall_4:2"),
    },
    "method_name": "tensorflow/serving/predict",
    "defaults": {},
}
INIT_OP = {  # every TF2 SavedModel's, listed by TF Serving too
    "inputs": {},
    "outputs": {"__saved_model_init_op": {"dtype": "DT_INVALID", "name": "NoOp",
                                          "tensor_shape": {"dim": [], "unknown_rank": True}}},
    "method_name": "",
    "defaults": {},
}  # fmt: skip


@pytest.mark.parametrize(
    "path",
    ["/v1/models/reverse", "/v1/models/reverse/versions/7", "/v1/models/reverse/labels/stable",
     "/v1/models/reverse/labels/other"],  # GetModelStatus does not look at a label
)  # fmt: skip
def test_model_status_forms(client, path):
    answer = client.get(path)
    assert (answer.status_code, answer.json()) == (200, STATUS)


@pytest.mark.parametrize(
    "path",
    ["/v1/models/reverse/metadata", "/v1/models/reverse/versions/7/metadata",
     "/v1/models/reverse/labels/stable/metadata"],
)  # fmt: skip
def test_model_metadata_forms(client, path):
    answer = client.get(path)
    assert answer.status_code == 200
    body = answer.json()
    assert body["model_spec"] == {"name": "reverse", "signature_name": "", "version": "7"}
    defs = body["metadata"]["signature_def"]["signature_def"]
    assert set(body) == {"model_spec", "metadata"} and set(body["metadata"]) == {"signature_def"}
    assert defs["serving_default"] == SERVING_DEFAULT
    assert defs["__saved_model_init_op"] == INIT_OP
    assert defs["sample"]["inputs"] == {
        "inputs": tensor_info("DT_STRING", "sample_inputs:0"),
        "seed": {"dtype": "DT_INT32", "name": "sample_seed:0",
                 "tensor_shape": {"dim": [], "unknown_rank": False}},
    }  # fmt: skip
    names = {"serving_default", "nbest", "sample", "translate_ids", "attention", "guided"}
    assert set(defs) == {*names, "__saved_model_init_op"}


def b64(text: str) -> dict:
    return {"b64": base64.b64encode(text.encode()).decode()}


LINES = ["1 2 3", "4 5 6 7", ""]
PREDICT_FORMS = [
    # (path, body): each answers the export's translations of LINES
    ("/v1/models/reverse:predict", {"instances": LINES}),
    ("/v1/models/reverse:predict", {"signature_name": "serving_default", "instances": LINES}),
    ("/v1/models/reverse/versions/7:predict", {"instances": [{"inputs": s} for s in LINES]}),
    ("/v1/models/reverse/labels/stable:predict", {"instances": [b64(s) for s in LINES]}),
    ("/v1/models/reverse:predict", {"instances": [{"inputs": b64(s)} for s in LINES]}),
    ("/v1/models/reverse:predict", {"inputs": LINES}),
    ("/v1/models/reverse:predict", {"inputs": {"inputs": LINES}}),
    ("/v1/models/reverse:predict", {"inputs": [b64(s) for s in LINES]}),
    ("/v1/models/reverse:predict", {"signature_name": "", "inputs": {"inputs": LINES}}),
    ("/v1/MODELS/reverse:predict", {"inputs": LINES}),  # TF Serving's pattern ignores case
]


@pytest.mark.parametrize(("path", "body"), PREDICT_FORMS)
def test_predict_forms(client, direct, path, body):
    texts, scores, truncated = direct.search(LINES, nbest=1)
    answer = client.post(path, json=body)
    assert answer.status_code == 200, answer.text
    found = answer.json()
    if "instances" in body:  # rows: one object per instance
        assert list(found) == ["predictions"]
        rows = found["predictions"]
        assert [sorted(r) for r in rows] == [["outputs", "scores", "truncated"]] * len(LINES)
        columns = {k: [r[k] for r in rows] for k in rows[0]}
    else:  # columns: one list per output
        assert list(found) == ["outputs"]
        columns = found["outputs"]
    assert columns["outputs"] == [t[0] for t in texts]
    assert columns["truncated"] == truncated
    assert columns["scores"] == pytest.approx([s[0] for s in scores], abs=1e-6)


def test_predict_other_signatures(client, direct, exported):
    nbest = client.post(
        "/v1/models/reverse:predict", json={"signature_name": "nbest", "instances": LINES[:2]}
    ).json()["predictions"]
    assert [p["outputs"] for p in nbest] == direct.search(LINES[:2], nbest=2)[0]
    body = {"signature_name": "sample", "inputs": {"inputs": LINES[:2], "seed": 5}}
    sampled = client.post("/v1/models/reverse:predict", json=body).json()["outputs"]
    model = tf.saved_model.load(exported[1])
    reference = model.signatures["sample"](inputs=tf.constant(LINES[:2]), seed=tf.constant(5))
    assert sampled["outputs"] == [t.decode() for t in reference["outputs"].numpy()]


def test_an_ops_error_is_its_own_words():
    text = (
        "Graph execution error:\n\nDetected at node assert/Assert defined at (most recent call "
        "last):\n<stack traces unavailable>\nassertion failed: [constraints: more than 64 per "
        "sentence] [x = ] [65]\n\t [[{{node assert/Assert}}]] [Op:__inference_f_134]"
    )
    assert tf_serving.op_message(text) == (
        "assertion failed: [constraints: more than 64 per sentence] [x = ] [65]"
    )


def test_floats_are_written_as_tf_serving_writes_them():
    """WriteDecimal: six digits where they read back the same float32, else nine; whole
    numbers keep a decimal point (a float in JSON); NaN and infinities as JSON extensions."""
    values = np.array([0.2, 1 / 3, 9e6, 3.0, -2.5e-5, np.nan, -np.inf], np.float32)
    written = tensor_json.answer({"x": values}, rows=False)
    text = tf_serving.json_response(written).body.decode()
    assert text == '{"outputs": [0.2, 0.333333343, 9000000.0, 3.0, -2.5e-05, NaN, -Infinity]}'


MALFORMED = "Malformed request: {} {}"
ERRORS = [
    # (method, path, body, status, TF Serving's error message)
    ("GET", "/v1/models", None, 400, "Missing model name in request."),
    ("GET", "/v1/models/other", None, 404, "Could not find any versions of model other"),
    ("GET", "/v1/models/reverse/versions/6", None, 404,
     "Could not find version 6 of model reverse"),
    ("GET", "/v1/models/reverse/versions/x", None, 400,
     MALFORMED.format("GET", "/v1/models/reverse/versions/x")),
    ("GET", "/v1/models/reverse:predict", None, 400,
     MALFORMED.format("GET", "/v1/models/reverse:predict")),
    ("DELETE", "/v1/models/reverse", None, 400, MALFORMED.format("DELETE", "/v1/models/reverse")),
    ("POST", "/v1/models/reverse:explain", {}, 400,
     MALFORMED.format("POST", "/v1/models/reverse:explain")),
    ("POST", "/v1/models/reverse:PREDICT", {}, 400,  # the pattern ignores case, the verb not
     MALFORMED.format("POST", "/v1/models/reverse:PREDICT")),
    ("POST", "/v1/models/reverse/versions/99999999999999999999:predict", {}, 400,
     "Failed to convert version: 99999999999999999999 to numeric."),
    ("GET", "/v1/models/other/metadata", None, 404,
     "Servable not found for request: Latest(other)"),
    ("GET", "/v1/models/reverse/versions/6/metadata", None, 404,
     "Servable not found for request: Specific(reverse, 6)"),
    ("GET", "/v1/models/reverse/labels/canary/metadata", None, 400,
     "Unrecognized servable version label: canary"),
    ("POST", "/v1/models/other:predict", {"instances": ["1"]}, 404,
     "Servable not found for request: Latest(other)"),
    ("POST", "/v1/models/reverse/labels/canary:predict", {"instances": ["1"]}, 400,
     "Unrecognized servable version label: canary"),
    ("POST", "/v1/models/reverse:predict", {"signature_name": "zz", "instances": ["1"]}, 400,
     'Serving signature name: "zz" not found in signature def'),
    ("POST", "/v1/models/reverse:predict", {"signature_name": 5, "instances": ["1"]}, 400,
     "JSON Value: {\n    \"signature_name\": 5,\n    \"instances\": [\"1\"]\n} not formatted "
     "correctly. 'signature_name' key must be a string value."),
    ("POST", "/v1/models/reverse:predict", {"instances": ["1"], "inputs": ["1"]}, 400,
     "JSON Value: {\n    \"instances\": [\"1\"],\n    \"inputs\": [\"1\"]\n} Not formatted "
     "correctly expecting only one of 'inputs' or 'instances' keys to exist "),
    ("POST", "/v1/models/reverse:predict", {"signature_name": "nbest"}, 400,
     "Missing 'inputs' or 'instances' key"),
    ("POST", "/v1/models/reverse:predict", {"instances": "1 2"}, 400,
     'JSON Value: {\n    "instances": "1 2"\n} Expecting \'instances\' to be an list/array'),
    ("POST", "/v1/models/reverse:predict", {"instances": []}, 400,
     'JSON Value: {\n    "instances": []\n} No values in \'instances\' array'),
    ("POST", "/v1/models/reverse:predict", {"instances": [3]}, 400,
     "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: 3 "
     "Type: Number is not of expected type: string"),
    ("POST", "/v1/models/reverse:predict", {"instances": ["a", {"b64": "%%"}]}, 400,
     "Failed to process element: 1 of 'instances' list. Error: INVALID_ARGUMENT: Unable to "
     "base64 decode"),
    ("POST", "/v1/models/reverse:predict", {"instances": ["a", {"inputs": "b"}]}, 400,
     "Expecting value/list but got object at item 1 of input list"),
    ("POST", "/v1/models/reverse:predict", {"instances": [{"inputs": "a"}, "b"]}, 400,
     "Expecting object but got list at item 1 of input list"),
    ("POST", "/v1/models/reverse:predict", {"instances": [{"inputs": "a", "x": "b"}]}, 400,
     "Failed to process element: 0 key: x of 'instances' list. Error: INVALID_ARGUMENT: JSON "
     "object: does not have named input: x"),
    ("POST", "/v1/models/reverse:predict", {"signature_name": "sample", "instances": ["a"]}, 400,
     "instances is a plain list, but expecting list of objects as multiple input tensors "
     "required as per tensorinfo_map"),
    ("POST", "/v1/models/reverse:predict",
     {"signature_name": "sample", "inputs": {"inputs": ["a"]}}, 400,
     "Missing named input: seed in 'inputs' object."),
    ("POST", "/v1/models/reverse:predict", [1, 2], 400, "JSON Value: [1, 2] Is not object"),
    ("POST", "/v1/models/reverse:predict", b"", 400, "JSON Parse error: The document is empty"),
    ("POST", "/v1/models/reverse:predict", b"[" * 100_000, 400,  # past Python's stack
     "JSON Parse error: nested too deep"),
    ("POST", "/v1/models/reverse:classify", {"examples": [{"inputs": "1 2"}]}, 400,
     "Expected one or two output Tensors, found 3"),
    ("POST", "/v1/models/reverse/versions/7:regress", {"examples": [{"inputs": "1 2"}]}, 400,
     "Expected one output Tensor."),
    ("POST", "/v1/models/reverse/labels/stable:classify", {}, 400,
     "JSON Value: {} When method is classify, key 'examples' is expected and was not found"),
    ("POST", "/v1/models/reverse:regress", {"signature_name": "zz", "examples": [{}]}, 400,
     "No signature was found with the name: zz"),
    ("POST", "/v1/models/other:classify", {"examples": [{}]}, 404,
     "Servable not found for request: Latest(other)"),
]  # fmt: skip


@pytest.mark.parametrize(("method", "path", "body", "status", "message"), ERRORS)
def test_errors_are_tf_servings(client, method, path, body, status, message):
    if isinstance(body, bytes):
        answer = client.request(method, path, content=body)
    else:
        answer = client.request(method, path, json=body)
    assert (answer.status_code, answer.json()) == (status, {"error": message})


def test_a_label_names_the_served_version(exported):
    with pytest.raises(ValueError, match="--version_labels=stable=9: version 9 of reverse is not"):
        create_app(SavedModelBackend(exported[0], version_labels={"stable": "9"}))


def test_a_body_that_is_not_json(client):
    """The parser's own words follow TF Serving's prefix (rapidjson's differ from Python's)."""
    answer = client.post("/v1/models/reverse:predict", content=b"{not json")
    assert answer.status_code == 400 and list(answer.json()) == ["error"]
    assert answer.json()["error"].startswith("JSON Parse error: ") and "at offset: 1" in answer.text


def test_t2t_query_against_t2t_serve_writes_what_t2t_decode_writes(exported, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("\n".join(LINES) + "\n")
    bin_dir = os.path.dirname(sys.executable)
    decoded = command(
        "t2t-decode", f"--output_dir={os.path.dirname(exported[0])}/out", "--beam_size=2",
        "--alpha=0.6", f"--decode_from_file={source}",
    )  # fmt: skip
    assert decoded.returncode == 0, decoded.stderr[-3000:]
    flags = ["--allowed_hosts=translate.lan", "--version_labels=stable=7"]
    with t2t_serve(f"--export_dir={exported[0]}", *flags) as url:
        # The command's Host allow-list: its own address, loopback names, --allowed_hosts.
        port = int(url.rsplit(":", 1)[1])
        for host, status in [(f"127.0.0.1:{port}", 200), ("localhost", 200),
                             ("translate.lan", 200), ("attacker.example", 400)]:  # fmt: skip
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            connection.request("GET", "/v1/models/reverse/labels/stable/metadata",
                               headers={"Host": host})  # fmt: skip
            answer = connection.getresponse()
            assert answer.status == status, (host, answer.read())
            body = json.loads(answer.read())
            assert status == 200 or body["error"].startswith("Host: 'attacker.example' is not")
            connection.close()
        queried = subprocess.run(
            [os.path.join(bin_dir, "t2t-query"), f"--server={url}", "--model=reverse",
             f"--input_file={source}"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        nbest = subprocess.run(
            [os.path.join(bin_dir, "t2t-query"), f"--server={url}", "--model=reverse",
             "--signature_name=nbest", "--version=7"],
            input="1 2 3\n", capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert queried.returncode == 0, queried.stderr[-3000:]
    assert queried.stdout == decoded.stdout
    assert nbest.returncode == 0 and len(nbest.stdout.splitlines()) == 2, nbest.stderr[-2000:]
