"""The step loop of a run: steps, periodic saves and evaluations, summaries and progress lines,
the budget's observations, and the end of a budget run (its final choice and search tuning).

The loop is our own rather than `model.fit` (docs: DESIGN.md): a `tf.function` step run with
`strategy.run` (train/step.py), checkpointed by tf.train.CheckpointManager every `save_every`
steps, on SIGTERM or SIGINT, and at the end. `train/loop.py` builds what it runs.
"""

from __future__ import annotations

import dataclasses
import math
import os

import tensorflow as tf
from absl import logging
from tensorflow.core.framework import summary_pb2

from t2t_lite.hparams import HParams
from t2t_lite.model import lora
from t2t_lite.model.ensemble import parameter_count
from t2t_lite.run.checkpoints import BestKeeper
from t2t_lite.run.layout import SUMMARIES_DIR
from t2t_lite.runtime.progress import ProgressLog
from t2t_lite.train import final_choice, search_tuning
from t2t_lite.train.budget import FORECAST, BudgetPolicy
from t2t_lite.train.config import (
    DECODED_METRICS,
    METRIC_DIRECTIONS,
    NonFiniteError,
    TrainConfig,
    TrainingInterrupted,
)
from t2t_lite.train.consensus import Agreed
from t2t_lite.train.evaluation import FLOAT32_MAX, DevScorer, evaluate, local_strategy
from t2t_lite.train.late_dropout import LateDropout
from t2t_lite.train.stop_signal import StopSignal

# tf.summary.scalar needs the tensorboard package; the raw op with the scalars plugin's
# metadata writes the same event without it (TensorBoard itself is only needed to view them).
_SCALAR_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
).SerializeToString()

# float16 loss scaling halves the scale on every overflow; below this the gradients are not
# representable at all and training cannot recover.
MIN_LOSS_SCALE = 1.0


def _dev_dataset(problem, config: TrainConfig, hparams: HParams, strategy):
    def dataset_fn(context):
        ds = problem.make_dataset(
            config.data_dir, "dev", hparams, shuffle=False, repeat=False, input_context=context
        )
        return ds.take(config.eval_batches) if config.eval_batches else ds

    return strategy.distribute_datasets_from_function(dataset_fn)


