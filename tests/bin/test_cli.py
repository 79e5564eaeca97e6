"""The commands as a new user meets them: --help lists each command's own flags, a user's
mistake is one line `t2t-x: error: ...` with exit status 2, --help without TensorFlow, and no
TensorFlow start-up lines unless --verbose."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest
import tensorflow as tf
from decoding_helpers import model_hparams, tiny_model

from t2t_lite.run.layout import CHECKPOINT_DIR
from t2t_lite.run.run_info import RunInfo
from t2t_lite.runtime.precision import onednn_enabled

BIN = os.path.dirname(sys.executable)
# Each installed entry point and flags its --help must list.
HELP = {
    "t2t-info": ["--hparams_set", "--list"],
    "t2t-datagen": ["--problem", "--data_dir", "--problem_options", "--train_src", "--gum_dir"],
    "t2t-train": ["--problem", "--hparams_set", "--train_steps", "--init_from", "--strategy"],
    "t2t-decode": ["--output_dir", "--decode_from_file", "--beam_size", "--sampling", "--nbest"],
    "t2t-calibrate": ["--output_dir", "--lines", "--decode_from_file", "--reference"],
    "t2t-distill": ["--teacher", "--data_dir", "--output_data_dir", "--beam_size", "--quantize"],
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


def _seconds(argv: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    return time.perf_counter() - started, done


def test_help_answers_without_loading_tensorflow():
    # The same machine's cost of TensorFlow itself, measured in this test: each --help must
    # take well under it (none imports TensorFlow), and print nothing on stderr.
    tf_seconds, _ = _seconds([sys.executable, "-c", "import tensorflow"])
    for name in HELP:
        seconds, done = _seconds([os.path.join(BIN, name), "--help"])
        assert done.returncode == 0, (name, done.stderr[-2000:])
        assert done.stderr == "", (name, done.stderr[-2000:])
        assert seconds < 0.4 * tf_seconds, (name, seconds, tf_seconds)


def test_help_marks_required_flags_and_shows_values_as_typed():
    datagen = subprocess.run(
        [os.path.join(BIN, "t2t-datagen"), "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    assert "flags of t2t-datagen" in datagen and BIN not in datagen  # the name, not the path
    assert "  --problem: (required) Registered problem name." in datagen
    for leak in ("(default: '", "(a comma separated list)", ".;", "(default: None)"):
        assert leak not in datagen, leak
    # Each problem's options under its own name, with its own text and default.
    section = datagen.split("options by problem")[1]
    copy = section.split("  algorithmic_copy, algorithmic_reverse:\n")[1].split("\n  p")[0]
    assert "--train_size: Examples in the train split. (default: 10000)" in copy
    wmt = section.split("  wmt14_ende, wmt14_enfr:\n")[1]
    assert wmt.lstrip().startswith("--raw_dir: Folder of local files")
    decode = subprocess.run(
        [os.path.join(BIN, "t2t-decode"), "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    assert "--quantize: int8: decode with int8 weights" in decode  # no "<none|int8>: " prefix
    assert "One of: none, int8." in decode and "(default: none)" in decode


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
    text_files = []
    for name in ("train_src", "train_tgt", "dev_src", "dev_tgt"):
        (tmp_path / f"{name}.txt").write_text("a b c\nd e\n")
        text_files.append(f"--{name}={tmp_path / f'{name}.txt'}")
    exports = tmp_path / "exports"
    (exports / "3").mkdir(parents=True)
    (tmp_path / "deep.md").write_text("<b>" * 10_000 + "1" + "</b>" * 10_000 + "\n")
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
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
        "markup nested too deep": (
            "t2t-decode",
            [f"--output_dir={run}", "--input_format=document",
             f"--decode_from_file={tmp_path / 'deep.md'}"],
            f"t2t-decode: error: {tmp_path / 'deep.md'}:1: markup nested more than 100 levels deep",
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
        "negative top_k (one beyond the vocabulary keeps every token)": (
            "t2t-decode",
            [f"--output_dir={run}", "--sampling=top_k:-1"],
            "t2t-decode: error: --sampling needs temperature >= 0, top_k >= 0",
        ),
        "missing vocab_model": (
            "t2t-datagen",
            ["--problem=text2text", f"--data_dir={tmp_path / 'd2'}", *text_files,
             f"--vocab_model={tmp_path / 'none.model'}"],
            f"t2t-datagen: error: --vocab_model: file not found: {tmp_path / 'none.model'}",
        ),
        "export onto a file": (
            "t2t-export",
            [f"--output_dir={run}", f"--export_dir={run_dir / 'bad.txt'}"],
            f"t2t-export: error: --export_dir={run_dir / 'bad.txt'} is a file; pass a folder",
        ),
        "quantization the search does not know": (
            "t2t-decode",
            [f"--output_dir={run}", "--quantize=int4"],
            "t2t-decode: error: flag --quantize=int4: value should be one of <none|int8>",
        ),
        "int8 weights into a converter that quantizes itself": (
            "t2t-export",
            [f"--output_dir={run}", f"--export_dir={tmp_path / 'ct2'}", "--format=ctranslate2",
             "--quantize=int8"],
            "t2t-export: error: --quantize=int8: --format=ctranslate2 quantizes in its own "
            "converter; pass --ct2_quantization instead",
        ),
        "export to an existing version": (
            "t2t-export",
            [f"--output_dir={run}", f"--export_dir={exports}", "--version=3"],
            f"t2t-export: error: --version=3: {exports}/3 already exists; pass another --version",
        ),
        "missing reference": (
            "t2t-bleu",
            [f"--translation={tmp_path / 'dev_tgt.txt'}", f"--reference={tmp_path / 'ref.txt'}"],
            f"t2t-bleu: error: --reference: file not found: {tmp_path / 'ref.txt'}",
        ),
        "missing gold trees": (
            "t2t-evalb",
            [f"--gold={tmp_path / 'gold.txt'}", f"--test={tmp_path / 'dev_tgt.txt'}"],
            f"t2t-evalb: error: --gold: file not found: {tmp_path / 'gold.txt'}",
        ),
        "port in use": (
            "t2t-serve",
            [f"--output_dir={run}", f"--port={taken.getsockname()[1]}"],
            f"t2t-serve: error: --host=127.0.0.1 --port={taken.getsockname()[1]}: cannot listen "
            "there",
        ),
    }  # fmt: skip
    started = {k: _start(command, *flags) for k, (command, flags, _) in cases.items()}
    for case, process in started.items():
        code, _, err = _finish(process)
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2, (case, err[-3000:])
        assert "Traceback" not in err, (case, err[-3000:])
        assert lines[-1].startswith(cases[case][2]), (case, lines[-1])
        if cases[case][0] in ("t2t-serve", "t2t-export"):  # refused before the model loads
            assert "restored" not in err, (case, err[-3000:])
    taken.close()


# Runs a command's main as its entry point does; on its exit, says whether TensorFlow loaded.
MAIN_THEN_TF = """
import importlib, sys
module, sys.argv = sys.argv[1], sys.argv[2:]  # [the command's path, its flags...]
try:
    importlib.import_module(module).run()
