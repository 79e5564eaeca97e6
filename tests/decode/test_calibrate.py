"""t2t-calibrate as a user runs it, on a tiny SentencePiece text2text run: the fit lands in the
run directory and t2t-decode's confidence follows it."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from command_helpers import command
from serve_helpers import sentences, text_run

from t2t_lite.decode.confidence import CALIBRATION_FILE, Calibration
from t2t_lite.decode.translator import Translator


def test_calibrate_fits_on_dev_and_decode_reports_that_confidence(tmp_path):
    output_dir = text_run(tmp_path)
    done = command("t2t-calibrate", f"--output_dir={output_dir}", "--lines=10", "--beam_size=2")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "fitted on 10 dev sentences" in done.stdout
    fitted = Calibration.load(output_dir)
    assert fitted.sentences == 10 and list(fitted.x) == sorted(fitted.x)
    assert all(0.0 <= y <= 1.0 for y in fitted.y)
    (tmp_path / "in.txt").write_text("\n".join(sentences(4, seed=99)) + "\n")
    # t2t-decode's Translator reads the fit (t2t-decode's jsonl output is tested elsewhere).
    translator = Translator.from_run(output_dir, beam_size=2)
    for hyps in translator.hypotheses(sentences(4, seed=99), details=True):
        mean = float(np.mean(np.log(hyps[0].details.token_probs)))
        assert hyps[0].details.confidence == pytest.approx(fitted([mean]), abs=1e-6)
    # Held-out lines: the correlation is reported, nothing is refitted.
    (tmp_path / "ref.txt").write_text("\n".join(sentences(4, seed=98)) + "\n")
    before = (tmp_path / "run" / CALIBRATION_FILE).read_text()
    done = command(
        "t2t-calibrate",
        f"--output_dir={output_dir}",
        f"--decode_from_file={tmp_path / 'in.txt'}",
        f"--reference={tmp_path / 'ref.txt'}",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Spearman correlation with sentence chrF over 4 lines" in done.stdout
    assert (tmp_path / "run" / CALIBRATION_FILE).read_text() == before
    # Without a calibration, the geometric mean token probability.
    os.remove(tmp_path / "run" / CALIBRATION_FILE)
    assert math.isclose(Calibration.load(output_dir)([-1.0]), math.exp(-1.0))
    done = command("t2t-calibrate", f"--output_dir={output_dir}", f"--reference={tmp_path}")
    assert done.returncode == 2  # a usage error
    assert done.stderr.strip().splitlines()[-1] == (
        "t2t-calibrate: error: --decode_from_file and --reference go together"
    )
