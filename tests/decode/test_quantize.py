"""int8 decoding (`--quantize=int8`, t2t_lite.model.quantize) on a tiny model trained to reverse
digits: which weights are int8, the int8 products against a NumPy reference, the logits within
the stated tolerance of float32's, the same translations, cached against recomputed decoding,
and the flag through t2t-decode and t2t-export (the SavedModel loads and translates)."""

from __future__ import annotations

import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from command_helpers import command
from decoding_helpers import (
    random_inputs,
    t2t_decode,
    tiny_model,
    train_in_one_loop,
    write_tiny_run,
)

from t2t_lite.decode import transformer_step
from t2t_lite.decode.translator import Translator
from t2t_lite.hparams import get_hparams
from t2t_lite.model.ensemble import Ensemble
from t2t_lite.model.layers import SharedEmbedding, int8_kernel, int8_product
from t2t_lite.model.quantize import check_mode, quantize_model, quantized_layers
from t2t_lite.model.transformer import Transformer
from t2t_lite.run import run as run_module
from t2t_lite.run.run import Run
from t2t_lite.search import contract

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
LAYERS = 2  # encoder and decoder layers
SEARCH = {"beam_size": 3, "alpha": 0.6, "extra_length": 2}
# The int8 model's teacher-forced logits differ from float32's by at most TOLERANCE in relative
# RMS, ||int8 - float32||_2 / ||float32||_2. The weights are int8 and the inputs float: one
# product y = sum_i x_i w_i rounds each w_i to a step of max|w| / 127 (per output channel), an
# error uniform within half a step, RMS step / sqrt(12). These errors are independent, so
# relative to y's RMS they give c / (127 sqrt(12)), where c = max|w| / RMS(w) is the channel's
# crest factor (2.5 to 3.5 for Gaussian rows of 32 to 1024 weights): 0.6% to 0.8% per product.
# Layer norms rescale between the products, so the errors of the 5 to 9 products on a path to
# the logits add in quadrature: at most 3 x 0.8% = 2.4%, and 5% leaves room for heavier-tailed
# trained weights. Measured: 1.3% here and 1.3% on the demo's transformer_small
# (docs/decoding.md). The largest single error, a tail value, is checked against twice that,
# relative to the largest logit (measured: 4.3%).
TOLERANCE = 0.05


def reverse_batch(rng: np.random.Generator, rows: int, longest: int = 7):
    """Sources of 1..longest digit ids (3..12) then EOS, and their reversals then EOS, both
    [rows, longest + 1] int32 zero-padded."""
    sources = np.zeros((rows, longest + 1), np.int32)
    targets = np.zeros_like(sources)
    for row, length in enumerate(rng.integers(1, longest + 1, rows)):
        digits = rng.integers(3, 13, length)
        sources[row, :length], targets[row, :length] = digits, digits[::-1]
        sources[row, length] = targets[row, length] = 1
    return sources, targets


def train_reverse(steps: int = 500) -> Transformer:
    """A 2+2-layer Transformer (d_model 32) trained with Adam to reverse digit strings; it gets
    over 99% of them right. The rate decays linearly from 3e-3 to 1e-4: at a constant 3e-3 the
    last steps kept moving the model, and where TensorFlow's thread scheduling changes the sums
    (an AVX2-only CPU) one run reversed 156 of the 200 test strings after 400 steps; decayed, six
    seeds reversed 198 to 200."""
    keras.utils.set_random_seed(5)
    hparams = get_hparams(
        "transformer_tiny",
        f"num_encoder_layers={LAYERS},num_decoder_layers={LAYERS},d_model=32,d_ff=64,"
        "num_heads=4,max_positions=16,dropout=0.0",
    )
    model = Transformer.from_hparams(hparams, 13)
    model.build()
    optimizer = keras.optimizers.Adam(keras.optimizers.schedules.PolynomialDecay(3e-3, steps, 1e-4))
    rng = np.random.default_rng(0)
    batches = [reverse_batch(rng, 128) for _ in range(steps)]  # every step's, drawn up front
    train_in_one_loop(model, optimizer, *(np.stack(part) for part in zip(*batches, strict=True)))
    return model


