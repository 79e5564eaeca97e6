"""The training and decoding progress lines' memory figures against the kernel's own accounting."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from t2t_lite.runtime.progress import DecodeProgress, ProgressLog, resident_memory


def _status_kib(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return float(line.split()[1])
    raise AssertionError(field)


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/status"), reason="Linux only")
def test_resident_memory_is_the_kernels_rss_and_peak():
    block = np.ones(64 * 2**20, np.uint8)  # 64 MiB, touched
    now, peak = resident_memory()
    assert now == pytest.approx(_status_kib("VmRSS") * 1024, rel=0.05)
    assert peak == pytest.approx(_status_kib("VmHWM") * 1024, rel=0.05)
    assert peak >= now >= block.nbytes


def test_the_progress_line_shows_resident_memory(caplog):
    progress = ProgressLog(total_steps=4, start_step=0, every=2)
    result = {"source_tokens": 10, "target_tokens": 12, "loss": 1.0, "nll": 0.9,
              "learning_rate": 1e-3, "grad_norm": 0.5, "loss_scale": 1.0}  # fmt: skip
    caplog.set_level(logging.INFO, logger="absl")  # whatever verbosity earlier tests left
    with caplog.at_level(logging.INFO):
        for step in (1, 2):
            progress.update(step, result)
    line = caplog.records[-1].getMessage()
    assert line.startswith("step 2/4 loss 1.0000") and " rss " in line and "(peak " in line
    gb = float(line.split(" rss ")[1].split()[0])
    assert gb == pytest.approx(progress.rss / 1e9, abs=0.006) and gb > 0.01
    assert progress.scalars(result)["rss_gb"] == progress.rss / 1e9


def test_without_a_step_limit_the_line_shows_the_step_and_the_time_left(caplog):
    progress = ProgressLog(total_steps=0, start_step=0, every=2, seconds_left=lambda: 75.4)
    result = {"source_tokens": 10, "target_tokens": 12, "loss": 1.0, "nll": 0.9,
              "learning_rate": 1e-3, "grad_norm": 0.5, "loss_scale": 1.0}  # fmt: skip
    caplog.set_level(logging.INFO, logger="absl")
    with caplog.at_level(logging.INFO):
        for step in (1, 2):
            progress.update(step, result)
    line = caplog.records[-1].getMessage()
    assert line.startswith("step 2 loss 1.0000") and " ETA 0:01:15 " in line
    # With both, the nearer end: 2 steps left at some thousands of steps/s, not 75 s.
    progress = ProgressLog(total_steps=4, start_step=0, every=2, seconds_left=lambda: 75.4)
    with caplog.at_level(logging.INFO):
        for step in (1, 2):
            progress.update(step, result)
    assert " ETA 0:00:00 " in caplog.records[-1].getMessage()


def test_the_decoding_line_shows_resident_memory(caplog):
    progress = DecodeProgress(total=8, what="decoded", every=0.0)
    caplog.set_level(logging.INFO, logger="absl")
    with caplog.at_level(logging.INFO):
        progress.update(3, 40)
        progress.finish()
    first, last = (record.getMessage() for record in caplog.records[-2:])
    assert first.startswith("decoded 3/8 sentences, ")
    assert last.startswith("decoded 3/8 sentences done")
    for line in (first, last):
        gb, peak = line.split(" rss ")[1].replace("(peak ", "").rstrip(")").split(" GB ")
        now_gb = resident_memory()[0] / 1e9
        assert float(gb) == pytest.approx(now_gb, abs=0.05) and float(peak) >= float(gb) > 0.01
