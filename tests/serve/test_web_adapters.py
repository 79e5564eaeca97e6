"""t2t-serve with LoRA adapters over its run (`--adapters=NAME=RUN`, a request's `adapter`
field): each request is answered by the adapter it names, as t2t-decode restores that adapter
run; an unknown name is a 422 naming the field; an adapter of other base weights is refused."""

from __future__ import annotations

import os
import shutil

import pytest
import tensorflow as tf
from fastapi.testclient import TestClient
from lora_helpers import adapter_run, parent_run

from t2t_lite.decode.translator import Translator
from t2t_lite.model import lora
from t2t_lite.run.adapter import AdapterMismatchError
from t2t_lite.run.layout import CHECKPOINT_DIR
from t2t_lite.run.run import Run
from t2t_lite.run.run_flags import RunFlags
from t2t_lite.serve.web.adapters import parse_adapters
from t2t_lite.serve.web.api import Limits
from t2t_lite.serve.web.app import create_app
from t2t_lite.serve.web.server import load_backend

LINES = ["1 2 3", "4 5 6 7", "9 9 8"]
SEARCH = {"beam_size": 2, "alpha": 0.6}


@pytest.fixture(autouse=True)
def _seed():
    """Overrides conftest's reseeding: the module keeps its restored runs across tests."""
    yield


def _zero_adapter(trained: str, folder: str) -> None:
    """A copy of the adapter run `trained` whose B matrices are zero: the base's outputs."""
    shutil.copytree(trained, folder)
    model = Run.restore(folder).model
    for b in lora.adapter_weights(model).weights[1::2]:
        b.assign(tf.zeros_like(b))
    checkpoint = tf.train.Checkpoint(model=lora.adapter_weights(model))
    tf.train.CheckpointManager(checkpoint, os.path.join(folder, CHECKPOINT_DIR), 9).save(10**6)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("adapters"))
    data_dir, parent = parent_run(root)
    tuned, zero = os.path.join(root, "tuned"), os.path.join(root, "zero")
    adapter_run(data_dir, parent, tuned, rank=4)
    _zero_adapter(tuned, zero)
    return {"root": root, "parent": parent, "tuned": tuned, "zero": zero}


@pytest.fixture(scope="module")
def client(runs):
    adapters = {"calc": runs["tuned"], "none": runs["zero"]}
    backend = load_backend(RunFlags(runs["parent"], **SEARCH), adapters=adapters)
    with TestClient(create_app(backend, Limits()), base_url="http://localhost") as client:
        yield client


def _scores(client, adapter=None) -> list[tuple[str, float]]:
    body = {"sentences": LINES, **({"adapter": adapter} if adapter else {})}
    answer = client.post("/api/translate", json=body)
    assert answer.status_code == 200, answer.text
    return [
        (r["hypotheses"][0]["text"], r["hypotheses"][0]["score"]) for r in answer.json()["results"]
    ]


def test_each_request_gets_the_adapter_it_names(runs, client):
    base, tuned, zero = _scores(client), _scores(client, "calc"), _scores(client, "none")
    want = Translator.from_run(runs["tuned"], **SEARCH).translate(LINES, scores=True)
    assert [t for t, _ in tuned] == [t for t, _ in want]
    assert [s for _, s in tuned] == pytest.approx([s for _, s in want], abs=1e-5)
    assert [s for _, s in tuned] != pytest.approx([s for _, s in base], abs=1e-4)
    assert zero == [(t, pytest.approx(s, abs=1e-6)) for t, s in base]  # B = 0: the base
    assert _scores(client) == base  # choosing an adapter leaves the base as it was
    facts = client.get("/api/info").json()["facts"]
    assert facts["adapters"] == {"calc": runs["tuned"], "none": runs["zero"]}


def test_an_unknown_adapter_is_a_422_naming_the_field(client):
    answer = client.post("/api/translate", json={"sentences": ["1 2"], "adapter": "writer"})
    assert answer.status_code == 422
    assert answer.json() == {
        "error": "adapter: 'writer' is not one of this server's (calc, none)",
        "field": "adapter",
    }
    answer = client.post("/api/attention", json={"sentence": "1 2", "adapter": "calc"})
    assert answer.status_code == 200, answer.text


def test_an_adapter_of_other_base_weights_is_refused(runs):
    _, other = parent_run(runs["root"], seed=8, name="other_parent")
    with pytest.raises(AdapterMismatchError, match=r"--adapters=calc=.*sha256 \w{16}, but the "
                       r"served --output_dir=.*other_parent has sha256 \w{16}"):  # fmt: skip
        load_backend(RunFlags(other), adapters={"calc": runs["tuned"]})
    with pytest.raises(ValueError, match="--adapters=calc=.*: not an adapter run"):
        load_backend(RunFlags(runs["parent"]), adapters={"calc": runs["parent"]})


def test_adapters_flag_parsing():
    assert parse_adapters("calc=runs/a, writer=runs/b") == {"calc": "runs/a", "writer": "runs/b"}
    assert parse_adapters("") == {}
    for bad in ("calc", "=runs/a", "calc=a,calc=b"):
        with pytest.raises(ValueError, match="--adapters: .* is not NAME=RUN"):
            parse_adapters(bad)