def _text(ids: np.ndarray) -> str:
    return " ".join(str(i - 3) for i in ids if i > 1)


# The parent's run, which the same tests under another oneDNN kernel restore instead of training
# their own (test_the_same_checks_under_another_onednn_kernel).
RUN_ENV = "T2T_QUANTIZE_TEST_RUN"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("quantize")
    output_dir = os.environ.get(RUN_ENV)
    if not output_dir:
        output_dir, _, _ = write_tiny_run(
            root, model=train_reverse(), problem="algorithmic_reverse"
        )
    sources, targets = reverse_batch(np.random.default_rng(7), 200)
    return {
        "root": root,
        "output_dir": str(output_dir),
        "float": Run.restore(str(output_dir), search=SEARCH),
        "int8": Run.restore(str(output_dir), search=SEARCH, quantize="int8"),
        "sources": sources,
        "targets": targets,
        "lines": [_text(row) for row in sources],
    }


def test_the_claimed_layers_hold_int8_weights(trained):
    model, run = trained["int8"].model, trained["int8"]
    assert run.quantize == "int8" and run.describe()["quantize"] == "int8"
    layers = quantized_layers(model)
    # Per encoder layer q, k, v, output and the two feed-forward layers; per decoder layer
    # twice the attention; and the shared embedding, which also computes the logits.
    assert len(layers) == LAYERS * 6 + LAYERS * 10 + 1
    assert {type(layer).__name__ for layer in layers} == {"Projection", "Dense", "SharedEmbedding"}
    for layer in layers:
        assert layer.quantization_mode == "int8", layer.path
        kinds = {v.path.rsplit("/", 1)[-1]: v.dtype for v in layer.weights}
        matrix = "embeddings" if isinstance(layer, SharedEmbedding) else "kernel"
        assert kinds[matrix] == "int8" and kinds[f"{matrix}_scale"] == "float32", kinds
    # No float matrix is left: what stays float are the scales, biases and layer norms.
    for variable in model.weights:
        if variable.path.endswith(("kernel", "embeddings")):
            assert variable.dtype == "int8", variable.path
        elif variable.dtype == "float32":
            assert variable.path.endswith(("_scale", "bias", "gamma", "beta")), variable.path
    assert not quantized_layers(trained["float"].model)


