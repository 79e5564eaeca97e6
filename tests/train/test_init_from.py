"""Fine-tuning (`t2t-train --init_from`): a new run starts from its parent's weights, with the
parent's vocabulary only and matching shapes only; text2text can reuse a parent's SentencePiece
model (`vocab_model`)."""

from __future__ import annotations

import dataclasses
import os

import pytest
import sentencepiece
from train_helpers import config as config_for

from t2t_lite.hparams import get_hparams
from t2t_lite.problems import get_problem
from t2t_lite.train import loop as training

FAST = "num_encoder_layers=1,num_decoder_layers=1,label_smoothing=0.0,batch_size=1024"
SIZES = dict(num_symbols=8, max_sequence_length=6, train_size=1500, dev_size=100, test_size=5)


def _train(data_dir: str, out: str, steps: int, overrides: str = "", **kwargs) -> dict:
    problem = get_problem("algorithmic_reverse")
    hparams = get_hparams("transformer_tiny", FAST + ",warmup_steps=40,learning_rate=0.5")
    hparams = hparams.override(overrides)
    config = config_for(out, steps, 1000, eval_every=10**6, **kwargs)
    config = dataclasses.replace(config, data_dir=data_dir, deterministic=False)
    return training.train(problem, config, hparams, "transformer_tiny")


@pytest.fixture(scope="module")
def parent(tmp_path_factory):
    """A parent run trained on reverse data, and new data of the same vocabulary."""
    root = tmp_path_factory.mktemp("finetune")
    problem = get_problem("algorithmic_reverse")
    problem.generate_data(str(root / "parent_data"), **SIZES)
    problem.generate_data(str(root / "new_data"), **{**SIZES, "max_sequence_length": 5})
    metrics = _train(str(root / "parent_data"), str(root / "parent"), 150)
    assert metrics["dev_loss"] < 1.0, metrics
    return root


def test_fine_tuning_starts_from_the_parents_dev_loss(parent):
    new_data = str(parent / "new_data")
    # A learning rate of ~0 for one step: the dev loss is the parent model's on the new data.
    still = "learning_rate=1e-9"
    tuned = _train(new_data, str(parent / "tuned"), 1, still, init_from=str(parent / "parent"))
    scratch = _train(new_data, str(parent / "scratch"), 1, still)
    assert tuned["dev_loss"] < 0.5 * scratch["dev_loss"], (tuned, scratch)
    # The parent's own evaluation on the new dev set (same weights): equal to rounding.
    parent_again = _train(
        new_data, str(parent / "again"), 1, still, init_from=str(parent / "parent" / "checkpoints")
    )
    assert parent_again["dev_loss"] == pytest.approx(tuned["dev_loss"], rel=1e-5)


def test_optimizer_state_is_fresh_unless_asked(parent):
    import tensorflow as tf

    from t2t_lite.train.init_from import initialize_from
    from t2t_lite.train.step import Trainer

    hparams = get_hparams("transformer_tiny", FAST + ",warmup_steps=40,learning_rate=0.5")
    vocab = get_problem("algorithmic_reverse").tokenizer(str(parent / "new_data")).path
    strategy = tf.distribute.get_strategy()
    fresh, carried = Trainer(hparams, 11, strategy), Trainer(hparams, 11, strategy)
    initialize_from(fresh, str(parent / "parent"), vocab)
    initialize_from(carried, str(parent / "parent"), vocab, init_optimizer=True)
    assert int(fresh.optimizer.iterations.numpy()) == 0
    assert int(carried.optimizer.iterations.numpy()) == 150


def test_other_vocabulary_and_shapes_are_refused(parent, tmp_path):
    other = str(tmp_path / "other_data")
    get_problem("algorithmic_reverse").generate_data(other, **{**SIZES, "num_symbols": 9})
    with pytest.raises(ValueError, match=r"was trained with the vocabulary .* which differs from"):
        _train(other, str(tmp_path / "a"), 1, init_from=str(parent / "parent"))
    new_data = str(parent / "new_data")
    with pytest.raises(ValueError, match=r"variables of this hparams set do not match .*kernel"):
        _train(new_data, str(tmp_path / "b"), 1, "d_ff=96", init_from=str(parent / "parent"))
    assert not os.path.exists(os.path.join(tmp_path, "b", "checkpoints", "checkpoint"))


def _write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def test_text2text_reuses_a_parents_sentencepiece_model(tmp_path):
    words = "the cat sat on a mat while dogs ran far away from home".split()
    lines = [" ".join(words[i % 7 : i % 7 + 5]) for i in range(60)]
    files = {}
    for name in ("train_src", "train_tgt", "dev_src", "dev_tgt"):
        files[name] = _write_lines(tmp_path / f"{name}.txt", lines)
    problem = get_problem("text2text")
    problem.generate_data(str(tmp_path / "parent"), vocab_size=60, **files)
    model = str(tmp_path / "parent" / "vocab.bpe.model")
    problem.generate_data(str(tmp_path / "child"), vocab_model=model, **files)
    with open(model, "rb") as a, open(tmp_path / "child" / "vocab.bpe.model", "rb") as b:
        assert a.read() == b.read()
    # A SentencePiece model with its own reserved ids (unk 0, bos 1, eos 2) is refused.
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_prefix=str(tmp_path / "foreign"),
        vocab_size=30,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    foreign = str(tmp_path / "foreign.model")
    with pytest.raises(ValueError, match=r"foreign.model: reserved ids pad/eos/unk/bos are"):
        problem.generate_data(str(tmp_path / "bad"), vocab_model=foreign, **files)
