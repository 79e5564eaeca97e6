"""The model's memory from its hparams alone (t2t_lite.model.footprint): the parameter count is
Keras' count of the built model, the adapter's that of lora.adapter_size, and a model that does
not fit is refused before it is built, naming both figures."""

from __future__ import annotations

import pytest

from t2t_lite.hparams import get_hparams
from t2t_lite.model import Transformer, footprint, lora

VARIANTS = [
    "",
    "norm_position=pre",
    "shared_embeddings=false,position_encoding=learned",
    "d_k=8,d_v=24,num_heads=4",
    "num_encoder_layers=3,num_decoder_layers=1,d_ff=100",
]


def test_a_hand_counted_model():
    # d_model 4, d_ff 8, 2 heads of width 2, one layer a side, 13 ids:
    # attention 4*2*(2+2+2) + 2*2*4 = 64; feed-forward 4*8 + 8 + 8*4 + 4 = 76; norms 8 each;
    # encoder 64 + 76 + 16 = 156, decoder 128 + 76 + 24 = 228, shared embedding 13*4 = 52.
    hparams = get_hparams(
        "transformer_tiny", "d_model=4,d_ff=8,num_heads=2,num_encoder_layers=1,num_decoder_layers=1"
    )
    model = Transformer.from_hparams(hparams, 13)
    model.build()
    assert footprint.parameter_count(hparams, 13) == 436 == model.count_params()
    # + the sinusoid table (256 x 4); training: 3 more copies of the 436 weights.
    assert footprint.estimate_bytes(hparams, 13) == 4 * (436 + 1024)
    assert footprint.estimate_bytes(hparams, 13, training=True) == 4 * (4 * 436 + 1024)


@pytest.mark.parametrize("overrides", VARIANTS)
def test_the_count_is_that_of_the_built_model(overrides):
    hparams = get_hparams("transformer_tiny", overrides)
    model = Transformer.from_hparams(hparams, 37)
    model.build()
    assert footprint.parameter_count(hparams, 37) == model.count_params()
    assert footprint.adapter_parameters(hparams, 3) == lora.adapter_size(model, 3)


def test_an_adapter_run_trains_the_adapter_alone():
    hparams = get_hparams("transformer_tiny", "ema_momentum=0.99")
    weights = footprint.parameter_count(hparams, 13)
    adapter = footprint.adapter_parameters(hparams, 4)
    table = 256 * 64
    trained = footprint.estimate_bytes(hparams, 13, adapter_rank=4, training=True)
    assert trained == 4 * (weights + table + adapter + 4 * adapter)  # gradient, m, v, EMA
    assert footprint.estimate_bytes(hparams, 13, training=True) == 4 * (5 * weights + table)


def test_a_model_above_the_memory_left_is_refused(monkeypatch):
    monkeypatch.setattr(footprint, "available_memory", lambda: (10 * 10**9, "available memory"))
    big = get_hparams("transformer_tiny", "d_model=4096,d_ff=16384,num_heads=8")
    with pytest.raises(footprint.ModelTooLargeError) as refused:
        footprint.check_fits(big, 13, "--hparams_set=transformer_tiny", training=True)
    # 2 + 2 layers: 2 x (4 x 4096^2 + 2 x 4096 x 16384) + 2 x (8 x 4096^2 + 2 x 4096 x 16384),
    # the feed-forward biases, the layer norms and 13 x 4096 of embedding
    assert footprint.parameter_count(big, 13) == 939_741_184
    assert str(refused.value) == (
        "--hparams_set=transformer_tiny: the model it describes needs at least 15.0 GB "
        "(939,741,184 float32 weights, with the gradients and Adam's moments of training), but "
        "this process may take 10.0 GB (available memory); use a machine with more memory, or a "
        "smaller model (d_model, d_ff, layers, vocabulary, adapter rank)"
    )
    footprint.check_fits(big, 13, "--hparams_set=transformer_tiny")  # 3.8 GB to decode: fits
