"""t2t-export end to end on a tiny SentencePiece run: a fresh process loads the SavedModel after
`import tensorflow_text` and reproduces t2t-decode's translations; every op is a TensorFlow core
or tensorflow-text op; saved_model_cli (our wrapper) shows and runs it; t2t-query gets the same
translations through a loopback REST stand-in serving the SavedModel; hostile inputs get answers.

One export (a subprocess running t2t-export) is shared by the module; the other subprocesses
(fresh-process load, saved_model_cli show and run) start together and are awaited by the tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time

import keras
import numpy as np
import pytest
import tensorflow as tf
from command_helpers import run_json
from decoding_helpers import t2t_decode
from tf_serving_helpers import serving

from t2t_lite.data import load_tokenizer
from t2t_lite.hparams import SearchSettings, get_hparams
from t2t_lite.model.transformer import Transformer
from t2t_lite.problems import get_problem
from t2t_lite.run.layout import CHECKPOINT_DIR
from t2t_lite.run.run import Run, restore_model
from t2t_lite.run.run_info import RunInfo
from t2t_lite.serve import export, query, versions

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
MAX_POSITIONS = 40
SEARCH = ("--beam_size=3", "--alpha=0.6", "--extra_length=10")
WORDS = "the a cat dog sat on mat big small house red blue runs over under Katze Hund Haus rot"
SPECIAL = [
    "",
    "   \t ",
    "  the cat sat on the mat  ",
    "der Hund läuft über die Straße",
    "日本語のテキスト",
    "Привет, мир",
    " ".join(["the big red house"] * 30),  # longer than the model's positions: truncated
]
# Loads and translates with nothing of t2t_lite imported; lists the registered ops.
FRESH_PROCESS = os.path.join(os.path.dirname(__file__), "..", "fresh_process_translate.py")

# t2t-decode prints scores to 6 decimals, and float32 scores near -10 lie 1e-6 apart: the
# SavedModel's graph and the eager decode round their sums apart by up to 2 of those units where
# oneDNN computes, and by 3 on an AVX2-only CPU, where TensorFlow's own kernels do.
SCORE_ATOL = 4e-6


@pytest.fixture(autouse=True)
def _seed():
    """Overrides conftest's reseeding: tf.random.set_seed clears TensorFlow's kernel cache,
    which drops SentencePiece resources created earlier in the process (the module's loaded
    SavedModel)."""
    yield


def _sentences(count: int) -> list[str]:
    rng = np.random.default_rng(7)
    words = WORDS.split()
    return [" ".join(rng.choice(words, rng.integers(2, 12))) for _ in range(count)]


def _write_lines(path, lines: list[str]) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def _run(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV
    )


def _finish(process: subprocess.Popen) -> str:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err.decode()[-3000:]
    return out.decode("utf-8")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A text2text run: SentencePiece data_dir, a random tiny model's checkpoint, its export and
    the 100 test lines (93 random sentences and the special ones)."""
    root = tmp_path_factory.mktemp("export")
    sources, targets = _sentences(120), _sentences(120)
    files = {}
    for split, part in (("train", slice(0, 100)), ("dev", slice(100, 120))):
        files[f"{split}_src"] = _write_lines(root / f"{split}.src", sources[part])
        files[f"{split}_tgt"] = _write_lines(root / f"{split}.tgt", targets[part])
    data_dir, output_dir = str(root / "data"), str(root / "run")
    get_problem("text2text").generate_data(data_dir, vocab_size=100, **files)
    vocab_size = load_tokenizer(data_dir).vocab_size
    hparams = get_hparams(
        "transformer_tiny",
        "num_encoder_layers=1,num_decoder_layers=1,d_model=32,d_ff=64,num_heads=2,"
        f"max_positions={MAX_POSITIONS}",
    )
    keras.utils.set_random_seed(5)  # before any tokenizer of the tests exists (see _seed)
    model = Transformer.from_hparams(hparams, vocab_size)
    model.build()
    RunInfo("text2text", data_dir, "transformer_tiny", hparams, vocab_size).save(output_dir)
    checkpoint_dir = os.path.join(output_dir, CHECKPOINT_DIR)
    tf.train.CheckpointManager(tf.train.Checkpoint(model=model), checkpoint_dir, 1).save()
    lines = _sentences(220)[120 : 120 + 100 - len(SPECIAL)] + SPECIAL
    export_dir = str(root / "served")
    report = run_json(
        "-m", "t2t_lite.bin.t2t_export", f"--output_dir={output_dir}",
        f"--export_dir={export_dir}", "--nbest=2", *SEARCH,
        f"--score={files['dev_src']},{files['dev_tgt']}", "--license=apache-2.0",
        env=ENV,
    )  # fmt: skip
    return {
        "root": root,
        "data_dir": data_dir,
        "output_dir": output_dir,
        "export_dir": export_dir,
        "saved_model": report["saved_model"],
        "report": report,
        "lines": lines,
        "source": _write_lines(root / "test.src", lines),
        "dev": (files["dev_src"], files["dev_tgt"]),
    }


