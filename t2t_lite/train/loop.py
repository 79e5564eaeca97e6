"""t2t-train's engine: strategy, datasets, model and optimizer, the checkpoints restored or
initialized, then the step loop (train/step_loop.py) with its saves, evaluations and progress.

The input position is not stored: the training stream is a deterministic function of the
seed, and a resumed run skips the batches the restored steps consumed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os

import keras
import tensorflow as tf
from absl import logging

from t2t_lite.data import shard_check
from t2t_lite.hparams import HParams
from t2t_lite.model import footprint
from t2t_lite.problems import datagen_options
from t2t_lite.run.adapter import AdapterRecord, is_adapter_run

# What t2t-train needs of the run's infrastructure, re-exported for it.
from t2t_lite.run.checkpoints import CheckpointError as CheckpointError
from t2t_lite.run.checkpoints import CheckpointKeeper
from t2t_lite.run.layout import (
    CHECKPOINT_DIR,
    LAST_CHECKPOINT_FILE,
    MACHINES_FILE,
    RUN_INFO_FILE,
)
from t2t_lite.run.lock import run_lock
from t2t_lite.run.run_info import RunInfo
from t2t_lite.runtime import atomic_io, cluster, cpu, distribute
from t2t_lite.runtime.atomic_io import file_sha256
from t2t_lite.runtime.distribute import STRATEGIES as STRATEGIES
from t2t_lite.runtime.distribute import cluster_strategy as cluster_strategy
from t2t_lite.runtime.distribute import create_strategy as create_strategy
from t2t_lite.runtime.error_frames import frames_cleared
from t2t_lite.runtime.precision import AUTO, resolve_precision
from t2t_lite.train import search_tuning
from t2t_lite.train.budget import BudgetPolicy, budget_hparams
from t2t_lite.train.config import ConflictingRunError, TrainConfig
from t2t_lite.train.consensus import Consensus
from t2t_lite.train.forecast import Forecast
from t2t_lite.train.init_from import initialize_from, prepare_adapter
from t2t_lite.train.late_dropout import LateDropout, dropout_hparams
from t2t_lite.train.step import Trainer
from t2t_lite.train.step_loop import StepLoop


def _check_run_info(info: RunInfo, output_dir: str) -> None:
    """Writes output_dir/hparams.json, or checks that a resumed run's flags agree with it."""
    if os.path.exists(os.path.join(output_dir, RUN_INFO_FILE)):
        previous = RunInfo.load(output_dir)
        if previous.problem != info.problem:  # (its vocabulary and hparams differ as a result)
            raise ConflictingRunError(
                f"{output_dir} holds a run trained on problem {previous.problem} (its "
                f"{RUN_INFO_FILE}); this run is problem {info.problem}: train it into another "
                f"--output_dir, or resume that run with --problem={previous.problem}"
            )
        differences = previous.diff(info)
        if not previous.problem_options:  # a run from before the options were recorded
            differences = [d for d in differences if not d.startswith("problem_options.")]
        if previous.vocab_sha256 != info.vocab_sha256:  # a vocabulary swapped under the run
            differences = [d for d in differences if not d.startswith("vocab_sha256")]
            if previous.vocab_sha256:  # ("": a run from before the hash was recorded)
                raise ConflictingRunError(
                    f"{info.data_dir}: its vocabulary (sha256 {info.vocab_sha256[:16]}) is not "
                    f"the one the run in {output_dir} trained with (sha256 "
                    f"{previous.vocab_sha256[:16]} in {RUN_INFO_FILE}): the data_dir was "
                    "regenerated or replaced; resume with the data it trained on, or start a "
                    "new --output_dir"
                )
        if differences:
            raise ConflictingRunError(
                f"{output_dir}/hparams.json (saved != requested) differs from this run's flags: "
                + "; ".join(differences)
                + ". Use the saved flags to resume, or a new --output_dir."
            )
    else:
        info.save(output_dir)


def training_stream(problem, config: TrainConfig, hparams: HParams, strategy, skip: int):
    """The training batches, each pipeline skipping the `skip` batches already consumed."""

    def dataset_fn(context):
        ds = problem.make_dataset(
            config.data_dir,
            "train",
            hparams,
            shuffle=True,
            repeat=True,
            seed=config.seed,
            input_context=context,
        )
        return ds.skip(skip) if skip else ds

    return iter(strategy.distribute_datasets_from_function(dataset_fn))


def _configure(config: TrainConfig) -> None:
    if config.deterministic:
        tf.config.experimental.enable_op_determinism()

    # Weights, dropout and the data order all follow the seed. (The model takes its dtype
    # policy from hparams.precision, so no global policy is set.)
    keras.utils.set_random_seed(config.seed)


