"""t2t-decode end to end on a tiny checkpoint: N lines in, N lines out, in order, scores."""

from __future__ import annotations

import logging
import os
import shutil

import numpy as np
import pytest
from command_helpers import command
from decoding_helpers import add_truncated_newer_checkpoint, decode_flags, write_tiny_run

from t2t_lite.data import load_tokenizer
from t2t_lite.decode import transformer_step
from t2t_lite.decode.runner import read_input, run_decode
from t2t_lite.hparams import SearchSettings
from t2t_lite.run.run_flags import RunFlags

WORDS = [str(i) for i in range(10)]  # algorithmic_copy's vocabulary: ids 3..12
MAX_POSITIONS = 8


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """An output_dir with hparams.json and one checkpoint of a random tiny model."""
    root = tmp_path_factory.mktemp("run")
    output_dir, model, data_dir = write_tiny_run(root, MAX_POSITIONS, seed=21)
    return output_dir, model, load_tokenizer(str(data_dir))


def reference(model, tokenizer, line: str, beam_size: int, alpha: float, extra: int):
    """One sentence alone, no sorting or batching: (text, score)."""
    ids = tokenizer.encode_py(line)[: MAX_POSITIONS - 1] + [1]
    found = transformer_step.translate_ids(
        model, [ids], beam_size=beam_size, alpha=alpha, extra_length=extra
    )
    return tokenizer.decode_py(found.ids[0, 0].numpy().tolist()), float(found.scores[0, 0])


LINES = ["1 2 3", "", "   \t", "4 5 6 7 8 9 1 2 3 4 5", "7", "9 9 8 7 6", "0 1"]


def test_n_lines_in_n_lines_out_in_input_order(run_dir, tmp_path, caplog):
    output_dir, model, tokenizer = run_dir
    source = tmp_path / "in.txt"
    # A byte-order mark and CRLF endings, as files from Windows editors have.
    source.write_bytes(("\ufeff" + "\r\n".join(LINES) + "\r\n").encode("utf-8"))
    target = tmp_path / "out.txt"
    config = decode_flags(
        output_dir=str(output_dir),
        decode_from_file=str(source),
        decode_to_file=str(target),
        beam_size=3,
        alpha=0.6,
        batch_tokens=8,  # several batches, so sorting and reordering matter
    )
    with caplog.at_level(logging.WARNING):
        assert run_decode(*config) == len(LINES)
    warnings = [r.getMessage() for r in caplog.records]
    assert any("in.txt:4" in m and "truncated" in m for m in warnings), warnings
    out = target.read_text(encoding="utf-8").split("\n")
    assert out[-1] == "" and len(out) - 1 == len(LINES)
    for line, got in zip(LINES, out, strict=False):
        expected = reference(model, tokenizer, line, 3, 0.6, 5)[0] if line.strip() else ""
        assert got == expected
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]


def test_nbest_lines_and_scores(run_dir, tmp_path):
    output_dir, model, tokenizer = run_dir
    source = tmp_path / "in.txt"
    source.write_text("3 4\n\n5 6 7\n")
    target = tmp_path / "nbest.txt"
    config = decode_flags(
        output_dir=str(output_dir),
        decode_from_file=str(source),
        decode_to_file=str(target),
        beam_size=3,
        alpha=0.6,
        nbest=2,
    )
    assert run_decode(*config) == 6
    rows = [line.split(" ||| ") for line in target.read_text().splitlines()]
    assert [r[0] for r in rows] == ["0", "0", "1", "1", "2", "2"]
    assert rows[2][1:] == ["", "0.000000"]
    text, score = reference(model, tokenizer, "5 6 7", 3, 0.6, 5)
    assert rows[4][1] == text and float(rows[4][2]) == pytest.approx(score, abs=1e-5)
    assert float(rows[4][2]) >= float(rows[5][2])


def test_score_file_gives_log_probs(run_dir, tmp_path):
    output_dir, model, tokenizer = run_dir
    sources, targets = ["1 2 3", "", "4 5", "6"], ["3 2 1", "1", "", "6 6 6"]
    (tmp_path / "src").write_text("\n".join(sources) + "\n")
    (tmp_path / "tgt").write_text("\n".join(targets) + "\n")
    config = decode_flags(
        output_dir=str(output_dir),
        decode_from_file=str(tmp_path / "src"),
        score_file=str(tmp_path / "tgt"),
        decode_to_file=str(tmp_path / "scores"),
    )
    assert run_decode(*config) == 4
    got = (tmp_path / "scores").read_text().split("\n")
    assert got[1] == got[2] == "" and got[4] == ""
    for row in (0, 3):
        inputs = [tokenizer.encode_py(sources[row]) + [1]]
        expected = [tokenizer.encode_py(targets[row]) + [1]]
        # NumPy over the full forward pass, independent of score_ids.
        logits = model({"inputs": np.array(inputs), "targets": np.array(expected)}).numpy()[0]
        log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        value = log_probs[np.arange(len(expected[0])), expected[0]].sum()
        assert float(got[row]) == pytest.approx(value, abs=1e-4)
    (tmp_path / "tgt").write_text("1\n2\n")
    with pytest.raises(ValueError, match="has 2 lines but the input"):
        run_decode(*config)


