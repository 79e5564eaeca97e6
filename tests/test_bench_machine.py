"""bench/machine.py: records name files by their place in the repository, never by a folder of
the machine that ran the benchmark."""

from __future__ import annotations

import os
import sys

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
sys.path[:0] = [BENCH]
import machine  # noqa: E402


def test_a_file_in_the_repository_is_named_from_its_root():
    inside = os.path.join(machine.ROOT, "demo_out", "test.en")
    assert machine.recorded_path(inside) == os.path.join("demo_out", "test.en")


def test_a_file_elsewhere_is_named_by_its_file_name(tmp_path):
    assert machine.recorded_path(str(tmp_path / "work" / "test.en")) == "test.en"


def test_a_row_keeps_its_numbers_and_loses_its_temporary_folder(tmp_path):
    row = {"run": os.path.join(machine.ROOT, "demo_out", "train"), "weights": "int8",
           "folder": str(tmp_path / "teacher" / "1"), "bleu": 33.85}  # fmt: skip
    assert machine.recorded_row(row) == {
        "run": os.path.join("demo_out", "train"),
        "weights": "int8",
        "bleu": 33.85,
    }
    assert "folder" in row  # the worker's setting itself is left as it was


def test_a_record_names_the_cpu_kind(monkeypatch):
    """Every record's machine names the CPU and its matrix unit ("" for neither AMX nor AVX-512
    BF16: an AVX2-only CPU), as the results name a CPU kind."""
    for unit, recorded in (("amx", "amx"), (None, "")):
        described = {"cpu": "Intel Xeon", "matrix_unit": unit, "cpus": 2}
        monkeypatch.setattr(machine, "describe_machine", lambda d=described: d)
        about = machine.machine((0.5, 0.25, 0.125))
        assert (about["cpu"], about["matrix_unit"]) == ("Intel Xeon", recorded)
        assert about["load"].startswith("0.50, 0.25, 0.12 before, ")
