"""A parsing run exported and queried returns exactly the trees t2t-decode writes: the export
embeds the problem's decoding constraint and its tree postprocessing."""

from __future__ import annotations

import keras
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops the SavedModel uses)
from decoding_helpers import TINY, t2t_decode

from t2t_lite.data.trees import parse_tree
from t2t_lite.hparams import get_hparams
from t2t_lite.model import Transformer
from t2t_lite.problems import get_problem
from t2t_lite.run.layout import CHECKPOINT_DIR
from t2t_lite.run.run import Run
from t2t_lite.run.run_info import RunInfo
from t2t_lite.serve import export

TREES = [
    "(ROOT (S (NP (NNP John)) (VP (VBZ has) (NP (DT a) (NN dog))) (. .)))",
    "(ROOT (S (NP (PRP We)) (VP (VBD left) (PP (IN for) (NP (NNP Paris)))) (. !)))",
    "(ROOT (FRAG (NP (DT The) (JJ old) (NN cat)) (, ,) (ADVP (RB again)) (. ?)))",
    "(ROOT (S (S (NP (PRP It)) (VP (VBZ works))) (, ,) (CC and) (S (NP (PRP it)) "
    "(VP (VBZ is) (ADJP (JJ fast)))) (. .)))",
    "(ROOT (NP (NP (NNS cats)) (-LRB- -LRB-) (NP (CD 3)) (-RRB- -RRB-)))",
    "(ROOT (S (NP (NNP Mary)) (VP (VBD said) ('' '') (S (NP (PRP she)) (VP (VBD left)))) "
    "(: --) (. .)))",
]
LINES = [
    "John has a dog .",
    "",
    "The old cat , again ?",
    "cats -LRB- 3 -RRB-",
    "Mary said '' she left -- .",
    "It works , and it is fast .",
    "unseen words here",
    "dog",
    "   We left for Paris !  ",
]
SEARCH = {"beam_size": 3, "alpha": 0.3, "extra_length": 24}


@pytest.fixture(scope="module")
def parsing_run(tmp_path_factory):
    """A parsing_trees data_dir made from literal trees and a random tiny model trained on it
    for no steps: its constrained outputs are well-formed trees of every shape the constraint
    allows, which is what the export must reproduce."""
    root = tmp_path_factory.mktemp("parsing")
    for split in ("train", "dev", "test"):
        (root / f"{split}.mrg").write_text("\n".join(TREES) + "\n")
    for tree in TREES:  # the literal trees parse
        parse_tree(tree)
    data_dir, output_dir = root / "data", root / "run"
    problem = get_problem("parsing_trees")
    metadata = problem.generate_data(
        str(data_dir), **{f"{s}_trees": str(root / f"{s}.mrg") for s in ("train", "dev", "test")}
    )
    vocab_size = problem.tokenizer(str(data_dir)).vocab_size
    output_size = metadata["vocab"]["output_size"]
    hparams = get_hparams("transformer_tiny", TINY + ",max_positions=64")
    info = RunInfo(
        "parsing_trees", str(data_dir), "transformer_tiny", hparams, vocab_size, output_size
    )
    info.save(str(output_dir))
    keras.utils.set_random_seed(3)
    model = Transformer.from_hparams(hparams, vocab_size, output_vocab_size=output_size)
    model.build()
    tf.train.CheckpointManager(
        tf.train.Checkpoint(model=model), str(output_dir / CHECKPOINT_DIR), 1
    ).save()
    (root / "in.txt").write_text("\n".join(LINES) + "\n")
    return root, str(output_dir)


@pytest.fixture(scope="module")
def decoded(parsing_run):
    root, output_dir = parsing_run
    outputs = {}
    for nbest in (1, 3):
        target = root / f"decoded{nbest}.txt"
        outputs[nbest] = t2t_decode(
            root / "in.txt", target, output_dir=output_dir, nbest=nbest, **SEARCH
        )
    return outputs


@pytest.fixture(scope="module")
def served(parsing_run):
    root, output_dir = parsing_run
    run = Run.restore(output_dir, search=SEARCH)
    assert run.search.constrained  # the parsing problems' default
    path, info = export.export_run(run, str(root / "export"), nbest=3)
    assert info["settings"]["constrained"] and info["problem"] == "parsing_trees"
    return tf.saved_model.load(path)


def test_served_trees_equal_decoded_trees(decoded, served):
    got = served.signatures["serving_default"](inputs=tf.constant(LINES))
    outputs = [s.decode("utf-8") for s in got["outputs"].numpy()]
    assert outputs == decoded[1]
    for line, tree in zip(LINES, outputs, strict=True):
        if line.strip():  # a tree over exactly the sentence's words, not a linearized string
            assert parse_tree(tree).leaves() == line.split()
        else:
            assert tree == ""


def test_served_nbest_equals_decoded_nbest(decoded, served):
    got = served.signatures["nbest"](inputs=tf.constant(LINES))
    outputs = got["outputs"].numpy()  # [lines, 3]
    scores = got["scores"].numpy()
    for i, line in enumerate(LINES):
        rows = [r.split(" ||| ") for r in decoded[3][3 * i : 3 * i + 3]]
        assert [r[0] for r in rows] == [str(i)] * 3
        if not line.strip():
            continue
        assert [o.decode("utf-8") for o in outputs[i]] == [r[1] for r in rows]
        assert scores[i] == pytest.approx([float(r[2]) for r in rows], abs=1e-5)


def test_unconstrained_parsing_export_is_refused(parsing_run, tmp_path):
    _, output_dir = parsing_run
    run = Run.restore(output_dir, search={**SEARCH, "constrained": False})
    with pytest.raises(ValueError, match="problem parsing_trees cannot be exported: uncon"):
        export.export_run(run, str(tmp_path / "export"))
    assert not (tmp_path / "export").exists() or not list((tmp_path / "export").iterdir())