except SystemExit as stop:
    print("tensorflow loaded:", "tensorflow.python" in sys.modules, file=sys.stderr)
    raise
"""


def test_mistakes_that_need_no_model_are_refused_before_tensorflow_loads(run_dir, tmp_path):
    run = str(run_dir / "run")
    exports = tmp_path / "exports"
    (exports / "3").mkdir(parents=True)
    cases = [
        ("t2t_decode", [f"--output_dir={tmp_path}"], f"{tmp_path}/hparams.json does not exist"),
        ("t2t_decode", [f"--output_dir={run}", "--sampling=temperature:hot"],
         "--sampling: temperature must be a number, got 'hot'"),
        ("t2t_decode", [f"--output_dir={run}", "--sampling=top_k:-1"],
         "--sampling needs temperature >= 0, top_k >= 0"),
        ("t2t_decode", [f"--output_dir={run}", "--beam_size=2", "--nbest=3"],
         "--nbest=3 must be in [1, --beam_size=2]"),
        ("t2t_decode", [f"--output_dir={run}", "--shortlist=5000,10"],
         "--shortlist takes at most 2000 frequent ids"),
        ("t2t_decode", [f"--output_dir={run}", f"--decode_from_file={tmp_path / 'none.txt'}"],
         f"--decode_from_file: file not found: {tmp_path / 'none.txt'}"),
        ("t2t_decode", [f"--output_dir={run}", f"--terminology={tmp_path / 'terms.tsv'}"],
         f"--terminology: file not found: {tmp_path / 'terms.tsv'}"),
        ("t2t_calibrate", [f"--output_dir={run}", f"--decode_from_file={run_dir / 'bad.txt'}",
                           f"--reference={tmp_path / 'ref.txt'}"],
         f"--reference: file not found: {tmp_path / 'ref.txt'}"),
        ("t2t_export", [f"--output_dir={run}", f"--export_dir={run_dir / 'bad.txt'}"],
         f"--export_dir={run_dir / 'bad.txt'} is a file; pass a folder"),
        ("t2t_export", [f"--output_dir={run}", f"--export_dir={exports}", "--version=3"],
         f"--version=3: {exports}/3 already exists"),
        ("t2t_serve", [f"--output_dir={tmp_path}"], f"{tmp_path}/hparams.json does not exist"),
        ("t2t_avg_checkpoints", [f"--output_dir={tmp_path}"],
         f"{tmp_path}/hparams.json does not exist"),
        ("t2t_train", ["--problem=algorithmic_none", f"--data_dir={tmp_path}",
                       f"--output_dir={tmp_path / 'out'}"], "unknown problem 'algorithmic_none'"),
        ("t2t_train", ["--problem=algorithmic_copy", f"--data_dir={tmp_path}",
                       f"--output_dir={tmp_path / 'out'}", "--hparams_set=transformer_tny"],
         "--hparams_set/--hparams: unknown hparams set 'transformer_tny'; did you mean"),
        ("t2t_train", ["--problem=algorithmic_reverse", f"--data_dir={run_dir / 'data'}",
                       f"--output_dir={tmp_path / 'out'}", "--hparams_set=transformer_tiny"],
         f"--problem is algorithmic_reverse, but {run_dir / 'data'}/metadata.json holds data for "
         "algorithmic_copy"),
        ("t2t_info", ["--hparams_set=transformer_tny"], "unknown hparams set 'transformer_tny'"),
    ]  # fmt: skip
    for module, flags, message in cases:
        name = module.replace("_", "-")
        done = subprocess.run(
            [sys.executable, "-c", MAIN_THEN_TF, f"t2t_lite.bin.{module}",
             os.path.join(BIN, name), *flags],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        lines = done.stderr.splitlines()
        assert done.returncode == 2, (module, flags, done.stderr[-3000:])
        assert lines[-2].startswith(f"{name}: error: {message}"), (module, flags, lines)
        assert lines[-1] == "tensorflow loaded: False", (module, flags, lines)
    assert not (tmp_path / "out").exists()


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


# What TensorFlow prints while it loads, as the commands must not show it.
STARTUP_LINES = ("InitializeLog", "oneDNN custom operations", "cpu_feature_guard", "cuda drivers")


def test_a_decode_prints_no_start_up_lines_unless_verbose(run_dir):
    run = str(run_dir / "run")
    quiet = subprocess.run(
        [os.path.join(BIN, "t2t-decode"), f"--output_dir={run}"],
        input="1 2 3\n", capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    assert len(quiet.stdout.splitlines()) == 1
    for line in STARTUP_LINES:
        assert line not in quiet.stderr, (line, quiet.stderr[-3000:])
    assert "restored" in quiet.stderr and "Using MirroredStrategy" not in quiet.stderr
    lines = [line.split("] ", 1)[-1] for line in quiet.stderr.splitlines()]
    assert len(lines) == len(set(lines)), quiet.stderr  # no line twice
    verbose = subprocess.run(
        [os.path.join(BIN, "t2t-decode"), f"--output_dir={run}", "--verbose"],
        input="1 2 3\n", capture_output=True, text=True, timeout=300,
        env={k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"},
    )  # fmt: skip
    assert verbose.returncode == 0 and "InitializeLog" in verbose.stderr, verbose.stderr[-3000:]
    # The oneDNN line only where TensorFlow runs oneDNN (not on an AVX2-only CPU).
    said = "oneDNN custom operations" in verbose.stderr
    assert said == onednn_enabled(), verbose.stderr[-3000:]
