"""Datagen with worker processes (`t2t_lite.data.shard_workers`) against the one-process path:
the same data directory byte for byte, a resumed run that finishes an interrupted one, and the
`num_processes` option's errors."""

import logging
import os
import shutil
import subprocess
import sys

import pytest
from command_helpers import command

from t2t_lite.problems import get_problem
from t2t_lite.problems.base import PARALLEL_MIN_SHARD_PAIRS, datagen_processes

PAIRS = 120
PER_SHARD = 25  # 5 shards, the last one short


def _corpus(folder):
    """text2text options for PAIRS training pairs (one with an empty side) and 10 dev pairs."""
    words = "the a house small green dog sees runs over bridge river old".split()
    options = {}
    for split, count in (("train", PAIRS), ("dev", 10)):
        for side, shift in (("src", 0), ("tgt", 5)):
            lines = [
                " ".join(words[(i * 7 + k * 3 + shift) % len(words)] for k in range(1 + i % 9))
                for i in range(count)
            ]
            if split == "train" and side == "tgt":
                lines[17] = ""
            path = folder / f"{split}.{side}"
            path.write_text("\n".join(lines) + "\n")
            options[f"{split}_{side}"] = str(path)
    return {**options, "vocab_size": "60"}


def _generate(data_dir, options, processes):
    problem = get_problem("text2text")
    problem.examples_per_shard = PER_SHARD  # several shards from a small corpus
    return problem.generate_data(str(data_dir), **options, num_processes=processes)


def _files(data_dir):
    return {name: (data_dir / name).read_bytes() for name in sorted(os.listdir(data_dir))}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The corpus and the data_dir one process writes from it."""
    root = tmp_path_factory.mktemp("parallel_datagen")
    options = _corpus(root)
    _generate(root / "one", options, "1")
    return options, root / "one"


def test_workers_write_what_one_process_writes(reference, tmp_path, caplog):
    options, one = reference
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.INFO, logger="absl")  # whatever verbosity earlier tests left
    metadata = _generate(tmp_path / "two", options, "2")
    assert "train: 2 processes write the shards" in caplog.text
    assert "120/120 pairs, ETA 0:00:00" in caplog.text  # text2text knows its size
    assert len(metadata["splits"]["train"]["shards"]) == 5
    assert metadata["splits"]["train"]["skipped_empty"] == 1
    # Every file, metadata.json and datagen.json included: the count is not recorded.
    assert _files(tmp_path / "two") == _files(one)


def test_a_resumed_run_keeps_finished_shards_and_finishes_the_rest(reference, tmp_path):
    options, one = reference
    data_dir = tmp_path / "resumed"
    shutil.copytree(one, data_dir)
    # As a run killed while writing leaves it: no metadata.json; shard 2 written but not its
    # statistics (so not done); shard 3 half written under its temporary name; shard 4 and dev
    # not started.
    os.remove(data_dir / "metadata.json")
    (data_dir / "train-00002.tfrecord").write_bytes(b"half a shard")
    os.remove(data_dir / "train-00002.stats.json")
    (data_dir / ".train-00003.tfrecord-x1y2.tmp").write_bytes(b"partial")
    for name in ("train-00003", "train-00004", "dev-00000"):
        os.remove(data_dir / f"{name}.tfrecord")
        os.remove(data_dir / f"{name}.stats.json")
    kept = {n: os.stat(data_dir / n).st_mtime_ns for n in ("train-00000.tfrecord",
                                                           "train-00001.stats.json")}  # fmt: skip
    _generate(data_dir, options, "2")
    assert _files(data_dir) == _files(one)
    assert kept == {n: os.stat(data_dir / n).st_mtime_ns for n in kept}  # not written again


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5", 0, True])
def test_num_processes_must_be_a_count(tmp_path, value):
    with pytest.raises(ValueError, match=rf"num_processes must be .* 1 or more, got {value!r}"):
        _generate(tmp_path / "data", {}, value)
    assert not (tmp_path / "data").exists()  # refused before anything was written


def test_by_default_every_core_writes_large_shards_only():
    assert datagen_processes(None, PARALLEL_MIN_SHARD_PAIRS) == (os.cpu_count() or 1)
    assert datagen_processes(None, 2000) == 1  # algorithmic problems' small shards
    assert datagen_processes("3", 2000) == 3


def test_the_command_refuses_zero_processes_in_one_line(tmp_path):
    done = command(
        "t2t_datagen", "--problem=text2text", f"--data_dir={tmp_path}", "--num_processes=0",
        timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    assert "num_processes must be a whole number of processes, 1 or more, got '0'" in done.stderr
    assert "Traceback" not in done.stderr


KILLED_RUN = """
import sys
from absl import logging
from t2t_lite.problems import get_problem

if __name__ == "__main__":  # (the workers import this file again)
    logging.set_verbosity(logging.INFO)
    problem = get_problem("text2text")
    problem.examples_per_shard = 500
    options = dict(arg.split("=", 1) for arg in sys.argv[2:])
    problem.generate_data(sys.argv[1], num_processes="2", **options)
"""


@pytest.mark.slow
def test_a_killed_run_takes_its_workers_along_and_a_rerun_finishes(tmp_path):
    """SIGKILL to datagen while its workers write: they end too (instead of writing on beside
    the rerun), and the rerun writes what one uninterrupted process writes."""
    import signal

    import psutil

    words = [f"w{i}" for i in range(300)]
    options = {"vocab_type": "words", "vocab_size": "400"}
    for split, count in (("train", 60_000), ("dev", 10)):
        for side in ("src", "tgt"):
            lines = (" ".join(words[(i * k) % 300] for k in range(1, 13)) for i in range(count))
            (tmp_path / f"{split}.{side}").write_text("\n".join(lines) + "\n")
            options[f"{split}_{side}"] = str(tmp_path / f"{split}.{side}")
    (tmp_path / "run.py").write_text(KILLED_RUN)
    data_dir = tmp_path / "killed"
    run = subprocess.Popen(
        [sys.executable, str(tmp_path / "run.py"), str(data_dir),
         *(f"{key}={value}" for key, value in options.items())],
        stderr=subprocess.PIPE, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )  # fmt: skip
    for line in run.stderr:
        if "train: shard 0 done" in line:
            break
    workers = psutil.Process(run.pid).children()
    run.send_signal(signal.SIGKILL)
    run.wait()
    _, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive, "workers outlived their killed parent"
    assert not (data_dir / "metadata.json").exists()
    problem = get_problem("text2text")
    problem.examples_per_shard = 500
    problem.generate_data(str(data_dir), num_processes="2", **options)
    problem.generate_data(str(tmp_path / "one"), num_processes="1", **options)
    assert _files(data_dir) == _files(tmp_path / "one")