def resolve_run(config: TrainConfig, hparams: HParams) -> tuple[TrainConfig, HParams]:
    """What a run trains with, the same from t2t-train and from Python: with `train_minutes`,
    the budget's schedule (train/budget.py) and the late-dropout rule (train/late_dropout.py)
    applied to `hparams`, leaving what `config.hparams_overrides` sets; and `train_steps`
    unset taken from the hparams set (0, no step limit, with `train_minutes`). Applying it twice
    changes nothing."""
    hparams = budget_hparams(hparams, config.train_minutes, config.hparams_overrides)
    hparams = dropout_hparams(hparams, config.hparams_overrides)
    if config.train_steps is None:
        steps = 0 if config.train_minutes else hparams.train_steps
        config = dataclasses.replace(config, train_steps=steps)
    return config, hparams


def resolved_precision(hparams: HParams) -> HParams:
    """`hparams` with precision=auto resolved to what this hardware computes fastest (logged);
    hparams.json records what the run computes in."""
    if hparams.precision != AUTO:
        return hparams
    hparams = hparams.replace(precision=resolve_precision(hparams.precision))
    logging.info("precision=auto: %s on this hardware", hparams.precision)
    return hparams


def train(
    problem,
    config: TrainConfig,
    hparams: HParams,
    hparams_set: str,
    strategy=None,
    spent_seconds: float = 0.0,
    advise: bool = False,
) -> dict:
    """Trains to `config.train_steps`, resuming from output_dir/checkpoints if there are any.
    `hparams` are the named set's with `config.hparams_overrides` applied, as `get_hparams`
    gives them; `resolve_run` adds the budget's settings, as for t2t-train.

    `spent_seconds`: budget seconds spent before training (the budget's choice of model,
    train/model_probe.py), counted against a new run's `train_minutes`; `advise`: the set was
    given, so with `train_minutes` the run's forecast also says what the budget would have
    chosen (train/forecast.py).

    Returns the last evaluation's metrics (with "step"). Raises NonFiniteError, CheckpointError,
    ConflictingRunError or TrainingInterrupted, with messages naming the step, file or flag.
    """
    config, hparams = resolve_run(config, hparams)
    strategy = strategy or distribute.create_strategy("auto")
    _configure(config)
    problem.check_data_dir(config.data_dir)
    hparams = resolved_precision(hparams)
    chief = distribute.is_chief(strategy)
    # One writer per output_dir: the chief holds its lock until training ends. An error that
    # ends the run lets go of its input pipeline as it leaves (runtime/error_frames.py).
    with run_lock(config.output_dir) if chief else contextlib.nullcontext(), frames_cleared():
        spent = (spent_seconds, advise)
        return _train_locked(problem, config, hparams, hparams_set, strategy, chief, spent)