def test_read_input_names_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"ok\n\xff\xfe\n")
    with pytest.raises(ValueError, match="bad.txt:2"):
        read_input(str(path))


def test_cli_reads_stdin_writes_stdout(run_dir):
    output_dir, model, tokenizer = run_dir
    lines = ["2 3 4", "", "8"]
    done = command(
        "t2t_decode", f"--output_dir={output_dir}", "--beam_size=2", "--alpha=0.0",
        stdin="\n".join(lines) + "\n", timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout.split("\n")
    assert len(out) == 4 and out[1] == "" and out[3] == ""
    assert out[2] == reference(model, tokenizer, "8", 2, 0.0, 5)[0]
    assert "sentences/s" in done.stderr


def test_search_settings_fall_back_to_problem_defaults():
    defaults = SearchSettings(beam_size=1, alpha=0.0, extra_length=5)
    settings = defaults.override(beam_size=3, alpha=None, extra_length=None, nbest=2)
    assert settings == SearchSettings(beam_size=3, alpha=0.0, extra_length=5, nbest=2)
    settings.check(max_positions=16)
    with pytest.raises(ValueError, match="--nbest=2 must be in"):
        defaults.override(nbest=2).check()
    with pytest.raises(ValueError, match="unknown search settings \\['beam'\\]"):
        defaults.override(beam=2)
    with pytest.raises(ValueError, match="--max_input_length must be in \\[1, 16\\]"):
        defaults.override(max_input_length=17).check(max_positions=16)
    # What a traced search depends on: all but alpha, an input of the search.
    tuned = settings.override(alpha=1.2)
    assert tuned.without_alpha() == settings.without_alpha() == settings.override(alpha=0.0)
    assert tuned.without_alpha() != tuned.override(beam_size=4).without_alpha()
    assert tuned.alpha == 1.2  # unchanged


def test_problem_other_than_the_runs_is_refused(run_dir):
    output_dir, _, _ = run_dir
    config = decode_flags(output_dir=str(output_dir), problem="algorithmic_reverse")
    with pytest.raises(ValueError, match="--problem=algorithmic_reverse, but the run in .* was "):
        run_decode(*config)


# --- faults (issue 17) ------------------------------------------------------------------------


def test_unknown_pieces_are_counted_and_reported(run_dir, tmp_path, caplog):
    output_dir, _, _ = run_dir
    source = tmp_path / "in.txt"
    source.write_text("1 2\n1 x 2\n\ny\n3\n")
    config = decode_flags(
        output_dir=str(output_dir),
        decode_from_file=str(source),
        decode_to_file=str(tmp_path / "out.txt"),
        beam_size=1,
    )
    with caplog.at_level(logging.WARNING):
        run_decode(*config)
    assert (
        f"2 inputs had unknown pieces (not in the vocabulary, read as <unk>): {source}:2, "
        f"{source}:4"
    ) in caplog.text


def test_the_input_is_checked_before_the_model_is_loaded(tmp_path, monkeypatch):
    source = tmp_path / "bad.txt"
    source.write_bytes(b"1 2\n\xff\n")

    def no_model(self):
        raise AssertionError("the model was loaded before the input was checked")

    monkeypatch.setattr(RunFlags, "restore", no_model)
    with pytest.raises(ValueError, match="bad.txt:2: invalid UTF-8"):
        run_decode(*decode_flags(output_dir=str(tmp_path), decode_from_file=str(source)))
    (tmp_path / "ok.txt").write_text("1\n")
    (tmp_path / "scores.txt").write_text("1\n2\n")
    flags = {"output_dir": str(tmp_path), "decode_from_file": str(tmp_path / "ok.txt")}
    with pytest.raises(FileNotFoundError, match="--score_file"):
        run_decode(*decode_flags(**flags, score_file=str(tmp_path / "sc")))
    with pytest.raises(ValueError, match="has 2 lines but the input"):
        run_decode(*decode_flags(**flags, score_file=str(tmp_path / "scores.txt")))


def _decode_cli(output_dir, *flags):
    return command("t2t_decode", f"--output_dir={output_dir}", *flags, stdin="8\n", timeout=120)


def test_cli_falls_back_from_a_damaged_newest_checkpoint(run_dir, tmp_path):
    """t2t-decode skips a newer checkpoint whose data is truncated, with a warning naming the
    file, and refuses with one line naming each file when nothing is readable."""
    output_dir, model, tokenizer = run_dir
    out = tmp_path / "out"
    shutil.copytree(output_dir, out)
    folder = out / "checkpoints"
    bad = add_truncated_newer_checkpoint(folder)
    done = _decode_cli(out, "--beam_size=2", "--alpha=0.0")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == reference(model, tokenizer, "8", 2, 0.0, 5)[0] + "\n"
    assert f"checkpoint {folder}/ckpt-2 is unreadable: {bad} is damaged or truncated" in done.stderr
    assert f"restored {folder}/ckpt-1 " in done.stderr
    os.remove(folder / "ckpt-1.index")
    done = _decode_cli(out)
    assert done.returncode != 0
    assert (
        f"no readable checkpoint in {out}/final or {out}/averaged or {folder}: {bad} is dam"
        in done.stderr
    )
    assert f"{folder}/ckpt-1.index is missing" in done.stderr and bad in done.stderr
