"""Evaluation during training: dev loss, perplexity and token accuracy, and optionally sacreBLEU's
BLEU, chrF and TER of greedy decoding on a dev subset, decoded and scored as t2t-decode and
t2t-bleu do."""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

from t2t_lite.data import trim_ids
from t2t_lite.decode.translator import Translator
from t2t_lite.metrics.scores import corpus_scores
from t2t_lite.train.step import sum_stats

FLOAT32_MAX = float(np.finfo(np.float32).max)
# The scores of decoded dev sentences (--bleu_examples), as dev_NAME.
DEV_SCORES = ("bleu", "chrf", "ter")


def evaluate(trainer, dev_dataset, scorer: DevScorer | None = None) -> dict[str, float]:
    """Metrics over the dev split (or its first `config.eval_batches` batches per pipeline);
    dev_bleu, dev_chrf and dev_ter too from `scorer` (a `DevScorer` of trainer.model).

    dev_loss is the mean negative log-likelihood per target token (exp of it is the perplexity);
    dev_smoothed_loss the label-smoothed one that training minimizes.
    """
    # One trace for every batch the dataset can give (its element_spec: any batch size and
    # length), rather than one for the first batch's shape and another for the next one's.
    trainer.eval_step.get_concrete_function(dev_dataset.element_spec)
    totals = sum_stats(trainer.eval_step(batch) for batch in dev_dataset)
    tokens = max(totals.target_tokens, 1.0)
    metrics = {
        "dev_loss": totals.nll_sum / tokens,
        "dev_smoothed_loss": totals.smoothed_sum / tokens,
        "dev_accuracy": totals.correct_tokens / tokens,
        "dev_tokens": totals.target_tokens,
    }
    # Capped at float32's largest value: a diverged run's summaries and logs stay finite.
    metrics["dev_perplexity"] = min(math.exp(min(metrics["dev_loss"], 700.0)), FLOAT32_MAX)
    if scorer is not None:
        metrics.update(scorer())
    return {k: float(v) for k, v in metrics.items()}


def local_strategy(strategy):
    """The strategy dev BLEU's decoding splits its batches over: the training strategy when its
    replicas are all in this process (t2t-decode's path), else none (one device: nothing to
    split, and the default strategy has no `worker_devices`)."""
    replicas = strategy.num_replicas_in_sync
    if replicas == 1 or len(strategy.extended.worker_devices) != replicas:
        return None
    return strategy


def dev_texts(problem, data_dir: str, hparams, count: int) -> tuple[list[str], list[str]]:
    """(sources, references): the first `count` dev examples as text, detokenized from the dev
    split's ids in the order training's dev pipeline reads them."""
    tokenizer = problem.tokenizer(data_dir)
    dataset = problem.make_dataset(data_dir, "dev", hparams, shuffle=False, repeat=False)
    sources, targets = [], []
    for batch in dataset:
        # Both end at their first EOS; padding follows it.
        sources.extend(trim_ids(batch["inputs"]).to_list())
        targets.extend(trim_ids(batch["targets"]).to_list())
        if len(sources) >= count:
            break

    def detokenize(sequences):
        ragged = tf.ragged.constant(sequences[:count], dtype=tf.int32)
        return [s.decode("utf-8") for s in tokenizer.decode(ragged).numpy()]

    return detokenize(sources), detokenize(targets)


def dev_bleu(model, hparams, problem, config, strategy=None) -> float:
    """sacreBLEU's BLEU of greedy decoding of the dev subset (`dev_scores`)."""
    return dev_scores(model, hparams, problem, config, strategy)["dev_bleu"]


def dev_scores(model, hparams, problem, config, strategy=None) -> dict[str, float]:
    """dev_bleu, dev_chrf and dev_ter of `model`'s weights now (`DevScorer`)."""
    return DevScorer(model, hparams, problem, config, strategy)()


class DevScorer:
    """dev_bleu, dev_chrf and dev_ter (sacreBLEU: t2t_lite.metrics.scores) of greedy decoding of
    the first `config.bleu_examples` dev examples by `model`'s weights at each call, decoded as
    t2t-decode decodes: its `Translator`, with the problem's search settings at beam 1 and
    alpha 0 (the cheapest search, which the budget's end-of-run choice was measured with), its
    decoding constraint and its postprocessing, each batch split over the replicas of
    `strategy`. `hparams` are the run's, which batch the dev split as training's evaluation
    does. The dev texts are read and the search traced once, for every call: a run's
    evaluations, and the end-of-run choice's candidates (weights assigned to one model)."""

    def __init__(self, model, hparams, problem, config, strategy=None):
        data_dir = config.data_dir
        self.sources, self.references = dev_texts(problem, data_dir, hparams, config.bleu_examples)
        tokenizer = problem.tokenizer(data_dir)
        settings = problem.decode_defaults.override(beam_size=1, alpha=0.0, nbest=1, sampling=False)
        constraint = None
        if settings.constrained:
            constraint = problem.decode_constraint(data_dir, tokenizer)
        self.translator = Translator(
            model, tokenizer, settings, postprocess=problem.postprocess, constraint=constraint,
            strategy=strategy,
        )  # fmt: skip

    def __call__(self) -> dict[str, float]:
        names = [f"dev example {i + 1}" for i in range(len(self.sources))]
        found = self.translator.hypotheses(self.sources, names, log_progress=False)
        hypotheses = [hyps[0].text if hyps else "" for hyps in found]
        scored = corpus_scores(hypotheses, [self.references], DEV_SCORES)
        return {f"dev_{s.name}": s.score for s in scored}
