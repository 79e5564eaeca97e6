"""Corpus scores beside BLEU, and whether one system beats another, both by sacreBLEU.

- **chrF** (Popović, 2015): the F-score (beta 2) of character 1- to 6-grams; **chrF++** (Popović,
  2017) adds word 1- and 2-grams. They credit a morphologically close word that BLEU counts as
  wrong, and judge a single sentence better than BLEU does.
- **TER** (Snover et al., 2006): the edits (insertions, deletions, substitutions, shifts) per
  reference word that turn the output into the reference; lower is better.
- **Paired tests** of a system against a baseline on the same sentences, per metric: paired
  bootstrap resampling (Koehn, 2004: `bs`, 1,000 resamples, with each system's mean and 95 %
  confidence interval) and approximate randomization (Riezler and Maxwell, 2005: `ar`, 10,000
  trials). The p-value is the chance of a difference at least this large if the systems were
  alike; sacreBLEU seeds its generator (SACREBLEU_SEED, 12345), so a rerun gives the same one.

Each score comes with sacreBLEU's signature, which says how it was computed.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

from sacrebleu.metrics import BLEU, CHRF, TER
from sacrebleu.significance import PairedTest

# A difference is called significant below this p-value.
SIGNIFICANCE = 0.05
# The metrics by name, and whether a higher score is better.
HIGHER_IS_BETTER = {"bleu": True, "chrf": True, "chrf++": True, "ter": False}


def metric(name: str, tokenize: str = "13a"):
    """sacreBLEU's metric `name` (a key of HIGHER_IS_BETTER); `tokenize` is BLEU's tokenizer."""
    if name == "bleu":
        return BLEU(tokenize=tokenize)
    if name in ("chrf", "chrf++"):
        return CHRF(word_order=2 if name == "chrf++" else 0)
    if name == "ter":
        return TER()
    raise ValueError(f"unknown metric {name!r}: one of {', '.join(HIGHER_IS_BETTER)}")


def parse_metrics(text: str) -> tuple[str, ...]:
    """`bleu,chrf,ter` -> ("bleu", "chrf", "ter"), each known and once."""
    names = tuple(n.strip().lower() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in HIGHER_IS_BETTER]
    if unknown or not names:
        raise ValueError(
            f"--metrics={text!r}: {', '.join(unknown) or 'no metric'} is not one of "
            f"{', '.join(HIGHER_IS_BETTER)} (comma-separated)"
        )
    if len(set(names)) != len(names):
        raise ValueError(f"--metrics={text!r}: a metric named twice")
    return names


@dataclasses.dataclass(frozen=True)
class Scored:
    """One corpus score: sacreBLEU's text of it (`chrF2 = 61.35`) and its signature."""

    name: str
    score: float
    text: str
    signature: str


def corpus_scores(
    hypotheses: Sequence[str],
    references: Sequence[Sequence[str]],
    names: Sequence[str],
    tokenize: str = "13a",
) -> list[Scored]:
    """Each metric of `names` over the corpus (`references`: one or more streams of the
    hypotheses' length)."""
    scored = []
    for name in names:
        m = metric(name, tokenize)
        score = m.corpus_score(list(hypotheses), [list(r) for r in references])
        scored.append(Scored(name, score.score, str(score), str(m.get_signature())))
    return scored


@dataclasses.dataclass(frozen=True)
class Compared:
    """A metric's paired test: the baseline's and the system's scores, the p-value, and with
    the bootstrap each one's mean and 95 % confidence interval (half-width)."""

    name: str
    baseline: float
    system: float
    p_value: float
    means: tuple[float, float] | None  # (baseline, system), bootstrap only
    intervals: tuple[float, float] | None
    signature: str

    @property
    def better(self) -> bool:
        """Whether the system scores better than the baseline on this metric."""
        higher = HIGHER_IS_BETTER[self.name]
        return self.system > self.baseline if higher else self.system < self.baseline


def paired_test(
    baseline: Sequence[str],
    hypotheses: Sequence[str],
    references: Sequence[Sequence[str]],
    names: Sequence[str],
    test_type: str = "bs",
    samples: int = 0,
    tokenize: str = "13a",
) -> list[Compared]:
    """sacreBLEU's paired test (`bs` or `ar`) of `hypotheses` against `baseline` for each
    metric; `samples` 0 takes sacreBLEU's defaults (1,000 resamples, 10,000 trials)."""
    if len(baseline) != len(hypotheses):
        raise ValueError(
            f"the baseline has {len(baseline)} lines but the translation has {len(hypotheses)}"
        )
    metrics = {name: metric(name, tokenize) for name in names}
    logging.getLogger("sacrebleu").setLevel(logging.WARNING)  # its progress lines
    test = PairedTest(
        [("baseline", list(baseline)), ("system", list(hypotheses))],
        metrics,
        [list(r) for r in references],
        test_type=test_type,
        n_samples=samples,
    )
    signatures, results = test()
    # both keyed by each metric's own name (chrF2, TER), in the order of `metrics`
    keys = [k for k in results if k != "System"]
    compared = []
    for name, key in zip(names, keys, strict=True):
        base, system = results[key]
        bootstrap = test_type == "bs"
        compared.append(
            Compared(
                name=name,
                baseline=base.score,
                system=system.score,
                p_value=float(system.p_value),
                means=(float(base.mean), float(system.mean)) if bootstrap else None,
                intervals=(float(base.ci), float(system.ci)) if bootstrap else None,
                signature=str(signatures[key]),
            )
        )
    return compared


def format_compared(compared: Sequence[Compared], test_type: str) -> str:
    """A line per metric: both scores, the bootstrap's means and intervals, the p-value."""
    method = "paired bootstrap" if test_type == "bs" else "approximate randomization"
    lines = [
        f"{method} against the baseline (p: the chance of a difference this large between like "
        f"systems; significant below {SIGNIFICANCE:g}):"
    ]
    for c in compared:
        spread = ""
        if c.means is not None:
            spread = (
                f" (means {c.means[0]:.2f} +- {c.intervals[0]:.2f}, "
                f"{c.means[1]:.2f} +- {c.intervals[1]:.2f})"
            )
        verdict = "not better"
        if c.better:
            verdict = (
                "better, significant" if c.p_value < SIGNIFICANCE else "better, not significant"
            )
        lines.append(
            f"  {c.name:7s} baseline {c.baseline:.2f}, translation {c.system:.2f}{spread}, "
            f"p = {c.p_value:.4f}: {verdict}"
        )
        lines.append(f"    signature {c.signature}")
    return "\n".join(lines) + "\n"
