"""The CPU a job runs on, as Linux describes it in /proc/cpuinfo: its flags (which matrix units
it has: AMX, AVX-512 BF16, VNNI), its model name, and the short description records keep.

No TensorFlow here: the sweep's records use it in a process that never loads it.
"""

from __future__ import annotations

import os

CPUINFO = "/proc/cpuinfo"
# The flags that decide how fast this code's products run (precision.py, int8_kernel.py), best
# first: a record names the best one the CPU has, and the results name a CPU kind by it.
MATRIX_UNIT_KINDS = {
    "amx_bf16": "with AMX",
    "avx512_bf16": "with AVX-512 BF16, no AMX",
    "avx512_vnni": "with AVX-512 VNNI, no BF16",
    "avx512f": "with AVX-512, no VNNI",
    "avx2": "with AVX2 only",
}


def _first_processor(path: str) -> dict[str, str]:
    """The "key: value" lines of the first processor in `path`; empty where there is none."""
    found: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    if found:
                        break
                    continue
                key, _, value = line.partition(":")
                found.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return found


def cpu_flags(path: str = CPUINFO) -> frozenset[str]:
    """The flags of the first processor in `path`; empty where there is no such file."""
    return frozenset(_first_processor(path).get("flags", "").split())


def describe_machine(path: str = CPUINFO) -> dict:
    """{"cpu": model name, "matrix_unit": the best of MATRIX_UNIT_KINDS it has (or None), "cpus":
    logical CPUs}: what a record of a timed job says about where it ran."""
    first = _first_processor(path)
    flags = set(first.get("flags", "").split())
    return {
        "cpu": first.get("model name") or "unknown CPU",
        "matrix_unit": next((unit for unit in MATRIX_UNIT_KINDS if unit in flags), None),
        "cpus": os.cpu_count(),
    }


def machine_kind(machine: dict | None) -> str:
    """ "Intel(R) Xeon(R) Processor, amx_bf16": the CPU and its best matrix unit, the two things
    that set a minutes-budget run's steps; "not recorded" for records from before they were."""
    if not machine:
        return "not recorded"
    unit = machine.get("matrix_unit")
    return f"{machine.get('cpu', 'unknown CPU')}, {unit}" if unit else machine.get("cpu", "?")
