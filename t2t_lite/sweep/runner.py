"""Runs a sweep: each planned run as a `t2t-train` process, then its evaluation, then the
report, resuming where a killed sweep stopped.

A finished run (records.DONE_FILE) is skipped without starting anything. An interrupted one is
trained on by t2t-train in the same output_dir, which resumes from its checkpoints, with what
is left of its time budget (`resume.minutes_for_attempt`). SIGINT and SIGTERM are passed on to
the training process, which saves a checkpoint and stops; and on Linux a training process whose
sweep dies (kill -9) gets SIGTERM too, so none trains on unseen.
"""

from __future__ import annotations

import ctypes
import datetime
import os
import signal
import subprocess
import sys
import time

from absl import logging

from t2t_lite.hparams.sweeps import SweepDefinition
from t2t_lite.sweep import records, report, resume
from t2t_lite.sweep.plan import (
    TRAIN_FLAG_DEFAULTS,
    PlannedRun,
    SweepConfig,
    plan_runs,
    save_plan,
)

# How often the minutes a training process has spent are written down.
POLL_SECONDS = 10.0
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


class SweepInterrupted(Exception):
    """SIGINT or SIGTERM stopped the sweep; the training process saved a checkpoint."""


class SweepFailed(RuntimeError):
    """Some runs failed to train; the others are in the report."""


def train_command(run: PlannedRun, config: SweepConfig, minutes: float | None) -> list[str]:
    """The t2t-train command line of one attempt at `run`."""
    flags = {
        "problem": config.problem,
        "data_dir": config.data_dir,
        "output_dir": run.output_dir,
        "hparams_set": run.row.hparams_set,
        "hparams": run.overrides,
        "seed": run.seed,
        **{**TRAIN_FLAG_DEFAULTS, **config.train_flags},
    }
    if config.train_steps:
        flags["train_steps"] = config.train_steps
    if minutes:
        flags["train_minutes"] = f"{minutes:.4f}"
    if config.usr_dir:
        flags["usr_dir"] = config.usr_dir
    command = [sys.executable, "-m", "t2t_lite.bin.t2t_train"]
    return command + [f"--{name}={value}" for name, value in flags.items()]


def _stop_with_parent() -> None:
    """In the training process before it starts: SIGTERM when the sweep's process dies."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: a killed sweep leaves training running
        pass


class _Forwarding:
    """Passes SIGINT and SIGTERM on to the training process (in a session of its own, so a
    terminal's Ctrl-C reaches it once, from here) and remembers that one came."""

    def __init__(self, child: subprocess.Popen):
        self.child, self.received, self._previous = child, None, {}

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        del frame
        self.received = signal.Signals(signum).name
        logging.warning("%s: passed on to the training process", self.received)
        self.child.send_signal(signum)

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def _train(run: PlannedRun, config: SweepConfig, minutes: float | None) -> int:
    """One t2t-train process for `run`, its output appended to the run's train.log; the
    minutes it spends are added to the run's record as it goes. Returns its exit status."""
    state = records.read_state(run) or {}
    attempts, spent = int(state.get("attempts", 0)) + 1, float(state.get("minutes_spent", 0.0))
    os.makedirs(run.output_dir, exist_ok=True)
    records.write_state(run, config, attempts, spent)
    command = train_command(run, config, minutes)
    log_path = os.path.join(run.output_dir, records.LOG_FILE)
    started = time.monotonic()
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"--- attempt {attempts}: {' '.join(command)}\n")
        log.flush()
        child = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_stop_with_parent,
        )
        with _Forwarding(child) as forwarding:
            while True:
                try:
                    code = child.wait(timeout=POLL_SECONDS)
                    break
                except subprocess.TimeoutExpired:
                    elapsed = (time.monotonic() - started) / 60
                    records.write_state(run, config, attempts, spent + elapsed)
    records.write_state(run, config, attempts, spent + (time.monotonic() - started) / 60)
    if forwarding.received:
        raise SweepInterrupted(
            f"stopped by {forwarding.received} while training {run.name}; run the same "
            "command again to resume"
        )
    return code


def last_error(log_path: str) -> str:
    """The last line of a training log that reports an error (else its last line)."""
    with open(log_path, encoding="utf-8", errors="replace") as f:
        lines = [line.strip() for line in f if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    return (errors or lines or ["(no output)"])[-1][:500]


def finish_run(run: PlannedRun, config: SweepConfig) -> tuple[bool, str]:
    """Trains `run` on as needed, evaluates it, writes its done record: (ok, what happened)."""
    from t2t_lite.sweep.evaluation import evaluate_run  # TensorFlow

    minutes = resume.minutes_for_attempt(run, config)
    if minutes == 0.0:
        logging.info("%s: its %g minutes are spent; evaluating it", run.name, config.train_minutes)
    else:
        code = _train(run, config, minutes)
        if code:
            log_path = os.path.join(run.output_dir, records.LOG_FILE)
            return False, f"t2t-train exited with status {code}: {last_error(log_path)}"
    try:
        evaluation = evaluate_run(run.output_dir, config.eval_examples)
    except Exception as e:  # noqa: BLE001  (one run's failure must not end a sweep of hours)
        logging.exception("evaluating %s", run.output_dir)
        return False, f"evaluation failed: {type(e).__name__}: {e}"
    spent = float((records.read_state(run) or {}).get("minutes_spent", 0.0))
    records.write_done(run, config, evaluation, spent)
    summary = ", ".join(
        f"{key} {evaluation[key]:.4g}" for key in ("dev_perplexity", evaluation["metric"])
    )
    return True, f"step {evaluation['step']}, {spent:.1f} minutes: {summary}"


def run_sweep(definition: SweepDefinition, config: SweepConfig) -> str:
    """Trains and evaluates every run not finished yet, rewriting the report after each;
    returns the report's path. Raises SweepFailed (after the report) when a run failed, and
    SweepInterrupted on SIGINT or SIGTERM."""
    runs = plan_runs(definition, config)
    work = resume.plan_work(runs, config)  # every folder checked before anything trains
    report.check_plotting()  # a missing matplotlib fails now, not after hours of training
    save_plan(definition, config)
    failed, started, trained = [], time.monotonic(), 0
    for k, (run, status) in enumerate(work, start=1):
        if status == resume.DONE:
            logging.info("run %d of %d: %s finished earlier; skipped", k, len(runs), run.name)
            continue
        verb = "resuming" if status == resume.RESUME else "starting"
        logging.info("run %d of %d: %s %s (%s)", k, len(runs), verb, run.name, run.overrides)
        ok, message = finish_run(run, config)
        trained += 1
        logging.log(logging.INFO if ok else logging.ERROR, "run %d of %d: %s %s: %s",
                    k, len(runs), run.name, "finished" if ok else "FAILED", message)  # fmt: skip
        if not ok:
            failed.append(f"{run.name} ({message})")
        report.write_report(definition, config)
        _log_time_left(started, trained, work[k:])
    path = report.write_report(definition, config)
    if failed:
        raise SweepFailed(f"{len(failed)} runs failed: " + "; ".join(failed))
    return path


def _log_time_left(started: float, trained: int, rest: list[tuple[PlannedRun, str]]) -> None:
    todo = sum(1 for _, status in rest if status != resume.DONE)
    if todo:
        seconds = (time.monotonic() - started) / trained * todo
        left = datetime.timedelta(seconds=round(seconds))
        logging.info("%d run%s to go, about %s", todo, "s" if todo > 1 else "", left)
