"""The order in which the workers get the test files (tests/file_order.py): the longest first by
the recorded table, each file's tests together and in their order, and the table's recording."""

import json
import os
import types

from file_order import TABLE, file_seconds, longest_first, read_table, record

NODEIDS = [
    "unit/a.py::test_1",
    "unit/a.py::test_2",
    "unit/b.py::test_1",
    "unit/c.py::test_1[x]",
    "unit/c.py::test_1[y]",
    "unit/d.py::test_1",
]


def test_the_longest_file_first_and_each_files_tests_in_their_order():
    order = longest_first(NODEIDS, {"unit/a.py": 1.0, "unit/b.py": 9.0, "unit/c.py": 4.0})
    # b (9 s), c (4 s, also the median), d (not recorded: the median, after c, which came
    # first), a (1 s).
    assert order == [2, 3, 4, 5, 0, 1]
    assert longest_first(NODEIDS, {}) == list(range(len(NODEIDS)))  # no table: as collected


def _report(nodeid: str, when: str, duration: float):
    return types.SimpleNamespace(nodeid=nodeid, when=when, duration=duration)


def test_a_recorded_run_replaces_the_entries_of_the_files_it_ran(tmp_path):
    reports = [
        _report("unit/a.py::test_1", "setup", 2.5),
        _report("unit/a.py::test_1", "call", 0.25),
        _report("unit/a.py::test_2", "call", 0.31),
        _report("unit/a.py::test_2", "teardown", 0.02),
        _report("unit/b.py::test_1", "call", 1.0),
    ]
    assert file_seconds(reports) == {"unit/a.py": 3.1, "unit/b.py": 1.0}
    path = str(tmp_path / "seconds.json")
    with open(path, "w") as f:
        json.dump({"unit/a.py": 7.0, "unit/z.py": 4.0}, f)
    record(reports, path)
    assert read_table(path) == {"unit/a.py": 3.1, "unit/b.py": 1.0, "unit/z.py": 4.0}
    assert not os.path.exists(path + ".tmp")


def test_the_table_names_only_test_files_that_exist():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    table = read_table(TABLE)
    assert len(table) > 100 and all(seconds >= 0 for seconds in table.values())
    missing = [path for path in table if not os.path.isfile(os.path.join(root, path))]
    assert not missing, f"tests/file_seconds.json names files that are gone: {missing}"