def _train_locked(problem, config, hparams, hparams_set, strategy, chief, before) -> dict:
    """`train` once the output_dir is this process's to write; `before`: (spent_seconds,
    advise) of `train`."""
    spent_seconds, advise = before
    info = run_info(problem, config, hparams, hparams_set)
    earlier_run = os.path.exists(os.path.join(config.output_dir, RUN_INFO_FILE))
    if chief:
        _check_run_info(info, config.output_dir)
    prepare = None
    if not config.lora_rank and is_adapter_run(config.output_dir):
        raise ConflictingRunError(
            f"{config.output_dir} holds a LoRA adapter of rank "
            f"{AdapterRecord.load(config.output_dir, hparams.d_model).rank}: resume it with "
            "that --lora_rank"
        )
    if config.lora_rank > hparams.d_model:
        raise ValueError(
            f"--lora_rank={config.lora_rank} is above the width of the layers it adapts "
            f"(d_model={hparams.d_model}); pass a rank in [1, {hparams.d_model}]"
        )
    if config.lora_rank:  # an adapter run: the parent's weights frozen under LoRA
        vocab = problem.tokenizer(config.data_dir).path
        prepare = functools.partial(prepare_adapter, config=config, vocab=vocab, chief=chief)
    chosen = f"--hparams_set={hparams_set}" + (
        f" --hparams={config.hparams_overrides}" if config.hparams_overrides else ""
    )
    footprint.check_fits(
        hparams, info.vocab_size, chosen, adapter_rank=config.lora_rank, training=True
    )
    trainer = Trainer(hparams, info.vocab_size, strategy, info.output_vocab_size, prepare)
    keeper = CheckpointKeeper(
        trainer.checkpoint(),
        os.path.join(config.output_dir, CHECKPOINT_DIR),
        config.keep_checkpoints,
        config.keep_checkpoint_every_minutes,
        chief=chief,
        worker_id=distribute.task_info(strategy)[1],
        record_file=os.path.join(config.output_dir, LAST_CHECKPOINT_FILE),
    )
    restored = _restore(trainer, keeper, problem, config, earlier_run)
    start = int(trainer.step.numpy())
    logging.info("%s at step %d", f"resumed from {restored}" if restored else "starting", start)
    if chief:
        record_machine(config.output_dir, start)
    per_pipeline = strategy.num_replicas_in_sync // distribute.num_input_pipelines(strategy)
    skip = start * hparams.accum_steps * per_pipeline
    iterator = training_stream(problem, config, hparams, strategy, skip)
    workers = distribute.num_input_pipelines(strategy)
    limits = BudgetPolicy(
        trainer,
        config.train_minutes,
        config.step_limit,
        config.output_dir if chief else None,
        consensus=Consensus(strategy, workers, chief),
        reserve=search_tuning.kept_share(problem, hparams),
        spent_before=spent_seconds,
    )
    late = None
    if trainer.late_dropout is not None:
        train_tokens = problem.train_tokens(config.data_dir)
        late = LateDropout(trainer, train_tokens, config.output_dir, chief)
    forecast = None
    if chief and config.train_minutes and not config.lora_rank:
        forecast = Forecast(problem, config, (hparams_set, hparams), info.vocab_size, advise)
    loop = StepLoop(problem, config, trainer, keeper, strategy, chief, limits, late, forecast)
    limits.start(start)
    damage_named = shard_check.damaged_shards_named(config.data_dir)  # the file, if one is
    with damage_named, cluster.lost_workers(workers > 1, lambda: keeper.manager.latest_checkpoint):
        if trainer.budget is not None and limits.expired():
            logging.info(
                "the budget of %g minutes is spent (step %d): nothing left to train; start a "
                "new run with --init_from=%s to train on",
                hparams.budget_minutes,
                start,
                config.output_dir,
            )
            loop.finish(start)
            return loop.last_metrics
        return loop.run(iterator, start)


def record_machine(output_dir: str, step: int) -> None:
    """Adds this process's machine to output_dir/machines.json (the model card names the
    machines a run trained on): its CPU and matrix unit, its logical CPUs and GPUs, from `step`.
    A resumed run on the same machine adds nothing."""
    machine = cpu.machine_kind(cpu.describe_machine()) + f", {os.cpu_count()} CPUs"
    gpus = [
        tf.config.experimental.get_device_details(d).get("device_name", "GPU")
        for d in tf.config.list_physical_devices("GPU")
    ]
    if gpus:
        machine += ", " + ", ".join(f"{gpus.count(g)} x {g}" for g in sorted(set(gpus)))
    path = os.path.join(output_dir, MACHINES_FILE)
    machines = []
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            machines = json.load(f).get("machines", [])
    if not machines or machines[-1]["machine"] != machine:
        machines.append({"machine": machine, "from_step": step})
        atomic_io.write_json(path, {"machines": machines})


def run_info(problem, config: TrainConfig, hparams: HParams, hparams_set: str) -> RunInfo:
    """What the run writes to hparams.json: the data path from training to serving."""
    vocab = problem.tokenizer(config.data_dir)
    return RunInfo(
        problem=problem.name,
        data_dir=config.data_dir,
        hparams_set=hparams_set,
        hparams=hparams,
        vocab_size=vocab.vocab_size,
        output_vocab_size=problem.output_size(config.data_dir),
        usr_dir=os.path.abspath(config.usr_dir) if config.usr_dir else "",
        # (a problem's own in-memory tokenizer may have no file: nothing to record)
        vocab_sha256=file_sha256(vocab.path) if os.path.isfile(getattr(vocab, "path", "")) else "",
        problem_options=datagen_options(config.data_dir),
    )


def _restore(trainer, keeper, problem, config: TrainConfig, earlier_run: bool) -> str | None:
    """Restores the run's latest checkpoint, or for a new run the --init_from one; returns the
    checkpoint restored (None for a new run)."""
    restored = keeper.restore_latest()
    if restored:
        trainer.restored()
    if earlier_run and not restored:
        logging.warning(
            "STARTING OVER AT STEP 0: %s/%s is from an earlier run, which saved no checkpoint",
            config.output_dir,
            RUN_INFO_FILE,
        )
    if config.lora_rank:
        pass  # the Trainer loaded the base (`prepare_adapter`)
    elif config.init_from and not restored:
        vocab = problem.tokenizer(config.data_dir).path
        initialize_from(trainer, config.init_from, vocab, config.init_optimizer)
    elif config.init_from:
        logging.info("resuming %s: --init_from applies to a new run only", config.output_dir)
    return restored
