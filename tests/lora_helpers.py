"""Tiny adapter runs for the LoRA tests: a parent of algorithmic_reverse (a random
transformer_tiny of 1 + 1 layers saved as a checkpoint, in a second) and rank-R adapters
trained over it for a few steps by `t2t_lite.train.loop.train`, as t2t-train --lora_rank does."""

from __future__ import annotations

import dataclasses
import os

import keras
import tensorflow as tf
from train_helpers import config as config_for

from t2t_lite.hparams import get_hparams
from t2t_lite.model import Transformer
from t2t_lite.problems import get_problem
from t2t_lite.run.layout import CHECKPOINT_DIR
from t2t_lite.run.run_info import RunInfo
from t2t_lite.runtime.atomic_io import file_sha256

HPARAMS = (
    "num_encoder_layers=1,num_decoder_layers=1,label_smoothing=0.0,batch_size=512,"
    "learning_rate_schedule=constant,learning_rate=0.05,dropout=0.0"
)
SIZES = dict(num_symbols=8, max_sequence_length=6, train_size=400, dev_size=40, test_size=5)
PROBLEM = "algorithmic_reverse"


def parent_run(root: str, seed: int = 7, name: str = "parent") -> tuple[str, str]:
    """(data_dir, output_dir) of a random parent in root/name over root/data (made once)."""
    problem = get_problem(PROBLEM)
    data_dir, output_dir = os.path.join(root, "data"), os.path.join(root, name)
    if not os.path.isdir(data_dir):
        problem.generate_data(data_dir, **SIZES)
    hparams = get_hparams("transformer_tiny", HPARAMS)
    vocab = problem.tokenizer(data_dir)
    keras.utils.set_random_seed(seed)
    model = Transformer.from_hparams(hparams, vocab.vocab_size)
    model.build()
    info = RunInfo(PROBLEM, data_dir, "transformer_tiny", hparams, vocab.vocab_size)
    info = dataclasses.replace(info, vocab_sha256=file_sha256(vocab.path))
    info.save(output_dir)
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=model), os.path.join(output_dir, CHECKPOINT_DIR), 1
    )
    manager.save()
    return data_dir, output_dir


def adapter_run(
    data_dir: str, parent: str, output_dir: str, rank: int, steps: int = 8, overrides: str = ""
) -> dict:
    """Trains a rank-`rank` adapter over `parent` for `steps` steps (`overrides` on top of
    HPARAMS); returns its metrics."""
    from t2t_lite.train import loop as training

    hparams = get_hparams("transformer_tiny", HPARAMS).override(overrides)
    config = config_for(output_dir, steps, steps, eval_every=steps, init_from=parent)
    config = dataclasses.replace(config, data_dir=data_dir, lora_rank=rank)
    return training.train(get_problem(PROBLEM), config, hparams, "transformer_tiny")
