"""t2t-serve's JSON API on a training run, through FastAPI's TestClient: translations equal
t2t-decode's for the same checkpoint and settings, attention maps match the tokens and
t2t-visualize's data, and every kind of bad input gets a 4xx answer naming the field."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import serve_helpers
from decoding_helpers import t2t_decode
from fastapi.testclient import TestClient

from t2t_lite.decode.translator import Translator
from t2t_lite.decode.visualize import sentence_attention
from t2t_lite.run.run import Run
from t2t_lite.run.run_flags import RunFlags
from t2t_lite.serve.web.api import Limits
from t2t_lite.serve.web.app import create_app
from t2t_lite.serve.web.run_backend import RunBackend, TranslatorCache
from t2t_lite.serve.web.server import load_backend, loopback_warning, parse_names

LIMITS = Limits(max_sentences=12, max_characters=120, max_concurrent=2, max_beam_size=6)
LONG = " ".join(["the red box"] * 9)  # more tokens than the model's 24 positions


@pytest.fixture(autouse=True)
def _seed():
    """No reseeding: it would drop the module's SentencePiece resources (serve_helpers)."""
    yield


@pytest.fixture(scope="module")
def output_dir(tmp_path_factory):
    return serve_helpers.text_run(tmp_path_factory.mktemp("web_api"))


@pytest.fixture(scope="module")
def backend(output_dir):
    return load_backend(RunFlags(output_dir))


@pytest.fixture(scope="module")
def client(backend):
    with TestClient(create_app(backend, LIMITS), base_url="http://localhost") as client:
        yield client


def decoded(output_dir, tmp_path, lines, nbest, **search):
    """t2t-decode's output for `lines`: per line, [(text, score)] (Moses n-best lines)."""
    source, target = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    found = [[] for _ in lines]
    for line in t2t_decode(source, target, output_dir=output_dir, nbest=nbest, **search):
        index, text, score = line.split(" ||| ")
        found[int(index)].append((text, float(score)))
    return found


@pytest.mark.parametrize(
    "search", [{}, {"beam_size": 3, "alpha": 0.6}, {"beam_size": 3, "alpha": 1.2, "patience": 1.0}]
)
def test_translations_equal_t2t_decode(output_dir, client, tmp_path, search):
    lines = serve_helpers.sentences(9, seed=5) + ["", "  we saw  ", LONG]
    nbest = search.get("beam_size", 2)  # the problem's default beam is 4
    expected = decoded(output_dir, tmp_path, lines, nbest, **search)
    answer = client.post("/api/translate", json={"sentences": lines, "nbest": nbest, **search})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["settings"]["nbest"] == nbest
    assert body["settings"]["patience"] == search.get("patience", 0.0)
    for line, result, want in zip(lines, body["results"], expected, strict=True):
        assert result["source"] == line.strip()
        assert result["truncated"] == (line == LONG)
        if not line.strip():  # t2t-decode writes empty hypotheses scored 0
            assert result["hypotheses"] == [] and want == [("", 0.0)] * nbest
            continue
        got = [(h["text"], h["score"]) for h in result["hypotheses"]]
        assert [text for text, _ in got] == [text for text, _ in want]
        np.testing.assert_allclose([s for _, s in got], [s for _, s in want], atol=2e-6)


