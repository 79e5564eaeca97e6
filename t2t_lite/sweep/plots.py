"""The sweep report's pictures: one PNG per row group, a panel per metric, each row's mean over
seeds as a square with the seeds' standard deviation as its error bar, each seed as a dot.

matplotlib is an optional extra (`viz`); without it `pyplot()` raises `MissingExtraError`, whose
message names `pip install 't2t_lite[viz]'`.
"""

from __future__ import annotations

import io
from typing import Any

from t2t_lite.extras import import_extra
from t2t_lite.runtime import atomic_io


def pyplot():
    """matplotlib's pyplot on the file-only Agg backend."""
    matplotlib = import_extra("matplotlib", "matplotlib", "viz", "t2t-sweep's report pictures")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_group(title: str, rows: list[dict[str, Any]], metrics: list[tuple[str, str]], path: str):
    """Writes `path` (atomically): for each (key, label) of `metrics` a panel with a mark per
    row (rows as the report holds them: row[key] a summary with mean, std, n and values)."""
    plt = pyplot()
    names = [row["name"] for row in rows]
    figure, axes = plt.subplots(
        1, len(metrics), figsize=(max(4.0, 0.9 * len(rows) + 1.5) * len(metrics), 3.8)
    )
    axes = axes if len(metrics) > 1 else [axes]
    for axis, (key, label) in zip(axes, metrics, strict=True):
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
        axis.set_xticks(range(len(rows)), names, rotation=30, ha="right")
        axis.set_xlim(-0.5, len(rows) - 0.5)
        axis.set_ylabel(label)
        axis.set_title(f"{title}: {label}")
        axis.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    atomic_io.write_bytes(path, buffer.getvalue())
