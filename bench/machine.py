"""The CPU a benchmark ran on, as every result names it."""

from __future__ import annotations

import json
import os
import subprocess
import time

from t2t_lite.runtime.cpu import describe_machine


def cpu_name() -> str:
    """The CPU's model name ("AMD EPYC 9B14"), as the sweep's records give it
    (t2t_lite.runtime.cpu)."""
    return describe_machine()["cpu"]


def run_header(run) -> dict:
    """The start of a record of a restored run's decoding: the CPU, and the run by what it is
    (its folder is the user's): problem, hparams set, checkpoint name."""
    return {
        "cpu": f"{cpu_name()}, {os.cpu_count()} CPUs",
        "run": {
            "problem": run.problem.name,
            "hparams_set": run.info.hparams_set,
            "checkpoint": os.path.basename(run.checkpoint),
        },
    }


def machine(load_before: tuple[float, ...]) -> dict[str, str]:
    """The CPU by its model name and its matrix unit (AMX, AVX-512 BF16; "" for neither: the
    CPU kind), the CPUs, the load averages (before, now) and the commit."""
    described = describe_machine()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    load = " before, ".join(
        ", ".join(f"{x:.2f}" for x in v) for v in (load_before, os.getloadavg())
    )
    load += " after"
    return {
        "cpu": described["cpu"],
        "matrix_unit": described["matrix_unit"] or "",
        "cpus": str(os.cpu_count()),
        "load": load,
        "commit": commit or "?",
        "date": time.strftime("%Y-%m-%d"),
    }


# The repository: bench/ is one level below it.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def recorded_path(path: str) -> str:
    """How a record names an input file: relative to the repository when inside it (demo_out/
    test.en), else by its file name alone, so that no record names a folder of one machine."""
    absolute = os.path.abspath(path)
    if os.path.commonpath([absolute, ROOT]) == ROOT:
        return os.path.relpath(absolute, ROOT)
    return os.path.basename(absolute)


def recorded_row(row: dict) -> dict:
    """A result row as a record keeps it: its "run" by recorded_path, without the "folder" of a
    temporary export."""
    kept = {key: value for key, value in row.items() if key != "folder"}
    if "run" in kept:
        kept["run"] = recorded_path(kept["run"])
    return kept


def write_record(record: str | None, name: str, about: dict, data: dict, text: str) -> None:
    """The JSON record ({"machine": about, **data}) and the markdown `text` of a benchmark, to
    `record`.json and .md, by default bench/results/DATE_NAME."""
    record = record or os.path.join(os.path.dirname(__file__), "results", f"{about['date']}_{name}")
    with open(record + ".json", "w", encoding="utf-8") as f:
        json.dump({"machine": about, **data}, f, indent=1)
    with open(record + ".md", "w", encoding="utf-8") as f:
        f.write(text)
