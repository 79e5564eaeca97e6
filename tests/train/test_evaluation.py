"""Dev BLEU during training: ids are cut at EOS, detokenized with the problem's vocabulary and
scored with sacreBLEU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from typing import NamedTuple

import pytest
import tensorflow as tf

from t2t_lite.hparams import get_hparams
from t2t_lite.train.evaluation import dev_bleu


class _Result(NamedTuple):  # a nest tf.function can return, as the real SearchResult
    ids: tf.Tensor


def _fake_decoding(reverse: bool):
    """A stand-in t2t_lite.decode.transformer_step whose translate_ids answers by reversing (or
    copying) the source ids; the model is not used."""

    def translate_ids(model, inputs, *, beam_size, nbest):
        assert beam_size == 1 and nbest == 1
        lengths = tf.reduce_sum(tf.cast(inputs > 1, tf.int32), axis=1)
        symbols = tf.RaggedTensor.from_tensor(inputs, lengths=lengths)
        if reverse:  # each row's own symbols; padding stays after EOS, as a search leaves it
            flipped = tf.reverse_sequence(symbols.to_tensor(), lengths, seq_axis=1, batch_axis=0)
            symbols = tf.RaggedTensor.from_tensor(flipped, lengths=lengths)
        eos = tf.ones([tf.shape(inputs)[0], 1], tf.int32)
        ids = tf.concat([symbols, tf.RaggedTensor.from_tensor(eos)], axis=1).to_tensor()
        return _Result(ids=ids[:, None, :])

    return types.SimpleNamespace(translate_ids=translate_ids)


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
    from t2t_lite.train import evaluation

    problem, data_dir = reverse_data
    monkeypatch.setattr(evaluation, "transformer_step", _fake_decoding(reverse))
    model = types.SimpleNamespace(hparams=get_hparams("transformer_tiny"))
    config = types.SimpleNamespace(data_dir=data_dir, bleu_examples=25)
    score = dev_bleu(model, problem, config)
    if reverse:
        assert score == pytest.approx(100.0)
    else:
        assert 0.0 < score < 60.0


def test_dev_bleu_splits_its_batches_over_the_replicas_as_t2t_decode_does(tmp_path):
    """Training's dev BLEU under a two-device MirroredStrategy decodes each batch split over
    the replicas (t2t_lite.decode.replicas) and scores exactly what one device does."""
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run(
        [sys.executable, os.path.join(tests, "train_helpers.py"), "dev_bleu", str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["replicas"] == 2
    assert result["two"] == result["one"] and result["one"] > 10.0
