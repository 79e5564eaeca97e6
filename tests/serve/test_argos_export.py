"""t2t-export --format=argos on the reverse-words run (tests/reverse_words.py): the package is a
zip of one folder as argostranslate reads it, its metadata names the languages and versions, its
SentencePiece model is the run's, its CTranslate2 model translates the pieces argostranslate
makes exactly as t2t_lite translates the ids, and what argostranslate cannot use is refused in
one line. (argostranslate itself, which pulls stanza and torch, runs in scripts/argos_check.py.)
"""

from __future__ import annotations

import json
import os
import pathlib
import types
import zipfile

import ctranslate2
import numpy as np
import pytest
import sentencepiece
from command_helpers import command
from decoding_helpers import padded
from reverse_words import CT2_SEARCH, EXTRA, sentences

from t2t_lite.decode import transformer_step
from t2t_lite.hparams import SearchSettings
from t2t_lite.run.run import Run
from t2t_lite.serve import argos_export
from t2t_lite.serve import ctranslate2_export as ct2


@pytest.fixture(autouse=True)
def _seed():
    """No reseeding (tests/serve/test_export.py): SentencePiece resources live across tests."""
    yield


@pytest.fixture(scope="module")
def exported(reverse_words_run, tmp_path_factory):
    """The run, restored, and its package written by the command, with the dev set scored."""
    root = pathlib.Path(reverse_words_run).parent  # the run's text files beside it
    export_dir = tmp_path_factory.mktemp("argos")
    done = command(
        "t2t_export", f"--output_dir={reverse_words_run}", f"--export_dir={export_dir}",
        "--format=argos", "--argos_languages=en,de", "--beam_size=1", "--alpha=0",
        f"--score={root / 'dev.src'},{root / 'dev.tgt'}", "--license=apache-2.0",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    unpacked = tmp_path_factory.mktemp("unpacked")
    package = os.path.join(report["argos"], "translate-en_de-1.argosmodel")
    with zipfile.ZipFile(package) as archive:
        names = sorted(archive.namelist())
        archive.extractall(unpacked)
    return {
        "run": Run.restore(reverse_words_run, search=CT2_SEARCH),
        "folder": report["argos"],
        "names": names,
        "package": os.path.join(unpacked, "translate-en_de-1"),
        "root": root,
    }


def test_package_is_a_zip_of_one_folder_with_the_runs_files(exported):
    folder, names = exported["folder"], exported["names"]
    assert sorted(os.listdir(folder)) == [
        "README.md",
        "t2t_export.json",
        "translate-en_de-1.argosmodel",
    ]
    top = "translate-en_de-1/"
    assert [n for n in names if not n.endswith("/")] == [
        top + "README.md",
        top + "metadata.json",
        top + "model/config.json",
        top + "model/model.bin",
        top + "model/shared_vocabulary.json",
        top + "sentencepiece.model",
    ]
    package = exported["package"]
    with open(os.path.join(package, "metadata.json"), encoding="utf-8") as f:
        assert json.load(f) == {
            "type": "translate",
            "package_version": "1",
            "argos_version": argos_export.ARGOS_VERSION,
            "from_code": "en",
            "from_name": "English",
            "to_code": "de",
            "to_name": "German",
        }
    with open(exported["run"].tokenizer.path, "rb") as run_model:
        with open(os.path.join(package, "sentencepiece.model"), "rb") as packaged:
            assert packaged.read() == run_model.read()
    with open(os.path.join(folder, "t2t_export.json"), encoding="utf-8") as f:
        info = json.load(f)
    assert info["format"] == "argos" and info["package"] == "translate-en_de-1.argosmodel"
    assert info["quantization"] == "float32" and info["checkpoint"].endswith("ckpt-250")


def test_model_card_travels_in_the_package_without_paths_of_this_machine(exported):
    with open(os.path.join(exported["folder"], "README.md"), encoding="utf-8") as f:
        card = f.read()
    with open(os.path.join(exported["package"], "README.md"), encoding="utf-8") as f:
        assert f.read() == card
    assert 'language:\n  - "en"\n  - "de"\n' in card and '  - "argos"\n' in card
    assert "| dev.src | 100 | " in card and "| t2t_lite, beam 1, alpha 0 |" in card
    assert 'install_from_path("translate-en_de-1.argosmodel")' in card
    assert "a sentence longer than 23 pieces is refused by CTranslate2" in card
    # the datagen inputs and the checkpoint by file name: the card is read elsewhere
    assert "- input `train.src`, SHA-256 `" in card and "`ckpt-250`" in card
    assert str(exported["root"]) not in card and "/tmp" not in card


def test_packaged_model_translates_the_pieces_as_t2t_lite_does(exported):
    """argostranslate's way: the packaged SentencePiece model's pieces (strings) into the
    packaged CTranslate2 model, and its output pieces joined back. The pieces are the run's ids
    by name, and greedy search finds t2t_lite's greedy translations, ids and text."""
    run, package = exported["run"], exported["package"]
    sp = sentencepiece.SentencePieceProcessor(
        model_file=os.path.join(package, "sentencepiece.model")
    )
    tokens = ct2.vocabulary_tokens(run.tokenizer.path)
    translator = ctranslate2.Translator(os.path.join(package, "model"), compute_type="float32")
    lines = sentences(30, seed=21)
    lines += ["the unknown Zebra sat", "日本 the cat"]  # pieces the vocabulary lacks
    pieces = [sp.encode(line, out_type=str) for line in lines]
    ids = [run.tokenizer.encode_py(line) for line in lines]
    # the same pieces, an unknown one as the unknown id
    assert [[tokens[i] for i in row] for row in ids] == [
        [p if p in tokens else "<unk>" for p in row] for row in pieces
    ]
    width, limit = max(map(len, ids)) + 1, run.hparams.max_positions
    inputs = np.array([padded(tuple(row + [1]), width) for row in ids], np.int32)
    found = transformer_step.translate_ids(
        run.model, inputs, beam_size=1, alpha=0.0, extra_length=EXTRA
    )
    ours = [[t for t in row if t > 1] for row in found.ids.numpy()[:, 0].tolist()]
    results = [
        translator.translate_batch(
            [row], beam_size=1, max_decoding_length=min(len(row) + 1 + EXTRA, limit)
        )[0].hypotheses[0]
        for row in pieces
    ]
    index = {token: i for i, token in enumerate(tokens)}
    assert [[index[p] for p in hypothesis] for hypothesis in results] == ours
    assert [sp.decode_pieces(h) for h in results] == [run.tokenizer.decode_py(o) for o in ours]


def test_a_problem_without_languages_and_a_bad_pair_are_refused_in_one_line(
    reverse_words_run, tmp_path
):
    base = [f"--output_dir={reverse_words_run}", f"--export_dir={tmp_path}"]
    for extra, message in (
        (
            ["--format=argos"],
            f"t2t-export: error: {reverse_words_run} cannot be exported for "
            "argostranslate: problem text2text names no language pair; pass "
            "--argos_languages=FROM,TO (ISO 639 codes, e.g. en,de)",
        ),
        (
            ["--format=argos", "--argos_languages=english,de"],
            "t2t-export: error: --argos_languages=english,de: give FROM,TO, two ISO 639 "
            "language codes (e.g. en,de)",
        ),
        (
            ["--argos_languages=en,de"],
            "t2t-export: error: --argos_languages: only --format=argos writes a language pair",
        ),
    ):
        done = command("t2t_export", *base, *extra)
        assert done.returncode == 2, done.stderr[-2000:]
        assert done.stderr.strip().splitlines()[-1] == message
    assert os.listdir(tmp_path) == []  # nothing written


def test_what_argostranslate_cannot_use_is_refused():
    def fake_run(vocabulary: str, **problem):
        return types.SimpleNamespace(
            output_dir="runs/x",
            model=types.SimpleNamespace(embedding=None, vocab_size=13, output_vocab_size=0),
            hparams=types.SimpleNamespace(key_dim=8, value_dim=8, position_encoding="sinusoid"),
            tokenizer=types.SimpleNamespace(path=f"data/{vocabulary}"),
            search=SearchSettings(),
            problem=types.SimpleNamespace(name="p", **problem),
            quantize="none",
        )

    english_german = {"source_language": "en", "target_language": "de"}
    assert argos_export.refusal(fake_run("vocab.bpe.model", **english_german)) is None
    assert argos_export.language_pair(fake_run("vocab.bpe.model", **english_german)) == (
        "en",
        "de",
    )
    words = argos_export.refusal(fake_run("vocab.wordpiece.txt", **english_german))
    assert words.startswith("its vocabulary vocab.wordpiece.txt is not a SentencePiece model")
    unnamed = fake_run("vocab.bpe.model")
    assert argos_export.refusal(unnamed).startswith("problem p names no language pair")
    assert argos_export.refusal(unnamed, ("en", "fr")) is None
    assert argos_export.language_pair(unnamed, ("en", "fr")) == ("en", "fr")
    with pytest.raises(ValueError, match="runs/x cannot be exported for argostranslate: its voc"):
        argos_export.checked_pair(fake_run("vocab.words.txt", **english_german))
    quantized = fake_run("vocab.bpe.model", **english_german)
    quantized.quantize = "int8"
    assert "--ct2_quantization" in argos_export.refusal(quantized)  # CTranslate2's refusals