def test_int8_embedding_equals_a_numpy_reference():
    layer = SharedEmbedding(50, 16)
    layer.build()
    weights = layer.embeddings.numpy().astype(np.float64)
    x = np.random.default_rng(3).normal(size=(2, 5, 16)).astype(np.float32)
    ids = np.array([[0, 1, 7, 49], [3, 3, 0, 20]], np.int32)
    layer.quantize("int8")

    def quantized(a):  # abs-max per row to [-127, 127]: (int values, scale)
        scale = 127.0 / (np.abs(a).max(axis=-1, keepdims=True) + keras.config.epsilon())
        return np.clip(np.round(a * scale), -127, 127), scale

    w_q, w_scale = quantized(weights)
    np.testing.assert_array_equal(layer.embeddings.numpy(), w_q)
    assert layer.embeddings.dtype == "int8" and layer.quantization_mode == "int8"
    # Each weight is within half a step of its row's scale.
    assert np.all(np.abs(w_q / w_scale - weights) <= 0.5 / w_scale + 1e-7)
    expected = x.astype(np.float64) @ (w_q / w_scale).T  # the inputs stay float
    np.testing.assert_allclose(layer.logits(x), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(layer.logits(x, limit=9), expected[..., :9], rtol=1e-5, atol=1e-6)
    looked_up = (w_q / w_scale)[ids] * 4.0 * (ids != 0)[..., None]  # sqrt(16) = 4
    np.testing.assert_allclose(layer(ids), looked_up, rtol=1e-6, atol=1e-7)


def test_logits_are_within_the_tolerance_of_float32(trained):
    features = {"inputs": trained["sources"], "targets": trained["targets"]}
    exact = trained["float"].model(features).numpy()
    int8 = trained["int8"].model(features).numpy()
    rms_error = np.linalg.norm(int8 - exact) / np.linalg.norm(exact)
    assert 0 < rms_error < TOLERANCE, rms_error
    largest_error = np.abs(int8 - exact).max() / np.abs(exact).max()
    assert largest_error < 2 * TOLERANCE, largest_error
    # The model's log-probability of each reference (up to 8 tokens) moves by little.
    scores = [
        transformer_step.score_ids(trained[kind].model, *features.values()).numpy()
        for kind in ("float", "int8")
    ]
    moved = np.abs(scores[1] - scores[0])
    assert moved.mean() < 0.02, moved.mean()
    # log p_t = z_t - logsumexp(z) moves by at most 2 max_j |dz_j| at each token, so a reference's
    # score by at most the sum of those over its tokens (measured: an eighth of it or less). The
    # largest shift depends on the trained model: 0.19 on an AMD EPYC, 0.30 and 0.68 on an Intel
    # Xeon (the 0.30 on a reference the model gives p = 0.24).
    bound = 2 * np.sum(np.abs(int8 - exact).max(axis=-1) * (features["targets"] > 0), axis=1)
    assert np.all(moved <= bound + 1e-5), np.flatnonzero(moved > bound + 1e-5)


def test_int8_translates_as_float32(trained):
    lines = trained["lines"]
    names = [f"in:{i + 1}" for i in range(len(lines))]
    found = {
        kind: Translator.from_run(trained[kind], batch_tokens=256).hypotheses(lines, names)
        for kind in ("float", "int8")
    }
    for kind in found:  # the model is trained: nearly every line is reversed
        right = sum(
            h[0].text == " ".join(s.split()[::-1]) for h, s in zip(found[kind], lines, strict=True)
        )
        assert right >= 195, (kind, right)
    # Rounded weights (and, where oneDNN's 8-bit product runs, rounded inputs) may turn a near
    # tie between two translations the other way: at most 1 % of them, and each a near tie under
    # float32 (measured: 0 or 1 of these 200 on an AMD EPYC and an Intel Xeon, 0.28 apart).
    float_model = trained["float"].model
    differ = [
        i for i, (a, b) in enumerate(zip(*found.values(), strict=True)) if a[0].text != b[0].text
    ]
    assert len(differ) <= 2, differ
    for i in differ:
        texts = [found[kind][i][0].text for kind in ("float", "int8")]
        scores = _normalized_scores(float_model, trained["sources"][i], texts)
        assert scores[0] - scores[1] < NEAR_TIE, (i, texts, scores)
    greedy = {
        kind: transformer_step.sample_ids(trained[kind].model, trained["sources"]).ids.numpy()[:, 0]
        for kind in ("float", "int8")
    }
    differ = np.flatnonzero(np.any(greedy["int8"] != greedy["float"], axis=1))
    assert len(differ) <= 2, differ
    for i in differ:  # at the first token that differs, float32's log-probs of the two nearly tie
        a, b = greedy["float"][i], greedy["int8"][i]
        t = int(np.flatnonzero(a != b)[0])
        prefix = np.zeros((1, len(a)), np.int32)
        prefix[0, : t + 1] = a[: t + 1]
        features = {"inputs": trained["sources"][i : i + 1], "targets": prefix}
        log_probs = tf.nn.log_softmax(float_model(features)[0, t]).numpy()
        assert log_probs[a[t]] - log_probs[b[t]] < NEAR_TIE, (i, t, log_probs[[a[t], b[t]]])


# Two outputs whose float32 scores are this close (in nats, normalized by the search's length
# penalty for beam search) are a near tie that int8's rounding may turn.
NEAR_TIE = 0.5


def _normalized_scores(model, source: np.ndarray, texts: list[str]) -> list[float]:
    """The beam search's score of each digit text for `source` under `model`: log p (EOS
    included) over the length penalty with SEARCH's alpha."""
    found = []
    for text in texts:
        ids = [int(token) + 3 for token in text.split()] + [1]  # _text's inverse, then EOS
        row = np.zeros((1, len(source) + SEARCH["extra_length"] + 1), np.int32)
        row[0, : len(ids)] = ids
        log_p = transformer_step.score_ids(model, source[None], row)[0]
        found.append(float(log_p / contract.length_penalty(len(ids), SEARCH["alpha"])))
    return found


@pytest.mark.skipif(
    bool(os.environ.get("ONEDNN_MAX_CPU_ISA")), reason="already under a forced kernel"
)
@pytest.mark.parametrize("cap", int8_kernel.forcible())
def test_the_same_checks_under_another_onednn_kernel(cap, trained):
    """The tolerance, translation and cache tests again, on the same trained run, in a process
    whose oneDNN runs another int8 kernel (int8_kernel.forcible): one with int32 sums below AMX,
    one that clips int16 pair sums. Each must pass, with 8-bit products where `check` found the
    kernel exact and Keras' weight-only products where it did not."""
    selected = "tolerance or translates_as_float32 or cached_int8"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", selected, __file__],
        capture_output=True,
        text=True,
        env={**ENV, "ONEDNN_MAX_CPU_ISA": cap, RUN_ENV: trained["output_dir"]},
        timeout=600,
    )
    assert done.returncode == 0 and "3 passed" in done.stdout, done.stdout[-3000:]


