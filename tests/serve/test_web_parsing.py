"""t2t-serve on a parsing run: outputs come with their tree as JSON (what the page draws), equal
to t2t-decode's trees, and /api/evalb scores a pasted gold tree as t2t-evalb does."""

from __future__ import annotations

import pytest
import serve_helpers

from t2t_lite.data.trees import Tree, parse_tree
from t2t_lite.decode.translator import Translator
from t2t_lite.metrics import evalb
from t2t_lite.run.run import Run
from t2t_lite.serve.web.trees import MAX_DEPTH, tree_json

SENTENCES = ["We saw the red box .", "a small box , a green door"]
SEARCH = {"beam_size": 3, "alpha": 0.3, "extra_length": 24}


@pytest.fixture(scope="module")
def output_dir(tmp_path_factory):
    return serve_helpers.parsing_run(tmp_path_factory.mktemp("web_parsing"))


@pytest.fixture(scope="module")
def client(output_dir):
    with serve_helpers.run_client(output_dir, **SEARCH) as client:
        yield client


def words(node: dict) -> list[str]:
    """The leaves of a JSON tree, left to right."""
    if "word" in node:
        return [node["word"]]
    return [w for child in node["children"] for w in words(child)]


def test_trees_equal_t2t_decode_and_cover_the_words(output_dir, client):
    answer = client.post("/api/translate", json={"sentences": SENTENCES, "nbest": 2})
    assert answer.status_code == 200, answer.text
    assert client.get("/api/info").json()["capabilities"]["parsing"]
    translator = Translator.from_run(Run.restore(output_dir, search={**SEARCH, "nbest": 2}))
    expected = translator.hypotheses(SENTENCES, ["a", "b"], log_progress=False)
    for sentence, result, want in zip(SENTENCES, answer.json()["results"], expected, strict=True):
        assert [h["text"] for h in result["hypotheses"]] == [h.text for h in want]
        for hypothesis in result["hypotheses"]:
            assert hypothesis["tree"] == tree_json(parse_tree(hypothesis["text"]))
            assert words(hypothesis["tree"]) == sentence.split()


def test_evalb_of_one_sentence(client):
    gold = serve_helpers.GOLD_TREES[0]
    test = "(ROOT (S (NP (PRP We)) (VP (VBD saw) (NP (DT the) (JJ red)) (NP (NN box))) (. .)))"
    answer = client.post("/api/evalb", json={"gold": gold, "test": test})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    row = evalb.score_sentence(parse_tree(gold), parse_tree(test))
    assert body["status"] == "ok" and (body["matched"], body["gold_brackets"]) == (3, 4)
    assert (body["precision"], body["recall"]) == (row.precision, row.recall) == (60.0, 75.0)
    assert body["f1"] == pytest.approx(2 * 60.0 * 75.0 / 135.0)
    assert words(body["gold_tree"]) == "We saw the red box .".split()
    same = client.post("/api/evalb", json={"gold": gold, "test": gold}).json()
    assert same["f1"] == 100.0 and same["crossing"] == 0
    other = client.post("/api/evalb", json={"gold": gold, "test": serve_helpers.GOLD_TREES[1]})
    assert other.json()["status"] == "error" and "unmatch" in other.json()["message"]


def test_deep_trees_are_not_sent_as_json():
    deep = Tree("NN", ["word"])
    for _ in range(MAX_DEPTH):
        deep = Tree("X", [deep])
    assert tree_json(deep) is None
    assert tree_json(Tree("S", [Tree("NN", ["a"])])) == {
        "label": "S",
        "children": [{"label": "NN", "word": "a"}],
    }
