"""t2t-datagen as a user runs it: flags forwarded to the problem, clear errors for bad flags."""

import os

from command_helpers import command, last_json


def test_datagen_writes_and_reports(tmp_path):
    data_dir = str(tmp_path / "copy")
    result = command(
        "t2t_datagen",
        "--problem=algorithmic_copy",
        f"--data_dir={data_dir}",
        "--train_size=300",  # a flag made from the problem's default_options
        "--problem_options=dev_size=20,test_size=10",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert last_json(result.stdout) == {
        "train": 300,
        "dev": 20,
        "test": 10,
    }
    assert "train: shard 0 done, 300 examples written" in result.stderr
    assert sorted(n for n in os.listdir(data_dir) if n.endswith(".tfrecord")) == [
        "dev-00000.tfrecord",
        "test-00000.tfrecord",
        "train-00000.tfrecord",
    ]


def test_datagen_rejects_flags_the_problem_does_not_take(tmp_path):
    result = command(
        "t2t_datagen", "--problem=algorithmic_copy", f"--data_dir={tmp_path}", "--train_src=a.txt"
    )
    assert result.returncode != 0
    assert "does not take option(s) ['train_src']" in result.stderr
    assert not os.listdir(tmp_path)
