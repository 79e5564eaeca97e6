"""A finished run's dev results for the sweep's report, measured on the model decode would use.

The run is restored the one way every command restores it (`Run.restore`: its newest final,
averaged or training checkpoint, its vocabulary, the problem's decode defaults). On that model:
dev loss, perplexity and token accuracy over the whole dev split, as t2t-train's evaluations
count them; and the problem's metric on the first `max_examples` dev examples decoded through
`Translator`: sacreBLEU (translation), EVALB F1 (parsing), or exact-match accuracy in percent
(algorithmic problems).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import re

import keras
import tensorflow as tf

from t2t_lite.data.pipeline import parse_examples
from t2t_lite.decode.translator import Translator
from t2t_lite.model.ensemble import parameter_count
from t2t_lite.problems.base import read_metadata
from t2t_lite.run.run import Run
from t2t_lite.train.step import BatchStats, batch_stats, sum_stats

METRICS = ("bleu", "parse_f1", "accuracy")


def dev_statistics(run: Run) -> dict[str, float]:
    """dev_loss (mean negative log-likelihood per target token), dev_perplexity, dev_accuracy
    and dev_tokens over the whole dev split, batched as training evaluates it."""
    dataset = run.problem.make_dataset(
        run.data_dir, "dev", run.hparams, shuffle=False, repeat=False
    )
    label_smoothing = run.hparams.label_smoothing

    ids = tf.TensorSpec([None, None], tf.int32)

    @tf.function(input_signature=[{"inputs": ids, "targets": ids}])  # one trace per run
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


def dev_pairs(run: Run, max_examples: int) -> tuple[list[str], list[str]]:
    """(sources, references) of the first `max_examples` dev examples: for parsing the
    sentences and gold trees datagen wrote beside the shards, otherwise the shards' own
    examples turned back into text with the run's vocabulary."""
    if run.problem.metric == "parse_f1":
        from t2t_lite.problems.parsing import gold_file, source_file

        def first(name: str) -> list[str]:
            with open(os.path.join(run.data_dir, name), encoding="utf-8") as f:
                return [line.rstrip("\n") for line in itertools.islice(f, max_examples)]

        return first(source_file("dev")), first(gold_file("dev"))
    files = run.problem.split_files(run.data_dir, "dev")
    dataset = tf.data.TFRecordDataset(files).take(max_examples).batch(256).map(parse_examples)
    sources, references = [], []
    for batch in dataset:
        for texts, ids in ((sources, batch["inputs"]), (references, batch["targets"])):
            texts.extend(t.decode("utf-8") for t in run.tokenizer.decode(ids).numpy())
    return sources, references


def score(metric: str, hypotheses: list[str], references: list[str]) -> float:
    """The problem's metric of `hypotheses` against `references`, in percent."""
    if metric == "bleu":
        from t2t_lite.metrics.bleu import sacre_bleu

        return sacre_bleu(hypotheses, [references]).bleu
    if metric == "parse_f1":  # an empty output reads as a tree without words: EVALB skips it
        from t2t_lite.data.trees import parse_tree
        from t2t_lite.metrics import evalb

        params = dataclasses.replace(evalb.COLLINS, max_errors=None)
        gold = [parse_tree(line) for line in references]
        test = [parse_tree(line) if line.strip() else parse_tree("(S)") for line in hypotheses]
        return evalb.evaluate(gold, test, params).f1
    if metric == "accuracy":
        matches = sum(h.split() == r.split() for h, r in zip(hypotheses, references, strict=True))
        return 100.0 * matches / max(len(references), 1)
    raise ValueError(f"unknown metric {metric!r}; known: {', '.join(METRICS)}")


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
