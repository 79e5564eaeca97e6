"""bench/op_profile.py: the union of op intervals, and op time by kind and type per call, on a
hand-made trace whose sums are known."""

from __future__ import annotations

import os
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
sys.path.insert(0, BENCH)
import op_profile  # noqa: E402


def test_covered_is_the_length_of_the_union():
    assert op_profile.covered([]) == 0
    assert op_profile.covered([(0, 10), (5, 12), (20, 25), (21, 22)]) == 17
    assert op_profile.covered([(3, 4), (0, 10)]) == 10  # nested, out of order


def test_summarize_sums_per_call_by_kind_and_type():
    ms = 10**9  # picoseconds
    calls = [(0, 10 * ms), (20 * ms, 30 * ms)]
    ops = [  # two threads: the first call's two products overlap from 2 to 3 ms
        ("_MklMatMul", 1 * ms, 3 * ms),
        ("_MklMatMul", 2 * ms, 6 * ms),
        ("Cast", 7 * ms, 8 * ms),
        ("_MklMatMul", 21 * ms, 25 * ms),
        ("NewKernel", 26 * ms, 29 * ms),
    ]
    found = op_profile.summarize(ops, calls, per_call=2)
    assert found["wall_ms"] == pytest.approx(10.0)
    # Op-free time: call 1 has ops over 1-6 and 7-8 (6 ms of 10), call 2 over 21-25, 26-29.
    assert found["no_op_ms"] == pytest.approx((4 + 3) / 2)
    assert found["op_ms"] == pytest.approx(
        {"matrix products": 5.0, "element-wise": 0.5, "other": 1.5}
    )
    assert found["top_types_ms"]["_MklMatMul"] == pytest.approx(5.0)
    assert found["op_executions"] == pytest.approx(5 / 2 / 2)
    assert op_profile.share(found, "matrix products") == "5.0 (71 %)"
    lines = op_profile.table(
        "per call", [found], ["x"], before=[("wall (ms)", lambda r: f"{r['wall_ms']:.0f}")]
    ).splitlines()
    assert lines[:4] == ["| per call | x |", "|---|---:|", "| wall (ms) | 10 |",
                         "| no op running (ms, % of wall) | 3.5 (35 %) |"]  # fmt: skip
    assert "| matrix products (ms, % of op time) | 5.0 (71 %) |" in lines
    assert lines[-1] == "| other (ms, % of op time) | 1.5 (21 %) |"
