"""The sweep's report, rebuilt from the runs' records: report.json (every number), report.md (a
table with mean ± standard deviation over seeds beside the paper's columns, and a section per
row group) and one PNG per group, all written atomically.

Nothing here trains or evaluates: a run counts once its done record exists (records.py), so
`t2t-sweep --report_only` rebuilds the same report from the same folder.
"""

from __future__ import annotations

import dataclasses
import os
import re
import statistics
from typing import Any

from t2t_lite.hparams.sweeps import SweepDefinition
from t2t_lite.runtime import atomic_io
from t2t_lite.runtime.cpu import machine_kind
from t2t_lite.sweep import compare, plots, records
from t2t_lite.sweep.plan import SweepConfig, command_line, plan_runs

REPORT_MD, REPORT_JSON = "report.md", "report.json"
METRIC_LABELS = {"bleu": "BLEU", "parse_f1": "F1", "accuracy": "accuracy %"}
_SUMMARIZED = ("dev_loss", "dev_perplexity", "dev_accuracy", "step", "chrf", "ter")
# Scores beside the metric, as the runs record them (translation: evaluation.TRANSLATION_SCORES).
SIDE_SCORES = {"chrf": "chrF", "ter": "TER"}


def check_plotting() -> None:
    """Raises MissingExtraError now when the pictures could not be drawn at the end."""
    plots.pyplot()


def summarize(values: list[float]) -> dict[str, Any]:
    """Mean and sample standard deviation (None for fewer than 2 values) over seeds."""
    return {
        "mean": statistics.fmean(values) if values else None,
        "std": statistics.stdev(values) if len(values) > 1 else None,
        "n": len(values),
        "values": values,
    }


def _row_report(row, planned, evaluations: dict[int, dict | None]) -> dict[str, Any]:
    finished = [e for e in evaluations.values() if e]
    metric = finished[0]["metric"] if finished else None
    summaries = {key: summarize([e[key] for e in finished if e.get(key) is not None])
                 for key in _SUMMARIZED}  # fmt: skip
    return {
        "name": row.name,
        "group": row.group,
        "change": row.change,
        "hparams_set": row.hparams_set,
        "overrides": planned.overrides,
        "params": finished[0]["params"] if finished else None,
        "seeds": {str(seed): e for seed, e in evaluations.items()},
        **summaries,
        "metric": summarize([e[metric] for e in finished]) if metric else summarize([]),
        "paper": dataclasses.asdict(row.paper) if row.paper else None,
    }


def figure_name(group: str) -> str:
    return (re.sub(r"[^A-Za-z0-9_.-]+", "", group) or "rows") + ".png"


def build_report(definition: SweepDefinition, config: SweepConfig) -> dict[str, Any]:
    """Everything report.json holds: the settings, a row per definition row (each seed's
    evaluation, summaries over seeds, the paper's columns, the comparison with the base), the
    groups with their sentences, and the runs not finished."""
    runs = plan_runs(definition, config)
    by_row: dict[str, dict[int, dict | None]] = {row.name: {} for row in definition.rows}
    unfinished, machines = [], {}
    for run in runs:
        done = records.read_done(run)
        evaluation = None
        if done:
            kind = machine_kind(done.get("machine"))
            evaluation = {**done["evaluation"], "minutes": done["minutes_spent"], "machine": kind}
            machines.setdefault(kind, []).append(run.name)
        else:
            unfinished.append(run.name)
        by_row[run.row.name][run.seed] = evaluation
    planned = {run.row.name: run for run in runs}
    rows = [_row_report(row, planned[row.name], by_row[row.name]) for row in definition.rows]
    base = next(row for row in rows if row["name"] == definition.base)
    for row in rows:
        row["comparison"] = None if row is base else compare.compare_row(row, base)
    finished = [e for row in rows for e in row["seeds"].values() if e]
    metric = finished[0]["metric"] if finished else None
    facts = {"train_examples": finished[0].get("train_examples") if finished else None}
    return {
        "sweep": definition.name,
        "description": definition.description,
        # The folders are the machine's: the report names neither (see command_line).
        "config": {k: v for k, v in config.to_dict().items() if k not in ("sweep_dir", "data_dir")},
        "command": command_line(definition, config),
        "metric": metric,
        "train_examples": facts["train_examples"],
        "base": definition.base,
        "rows": rows,
        "groups": _groups(rows, base, facts),
        "unfinished": unfinished,
        "machines": machines,  # the runs finished on each kind of CPU (runtime/cpu.py)
    }


def _groups(rows: list[dict], base: dict, facts: dict) -> list[dict[str, Any]]:
    names = list(dict.fromkeys(row["group"] for row in rows if row is not base))
    groups = []
    for name in names:
        members = [row for row in rows if row["group"] == name and row is not base]
        notes = [
            compare.row_sentence(row, base, {**facts, "steps": row["step"]["mean"]})
            for row in members
            if row["comparison"] and row["comparison"]["reproduced"] is False
        ]
        with_paper = any(row["paper"] for row in members)
        groups.append({
            "group": name,
            "rows": [base["name"]] + [row["name"] for row in members],
            "sentence": compare.group_sentence(name, members) if with_paper else None,
            "notes": notes,
            "figure": figure_name(name),
        })  # fmt: skip
    return groups


def _side_scores(report: dict[str, Any]) -> list[str]:
    """The side scores (`SIDE_SCORES`) that some finished run recorded."""
    return [key for key in SIDE_SCORES if any(row[key]["n"] for row in report["rows"])]


