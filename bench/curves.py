"""Cost curves: target tokens/s against sentence length and against batch size, for a float32
training step and float32 beam-4 decoding, t2t_lite beside the best peer of each in
bench/RESULTS.md (keras-hub with jit_compile for training, CTranslate2 for decoding).

The length curve keeps TOKENS target tokens per batch (batch = TOKENS / length, source length =
target length), so the work that grows with the tokens (projections, feed-forward, softmax) is
the same at every point and what changes is the attention over the sentence, whose cost per
token grows with the length. A straight line, seconds per token = a + b * length, fitted to each
series says where that term overtakes the rest: at length a / b. The same line through the
model's FLOPs (t2t_lite.model.flops) gives the length where attention's FLOPs overtake the rest.
The batch curve keeps the length at BATCH_LENGTH.
"""

from __future__ import annotations

import os

import numpy as np
import protocol as P
from measurement import Measurement

LENGTHS = (16, 32, 64, 128, 256, 512)
TOKENS = 2048  # target tokens per batch along the length curve
BATCHES = (8, 16, 32, 64, 128, 256)
BATCH_LENGTH = 32
# (task, peer, label, venv): the measured series.
SERIES = (
    ("train", "t2t_lite", "t2t_lite training", None),
    ("train_xla", "keras_hub", "keras-hub jit_compile training", "keras_hub"),
    ("beam", "t2t_lite", "t2t_lite beam 4", None),
    ("beam", "ctranslate2", "CTranslate2 beam 4", "ctranslate2"),
)


def plot_path(report_path: str) -> str:
    """The plot of a report, beside it and named after it (RESULTS.md: RESULTS_curves.png)."""
    return os.path.splitext(report_path)[0] + "_curves.png"


def shapes() -> list[tuple[int, int]]:
    """The (batch, length) points of both curves, each once."""
    points = [(TOKENS // length, length) for length in LENGTHS]
    points += [(batch, BATCH_LENGTH) for batch in BATCHES]
    return list(dict.fromkeys(points))


def measurements() -> list[Measurement]:
    """Every series at every point."""
    return [
        Measurement("curves", peer, task, "float32", label, venv, shape)
        for shape in shapes()
        for task, peer, label, venv in SERIES
    ]


def _rates(runs, task: str, peer: str, points) -> list[float | None]:
    by_shape = {m.shape: m for m in runs if m.part == "curves" and (m.task, m.peer) == (task, peer)}
    return [by_shape[p].median() if p in by_shape else None for p in points]


def crossover(lengths, seconds_per_token) -> float | None:
    """The length where b * length reaches a, for the least-squares line a + b * length
    through the points; None when the line does not rise or has too few points."""
    pairs = [(x, y) for x, y in zip(lengths, seconds_per_token, strict=True) if y]
    if len(pairs) < 2:
        return None
    b, a = np.polyfit(*zip(*pairs, strict=True), 1)
    return float(a / b) if b > 0 and a > 0 else None


def flops_crossover(hparams, vocab_size: int) -> float:
    """The same length for the model's FLOPs per target token, which are exactly a + b *
    length when source and target have that length."""
    from t2t_lite.model import flops

    f16, f32 = (flops.forward_flops_per_token(hparams, vocab_size, n, n) for n in (16, 32))
    b = (f32 - f16) / 16
    return (f16 - 16 * b) / b


def plot(runs, path: str) -> None:
    """Two panels, tokens/s against length and against batch size, one line per series."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    curves = (
        ([(TOKENS // n, n) for n in LENGTHS], LENGTHS, f"sentence length ({TOKENS} tokens/batch)"),
        ([(b, BATCH_LENGTH) for b in BATCHES], BATCHES, f"batch size (length {BATCH_LENGTH})"),
    )
    for axis, (points, xs, xlabel) in zip(axes, curves, strict=True):
        for task, peer, label, _ in SERIES:
            ys = _rates(runs, task, peer, points)
            shown = [(x, y) for x, y in zip(xs, ys, strict=True) if y]
            if shown:
                style = "-o" if peer == "t2t_lite" else "--s"
                axis.plot(*zip(*shown, strict=True), style, label=label)
        axis.set_xscale("log", base=2)
        axis.set_xticks(xs, [str(x) for x in xs])
        axis.set_xlabel(xlabel)
        axis.set_ylabel("target tokens/s")
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    figure.suptitle("Cost curves, float32 (bench/curves.py)")
    figure.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _table(runs, points, first: str) -> list[str]:
    header = f"| {first} | " + " | ".join(label for _, _, label, _ in SERIES)
    lines = [header + " | training ratio | beam ratio |", "|---|" + "---:|" * (len(SERIES) + 2)]
    columns = [_rates(runs, task, peer, points) for task, peer, _, _ in SERIES]
    for i, (batch, length) in enumerate(points):
        cells = [f"{c[i]:,.0f}" if c[i] else "-" for c in columns]
        ratios = [
            f"{ours[i] / theirs[i]:.2f}x" if ours[i] and theirs[i] else "-"
            for ours, theirs in ((columns[0], columns[1]), (columns[2], columns[3]))
        ]
        lines.append(f"| {batch} x {length} | " + " | ".join(cells + ratios) + " |")
    return lines


def section(runs, plot_path: str | None, hparams=None) -> list[str]:
    """The report's "Cost curves" section (empty when no curve was measured)."""
    if not any(m.part == "curves" and m.results for m in runs):
        return []
    length_points = [(TOKENS // n, n) for n in LENGTHS]
    lines = ["", "## Cost curves (float32)", ""]
    if plot_path:
        plot(runs, plot_path)
        lines += [f"![cost curves]({os.path.basename(plot_path)})", ""]
    lines += [
        f"Target tokens/s; training and beam ratios are t2t_lite / peer. Along sentence length, "
        f"{TOKENS} target tokens per batch (batch x length):",
        "",
        *_table(runs, length_points, "batch x length"),
        "",
        f"Along batch size, length {BATCH_LENGTH}:",
        "",
        *_table(runs, [(b, BATCH_LENGTH) for b in BATCHES], "batch x length"),
        "",
        "Where the cost that grows with the length overtakes the rest (the length L at which "
        "b * L = a for seconds per token = a + b * L, least squares over the length curve):",
        "",
    ]
    for task, peer, label, _ in SERIES:
        rates = _rates(runs, task, peer, length_points)
        at = crossover(LENGTHS, [1 / r if r else None for r in rates])
        lines.append(f"- {label}: " + (f"L = {at:,.0f}" if at else "no rising line"))
    if hparams is not None:
        at = flops_crossover(hparams, P.VOCAB)
        lines.append(f"- model FLOPs (attention scores and sums against the rest): L = {at:,.0f}")
    lines += [
        "",
        f"Beam search's points along the length also have fewer sentences per step ({TOKENS} / "
        "L, times the beam), so its b holds the fixed cost of a step spread over fewer rows as "
        "well as the attention over a longer cache; the batch curve shows the first alone.",
    ]
    return lines
