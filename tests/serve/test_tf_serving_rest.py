"""t2t-serve --export_dir speaks TF Serving's REST API (t2t_lite/serve/web/tf_serving.py): the
requests and answers of TF Serving's documentation (https://www.tensorflow.org/tfx/serving/
api_rest: "Model status API", "Predict API" in the row and the columnar format, the error
object) against a real export, and t2t-query against the t2t-serve command itself."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import tensorflow_text  # noqa: F401  (the SavedModel's tokenizer ops)
from decoding_helpers import write_tiny_run
from fastapi.testclient import TestClient
from tf_serving_helpers import t2t_serve

from t2t_lite.decode.exported import ExportedTranslator
from t2t_lite.run.run import Run
from t2t_lite.serve import export
from t2t_lite.serve.web.app import create_app
from t2t_lite.serve.web.saved_model_backend import SavedModelBackend

LINES = ["1 2 3", "4 5 6 7", ""]


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
    return TestClient(create_app(SavedModelBackend(exported[0])))


def test_model_status_as_tf_serving_documents_it(client):
    ok = {"error_code": "OK", "error_message": ""}
    expected = {"model_version_status": [{"version": "7", "state": "AVAILABLE", "status": ok}]}
    assert client.get("/v1/models/reverse").json() == expected
    assert client.get("/v1/models/reverse/versions/7").json() == expected
    missing = client.get("/v1/models/reverse/versions/6")
    assert missing.status_code == 404 and "error" in missing.json()
    signatures = client.get("/v1/models/reverse/metadata").json()["metadata"]["signature_def"]
    inputs = signatures["signature_def"]["serving_default"]["inputs"]
    assert inputs == {"inputs": {"dtype": "string", "shape": [None]}}
    assert {"serving_default", "nbest", "sample"} <= set(signatures["signature_def"])


def test_predict_in_the_row_and_the_columnar_format(client, exported):
    direct = ExportedTranslator(exported[0])
    texts, scores, truncated = direct.search(LINES, nbest=1)
    rows = client.post(
        "/v1/models/reverse:predict", json={"signature_name": "serving_default", "instances": LINES}
    )
    assert rows.status_code == 200
    predictions = rows.json()["predictions"]
    assert [p["outputs"] for p in predictions] == [t[0] for t in texts]
    assert [p["scores"] for p in predictions] == pytest.approx([s[0] for s in scores], abs=1e-6)
    assert [p["truncated"] for p in predictions] == truncated
    # The columnar format, with the versioned URL and the default signature.
    columns = client.post("/v1/models/reverse/versions/7:predict", json={"inputs": LINES}).json()
    assert columns["outputs"]["outputs"] == [t[0] for t in texts]
    nbest = client.post(
        "/v1/models/reverse:predict", json={"signature_name": "nbest", "instances": LINES[:1]}
    ).json()["predictions"]
    assert nbest[0]["outputs"] == direct.search(LINES[:1], nbest=2)[0][0]
    # Named inputs, row by row ({"inputs": ...} objects), as TF Serving takes them too.
    named = client.post("/v1/models/reverse:predict", json={"instances": [{"inputs": "1 2 3"}]})
    assert named.json()["predictions"][0]["outputs"] == texts[0][0]


@pytest.mark.parametrize(
    ("path", "body", "status", "message"),
    [
        ("/v1/models/other:predict", {"instances": ["1"]}, 404, "Servable not found"),
        ("/v1/models/reverse:predict", {"signature_name": "zz", "instances": ["1"]}, 404,
         'Serving signature name: "zz" not found in signature def'),
        ("/v1/models/reverse:predict", {"signature_name": "serving_default"}, 400,
         "Missing 'inputs' or 'instances' key"),
        ("/v1/models/reverse:predict", {"instances": [3]}, 400, ""),
        ("/v1/models/reverse:predict", "not json", 400, "JSON Parse error"),
    ],
)  # fmt: skip
def test_errors_are_tf_servings_error_object(client, path, body, status, message):
    if isinstance(body, str):
        found = client.post(path, content=body, headers={"Content-Type": "application/json"})
    else:
        found = client.post(path, json=body)
    assert found.status_code == status
    assert set(found.json()) == {"error"} and message in found.json()["error"]


def test_t2t_query_against_t2t_serve_writes_what_t2t_decode_writes(exported, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("\n".join(LINES) + "\n")
    bin_dir = os.path.dirname(sys.executable)
    decoded = subprocess.run(
        [os.path.join(bin_dir, "t2t-decode"), f"--output_dir={os.path.dirname(exported[0])}/out",
         "--beam_size=2", "--alpha=0.6", f"--decode_from_file={source}"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert decoded.returncode == 0, decoded.stderr[-3000:]
    with t2t_serve(f"--export_dir={exported[0]}") as url:
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
