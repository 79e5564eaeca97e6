"""The commands as a new user meets them: --help lists each command's own flags, a user's
mistake is one line `t2t-x: error: ...` with exit status 2, and no CUDA noise on a CPU."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import tensorflow as tf
from decoding_helpers import model_hparams, tiny_model

from t2t_lite.run.layout import CHECKPOINT_DIR
from t2t_lite.run.run_info import RunInfo

BIN = os.path.dirname(sys.executable)
# Each installed entry point and flags its --help must list.
HELP = {
    "t2t-info": ["--hparams_set", "--list"],
    "t2t-datagen": ["--problem", "--data_dir", "--problem_options", "--train_src", "--gum_dir"],
    "t2t-train": ["--problem", "--hparams_set", "--train_steps", "--init_from", "--strategy"],
    "t2t-decode": ["--output_dir", "--decode_from_file", "--beam_size", "--sampling", "--nbest"],
    "t2t-bleu": ["--translation", "--reference"],
    "t2t-evalb": ["--gold", "--test"],
    "t2t-export": ["--output_dir", "--export_dir", "--beam_size", "--sampling", "--version"],
    "t2t-query": ["--server", "--model"],
    "t2t-avg-checkpoints": ["--output_dir", "--num_last"],
    "t2t-visualize": ["--output_dir", "--inputs", "--beam_size"],
    "t2t-serve": ["--output_dir", "--export_dir", "--port", "--beam_size"],
    "t2t-sweep": ["--sweep_dir", "--sweep", "--seeds", "--train_minutes", "--report_only"],
}
WORDS = [str(i) for i in range(10)]  # algorithmic_copy's vocabulary: ids 3..12


def _start(command: str, *flags: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [os.path.join(BIN, command), *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env or {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"},
    )


def _finish(process: subprocess.Popen) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=300)
    return process.returncode, out, err


def test_help_lists_each_commands_own_flags():
    started = {name: _start(name, "--help") for name in HELP}  # in parallel: each imports TF
    for name, process in started.items():
        code, out, err = _finish(process)
        assert code == 0, (name, err[-2000:])
        assert "Try --helpfull" not in out.split("flags:")[0]
        for flag in [*HELP[name], "--verbose"]:  # "--flag:" or, for a boolean, "--[no]flag:"
            assert f"{flag}:" in out.replace("--[no]", "--"), (name, flag, out[:3000])
        assert "(default: " in out, name


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """An algorithmic_copy data_dir (vocabulary and metadata.json) and a run with a random model."""
    from t2t_lite.problems import get_problem

    root = tmp_path_factory.mktemp("cli")
    data_dir, output_dir = root / "data", root / "run"
    get_problem("algorithmic_copy").generate_data(
        str(data_dir), max_sequence_length=4, train_size=20, dev_size=5, test_size=5
    )
    model = tiny_model(13, seed=2)
    RunInfo("algorithmic_copy", str(data_dir), "transformer_tiny", model_hparams(model), 13).save(
        str(output_dir)
    )
    tf.train.CheckpointManager(
        tf.train.Checkpoint(model=model), str(output_dir / CHECKPOINT_DIR), 1
    ).save()
    (root / "bad.txt").write_bytes(b"1 2 \xff 3\n")
    return root


def test_user_errors_are_one_line_with_status_2(run_dir, tmp_path):
    run, data = str(run_dir / "run"), str(run_dir / "data")
    cases = {
        "no run": (
            "t2t-decode",
            [f"--output_dir={tmp_path / 'nothing'}"],
            f"t2t-decode: error: {tmp_path / 'nothing'}/hparams.json does not exist",
        ),
        "no data_dir": (
            "t2t-train",
            ["--problem=algorithmic_copy", f"--data_dir={tmp_path / 'no_data'}",
             f"--output_dir={tmp_path / 'out'}", "--hparams_set=transformer_tiny"],
            f"t2t-train: error: no vocabulary in {tmp_path / 'no_data'} (expected exactly one of",
        ),
        "no input file": (
            "t2t-decode",
            [f"--output_dir={run}", f"--decode_from_file={tmp_path / 'missing.txt'}"],
            f"t2t-decode: error: --decode_from_file: file not found: {tmp_path / 'missing.txt'}",
        ),
        "invalid UTF-8": (
            "t2t-decode",
            [f"--output_dir={run}", f"--decode_from_file={run_dir / 'bad.txt'}"],
            f"t2t-decode: error: {run_dir / 'bad.txt'}:1: invalid UTF-8 at byte 5",
        ),
        "nbest > beam": (
            "t2t-decode",
            [f"--output_dir={run}", "--beam_size=2", "--nbest=3"],
            "t2t-decode: error: --nbest=3 must be in [1, --beam_size=2]",
        ),
        "unknown problem option": (
            "t2t-datagen",
            ["--problem=algorithmic_copy", f"--data_dir={tmp_path / 'd'}",
             "--problem_options=num_symbol=3"],
            "t2t-datagen: error: problem algorithmic_copy does not take option(s) ['num_symbol']",
        ),
        "bad flag value": (
            "t2t-decode",
            [f"--output_dir={run}", "--beam_size=0"],
            "t2t-decode: error: flag --beam_size=0: 0 is not a positive integer",
        ),
        "problem other than the data's": (
            "t2t-train",
            ["--problem=algorithmic_reverse", f"--data_dir={data}",
             f"--output_dir={tmp_path / 'out2'}", "--hparams_set=transformer_tiny"],
            f"t2t-train: error: --problem is algorithmic_reverse, but {data}/metadata.json holds "
            "data for algorithmic_copy",
        ),
        "bad sampling": (
            "t2t-decode",
            [f"--output_dir={run}", "--sampling=temperature:hot"],
            "t2t-decode: error: --sampling: temperature must be a number, got 'hot'",
        ),
    }  # fmt: skip
    started = {k: _start(command, *flags) for k, (command, flags, _) in cases.items()}
    for case, process in started.items():
        code, _, err = _finish(process)
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2, (case, err[-3000:])
        assert "Traceback" not in err, (case, err[-3000:])
        assert lines[-1].startswith(cases[case][2]), (case, lines[-1])


def test_verbose_shows_the_traceback(tmp_path):
    code, _, err = _finish(_start("t2t-decode", f"--output_dir={tmp_path}", "--verbose"))
    assert code == 2 and "Traceback" in err and err.splitlines()[-1].startswith("t2t-decode: ")


@pytest.mark.skipif(
    os.path.exists("/proc/driver/nvidia/version"), reason="a machine with an NVIDIA driver"
)
def test_no_cuda_error_line_on_a_cpu():
    code, out, err = _finish(_start("t2t-info", "--list"))
    assert code == 0 and "transformer_base" in out
    assert "cuInit" not in err and "cuda_platform" not in err, err[-2000:]
