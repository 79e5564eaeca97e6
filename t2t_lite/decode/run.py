"""The one way to restore a training run: `Run.restore(output_dir)`.

`t2t-decode`, `t2t-export`, `t2t-visualize` and the Python API all come through here, so they
restore the same weights, read the same vocabulary and search with the same settings: the
problem's `decode_defaults` with the caller's values on top, checked once.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any

import tensorflow as tf
from absl import logging

from t2t_lite.data import Tokenizer
from t2t_lite.decode.constraint import Constraint
from t2t_lite.hparams import HParams, SearchSettings
from t2t_lite.model import Transformer
from t2t_lite.problems import Problem, get_problem
from t2t_lite.runtime.run_info import RunInfo, resolve_checkpoint


def build_model(info: RunInfo) -> Transformer:
    """A built (weights created) Transformer for the run."""
    model = Transformer(info.hparams, info.vocab_size, output_vocab_size=info.output_vocab_size)
    model.build()
    return model


def restore_model(
    output_dir: str, checkpoint: str | None = None
) -> tuple[Transformer, RunInfo, str]:
    """(model, run info, checkpoint path) with the weights of `checkpoint` (default: the newest
    of output_dir/averaged and output_dir/checkpoints); the model part of `Run.restore`."""
    info = RunInfo.load(output_dir)
    model = build_model(info)
    path = resolve_checkpoint(output_dir, checkpoint)
    status = tf.train.Checkpoint(model=model).restore(path)
    status.expect_partial().assert_existing_objects_matched()
    return model, info, path


@dataclasses.dataclass(frozen=True)
class Run:
    """A restored training run: its model, problem, vocabulary and search settings.

    `search` is resolved: the problem's `decode_defaults` with the given values on top, checked
    against the model's positions. `constraint` holds the problem's decoding constraint when
    `search.constrained`.
    """

    output_dir: str
    info: RunInfo
    checkpoint: str
    model: Transformer
    problem: Problem
    data_dir: str
    tokenizer: Tokenizer
    search: SearchSettings

    @property
    def hparams(self) -> HParams:
        return self.info.hparams

    @classmethod
    def restore(
        cls,
        output_dir: str,
        checkpoint: str | None = None,
        data_dir: str | None = None,
        search: Mapping[str, Any] | None = None,
    ) -> Run:
        """Restores `output_dir` (written by t2t-train).

        Args:
          checkpoint: a checkpoint path or folder; default the newest of averaged/ and
            checkpoints/.
          data_dir: the folder with the vocabulary; default the one the run trained on.
          search: search settings to use instead of the problem's defaults (None values are
            ignored, so absl flags can be passed as they are).
        """
        model, info, path = restore_model(output_dir, checkpoint)
        logging.info("restored %s (problem %s, hparams %s)", path, info.problem, info.hparams_set)
        problem = get_problem(info.problem)
        data_dir = data_dir or info.data_dir
        tokenizer = problem.tokenizer(data_dir)
        if tokenizer.vocab_size != info.vocab_size:
            raise ValueError(
                f"the vocabulary in {data_dir} has {tokenizer.vocab_size} ids but the model in "
                f"{output_dir} was trained with {info.vocab_size}; pass the run's --data_dir"
            )
        settings = problem.decode_defaults.override(**dict(search or {}))
        settings.check(info.hparams.max_positions)
        run = cls(output_dir, info, path, model, problem, data_dir, tokenizer, settings)
        if settings.constrained and run.constraint is None:
            raise ValueError(f"--constrained: problem {problem.name} has no decoding constraint")
        logging.info("search: %s", settings)
        return run

    @functools.cached_property
    def constraint(self) -> Constraint | None:
        """The problem's decoding constraint, or None when the search is unconstrained."""
        if not self.search.constrained:
            return None
        return self.problem.decode_constraint(self.data_dir, self.tokenizer)

    def describe(self) -> dict[str, Any]:
        """JSON-able facts: run, checkpoint, problem, hparams set, data_dir and settings."""
        return {
            "output_dir": self.output_dir,
            "checkpoint": self.checkpoint,
            "problem": self.problem.name,
            "hparams_set": self.info.hparams_set,
            "data_dir": self.data_dir,
            "vocab_size": self.info.vocab_size,
            "settings": self.search.to_dict(),
        }
