"""The flags that locate a run, defined once (t2t_lite.bin.run_flags): the same names, help and
defaults on every command that restores a run, and a run of the user's own problem restored by
t2t-visualize and t2t-serve with its --usr_dir, which hparams.json records and names when it is
missing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import command_helpers
import pytest
import tensorflow as tf
from command_helpers import python_json, run_python
from decoding_helpers import model_hparams, tiny_model

from t2t_lite.run.layout import CHECKPOINT_DIR
from t2t_lite.run.run_info import RunInfo

BIN = os.path.dirname(sys.executable)
COMMANDS = ("t2t_decode", "t2t_export", "t2t_serve", "t2t_visualize")
RUN_FLAGS = ("output_dir", "checkpoint", "data_dir", "usr_dir", "beam_size", "alpha", "patience",
             "extra_length", "constrained", "sampling", "quantize", "no_repeat_ngram_size",
             "repetition_penalty", "min_length", "disable_unk")  # fmt: skip
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


def _flags(module: str) -> dict:
    script = (
        f"import json, t2t_lite.bin.{module}\nfrom absl import flags\n"
        f"print(json.dumps({{n: [flags.FLAGS[n].help, flags.FLAGS[n].default] for n in "
        f"{RUN_FLAGS!r} if n in flags.FLAGS}}))"
    )
    return python_json(script)


def test_every_command_that_restores_a_run_has_the_same_run_flags():
    found = {module: _flags(module) for module in COMMANDS}
    for module, values in found.items():
        assert sorted(values) == sorted(RUN_FLAGS), (module, sorted(values))
    first = found["t2t_export"]
    for module, values in found.items():
        for name in RUN_FLAGS:
            if name == "checkpoint" and module == "t2t_decode":  # it adds the ensemble's form
                assert values[name][0].startswith(first[name][0]), values[name]
                continue
            assert values[name] == first[name], (module, name, values[name], first[name])
    # The true default order, final/ (every --train_minutes run's model) first.
    assert (
        "output_dir/final, output_dir/averaged and output_dir/checkpoints" in first["checkpoint"][0]
    )


@pytest.fixture(scope="module")
def user_run(tmp_path_factory):
    """A run of a problem registered by a --usr_dir file, with that file recorded."""
    root = tmp_path_factory.mktemp("usr_run")
    usr = root / "my_problems.py"
    usr.write_text(
        textwrap.dedent("""
        from t2t_lite.problems import register_problem
        from t2t_lite.problems.algorithmic import AlgorithmicCopy

        @register_problem("usr_copy_digits")
        class CopyDigits(AlgorithmicCopy):
            pass
        """)
    )
    script = (
        "from t2t_lite.problems import import_usr_dir, get_problem\n"
        f"import_usr_dir({str(usr)!r})\n"
        f"get_problem('usr_copy_digits').generate_data({str(root / 'data')!r}, "
        "max_sequence_length=4, train_size=20, dev_size=5, test_size=5)\n"
    )
    run_python("-c", script)
    model = tiny_model(13, seed=4)
    info = RunInfo(
        "usr_copy_digits", str(root / "data"), "transformer_tiny", model_hparams(model), 13
    )
    info = RunInfo(**{**info.__dict__, "usr_dir": str(usr)})
    info.save(str(root / "run"))
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=model), str(root / "run" / CHECKPOINT_DIR), 1
    )
    manager.save()
    (root / "in.txt").write_text("1 2\n")
    return root


def _command(name: str, *flags: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return command_helpers.command(name, *flags, timeout=timeout)


def test_a_missing_usr_dir_is_named_from_the_run(user_run):
    run = f"--output_dir={user_run / 'run'}"
    for command, flags in (
        ("t2t-visualize", [run, "--inputs=1 2"]),
        ("t2t-serve", [run, "--port=0"]),
        ("t2t-decode", [run, f"--decode_from_file={user_run / 'in.txt'}"]),
    ):
        done = _command(command, *flags)
        last = done.stderr.strip().splitlines()[-1]
        assert done.returncode == 2, (command, done.stderr[-2000:])
        assert last.startswith(f"{command}: error: problem 'usr_copy_digits' of the run in ")
        assert f"--usr_dir={user_run / 'my_problems.py'}" in last, last


def test_visualize_and_serve_restore_a_user_problem_run_with_its_usr_dir(user_run, tmp_path):
    flags = [f"--output_dir={user_run / 'run'}", f"--usr_dir={user_run / 'my_problems.py'}"]
    pictures = _command("t2t-visualize", *flags, "--inputs=1 2 3", f"--visualize_dir={tmp_path}")
    assert pictures.returncode == 0, pictures.stderr[-2000:]
    assert (tmp_path / "index.html").is_file()
    # t2t-serve restores it and starts serving on a free port: its URL line says so.
    served = subprocess.Popen(
        [os.path.join(BIN, "t2t-serve"), *flags, "--port=0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
    )  # fmt: skip
    try:
        url = served.stdout.readline()
    finally:
        served.terminate()
        _, err = served.communicate(timeout=60)
    assert url.startswith("t2t-serve: http://127.0.0.1:"), (url, err[-3000:])
    assert "restored" in err and "usr_copy_digits" in err, err[-3000:]
    assert "problem 'usr_copy_digits'" not in err


def test_t2t_decode_reads_every_run_flag_of_the_one_restore():
    """Every `RunFlags` field is a flag of t2t-decode, read by name (`run_flags.from_flags`)."""
    script = (
        "import dataclasses, json, t2t_lite.bin.t2t_decode\nfrom absl import flags\n"
        "from t2t_lite.run.run_flags import RunFlags\n"
        "print(json.dumps([f.name for f in dataclasses.fields(RunFlags) if f.name not in "
        "flags.FLAGS]))"
    )
    assert python_json(script) == []
