"""The dev examples a finished run is judged on, and the problem's metric of its outputs: what
the sweep's report and the search tuned at the end of a budget (train/search_tuning.py) score."""

from __future__ import annotations

import dataclasses
import itertools
import os

import tensorflow as tf

from t2t_lite.data import shard_check
from t2t_lite.data.pipeline import parse_examples
from t2t_lite.run.run import Run

METRICS = ("bleu", "parse_f1", "accuracy")


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
    with shard_check.damaged_shards_named(run.data_dir):
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