def _cell(summary: dict[str, Any], digits: int = 2) -> str:
    if not summary["n"]:
        return "n/a"
    text = f"{summary['mean']:.{digits}f}"
    return text + (f" ± {summary['std']:.{digits}f}" if summary["std"] is not None else "")


def _table(report: dict[str, Any]) -> list[str]:
    label = METRIC_LABELS.get(report["metric"], report["metric"] or "metric")
    paper = any(row["paper"] for row in report["rows"])
    side = _side_scores(report)
    head = ["row", "change", "params", "seeds", "steps", "dev PPL", label]
    head += [SIDE_SCORES[key] for key in side]
    if paper:
        head += ["paper PPL", "paper BLEU", "paper params (M)", "PPL vs base: paper / here"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in report["rows"]:
        params = f"{row['params'] / 1e6:.2f}M" if row["params"] else "n/a"
        steps = f"{row['step']['mean']:,.0f}" if row["step"]["n"] else "n/a"
        cells = [row["name"], row["change"], params, str(row["dev_perplexity"]["n"]), steps,
                 _cell(row["dev_perplexity"], 3), _cell(row["metric"])]  # fmt: skip
        cells += [_cell(row[key]) for key in side]
        if paper:
            cells += _paper_cells(row["paper"] or {}, row["comparison"])
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _paper_cells(paper: dict[str, Any], comparison: dict[str, Any] | None) -> list[str]:
    verdict = ""
    if comparison:
        here = comparison["here"] or "n/a"
        verdict = f"{comparison['paper']} / {here}"
        if comparison["reproduced"] is not None:
            verdict += " (as the paper)" if comparison["reproduced"] else " (differs)"
    params = paper.get("params_millions")
    return [
        f"{paper['dev_perplexity']:.2f}" if paper else "",
        f"{paper['dev_bleu']:.1f}" if paper else "",
        f"{params:g}" if params else "",
        verdict,
    ]


def _heading(report: dict[str, Any]) -> list[str]:
    config = report["config"]
    budget = []
    if config["train_minutes"]:
        budget.append(f"{config['train_minutes']:g} minutes")
    if config["train_steps"]:
        budget.append(f"{config['train_steps']:,} steps")
    label = METRIC_LABELS.get(report["metric"], report["metric"] or "the problem's metric")
    if side := [SIDE_SCORES[key] for key in _side_scores(report)]:
        label += f" (with {' and '.join(side)})"
    seeds = ", ".join(map(str, config["seeds"]))
    return [
        f"# Sweep {report['sweep']} on {config['problem']}",
        "",
        *([report["description"], ""] if report["description"] else []),
        f"{len(report['rows'])} rows, seeds {seeds}; each run trained for "
        f"{' or '.join(budget) or 'its hparams set train_steps'}"
        + (f" (common overrides: `{config['hparams']}`)" if config["hparams"] else "")
        + f". Dev results of each run's final model: perplexity over the whole dev split, {label} "
        f"of the first {config['eval_examples']} dev examples decoded with the problem's search "
        "settings. Mean ± standard deviation over seeds.",
        "",
        *_machines(report),
        f"Made by (DATA_DIR: what `t2t-datagen --problem={report['config']['problem']}` wrote; "
        "SWEEP_DIR: the sweep's folder):",
        "",
        "```",
        report["command"],
        "```",
        "",
    ]


def _machines(report: dict[str, Any]) -> list[str]:
    """Where the finished runs ran; with a budget in minutes, a warning when on several kinds
    of CPU, whose runs make different numbers of steps."""
    machines = report.get("machines") or {}
    if not machines:
        return []
    where = "; ".join(f"{kind}: {len(names)} run{'s' * (len(names) > 1)}"
                      for kind, names in machines.items())  # fmt: skip
    lines = [f"Ran on {where}.", ""]
    if len(machines) > 1 and report["config"]["train_minutes"]:
        lines[0] += (
            " With a budget in minutes a run's steps depend on the CPU as well as on its row: "
            "compare rows among the runs of one machine (report.json names each run's)."
        )
    return lines


def render_markdown(report: dict[str, Any]) -> str:
    lines = _heading(report) + _table(report)
    for group in report["groups"]:
        lines += ["", f"## {group['group']}", ""]
        if group["sentence"]:
            lines += [group["sentence"], ""]
        lines += [f"- {note}" for note in group["notes"]] + ([""] if group["notes"] else [])
        lines.append(f"![{group['group']}]({group['figure']})")
    if report["unfinished"]:
        lines += ["", "## Not finished", "", ", ".join(report["unfinished"])]
    return "\n".join(lines) + "\n"


def write_report(definition: SweepDefinition, config: SweepConfig) -> str:
    """Writes report.json, report.md and the groups' PNGs into the sweep folder; returns the
    path of report.md."""
    report = build_report(definition, config)
    metric = report["metric"]
    metrics = [("dev_perplexity", "dev perplexity")]
    if metric:
        metrics.append(("metric", METRIC_LABELS.get(metric, metric)))
    rows = {row["name"]: row for row in report["rows"]}
    for group in report["groups"]:
        path = os.path.join(config.sweep_dir, group["figure"])
        plots.plot_group(group["group"], [rows[name] for name in group["rows"]], metrics, path)
    atomic_io.write_json(os.path.join(config.sweep_dir, REPORT_JSON), report)
    path = os.path.join(config.sweep_dir, REPORT_MD)
    atomic_io.write_text(path, render_markdown(report))
    return path
