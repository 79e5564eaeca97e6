"""t2t-export --format=litert: the .tflite's greedy search finds t2t-decode's greedy ids on 40
sentences of a trained tiny model (the shared reverse-words run, tests/reverse_words.py), its
runner translates in a process without TensorFlow, int8 weights from the converter make a
smaller model that still agrees, and what it cannot hold is refused in one line."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from command_helpers import ENV, python_json, run_json, run_python
from decoding_helpers import tiny_model, write_tiny_run
from reverse_words import (
    EXTRA,
    INPUT_LENGTH,
    LITERT_SEARCH,
    STEPS,
    reversed_words,
    sentences,
)

from t2t_lite.decode.translator import Translator
from t2t_lite.run.run import Run
from t2t_lite.runtime.atomic_io import file_sha256
from t2t_lite.serve import litert_export
from t2t_lite.serve.litert_runner import LiteRTTranslator

# int8 weights against float32 on the same 40 sentences: at least this share of identical
# outputs. Dynamic-range int8 rounds each weight to within half a step of max|w| / 127 per
# channel, about 1% of the logits in relative RMS (tests/decode/test_quantize.py); a greedy
# choice flips only where the two best tokens lie closer than that, and the rest of the output
# follows the flip. This briefly trained model has many such close calls: measured 35 of 40
# (0.875; the demo's transformer_small: see docs/deploy.md). A model whose int8 weights were
# wrong (a scale off, a channel swapped) agrees on next to none.
INT8_AGREEMENT = 0.7


@pytest.fixture(autouse=True)
def _seed():
    """No reseeding (tests/serve/test_export.py): SentencePiece resources live across tests."""
    yield


@pytest.fixture(scope="module")
def trained(reverse_words_run, reverse_words_litert):
    """The shared reverse-words run, restored for LiteRT's greedy search, and its LiteRT
    exports: float32 weights with the batch free, int8 weights in fixed batches of 1."""
    search = {**LITERT_SEARCH, "max_input_length": INPUT_LENGTH}
    return {"run": Run.restore(reverse_words_run, search=search), **reverse_words_litert}


def _litert_ids(folder: str, sources: list[list[int]], batch_size: int = 16) -> list[list[int]]:
    """The LiteRT search's ids of `sources`, computed as users run it: in a fresh process that
    never imports TensorFlow (docs/deploy.md). In this process, which has trained and converted
    with TensorFlow, ai-edge-litert 2.3 returned one wrong batch in 2 of 77 runs of the greedy
    test alone and in 1 CI run (the same 4 of 41 sentences each time, ended early or run on,
    4.4 to 7.6 nats from TensorFlow's choice: no near tie); 440 fresh processes without
    TensorFlow found TensorFlow's ids every time."""
    code = (
        "import json, sys\nfrom t2t_lite.serve.litert_runner import LiteRTTranslator\n"
        f"ids = LiteRTTranslator({folder!r}, batch_size={batch_size}).search_ids({sources!r})\n"
        "print(json.dumps([ids, 'tensorflow' in sys.modules]))\n"
    )
    ids, tensorflow = python_json(code, fresh=True)
    assert not tensorflow
    return ids


def _decode_ids(run: Run, sources: list[list[int]]) -> list[list[int]]:
    """t2t-decode's greedy search (beam 1, alpha 0) through the `Translator`."""
    translator = Translator(run.model, run.tokenizer, run.search)
    found = translator.search_ids(sources).ids.numpy()[:, 0]
    return [[t for t in row if t] for row in found.tolist()]


def _first_difference_gap(run: Run, source, ours, theirs) -> float | None:
    """None where the ids are the same; else TensorFlow's log-prob of its own token minus that
    of LiteRT's at the first position they differ (the same prefix before it)."""
    if ours == theirs:
        return None
    j = next(i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b)
    pair = {"inputs": tf.constant([source]), "targets": tf.constant([theirs])}
    logits = run.model(pair, training=False)
    log_probs = tf.nn.log_softmax(tf.cast(logits[0, j], tf.float32)).numpy()
    return float(log_probs[theirs[j]] - log_probs[ours[j]])


def test_greedy_ids_equal_t2t_decode(trained):
    run = trained["run"]
    assert run.search.beam_size == 1 and run.search.alpha == 0.0
    lines = sentences(40, seed=9) + ["the big red dog runs over the small blue mat " * 3]
    translator = LiteRTTranslator(trained["float"])
    (inputs,) = translator.interpreter.get_input_details()  # the batch fixed, the length free
    assert inputs["shape_signature"].tolist() == [-1, -1]
    sources = translator.encode(lines)
    assert len(sources[-1]) == INPUT_LENGTH  # the long line, truncated as t2t-decode does
    assert sources[:-1] == [run.tokenizer.encode_py(line) + [1] for line in lines[:-1]]
    ours = _litert_ids(trained["float"], sources, batch_size=3)  # 13 calls of 3 rows, 1 of 2
    assert _litert_ids(trained["float"], sources, batch_size=41) == ours  # one call of 41
    # LiteRT's float32 products (XNNPACK) and TensorFlow's (oneDNN, by the search's transposed
    # copy of the output matrix) round differently, which can turn a near tie of greedy search
    # the other way (1 and 4 of 41 sentences in two fresh-clone runs). So where the ids differ,
    # both searches saw the same prefix, and at the first token they differ TensorFlow's own
    # log-probs of the two tokens must tie within 1e-3.
    theirs = _decode_ids(run, sources)
    gaps = [
        _first_difference_gap(run, s, o, t) for s, o, t in zip(sources, ours, theirs, strict=True)
    ]
    assert all(gap < 1e-3 for gap in gaps if gap is not None), gaps
    other = [3 if theirs[0][0] != 3 else 4] + theirs[0][1:]  # not the model's choice: no tie
    assert _first_difference_gap(run, sources[0], other, theirs[0]) > 0.1
    assert sum(gap is None for gap in gaps) >= len(sources) * 3 // 4, gaps
    right = sum(
        run.tokenizer.decode_py(o) == reversed_words(s)
        for o, s in zip(ours[:40], lines[:40], strict=True)
    )
    assert right >= 15, f"the model is barely trained: {right} of 40 reversed"
    assert sum(o[-1:] == [1] for o in ours) >= 35  # most end with EOS, not at the maximum
    info = trained["info"]
    assert (info["batch_size"], info["input_length"]) == (None, INPUT_LENGTH)
    assert info["output_length"] == INPUT_LENGTH + EXTRA
    assert sorted(os.listdir(trained["float"])) == [
        "README.md",
        "model.tflite",
        "t2t_export.json",
        "vocab.bpe.model",
    ]


def test_readme_and_runner_translate_without_tensorflow(trained):
    """The README.md beside the model runs, and translates as t2t-decode does, in a fresh
    process that never imports TensorFlow."""
    path = trained["float"]
    with open(os.path.join(path, "README.md")) as f:
        readme = f.read()
    # the run and checkpoint by name: the README travels without this machine
    assert readme.startswith(f"# LiteRT model of the run run\n\nCheckpoint ckpt-{STEPS} (")
    assert "/tmp" not in readme
    (code,) = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert 'LiteRTTranslator(".")' in code
    lines = sentences(6, seed=3) + [""]
    code = code.replace('LiteRTTranslator(".")', f"LiteRTTranslator({path!r})") + (
        "import json, sys\n"
        f"texts = translator.translate({lines!r})\n"
        "print(json.dumps([texts, 'tensorflow' in sys.modules, 'keras' in sys.modules]))\n"
    )
    texts, tensorflow, keras = python_json(code, fresh=True)
    assert not tensorflow and not keras
    run = trained["run"]
    assert texts == Translator(run.model, run.tokenizer, run.search).translate(lines)
    assert texts[-1] == ""


def test_int8_weights_are_smaller_and_agree(trained):
    float_size = os.path.getsize(os.path.join(trained["float"], "model.tflite"))
    int8_size = os.path.getsize(os.path.join(trained["int8"], "model.tflite"))
    assert int8_size < 0.8 * float_size, (int8_size, float_size)
    sources = LiteRTTranslator(trained["float"]).encode(sentences(40, seed=9))
    float_ids, int8_ids = (_litert_ids(trained[k], sources) for k in ("float", "int8"))
    same = np.mean([a == b for a, b in zip(float_ids, int8_ids, strict=True)])
    assert same >= INT8_AGREEMENT, same
    with open(os.path.join(trained["int8"], "t2t_export.json")) as f:
        assert json.load(f)["quantization"] == "int8"


def test_refusals_name_the_setting(trained, tmp_path):
    run = trained["run"]
    with pytest.raises(ValueError, match="--litert_quantization='int4' is not one of"):
        litert_export.export_run(run, str(tmp_path), quantization="int4")
    with pytest.raises(ValueError, match="--litert_batch_size must be at least 1"):
        litert_export.export_run(run, str(tmp_path), batch_size=0)
    sampling = dataclasses.replace(run, search=dataclasses.replace(run.search, sampling=True))
    with pytest.raises(ValueError, match="--sampling: the LiteRT model searches greedily"):
        litert_export.export_run(sampling, str(tmp_path))
    assert not os.listdir(tmp_path)


def test_runner_refuses_bad_inputs(trained, tmp_path):
    translator = LiteRTTranslator(os.path.dirname(trained["int8"]))  # the largest version
    assert translator.info["quantization"] == "int8"
    (inputs,) = translator.interpreter.get_input_details()
    assert inputs["shape_signature"].tolist() == [1, -1] and translator.batch_size == 1
    with pytest.raises(ValueError, match="batch_size must be at least 1, got 0"):
        LiteRTTranslator(trained["float"], batch_size=0)
    with pytest.raises(ValueError, match=f"a source of {INPUT_LENGTH + 1} ids; the model takes"):
        translator.search_ids([[5] * INPUT_LENGTH + [1]])
    with pytest.raises(FileNotFoundError, match="no t2t_export.json in"):
        LiteRTTranslator(str(tmp_path))
    (tmp_path / "t2t_export.json").write_text(json.dumps({"format": "ctranslate2"}))
    with pytest.raises(ValueError, match="holds a 'ctranslate2' export, not litert"):
        LiteRTTranslator(str(tmp_path))


def test_refuses_a_words_vocabulary(tmp_path):
    output_dir, _, _ = write_tiny_run(tmp_path)
    run = Run.restore(str(output_dir))
    with pytest.raises(ValueError) as error:
        litert_export.export_run(run, str(tmp_path / "export"))
    assert str(error.value) == (
        f"{output_dir} cannot be converted to LiteRT: its vocabulary vocab.words.txt is not a "
        "SentencePiece model; the LiteRT runner tokenizes with SentencePiece only"
    )
    assert not (tmp_path / "export").exists()


def test_cli_refuses_a_beam_before_restoring_in_one_line(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "t2t_lite.bin.t2t_export",
            f"--output_dir={tmp_path / 'no_run'}",
            f"--export_dir={tmp_path / 'export'}",
            "--format=litert",
            "--beam_size=4",
        ],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == (
        "t2t-export: error: --format=litert searches greedily: leave out --beam_size and --nbest"
    )


def test_runner_command_translates_standard_input(trained, tmp_path):
    lines = sentences(3, seed=4)
    command = [sys.executable, "-m", "t2t_lite.serve.litert_runner"]
    done = run_python(
        "-m", "t2t_lite.serve.litert_runner", os.path.dirname(trained["float"]),
        stdin="\n".join(lines) + "\n", timeout=60, fresh=True,
    )  # fmt: skip
    # The parent holds two versions: the largest is the int8 model. It is read back in a
    # process without TensorFlow, as the command runs: in a process that has TensorFlow
    # loaded, the int8 model once gave another translation of one of these lines.
    code = (
        "import json\nfrom t2t_lite.serve.litert_runner import LiteRTTranslator\n"
        f"print(json.dumps(LiteRTTranslator({trained['int8']!r}).translate({lines!r})))\n"
    )
    assert done.stdout.splitlines() == python_json(code, timeout=60, fresh=True)
    done = subprocess.run(
        [*command, str(tmp_path)], capture_output=True, text=True, env=ENV, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"python -m t2t_lite.serve.litert_runner: error: no t2t_export.json in {tmp_path} "
        "nor in a version folder below it"
    ]


def test_float32_copy_of_a_mixed_precision_model():
    model = tiny_model(13, overrides=",precision=mixed_bfloat16")
    copy = litert_export.float32_model(model)
    assert copy.dtype_policy.name == "float32" and model.dtype_policy.name == "mixed_bfloat16"
    for ours, theirs in zip(copy.get_weights(), model.get_weights(), strict=True):
        np.testing.assert_array_equal(ours, theirs)
    assert litert_export.float32_model(copy) is copy


@pytest.mark.slow
def test_cli_exports_int8_that_the_runner_reads(trained, tmp_path):
    """The whole command: t2t-export --format=litert with int8 weights gives the model the
    fixture's export_run gave (the same ids), and reports greedy search."""
    run = trained["run"]
    report = run_json(
        "-m", "t2t_lite.bin.t2t_export", f"--output_dir={run.output_dir}",
        f"--export_dir={tmp_path}", "--format=litert", "--litert_quantization=int8",
        f"--max_input_length={INPUT_LENGTH}", f"--extra_length={EXTRA}",
    )  # fmt: skip
    assert report["litert"] == str(tmp_path / "1")
    assert (report["beam_size"], report["alpha"], report["extra_length"]) == (1, 0.0, EXTRA)
    sources = LiteRTTranslator(report["litert"]).encode(sentences(10, seed=5))
    assert _litert_ids(report["litert"], sources) == _litert_ids(trained["int8"], sources)


def test_the_guides_examples_run_without_tensorflow(trained, tmp_path):
    """docs/deploy.md's Python blocks of LiteRT and of documents, on this export instead of
    the demo's (the document one on a page of the model's words, with a tag)."""
    guide = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "deploy.md")
    with open(guide, encoding="utf-8") as f:
        text = f.read()
    blocks = []
    for title in ("## LiteRT: a model for devices", "## Documents"):
        section = text.partition(title)[2].partition("\n## ")[0]
        blocks += re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 3
    page = tmp_path / "page.md"
    page.write_text("# the <b>big dog</b>\n\nthe cat runs over the mat\n", encoding="utf-8")
    for code in blocks:
        assert "/tmp/ende_litert/1" in code
        code = code.replace("/tmp/ende_litert/1", trained["float"])
        code = code.replace('"page.md"', repr(str(page)))
        code += "import sys\nprint('tensorflow' in sys.modules)\n"
        done = run_python("-c", code, timeout=60, fresh=True)
        assert done.stdout.splitlines()[-1] == "False"
        if str(page) in code:  # the document: its layout and its tag, around translated words
            lines = done.stdout.splitlines()
            assert lines[0].startswith("# ") and lines[1] == lines[3] == "" and len(lines) == 5
            assert lines[0].count("<b>") == lines[0].count("</b>") == 1


