"""The sweep's handling of its training processes, with stand-ins for t2t-train: a failing run
is reported and the others go on; SIGTERM reaches the training process and stops the sweep."""

import os
import signal
import sys
import threading

import pytest

from t2t_lite.sweep import records, runner
from t2t_lite.sweep.plan import SweepConfig, definition_from_flags

FAILING = "import sys; print('step 1'); print('ERROR: non-finite loss at step 2'); sys.exit(1)"
# Waits for SIGTERM, then says so and exits as t2t-train does after saving a checkpoint.
STOPPING = """
import signal, sys, time
def stop(signum, frame):
    print('SIGTERM: saved ckpt-3; stopping', flush=True)
    sys.exit(1)
signal.signal(signal.SIGTERM, stop)
print('training', flush=True)
time.sleep(60)
"""


def sweep_of(tmp_path) -> tuple:
    definition = definition_from_flags("", [], ["num_heads=1"], "transformer_tiny")
    config = SweepConfig(sweep_dir=str(tmp_path), problem="algorithmic_reverse", data_dir="d",
                         train_minutes=1.0)  # fmt: skip
    return definition, config


def stand_in(monkeypatch, script: str) -> list:
    commands = []

    def command(run, config, minutes):
        commands.append((run.name, minutes))
        return [sys.executable, "-c", script]

    monkeypatch.setattr(runner, "train_command", command)
    return commands


def test_a_failed_run_is_reported_and_the_sweep_goes_on(tmp_path, monkeypatch):
    commands = stand_in(monkeypatch, FAILING)
    with pytest.raises(runner.SweepFailed) as failed:
        runner.run_sweep(*sweep_of(tmp_path))
    assert [name for name, _ in commands] == ["transformer_tiny-seed1", "num_heads=1-seed1"]
    assert str(failed.value).startswith(
        "2 runs failed: transformer_tiny-seed1 (t2t-train exited with status 1: ERROR: "
        "non-finite loss at step 2)"
    )
    report = open(os.path.join(tmp_path, "report.md")).read()
    assert "## Not finished\n\ntransformer_tiny-seed1, num_heads=1-seed1" in report
    # A rerun tries again, with the minutes the failed attempt left.
    run_dir = os.path.join(tmp_path, "runs", "num_heads=1-seed1")
    state = records.read_json(os.path.join(run_dir, records.STATE_FILE))
    assert state["attempts"] == 1 and 0 < state["minutes_spent"] < 0.2
    with pytest.raises(runner.SweepFailed):
        runner.run_sweep(*sweep_of(tmp_path))
    assert commands[-1][1] == pytest.approx(1.0 - state["minutes_spent"], abs=0.01)
    assert open(os.path.join(run_dir, records.LOG_FILE)).read().count("--- attempt") == 2


def test_sigterm_reaches_the_training_process_and_stops_the_sweep(tmp_path, monkeypatch):
    commands = stand_in(monkeypatch, STOPPING)
    run_dir = os.path.join(tmp_path, "runs", "transformer_tiny-seed1")
    log = os.path.join(run_dir, records.LOG_FILE)

    handler = signal.getsignal(signal.SIGTERM)

    def send_when_training():
        # Only once the sweep's handler is in place and the stand-in trains: a SIGTERM before
        # that would stop pytest itself. A slow machine waits; one that never gets there fails
        # the assertions below instead.
        for _ in range(2400):
            forwarding = signal.getsignal(signal.SIGTERM) is not handler
            if forwarding and os.path.exists(log) and "training" in open(log).read():
                os.kill(os.getpid(), signal.SIGTERM)
                return
            threading.Event().wait(0.05)

    sender = threading.Thread(target=send_when_training)
    sender.start()
    with pytest.raises(runner.SweepInterrupted, match="stopped by SIGTERM while training "
                       "transformer_tiny-seed1; run the same command again to resume"):  # fmt: skip
        runner.run_sweep(*sweep_of(tmp_path))
    sender.join()
    assert len(commands) == 1  # the sweep stopped after the interrupted run
    assert "SIGTERM: saved ckpt-3; stopping" in open(log).read()
    assert signal.getsignal(signal.SIGTERM) is handler  # the sweep's handler is gone