def test_cached_int8_decoding_equals_recomputation(trained):
    """Every call path of the quantized layers (the 2-D views of the cached step, the memory
    projected once, the whole prefix recomputed) uses the same int8 weights."""
    model, sources = trained["int8"].model, trained["sources"][:40]
    found = [
        transformer_step.translate_ids(model, sources, beam_size=3, nbest=2, use_cache=cache)
        for cache in (True, False)
    ]
    np.testing.assert_array_equal(found[0].ids, found[1].ids)
    np.testing.assert_allclose(found[0].scores, found[1].scores, rtol=1e-5, atol=1e-5)


def test_a_bfloat16_model_quantizes_too():
    model = tiny_model(13, overrides=",precision=mixed_bfloat16")
    inputs = random_inputs(6, 6, 13, seed=4)
    features = {"inputs": inputs, "targets": inputs}
    exact = model(features).numpy()
    found = transformer_step.translate_ids(model, inputs, beam_size=2)
    quantize_model(model, "int8")
    assert model.embedding.embeddings_scale.dtype == "float32"
    assert model.encoder.blocks[0].feed_forward.hidden.quantization_mode == "int8"
    int8 = model(features).numpy()
    assert np.linalg.norm(int8 - exact) / np.linalg.norm(exact) < TOLERANCE
    quantized = transformer_step.translate_ids(model, inputs, beam_size=2)
    assert quantized.ids.shape[:2] == found.ids.shape[:2]
    assert np.isfinite(quantized.scores.numpy()).all()


def test_refusals_and_ensembles():
    with pytest.raises(ValueError, match="--quantize='int4' is not one of none, int8"):
        check_mode("int4")
    half = Transformer.from_hparams(get_hparams("transformer_tiny", "precision=mixed_float16"), 13)
    half.build()
    with pytest.raises(ValueError, match="float16"):
        quantize_model(half, "int8")
    members = [tiny_model(13, seed=1), tiny_model(13, seed=2)]
    quantize_model(Ensemble(members), "int8")
    assert all(len(quantized_layers(m)) == 17 for m in members)  # 1+1 layers: 6 + 10 + 1


