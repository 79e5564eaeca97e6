"""A tiny in-memory stand-in for algorithmic_reverse with the Problem interface training uses."""

from __future__ import annotations

import numpy as np
import tensorflow as tf


class _Tokenizer:
    def __init__(self, vocab_size: int):
        self.vocab_size = vocab_size


class FakeReverse:
    """Inputs: random symbols 2..vocab_size-1 then EOS; targets: the symbols reversed then EOS."""

    name = "fake_reverse"
    budget_ladder = ("transformer_tiny",)  # as Problem.budget_ladder, narrowest first

    def check_data_dir(self, data_dir: str, wanted_by: str = "--problem") -> None:
        """In-memory data: nothing to check."""

    def __init__(self, vocab_size: int = 12, max_symbols: int = 8, examples: int = 2000):
        self.vocab_size = vocab_size
        self.max_symbols = max_symbols
        self.examples = {"train": examples, "dev": 200}

    def generate_data(self, data_dir: str) -> None:
        del data_dir

    def output_size(self, data_dir: str) -> int:
        return 0  # the whole vocabulary

    def train_tokens(self, data_dir: str) -> int:
        del data_dir
        return int(np.count_nonzero(self.arrays("train")[1]))

    def tokenizer(self, data_dir: str) -> _Tokenizer:
        del data_dir
        return _Tokenizer(self.vocab_size)

    def arrays(self, split: str) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng({"train": 1, "dev": 2}[split])
        count, width = self.examples[split], self.max_symbols + 1
        inputs = np.zeros([count, width], np.int32)
        targets = np.zeros([count, width], np.int32)
        for i in range(count):
            n = rng.integers(1, self.max_symbols + 1)
            symbols = rng.integers(2, self.vocab_size, size=n)
            inputs[i, : n + 1] = np.append(symbols, 1)
            targets[i, : n + 1] = np.append(symbols[::-1], 1)
        return inputs, targets

    def make_dataset(self, data_dir, split, hparams, **options) -> tf.data.Dataset:
        """The problem's interface over in-memory arrays (options as `Problem.make_dataset`)."""
        input_context, seed = options.get("input_context"), options.get("seed", 0)
        inputs, targets = self.arrays(split)
        ds = tf.data.Dataset.from_tensor_slices({"inputs": inputs, "targets": targets})
        if input_context is not None:
            ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        if options["shuffle"]:
            ds = ds.shuffle(len(inputs), seed=seed, reshuffle_each_iteration=True)
        if options["repeat"]:
            ds = ds.repeat()
        return ds.batch(max(1, hparams.batch_size // (self.max_symbols + 1)))
