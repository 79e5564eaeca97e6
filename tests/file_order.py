"""The order in which `make test` hands test files to its two workers: the longest first.

pytest-xdist's `--dist loadfile` gives each worker whole files, one at a time, in the order of
the collection; by default it first sorts them by their number of tests, which puts the files
of a few long tests (a training, an export, a command) last, where one worker runs them while
the other has nothing left. Handed out longest first (the longest-processing-time rule), the
files end within about one short file of each other. Each file's seconds come from a recorded
run, in tests/file_seconds.json; a file not in it counts as the median file. `make test` passes
`--no-loadscope-reorder` so that xdist keeps this order, and
`pytest -n 2 --dist loadfile --record-file-seconds tests` records the table again (the files
that ran replace their entries).
"""

from __future__ import annotations

import collections
import json
import os

from t2t_lite.runtime import atomic_io

TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "file_seconds.json")
OPTION = "--record-file-seconds"


def read_table(path: str = TABLE) -> dict[str, float]:
    """File (as a node id names it: tests/...py) --> its recorded seconds; empty if none."""
    if not os.path.isfile(path):
        return {}
    with open(path) as f:
        return json.load(f)


def longest_first(nodeids: list[str], seconds: dict[str, float]) -> list[int]:
    """The positions of `nodeids` with their files in order of decreasing recorded seconds
    (the median for a file not recorded; ties in the order the files came), each file's tests
    together and in their own order."""
    known = sorted(seconds.values())
    median = known[len(known) // 2] if known else 0.0
    first: dict[str, int] = {}
    for nodeid in nodeids:
        first.setdefault(nodeid.split("::")[0], len(first))

    def key(position: int) -> tuple[float, int, int]:
        path = nodeids[position].split("::")[0]
        return (-seconds.get(path, median), first[path], position)

    return sorted(range(len(nodeids)), key=key)


def file_seconds(reports) -> dict[str, float]:
    """Each file's seconds in test reports (setup, call and teardown of each of its tests)."""
    totals: dict[str, float] = collections.defaultdict(float)
    for report in reports:
        totals[report.nodeid.split("::")[0]] += report.duration
    return {path: round(total, 1) for path, total in totals.items()}


def record(reports, path: str = TABLE) -> None:
    """Writes the seconds of the files in `reports` into the table at `path`, keeping the
    entries of files that did not run."""
    atomic_io.write_json(path, {**read_table(path), **file_seconds(reports)})


# The hooks, imported by tests/conftest.py.


def pytest_addoption(parser) -> None:
    parser.addoption(
        OPTION,
        action="store_true",
        help="write each test file's seconds in this run into tests/file_seconds.json",
    )


def pytest_collection_modifyitems(session, config, items) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):  # only where files are handed out to workers
        order = longest_first([item.nodeid for item in items], read_table())
        items[:] = [items[i] for i in order]


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if config.getoption(OPTION):
        # Every phase's report, whatever its outcome (a passed setup's is filed under "").
        reports = [
            report
            for filed in terminalreporter.stats.values()
            for report in filed
            if getattr(report, "when", None) in ("setup", "call", "teardown")
        ]
        record(reports)
        terminalreporter.write_line(f"file seconds written to {TABLE}")
