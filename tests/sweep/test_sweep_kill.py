"""A sweep killed with SIGKILL while a run trains: its t2t-train process gets SIGTERM and saves
a checkpoint; the rerun resumes that run with what is left of its minutes, not a fresh budget."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from t2t_lite.sweep.resume import keeps_own_budget

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
BUDGET = 0.4  # minutes of training per run


def wait_for(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def read(path: str) -> str:
    return open(path).read() if os.path.exists(path) else ""


def training_processes(output_dir: str) -> list[int]:
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            command = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
        except OSError:
            continue
        if "t2t_train" in command and f"--output_dir={output_dir}" in command:
            pids.append(int(pid))
    return pids


@pytest.mark.slow  # about 40 s; the fast tier resumes a sweep in test_sweep_end_to_end.py
def test_a_killed_sweep_resumes_with_the_minutes_left(tmp_path):
    from t2t_lite import problems
    from t2t_lite.sweep.plan import load_plan
    from t2t_lite.sweep.runner import run_sweep

    data_dir, sweep_dir = str(tmp_path / "data"), str(tmp_path / "sweep")
    problems.get_problem("algorithmic_reverse").generate_data(
        data_dir, num_symbols=8, max_sequence_length=6, train_size=200, dev_size=20
    )
    run_dir = os.path.join(sweep_dir, "runs", "transformer_tiny-seed1")
    log_path = os.path.join(run_dir, "train.log")
    state_path = os.path.join(run_dir, "sweep_state.json")
    sweep = subprocess.Popen(
        [sys.executable, "-m", "t2t_lite.bin.t2t_sweep", "--problem=algorithmic_reverse",
         f"--data_dir={data_dir}", f"--sweep_dir={sweep_dir}", "--sets=transformer_tiny",
         "--hparams=num_encoder_layers=1,num_decoder_layers=1,batch_size=256",
         f"--train_minutes={BUDGET}", "--train_steps=1000000", "--eval_every=1000000",
         "--save_every=1000000", "--log_every=5"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV,
    )  # fmt: skip
    try:
        wait_for(lambda: " loss " in read(log_path), 120, "training to start")
        wait_for(lambda: '"minutes_spent": 0.0' not in read(state_path), 30, "minutes recorded")
    finally:
        sweep.send_signal(signal.SIGKILL)
        sweep.wait()
    # Without its sweep the training process is told to stop; it saves and exits.
    wait_for(lambda: not training_processes(run_dir), 60, "t2t-train to exit")
    assert "SIGTERM: saved" in read(log_path)
    spent = json.loads(read(state_path))["minutes_spent"]
    assert 0 < spent < BUDGET
    assert not os.path.exists(os.path.join(run_dir, "sweep_done.json"))

    run_sweep(*load_plan(sweep_dir))
    second = read(log_path).split("--- attempt 2:")[1]
    assert "resumed from" in second
    given = float(re.search(r"--train_minutes=([0-9.]+)", second).group(1))
    if keeps_own_budget(run_dir):  # t2t-train counts the run's minutes itself
        assert given == BUDGET
    else:
        assert abs(given - (BUDGET - spent)) < 0.01
    done = json.load(open(os.path.join(run_dir, "sweep_done.json")))
    assert done["minutes_spent"] > spent and done["evaluation"]["step"] > 0
