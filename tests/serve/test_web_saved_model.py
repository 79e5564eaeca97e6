"""t2t-serve --export_dir: the export's `attention` signature against `model.attention_maps` of
the restored run, and the API served from the SavedModel's signatures alone (translations as
the run's, search settings fixed at export, n-best up to the exported one)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import serve_helpers
import tensorflow as tf
from fastapi.testclient import TestClient

from t2t_lite.decode.exported import resolve_version
from t2t_lite.decode.visualize import token_labels
from t2t_lite.run.run import Run
from t2t_lite.serve import export
from t2t_lite.serve.web.app import create_app
from t2t_lite.serve.web.run_backend import RunBackend
from t2t_lite.serve.web.saved_model_backend import SavedModelBackend

SEARCH = {"beam_size": 3, "alpha": 0.6, "extra_length": 6}
LINES = ["we saw the red box", "", "  I took a door  ", " ".join(["the small boxes"] * 9)]


@pytest.fixture(autouse=True)
def _seed():
    """No reseeding: it would drop the module's SentencePiece resources (serve_helpers)."""
    yield


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(restored run, export_dir holding versions 1 and 2, version 2's path)."""
    root = tmp_path_factory.mktemp("web_saved_model")
    run = Run.restore(serve_helpers.text_run(root), search=SEARCH)
    functions = export.ServingFunctions.from_run(run, nbest=2)
    export_dir = str(root / "export")
    os.makedirs(os.path.join(export_dir, "1"))  # an older version without saved_model.pb
    path, _ = export.export_run(run, export_dir, version=2, nbest=2)
    assert export.ATTENTION_SIGNATURE in export.signatures(functions)
    return run, export_dir, path


@pytest.fixture(scope="module")
def backend(exported):
    return SavedModelBackend(exported[1])


def test_attention_signature_equals_attention_maps(exported, backend):
    run, _, _ = exported
    found = backend.signatures[export.ATTENTION_SIGNATURE](inputs=tf.constant(LINES))
    served = backend.signatures["serving_default"](inputs=tf.constant(LINES))
    hp = run.hparams
    assert found["encoder"].shape[1:3] == (hp.num_encoder_layers, hp.num_heads)
    assert found["decoder_cross"].shape[1:3] == (hp.num_decoder_layers, hp.num_heads)
    for i, line in enumerate(LINES):
        s, t = int(found["source_length"][i]), int(found["target_length"][i])
        if not line.strip():
            assert s == t == 0 and found["outputs"][i].numpy() == b""
            continue
        source = found["source_tokens"][i].numpy()
        ids = run.tokenizer.encode_py(line.strip())[: run.hparams.max_positions - 1] + [1]
        assert bool(found["truncated"][i]) == (i == 3) and s == len(ids)
        assert [b.decode() for b in source[:s]] == token_labels(run.tokenizer, ids)
        assert all(b == b"" for b in source[s:])
        searched = backend.signatures["translate_ids"](input_ids=tf.constant([ids]))
        output = [int(x) for x in searched["output_ids"][0] if x > 0]  # EOS included
        labels = [b.decode() for b in found["target_tokens"][i].numpy()]
        assert labels == token_labels(run.tokenizer, output) + [""] * (len(labels) - t)
        assert found["outputs"][i].numpy().decode() == run.tokenizer.decode_py(output)
        assert float(found["scores"][i]) == pytest.approx(float(served["scores"][i]), abs=1e-5)
        expected = run.model.attention_maps(np.array([ids]), np.array([output]))
        sizes = {"encoder": (s, s), "decoder_self": (t, t), "decoder_cross": (t, s)}
        for kind, (q, k) in sizes.items():
            got = found[kind][i].numpy()
            want = np.stack([w[0] for w in expected[kind]])
            np.testing.assert_allclose(got[:, :, :q, :k], want, atol=1e-5)
            assert not got[:, :, q:, :].any() and not got[:, :, :, k:].any()  # zero padding


def test_empty_batch_has_empty_attention(backend):
    found = backend.signatures[export.ATTENTION_SIGNATURE](inputs=tf.constant([], tf.string))
    assert found["encoder"].shape[0] == 0 and found["outputs"].shape == (0,)


def test_served_page_equals_the_runs(exported, backend):
    run, export_dir, path = exported
    assert resolve_version(export_dir) == path and resolve_version(path) == path
    facts = backend.facts()
    assert facts["problem"] == "text2text" and facts["step"] == 1
    assert facts["parameters"] == run.model.count_params()
    with open(os.path.join(path, "assets.extra", export.EXPORT_INFO)) as f:
        assert json.load(f)["settings"]["beam_size"] == 3
    caps = backend.capabilities
    assert caps.search_fixed and caps.max_nbest == 2 and caps.attention
    with (
        TestClient(create_app(backend), base_url="http://localhost") as served,
        TestClient(create_app(RunBackend(run)), base_url="http://localhost") as own,
    ):
        for nbest in (1, 2):
            body = {"sentences": LINES, "nbest": nbest}
            got, want = (c.post("/api/translate", json=body).json() for c in (served, own))
            # The export records the input limit it applies (the model's positions for 0).
            assert got["settings"] == {**want["settings"], "max_input_length": 24}
            for a, b in zip(got["results"], want["results"], strict=True):
                assert (a["source"], a["truncated"]) == (b["source"], b["truncated"])
                assert [h["text"] for h in a["hypotheses"]] == [h["text"] for h in b["hypotheses"]]
                np.testing.assert_allclose(
                    [h["score"] for h in a["hypotheses"]],
                    [h["score"] for h in b["hypotheses"]],
                    atol=1e-5,
                )
        got, want = (
            c.post("/api/attention", json={"sentence": LINES[0]}).json() for c in (served, own)
        )
        assert (got["source"], got["target"]) == (want["source"], want["target"])
        for kind in ("encoder", "decoder_self", "decoder_cross"):
            np.testing.assert_allclose(got[kind], want[kind], atol=2e-4)
        for body, field in (
            ({"sentences": ["a"], "beam_size": 4}, "beam_size"),
            ({"sentences": ["a"], "alpha": 0.0}, "alpha"),
            ({"sentences": ["a"], "patience": 1.0}, "patience"),
            ({"sentences": ["a"], "nbest": 3}, "nbest"),
        ):
            answer = served.post("/api/translate", json=body)
            assert answer.status_code == 422 and answer.json()["field"] == field
        assert served.post("/api/translate", json={"sentences": ["a"], "beam_size": 3}).is_success


def test_a_savedmodel_names_what_to_do_instead_of_streaming(backend):
    with TestClient(create_app(backend), base_url="http://localhost") as served:
        answer = served.post("/api/translate_stream", json={"sentence": LINES[0]})
        assert served.get("/api/info").json()["capabilities"]["streams"] is False
    assert (answer.status_code, answer.json()) == (
        422,
        {
            "error": "/api/translate_stream: a SavedModel searches a whole sentence inside its "
            "graph; POST /api/translate, or serve the training run (t2t-serve --output_dir=RUN) "
            "to stream tokens",
            "field": None,
        },
    )
