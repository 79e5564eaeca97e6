"""The search settings of a budget run, tuned on the dev split at the end of the budget.

The problem's decode defaults (beam 4, alpha 0.6 for translation) were never chosen for the
model a short budget produces: at the end of a 20-minute run the outputs were short (a brevity
penalty of 0.96-0.97), and alpha 1.4 gave 0.5-0.7 dev BLEU more. So a `--train_minutes` run keeps
the last TUNE_SHARE of its minutes for this: the model decode will use (the run's final choice,
restored as t2t-decode restores it) decodes the first `examples` dev examples with the
problem's `tune_alphas` (length penalties) at its beam, then with its `tune_beams` at the best
alpha, each scored by the problem's metric (sacreBLEU, EVALB F1, accuracy); the problem's own
setting is measured first. The best setting (ties: the earlier one) is written with the whole
grid to output_dir/search.json, which `Run.restore` reads under the command's flags:
t2t-decode, t2t-export and t2t-serve decode with it unless --beam_size or --alpha say so.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time

from absl import logging

from t2t_lite.decode.translator import Translator
from t2t_lite.run import checkpoints
from t2t_lite.run.layout import CHOICE_FILE, FINAL_DIR, SEARCH_FILE
from t2t_lite.run.run import Run
from t2t_lite.runtime import atomic_io
from t2t_lite.train.dev_set import METRICS, dev_pairs, score

# The share of a --train_minutes budget kept for the tuning (its training clock stops earlier).
TUNE_SHARE = 0.05
# Dev examples decoded per setting, unless --bleu_examples says.
TUNE_EXAMPLES = 300


def tunable(problem) -> bool:
    """Whether the problem's outputs are scored by a metric the tuning knows."""
    return getattr(problem, "metric", None) in METRICS


def kept_share(problem, hparams) -> float:
    """The share of a --train_minutes budget kept from training for the tuning: hparams'
    budget_tune_share, or 0 when the problem has no metric the tuning knows, or when the share is
    shorter than budget_tune_min_seconds (then too short to decode more than the problem's own
    setting, so the whole budget trains and the problem's search stays)."""
    share = hparams.budget_tune_share
    if not (hparams.budget_minutes and share and tunable(problem)):
        return 0.0
    seconds = 60.0 * hparams.budget_minutes * share
    if seconds < hparams.budget_tune_min_seconds:
        logging.info(
            "search tuning: not in this budget: its share (budget_tune_share=%g) is %.0f s, "
            "under budget_tune_min_seconds=%g; the whole budget trains and decodes use the "
            "problem's search",
            share, seconds, hparams.budget_tune_min_seconds,
        )  # fmt: skip
        return 0.0
    return share


def tuned(output_dir: str) -> bool:
    """Whether the run's search is tuned for its final model (a rerun after the end of the
    budget finishes a tuning that was cut short)."""
    try:
        with open(os.path.join(output_dir, SEARCH_FILE), encoding="utf-8") as f:
            record = json.load(f)
        with open(os.path.join(output_dir, FINAL_DIR, CHOICE_FILE), encoding="utf-8") as f:
            choice = json.load(f)
    except (OSError, ValueError):
        return False
    return record.get("step") == choice.get("step")


def _grid_entry(translator: Translator, run: Run, sources, references) -> dict:
    beam_size, alpha = translator.settings.beam_size, translator.settings.alpha
    names = [f"dev example {i + 1}" for i in range(len(sources))]
    start = time.monotonic()
    found = translator.hypotheses(sources, names, log_progress=False)
    hypotheses = [hyps[0].text if hyps else "" for hyps in found]
    value = score(run.problem.metric, hypotheses, references)
    entry = {"beam_size": beam_size, "alpha": alpha, run.problem.metric: round(value, 3)}
    entry["seconds"] = round(time.monotonic() - start, 1)
    logging.info(
        "search tuning: beam %d, alpha %g: %s %.2f (%.0f s)",
        beam_size, alpha, run.problem.metric, value, entry["seconds"],
    )  # fmt: skip
    return entry


def tune_search(output_dir: str, examples: int = TUNE_EXAMPLES, seconds: float = 0.0) -> dict:
    """Tunes the run's search on its dev split; writes and returns the record of search.json.

    The grid, in order: the problem's own setting; its `tune_alphas` at its beam (or, for a greedy
    problem, at its first `tune_beams` beam); the other beams at the best alpha. The first of
    the best wins. `seconds` > 0 bounds the tuning: a setting whose decoding is not expected to
    end in time (the measured seconds per beam so far, times its beam) is left out, and the
    record says how many were."""
    run = Run.restore(output_dir)
    # From the problem's settings, not from an earlier tuning's search.json.
    run = dataclasses.replace(run, search=run.problem.decode_defaults)
    metric = run.problem.metric
    sources, references = dev_pairs(run, examples)
    beams = [run.search.beam_size, *run.problem.tune_beams]
    grid: list[dict] = []
    skipped: list[dict] = []
    start = time.monotonic()
    translators: dict[int, Translator] = {}  # by beam size; each traced once for every alpha

    def translator(beam_size: int, alpha: float) -> Translator:
        if beam_size not in translators:
            settings = run.search.override(beam_size=beam_size, alpha=alpha)
            translators[beam_size] = Translator.from_run(dataclasses.replace(run, search=settings))
        return translators[beam_size].with_alpha(alpha)

    def measure(beam_size: int, alpha: float) -> None:
        if any(e["beam_size"] == beam_size and e["alpha"] == alpha for e in grid):
            return
        if grid and seconds > 0:
            per_beam = sum(e["seconds"] for e in grid) / sum(e["beam_size"] for e in grid)
            if time.monotonic() - start + per_beam * beam_size > seconds:
                skipped.append({"beam_size": beam_size, "alpha": alpha})
                return
        grid.append(_grid_entry(translator(beam_size, alpha), run, sources, references))

    measure(run.search.beam_size, run.search.alpha)
    alpha_beam = next((b for b in beams if b > 1), None)  # alpha does nothing at beam 1
    best_alpha = run.search.alpha
    if alpha_beam is not None:
        for alpha in run.problem.tune_alphas:
            measure(alpha_beam, alpha)
        at_beam = [e for e in grid if e["beam_size"] == alpha_beam]
        if at_beam:  # (none when the time kept left them all out)
            best_alpha = max(at_beam, key=lambda e: e[metric])["alpha"]  # max keeps the first
    for beam_size in beams:
        measure(beam_size, best_alpha)
    best = max(grid, key=lambda e: e[metric])
    record = {
        "beam_size": best["beam_size"],
        "alpha": best["alpha"],
        "metric": metric,
        "examples": len(sources),
        "checkpoint": os.path.relpath(run.checkpoint, output_dir),
        "step": checkpoints.checkpoint_step(run.checkpoint),
        "grid": grid,
        "left_out": skipped,  # settings the time kept for the tuning did not allow
    }
    if skipped:
        logging.warning(
            "search tuning: %d settings left out, not expected to end in the %.0f s kept for "
            "the tuning: %s",
            len(skipped), seconds, skipped,
        )  # fmt: skip
    atomic_io.write_json(os.path.join(output_dir, SEARCH_FILE), record)
    logging.info(
        "search tuning: beam %d, alpha %g (%s %.2f on %d dev examples) are the run's search "
        "settings from now on (%s; --beam_size and --alpha override them)",
        best["beam_size"], best["alpha"], metric, best[metric], len(sources),
        os.path.join(output_dir, SEARCH_FILE),
    )  # fmt: skip
    return record
