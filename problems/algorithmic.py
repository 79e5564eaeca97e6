"""Generated symbol sequences: copy and reverse. Tiny and fast, for tests and smoke runs.

Examples are space-separated symbols "0".."num_symbols-1" with lengths drawn uniformly from
[1, max_sequence_length]; each split has its own fixed seed, so datagen is deterministic.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np

from t2t_lite.hparams import SearchSettings
from t2t_lite.problems.base import Problem
from t2t_lite.problems.registry import register_problem

_SPLIT_SEEDS = {"train": 1, "dev": 2, "test": 3}


class AlgorithmicProblem(Problem):
    """Source: random symbols; target: `transform(source)`."""

    vocab_type: ClassVar[str] = "words"
    metric: ClassVar[str] = "accuracy"
    # The output is exactly as long as the input: greedy search, a little slack.
    decode_defaults: ClassVar[SearchSettings] = SearchSettings(
        beam_size=1, alpha=0.0, extra_length=5
    )
    tune_beams: ClassVar[tuple[int, ...]] = (4,)
    # One rung: the quick start's set, which learns these tasks in a minute.
    budget_ladder: ClassVar[tuple[str, ...]] = ("transformer_tiny",)
    max_input_length: ClassVar[int] = 64
    max_target_length: ClassVar[int] = 64
    examples_per_shard: ClassVar[int] = 2_000
    default_options: ClassVar[dict[str, Any]] = {
        "num_symbols": 10,
        "max_sequence_length": 20,
        "train_size": 10_000,
        "dev_size": 500,
        "test_size": 500,
    }
    option_help: ClassVar[dict[str, str]] = {
        "num_symbols": "Distinct symbols 0..num_symbols-1 (the vocabulary adds 3 reserved ids).",
        "max_sequence_length": "Longest example; lengths are drawn uniformly from [1, this].",
        "train_size": "Examples in the train split.",
        "dev_size": "Examples in the dev split.",
        "test_size": "Examples in the test split.",
    }

    def vocab_settings(self, options: dict[str, Any]) -> tuple[str, int]:
        return "words", options["num_symbols"] + 3

    def transform(self, symbols: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def vocab_words(self, options: dict[str, Any]) -> list[str]:
        return [str(i) for i in range(options["num_symbols"])]

    def vocab_texts(self, options: dict[str, Any]) -> Iterator[str]:
        return iter(())  # the word list is fixed

    def text_pairs(self, split: str, options: dict[str, Any]) -> Iterator[tuple[str, str]]:
        rng = np.random.default_rng(_SPLIT_SEEDS[split])
        for _ in range(options[f"{split}_size"]):
            length = rng.integers(1, options["max_sequence_length"] + 1)
            symbols = rng.integers(0, options["num_symbols"], size=length)
            yield " ".join(map(str, symbols)), " ".join(map(str, self.transform(symbols)))


@register_problem("algorithmic_copy")
class AlgorithmicCopy(AlgorithmicProblem):
    """Target = source."""

    def transform(self, symbols: np.ndarray) -> np.ndarray:
        return symbols


@register_problem("algorithmic_reverse")
class AlgorithmicReverse(AlgorithmicProblem):
    """Target = source reversed."""

    def transform(self, symbols: np.ndarray) -> np.ndarray:
        return symbols[::-1]