@pytest.mark.parametrize("name", ["model.tflite", "vocab.bpe.model"])
def test_the_runner_refuses_a_damaged_copy_naming_the_file(trained, tmp_path, name):
    info = trained["info"]
    assert info["model_sha256"] == file_sha256(os.path.join(trained["float"], "model.tflite"))
    assert info["vocabulary"] == "vocab.bpe.model"
    copy = shutil.copytree(trained["float"], tmp_path / "1")
    data = bytearray((copy / name).read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit flipped, the size kept
    (copy / name).write_bytes(bytes(data))
    found = file_sha256(str(copy / name))
    recorded = info["model_sha256" if name == "model.tflite" else "vocabulary_sha256"]
    message = (
        f"{copy / name} is damaged: its SHA-256 {found[:16]} is not the {recorded[:16]} that "
        "t2t_export.json records; copy the export again, or export the run again "
        "(t2t-export --format=litert)"
    )
    with pytest.raises(ValueError) as refused:
        LiteRTTranslator(str(copy))
    assert str(refused.value) == message
    done = subprocess.run(
        [sys.executable, "-m", "t2t_lite.serve.litert_runner", str(copy)],
        input="a b\n", capture_output=True, text=True, env=ENV, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"python -m t2t_lite.serve.litert_runner: error: {message}"
    ]
