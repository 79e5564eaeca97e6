"""Evaluation during training: dev loss, perplexity and token accuracy, and optionally sacreBLEU
of greedy decoding on a dev subset."""

from __future__ import annotations

import functools
import math

import numpy as np
import tensorflow as tf

from t2t_lite.data import trim_ids
from t2t_lite.decode import transformer_step
from t2t_lite.decode.replicas import split_rows
from t2t_lite.train.step import sum_stats

FLOAT32_MAX = float(np.finfo(np.float32).max)

# Metrics that can choose the best checkpoint, and whether higher is better.
METRIC_DIRECTIONS = {
    "dev_loss": False,
    "dev_perplexity": False,
    "dev_accuracy": True,
    "dev_bleu": True,
}


def evaluate(trainer, dev_dataset, problem, config, bleu: bool = True) -> dict[str, float]:
    """Metrics over the dev split (or its first `config.eval_batches` batches per pipeline);
    dev_bleu too when `bleu` and config.bleu_examples.

    dev_loss is the mean negative log-likelihood per target token (exp of it is the perplexity);
    dev_smoothed_loss the label-smoothed one that training minimizes.
    """
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
    if bleu and config.bleu_examples:
        metrics["dev_bleu"] = dev_bleu(
            trainer.model, problem, config, local_strategy(trainer.strategy)
        )
    return {k: float(v) for k, v in metrics.items()}


def local_strategy(strategy):
    """The strategy dev BLEU's decoding splits its batches over: the training strategy when its
    replicas are all in this process (t2t-decode's path), else none."""
    if len(strategy.extended.worker_devices) != strategy.num_replicas_in_sync:
        return None
    return strategy


def dev_bleu(model, problem, config, strategy=None) -> float:
    """sacreBLEU of greedy decoding (beam 1) on the first `config.bleu_examples` dev examples,
    each batch split over the replicas of `strategy` as t2t-decode does."""
    import sacrebleu

    tokenizer = problem.tokenizer(config.data_dir)
    dataset = problem.make_dataset(
        config.data_dir, "dev", model.hparams, shuffle=False, repeat=False
    )
    # One trace for every batch shape, as t2t-decode's Translator: eager search is 5-10x slower.
    translate = tf.function(
        split_rows(
            strategy,
            functools.partial(transformer_step.translate_ids, model, beam_size=1, nbest=1),
        ),
        input_signature=[tf.TensorSpec([None, None], tf.int32)],
    )
    hypotheses, references = [], []
    for batch in dataset:
        result = translate(batch["inputs"])
        # Both end at their first EOS; padding follows it (search output and dataset alike).
        hypotheses.extend(trim_ids(result.ids[:, 0]).to_list())
        references.extend(trim_ids(batch["targets"]).to_list())
        if len(hypotheses) >= config.bleu_examples:
            break

    def detokenize(sequences):
        ragged = tf.ragged.constant(sequences[: config.bleu_examples], dtype=tf.int32)
        return [s.decode("utf-8") for s in tokenizer.decode(ragged).numpy()]

    return sacrebleu.corpus_bleu(detokenize(hypotheses), [detokenize(references)]).score
