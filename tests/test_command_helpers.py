"""tests/command_helpers.py: a process forked from the warm one runs `python ARGS` as an
interpreter started from nothing does (the slow path, `fresh=True`): the same exit status, output,
arguments, folder, standard input and environment; nothing of one run is left in the next; and
what a warm process cannot be runs fresh."""

from __future__ import annotations

import json
import os

import pytest
from command_helpers import ENV, command, run

# What a process sees of itself, printed as JSON; TensorFlow is loaded the first time in it.
SELF = (
    "import json, os, sys\n"
    "before = 'tensorflow' in sys.modules\n"
    "import tensorflow as tf\n"
    "print(json.dumps({'argv': sys.argv, 'cwd': os.getcwd(), 'stdin': sys.stdin.read(),\n"
    "    'path0': sys.path[0], 'variable': os.environ.get('T2T_HELPER_TEST'),\n"
    "    'tensorflow_before': before, 'devices': len(tf.config.list_logical_devices()),\n"
    "    'name': __name__}))\n"
)


def _both(*args, **kwargs):
    return run(*args, **kwargs), run(*args, fresh=True, **kwargs)


def test_a_warm_process_sees_what_a_fresh_one_sees(tmp_path):
    env = {**ENV, "T2T_HELPER_TEST": "seen"}
    warm, fresh = _both("-c", SELF, "a", "--b=1", env=env, stdin="line\n", cwd=str(tmp_path))
    assert warm.returncode == fresh.returncode == 0, (warm.stderr[-2000:], fresh.stderr[-2000:])
    warm_seen, fresh_seen = json.loads(warm.stdout), json.loads(fresh.stdout)
    # The one difference: the warm process had TensorFlow loaded before the code ran.
    assert (warm_seen.pop("tensorflow_before"), fresh_seen.pop("tensorflow_before")) == (
        True,
        False,
    )
    assert warm_seen == fresh_seen
    assert fresh_seen == {
        "argv": ["-c", "a", "--b=1"], "cwd": str(tmp_path), "stdin": "line\n", "path0": "",
        "variable": "seen", "devices": 1, "name": "__main__",
    }  # fmt: skip


def test_exit_statuses_and_errors_as_the_interpreter_gives_them(tmp_path):
    for code, status, stderr_end in (
        ("import sys; sys.exit(3)", 3, ""),
        ("import sys; sys.exit('stopped here')", 1, "stopped here\n"),
        ("raise ValueError('bad value')", 1, "ValueError: bad value\n"),
        ("import sys; print('out'); sys.stdout.flush(); sys.exit()", 0, ""),
    ):
        warm, fresh = _both("-c", code)
        assert warm.returncode == fresh.returncode == status, code
        assert warm.stdout == fresh.stdout and warm.stderr.endswith(stderr_end), code
        assert fresh.stderr.endswith(stderr_end), code
    # A command's one-line error, and a script with its own folder first on the path.
    missing = str(tmp_path / "nothing")
    warm, fresh = (command("t2t-decode", f"--output_dir={missing}", fresh=f) for f in (0, 1))
    assert warm.returncode == fresh.returncode == 2 and warm.stderr == fresh.stderr
    assert warm.stderr.startswith("t2t-decode: error: ") and missing in warm.stderr
    script = tmp_path / "script.py"
    script.write_text("import json, sys\nprint(json.dumps(sys.argv + sys.path[:1]))\n")
    warm, fresh = _both(str(script), "x")
    assert json.loads(warm.stdout) == json.loads(fresh.stdout) == [str(script), "x", str(tmp_path)]


def test_nothing_of_one_run_is_left_in_the_next():
    code = (
        "import json, os, sys, tensorflow as tf\n"
        "from absl import flags\n"
        "flags.DEFINE_string('only_once', 'default', '')\n"
        "flags.FLAGS(sys.argv)\n"
        "tf.config.set_logical_device_configuration(tf.config.list_physical_devices('CPU')[0],\n"
        "    [tf.config.LogicalDeviceConfiguration()] * 2)\n"
        "os.environ['T2T_HELPER_LEFT'] = 'set'\n"
        "print(json.dumps([flags.FLAGS.only_once, len(tf.config.list_logical_devices())]))\n"
    )
    for value in ("one", "two"):  # a flag defined twice, devices set twice: each fails if kept
        done = run("-c", code, f"--only_once={value}")
        assert done.returncode == 0, done.stderr[-2000:]
        assert json.loads(done.stdout) == [value, 2]
    assert "T2T_HELPER_LEFT" not in os.environ
    left = run("-c", "import os; print(os.environ.get('T2T_HELPER_LEFT'))")
    assert left.stdout == "None\n"


LOADED = "import sys; print('tensorflow' in sys.modules)"
OTHER_ONEDNN = "1" if ENV.get("TF_ENABLE_ONEDNN_OPTS") == "0" else "0"


@pytest.mark.parametrize(
    "args, env",
    [
        # Read as TensorFlow loads: the other value than the warm process started with.
        (("-c", LOADED), {**ENV, "TF_ENABLE_ONEDNN_OPTS": OTHER_ONEDNN}),
        (("-c", LOADED), {k: v for k, v in ENV.items() if k != "TF_CPP_MIN_LOG_LEVEL"}),
        (("-B", "-c", LOADED), ENV),  # an interpreter option
    ],
)
def test_what_a_warm_process_cannot_be_runs_fresh(args, env):
    assert run("-c", LOADED).stdout == "True\n"  # warm: TensorFlow is loaded
    done = run(*args, env=env)
    assert done.returncode == 0 and done.stdout == "False\n", done.stderr[-2000:]


def test_the_warm_process_starts_with_the_variables_of_env_whatever_os_environ_holds():
    """The first process asked for starts the warm one. Asked for by a program that has set
    TF_ENABLE_ONEDNN_OPTS=0 in os.environ since (as a test's monkeypatch would), the warm process
    still imports TensorFlow with ENV's variables: oneDNN as a fresh process with ENV has it."""
    onednn = (
        "from tensorflow.python.util import _pywrap_util_port\n"
        "print(_pywrap_util_port.IsMklEnabled())\n"
    )
    program = (
        f"import os, sys\nsys.path.insert(0, {os.path.dirname(__file__)!r})\n"
        "import command_helpers as helpers\n"
        "os.environ['TF_ENABLE_ONEDNN_OPTS'] = '0'\n"
        f"print(helpers.run('-c', {onednn!r}).stdout.strip())\n"
    )
    started = run("-c", program, fresh=True)
    assert started.returncode == 0, started.stderr[-2000:]
    assert started.stdout == run("-c", onednn, fresh=True).stdout
