"""t2t-export --format=ctranslate2: CTranslate2 scores every kind of layout exactly as the model
does, its beam search finds t2t-decode's translations on 50 sentences of a trained tiny model
(the shared reverse-words run, tests/reverse_words.py), the README beside the model runs, and
what it cannot hold is refused naming the setting."""

from __future__ import annotations

import json
import os
import re
import types

import ctranslate2
import numpy as np
import pytest
from command_helpers import run_json, run_python
from decoding_helpers import model_hparams, padded, random_inputs, tiny_model
from reverse_words import (
    CT2_SEARCH,
    EXTRA,
    MAX_POSITIONS,
    STEPS,
    reversed_words,
    sentences,
)

from t2t_lite.decode import transformer_step
from t2t_lite.decode.details import forced_pass
from t2t_lite.hparams import SearchSettings
from t2t_lite.model.ensemble import Ensemble
from t2t_lite.run.run import Run
from t2t_lite.serve import ctranslate2_export as ct2

TOKENS = ["<pad>", "<EOS>", "<unk>"] + [f"t{i}" for i in range(3, 13)]


@pytest.fixture(autouse=True)
def _seed():
    """No reseeding (tests/serve/test_export.py): SentencePiece resources live across tests."""
    yield


@pytest.fixture(scope="module")
def trained(reverse_words_run, reverse_words_ct2):
    """The shared reverse-words run, restored for CTranslate2's search, and its export."""
    return {"run": Run.restore(reverse_words_run, search=CT2_SEARCH), **reverse_words_ct2}


def _ct2_ids(translator, tokens: list[str], source: list[int], beam: int) -> list[int]:
    """CTranslate2's best hypothesis for one sentence (ids without EOS, then EOS if it ended),
    searched as t2t-decode searches: same beam, no length penalty, this sentence's maximum
    length (its tokens + EOS + EXTRA, at most the model's positions)."""
    (result,) = translator.translate_batch(
        [[tokens[i] for i in source]],
        beam_size=beam,
        length_penalty=0.0,
        max_input_length=MAX_POSITIONS,
        max_decoding_length=min(len(source) + 1 + EXTRA, MAX_POSITIONS),
        return_end_token=True,
    )
    index = {token: i for i, token in enumerate(tokens)}
    return [index[token] for token in result.hypotheses[0]]


def test_beam_search_finds_t2t_decodes_translations(trained):
    run, path = trained["run"], trained["path"]
    assert trained["seconds"] < 10, trained["seconds"]
    tokens = ct2.vocabulary_tokens(run.tokenizer.path)
    translator = ctranslate2.Translator(path, device="cpu", compute_type="float32")
    lines = sentences(50, seed=9)
    sources = [run.tokenizer.encode_py(line) for line in lines]
    width = max(map(len, sources)) + 1
    inputs = np.array([padded(tuple(s + [1]), width) for s in sources], np.int32)
    found = transformer_step.translate_ids(
        run.model, inputs, beam_size=4, alpha=0.0, extra_length=EXTRA
    )
    ours = [[t for t in row if t] for row in found.ids.numpy()[:, 0].tolist()]
    theirs = [_ct2_ids(translator, tokens, source, 4) for source in sources]
    differ = [i for i in range(50) if ours[i] != theirs[i]]
    if differ:  # only an exact tie may go either way: equal log-probs under the model
        ids = np.array([padded(tuple(theirs[i]), MAX_POSITIONS) for i in differ], np.int32)
        scores = transformer_step.score_ids(run.model, inputs[differ], ids).numpy()
        np.testing.assert_allclose(scores, found.scores.numpy()[differ, 0], atol=1e-5)
    assert len(differ) <= 2, differ
    right = sum(
        run.tokenizer.decode_py(o) == reversed_words(s) for o, s in zip(ours, lines, strict=True)
    )
    assert right >= 25, f"the model is barely trained: {right} of 50 reversed"
    assert sum(o[-1:] == [1] for o in ours) >= 45  # most end with EOS, not at the maximum


def test_target_prefix_and_attention_agree_with_the_prefixed_search(trained):
    """CTranslate2's target_prefix gives the outputs of t2t-decode's --prefix_file search, and
    its return_attention the attention that t2t-decode's alignments come from."""
    run, path = trained["run"], trained["path"]
    tokens = ct2.vocabulary_tokens(run.tokenizer.path)
    translator = ctranslate2.Translator(path, device="cpu", compute_type="float32")
    lines = sentences(20, seed=11)
    sources = [run.tokenizer.encode_py(line) for line in lines]
    prefixes = [run.tokenizer.encode_py(line.split()[0]) for line in lines]  # not the reversal's
    width = max(map(len, sources)) + 1
    inputs = np.array([padded(tuple(s + [1]), width) for s in sources], np.int32)
    prefix = np.array([padded(tuple(p), max(map(len, prefixes))) for p in prefixes], np.int32)
    found = transformer_step.translate_ids(
        run.model, inputs, beam_size=4, alpha=0.0, extra_length=EXTRA, prefix=prefix
    )
    ours = [[t for t in row if t] for row in found.ids.numpy()[:, 0].tolist()]
    index = {token: i for i, token in enumerate(tokens)}
    same = 0
    for i, (source, start) in enumerate(zip(sources, prefixes, strict=True)):
        (result,) = translator.translate_batch(
            [[tokens[t] for t in source]],
            target_prefix=[[tokens[t] for t in start]],
            beam_size=4,
            length_penalty=0.0,
            max_input_length=MAX_POSITIONS,
            max_decoding_length=min(len(source) + 1 + EXTRA, MAX_POSITIONS),
            return_end_token=True,
            return_attention=True,
        )
        theirs = [index[t] for t in result.hypotheses[0]]
        assert theirs[: len(start)] == start and ours[i][: len(start)] == start
        if theirs != ours[i]:
            continue  # a tie (checked below by count)
        same += 1
        _, attention = forced_pass(run.model, inputs[i : i + 1], np.array([ours[i]], np.int32))
        # CTranslate2 leaves out the source's EOS column; the weights are the same.
        expected = attention.numpy()[0, :, : len(source)]
        got = np.array(result.attention[0])
        np.testing.assert_allclose(got, expected[: got.shape[0]], atol=1e-4)
        assert got.shape[0] >= len(ours[i]) - 1
    assert same >= 18, same