def test_sampling_equals_t2t_decode_sampling(output_dir, client, tmp_path):
    lines = serve_helpers.sentences(6, seed=8)
    sampling = "temperature:1.5,top_k:20,seed:7"
    with open(tmp_path / "in.txt", "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
    expected = t2t_decode(
        tmp_path / "in.txt", tmp_path / "out", output_dir=output_dir, nbest=1, sampling=sampling
    )
    answer = client.post("/api/translate", json={"sentences": lines, "sampling": sampling})
    assert answer.status_code == 200, answer.text
    assert [r["hypotheses"][0]["text"] for r in answer.json()["results"]] == expected
    assert answer.json()["settings"]["sampling"] and answer.json()["settings"]["seed"] == 7
    beam = client.post("/api/translate", json={"sentences": lines}).json()["results"]
    assert [r["hypotheses"][0]["text"] for r in beam] != expected  # temperature 1.5 differs


def test_int8_backend_serves_what_t2t_decode_quantize_writes(output_dir, tmp_path):
    """t2t-serve --quantize=int8 serves t2t-decode --quantize=int8's hypotheses and scores."""
    lines = serve_helpers.sentences(6, seed=11)
    expected = decoded(output_dir, tmp_path, lines, 2, quantize="int8")
    backend = load_backend(RunFlags(output_dir, quantize="int8"))
    assert backend.facts()["quantize"] == "int8"
    with TestClient(create_app(backend, LIMITS), base_url="http://localhost") as int8_client:
        body = int8_client.post("/api/translate", json={"sentences": lines, "nbest": 2}).json()
    for result, want in zip(body["results"], expected, strict=True):
        got = [(h["text"], h["score"]) for h in result["hypotheses"]]
        assert [text for text, _ in got] == [text for text, _ in want]
        np.testing.assert_allclose([s for _, s in got], [s for _, s in want], atol=2e-6)


def test_jit_compile_backend_serves_the_plain_searchs_hypotheses(output_dir, client):
    """t2t-serve --jit_compile: every search compiled by XLA (`Translator(jit_compile=True)`)
    serves the hypotheses and scores of the plain search."""
    lines = serve_helpers.sentences(6, seed=12)
    request = {"sentences": lines, "nbest": 2}
    backend = load_backend(RunFlags(output_dir), jit_compile=True)
    assert backend.translators.get(backend.capabilities.defaults).jit_compile
    with TestClient(create_app(backend, LIMITS), base_url="http://localhost") as compiled_client:
        compiled = compiled_client.post("/api/translate", json=request).json()["results"]
    plain = client.post("/api/translate", json=request).json()["results"]
    for got, want in zip(compiled, plain, strict=True):
        assert [h["text"] for h in got["hypotheses"]] == [h["text"] for h in want["hypotheses"]]
        np.testing.assert_allclose(
            [h["score"] for h in got["hypotheses"]],
            [h["score"] for h in want["hypotheses"]],
            rtol=1e-5,
            atol=1e-5,
        )


def test_default_settings_are_the_runs(output_dir, client):
    run = Run.restore(output_dir)
    answer = client.post("/api/translate", json={"sentences": ["we saw the box"]}).json()
    assert answer["settings"] == run.search.override(nbest=1).to_dict()
    best = Translator.from_run(run).hypotheses(["we saw the box"], ["x"], log_progress=False)
    assert answer["results"][0]["hypotheses"][0]["text"] == best[0][0].text


def test_attention_matches_tokens_and_visualize(output_dir, client):
    sentence = "you took the small boxes here"
    answer = client.post("/api/attention", json={"sentence": sentence, "beam_size": 2})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    run = Run.restore(output_dir, search={"beam_size": 2})
    reference = sentence_attention(Translator.from_run(run), sentence)
    assert body["source"] == reference["source"] and body["source"][-1] == "</s>"
    assert body["target"] == reference["target"]
    assert body["translation"] == reference["translation"]
    s, t = len(body["source"]), len(body["target"])
    hp = run.hparams
    shapes = {
        "encoder": (hp.num_encoder_layers, hp.num_heads, s, s),
        "decoder_self": (hp.num_decoder_layers, hp.num_heads, t, t),
        "decoder_cross": (hp.num_decoder_layers, hp.num_heads, t, s),
    }
    for kind, shape in shapes.items():
        weights = np.array(body[kind])
        assert weights.shape == shape, kind
        np.testing.assert_allclose(weights, np.stack(reference[kind]), atol=6e-5)
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-3)  # each query's weights


def test_info_page_and_docs(output_dir, client, backend):
    info = client.get("/api/info").json()
    facts = info["facts"]
    assert facts["problem"] == "text2text" and facts["hparams_set"] == "transformer_tiny"
    assert facts["step"] == 1 and facts["checkpoint"].endswith("ckpt-1")
    assert facts["parameters"] == backend.run.model.count_params() > 0
    assert facts["vocab_size"] == 60
    assert info["capabilities"]["attention"] and not info["capabilities"]["parsing"]
    assert info["limits"]["max_sentences"] == LIMITS.max_sentences
    page = client.get("/")
    assert page.status_code == 200 and 'id="sentences"' in page.text
    for asset in ("app.js", "draw.js", "style.css"):
        assert client.get(f"/static/{asset}").status_code == 200, asset
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/api/info", "/api/translate", "/api/attention", "/api/evalb"} <= set(paths)
    # The API pages load their scripts from the server itself (fastapi-offline), not a CDN.
    for page, script in (("/docs", "swagger-ui-bundle.js"), ("/redoc", "redoc.standalone.js")):
        html = client.get(page).text
        assert "cdn" not in html and f'src="/static-offline-docs/{script}"' in html, html
        assert client.get(f"/static-offline-docs/{script}").status_code == 200


