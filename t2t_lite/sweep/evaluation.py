"""A finished run's dev results for the sweep's report, measured on the model decode would use.

The run is restored the one way every command restores it (`Run.restore`: its newest final,
averaged or training checkpoint, its vocabulary, the problem's decode defaults). On that model:
dev loss, perplexity and token accuracy over the whole dev split, as t2t-train's evaluations
count them; and the problem's metric on the first `max_examples` dev examples decoded through
`Translator`: sacreBLEU's BLEU, with its chrF and TER beside it (translation), EVALB F1
(parsing), or exact-match accuracy in percent (algorithmic problems).
"""

from __future__ import annotations

import math
import os
import re

import keras
import tensorflow as tf

from t2t_lite.decode.translator import Translator
from t2t_lite.metrics.scores import corpus_scores
from t2t_lite.model.ensemble import parameter_count
from t2t_lite.problems.base import read_metadata
from t2t_lite.run.run import Run
from t2t_lite.train.dev_set import METRICS as METRICS
from t2t_lite.train.dev_set import dev_pairs, score
from t2t_lite.train.step import BatchStats, batch_stats, sum_stats

# Beside BLEU, for translation problems: sacreBLEU's, as t2t-train's dev_chrf and dev_ter.
TRANSLATION_SCORES = ("chrf", "ter")


def dev_statistics(run: Run) -> dict[str, float]:
    """dev_loss (mean negative log-likelihood per target token), dev_perplexity, dev_accuracy
    and dev_tokens over the whole dev split, batched as training evaluates it."""
    dataset = run.problem.make_dataset(
        run.data_dir, "dev", run.hparams, shuffle=False, repeat=False
    )
    label_smoothing = run.hparams.label_smoothing

    ids = tf.TensorSpec([None, None], tf.int32)

    @tf.function(input_signature=[{"inputs": ids, "targets": ids}], autograph=False)  # one trace
    def stats(batch):
        logits = run.model(batch, training=False)  # [batch, target, vocab]
        return batch_stats(logits, batch, label_smoothing).vector()

    totals = sum_stats(BatchStats.from_vector(stats(batch)) for batch in dataset)
    tokens = max(totals.target_tokens, 1.0)
    loss = totals.nll_sum / tokens
    return {
        "dev_loss": loss,
        "dev_perplexity": math.exp(min(loss, 700.0)),
        "dev_accuracy": totals.correct_tokens / tokens,
        "dev_tokens": totals.target_tokens,
    }


def translation_scores(hypotheses: list[str], references: list[str]) -> dict[str, float]:
    """chrF and TER (sacreBLEU, `t2t_lite.metrics.scores`) of `hypotheses` against one
    reference each: {"chrf": ..., "ter": ...}."""
    scored = corpus_scores(hypotheses, [references], TRANSLATION_SCORES)
    return {s.name: s.score for s in scored}


def checkpoint_step(path: str) -> int | None:
    """The step in a checkpoint's name (ckpt-1200 -> 1200), or None."""
    match = re.search(r"ckpt-(\d+)$", path)
    return int(match.group(1)) if match else None


def evaluate_run(output_dir: str, max_examples: int) -> dict:
    """The run's dev results: loss, perplexity, token accuracy, the problem's metric on
    `max_examples` decoded examples; its parameters and training examples; the checkpoint and
    search settings used."""
    run = Run.restore(output_dir)
    results = dev_statistics(run)
    sources, references = dev_pairs(run, max_examples)
    names = [f"dev:{i + 1}" for i in range(len(sources))]
    found = Translator.from_run(run).hypotheses(sources, names, log_progress=False)
    hypotheses = [hyps[0].text if hyps else "" for hyps in found]
    metric = run.problem.metric
    if metric == "bleu":
        results.update(translation_scores(hypotheses, references))
    results.update(
        {
            "metric": metric,
            metric: score(metric, hypotheses, references),
            "decoded_examples": len(sources),
            "params": parameter_count(run.model),
            "checkpoint": os.path.relpath(run.checkpoint, output_dir),
            "step": checkpoint_step(run.checkpoint),
            "train_examples": read_metadata(run.data_dir)["splits"]["train"]["examples"],
            "search": {
                key: getattr(run.search, key)
                for key in ("beam_size", "alpha", "extra_length", "constrained")
            },
        }
    )
    keras.backend.clear_session()  # dozens of runs are evaluated in one process
    return results
