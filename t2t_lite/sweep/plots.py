"""The sweep report's pictures: one PNG per row group, a panel per metric, each row's mean over
seeds as a square with the seeds' standard deviation as its error bar, each seed as a dot; and
for rows with the paper's numbers a last panel of each row's dev perplexity change against the
base, in percent, here and in the paper side by side.

matplotlib is an optional extra (`viz`); without it `pyplot()` raises `MissingExtraError`, whose
message names `pip install 't2t_lite[viz]'`.
"""

from __future__ import annotations

from typing import Any

from t2t_lite.runtime import figures


def pyplot():
    """matplotlib's pyplot on the file-only Agg backend; `MissingExtraError` without the `viz`
    extra."""
    return figures.pyplot("t2t-sweep's report pictures")


def against_paper(rows: list[dict[str, Any]]) -> dict[str, list]:
    """The points of the panel against the paper, by row index: "here" (finished rows: change
    of the mean dev perplexity against the base's, %, and the seeds' spread, %) and "paper"
    (the paper's change, %); a row without a comparison (the base) has neither."""
    points: dict[str, list] = {"here": [], "here_error": [], "here_rows": [], "paper": [],
                               "paper_rows": []}  # fmt: skip
    for i, row in enumerate(rows):
        comparison = row.get("comparison")
        if not comparison:
            continue
        points["paper_rows"].append(i)
        points["paper"].append(comparison["paper_change_percent"])
        if comparison["here"] is not None:
            points["here_rows"].append(i)
            points["here"].append(comparison["change_percent"])
            points["here_error"].append(comparison["spread_percent"])
    return points


def _plot_against_paper(axis, rows: list[dict[str, Any]]) -> None:
    points = against_paper(rows)
    axis.axhline(0.0, color="#7f7f7f", linewidth=0.8)
    axis.errorbar(points["here_rows"], points["here"], yerr=points["here_error"], fmt="s",
                  color="#1f4e79", capsize=5, label="this sweep (seeds' spread)")  # fmt: skip
    axis.plot([i + 0.15 for i in points["paper_rows"]], points["paper"], "D", color="#c0504d",
              label="the paper's Table 3")  # fmt: skip
    # Linear within +-10 % (the paper's changes but one), logarithmic beyond, so that changes of
    # a few percent and of several times the base both show.
    axis.set_yscale("symlog", linthresh=10.0)
    axis.set_ylabel("dev perplexity vs base, %")
    axis.legend(fontsize="small")


def plot_group(title: str, rows: list[dict[str, Any]], metrics: list[tuple[str, str]], path: str):
    """Writes `path` (atomically): for each (key, label) of `metrics` a panel with a mark per
    row (rows as the report holds them: row[key] a summary with mean, std, n and values), and
    the panel against the paper when a row has the paper's numbers."""
    plt = pyplot()
    names = [row["name"] for row in rows]
    panels = list(metrics)
    if any(row.get("comparison") for row in rows):
        panels.append(("against_paper", "dev perplexity against the base"))
    figure, axes = plt.subplots(
        1, len(panels), figsize=(max(4.0, 0.9 * len(rows) + 1.5) * len(panels), 3.8)
    )
    axes = axes if len(panels) > 1 else [axes]
    for axis, (key, label) in zip(axes, panels, strict=True):
        axis.set_xticks(range(len(rows)), names, rotation=30, ha="right")
        axis.set_xlim(-0.5, len(rows) - 0.5)
        axis.set_title(f"{title}: {label}")
        axis.grid(axis="y", alpha=0.3)
        if key == "against_paper":
            _plot_against_paper(axis, rows)
            continue
        done = [i for i, row in enumerate(rows) if row[key]["n"]]
        axis.errorbar(
            done,
            [rows[i][key]["mean"] for i in done],
            yerr=[rows[i][key]["std"] or 0.0 for i in done],
            fmt="s",
            color="#1f4e79",
            capsize=5,
            label="mean ± std over seeds",
        )
        for i in done:
            values = rows[i][key]["values"]
            axis.plot([i + 0.12] * len(values), values, ".", color="#7f7f7f")
        axis.set_ylabel(label)
    figure.tight_layout()
    figures.write_png(figure, path, dpi=100)
