"""Does a row move dev perplexity the way the paper's row does? Directions against the base row,
and the sentences the report writes about them, made from the numbers only.

A change counts as "same" when it is within 1% of the base's perplexity (the paper's own rows
(A) h=16 and (E) are 0.2% and 0.0% from base), and, here, also when it is within the seeds'
spread (the two rows' standard deviations over seeds, added in quadrature).
"""

from __future__ import annotations

import math
from typing import Any

RELATIVE_SAME = 0.01
HIGHER, LOWER, SAME = "higher", "lower", "same"
# The paper's training data (section 5.1) and the steps of its Table 3 rows.
PAPER_TRAIN_PAIRS = "about 4.5M sentence pairs (WMT14 en-de)"


def direction(change: float, base: float, spread: float = 0.0) -> str:
    """HIGHER, LOWER or SAME for a perplexity change against a base perplexity."""
    if abs(change) <= max(RELATIVE_SAME * abs(base), spread):
        return SAME
    return HIGHER if change > 0 else LOWER


def compare_row(row: dict[str, Any], base: dict[str, Any]) -> dict[str, Any] | None:
    """The paper's direction and this sweep's for a report row against the base row (both
    with "dev_perplexity" summaries and "paper" columns); None without the paper's numbers,
    and "here" and "reproduced" None until both rows have finished runs."""
    if not (row.get("paper") and base.get("paper")):
        return None
    paper_base = base["paper"]["dev_perplexity"]
    paper_change = row["paper"]["dev_perplexity"] - paper_base
    comparison = {
        "paper": direction(paper_change, paper_base),
        "paper_change_percent": 100 * paper_change / paper_base,
        "here": None,
        "change_percent": None,
        "spread": None,
        "spread_percent": None,
        "reproduced": None,
    }
    mine, theirs = row["dev_perplexity"], base["dev_perplexity"]
    if mine["n"] and theirs["n"]:
        change = mine["mean"] - theirs["mean"]
        spread = math.hypot(mine["std"] or 0.0, theirs["std"] or 0.0)
        here = direction(change, theirs["mean"], spread)
        comparison.update(
            here=here,
            change_percent=100 * change / theirs["mean"],
            spread=spread,
            spread_percent=100 * spread / theirs["mean"],
            reproduced=here == comparison["paper"],
        )
    return comparison


def _summary_text(summary: dict[str, Any]) -> str:
    if summary["std"] is None:
        return f"{summary['mean']:.3f}"
    return f"{summary['mean']:.3f} ± {summary['std']:.3f}"


def _describe(direction_name: str, percent: float) -> str:
    if direction_name == SAME:
        return f"{percent:+.1f}%, the same within the tolerance"
    return f"{percent:+.1f}%, {direction_name}"


def row_sentence(row: dict[str, Any], base: dict[str, Any], facts: dict[str, Any]) -> str:
    """A factual sentence about a row whose direction differs from the paper's, and the scale
    of this sweep against the paper's (its budget and data) as the reasons to look at."""
    comparison = row["comparison"]
    paper_row, paper_base = row["paper"], base["paper"]
    text = (
        f"{row['name']} ({row['change']}): dev perplexity {_summary_text(row['dev_perplexity'])} "
        f"against the base's {_summary_text(base['dev_perplexity'])} "
        f"({_describe(comparison['here'], comparison['change_percent'])}); the paper's row has "
        f"{paper_row['dev_perplexity']:.2f} against {paper_base['dev_perplexity']:.2f} "
        f"({_describe(comparison['paper'], comparison['paper_change_percent'])})."
    )
    if comparison["here"] == SAME and comparison["spread"]:
        text += f" The seeds' spread here is ±{comparison['spread']:.3f}."
    steps, pairs = facts.get("steps"), facts.get("train_examples")
    scale = []
    if steps:
        scale.append(
            f"about {steps:,.0f} steps per run against the paper's {paper_row['train_steps']:,}"
        )
    if pairs:
        scale.append(f"{pairs:,} training pairs against {PAPER_TRAIN_PAIRS}")
    if scale:
        text += " Possible reasons, from this sweep's scale: " + "; ".join(scale) + "."
    return text


def group_sentence(group: str, rows: list[dict[str, Any]]) -> str:
    """The group's verdict, e.g. "(C): 5 of 7 rows follow the paper's direction ..."."""
    compared = [row for row in rows if row.get("comparison") and row["comparison"]["here"]]
    if not compared:
        return f"{group}: no row has both this sweep's and the paper's perplexity yet."
    reproduced = sum(row["comparison"]["reproduced"] for row in compared)
    noun = "row follows" if len(compared) == 1 else "rows follow"
    return (
        f"{group}: {reproduced} of {len(compared)} {noun} the paper's direction of dev "
        "perplexity against the base (higher, lower, or the same: within 1% of the base, or here "
        "within the seeds' spread)."
    )
