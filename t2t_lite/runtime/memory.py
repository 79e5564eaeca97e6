"""The memory this process may still take: the machine's available memory, or what is left of
its cgroup's limit (a container, a `systemd-run -p MemoryMax=`), whichever is smaller."""

from __future__ import annotations

import os

MEMINFO = "/proc/meminfo"
CGROUP_V2 = "/sys/fs/cgroup"  # memory.max, memory.current, memory.stat
CGROUP_V1 = "/sys/fs/cgroup/memory"  # memory.limit_in_bytes, memory.usage_in_bytes, memory.stat
# cgroup v1 writes "no limit" as a huge number (2^63 rounded down to a page).
NO_LIMIT = 2**60


def available_memory() -> tuple[int, str]:
    """(bytes, where the figure comes from): the smallest of the machine's available memory
    (MemAvailable: free memory plus the page cache it can drop) and each cgroup limit less the
    cgroup's use (its reclaimable page cache, inactive_file, not counted as used)."""
    found = [(_meminfo_available(), "available memory")]
    for limit, usage, stat, name in (
        ("memory.max", "memory.current", "memory.stat", "the cgroup's memory.max"),
        ("memory.limit_in_bytes", "memory.usage_in_bytes", "memory.stat", "the cgroup's limit"),
    ):
        folder = CGROUP_V2 if limit == "memory.max" else CGROUP_V1
        left = _cgroup_left(os.path.join(folder, limit), os.path.join(folder, usage),
                            os.path.join(folder, stat))  # fmt: skip
        if left is not None:
            found.append((left, f"{name} less its use"))
    return min(found)


def _meminfo_available() -> int:
    try:
        with open(MEMINFO) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _cgroup_left(limit_path: str, usage_path: str, stat_path: str) -> int | None:
    """A cgroup's limit less its use, or None when it has no limit (or no such file)."""
    try:
        with open(limit_path) as f:
            text = f.read().strip()
        if text == "max" or int(text) >= NO_LIMIT:
            return None
        with open(usage_path) as f:
            usage = int(f.read().strip())
    except (OSError, ValueError):
        return None
    return max(0, int(text) - max(0, usage - _inactive_file(stat_path)))


def _inactive_file(stat_path: str) -> int:
    """The cgroup's page cache not recently used (memory.stat's inactive_file, v1's
    total_inactive_file), which the kernel drops before it refuses memory."""
    try:
        with open(stat_path) as f:
            stats = dict(line.split() for line in f if len(line.split()) == 2)
    except (OSError, ValueError):
        return 0
    return int(stats.get("total_inactive_file", stats.get("inactive_file", 0)))
