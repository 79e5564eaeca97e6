"""Dev BLEU during training: the dev examples decoded by t2t-decode's Translator and scored by
t2t_lite.metrics.bleu, equal to what t2t-decode and t2t-bleu give for the same checkpoint."""

from __future__ import annotations

import os
import subprocess
import sys
import types

import numpy as np
import pytest
import tensorflow as tf
from command_helpers import run_json
from decoding_helpers import t2t_decode

from t2t_lite.hparams import get_hparams
from t2t_lite.search.contract import SearchResult
from t2t_lite.train.evaluation import DevScorer, dev_bleu, dev_scores, dev_texts


def _fake_search(reverse: bool):
    """A stand-in for t2t_lite.decode.translator.search_function whose search answers by reversing
    (or copying) the source ids; the model is not used. It checks the settings are greedy."""

    def search_function(model, settings, constraint=None, fixed_shapes=False, **given):
        assert settings.beam_size == 1 and settings.alpha == 0.0 and settings.nbest == 1
        assert not given["guided"] and given["shortlist"] is None
        return translate_ids

    def translate_ids(inputs):
        lengths = tf.reduce_sum(tf.cast(inputs > 1, tf.int32), axis=1)
        symbols = tf.RaggedTensor.from_tensor(inputs, lengths=lengths)
        if reverse:  # each row's own symbols; padding stays after EOS, as a search leaves it
            flipped = tf.reverse_sequence(symbols.to_tensor(), lengths, seq_axis=1, batch_axis=0)
            symbols = tf.RaggedTensor.from_tensor(flipped, lengths=lengths)
        eos = tf.ones([tf.shape(inputs)[0], 1], tf.int32)
        ids = tf.concat([symbols, tf.RaggedTensor.from_tensor(eos)], axis=1).to_tensor()
        zeros = tf.zeros([tf.shape(inputs)[0], 1])
        return SearchResult(ids=ids[:, None, :], scores=zeros, log_probs=zeros)

    return search_function


@pytest.fixture(scope="module")
def reverse_data(tmp_path_factory):
    from t2t_lite import problems

    data_dir = str(tmp_path_factory.mktemp("data"))
    problem = problems.get_problem("algorithmic_reverse")
    problem.generate_data(
        data_dir, num_symbols=8, max_sequence_length=6, train_size=20, dev_size=30
    )
    return problem, data_dir


@pytest.mark.parametrize("reverse", [True, False])
def test_dev_bleu_scores_decoded_dev_examples(reverse_data, monkeypatch, reverse):
    from t2t_lite.decode import translator as runner

    problem, data_dir = reverse_data
    monkeypatch.setattr(runner, "search_function", _fake_search(reverse))
    vocab_size = problem.tokenizer(data_dir).vocab_size
    model = types.SimpleNamespace(max_positions=256, vocab_size=vocab_size)
    config = types.SimpleNamespace(data_dir=data_dir, bleu_examples=25)
    score = dev_bleu(model, get_hparams("transformer_tiny"), problem, config)
    scores = dev_scores(model, get_hparams("transformer_tiny"), problem, config)
    assert scores["dev_bleu"] == score
    if reverse:
        assert score == pytest.approx(100.0)
        assert scores["dev_chrf"] == pytest.approx(100.0) and scores["dev_ter"] == 0.0
    else:
        assert 0.0 < score < 60.0
        # the targets' symbols, unreversed: every character there, in another order
        assert 0.0 < scores["dev_chrf"] < 100.0 and scores["dev_ter"] > 0.0


def test_a_dev_scorer_scores_the_weights_of_each_call_with_one_trace(reverse_data):
    """The end-of-run choice assigns each candidate's weights to one model and calls one
    `DevScorer`: each call scores as a fresh `dev_scores` of those weights, and the search is
    traced once."""
    from t2t_lite.model.transformer import Transformer

    problem, data_dir = reverse_data
    hparams = get_hparams("transformer_tiny", "num_encoder_layers=1,num_decoder_layers=1")
    model = Transformer.from_hparams(hparams, problem.tokenizer(data_dir).vocab_size)
    model.build()
    config = types.SimpleNamespace(data_dir=data_dir, bleu_examples=25)
    scorer = DevScorer(model, hparams, problem, config)
    first, weights = scorer(), model.get_weights()
    rng = np.random.default_rng(0)
    model.set_weights([w + rng.normal(0.0, 0.5, w.shape).astype(w.dtype) for w in weights])
    moved = scorer()
    assert moved == dev_scores(model, hparams, problem, config) and moved != first
    model.set_weights(weights)
    assert scorer() == first
    assert scorer.translator._search.experimental_get_tracing_count() == 1


