"""The memory a process may still take (t2t_lite.runtime.memory): the machine's MemAvailable or
a cgroup limit less its use (its inactive page cache not counted), whichever is smaller."""

from __future__ import annotations

import pytest

from t2t_lite.runtime import memory

GIB = 2**30


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A fake /proc/meminfo with 8 GiB available and empty cgroup folders (no limit)."""
    (tmp_path / "meminfo").write_text(f"MemTotal: 16000000 kB\nMemAvailable: {8 * 2**20} kB\n")
    for name in ("v2", "v1"):
        (tmp_path / name).mkdir()
    monkeypatch.setattr(memory, "MEMINFO", str(tmp_path / "meminfo"))
    monkeypatch.setattr(memory, "CGROUP_V2", str(tmp_path / "v2"))
    monkeypatch.setattr(memory, "CGROUP_V1", str(tmp_path / "v1"))
    return tmp_path


def test_without_a_cgroup_limit_the_machine_s_available_memory(machine):
    (machine / "v2" / "memory.max").write_text("max\n")
    (machine / "v1" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    (machine / "v1" / "memory.usage_in_bytes").write_text(f"{GIB}\n")
    assert memory.available_memory() == (8 * GIB, "available memory")


def test_a_cgroup_v2_limit_less_its_use(machine):
    (machine / "v2" / "memory.max").write_text(f"{4 * GIB}\n")
    (machine / "v2" / "memory.current").write_text(f"{3 * GIB}\n")
    (machine / "v2" / "memory.stat").write_text(f"anon 123\ninactive_file {GIB}\n")
    # 4 GiB - (3 GiB used - 1 GiB of page cache the kernel drops first) = 2 GiB
    assert memory.available_memory() == (2 * GIB, "the cgroup's memory.max less its use")


def test_a_cgroup_v1_limit_less_its_use(machine):
    (machine / "v1" / "memory.limit_in_bytes").write_text(f"{10 * GIB}\n")
    (machine / "v1" / "memory.usage_in_bytes").write_text(f"{GIB}\n")
    assert memory.available_memory() == (8 * GIB, "available memory")  # 9 GiB left is more
    (machine / "v1" / "memory.usage_in_bytes").write_text(f"{5 * GIB}\n")
    (machine / "v1" / "memory.stat").write_text(f"cache 5\ntotal_inactive_file {2 * GIB}\n")
    assert memory.available_memory() == (7 * GIB, "the cgroup's limit less its use")


def test_this_machine_reports_a_positive_figure():
    free, _ = memory.available_memory()
    assert 0 < free < 2**50
