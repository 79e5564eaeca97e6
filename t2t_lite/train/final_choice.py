"""The end of a budget run keeps the better model: the last weights, the average of the last
checkpoints, the exponential moving average (EMA) of the weights, or the best model of the
run's evaluations (output_dir/best/), whichever scores best on dev: by sacreBLEU of greedy
decoding when the problem is scored by BLEU, else by dev loss.

Averaging the last checkpoints of a short run helps when they sit around one minimum, and hurts
when the model was still moving fast between them; an EMA follows the weights more closely. No
rule says in advance which wins, so each is measured on dev. The best evaluation's model wins
when the run overfits its corpus: many passes over a small corpus without dropout (GUM's parsing
demo) reach their lowest dev loss before the end.

Dev loss is not BLEU: at 6,700 updates over lohelp en-de (about nine passes) the dev loss was
lowest 1,700 steps before the end, yet that model's dev BLEU was 1.8 below the last weights'
(docs/training.md, "The end-of-run choice by BLEU"). So translation runs are judged by what
they are scored by. The winner is written to output_dir/final/ (decode and export read the
newest of final/, averaged/ and checkpoints/), with final/choice.json recording every
candidate's score and why the winner was chosen. The training state (the last weights, the
optimizer) is left as it was, so a resume is unaffected.
"""

from __future__ import annotations

import json
import os

import numpy as np
import tensorflow as tf
from absl import logging

from t2t_lite.model import lora
from t2t_lite.run import averaging, checkpoints
from t2t_lite.run.layout import BEST_DIR, CHECKPOINT_DIR, CHOICE_FILE, FINAL_DIR
from t2t_lite.runtime import atomic_io
from t2t_lite.train.config import METRIC_DIRECTIONS

# How many of the newest checkpoints the "average" candidate averages (fewer if fewer exist).
NUM_AVERAGED = 5
# The dev sentences a BLEU-scored run decodes (greedy) per candidate, unless --bleu_examples says.
BLEU_EXAMPLES = 500


def _snapshot(model) -> list[np.ndarray]:
    return [w.numpy() for w in model.weights]


def _load(model, values: list[np.ndarray]) -> None:
    for weight, value in zip(model.weights, values, strict=True):
        weight.assign(value)


def recorded_choice(output_dir: str) -> dict | None:
    """final/choice.json of a run, or None."""
    path = os.path.join(output_dir, FINAL_DIR, CHOICE_FILE)
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return json.load(f)


def choose_final(
    trainer, output_dir: str, step: int, score, metric: str = "dev_loss", write: bool = True
) -> dict:
    """Measures the candidates with `score()` (the `metric`, a key of METRIC_DIRECTIONS, of
    trainer.model's current weights), writes the best to output_dir/final/ and returns the record
    of choice.json. Ties go to the last weights. A worker that is not the chief of a multi-worker
    run scores alike (the scores' collectives need it) and writes nothing (`write` False)."""
    model = lora.checkpointed(trainer.model)  # an adapter run keeps its adapter alone
    last = _snapshot(model)
    scores = {"last": float(score())}
    weights = {"last": last}
    if trainer.hparams.ema_momentum > 0:
        trainer.inner_optimizer.finalize_variable_values(model.trainable_variables)
        scores["ema"], weights["ema"] = float(score()), _snapshot(model)
        _load(model, last)
    directory = os.path.join(output_dir, CHECKPOINT_DIR)
    paths = checkpoints.list_checkpoints(directory, strict=False)[-NUM_AVERAGED:]
    if len(paths) > 1:
        averaging.average_into(model, paths)
        scores["average"], weights["average"] = float(score()), _snapshot(model)
    best = tf.train.latest_checkpoint(os.path.join(output_dir, BEST_DIR))
    if best and checkpoints.checkpoint_step(best) < step:
        checkpoints.restore_model_weights(model, best)
        scores["best"], weights["best"] = float(score()), _snapshot(model)
    sign = -1.0 if METRIC_DIRECTIONS[metric] else 1.0
    chosen = min(scores, key=lambda name: (sign * scores[name], name != "last"))
    final = os.path.join(output_dir, FINAL_DIR)
    path = None
    if write:
        _load(model, weights[chosen])
        path = checkpoints.save_model_checkpoint(model, final, step)
    _load(model, last)
    others = ", ".join(f"{k} {v:.4f}" for k, v in scores.items() if k != chosen)
    label = {"dev_bleu": "dev BLEU", "dev_chrf": "dev chrF", "dev_ter": "dev TER"}
    which = f"{'highest' if sign < 0 else 'lowest'} {label.get(metric, metric.replace('_', ' '))}"
    record = {
        "step": step,
        "chosen": chosen,
        "checkpoint": path,
        "metric": metric,
        metric: scores,
        "averaged": paths if "average" in scores else [],
        "best": best if "best" in scores else None,
        "ema_momentum": trainer.hparams.ema_momentum,
        "why": f"{which}: {chosen} {scores[chosen]:.4f} ({others or 'no other candidate'})",
    }
    if not write:
        return record
    atomic_io.write_json(os.path.join(final, CHOICE_FILE), record)
    logging.info("end of the budget: kept the %s model in %s; %s", chosen, final, record["why"])
    return record