def test_t2t_decode_and_t2t_export_with_quantize(trained, tmp_path, monkeypatch):
    """t2t-decode --quantize=int8 (`run_decode`, which the command calls with its flags, in this
    process; tests/bin/test_run_flags.py checks that it reads every run flag) writes the int8
    Translator's translations and says so; t2t-export --quantize=int8, as a command, writes int8
    weights that translate the same."""
    source = tmp_path / "in.txt"
    source.write_text("".join(f"{line}\n" for line in trained["lines"][:30]))
    said = []
    monkeypatch.setattr(
        run_module.logging, "info", lambda text, *args: said.append(text % args if args else text)
    )
    decoded = t2t_decode(
        source, tmp_path / "out.txt", output_dir=trained["output_dir"], quantize="int8", **SEARCH
    )
    fast = sum(int8_product.prepared(x) for x in quantized_layers(trained["int8"].model))
    assert [line for line in said if line.startswith("int8: ")] == [  # the kernel, once
        f"int8: {int8_product.check().describe()}",
        f"int8: 33 layers quantized, {fast} of them with 8-bit products (oneDNN)",
    ]
    names = [f"in:{i}" for i in range(30)]
    expected = Translator.from_run(trained["int8"]).hypotheses(trained["lines"][:30], names)
    assert decoded == [h[0].text for h in expected]

    search = [f"--{k}={v}" for k, v in SEARCH.items()]
    run = ["--output_dir=" + trained["output_dir"], *search]
    export_dir = tmp_path / "export"
    exported = command("t2t_export", *run, f"--export_dir={export_dir}", "--quantize=int8")
    assert exported.returncode == 0, exported.stderr[-3000:]
    path = str(export_dir / "1")
    dtypes = tf.train.load_checkpoint(f"{path}/variables/variables").get_variable_to_dtype_map()
    # The root's list of the model's variables (`captured` lists them once more).
    int8 = [k for k, d in dtypes.items() if k.startswith("model_variables/") and d == tf.int8]
    assert len(int8) == 33, dtypes
    loaded = tf.saved_model.load(path)
    served = loaded.signatures["serving_default"](inputs=tf.constant(trained["lines"][:30]))
    assert [s.decode() for s in served["outputs"].numpy()] == [h[0].text for h in expected]


@pytest.mark.parametrize(
    "cpu",
    [
        # An AVX2-only CPU (AMD EPYC without AVX-512): TensorFlow leaves oneDNN off, no op runs.
        int8_product.Check(int8_kernel.isa({"avx2", "sse4_1"}, cap=""), runs=False),
        # AVX-512 without VNNI: oneDNN's kernel sums pairs in int16 and clips.
        int8_product.Check("avx512_core", runs=True, sums_error=64510.0, rounding_error=0.5),
    ],
    ids=["avx2_only", "avx512_no_vnni"],
)
def test_int8_without_8_bit_products_says_what_speeds_decoding(tmp_path, monkeypatch, cpu):
    output_dir, _, _ = write_tiny_run(tmp_path)
    monkeypatch.setattr(int8_product, "check", lambda: cpu)  # this CPU's facts, faked
    lines = []
    monkeypatch.setattr(run_module.logging, "info", lambda text, *args: lines.append(text % args))
    run = Run.restore(str(output_dir), quantize="int8")
    assert not any(int8_product.prepared(layer) for layer in quantized_layers(run.model))
    said = [line for line in lines if line.startswith("int8: ")]
    why = (
        "no 8-bit product op here (TensorFlow runs its oneDNN ops by default only on CPUs with "
        "AVX-512 VNNI, AVX-512 BF16 or AMX)"
        if not cpu.runs
        else "oneDNN's avx512_core kernel (int16 pair sums) is not exact on this CPU (sums off by "
        "up to 6.45e+04 x 2/255 x 127, inputs by 0.5 steps)"
    )
    assert said[0] == (
        f"int8: {why}: float inputs times the int8 weights, 4x smaller weights and no faster "
        "than float32; what speeds decoding on this CPU is --shortlist (e.g. 100,50) and, on "
        "files of many batches, --inter_threads=2, or t2t-export --format=ctranslate2"
    )
    assert said[1].endswith("quantized, 0 of them with 8-bit products (oneDNN)")
