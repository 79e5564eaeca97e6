"""A run knows its vocabulary: hparams.json records the vocabulary file's SHA-256, and a resume,
a decode (Run.restore: t2t-decode, t2t-export, t2t-serve) and an ensemble member refuse a
data_dir whose vocabulary was regenerated or replaced, naming both hashes and the file."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest
from decoding_helpers import model_hparams, tiny_model, write_tiny_run

from t2t_lite.run.run import Run
from t2t_lite.run.run_info import RunInfo
from t2t_lite.train import loop
from t2t_lite.train.config import ConflictingRunError


def _swap_vocabulary(data_dir) -> tuple[str, str]:
    """Reorders the words of data_dir's vocabulary (same size, other ids); returns the old and
    the new SHA-256."""
    path = data_dir / "vocab.words.txt"
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    words = path.read_text().split("\n")
    path.write_text("\n".join(words[:3] + words[3:][::-1]))
    return before, hashlib.sha256(path.read_bytes()).hexdigest()


def _record_hash(output_dir, data_dir) -> RunInfo:
    info = RunInfo.load(str(output_dir))
    digest = hashlib.sha256((data_dir / "vocab.words.txt").read_bytes()).hexdigest()
    info = dataclasses.replace(info, vocab_sha256=digest)
    info.save(str(output_dir))
    return info


def test_decode_refuses_a_vocabulary_swapped_under_the_run(tmp_path):
    output_dir, _, data_dir = write_tiny_run(tmp_path)
    _record_hash(output_dir, data_dir)
    Run.restore(str(output_dir))  # the vocabulary it trained with: restored
    before, after = _swap_vocabulary(data_dir)
    with pytest.raises(ValueError) as refused:
        Run.restore(str(output_dir))
    message = str(refused.value)
    assert str(data_dir / "vocab.words.txt") in message
    assert before[:16] in message and after[:16] in message
    # An ensemble member is checked against its own run's record too.
    with pytest.raises(ValueError, match=after[:16]):
        Run.restore(str(output_dir), checkpoint=f"{output_dir},{output_dir}")


def test_a_run_from_before_the_hash_is_not_checked(tmp_path):
    output_dir, _, data_dir = write_tiny_run(tmp_path)
    assert RunInfo.load(str(output_dir)).vocab_sha256 == ""
    _swap_vocabulary(data_dir)
    Run.restore(str(output_dir))  # nothing recorded, nothing refused


def test_a_resume_refuses_another_vocabulary(tmp_path):
    model = tiny_model(13)
    saved = RunInfo("algorithmic_copy", "D", "transformer_tiny", model_hparams(model), 13,
                    vocab_sha256="a" * 64)  # fmt: skip
    saved.save(str(tmp_path))
    loop._check_run_info(saved, str(tmp_path))  # the same: resumes
    swapped = dataclasses.replace(saved, vocab_sha256="b" * 64)
    with pytest.raises(ConflictingRunError, match=r"D: its vocabulary \(sha256 b{16}\) is not"):
        loop._check_run_info(swapped, str(tmp_path))
    # A run recorded before the hash existed resumes with any (its hparams.json stays as it is).
    dataclasses.replace(saved, vocab_sha256="").save(str(tmp_path))
    loop._check_run_info(swapped, str(tmp_path))


def test_training_another_problem_into_a_run_names_the_problems(tmp_path):
    model = tiny_model(13)
    saved = RunInfo("algorithmic_copy", "D", "transformer_tiny", model_hparams(model), 13,
                    vocab_sha256="a" * 64)  # fmt: skip
    saved.save(str(tmp_path))
    # Another problem's data: another vocabulary and data_dir too, but the problem is the cause.
    other = dataclasses.replace(saved, problem="algorithmic_reverse", data_dir="E",
                                vocab_sha256="b" * 64)  # fmt: skip
    with pytest.raises(ConflictingRunError) as refused:
        loop._check_run_info(other, str(tmp_path))
    assert str(refused.value) == (
        f"{tmp_path} holds a run trained on problem algorithmic_copy (its hparams.json); this run "
        "is problem algorithmic_reverse: train it into another --output_dir, or resume that run "
        "with --problem=algorithmic_copy"
    )
    assert RunInfo.load(str(tmp_path)) == saved  # hparams.json untouched


def test_a_resume_refuses_data_generated_with_other_options(tmp_path):
    model = tiny_model(13)
    options = {"train_size": 2000, "max_sequence_length": 6}
    saved = RunInfo("algorithmic_copy", "D", "transformer_tiny", model_hparams(model), 13,
                    problem_options=options)  # fmt: skip
    saved.save(str(tmp_path))
    assert RunInfo.load(str(tmp_path)).problem_options == options
    loop._check_run_info(saved, str(tmp_path))
    other = dataclasses.replace(saved, problem_options={**options, "train_size": 500})
    with pytest.raises(ConflictingRunError, match=r"problem_options.train_size: 2000 != 500"):
        loop._check_run_info(other, str(tmp_path))
    dataclasses.replace(saved, problem_options={}).save(str(tmp_path))  # recorded before
    loop._check_run_info(other, str(tmp_path))