def test_folder_holds_vocabulary_and_a_readme_that_runs(trained):
    path, info = trained["path"], trained["info"]
    assert sorted(os.listdir(path)) == [
        "README.md",
        "config.json",
        "model.bin",
        "shared_vocabulary.json",
        "t2t_export.json",
        "vocab.bpe.model",
    ]
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    assert config["decoder_start_token"] == "<pad>" and config["eos_token"] == "<EOS>"
    assert config["add_source_eos"] is True and config["layer_norm_epsilon"] == 1e-6
    assert info["quantization"] == "float32" and info["checkpoint"].endswith(f"ckpt-{STEPS}")
    with open(os.path.join(path, "README.md")) as f:
        readme = f.read()
    # the run and checkpoint by name: the README travels without this machine
    assert readme.startswith(f"# CTranslate2 model of the run run\n\nCheckpoint ckpt-{STEPS} (")
    assert "/tmp" not in readme
    (code,) = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert "patience" not in code  # the exact bound's export: CTranslate2's default
    # A model exported with --patience=1.5 asks CTranslate2 for it.
    patient = ct2.usage({**info, "settings": {**info["settings"], "patience": 1.5}})
    (patient_code,) = re.findall(r"```python\n(.*?)```", patient, re.S)
    assert "    patience=1.5,  # t2t-export --patience\n" in patient_code
    both = "\n".join(c.replace('folder = "."', f"folder = {path!r}") for c in (code, patient_code))
    done = run_python("-c", both, timeout=120)
    printed = done.stdout.splitlines()
    assert len(printed) == 2 and all(len(eval(line)) == 1 for line in printed)  # noqa: S307


def test_cli_converts_with_int8_and_refuses_unknown_quantization(trained, tmp_path):
    run = trained["run"]
    report = run_json(
        "-m", "t2t_lite.bin.t2t_export", f"--output_dir={run.output_dir}",
        "--format=ctranslate2", f"--export_dir={tmp_path}", "--ct2_quantization=int8",
    )  # fmt: skip
    assert report["ctranslate2"] == str(tmp_path / "1")
    translator = ctranslate2.Translator(report["ctranslate2"], compute_type="int8")
    assert translator.translate_batch([["▁the", "▁cat"]])[0].hypotheses[0]
    with pytest.raises(ValueError, match="--ct2_quantization='int4' is not one of"):
        ct2.export_run(run, str(tmp_path), quantization="int4")
    assert sorted(os.listdir(tmp_path)) == ["1"]  # nothing half-written


LAYOUTS = [
    "",
    ",norm_position=pre",
    ",shared_embeddings=false,position_encoding=sinusoid_concat",
    ",position_encoding=learned,norm_position=pre",
    ",d_k=12,d_v=12",
]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_layout_scores_as_the_model(layout, tmp_path):
    """Post- and pre-norm, shared or separate embeddings, each position table, heads wider than
    d_model / h: CTranslate2's log-probs of given targets equal the model's."""
    model = tiny_model(13, seed=4, overrides=layout)
    ct2.T2TLiteConverter(model, TOKENS).convert(str(tmp_path / "m"))
    translator = ctranslate2.Translator(str(tmp_path / "m"), compute_type="float32")
    inputs, targets = random_inputs(6, 6, 13, seed=2), random_inputs(6, 5, 13, seed=3)
    words = [[[TOKENS[i] for i in row if i > 1] for row in ids] for ids in (inputs, targets)]
    scored = translator.score_batch(*words)
    assert scored[0].tokens[-1] == "<EOS>"
    expected = transformer_step.score_ids(model, inputs, targets).numpy()
    np.testing.assert_allclose([sum(r.log_probs) for r in scored], expected, atol=2e-5)


def test_what_ctranslate2_cannot_hold_is_refused():
    def fake_run(model, quantize="none", **search):
        return types.SimpleNamespace(
            model=model,
            hparams=model_hparams(getattr(model, "models", [model])[0]),
            search=SearchSettings(**search),
            problem=types.SimpleNamespace(name="parse_gum"),
            quantize=quantize,
        )

    model = tiny_model(13)
    assert ct2.refusal(fake_run(model)) is None
    parsing = tiny_model(13)
    parsing.output_vocab_size = 9
    assert "output_vocab_size=9 < vocab_size=13" in ct2.refusal(fake_run(parsing))
    wide_keys = tiny_model(13, overrides=",d_k=12")
    assert "d_k=12 != d_v=8" in ct2.refusal(fake_run(wide_keys))
    assert "--noconstrained" in ct2.refusal(fake_run(model, constrained=True))
    assert "--ct2_quantization" in ct2.refusal(fake_run(model, quantize="int8"))
    assert "several checkpoints" in ct2.refusal(fake_run(Ensemble([model, model])))
    with pytest.raises(ValueError, match="must begin with"):
        ct2.T2TLiteConverter(model, TOKENS[::-1])
