"""t2t-decode --jit_compile: the search compiled by XLA over bucketed batch shapes finds what the
plain search finds, line for line, with the same scores."""

from __future__ import annotations

import types

import numpy as np
import pytest
from decoding_helpers import decode_flags, tiny_model, write_tiny_run

from t2t_lite.decode.runner import read_input, run_decode
from t2t_lite.decode.translator import Translator
from t2t_lite.hparams import SearchSettings
from t2t_lite.model.layers import int8_product
from t2t_lite.model.quantize import multiplies_in_8_bits, quantized_layers
from t2t_lite.run.run_flags import RunFlags

MAX_POSITIONS = 20  # lines of 17-19 tokens take the bucket of 24, capped at the 20 positions
LINES = [
    "1 2 3", "", "4 5 6 7 8 9 1 2 3 4 5", "7", "9 9 8 7 6", "0 1", "3 3", "5 4 3 2 1 0 9 8 7",
    " ".join("0123456789012345678"), "8", "2 4 6 8 0 2 4 6 8 0 2 4 6", " ".join("98765432109876"),
]  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    output_dir, model, data_dir = write_tiny_run(tmp_path_factory.mktemp("run"), MAX_POSITIONS)
    return RunFlags(str(output_dir), data_dir=str(data_dir)).restore()


@pytest.mark.parametrize(
    "search",
    [
        {"beam_size": 1, "temperature": 0.0, "sampling": True},  # greedy
        {"beam_size": 3, "alpha": 0.6, "nbest": 2},
    ],
    ids=["greedy", "beam3_nbest2"],
)
def test_jit_compile_finds_the_plain_searchs_hypotheses(run, search):
    settings = SearchSettings().override(extra_length=4, **search)
    names = [f"in:{i + 1}" for i in range(len(LINES))]
    found = {}
    for jit in (False, True):
        # 40 tokens a batch: batches of 1 to 5 rows, padded under XLA to 1, 2, 4 or 5 rows.
        translator = Translator(run.model, run.tokenizer, settings, 40, jit_compile=jit)
        found[jit] = translator.hypotheses(LINES, names, log_progress=False)
    for plain, compiled in zip(found[False], found[True], strict=True):
        assert [h.text for h in compiled] == [h.text for h in plain]
        np.testing.assert_allclose(
            [(h.score, h.log_prob) for h in compiled],
            [(h.score, h.log_prob) for h in plain],
            rtol=1e-5,
            atol=1e-5,
        )
    assert found[True][1] == [] and len(found[True][0]) == settings.nbest
    # The whole search, its loop included, is one function that XLA must compile.
    function = translator._search.get_concrete_function().function_def
    assert function.attr["_XlaMustCompile"].b


def test_run_decode_with_jit_compile_writes_the_plain_output(run, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("\n".join(LINES) + "\n")
    outputs = []
    for jit in (False, True):
        out = tmp_path / f"out.{jit}.txt"
        config = decode_flags(
            output_dir=run.output_dir,
            decode_from_file=str(source),
            decode_to_file=str(out),
            beam_size=2,
            jit_compile=jit,
        )
        assert run_decode(*config) == len(LINES)
        outputs.append(read_input(str(out))[0])
    assert outputs[0] == outputs[1]


def test_jit_compile_refuses_replicas(run):
    two_replicas = types.SimpleNamespace(num_replicas_in_sync=2)
    with pytest.raises(ValueError, match="--jit_compile decodes on one device.*2 replicas"):
        Translator(run.model, run.tokenizer, run.search, strategy=two_replicas, jit_compile=True)


@pytest.mark.skipif(not int8_product.available(), reason="no oneDNN 8-bit product here")
def test_jit_compile_refuses_8_bit_products_and_compiles_bfloat16_int8(tmp_path):
    """A float32 model's int8 layers multiply through oneDNN's 8-bit op, which XLA cannot
    compile: the Translator refuses, by name of both flags. A bfloat16 model's int8 weights are
    multiplied in bfloat16 and compile: the plain int8 search's lines."""
    (tmp_path / "f32").mkdir()
    output_dir, _, data_dir = write_tiny_run(tmp_path / "f32", MAX_POSITIONS)
    restored = RunFlags(str(output_dir), data_dir=str(data_dir), quantize="int8").restore()
    assert multiplies_in_8_bits(restored.model)
    with pytest.raises(ValueError, match="--jit_compile with --quantize=int8 on a float32"):
        Translator(restored.model, restored.tokenizer, restored.search, jit_compile=True)

    (tmp_path / "bf16").mkdir()
    model = tiny_model(
        13, seed=21, overrides=f",max_positions={MAX_POSITIONS},precision=mixed_bfloat16"
    )
    output_dir, _, data_dir = write_tiny_run(tmp_path / "bf16", MAX_POSITIONS, model=model)
    restored = RunFlags(str(output_dir), data_dir=str(data_dir), quantize="int8").restore()
    assert quantized_layers(restored.model) and not multiplies_in_8_bits(restored.model)
    settings = SearchSettings().override(
        extra_length=4, beam_size=1, temperature=0.0, sampling=True
    )
    names = [f"in:{i + 1}" for i in range(len(LINES))]
    found = []
    for jit in (False, True):
        translator = Translator(restored.model, restored.tokenizer, settings, 40, jit_compile=jit)
        found.append([[h.text for h in hs] for hs in translator.hypotheses(LINES, names, False)])
    assert len(found[1]) == len(LINES) and found[1][1] == [] and found[1][0]
    # bfloat16 rounds differently when XLA fuses the products: at most one line may differ.
    assert sum(a == b for a, b in zip(*found, strict=True)) >= len(LINES) - 1
