"""A sentence confidence in [0, 1] that a person can read: the expected sentence chrF (over
100) of a translation, given its mean token log-probability.

The mapping is fitted on the dev split by isotonic regression (`fit`, SciPy's
`isotonic_regression`: monotone, no shape assumed) and saved in the run directory as
`confidence.json` (`t2t-calibrate`). A run without it gets the uncalibrated measure, the
geometric mean of the token probabilities, and says so (`Calibration.name`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Sequence

import numpy as np

from t2t_lite.runtime import atomic_io

CALIBRATION_FILE = "confidence.json"


def mean_log_prob(token_log_probs: Sequence[float]) -> float:
    """The length-normalized log-probability of an output (EOS included)."""
    return float(np.mean(token_log_probs)) if len(token_log_probs) else 0.0


@dataclasses.dataclass(frozen=True)
class Calibration:
    """Mean token log-prob --> confidence, piecewise linear between fitted points (flat
    beyond them); with no points, exp(mean log-prob)."""

    x: tuple[float, ...] = ()
    y: tuple[float, ...] = ()
    sentences: int = 0
    spearman: float | None = None  # rank correlation with sentence chrF where it was fitted

    @property
    def name(self) -> str:
        if not self.x:
            return "uncalibrated (geometric mean token probability)"
        return f"expected chrF / 100, fitted on {self.sentences} dev sentences"

    def __call__(self, token_log_probs: Sequence[float]) -> float:
        value = mean_log_prob(token_log_probs)
        if not self.x:
            return math.exp(value)
        return float(np.clip(np.interp(value, self.x, self.y), 0.0, 1.0))

    def save(self, run_dir: str) -> str:
        path = os.path.join(run_dir, CALIBRATION_FILE)
        atomic_io.write_text(path, json.dumps(dataclasses.asdict(self), indent=1) + "\n")
        return path

    @classmethod
    def load(cls, run_dir: str | None) -> Calibration:
        """The run's calibration, or the uncalibrated measure when it has none."""
        path = os.path.join(run_dir, CALIBRATION_FILE) if run_dir else ""
        if not path or not os.path.exists(path):
            return cls()
        with open(path, encoding="utf-8") as f:
            fields = json.load(f)
        try:
            found = cls(
                tuple(map(float, fields["x"])),
                tuple(map(float, fields["y"])),
                int(fields["sentences"]),
                fields.get("spearman"),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(
                f"{path}: not a confidence calibration ({e}); rerun t2t-calibrate"
            ) from None
        if len(found.x) != len(found.y) or list(found.x) != sorted(found.x):
            raise ValueError(f"{path}: x must be sorted and as long as y; rerun t2t-calibrate")
        return found


def fit(measures: Sequence[float], chrfs: Sequence[float]) -> Calibration:
    """Isotonic regression of sentence chrF / 100 on mean token log-prob: sentences with the same
    measure are one point (their mean chrF, weighted by their number), and of each flat run of the
    fitted curve only its ends are kept, since `Calibration` interpolates between points."""
    from scipy.optimize import isotonic_regression

    x, y = np.asarray(measures, np.float64), np.asarray(chrfs, np.float64) / 100.0
    if not len(x):
        raise ValueError("no sentences to fit the confidence on")
    xs, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    ys = np.bincount(inverse, weights=y) / counts
    fitted = np.clip(isotonic_regression(ys, weights=counts).x, 0.0, 1.0)
    bends = np.ones(len(xs), bool)
    bends[1:-1] = (fitted[1:-1] != fitted[:-2]) | (fitted[1:-1] != fitted[2:])
    rho = spearman(x, y) if len(x) > 2 else None
    return Calibration(tuple(xs[bends].tolist()), tuple(fitted[bends].tolist()), len(x), rho)


def measures_and_chrf(
    hypotheses: Sequence[Sequence], references: Sequence[str]
) -> tuple[list[float], list[float]]:
    """The mean token log-prob and the sentence chrF (sacreBLEU) of each line's best
    `Translator.hypotheses(..., details=True)` against its reference; empty lines left out."""
    import sacrebleu

    measures, chrfs = [], []
    for hyps, reference in zip(hypotheses, references, strict=True):
        if not hyps or not reference.strip():
            continue
        measures.append(mean_log_prob(np.log(hyps[0].details.token_probs)))
        chrfs.append(sacrebleu.sentence_chrf(hyps[0].text, [reference]).score)
    return measures, chrfs


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation (average ranks for ties)."""
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)