OK = {"sentences": ["we saw"]}
BAD_REQUESTS = [
    # (path, JSON body or raw bytes, status, field)
    ("/api/translate", b'{"sentences": ["a"', 400, "body"),
    ("/api/translate", b"not json", 400, "body"),
    ("/api/translate", [1, 2], 422, "body"),
    ("/api/translate", {}, 422, "sentences"),
    ("/api/translate", {"sentences": []}, 422, "sentences"),
    ("/api/translate", {"sentences": "we saw"}, 422, "sentences"),
    ("/api/translate", {"sentences": ["a", 5]}, 422, "sentences[1]"),
    ("/api/translate", {"sentences": ["a"] * 13}, 413, "sentences"),
    ("/api/translate", {"sentences": ["a", "b" * 121]}, 413, "sentences[1]"),
    ("/api/translate", b'{"sentences": ["\\ud800"]}', 422, "sentences[0]"),
    ("/api/translate", {**OK, "beam": 2}, 422, "beam"),
    ("/api/translate", {**OK, "beam_size": 0}, 422, "beam_size"),
    ("/api/translate", {**OK, "beam_size": 7}, 422, "beam_size"),
    ("/api/translate", {**OK, "beam_size": 10**30}, 422, "beam_size"),
    ("/api/translate", {**OK, "beam_size": True}, 422, "beam_size"),
    ("/api/translate", {**OK, "beam_size": "3"}, 422, "beam_size"),
    ("/api/translate", {**OK, "beam_size": 2.5}, 422, "beam_size"),
    ("/api/translate", {**OK, "alpha": -0.1}, 422, "alpha"),
    ("/api/translate", {**OK, "alpha": 11}, 422, "alpha"),
    ("/api/translate", b'{"sentences": ["a"], "alpha": NaN}', 422, "alpha"),
    ("/api/translate", b'{"sentences": ["a"], "alpha": Infinity}', 422, "alpha"),
    ("/api/translate", {**OK, "patience": -0.5}, 422, "patience"),
    ("/api/translate", {**OK, "patience": 101}, 422, "patience"),
    ("/api/translate", b'{"sentences": ["a"], "patience": NaN}', 422, "patience"),
    ("/api/translate", {**OK, "patience": "1"}, 422, "patience"),
    ("/api/translate", {**OK, "nbest": 0}, 422, "nbest"),
    ("/api/translate", {**OK, "beam_size": 2, "nbest": 3}, 422, "nbest"),
    ("/api/translate", {**OK, "sampling": "temperature:hot"}, 422, "sampling"),
    ("/api/translate", {**OK, "sampling": "top_k:-1"}, 422, "sampling"),
    ("/api/translate", {**OK, "sampling": "", "nbest": 2}, 422, "sampling"),
    ("/api/translate", {**OK, "sampling": 1}, 422, "sampling"),
    ("/api/translate", {**OK, "constraints": [["x"] * 17]}, 413, "constraints[0]"),
    ("/api/translate", {**OK, "constraints": [["x" * 70, "y" * 60]]}, 413, "constraints[0]"),
    ("/api/translate", {**OK, "constraints": [["x" * 121]]}, 413, "constraints[0][0]"),
    ("/api/attention", {"sentence": "   "}, 422, "sentence"),
    ("/api/attention", {"sentence": "a" * 121}, 413, "sentence"),
    ("/api/attention", {"sentence": "we", "nbest": -1}, 422, "nbest"),
    ("/api/attention", {"sentences": ["we"]}, 422, "sentence"),
    ("/api/evalb", {"gold": "(S (NP a)", "test": "(S (NN a))"}, 422, "gold"),
    ("/api/evalb", {"gold": "(S (NN a))", "test": "no tree"}, 422, "test"),
    ("/api/evalb", {"gold": "(S (NN a))"}, 422, "test"),
    # 301 levels in 905 characters: refused before it is read, whatever it costs to score
    ("/api/evalb", {"gold": "(A" * 301 + " x" + ")" * 301, "test": "(S (NN a))"}, 413, "gold"),
]


def test_every_error_body_has_the_documented_shape(client):
    for method, path, status in [
        ("GET", "/nope", 404),
        ("GET", "/static/nope.js", 404),
        ("DELETE", "/api/translate", 405),
        ("GET", "/api/translate", 405),
    ]:
        answer = client.request(method, path)
        assert answer.status_code == status, (method, path)
        assert answer.json() == {"error": answer.json()["error"], "field": None}
        assert answer.json()["error"].startswith(f"{path}: "), answer.json()


