"""One kind of benchmark process (bench/run_bench.py): a peer's script in its environment, the
task and precision it runs, and the results of its repetitions."""

from __future__ import annotations

import os
import statistics
import sys
from dataclasses import dataclass, field

from machine import ROOT  # bench/machine.py, beside this module


@dataclass
class Measurement:
    """One kind of process: which peer, environment, task and precision; its results."""

    part: str
    peer: str  # script bench/peers/<script>_peer.py and venv .bench/<venv>
    task: str
    dtype: str
    label: str
    venv: str | None = None  # None: t2t_lite's own .venv
    shape: tuple[int, int] | None = None  # (batch, length); None: bench/peers/protocol.py's
    results: list[dict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def script(self) -> str:
        name = "t2t_lite" if self.peer == "matmul" else self.peer
        return os.path.join(ROOT, "bench", "peers", f"{name}_peer.py")

    def python(self, bench_dir: str) -> str:
        """Its environment's interpreter: bench_dir/venv, or t2t_lite's own."""
        if self.venv is None:
            return sys.executable
        return os.path.join(bench_dir, self.venv, "bin", "python")

    def median(self, key: str = "tokens_per_s") -> float | None:
        values = [r[key] for r in self.results if key in r]
        return statistics.median(values) if values else None
