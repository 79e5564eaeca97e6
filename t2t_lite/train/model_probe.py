"""The budget's choice of model on this machine: each candidate's training step timed on the
run's data (`probe`), the rule of train/model_choice.py applied to what it measured, and the
hparams set a t2t-train without `--hparams_set` trains (`hparams_set_for_run`).
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import json
import os
import time

from absl import logging

from t2t_lite.hparams import get_hparams
from t2t_lite.hparams.hparams_base import override_keys
from t2t_lite.run.layout import BUDGET_FILE, RUN_INFO_FILE
from t2t_lite.runtime import atomic_io
from t2t_lite.train import model_choice
from t2t_lite.train.budget import MODEL_CHOICE
from t2t_lite.train.config import TrainConfig

# What t2t-train trains without --hparams_set or --train_minutes: tensor2tensor's default.
DEFAULT_SET = "transformer_base"


def probe(name: str, problem, config: TrainConfig, strategy=None) -> model_choice.Measured:
    """Times hparams set `name` (with config.hparams_overrides, as the run would train it) for
    a few training steps on config.data_dir's train split, on this process' devices."""
    import tensorflow as tf

    from t2t_lite.model.ensemble import parameter_count
    from t2t_lite.train import loop
    from t2t_lite.train.step import Trainer

    started = time.monotonic()
    strategy = strategy or tf.distribute.get_strategy()
    config_for, hparams = loop.resolve_run(config, get_hparams(name, config.hparams_overrides))
    hparams = loop.resolved_precision(hparams)
    info = loop.run_info(problem, config_for, hparams, name)
    held = {"trainer": Trainer(hparams, info.vocab_size, strategy, info.output_vocab_size)}
    held["iterator"] = loop.training_stream(problem, config_for, hparams, strategy, 0)

    def step() -> float:
        return float(held["trainer"].train_step(held["iterator"])["target_tokens"].numpy())

    rate, tokens = model_choice.time_steps(step)
    parameters = parameter_count(held["trainer"].model)
    # The model, its optimizer and the input pipeline hold reference cycles: freed now rather
    # than at some later collection. (The process stays larger all the same: on lohelp en-de a
    # run after three probes held 1.8 GB resident where one without them held 1.4; its steps
    # were as fast.)
    held.clear()
    gc.collect()
    return model_choice.Measured(
        name=name,
        parameters=parameters,
        steps_per_second=rate,
        tokens_per_step=tokens,
        seconds=time.monotonic() - started,
    )


def choose_on_this_machine(problem, config: TrainConfig, strategy=None) -> model_choice.Choice:
    """The choice for `config.train_minutes` on config.data_dir, probing from the widest of the
    problem's ladder down (`model_choice.choose`; a narrower one passed over unprobed where even
    its `best_rate` fails); each candidate trains for the budget's training share (less what the
    search tuning keeps) less the probes' seconds so far."""
    from t2t_lite.train import loop, search_tuning

    def train_seconds(name: str) -> float:
        _, hparams = loop.resolve_run(config, get_hparams(name, config.hparams_overrides))
        return 60.0 * config.train_minutes * (1.0 - search_tuning.kept_share(problem, hparams))

    ladder = problem.budget_ladder
    fixed = sizes_overridden(ladder, config.hparams_overrides)
    if fixed:
        raise ValueError(
            f"--hparams sets {', '.join(fixed)}, in which the budget's candidates "
            f"({', '.join(ladder)}) differ, so all of them would train one model: name the set "
            f"with --hparams_set (e.g. --hparams_set={ladder[0]} --hparams=...), or leave "
            f"{', '.join(fixed)} to the budget's choice"
        )
    return model_choice.untimed(ladder, config.train_minutes) or model_choice.choose(
        ladder,
        lambda name: probe(name, problem, config, strategy),
        train_seconds,
        problem.train_tokens(config.data_dir),
        functools.partial(best_rate, problem, config),
    )


def best_rate(
    problem, config: TrainConfig, name: str, wider: model_choice.Measured
) -> model_choice.Measured:
    """The fastest plausible rate of hparams set `name` on this machine, from a probed wider
    candidate: its steps/s times their ratio of forward FLOPs per token, times
    model_choice.RATE_MARGIN (`forecast.estimate_by_flops`, which also scales steps and their
    target tokens by the two sets' batch sizes)."""
    from t2t_lite.train.forecast import estimate_by_flops

    overrides = config.hparams_overrides
    return estimate_by_flops(
        name,
        overrides,
        problem.tokenizer(config.data_dir).vocab_size,
        get_hparams(wider.name, overrides),
        wider.steps_per_second * model_choice.RATE_MARGIN,
        wider.tokens_per_step,
    )


