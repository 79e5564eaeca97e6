"""Sweep plans: definitions from flags and files, the runs they make, and their checks."""

import json
import os

import pytest

from t2t_lite.hparams.sweeps import SWEEPS, TABLE3_SMALL, SweepDefinition, SweepRow
from t2t_lite.sweep.plan import (
    SweepConfig,
    command_line,
    definition_from_flags,
    load_plan,
    merge_overrides,
    parse_seeds,
    plan_runs,
    save_plan,
)


def config(tmp_path, **values) -> SweepConfig:
    defaults = dict(sweep_dir=str(tmp_path), problem="algorithmic_reverse", data_dir="d")
    return SweepConfig(**{**defaults, "train_steps": 10, **values})


def test_override_sets_join_the_set_they_change_as_base():
    definition = definition_from_flags(
        "", [], ["num_heads=1,d_k=512;num_heads=16", "dropout=0.0"], "transformer_small"
    )
    names = [row.name for row in definition.rows]
    assert names == ["transformer_small", "num_heads=1+d_k=512", "num_heads=16", "dropout=0.0"]
    assert definition.base == "transformer_small"
    assert definition.row("num_heads=1+d_k=512").overrides == "num_heads=1,d_k=512"
    assert {row.hparams_set for row in definition.rows} == {"transformer_small"}


def test_sets_and_shipped_and_file_definitions(tmp_path):
    sets = definition_from_flags("", ["transformer_tiny", "transformer_small"], [], "unused")
    assert [row.hparams_set for row in sets.rows] == ["transformer_tiny", "transformer_small"]
    assert sets.base == "transformer_tiny"
    assert definition_from_flags("table3_small", [], [], "") is SWEEPS.get("table3_small")
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(TABLE3_SMALL.to_dict()))
    assert definition_from_flags(str(path), [], [], "") == TABLE3_SMALL
    with pytest.raises(ValueError, match="leave out --sets"):
        definition_from_flags("table3_small", ["transformer_tiny"], [], "")
    with pytest.raises(ValueError, match="nothing to sweep"):
        definition_from_flags("", [], [" ; "], "transformer_small")
    with pytest.raises(KeyError, match="did you mean 'table3_small'"):
        definition_from_flags("table3_smal", [], [], "")


def test_runs_are_rows_times_seeds_first_seed_first(tmp_path):
    definition = definition_from_flags("", [], ["num_heads=1"], "transformer_tiny")
    runs = plan_runs(definition, config(tmp_path, seeds=(3, 1), hparams="d_ff=128"))
    names = [run.name for run in runs]
    assert names == ["transformer_tiny-seed3", "num_heads=1-seed3", "transformer_tiny-seed1",
                     "num_heads=1-seed1"]  # fmt: skip
    assert runs[1].overrides == "num_heads=1,d_ff=128"
    assert runs[1].output_dir == os.path.join(str(tmp_path), "runs", "num_heads=1-seed3")
    assert runs[1].identity(config(tmp_path))["data_dir"] == os.path.abspath("d")


def test_bad_rows_and_settings_fail_before_training(tmp_path):
    bad = definition_from_flags("", [], ["d_modle=128"], "transformer_tiny")
    with pytest.raises(ValueError, match="row 'd_modle=128': unknown hparam 'd_modle'"):
        plan_runs(bad, config(tmp_path))
    row = SweepRow(name="r", hparams_set="transformer_tiny", overrides="num_heads=2")
    with pytest.raises(ValueError, match="--hparams sets num_heads, which row 'r' sets too"):
        merge_overrides(row, "d_ff=64,num_heads=4")
    with pytest.raises(ValueError, match="a budget"):
        config(tmp_path, train_steps=0)
    with pytest.raises(ValueError, match="distinct"):
        config(tmp_path, seeds=(1, 1))
    with pytest.raises(ValueError, match="--seeds must be integers, got 1,x"):
        parse_seeds(["1", "x"])
    with pytest.raises(ValueError, match="names a folder"):
        SweepRow(name="a/b", hparams_set="transformer_tiny")
    with pytest.raises(ValueError, match="base row 'z'"):
        SweepDefinition(name="s", rows=(row,), base="z")


def test_plan_file_round_trip(tmp_path):
    settings = config(tmp_path, seeds=(1, 2), train_flags={"eval_every": 7})
    save_plan(TABLE3_SMALL, settings)
    assert load_plan(str(tmp_path)) == (TABLE3_SMALL, settings)
    with pytest.raises(FileNotFoundError, match="no sweep has run"):
        load_plan(str(tmp_path / "elsewhere"))


def test_command_line_names_what_differs_from_the_defaults(tmp_path):
    table3 = config(tmp_path, data_dir="/data", seeds=(1, 2), train_steps=1000,
                    hparams="precision=mixed_bfloat16")  # fmt: skip
    assert command_line(TABLE3_SMALL, table3) == (
        "t2t-sweep --problem=algorithmic_reverse --data_dir=DATA_DIR --sweep_dir=SWEEP_DIR "
        "--sweep=table3_small --hparams=precision=mixed_bfloat16 --train_steps=1000 --seeds=1,2"
    )
    own = definition_from_flags("", ["transformer_tiny"], [], "unused")
    other = config(tmp_path, train_steps=0, train_minutes=2.5, eval_examples=50,
                   train_flags={"save_every": 250, "log_every": 7})  # fmt: skip
    assert command_line(own, other) == (
        "t2t-sweep --problem=algorithmic_reverse --data_dir=DATA_DIR --sweep_dir=SWEEP_DIR "
        "--sweep=DEFINITION.json --train_minutes=2.5 --seeds=1 --eval_examples=50 --log_every=7"
    )
