"""A command stopped by a signal outside its own handling of one (t2t-train after its last
evaluation, a Ctrl-C anywhere) ends in one line and the signal's exit status, not a
traceback or a silent -15."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# A command whose main is stopped by a signal (KeyboardInterrupt, as t2t-train's lock raises it
# for SIGTERM), run as the commands run: through cli.run.
PROGRAM = """
import sys, types
from t2t_lite.bin import cli

def main():
    raise KeyboardInterrupt({stop!r})

main.__module__ = "t2t_lite.bin.t2t_train"
sys.modules[main.__module__] = types.ModuleType(main.__module__, "t2t-train")
sys.argv = ["t2t-train"]
cli.run(main)
"""


@pytest.mark.parametrize("stop, status", [("SIGTERM", 143), ("", 130)])
def test_a_signal_outside_the_loop_is_one_line(stop, status):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM.format(stop=stop)], capture_output=True, text=True, env=env
    )
    assert done.returncode == status, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line == (
        f"t2t-train: error: stopped by {stop or 'SIGINT'} before it finished; run the same "
        "command again to go on (t2t-train resumes from its last checkpoint)"
    )