def test_an_evaluation_traces_its_step_once_and_sums_every_batch():
    """evaluate() traces the evaluation step once for the dev set's element_spec, not once per
    batch shape, and its metrics are the per-batch statistics of the model run eagerly."""
    from t2t_lite.train.evaluation import evaluate
    from t2t_lite.train.step import Trainer, batch_stats, sum_stats

    hparams = get_hparams("transformer_tiny", "num_encoder_layers=1,num_decoder_layers=1")
    trainer = Trainer(hparams, 12, tf.distribute.get_strategy())
    rng = np.random.default_rng(0)
    batches = [  # three shapes: rows and lengths differ, and so does the padding
        {name: rng.integers(2, 12, (rows, width)) for name in ("inputs", "targets")}
        for rows, width in ((5, 7), (3, 4), (2, 9))
    ]
    for batch in batches:
        batch["targets"][:, -2:] = 0
    dev = tf.data.Dataset.from_generator(
        lambda: iter(batches),
        output_signature={k: tf.TensorSpec([None, None], tf.int64) for k in ("inputs", "targets")},
    )
    metrics = evaluate(trainer, dev)
    assert trainer.eval_step.experimental_get_tracing_count() == 1
    eager = [{k: tf.constant(v) for k, v in batch.items()} for batch in batches]
    smoothing = hparams.label_smoothing
    totals = sum_stats(batch_stats(trainer.model(b, training=False), b, smoothing) for b in eager)
    assert totals.target_tokens == metrics["dev_tokens"] == 5 * 5 + 3 * 2 + 2 * 7
    assert metrics["dev_loss"] == pytest.approx(totals.nll_sum / totals.target_tokens, rel=1e-5)
    assert metrics["dev_smoothed_loss"] == pytest.approx(totals.smoothed_sum / totals.target_tokens)
    assert metrics["dev_accuracy"] == pytest.approx(totals.correct_tokens / totals.target_tokens)


def test_dev_bleu_splits_its_batches_over_the_replicas_as_t2t_decode_does(tmp_path):
    """Training's dev BLEU under a two-device MirroredStrategy decodes each batch split over
    the replicas (t2t_lite.decode.replicas) and scores exactly what one device does."""
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    result = run_json(
        os.path.join(tests, "train_helpers.py"), "dev_bleu", str(tmp_path), timeout=600
    )
    assert result["replicas"] == 2
    assert result["two"] == result["one"] and result["one"] > 10.0


def test_dev_bleu_equals_t2t_decode_and_t2t_bleu(tmp_path):
    """The dev BLEU a run logs is what t2t-decode (greedy, in this process) and t2t-bleu give
    for the same checkpoint and dev examples."""
    from t2t_lite import problems
    from t2t_lite.train import loop as training

    problem = problems.get_problem("algorithmic_reverse")
    data_dir = str(tmp_path / "data")
    problem.generate_data(data_dir, max_sequence_length=6, train_size=2000, dev_size=40)
    overrides = "warmup_steps=60,learning_rate=0.6"
    config = training.TrainConfig(
        output_dir=str(tmp_path / "run"), data_dir=data_dir, train_steps=90, eval_every=90,
        save_every=90, log_every=90, bleu_examples=40, hparams_overrides=overrides,
    )  # fmt: skip
    hparams = get_hparams("transformer_tiny", overrides)
    logged = training.train(problem, config, hparams, "transformer_tiny")["dev_bleu"]
    sources, references = dev_texts(problem, data_dir, hparams, 40)
    assert len(sources) == len(references) == 40
    (tmp_path / "dev.src").write_text("".join(f"{line}\n" for line in sources))
    (tmp_path / "dev.ref").write_text("".join(f"{line}\n" for line in references))
    run = str(tmp_path / "run")
    checkpoint = str(tmp_path / "run" / "checkpoints")
    decoded = t2t_decode(
        tmp_path / "dev.src", tmp_path / "dev.out", output_dir=run, checkpoint=checkpoint,
        beam_size=1, alpha=0.0,
    )  # fmt: skip
    assert len(decoded) == 40
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    binaries = os.path.dirname(sys.executable)
    scored = subprocess.run(
        [os.path.join(binaries, "t2t-bleu"), f"--translation={tmp_path / 'dev.out'}",
         f"--reference={tmp_path / 'dev.ref'}", "--score_only"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert scored.returncode == 0, scored.stderr[-3000:]
    sacre = float(scored.stdout.split()[0])
    assert logged > 10.0, logged  # the model has learned something: the check is not 0 == 0
    assert sacre == pytest.approx(round(logged, 2), abs=0.006), (sacre, logged)


def test_a_decoded_best_metric_needs_decoded_examples():
    from t2t_lite.train.config import TrainConfig

    with pytest.raises(ValueError, match="--best_metric=dev_chrf needs --bleu_examples > 0"):
        TrainConfig("out", "data", best_metric="dev_chrf")
    assert TrainConfig("out", "data", best_metric="dev_ter", bleu_examples=10).bleu_examples == 10