def test_the_export_carries_a_model_card(run):
    """README.md: the Hub's front matter, and the --score test set translated as the export
    searches and scored by sacreBLEU, the same numbers in the front matter and the table."""
    import yaml

    from t2t_lite.decode.translator import Translator
    from t2t_lite.metrics.scores import corpus_scores

    with open(os.path.join(run["saved_model"], "README.md"), encoding="utf-8") as f:
        text = f.read()
    _, front, body = text.split("---\n", 2)
    meta = yaml.safe_load(front)
    sources, references = (open(p).read().splitlines() for p in run["dev"])
    translator = Translator.from_run(run["output_dir"], beam_size=3, alpha=0.6, extra_length=10)
    bleu, chrf = corpus_scores(translator.translate(sources), [references], ["bleu", "chrf"])
    assert meta == {
        "license": "apache-2.0",
        "library_name": "t2t_lite",
        "tags": ["translation", "transformer", "t2t_lite", "saved_model"],
        "metrics": ["bleu", "chrf"],
        "model-index": [
            {
                "name": "run",
                "results": [
                    {
                        "task": {"type": "translation", "name": "Translation text2text"},
                        "dataset": {"name": "dev.src", "type": "text2text"},
                        "metrics": [
                            {"type": "bleu", "value": round(bleu.score, 2), "name": "BLEU"},
                            {"type": "chrf", "value": round(chrf.score, 2), "name": "chrF"},
                        ],
                    }
                ],
            }
        ],
    }
    row = f"| dev.src | 20 | {bleu.score:.2f} | {chrf.score:.2f} | t2t_lite, beam 3, alpha 0.6 |"
    assert row in body.splitlines()
    assert "- hparams set `transformer_tiny`, " in body and "1 training step," in body
    assert "inputs longer than 40 pieces" in body and "Translator.from_run" in body
    # files by name only: the card is read on other machines
    with open(run["dev"][0], "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    assert f"- input `dev.src`, SHA-256 `{sha}`" in body
    assert str(run["root"]) not in text and "/tmp" not in text


@pytest.fixture(scope="module")
def background(run):
    """The subprocesses, started together: fresh-process load, saved_model_cli show and run."""
    path, cli = run["saved_model"], ("-m", "t2t_lite.bin.saved_model_cli")
    return {
        "fresh": _run(FRESH_PROCESS, path, run["source"]),
        "show": _run(*cli, "show", "--all", "--dir", path),
        "cli_run": _run(
            *cli,
            "run",
            "--dir",
            path,
            "--tag_set=serve",
            "--signature_def=serving_default",
            "--input_exprs=inputs=" + json.dumps(run["lines"][:2]),
        ),
    }


@pytest.fixture(scope="module")
def decoded(run, tmp_path_factory):
    """t2t-decode's translations of the test lines: 1-best lines and n-best (Moses) lines."""
    root = tmp_path_factory.mktemp("decoded")
    out = {}
    for nbest in (1, 2):
        out[nbest] = t2t_decode(
            run["source"],
            root / f"nbest{nbest}.txt",
            output_dir=run["output_dir"],
            beam_size=3,
            alpha=0.6,
            extra_length=10,
            nbest=nbest,
        )
    return out


@pytest.fixture(scope="module")
def loaded(run):
    return tf.saved_model.load(run["saved_model"])


def test_export_layout_and_settings(run):
    export_dir, path = run["export_dir"], run["saved_model"]
    assert path == os.path.join(export_dir, "1") and os.listdir(export_dir) == ["1"]
    assert run["report"]["beam_size"] == 3 and run["report"]["nbest"] == 2
    with open(os.path.join(path, "assets.extra", export.EXPORT_INFO)) as f:
        info = json.load(f)
    beam = {k: info["settings"][k] for k in ("beam_size", "alpha", "extra_length", "nbest")}
    assert beam == {"beam_size": 3, "alpha": 0.6, "extra_length": 10, "nbest": 2}
    # max_input_length defaults to the model's positions, as in t2t-decode.
    assert info["settings"]["max_input_length"] == MAX_POSITIONS
    assert not info["settings"]["constrained"] and not info["settings"]["sampling"]
    assert info["checkpoint"].endswith("ckpt-1") and info["problem"] == "text2text"
    # The SentencePiece model is inside the graph: the data_dir is not needed to serve.
    with open(os.path.join(run["data_dir"], "vocab.bpe.model"), "rb") as f:
        vocab = f.read()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        assert vocab in f.read()


def test_serving_defaults_and_errors(run):
    restored = Run.restore(run["output_dir"])
    functions = export.ServingFunctions.from_run(restored)
    # text2text's decode defaults, as t2t-decode takes them; nbest defaults to the beam.
    assert functions.settings == SearchSettings(4, 0.6, 50, 4, False, MAX_POSITIONS)
    assert restored.data_dir == run["data_dir"] and functions.constraint is None
    with pytest.raises(ValueError, match=r"--nbest=3 must be in \[1, --beam_size=2\]"):
        export.ServingFunctions.from_run(Run.restore(run["output_dir"], search={"beam_size": 2}), 3)
    with pytest.raises(FileNotFoundError, match="hparams.json does not exist"):
        Run.restore(run["data_dir"])


def test_fresh_process_translates_as_t2t_decode(run, background, decoded):
    fresh = json.loads(_finish(background["fresh"]))
    assert len(run["lines"]) == 100
    assert fresh["outputs"] == decoded[1]  # identical strings, line by line
    assert fresh["outputs"][-7:-5] == ["", ""]  # empty and whitespace-only lines
    # The n-best lines of t2t-decode carry the scores: the best one is serving_default's.
    best = [line.split(" ||| ") for line in decoded[2][::2]]
    assert [text for _, text, _ in best] == fresh["outputs"]
    np.testing.assert_allclose(fresh["scores"], [float(s) for _, _, s in best], atol=SCORE_ATOL)
    assert len(set(fresh["outputs"])) > 10  # the test is not comparing one repeated string


def _graph_ops(saved_model_dir: str) -> set[str]:
    """Every op type in the SavedModel's graph and function library (calls of library
    functions by name excluded)."""
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    (graph,) = [m.graph_def for m in proto.meta_graphs]
    functions = {f.signature.name for f in graph.library.function}
    ops = {node.op for node in graph.node}
    for function in graph.library.function:
        ops |= {node.op for node in function.node_def}
    return ops - functions


def test_every_op_is_core_or_tensorflow_text(run, background):
    fresh = json.loads(_finish(background["fresh"]))
    core, text = set(fresh["core"]), set(fresh["text"])
    ops = _graph_ops(run["saved_model"])
    assert ops <= core | text, sorted(ops - core - text)
    assert not ops & {"PyFunc", "PyFuncStateless", "EagerPyFunc"}
    # Tokenization, search and detokenization are all in the graph.
    assert ops & text == {"SentencepieceOp", "SentencepieceTokenizeOp", "SentencepieceDetokenizeOp"}
    assert "TopKV2" in ops and ops & {"While", "StatelessWhile"}


def test_every_model_variable_is_in_the_saved_model(run):
    model, _, _ = restore_model(run["output_dir"])
    reader = tf.train.load_checkpoint(os.path.join(run["saved_model"], "variables", "variables"))
    # The root tracks the model's variables, in order, as its `model_variables` list.
    for i, variable in enumerate(model.variables):
        saved = reader.get_tensor(f"model_variables/{i}/.ATTRIBUTES/VARIABLE_VALUE")
        np.testing.assert_array_equal(saved, variable.numpy(), err_msg=variable.path)
    names = reader.get_variable_to_shape_map()
    assert f"model_variables/{len(model.variables)}/.ATTRIBUTES/VARIABLE_VALUE" not in names


def test_saved_model_cli_shows_and_runs(run, background, decoded):
    shown = _finish(background["show"])
    for name, inputs, outputs in (
        ("serving_default", ["inputs"], ["outputs", "scores", "truncated"]),
        ("nbest", ["inputs"], ["outputs", "scores", "truncated"]),
        ("translate_ids", ["input_ids"], ["output_ids", "scores", "truncated"]),
    ):
        section = shown.split(f"signature_def['{name}']:")[1].split("signature_def[")[0]
        assert [m for m in re.findall(r"inputs\['(\w+)'\]", section)] == inputs
        assert sorted(re.findall(r"outputs\['(\w+)'\]", section)) == outputs
    default = shown.split("signature_def['serving_default']:")[1]
    assert re.search(r"inputs\['inputs'\] tensor_info:\s+dtype: DT_STRING\s+shape: \(-1\)", default)
    assert re.search(r"outputs\['scores'\] tensor_info:\s+dtype: DT_FLOAT\s+shape: \(-1\)", default)
    # `run` loads with the graph-mode loader, restoring variables by the saver as TF Serving does.
    ran = _finish(background["cli_run"])
    outputs = ran.split("Result for output key outputs:")[1].split("Result for")[0]
    assert outputs.strip() == str(np.array([t.encode() for t in decoded[1][:2]], dtype=object))


def _query(url: str, *flags: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    command = ["-m", "t2t_lite.bin.t2t_query", f"--server={url}", "--model=ende", *flags]
    done = subprocess.run(
        [sys.executable, *command], input=stdin, capture_output=True, env=ENV, timeout=120
    )
    assert done.returncode == 0, done.stderr.decode()
    return done


def test_t2t_query_through_the_rest_api(run, loaded, decoded):
    """The export behind t2t-serve's TF Serving REST routes: t2t-query writes what t2t-decode
    wrote, n-best lists included."""
    with serving(loaded.signatures, "ende") as url:
        done = _query(url, f"--input_file={run['source']}", "--batch_size=40")
        lines = "\n".join(run["lines"][:3]).encode()
        nbest = _query(url, "--signature_name=nbest", "--request_format=inputs", stdin=lines)
        example = _query(url, stdin="\n".join(run["lines"][-5:-3]).encode())
    assert done.stdout.decode("utf-8").split("\n")[:-1] == decoded[1]
    assert "input 100: truncated" in done.stderr.decode()  # the long line, reported
    got = [line.split(" ||| ") for line in nbest.stdout.decode("utf-8").splitlines()]
    want = [line.split(" ||| ") for line in decoded[2][:6]]
    assert [g[:2] for g in got] == [w[:2] for w in want]
    np.testing.assert_allclose(
        [float(g[2]) for g in got], [float(w[2]) for w in want], atol=SCORE_ATOL
    )
    assert example.stdout.decode("utf-8").splitlines() == decoded[1][-5:-3]


def test_t2t_query_through_grpc_stand_in(run, loaded, decoded):
    """The same SavedModel behind the gRPC stand-in: the same lines, n-best and reports."""
    from grpc_stand_in import GrpcStandIn, saved_model_signatures

    stand_in = GrpcStandIn({"ende": saved_model_signatures(loaded)})
    with stand_in as address:
        done = _query(
            address, "--protocol=grpc", f"--input_file={run['source']}", "--batch_size=40"
        )
        predict = query.make_predictor("grpc", address, "ende", signature_name="nbest")
        nbest = list(query.predict_lines(run["lines"][:3], predict))
    assert done.stdout.decode("utf-8").split("\n")[:-1] == decoded[1]
    assert "input 100: truncated" in done.stderr.decode()
    assert len(stand_in.requests) == 3 + 1
    got = [line.split(" ||| ") for i, row in enumerate(nbest) for line in query.format_row(i, row)]
    want = [line.split(" ||| ") for line in decoded[2][:6]]
    assert [g[:2] for g in got] == [w[:2] for w in want]
    np.testing.assert_allclose(
        [float(g[2]) for g in got], [float(w[2]) for w in want], atol=SCORE_ATOL
    )


def test_hostile_inputs_get_answers(run, loaded):
    serve, nbest = loaded.signatures["serving_default"], loaded.signatures["nbest"]
    start = time.monotonic()
    empty = serve(inputs=tf.zeros([0], tf.string))
    empty_nbest = nbest(inputs=tf.zeros([0], tf.string))
    assert time.monotonic() - start < 5.0  # no search runs
    assert {k: v.shape for k, v in empty.items()} == {
        "outputs": (0,),
        "scores": (0,),
        "truncated": (0,),
    }
    assert empty_nbest["outputs"].shape == (0, 2) and empty_nbest["scores"].shape == (0, 2)
    blank = serve(inputs=tf.constant(["", " ", "\t\n", "\u3000\u00a0"]))
    assert blank["outputs"].numpy().tolist() == [b""] * 4
    assert blank["scores"].numpy().tolist() == [0.0] * 4

    invalid = [b"\xff\xfe the cat", b"caf\xc3", b"\xed\xa0\x80 surrogate", b"ok \x80\x80 ok"]
    replaced = [raw.decode("utf-8", errors="replace") for raw in invalid]
    scripts = ["日本語のテキスト", "مرحبا بالعالم", "Привет мир", "😀 🎉 the cat", "a" * 5000]
    found = serve(inputs=tf.constant(invalid + scripts))
    again = serve(inputs=tf.constant(replaced + scripts))
    # Invalid bytes are read as U+FFFD, exactly as Python's "replace" reads them.
    np.testing.assert_array_equal(found["outputs"].numpy(), again["outputs"].numpy())
    texts = [t.decode("utf-8") for t in found["outputs"].numpy()]  # valid UTF-8 out
    assert all(texts) and np.isfinite(found["scores"].numpy()).all()
    assert found["truncated"].numpy().tolist() == [False] * 8 + [True]


def test_ids_signature_truncates_and_matches_text(run, loaded):
    tokenizer = load_tokenizer(run["data_dir"])
    by_ids, by_text = loaded.signatures["translate_ids"], loaded.signatures["serving_default"]
    lines = [run["lines"][0], run["lines"][-1], run["lines"][5]]  # the last is over-long
    rows = [tokenizer.encode_py(line) for line in lines]
    padded = np.zeros([3, max(map(len, rows)) + 2], np.int32)
    for i, row in enumerate(rows):
        padded[i, : len(row)] = row
    padded[2, len(rows[2])] = 1  # EOS given: what follows it is ignored
    padded[2, len(rows[2]) + 1] = 7
    found = by_ids(input_ids=tf.constant(padded))
    assert found["truncated"].numpy().tolist() == [False, True, False]
    texts = by_text(inputs=tf.constant(lines))
    decoded = [tokenizer.decode_py(ids.tolist()) for ids in found["output_ids"].numpy()]
    assert decoded == [t.decode("utf-8") for t in texts["outputs"].numpy()]
    np.testing.assert_allclose(found["scores"].numpy(), texts["scores"].numpy(), atol=1e-6)
    # Cut by hand to max_input_length - 1 tokens: the same translation.
    cut = by_ids(input_ids=tf.constant([rows[1][: MAX_POSITIONS - 1]]))
    np.testing.assert_array_equal(cut["output_ids"].numpy()[0], found["output_ids"].numpy()[1])
    with pytest.raises(tf.errors.InvalidArgumentError, match="vocabulary size"):
        by_ids(input_ids=tf.constant([[5, tokenizer.vocab_size]]))
    assert by_ids(input_ids=tf.zeros([0, 3], tf.int32))["output_ids"].shape == (0, 0)


def test_strip_whitespace_strips_what_python_strips():
    spaces = "".join(c for c in map(chr, range(0x110000)) if c.isspace())
    assert len(spaces) == 29
    stripped = export.strip_whitespace(tf.constant([spaces + "a b" + spaces, "\u200bx"]))
    assert stripped.numpy().tolist() == [b"a b", "\u200bx".encode()]  # U+200B is no space


def test_version_folders_appear_whole_or_not_at_all(tmp_path):
    export_dir = str(tmp_path / "models")

    def failing(folder):
        with open(os.path.join(folder, "saved_model.pb"), "w") as f:
            f.write("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        versions.write_version(export_dir, None, failing)
    assert os.listdir(export_dir) == []  # no version, no temporary folder left

    def writer(folder):
        assert os.path.basename(folder).startswith(".tmp-export-")
        with open(os.path.join(folder, "saved_model.pb"), "w") as f:
            f.write("whole")

    assert versions.write_version(export_dir, None, writer) == os.path.join(export_dir, "1")
    os.makedirs(os.path.join(export_dir, "7"))
    os.makedirs(os.path.join(export_dir, "notes"))
    assert versions.next_version(export_dir) == 8
    assert versions.write_version(export_dir, None, writer).endswith("/8")
    with pytest.raises(FileExistsError, match="models/7 already exists; pass another --version"):
        versions.write_version(export_dir, 7, writer)
    assert sorted(os.listdir(export_dir)) == ["1", "7", "8", "notes"]
    assert oct(os.stat(os.path.join(export_dir, "8")).st_mode & 0o777) == "0o755"


def test_settings_are_checked():
    with pytest.raises(ValueError, match=r"--nbest=3 must be in \[1, --beam_size=2\]"):
        SearchSettings(beam_size=2, nbest=3).check(40)
    with pytest.raises(ValueError, match=r"--max_input_length must be in \[1, 40\]"):
        SearchSettings(max_input_length=41).check(40)
    with pytest.raises(ValueError, match="--extra_length must be >= 0"):
        SearchSettings(extra_length=-1).check(40)


def test_training_records_its_machine_once_per_machine(tmp_path, monkeypatch):
    """machines.json, which the model card reads: a process on another machine adds its
    entry, one on the same machine adds nothing."""
    from t2t_lite.runtime import cpu
    from t2t_lite.train import loop

    output_dir = str(tmp_path)
    here = cpu.machine_kind(cpu.describe_machine()) + f", {os.cpu_count()} CPUs"  # no GPU here
    loop.record_machine(output_dir, 0)
    loop.record_machine(output_dir, 120)  # resumed on the same machine
    monkeypatch.setattr(cpu, "describe_machine", lambda: {"cpu": "Other CPU", "cpus": 8})
    loop.record_machine(output_dir, 300)
    with open(os.path.join(output_dir, "machines.json")) as f:
        machines = json.load(f)["machines"]
    assert [m["from_step"] for m in machines] == [0, 300]
    assert machines[0]["machine"] == here
    assert machines[1]["machine"] == f"Other CPU, {os.cpu_count()} CPUs"
