"""bench/report.py: the decoding target's row, t2t_lite's fastest search variant over
CTranslate2 int8, from literal rates."""

from __future__ import annotations

import os
import sys

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
sys.path[:0] = [BENCH, os.path.join(BENCH, "peers")]
import report  # noqa: E402
from measurement import Measurement  # noqa: E402


def _run(peer: str, task: str, dtype: str, rates: tuple[float, ...]) -> Measurement:
    """A decoding measurement whose repetitions gave `rates` target tokens/s."""
    return Measurement(
        "decode", peer, task, dtype, peer, results=[{"tokens_per_s": r} for r in rates]
    )


def test_the_target_row_takes_the_fastest_variant_of_each_search():
    runs = [
        _run("t2t_lite", "beam", "float32", (3000, 3400)),
        _run("t2t_lite", "beam", "bfloat16", (4600, 4800, 4700)),
        _run("t2t_lite", "greedy", "bfloat16", (10000,)),
        _run("t2t_lite", "greedy_xla", "float32", (12000,)),
        _run("t2t_lite", "beam_xla", "float32", ()),  # failed: no rate
        _run("ctranslate2", "beam", "int8", (4000,)),
        _run("ctranslate2", "greedy", "int8", (8000,)),
        _run("ctranslate2", "greedy", "float32", (1000,)),
    ]
    (row,) = report._best_against_int8(runs)
    assert row == (
        "| **best t2t_lite / CTranslate2 int8** | bfloat16 | **1.18x** | float32 jit_compile | "
        "**1.50x** |"
    )
    assert report._best_against_int8([r for r in runs if r.peer == "t2t_lite"]) == []