@pytest.mark.parametrize(("path", "body", "status", "field"), BAD_REQUESTS)
def test_bad_input_gets_4xx_naming_the_field(client, path, body, status, field):
    if isinstance(body, bytes):
        answer = client.post(path, content=body, headers={"Content-Type": "application/json"})
    else:
        answer = client.post(path, json=body)
    assert answer.status_code == status, answer.text
    error = answer.json()
    assert error["field"] == field
    assert field.split("[")[0] in error["error"], error  # the message names the field too


def test_form_body_and_oversized_body(client):
    answer = client.post("/api/translate", data={"sentences": "a"})
    assert answer.status_code == 422 and "Content-Type: application/json" in answer.json()["error"]
    answer = client.post(
        "/api/translate",
        content=b" " * (LIMITS.max_body_bytes + 1),
        headers={"Content-Type": "application/json"},
    )
    assert answer.status_code == 413 and answer.json()["field"] == "body"
    assert client.get("/api/translate").status_code == 405
    assert client.get("/no/such/page").status_code == 404


def test_concurrent_requests_beyond_the_limit_get_429():
    backend = serve_helpers.BlockingBackend()
    with TestClient(
        create_app(backend, Limits(max_concurrent=2)), base_url="http://localhost"
    ) as client:
        answers = []

        def request():
            answers.append(client.post("/api/translate", json=OK).status_code)

        threads = [threading.Thread(target=request) for _ in range(2)]
        for thread in threads:
            thread.start()
        for _ in threads:  # both are searching in worker threads
            assert backend.started.acquire(timeout=30)
        assert client.get("/api/info").status_code == 200  # the server still answers
        busy = client.post("/api/translate", json=OK)
        assert busy.status_code == 429 and "--max_concurrent=2" in busy.json()["error"]
        answer = client.post("/api/attention", json={"sentence": "a"})
        assert answer.status_code == 404  # this backend has no attention
        backend.release.set()
        for thread in threads:
            thread.join(30)
        assert answers == [200, 200]
        assert client.post("/api/translate", json=OK).status_code == 200


def test_translator_cache_keeps_the_most_recent(output_dir):
    run = Run.restore(output_dir)
    cache = TranslatorCache(run, size=2)
    first = [cache.get(run.search.override(beam_size=b)) for b in (1, 2)]
    assert cache.get(run.search.override(beam_size=1)) is first[0]
    cache.get(run.search.override(beam_size=3))  # evicts beam 2, the least recent
    assert len(cache) == 2
    assert cache.get(run.search.override(beam_size=1)) is first[0]
    assert cache.get(run.search.override(beam_size=2)) is not first[1]
    # Another alpha: the cached translator's traced search, nothing evicted.
    other = cache.get(run.search.override(beam_size=1, alpha=1.3))
    assert other.settings.alpha == 1.3 and other._search is first[0]._search
    assert len(cache) == 2 and cache.get(run.search.override(beam_size=1)) is first[0]


def test_run_backend_facts_and_limits_checks(output_dir):
    backend = RunBackend(Run.restore(output_dir))
    assert backend.capabilities.defaults.nbest == 1 and not backend.capabilities.search_fixed
    with pytest.raises(ValueError, match="--max_concurrent"):
        Limits(max_concurrent=0)


def test_load_backend_flags_and_binding_warning(output_dir):
    with pytest.raises(ValueError, match="exactly one of --output_dir"):
        load_backend()
    with pytest.raises(ValueError, match="exactly one of --output_dir"):
        load_backend(RunFlags(output_dir), export_dir="x")
    with pytest.raises(ValueError, match="--beam_size, --checkpoint: only with --output_dir"):
        load_backend(RunFlags(checkpoint="c", beam_size=2), export_dir="x")
    with pytest.raises(ValueError, match="--quantize: only with --output_dir"):
        load_backend(RunFlags(quantize="int8"), export_dir="x")
    with pytest.raises(ValueError, match="--jit_compile: only with --output_dir"):
        load_backend(export_dir="x", jit_compile=True)
    with pytest.raises(ValueError, match="--version_labels: only with --export_dir"):
        load_backend(RunFlags(output_dir), version_labels={"stable": "1"})
    assert parse_names("stable=7, canary=8", "--version_labels") == {"stable": "7", "canary": "8"}
    with pytest.raises(ValueError, match="--version_labels: 'stable' is not NAME=VALUE"):
        parse_names("stable", "--version_labels")
    with pytest.raises(FileNotFoundError, match="--export_dir="):
        load_backend(export_dir=output_dir)
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        assert loopback_warning(host, 8080) is None, host
    for host in ("0.0.0.0", "192.168.1.5", "::", "example.org"):
        assert "not a loopback address" in loopback_warning(host, 8080), host
