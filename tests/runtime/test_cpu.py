"""t2t_lite/runtime/cpu.py: the CPU's flags, and how records describe the machine."""

from __future__ import annotations

import os

from t2t_lite.runtime.cpu import cpu_flags, describe_machine, machine_kind

AMD = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9B14
flags\t\t: fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni
processor\t: 1
model name\t: another name
flags\t\t: fpu sse2 avx2
"""
INTEL = """processor\t: 0
model name\t: Intel(R) Xeon(R) Processor
flags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni amx_bf16 amx_tile amx_int8

processor\t: 1
model name\t: Intel(R) Xeon(R) Processor
flags\t\t: fpu avx2
"""


def test_cpu_flags_are_the_first_processors(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(AMD)
    assert cpu_flags(str(path)) == {"fpu", "sse2", "avx2", "avx512f", "avx512_bf16", "avx512_vnni"}
    assert cpu_flags(str(tmp_path / "missing")) == frozenset()


def test_a_machine_is_its_first_cpus_name_and_best_matrix_unit(tmp_path):
    amd, intel = tmp_path / "amd", tmp_path / "intel"
    amd.write_text(AMD)
    intel.write_text(INTEL)
    common = {"cpus": os.cpu_count()}
    assert describe_machine(str(amd)) == {
        "cpu": "AMD EPYC 9B14", "matrix_unit": "avx512_bf16", **common
    }  # fmt: skip
    assert describe_machine(str(intel)) == {
        "cpu": "Intel(R) Xeon(R) Processor", "matrix_unit": "amx_bf16", **common
    }  # fmt: skip
    assert describe_machine(str(tmp_path / "missing"))["cpu"] == "unknown CPU"
    assert machine_kind(describe_machine(str(intel))) == "Intel(R) Xeon(R) Processor, amx_bf16"
    assert machine_kind(describe_machine(str(amd))) == "AMD EPYC 9B14, avx512_bf16"
    assert machine_kind(None) == "not recorded"
