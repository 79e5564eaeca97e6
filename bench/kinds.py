"""The decoding target on each CPU kind: for every kind of CPU that bench/run_bench.py's decode
part has a record of in bench/results/, the latest record's fastest t2t_lite search against
CTranslate2 int8. bench/RESULTS.md holds one run on one machine; this table keeps the other kinds'
last figures beside it."""

from __future__ import annotations

import glob
import json
import os
import re

import report
from measurement import Measurement

from t2t_lite.runtime.cpu import MATRIX_UNIT_KINDS


def cpu_kind(machine: str) -> str | None:
    """ "AMD EPYC with AVX-512 BF16, no AMX" from a report's machine line ("AMD EPYC (avx2,
    avx512f, avx512_bf16), 24 GiB, ..."); None where the line names none of the flags (a GPU's,
    or a CPU without AVX2)."""
    plain = re.sub(r"\((?:R|TM)\)| Processor", "", machine or "")
    found = re.match(r"([^(]+?) \(([a-z0-9_, ]+)\)", plain)
    if not found or found.group(2).startswith("none of"):
        return None
    model = found.group(1).strip()
    flags = {flag.strip() for flag in found.group(2).split(",")}
    named = (f"{model} {name}" for flag, name in MATRIX_UNIT_KINDS.items() if flag in flags)
    return next(named, None)


def record_commit(path: str, saved: dict) -> str:
    """The commit a record measured: its own field, else the "Commit:" line of the report
    beside it (records written before the field), else "?"."""
    if saved.get("commit"):
        return saved["commit"]
    try:
        with open(path[: -len(".json")] + ".md", encoding="utf-8") as f:
            found = re.search(r"^Commit: (\S+?)\.", f.read(), re.M)
    except OSError:
        return "?"
    return found.group(1) if found else "?"


def read_record(path: str, writing: str | None = None) -> tuple[str, dict] | None:
    """(CPU kind, {"record", "shown", "date", "commit", "beam", "greedy"}) of one record of
    run_bench's decode part ("beam" and "greedy": report.best_against_int8's (variant, ratio)
    or None); None for other records, GPU machines', or those without both t2t_lite and
    CTranslate2 int8. "shown" is its report beside it (also when that is the one `writing`),
    else the record itself."""
    with open(path, encoding="utf-8") as f:
        saved = json.load(f)
    # run_bench's records: runs, load and the machine's line (other benchmarks keep others).
    if not isinstance(saved, dict) or not {"runs", "load", "machine"} <= set(saved):
        return None
    kind = cpu_kind(saved["machine"] or "")
    runs = [Measurement(**item) for item in saved["runs"]]
    best = {task: report.best_against_int8(runs, task) for task in ("beam", "greedy")}
    if kind is None or not any(best.values()):
        return None
    name = os.path.basename(path)
    report_path = path[: -len(".json")] + ".md"
    beside = os.path.exists(report_path) or os.path.abspath(report_path) == writing
    shown = os.path.basename(report_path) if beside else name
    return kind, {
        "record": name,
        "shown": shown,
        "date": name[:10],
        "commit": record_commit(path, saved),
        **best,
    }


def latest_by_kind(folder: str, writing: str | None = None) -> dict[str, dict]:
    """{CPU kind: read_record's row} of the newest record (by its dated file name) of each kind."""
    paths = sorted(glob.glob(os.path.join(folder, "*.json")))
    found = (read_record(path, writing) for path in paths)
    return dict(item for item in found if item)


def table_row(kind: str, row: dict, folder: str = "results") -> str:
    """A kind's line of the table, its record's report linked as `folder`/name."""
    link = f"[{row['shown']}]({os.path.normpath(os.path.join(folder, row['shown']))})"
    cells = [
        f"{row[task][0]}, {row[task][1]:.2f}x" if row[task] else "not run"
        for task in ("beam", "greedy")
    ]
    return f"| {kind} | {row['date']}, {row['commit']} | {link} | " + " | ".join(cells) + " |"


HEADING = "## Decoding against CTranslate2 int8 on each CPU kind"


def section(folder: str, writing: str | None = None) -> list[str]:
    """The table of the decoding target on each CPU kind, newest record first, for the report
    `writing` (its links relative to its folder; by default bench/RESULTS.md beside `folder`)."""
    writing = os.path.abspath(writing or os.path.join(folder, os.pardir, "RESULTS.md"))
    relative = os.path.relpath(folder, os.path.dirname(writing))
    latest = latest_by_kind(folder, writing)
    if not latest:
        return []
    lines = [
        "",
        HEADING,
        "",
        "The newest record of bench/run_bench.py's decode part for each CPU kind in "
        "bench/results/, at its own date and commit (forced output length 32, batch 64): "
        "t2t_lite's fastest variant of each search over CTranslate2 int8 in the same run.",
        "",
        "| CPU kind | date, commit | record | beam 4: fastest, ratio | greedy: fastest, ratio |",
        "|---|---|---|---|---|",
    ]
    newest_first = sorted(latest.items(), key=lambda item: item[1]["record"], reverse=True)
    return lines + [table_row(kind, row, relative) for kind, row in newest_first]
