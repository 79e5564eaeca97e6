"""bench/RESULTS.md is `make bench`'s tables followed by bench/NOTES.md (run_bench.py --notes):
the analysis is written in NOTES.md, so the next `make bench` keeps it."""

from __future__ import annotations

import os

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")


def test_results_end_with_the_notes_as_they_stand():
    with open(os.path.join(BENCH, "RESULTS.md"), encoding="utf-8") as f:
        results = f.read()
    with open(os.path.join(BENCH, "NOTES.md"), encoding="utf-8") as f:
        notes = f.read()
    assert results.endswith("\n" + notes), (
        "bench/RESULTS.md and bench/NOTES.md differ: write the analysis in NOTES.md and copy it "
        "after RESULTS.md's tables (or run `make bench`)"
    )
