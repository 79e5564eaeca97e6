"""The CPU a benchmark ran on, as every result names it."""

from __future__ import annotations

import platform
import re
import subprocess


def cpu_name() -> str:
    """`lscpu`'s model name ("AMD EPYC"), else platform's."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        found = re.search(r"^Model name:\s*(.+)$", out, re.M)
        if found:
            return found.group(1).strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return platform.processor() or "unknown cpu"