class StepLoop:
    """The step loop with its periodic saves, evaluations, summaries and progress lines."""

    def __init__(
        self, problem, config, trainer, keeper, strategy, chief, limits, late=None, forecast=None
    ):
        self.problem, self.config, self.trainer = problem, config, trainer
        self.keeper, self.strategy, self.chief = keeper, strategy, chief
        self.limits: BudgetPolicy = limits  # the deadline, steps expected, budget schedule
        self.late: LateDropout | None = late  # dropout_passes > 0 (train/late_dropout.py)
        self.forecast = forecast  # what the budget will buy, said once (train/forecast.py)
        self.dev = _dev_dataset(problem, config, trainer.hparams, strategy)
        higher = METRIC_DIRECTIONS[config.best_metric]
        self.best = BestKeeper(
            lora.checkpointed(trainer.model),
            config.output_dir,
            config.best_metric,
            higher,
            save=chief,
        )
        self.stale_evals = 0
        self.skipped_steps = 0
        summaries = os.path.join(config.output_dir, SUMMARIES_DIR)
        self.train_writer, self.dev_writer = (
            tf.summary.create_file_writer(os.path.join(summaries, name))
            if chief
            else tf.summary.create_noop_writer()
            for name in ("train", "dev")
        )
        self.last_metrics: dict = {}
        self._dev_scorer: DevScorer | None = None  # the evaluations' decoded scores

    def _scorer(self) -> DevScorer | None:
        """The evaluations' dev BLEU, chrF and TER with --bleu_examples (made at the first)."""
        if self.config.bleu_examples and self._dev_scorer is None:
            trainer = self.trainer
            self._dev_scorer = DevScorer(
                trainer.model, trainer.hparams, self.problem, self.config,
                local_strategy(trainer.strategy),
            )  # fmt: skip
        return self._dev_scorer

    def run(self, iterator, start: int) -> dict:
        config = self.config
        step, saved = start, None
        progress = ProgressLog(
            config.train_steps, start, config.log_every, self.limits.seconds_left
        )
        with StopSignal() as stop:
            while step < config.step_limit:
                result = {k: v.numpy() for k, v in self.trainer.train_step(iterator).items()}
                step += 1
                self._check_step(step, result)
                progress.update(step, result)
                agreed = self._after_step(step, result, bool(stop.received))
                if step % config.log_every == 0:
                    self._summaries(self.train_writer, step, progress.scalars(result))
                if agreed.stop:  # this process's signal, or another worker's
                    path = self._save(step)
                    cause = stop.received or "a signal to another worker"
                    logging.warning("%s: saved %s at step %d; stopping", cause, path, step)
                    raise TrainingInterrupted(f"stopped by {cause} at step {step}; saved {path}")
                out_of_time = self.limits.expired()
                last = step == config.step_limit or out_of_time
                # (the last one before evaluating; a budget's last ones for its average)
                if step % config.save_every == 0 or last or self.limits.wants_save(step):
                    with self.limits.paused():
                        self._save(step)
                    saved = step
                if step % config.eval_every == 0 or last:
                    with self.limits.paused():
                        stopping = self._evaluate(step)
                    if stopping:
                        break
                if out_of_time:
                    logging.info(
                        "--train_minutes=%g reached at step %d", config.train_minutes, step
                    )
                    break
        if saved != step:
            self._save(step)
        if self.trainer.budget is not None:  # the budget is spent, train_steps or early stopping
            self.finish(step)
        for writer in (self.train_writer, self.dev_writer):
            writer.flush()
        return self.last_metrics

    def _save(self, step: int) -> str:
        self.limits.before_save()
        return self.keeper.save(step)

    def _after_step(self, step: int, result: dict, stop: bool) -> Agreed:
        """What every worker acts on after `step` (`stop`: this process received a signal): the
        step count the run expects, for a budget's schedule and for late dropout, and whether
        to stop."""
        log = step % self.config.log_every == 0
        agreed = self.limits.observe(step, log, stop)
        if self.late is not None:
            expected = agreed.expected if agreed.settled else None
            self.late.observe(step, result["target_tokens"], expected)
        if self.forecast is not None:
            self._forecast(step, float(result["target_tokens"]), agreed)
        return agreed

    def _forecast(self, step: int, target_tokens: float, agreed: Agreed) -> None:
        """Counts the step's target tokens; once the rate is settled, the forecast is logged and
        kept in budget.json (first: a script reading the log then finds it there)."""
        clock = self.limits.clock
        rate = clock.steps_per_second() if agreed.settled else None
        parameters = parameter_count(self.trainer.model) if rate else 0

        def keep(record: dict) -> None:
            clock.keep(FORECAST, record)
            clock.record(self.config.output_dir, step, agreed.expected)

        self.forecast.observe(
            target_tokens, rate, agreed.expected, parameters, clock.budget_seconds, keep
        )

    def finish(self, step: int) -> None:
        """The end of a budget: keeps the best of the last, averaged, EMA and best weights, then
        tunes the search on dev for it when the budget kept time for that."""
        recorded = final_choice.recorded_choice(self.config.output_dir)
        if not (recorded and recorded["step"] == step):
            self._choose_final(step)
        if self.chief and self.limits.reserve and not search_tuning.tuned(self.config.output_dir):
            examples = self.config.bleu_examples or search_tuning.TUNE_EXAMPLES
            seconds = self.limits.seconds_kept()
            search_tuning.tune_search(self.config.output_dir, examples, seconds)

    def _choose_final(self, step: int) -> None:
        if getattr(self.problem, "metric", None) == "bleu":  # judged by what it is scored by
            if not self.chief:  # the chief decodes on its own devices
                return
            # dev_bleu, unless the run keeps its best by another decoded score (chrF, TER)
            metric = self.config.best_metric
            metric = metric if metric in DECODED_METRICS else "dev_bleu"
            # the evaluations' scorer where --bleu_examples made one: its search is traced
            scores = self._scorer() or self._final_scorer()
            final_choice.choose_final(
                self.trainer, self.config.output_dir, step, lambda: scores()[metric], metric
            )
            return
        # Every worker takes part in the dev loss's collectives; the chief writes.
        final_choice.choose_final(
            self.trainer, self.config.output_dir, step, self._dev_loss, write=self.chief
        )

    def _final_scorer(self) -> DevScorer:
        """The end-of-run choice's scorer of final_choice.BLEU_EXAMPLES dev examples, for a run
        without --bleu_examples."""
        config = dataclasses.replace(self.config, bleu_examples=final_choice.BLEU_EXAMPLES)
        trainer = self.trainer
        return DevScorer(
            trainer.model, trainer.hparams, self.problem, config, local_strategy(self.strategy)
        )

    def _dev_loss(self) -> float:
        return evaluate(self.trainer, self.dev)["dev_loss"]

    def _check_step(self, step: int, result: dict) -> None:
        if not result["finite"] and self.trainer.loss_scaled and math.isfinite(result["loss"]):
            self.skipped_steps += 1
            logging.warning(
                "step %d: float16 gradient overflow, update skipped (%d so far); loss scale %g",
                step,
                self.skipped_steps,
                result["loss_scale"] / 2,
            )
            if result["loss_scale"] / 2 < MIN_LOSS_SCALE:
                raise NonFiniteError(
                    f"step {step}: the float16 loss scale collapsed below {MIN_LOSS_SCALE} after "
                    f"{self.skipped_steps} skipped steps; train with precision=mixed_bfloat16 or "
                    "float32, or a lower learning rate"
                )
            return
        if not result["finite"]:
            last = self.keeper.manager.latest_checkpoint or "none"
            raise NonFiniteError(
                f"step {step}: non-finite loss ({result['loss']}) or gradient norm "
                f"({result['grad_norm']}); the update was not applied and no checkpoint was "
                f"written (last checkpoint: {last}). Lower the learning rate or check the data."
            )

    def _evaluate(self, step: int) -> bool:
        """Evaluates, keeps the best model; True when early stopping says to stop."""
        metrics = evaluate(self.trainer, self.dev, self._scorer())
        logging.info("step %d dev: %s", step, ", ".join(f"{k} {v:.4g}" for k, v in metrics.items()))
        metrics["step"] = step
        self.last_metrics = metrics
        self._summaries(self.dev_writer, step, metrics)
        improved = self.best.update(step, metrics)
        self.stale_evals = 0 if improved else self.stale_evals + 1
        if self.config.early_stopping and self.stale_evals >= self.config.early_stopping:
            logging.info(
                "early stopping: no better %s in %d evaluations",
                self.config.best_metric,
                self.stale_evals,
            )
            return True
        return False

    def _summaries(self, writer, step: int, scalars: dict) -> None:
        if not self.chief:
            return
        with writer.as_default(step=step):
            for name, value in scalars.items():
                if name == "step":
                    continue
                if not abs(float(value)) <= FLOAT32_MAX:  # summaries are float32; NaN too
                    logging.warning(
                        "step %d: %s %s not written to the summaries", step, name, value
                    )
                    continue
                tf.summary.write(name, float(value), metadata=_SCALAR_METADATA)
