"""bench/curves.py: the cost curves' points, the crossover fit, the FLOPs crossover, the report
section and its plot; and the batch shape the benchmark processes take from --batch/--length."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
sys.path[:0] = [BENCH, os.path.join(BENCH, "peers")]
import curves  # noqa: E402
import protocol  # noqa: E402


def test_the_curves_keep_the_tokens_per_batch_along_the_length_and_share_one_point():
    points = curves.shapes()
    along_length = [(curves.TOKENS // n, n) for n in curves.LENGTHS]
    assert points[: len(along_length)] == along_length
    assert all(b * n == 2048 for b, n in along_length)
    assert (64, 32) in along_length and points.count((64, 32)) == 1  # on both curves
    assert len(points) == len(curves.LENGTHS) + len(curves.BATCHES) - 1
    made = curves.measurements()
    assert len(made) == len(points) * len(curves.SERIES)
    assert {m.venv for m in made} == {None, "keras_hub", "ctranslate2"}


def test_the_crossover_is_where_the_length_term_reaches_the_rest():
    lengths = np.array([16, 32, 64, 128, 256, 512], float)
    a, b = 4e-4, 2e-6  # seconds per token = a + b * length: equal terms at 200
    assert curves.crossover(lengths, a + b * lengths) == pytest.approx(200.0)
    noisy = (a + b * lengths) * np.array([1.02, 0.98, 1.01, 0.99, 1.0, 1.0])
    assert curves.crossover(lengths, noisy) == pytest.approx(200.0, rel=0.1)
    assert curves.crossover(lengths, a - 1e-7 * lengths) is None  # falling: never
    assert curves.crossover(lengths, [None] * 5 + [a]) is None  # one point


def test_the_flops_crossover_of_the_benchmark_model():
    import t2t_lite_peer

    # By hand for 2+2 layers, d_model 256, 4 heads of 64, d_ff 1024, vocabulary 8000 (2 FLOPs
    # per multiply-add): per target token, attention's scores and sums cost 2 * 1024 * L in
    # the encoder and 2 * 2048 * L in the decoder (self and cross); everything else costs
    # 2 * 1,572,864 + 2 * 2,097,152 + 4,096,000 = 11,436,032.
    hparams = t2t_lite_peer.benchmark_hparams()
    assert curves.flops_crossover(hparams, 8000) == pytest.approx(11_436_032 / 6144)


def test_the_section_tables_ratios_and_plot(tmp_path):
    runs = []
    for m in curves.measurements():
        batch, length = m.shape
        faster = 2.0 if m.peer == "t2t_lite" else 1.0
        seconds_per_token = (4e-4 + 2e-6 * length) / faster
        m.results.append({"tokens_per_s": 1 / seconds_per_token})
        runs.append(m)
    plot = curves.plot_path(str(tmp_path / "RESULTS.md"))
    text = "\n".join(curves.section(runs, plot))
    assert os.path.getsize(plot) > 10_000
    assert "![cost curves](RESULTS_curves.png)" in text
    row = next(line for line in text.splitlines() if line.startswith("| 4 x 512 |"))
    rate = 2 / (4e-4 + 2e-6 * 512)
    assert row.split(" | ")[1] == f"{rate:,.0f}" and row.count("2.00x") == 2
    assert text.count("L = 200") == len(curves.SERIES)
    assert curves.section([], plot) == []


def test_the_batch_shape_comes_from_the_flags(monkeypatch):
    saved = protocol.BATCH, protocol.SOURCE_LENGTH, protocol.TARGET_LENGTH
    monkeypatch.setattr(sys, "argv", ["peer", "--task=train", "--batch=4", "--length=512"])
    try:
        protocol.parse_args(("train",), ("float32",))
        source, target = protocol.batch()
        assert source.shape == target.shape == (4, 512) and protocol.TARGET_TOKENS == 2048
        assert (source[:, -1] == protocol.EOS_ID).all()
        with pytest.raises(ValueError, match="--length=1"):
            protocol.set_shape(4, 1)
    finally:
        protocol.set_shape(saved[0], saved[1])
    assert protocol.TARGET_TOKENS == saved[0] * saved[2]


def test_saved_runs_merge_by_shape_and_the_tables_keep_the_usual_shape(tmp_path):
    import json

    import report
    import run_bench

    saved = {
        "runs": [
            {"part": "decode", "peer": "t2t_lite", "task": "beam", "dtype": "float32",
             "label": "t2t_lite", "results": [{"tokens_per_s": 4000.0}], "errors": []},
            {"part": "curves", "peer": "t2t_lite", "task": "beam", "dtype": "float32",
             "label": "t2t_lite beam 4", "shape": [4, 512], "results": [{"tokens_per_s": 500.0}],
             "errors": []},
        ],
        "load": [[1.0, 1.0, 1.0]],
        "machine": "a named CPU",
    }  # fmt: skip
    path = tmp_path / "saved.json"
    path.write_text(json.dumps(saved))
    runs, load, machines = [], [], []
    run_bench.merge(runs, str(path), load, machines)
    run_bench.merge(runs, str(path), load, machines)  # the same run twice: results add up
    assert [(m.part, m.shape) for m in runs] == [("decode", None), ("curves", (4, 512))]
    assert [m.median() for m in runs] == [4000.0, 500.0] and len(runs[1].results) == 2
    assert machines == ["a named CPU"] * 2 and len(load) == 2
    text = report.markdown(runs, "a named CPU", load, 0, "settings")
    assert "| t2t_lite float32 | 4,000 (2) |" in text and "500" not in text
