"""scripts/demo_student.py (`make demo-student`) with its commands recorded instead of run: the
steps in order as a user would type them, a rerun keeping the translations newer than their
models, and a clear stop without `make demo`'s teacher."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import demo_student  # noqa: E402


def _run_folder(folder: Path, encoder: int, decoder: int) -> None:
    (folder / "final").mkdir(parents=True)
    hparams = {"num_encoder_layers": encoder, "num_decoder_layers": decoder}
    (folder / "hparams.json").write_text(json.dumps({"hparams_set": "s", "hparams": hparams}))
    (folder / "final" / "choice.json").write_text("{}")
    past = os.path.getmtime(folder / "final" / "choice.json") - 100  # made before any decode
    os.utime(folder / "final" / "choice.json", (past, past))


@pytest.fixture
def work(tmp_path, monkeypatch):
    """A demo work_dir with a teacher and, as t2t-distill and t2t-train would leave them, the
    student's data and run; the commands are recorded, decodes write their output file."""
    _run_folder(tmp_path / "train", 3, 3)
    _run_folder(tmp_path / "student", 6, 1)
    (tmp_path / "student_data").mkdir()
    metadata = {"splits": {"train": {"examples": 120}}, "distilled": {"kept_reference": 2}}
    (tmp_path / "student_data" / "metadata.json").write_text(json.dumps(metadata))
    commands: list[list[str]] = []

    def run(command: list[str]) -> str:
        commands.append(command)
        for flag in command:
            if flag.startswith("--decode_to_file="):
                Path(flag.partition("=")[2]).write_text("x\n")
        if command[0] == "t2t-decode":
            return "decoded 9/9 sentences done, 12.5 sentences/s, 80.0 tokens/s"
        return "BLEU = 21.30 50.0/30.0" if command[0] == "t2t-bleu" else ""

    monkeypatch.setattr(demo_student, "run", run)
    monkeypatch.setattr(
        demo_student,
        "write_test_split",
        lambda data_dir, directory: (f"{directory}/test.en", f"{directory}/test.de", 9),
    )
    monkeypatch.setattr(sys, "argv", ["demo_student.py", f"--work_dir={tmp_path}"])
    return tmp_path, commands


def test_the_steps_in_order_then_a_rerun_keeps_the_translations(work, capsys):
    folder, commands = work
    demo_student.main()
    assert [c[0] for c in commands] == ["t2t-distill", "t2t-train"] + ["t2t-decode", "t2t-bleu"] * 3
    assert f"--output_data_dir={folder / 'student_data'}" in commands[0]
    assert "--inter_threads=2" in commands[0]  # the teacher searches two batches at once
    assert "--hparams_set=transformer_small_student" in commands[1]
    assert f"--init_from={folder / 'train'}" in commands[1]  # the student starts from the teacher
    assert commands[6][-2:] == ["--quantize=int8", "--shortlist=100,50"]
    out = capsys.readouterr().out
    assert "student       s, 6 + 1 layers: test BLEU 21.30, 12.5 sentences/s" in out
    assert "120 pairs, 2 empty translations kept their references" in out
    commands.clear()
    demo_student.main()
    assert [c[0] for c in commands] == ["t2t-distill", "t2t-train"] + ["t2t-bleu"] * 3
    assert "12.5 sentences/s" in capsys.readouterr().out  # the speeds recorded the first time
    later = os.path.getmtime(folder / "test.student.de") + 100  # the student trained on
    os.utime(folder / "student" / "final" / "choice.json", (later, later))
    commands.clear()
    demo_student.main()
    assert [c[0] for c in commands].count("t2t-decode") == 2  # the student's two decodes


def test_without_the_demos_teacher_it_stops(work):
    folder, commands = work
    (folder / "train" / "final" / "choice.json").unlink()
    with pytest.raises(SystemExit, match="run `make demo` first"):
        demo_student.main()
    assert commands == []
