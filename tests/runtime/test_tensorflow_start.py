"""Importing t2t_lite and its Translator prints nothing of TensorFlow's start-up, unless the
user asked for every line with TF_CPP_MIN_LOG_LEVEL=0."""

from __future__ import annotations

import os
import subprocess
import sys

from t2t_lite.runtime.tensorflow_start import startup_noise

IMPORT = "import t2t_lite; from t2t_lite.decode.translator import Translator; import os; " \
    "print(os.environ['TF_CPP_MIN_LOG_LEVEL'])"  # fmt: skip


def _python(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", IMPORT], capture_output=True, text=True, timeout=300, env=env
    )


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("TF_", "KERAS_"))}


def test_importing_the_translator_prints_nothing():
    done = _python(_clean_env())
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == "", done.stderr[-3000:]
    assert done.stdout == "1\n"  # C++ INFO lines off, as the level was unset


def test_a_level_the_user_set_is_kept_and_zero_shows_every_line():
    done = _python({**_clean_env(), "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert done.returncode == 0 and done.stderr == "", done.stderr[-3000:]
    assert done.stdout == "2\n"
    every = _python({**_clean_env(), "TF_CPP_MIN_LOG_LEVEL": "0"})
    assert every.returncode == 0 and every.stdout == "0\n", every.stderr[-3000:]
    assert "absl::InitializeLog() is called" in every.stderr, every.stderr[-3000:]
    assert any(startup_noise(line) for line in every.stderr.splitlines())


def test_start_up_lines_are_told_from_the_others():
    assert startup_noise(
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
    )
    assert startup_noise("I0000 00:00:1.0 14300 port.cc:153] oneDNN custom operations are on. x")
    assert startup_noise("I0000 00:00:1.0 14300 cpu_feature_guard.cc:227] This TensorFlow binary")
    assert not startup_noise("E0000 00:00:1.0 14300 some_op.cc:12] Out of memory")
    assert not startup_noise("t2t-decode: error: in.txt:1: invalid UTF-8 at byte 5")
