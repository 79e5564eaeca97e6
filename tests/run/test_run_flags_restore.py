"""`RunFlags`: the run flags' values, their search settings, and the checks made before a run is
restored (the restores themselves: every test that decodes a run, tests/decode/)."""

from __future__ import annotations

import pytest

from t2t_lite.run.run_flags import RunFlags


def test_search_flags_become_search_settings_none_where_unset():
    flags = RunFlags(
        "runs/a", beam_size=3, sampling="temperature:0.8,top_k:40", shortlist="100,50",
        min_length=2, patience=1.5,
    )  # fmt: skip
    assert flags.search_overrides() == {
        "beam_size": 3,
        "alpha": None,
        "patience": 1.5,
        "extra_length": None,
        "constrained": None,
        "nbest": None,
        "no_repeat_ngram_size": None,
        "repetition_penalty": None,
        "min_length": 2,
        "disable_unk": None,
        "sampling": True,
        "temperature": 0.8,
        "top_k": 40,
        "shortlist": (100, 50),
    }
    with pytest.raises(ValueError, match="--sampling: 'warm:1' is not name:value"):
        RunFlags("runs/a", sampling="warm:1").search_overrides()


def test_given_flags_are_named_as_on_the_command_line():
    assert RunFlags().given() == []
    flags = RunFlags("runs/a", checkpoint="c", quantize="int8", constrained=False)
    assert flags.given() == ["--checkpoint", "--constrained", "--output_dir", "--quantize"]


def test_another_run_folder_keeps_the_flags_but_not_the_checkpoint():
    flags = RunFlags("runs/a", "runs/a/ckpt-9,runs/b", "data", beam_size=2, quantize="int8",
                     ensemble_weights=[1, 2])  # fmt: skip
    other = flags.for_run("runs/adapter")
    assert other == RunFlags("runs/adapter", None, "data", beam_size=2, quantize="int8")


def test_no_output_dir_is_refused_before_anything_is_read():
    with pytest.raises(ValueError, match="--output_dir: the training run to restore is missing"):
        RunFlags(beam_size=2).restore()