def sizes_overridden(ladder: tuple[str, ...], overrides: str) -> list[str]:
    """The hyperparameters `overrides` (--hparams) sets among those the sets of `ladder` differ
    in (for translation d_model and d_ff): with any of them set, the candidates are no longer
    the ladder's models, and the choice among them means nothing."""
    sets = [dataclasses.asdict(get_hparams(name)) for name in ladder]
    differ = {key for key in sets[0] if len({repr(values[key]) for values in sets}) > 1}
    return sorted(override_keys(overrides) & differ)


def recorded_choice(output_dir: str) -> dict | None:
    """The choice recorded in output_dir/budget.json, if any."""
    path = os.path.join(output_dir, BUDGET_FILE)
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return json.load(f).get(MODEL_CHOICE)


def record_choice(output_dir: str, choice: model_choice.Choice) -> None:
    """Writes the choice to output_dir/budget.json (the clock's records keep it)."""
    os.makedirs(output_dir, exist_ok=True)
    atomic_io.write_json(os.path.join(output_dir, BUDGET_FILE), {MODEL_CHOICE: choice.to_json()})


@dataclasses.dataclass(frozen=True)
class RunSet:
    """The hparams set a run trains, and the budget seconds its choice spent (0 unless it
    probed now)."""

    name: str
    probe_seconds: float = 0.0


def hparams_set_for_run(problem, config: TrainConfig, given: str | None, strategy=None) -> RunSet:
    """The hparams set a t2t-train run trains: `given` (--hparams_set) if set; else a resumed
    run's own (hparams.json), whatever the machine is now; else with --train_minutes the
    budget's choice on this machine (logged, and recorded in budget.json), DEFAULT_SET without.
    In a multi-worker run the chief probes and every worker trains its choice."""
    if given:
        return RunSet(given)
    resumed = _resumed_set(config.output_dir)
    if resumed:
        info_path = os.path.join(config.output_dir, RUN_INFO_FILE)
        logging.info("model choice: %s, the set of the run in %s (resumed)", resumed, info_path)
        return RunSet(resumed)
    if not config.train_minutes:
        return RunSet(DEFAULT_SET)
    problem.check_data_dir(config.data_dir)
    consensus = _consensus(strategy)
    index, seconds = 0, 0.0
    if consensus.chief:
        choice = choose_on_this_machine(problem, config)
        model_choice.log_choice(choice)
        record_choice(config.output_dir, choice)
        index = problem.budget_ladder.index(choice.hparams_set)
        seconds = choice.probe_seconds
    index, seconds = round(consensus.share(float(index))), consensus.share(seconds)
    name = problem.budget_ladder[index]
    if not consensus.chief:
        logging.info("model choice: %s, the chief's", name)
    return RunSet(name, seconds)


def widest_set(problem, config: TrainConfig, given: str | None) -> str:
    """The widest set a t2t-train run may train, known before anything of TensorFlow runs (no
    probe): `given`, a resumed run's own, with --train_minutes the widest of the budget's
    ladder, else DEFAULT_SET."""
    unprobed = problem.budget_ladder[-1] if config.train_minutes else DEFAULT_SET
    return given or _resumed_set(config.output_dir) or unprobed


def set_training_threads(problem, config: TrainConfig, given: str | None) -> None:
    """Threads per op for this run (config.intra_threads, else the rule of
    t2t_lite.runtime.threads.training_threads_per_op for the width of `widest_set`), set
    before TensorFlow runs an op: t2t-train calls it before its distribution strategy."""
    from t2t_lite.runtime import threads

    d_model = get_hparams(widest_set(problem, config, given), config.hparams_overrides).d_model
    per_op = threads.training_threads_per_op(d_model, config.intra_threads)
    if per_op:
        threads.set_threads_per_op(per_op, f"--intra_threads={per_op}")
        logging.info(
            "threads per op: %d of %d CPUs (a model %d wide; --intra_threads=0: every CPU)",
            per_op, threads.cpu_count(), d_model,
        )  # fmt: skip


def _resumed_set(output_dir: str) -> str | None:
    """The hparams set of the run in `output_dir` (hparams.json), None where there is none."""
    info_path = os.path.join(output_dir, RUN_INFO_FILE)
    if not os.path.isfile(info_path):
        return None
    with open(info_path) as f:
        return json.load(f)["hparams_set"]


def _consensus(strategy):
    """The workers of `strategy` agreeing on the chief's values (one worker: its own)."""
    from t2t_lite.runtime import distribute
    from t2t_lite.train.consensus import Consensus

    if strategy is None:
        return Consensus(None, 1, chief=True)
    workers = distribute.num_input_pipelines(strategy)
    return Consensus(strategy, workers, distribute.is_chief(strategy))
