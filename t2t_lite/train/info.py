"""What t2t-info prints: a named set resolved, its parameter count and FLOPs; the registries; the
budget's choice of model for a data directory on this machine."""

from __future__ import annotations

import json
import os
import tempfile

from t2t_lite.hparams import HPARAMS_SETS, get_hparams
from t2t_lite.model import footprint
from t2t_lite.model.flops import forward_flops_per_token


def count_parameters(hparams, vocab_size: int) -> int:
    """The parameters of the model, counted from its hparams (`footprint.parameter_count`, the
    number Keras counts on the built model) without building it."""
    return footprint.parameter_count(hparams, vocab_size)


def describe(hparams_set: str, overrides: str, vocab_size: int, length: int) -> str:
    hparams = get_hparams(hparams_set, overrides)
    params = count_parameters(hparams, vocab_size)
    flops = forward_flops_per_token(hparams, vocab_size, length, length)
    return "\n".join(
        [
            f"hparams set: {hparams_set}" + (f" with {overrides}" if overrides else ""),
            hparams.to_json(),
            f"vocab_size: {vocab_size}",
            f"trainable parameters: {params:,} ({params / 1e6:.1f}M)",
            f"forward FLOPs per target token (source = target = {length} tokens): "
            f"{flops:,.0f} ({flops / 1e6:.1f} MFLOPs; training about 3x)",
        ]
    )


def list_registries() -> str:
    from t2t_lite.problems import PROBLEMS

    lines = [f"hparams sets ({len(HPARAMS_SETS)}):"]
    lines += [f"  {name}" for name in HPARAMS_SETS.names()]
    lines += [f"problems ({len(PROBLEMS)}):"]
    lines += [f"  {name}" for name in PROBLEMS.names()]
    return "\n".join(lines)


def describe_choice(data_dir: str, train_minutes: float, overrides: str, problem_name=None) -> str:
    """The hparams set t2t-train --train_minutes would choose on this machine for `data_dir`
    (train/model_probe.py), with each timed candidate, as its log line and budget.json say it."""
    from t2t_lite.problems import get_problem
    from t2t_lite.problems.base import STATE
    from t2t_lite.train.config import TrainConfig
    from t2t_lite.train.model_probe import choose_on_this_machine, set_training_threads

    if problem_name is None:
        path = os.path.join(data_dir, STATE)
        if not os.path.isfile(path):
            raise ValueError(f"{path} not found: give --problem, or a data_dir of t2t-datagen")
        with open(path) as f:
            problem_name = json.load(f)["problem"]
    problem = get_problem(problem_name)
    problem.check_data_dir(data_dir)
    with tempfile.TemporaryDirectory() as output_dir:
        config = TrainConfig(
            output_dir, data_dir, train_minutes=train_minutes, hparams_overrides=overrides
        )
        set_training_threads(problem, config, None)  # the probes time t2t-train's steps
        choice = choose_on_this_machine(problem, config)
    return "\n".join([choice.line(), json.dumps(choice.to_json(), indent=2)])
