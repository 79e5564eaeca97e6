"""Attention maps and the pictures t2t-visualize writes, on a tiny model."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from command_helpers import command
from decoding_helpers import tiny_model, write_tiny_run

from t2t_lite.data import load_tokenizer
from t2t_lite.decode.translator import Translator
from t2t_lite.decode.visualize import sentence_attention, write_pictures
from t2t_lite.hparams import SearchSettings
from t2t_lite.run.run import Run

from numpy_reference import softmax

WORDS = [str(i) for i in range(10)]


@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_attention_maps_are_the_models_own(norm_position):
    model = tiny_model(13, seed=3, overrides=f",norm_position={norm_position}")
    inputs, targets = np.array([[4, 5, 6, 1, 0]]), np.array([[7, 8, 1]])
    maps = model.attention_maps(inputs, targets)
    assert [len(maps[k]) for k in ("encoder", "decoder_self", "decoder_cross")] == [1, 1, 1]
    # Layer 0 of the encoder, recomputed from the embeddings with the NumPy reference.
    x = model.positions(model.embedding(inputs)).numpy().astype(np.float64)
    layer = model.encoder.layer_0
    if norm_position == "pre":
        x = layer.self_attention_norm(x.astype(np.float32)).numpy().astype(np.float64)
    attn = layer.self_attention
    q = np.einsum("btd,dhk->bhtk", x, attn.query_dense.kernel.numpy())
    k = np.einsum("btd,dhk->bhtk", x, attn.key_dense.kernel.numpy())
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    scores = np.where(inputs[:, None, None, :] > 0, scores, -1e9)
    np.testing.assert_allclose(maps["encoder"][0], softmax(scores), atol=1e-5)
    cross = np.asarray(maps["decoder_cross"][0])
    np.testing.assert_allclose(cross.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(cross[..., 4], 0.0)  # padding gets no weight
    self_weights = np.asarray(maps["decoder_self"][0])
    assert np.all(np.triu(self_weights[0, 0], k=1) == 0.0)  # causal


# mixed_bfloat16: what precision=auto chooses on a CPU with AVX-512 BF16 or AMX.
@pytest.mark.parametrize("precision", ["float32", "mixed_bfloat16"])
def test_pictures_and_page(tmp_path, precision):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "vocab.words.txt").write_text("\n".join(["<pad>", "<EOS>", "<unk>"] + WORDS))
    model = tiny_model(13, seed=5, overrides=f",precision={precision}")
    translator = Translator(model, load_tokenizer(str(data_dir)), SearchSettings(beam_size=2))
    attention = sentence_attention(translator, "3 1 4 1 5")
    assert attention["source"] == ["3", "1", "4", "1", "5", "</s>"]
    assert {w.dtype for kind in ("encoder", "decoder_cross") for w in attention[kind]} == {
        np.dtype(np.float32)
    }
    paths = write_pictures(attention, str(tmp_path / "pictures"))
    assert len(paths) == 3
    for path in paths:
        data = open(path, "rb").read()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        image = tf.io.decode_png(data).numpy()
        assert image.shape[0] > 50 and image.shape[1] > 50 and image.std() > 5  # not blank
    page = (tmp_path / "pictures" / "index.html").read_text()
    assert page.count("data:image/png;base64,") == 3 and "3 1 4 1 5 &lt;/s&gt;" in page


@pytest.mark.parametrize("quantize", ["none", "int8"])
def test_cli(tmp_path, quantize):
    output_dir, _, _ = write_tiny_run(tmp_path, max_positions=32, seed=7)
    result = command(
        "t2t_visualize", f"--output_dir={output_dir}", "--inputs=2 7 1 8",
        f"--quantize={quantize}",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    # The pictured translation is the one of the (quantized) run that t2t-decode restores.
    run = Run.restore(str(output_dir), quantize=quantize)
    expected = sentence_attention(Translator.from_run(run), "2 7 1 8")["translation"]
    assert f"translation: {expected}\n" in result.stderr
    assert sorted(p.name for p in (output_dir / "attention").iterdir()) == [
        "decoder_cross_layer0.png",
        "decoder_self_layer0.png",
        "encoder_layer0.png",
        "index.html",
    ]
