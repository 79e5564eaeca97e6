"""What a sweep trains: the rows of a definition times the seeds, one run (an output_dir of
t2t-train) each.

A sweep folder holds:
  sweep.json          the definition and the settings of the last invocation (--report_only
                      rebuilds the report from it)
  runs/<row>-seed<k>/ each run's output_dir, with the sweep's records of it (records.py)
  report.md, report.json, <group>.png
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from t2t_lite.hparams import get_hparams
from t2t_lite.hparams.sweeps import SWEEPS, SweepDefinition, SweepRow
from t2t_lite.runtime import atomic_io

PLAN_FILE = "sweep.json"
RUNS_DIR = "runs"
# t2t-train flags a sweep passes on, with the sweep's defaults: runs of minutes save and
# evaluate more often than t2t-train's every 1000 steps, and keep fewer checkpoints (dozens of
# runs share the disk).
TRAIN_FLAG_DEFAULTS = {
    "eval_every": 500,
    "save_every": 250,
    "eval_batches": 0,
    "log_every": 100,
    "keep_checkpoints": 2,
}


@dataclasses.dataclass(frozen=True)
class SweepConfig:
    """How to run a sweep (t2t-sweep's flags); the definition says what to train.

    `hparams` are overrides common to every row; `train_minutes` / `train_steps` (0: the set's)
    the budget of each run; `train_flags` further t2t-train flags (TRAIN_FLAG_DEFAULTS);
    `eval_examples` the dev examples each run decodes for its BLEU (or F1, accuracy).
    """

    sweep_dir: str
    problem: str
    data_dir: str
    seeds: tuple[int, ...] = (1,)
    hparams: str = ""
    train_minutes: float = 0.0
    train_steps: int = 0
    train_flags: dict[str, Any] = dataclasses.field(default_factory=dict)
    eval_examples: int = 300
    usr_dir: str = ""

    def __post_init__(self) -> None:
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"--seeds must be distinct integers, got {list(self.seeds)}")
        if self.train_minutes < 0 or self.train_steps < 0:
            raise ValueError("--train_minutes and --train_steps must not be negative")
        if not (self.train_minutes or self.train_steps):
            raise ValueError("give each run a budget: --train_minutes or --train_steps")
        if self.eval_examples < 1:
            raise ValueError(f"--eval_examples must be positive, got {self.eval_examples}")
        unknown = sorted(set(self.train_flags) - set(TRAIN_FLAG_DEFAULTS))
        if unknown:
            raise ValueError(
                f"unknown t2t-train flags {unknown}; known: {list(TRAIN_FLAG_DEFAULTS)}"
            )

    def to_dict(self) -> dict[str, Any]:
        values = dataclasses.asdict(self)
        values["seeds"] = list(self.seeds)
        return values

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> SweepConfig:
        return cls(**{**values, "seeds": tuple(values["seeds"])})


@dataclasses.dataclass(frozen=True)
class PlannedRun:
    """One row trained with one seed: `overrides` are the row's and the common ones merged."""

    name: str
    row: SweepRow
    seed: int
    overrides: str
    output_dir: str

    def identity(self, config: SweepConfig) -> dict[str, Any]:
        """What makes a finished run this run: a recorded run that differs is not reused."""
        return {
            "problem": config.problem,
            "data_dir": os.path.abspath(config.data_dir),
            "hparams_set": self.row.hparams_set,
            "overrides": self.overrides,
            "seed": self.seed,
            "train_minutes": config.train_minutes,
            "train_steps": config.train_steps,
        }


def parse_seeds(values: list[str]) -> tuple[int, ...]:
    """--seeds=1,2 (absl's list) --> (1, 2)."""
    try:
        return tuple(int(value) for value in values)
    except ValueError:
        raise ValueError(f"--seeds must be integers, got {','.join(values)}") from None


def merge_overrides(row: SweepRow, common: str) -> str:
    """The row's overrides followed by the common ones; a key set by both is an error."""
    keys = {item.partition("=")[0].strip() for item in row.overrides.split(",") if item.strip()}
    items = [item.strip() for item in common.split(",") if item.strip()]
    both = sorted(keys & {item.partition("=")[0].strip() for item in items})
    if both:
        raise ValueError(f"--hparams sets {', '.join(both)}, which row {row.name!r} sets too")
    return ",".join(filter(None, [row.overrides, *items]))


def plan_runs(definition: SweepDefinition, config: SweepConfig) -> list[PlannedRun]:
    """Every row of `definition` with every seed, the first seed's rows first (a sweep cut
    short still compares all rows). Each row's hparams are resolved here, so a bad override
    fails before anything trains."""
    runs = []
    for seed in config.seeds:
        for row in definition.rows:
            overrides = merge_overrides(row, config.hparams)
            try:
                get_hparams(row.hparams_set, overrides)
            except (KeyError, ValueError) as e:
                message = e.args[0] if isinstance(e, KeyError) else e
                raise ValueError(f"sweep row {row.name!r}: {message}") from None
            name = f"{row.name}-seed{seed}"
            output_dir = os.path.join(config.sweep_dir, RUNS_DIR, name)
            runs.append(PlannedRun(name, row, seed, overrides, output_dir))
    return runs


def definition_from_flags(
    sweep: str, sets: list[str], overrides: list[str], hparams_set: str
) -> SweepDefinition:
    """A shipped definition or JSON file (`sweep`), or rows from hparams sets and override
    sets. Override sets apply to `hparams_set`, which joins the rows as their base (unless
    `sets` names it); otherwise the first row is the base."""
    if sweep and (sets or overrides):
        raise ValueError("--sweep names a whole definition; leave out --sets and --overrides")
    if sweep:
        if sweep.endswith(".json") or os.path.sep in sweep:
            return SweepDefinition.load(sweep)
        return SWEEPS.get(sweep)
    override_sets = [o.strip() for value in overrides for o in value.split(";") if o.strip()]
    if not sets and not override_sets:
        raise ValueError("nothing to sweep: give --sweep, --sets or --overrides")
    rows = [SweepRow(name=name, hparams_set=name, group="sets", change=name) for name in sets]
    if override_sets and hparams_set not in sets:
        base_row = SweepRow(
            name=hparams_set, hparams_set=hparams_set, group="overrides", change="base"
        )
        rows.insert(0, base_row)
    for items in override_sets:
        name = "+".join(item.strip().replace(" ", "") for item in items.split(",") if item)
        rows.append(
            SweepRow(
                name=name,
                hparams_set=hparams_set,
                overrides=items,
                group="overrides",
                change=items.replace(",", ", "),
            )
        )
    if override_sets:
        return SweepDefinition(
            name=f"overrides of {hparams_set}", rows=tuple(rows), base=hparams_set
        )
    return SweepDefinition(name="hparams sets", rows=tuple(rows), base=rows[0].name)


def save_plan(definition: SweepDefinition, config: SweepConfig) -> str:
    """Writes sweep_dir/sweep.json atomically; returns its path."""
    path = os.path.join(config.sweep_dir, PLAN_FILE)
    atomic_io.write_json(path, {"definition": definition.to_dict(), "config": config.to_dict()})
    return path


def load_plan(sweep_dir: str) -> tuple[SweepDefinition, SweepConfig]:
    """The definition and settings sweep_dir/sweep.json records."""
    path = os.path.join(sweep_dir, PLAN_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} does not exist: no sweep has run in {sweep_dir}")
    with open(path, encoding="utf-8") as f:
        values = json.load(f)
    config = SweepConfig.from_dict({**values["config"], "sweep_dir": sweep_dir})
    return SweepDefinition.from_dict(values["definition"]), config


_EVAL_DEFAULT = SweepConfig.__dataclass_fields__["eval_examples"].default


def command_line(definition: SweepDefinition, config: SweepConfig) -> str:
    """The t2t-sweep command that trains `definition` with `config`, its folders written as
    DATA_DIR and SWEEP_DIR (a report names no machine's paths); a definition other than a
    shipped one is named DEFINITION.json."""
    shipped = definition.name in SWEEPS and SWEEPS.get(definition.name) == definition
    flags = {
        "problem": config.problem,
        "data_dir": "DATA_DIR",
        "sweep_dir": "SWEEP_DIR",
        "sweep": definition.name if shipped else "DEFINITION.json",
        "hparams": config.hparams,
        "train_minutes": f"{config.train_minutes:g}" if config.train_minutes else "",
        "train_steps": config.train_steps or "",
        "seeds": ",".join(map(str, config.seeds)),
        "eval_examples": config.eval_examples if config.eval_examples != _EVAL_DEFAULT else "",
        "usr_dir": config.usr_dir,
    }
    for name, value in sorted(config.train_flags.items()):  # one order, from flags or a saved plan
        flags[name] = value if value != TRAIN_FLAG_DEFAULTS.get(name) else ""
    return "t2t-sweep " + " ".join(f"--{name}={value}" for name, value in flags.items() if value)
