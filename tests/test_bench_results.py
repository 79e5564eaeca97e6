"""bench/RESULTS.md is the benchmark record: the tables that bench/run_bench.py writes for one run,
with the date, machine, commit and command in its header, and nothing written by hand after them
(the analysis is docs/results/benchmarks.md, the results journal)."""

from __future__ import annotations

import os
import re
import sys

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
sys.path[:0] = [BENCH, os.path.join(BENCH, "peers")]
import curves  # noqa: E402
import kinds  # noqa: E402
import report  # noqa: E402
import run_bench  # noqa: E402
from measurement import Measurement  # noqa: E402

ROOT = os.path.dirname(BENCH)


def _results() -> str:
    with open(os.path.join(BENCH, "RESULTS.md"), encoding="utf-8") as f:
        return f.read()


def test_the_header_names_the_date_machine_commit_and_command():
    header = _results().split("\n## ", 1)[0]
    assert re.search(r"^Written by `bench/run_bench.py` on \d{4}-\d\d-\d\d", header, re.M)
    assert re.search(r"^Machine: \S", header, re.M)
    command = r"^Commit: [0-9a-f]{7,}\. Command: `bench/run_bench.py [^`]+`\.$"
    assert re.search(command, header, re.M)


def test_the_tables_are_those_run_bench_writes_from_the_saved_run():
    text, _, by_kind = _results().partition("\n" + kinds.HEADING + "\n")
    assert by_kind, "RESULTS.md has no table of the CPU kinds"
    saved = re.search(r"Merged runs \(([^)]+\.json)\)", text).group(1).split(", ")
    runs, load, machines = [], [], []
    for path in saved:
        run_bench.merge(runs, os.path.join(ROOT, path), load, machines)
    order = {run_bench.key(m): i for i, m in enumerate(run_bench.measurements())}
    runs.sort(key=lambda m: order[run_bench.key(m)])
    written = report.markdown(
        runs, "; ".join(dict.fromkeys(machines)), load, 0, "settings",
        sections=curves.section(runs, None),
    )  # fmt: skip
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert headings == [line for line in written.splitlines() if line.startswith("#")]
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert rows and set(rows) <= set(written.splitlines()), set(rows) - set(written.splitlines())


def test_each_cpu_kind_row_is_what_its_record_gives():
    """The table of CPU kinds: one row per kind, each the one bench/kinds.py makes from the record
    it links (a record added later may make a newer row: run_bench writes the table anew)."""
    table = _results().partition("\n" + kinds.HEADING + "\n")[2]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "](results/" in line]
    assert len(rows) >= 2
    found = []
    for row in rows:
        name = re.search(r"\]\(results/([^)]+)\)", row).group(1)
        path = os.path.join(BENCH, "results", os.path.splitext(name)[0] + ".json")
        kind, values = kinds.read_record(path)
        assert row == kinds.table_row(kind, values)
        found.append(kind)
    assert len(set(found)) == len(found)


def test_the_report_header_names_the_commit_and_command():
    m = Measurement("decode", "t2t_lite", "beam", "float32", "t2t_lite")
    m.results.append({"tokens_per_s": 4000.0})
    text = report.markdown(
        [m], "a named CPU", [(1.0, 1.0, 1.0)], 0, "settings",
        commit="abc1234", command="bench/run_bench.py --parts=decode --reps=1",
    )  # fmt: skip
    assert "\nCommit: abc1234. Command: `bench/run_bench.py --parts=decode --reps=1`.\n" in text
    assert "\nMachine: a named CPU." in text
