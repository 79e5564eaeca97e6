"""The shipped sweep definitions: table3_small is the paper's Table 3 at half depth and width,
each row keeping its relation to the base (counted on the built models)."""

import functools

import pytest

from t2t_lite.hparams import get_hparams
from t2t_lite.hparams.sweeps import TABLE3_SMALL, SweepDefinition
from t2t_lite.model.transformer import Transformer

# 8000 x d_model 256 is about the share of the parameters that the paper's 37000 x 512 is of its
# base model (27% against 29%), so whole-model ratios compare with the paper's.
VOCAB = 8000
ROWS = {row.name: row for row in TABLE3_SMALL.rows}


def hparams(name: str):
    return get_hparams(ROWS[name].hparams_set, ROWS[name].overrides)


@functools.cache
def counts(name: str) -> tuple[int, int]:
    """(all trainable parameters, those of the attention layers) of a row's built model."""
    model = Transformer.from_hparams(hparams(name), VOCAB)
    model.build()
    sizes = [(v.path, int(v.numpy().size)) for v in model.trainable_variables]
    return sum(s for _, s in sizes), sum(s for path, s in sizes if "_attention/" in path)


def test_every_row_is_the_papers_row_at_half_depth_and_width():
    for row in TABLE3_SMALL.rows:
        hp, paper = hparams(row.name), row.paper
        assert (hp.num_encoder_layers * 2, hp.num_decoder_layers * 2) == (paper.num_layers,) * 2
        assert (hp.d_model * 2, hp.d_ff * 2, hp.num_heads) == (
            paper.d_model, paper.d_ff, paper.num_heads,
        ), row.name  # fmt: skip
        assert (hp.key_dim * 2, hp.value_dim * 2) == (paper.d_k, paper.d_v), row.name
        assert (hp.dropout, hp.label_smoothing, hp.position_encoding) == (
            paper.dropout, paper.label_smoothing, paper.position_encoding,
        ), row.name  # fmt: skip
    groups = [row.group for row in TABLE3_SMALL.rows]
    assert [groups.count(g) for g in ("base", "(A)", "(B)", "(C)", "(D)", "(E)")] == [
        1,
        4,
        2,
        7,
        4,
        1,
    ]


def test_a_rows_keep_the_attention_parameters_and_all_others():
    for name in ("A_h1", "A_h4", "A_h16", "A_h32"):
        hp = hparams(name)
        assert hp.num_heads * hp.key_dim == hp.num_heads * hp.value_dim == hp.d_model
        assert counts(name) == counts("base"), name


def test_b_rows_shrink_the_attention_as_the_papers_rows_do():
    base_paper = ROWS["base"].paper
    for name in ("B_dk8", "B_dk16"):
        paper = ROWS[name].paper
        # q, k: d_model x h x d_k each; v, output: d_model x h x d_v each.
        expected = (paper.d_k + paper.d_v) / (base_paper.d_k + base_paper.d_v)
        assert counts(name)[1] / counts("base")[1] == pytest.approx(expected, rel=1e-12)
    # Fewer parameters in the paper's order: d_k 16 < d_k 32 < base (58M < 60M < 65M).
    assert counts("B_dk8")[0] < counts("B_dk16")[0] < counts("base")[0]


@pytest.mark.parametrize(
    "name", ["C_n1", "C_n2", "C_n4", "C_d128", "C_d512", "C_ff512", "C_ff2048"]
)
def test_c_rows_change_the_parameters_as_the_papers_rows_do(name):
    paper_ratio = ROWS[name].paper.params_millions / ROWS["base"].paper.params_millions
    ratio = counts(name)[0] / counts("base")[0]
    assert (ratio > 1) == (paper_ratio > 1)
    assert ratio == pytest.approx(paper_ratio, rel=0.08)


def test_d_and_e_rows_change_one_setting():
    base = hparams("base")
    assert hparams("D_drop0").replace(dropout=0.1) == base
    assert hparams("D_drop0.2").replace(dropout=0.1) == base
    assert hparams("D_ls0").replace(label_smoothing=0.1) == base
    assert hparams("D_ls0.2").replace(label_smoothing=0.1) == base
    assert hparams("E_learned").replace(position_encoding="sinusoid") == base
    # A learned table of max_positions x d_model instead of the sinusoids.
    assert counts("E_learned")[0] - counts("base")[0] == base.max_positions * base.d_model


def test_the_definition_round_trips_through_json():
    assert SweepDefinition.from_dict(TABLE3_SMALL.to_dict()) == TABLE3_SMALL
    with pytest.raises(ValueError, match="not a sweep definition"):
        SweepDefinition.from_dict({"name": "x", "rows": [{"name": "r"}], "base": "r"})
