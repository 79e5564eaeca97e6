"""bench/report.py and bench/kinds.py: the decoding target's row, t2t_lite's fastest search
variant over CTranslate2 int8, and the table of it on each CPU kind, from literal rates."""

from __future__ import annotations

import json
import os
import sys

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
sys.path[:0] = [BENCH, os.path.join(BENCH, "peers")]
import kinds  # noqa: E402
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


def test_a_cpu_kind_is_named_by_its_best_matrix_unit():
    xeon = "Intel(R) Xeon(R) Processor (avx2, avx512f, avx512_bf16, amx_tile, amx_bf16), 24 GiB"
    assert kinds.cpu_kind(xeon) == "Intel Xeon with AMX"
    assert kinds.cpu_kind("AMD EPYC (avx2, avx512f, avx512_bf16), 24 GiB, 2 logical CPUs") == (
        "AMD EPYC with AVX-512 BF16, no AMX"
    )
    assert kinds.cpu_kind("AMD EPYC 7B13 (avx2), 24 GiB") == "AMD EPYC 7B13 with AVX2 only"
    cascade = "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz (avx2, avx512f, avx512_vnni), 24 GiB"
    assert kinds.cpu_kind(cascade) == (
        "Intel Xeon Gold 6248 CPU @ 2.50GHz with AVX-512 VNNI, no BF16"
    )
    assert kinds.cpu_kind("Intel Xeon (avx2, avx512f), 8 GiB") == "Intel Xeon with AVX-512, no VNNI"
    assert kinds.cpu_kind("NVIDIA H100 80GB HBM3, 81559 MiB, 1980 MHz") is None
    assert kinds.cpu_kind("Some CPU (none of avx2, avx512f), 8 GiB") is None


def _record(folder, name, machine, beam, greedy, int8=(4000.0, 8000.0), **extra):
    """A run_bench record in `folder`: t2t_lite bfloat16 at `beam` and `greedy` target tokens/s,
    CTranslate2 int8 at `int8`."""
    runs = [
        _run("t2t_lite", "beam", "bfloat16", (beam,)),
        _run("t2t_lite", "greedy", "bfloat16", (greedy,)),
        _run("ctranslate2", "beam", "int8", (int8[0],)),
        _run("ctranslate2", "greedy", "int8", (int8[1],)),
    ]
    saved = {"runs": [m.__dict__ for m in runs], "load": [[1.0, 1.0, 1.0]], "machine": machine}
    with open(os.path.join(folder, name + ".json"), "w", encoding="utf-8") as f:
        json.dump({**saved, **extra}, f)


def test_the_table_of_cpu_kinds_keeps_the_newest_record_of_each(tmp_path):
    amd = "AMD EPYC (avx2, avx512f, avx512_bf16), 24 GiB, 2 logical CPUs"
    xeon = "Intel(R) Xeon(R) Processor (avx2, avx512f, avx512_bf16, amx_tile, amx_bf16), 24 GiB"
    folder = tmp_path / "results"
    folder.mkdir()
    _record(folder, "2026-12-01_amd", amd, 2000, 4000)
    _record(folder, "2026-12-03_amd", amd, 4400, 7600, commit="abc1234")
    _record(folder, "2026-12-02_xeon", xeon, 6000, 8000)
    (folder / "2026-12-02_xeon.md").write_text("# Report\n\nCommit: def5678. Command: `x`.\n")
    _record(folder, "2026-12-04_gpu", "NVIDIA H100 80GB HBM3", 9000, 9000)
    (folder / "2026-12-05_datagen.json").write_text(json.dumps({"runs": [{"wall_s": 1.0}]}))
    lines = kinds.section(str(folder))
    assert lines[1] == kinds.HEADING
    assert lines[-2:] == [
        "| AMD EPYC with AVX-512 BF16, no AMX | 2026-12-03, abc1234 | "
        "[2026-12-03_amd.json](results/2026-12-03_amd.json) | bfloat16, 1.10x | bfloat16, 0.95x |",
        "| Intel Xeon with AMX | 2026-12-02, def5678 | "
        "[2026-12-02_xeon.md](results/2026-12-02_xeon.md) | bfloat16, 1.50x | bfloat16, 1.00x |",
    ]
    # A report written among the records links them by name alone, and its own record by the
    # report being written.
    writing = str(folder / "2026-12-03_amd.md")
    among = kinds.section(str(folder), writing)
    assert "[2026-12-02_xeon.md](2026-12-02_xeon.md)" in among[-1]
    assert "[2026-12-03_amd.md](2026-12-03_amd.md)" in among[-2]
    assert kinds.section(str(tmp_path / "empty")) == []
