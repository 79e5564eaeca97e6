"""One way for a test to run Python in a fresh process: a command's module (`-m
t2t_lite.bin.t2t_export ...`), a helper script or a piece of code, its exit status checked, and
the JSON of its last output line read, as the commands print their reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}


def run_python(
    *args: str, env: dict | None = None, timeout: float = 300, stdin: str | None = None
) -> subprocess.CompletedProcess:
    """`python ARGS...` in a fresh process (TensorFlow's logs quiet unless `env` says else); the
    exit status must be 0 (the end of stderr is the message when it is not)."""
    done = subprocess.run(
        [sys.executable, *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=ENV if env is None else env,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def last_json(stdout: str):
    """The JSON value on the last line of a process's output."""
    return json.loads(stdout.strip().splitlines()[-1])


def run_json(*args: str, **kwargs):
    """`python ARGS...` as `run_python` runs it; the JSON of its last output line."""
    return last_json(run_python(*args, **kwargs).stdout)


def python_json(code: str, **kwargs):
    """The JSON of the last line that `python -c CODE` prints, in a fresh process."""
    return run_json("-c", code, **kwargs)
