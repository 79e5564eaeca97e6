import json

import pytest

from t2t_lite.hparams import HPARAMS_SETS, TABLE3_SETS, HParams, get_hparams
from t2t_lite.registry import Registry


def test_paper_sets():
    base, big = get_hparams("transformer_base"), get_hparams("transformer_big")
    assert (base.num_encoder_layers, base.d_model, base.d_ff, base.num_heads) == (6, 512, 2048, 8)
    assert (base.key_dim, base.value_dim, base.dropout, base.label_smoothing) == (64, 64, 0.1, 0.1)
    assert (base.adam_beta1, base.adam_beta2, base.adam_epsilon) == (0.9, 0.98, 1e-9)
    assert (base.warmup_steps, base.norm_position, base.position_encoding) == (
        4000,
        "post",
        "sinusoid",
    )
    assert (big.d_model, big.d_ff, big.num_heads, big.dropout, big.key_dim) == (
        1024,
        4096,
        16,
        0.3,
        64,
    )
    assert get_hparams("transformer_big_enfr").dropout == 0.1
    parsing = get_hparams("transformer_parsing")
    assert (parsing.num_encoder_layers, parsing.num_decoder_layers, parsing.d_model) == (4, 4, 1024)
    t2t = get_hparams("transformer_base_t2t")
    assert (t2t.norm_position, t2t.position_encoding, t2t.learning_rate, t2t.warmup_steps) == (
        "pre",
        "sinusoid_concat",
        2.0,
        8000,
    )


def test_table3_rows():
    assert len(TABLE3_SETS) == 18
    assert get_hparams("transformer_base_h1").key_dim == 512
    assert get_hparams("transformer_base_h32").value_dim == 16
    dk16 = get_hparams("transformer_base_dk16")
    assert (dk16.key_dim, dk16.value_dim) == (16, 64)
    assert get_hparams("transformer_base_d256").key_dim == 32
    assert get_hparams("transformer_base_d1024").key_dim == 128
    assert get_hparams("transformer_base_ls02").label_smoothing == 0.2


def test_student_sets_are_deep_encoder_shallow_decoder():
    """The distillation students: the teacher set's width and recipe, layers moved from the
    decoder to the encoder; each builds and runs."""
    import numpy as np

    from t2t_lite.model.transformer import Transformer

    for student, teacher, layers in [
        ("transformer_small_student", "transformer_small", (6, 1)),
        ("transformer_base_student", "transformer_base", (12, 1)),
    ]:
        hparams = get_hparams(student)
        assert (hparams.num_encoder_layers, hparams.num_decoder_layers) == layers
        parent = get_hparams(teacher).to_dict()
        changed = {k for k, v in hparams.to_dict().items() if v != parent[k]}
        assert changed == {"num_encoder_layers", "num_decoder_layers"}, student
    model = Transformer.from_hparams(get_hparams("transformer_small_student"), vocab_size=50)
    features = {"inputs": np.array([[3, 4, 1]]), "targets": np.array([[5, 1]])}
    assert model(features).shape == (1, 2, 50)
    assert (len(model.encoder.blocks), len(model.decoder.blocks)) == (6, 1)


def test_strict_overrides():
    hp = get_hparams(
        "transformer_base", "d_model=256, dropout=0.2,norm_position=pre,jit_compile=true"
    )
    assert (hp.d_model, hp.dropout, hp.norm_position, hp.jit_compile) == (256, 0.2, "pre", True)
    with pytest.raises(ValueError, match="unknown hparam 'dmodel'; did you mean 'd_model'"):
        get_hparams("transformer_base", "dmodel=256")
    with pytest.raises(ValueError, match="d_model expects int, got '2.5'"):
        get_hparams("transformer_base", "d_model=2.5")
    with pytest.raises(ValueError, match="jit_compile expects bool"):
        get_hparams("transformer_base", "jit_compile=yes please")
    with pytest.raises(ValueError, match="norm_position='middle' is not one of post, pre"):
        get_hparams("transformer_base", "norm_position=middle")
    with pytest.raises(ValueError, match="not of the form key=value"):
        get_hparams("transformer_base", "dropout")


def test_json_round_trip():
    hp = get_hparams("transformer_big", "precision=mixed_bfloat16")
    assert HParams.from_json(hp.to_json()) == hp
    assert HParams.from_dict(json.loads(json.dumps(hp.to_dict()))) == hp
    with pytest.raises(ValueError, match="d_model expects int in json"):
        HParams.from_dict({"d_model": "512"})
    with pytest.raises(ValueError, match="unknown hparam 'd_modle'"):
        HParams.from_dict({"d_modle": 512})


def test_frozen():
    with pytest.raises(AttributeError):
        get_hparams("transformer_base").d_model = 3


def test_registry_errors():
    registry = Registry("thing")
    registry.add("alpha", 1)
    with pytest.raises(KeyError, match="already registered"):
        registry.add("alpha", 2)
    with pytest.raises(KeyError, match="did you mean 'alpha'"):
        registry.get("alpah")
    with pytest.raises(KeyError, match="did you mean 'transformer_base'"):
        HPARAMS_SETS.get("transformer_bsae")
