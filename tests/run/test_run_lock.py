"""One writer per output_dir (t2t_lite/run/lock.py): while a process holds a run's lock, another
t2t-train stops in one line naming its PID; the lock of a killed holder is taken over with a
warning naming it; a clean end, or a holder stopped by SIGTERM or SIGINT, removes the lock file."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from command_helpers import command

from t2t_lite.problems import get_problem
from t2t_lite.run.layout import LOCK_FILE
from t2t_lite.run.lock import RunLockedError, run_lock

# SIGINT as a terminal delivers it: a process started in the background (nohup, `&`, some CI
# runners) inherits SIGINT ignored, and Python then installs no KeyboardInterrupt for it.
HOLDER = textwrap.dedent("""
    import signal, sys, time
    from t2t_lite.run.lock import run_lock
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with run_lock(sys.argv[1]):
        print("held", flush=True)
        time.sleep(600)
""")


def _hold(output_dir) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(output_dir)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout.readline().strip() == "held"
    return process


def test_a_second_writer_is_refused_and_a_killed_holders_lock_taken_over(tmp_path, caplog):
    holder = _hold(tmp_path)
    try:
        with pytest.raises(RunLockedError, match=rf"\(PID {holder.pid}, holding .*{LOCK_FILE}\)"):
            with run_lock(str(tmp_path)):
                pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with caplog.at_level(logging.WARNING), run_lock(str(tmp_path)):
        assert (tmp_path / LOCK_FILE).read_text() == str(os.getpid())
    assert f"took over the lock of PID {holder.pid}, which ended without releasing it" in (
        caplog.text
    )
    assert not (tmp_path / LOCK_FILE).exists()  # a clean end leaves no lock file
    with caplog.at_level(logging.WARNING), run_lock(str(tmp_path)):
        pass
    assert caplog.text.count("took over") == 1


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_holder_stopped_by_a_signal_leaves_no_lock_behind(tmp_path, caplog, signum):
    holder = _hold(tmp_path)
    holder.send_signal(signum)
    holder.wait(timeout=60)
    assert holder.returncode != 0  # it was stopped, not finished
    assert not (tmp_path / LOCK_FILE).exists()
    with caplog.at_level(logging.WARNING), run_lock(str(tmp_path)):
        assert (tmp_path / LOCK_FILE).read_text() == str(os.getpid())
    assert "took over" not in caplog.text


def test_t2t_train_on_a_held_output_dir_stops_in_one_line(tmp_path):
    data_dir, output_dir = tmp_path / "data", tmp_path / "run"
    get_problem("algorithmic_copy").generate_data(
        str(data_dir), max_sequence_length=4, train_size=20, dev_size=5, test_size=5
    )
    holder = _hold(output_dir)
    try:
        done = command(
            "t2t-train", "--problem=algorithmic_copy", "--hparams_set=transformer_tiny",
            f"--data_dir={data_dir}", f"--output_dir={output_dir}", "--train_steps=2",
        )  # fmt: skip
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert lines[-1].startswith(
        f"t2t-train: error: {output_dir} is being trained by another process (PID {holder.pid}"
    )
    assert not (output_dir / "checkpoints").exists()  # it wrote nothing
