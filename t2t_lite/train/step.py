"""The distributed training and evaluation steps: the model, its optimizer and the step counter.

One step, on every replica:
  1. for each of `accum_steps` micro-batches: forward, label-smoothed loss, gradients;
  2. one all-reduce (SUM) of the gradients and of the token counts across replicas;
  3. division by the global number of target tokens, so the update is the mean token loss's
     gradient whatever the number of replicas or micro-batches (2 replicas x B tokens, one device
     with 2B, and 2 micro-batches of B accumulated all make the same update);
  4. the non-finite check on the global gradient, then the optimizer's update, or none.

The step all-reduces the gradients itself so that the non-finite check, the gradient norm and
`clip_grad_norm` all see the global gradient; Keras' own all-reduce in `apply` is turned off
(it would sum a second time, and Keras clips before it reduces).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple

import keras
import numpy as np
import tensorflow as tf

from t2t_lite.hparams import HParams
from t2t_lite.model import lora
from t2t_lite.model.losses import label_smoothed_cross_entropy, projected_cross_entropy
from t2t_lite.model.transformer import Transformer
from t2t_lite.train.budget import BudgetState
from t2t_lite.train.late_dropout import LateDropoutState
from t2t_lite.train.schedules import LinearBudgetSchedule, create_optimizer, create_schedule
from t2t_lite.vocabulary import PAD_ID

SUM = tf.distribute.ReduceOp.SUM


class BatchStats(NamedTuple):
    """Sums over a batch's non-padding target tokens (and its source tokens): float32 scalar
    tensors per batch, Python floats once `sum_stats` has added them up."""

    smoothed_sum: tf.Tensor  # label-smoothed cross-entropy, what training minimizes
    nll_sum: tf.Tensor  # negative log-likelihood
    target_tokens: tf.Tensor
    source_tokens: tf.Tensor
    correct_tokens: tf.Tensor  # argmax == target (0 in training steps, which skip the argmax)

    def vector(self) -> tf.Tensor:
        """The fields stacked in order into one [5] float32 vector, so that an all-reduce or an
        accumulator handles all of them in one op."""
        return tf.stack(list(self))

    @classmethod
    def from_vector(cls, vector: tf.Tensor) -> BatchStats:
        """The inverse of `vector`."""
        return cls(*tf.unstack(vector, num=len(cls._fields)))


def batch_stats(
    logits: tf.Tensor,
    batch: dict[str, tf.Tensor],
    label_smoothing: float,
    accuracy: bool = True,
    jit_compile: bool = False,
) -> BatchStats:
    """The statistics of one batch from the model's logits [batch, target, vocab].

    `accuracy=False` leaves correct_tokens at 0 and skips the argmax, a pass over all the logits
    that a training step does not need (3 % of a bfloat16 step, docs/results/benchmarks.md).
    `jit_compile`: the step runs under XLA, so the loss takes the gradient form that XLA fuses."""
    smoothed, nll, tokens = label_smoothed_cross_entropy(
        logits, batch["targets"], label_smoothing, one_hot_gradient=jit_compile
    )
    correct = tf.zeros([])
    if accuracy:
        weights = tf.cast(tf.not_equal(batch["targets"], PAD_ID), tf.float32)
        predicted = tf.argmax(logits, axis=-1, output_type=batch["targets"].dtype)
        correct = tf.reduce_sum(
            tf.cast(tf.equal(predicted, batch["targets"]), tf.float32) * weights
        )
    return BatchStats(smoothed, nll, tokens, _source_tokens(batch), correct)


def training_stats(
    model: Transformer, batch: dict[str, tf.Tensor], label_smoothing: float, jit_compile: bool
) -> BatchStats:
    """A training step's statistics (correct_tokens 0), under its gradient tape.

    In a 16-bit compute dtype without XLA the pre-softmax product runs inside the loss's
    gradient (`losses.projected_cross_entropy`), which never forms the [tokens, vocab] gradient
    nor casts it: the bfloat16 step of the benchmark model ran 1.06x as fast on an Intel Xeon
    with AMX (docs/results/benchmarks.md). In float32 that was 0.93x, so float32 steps, like steps
    under XLA (which fuses the logits' gradient itself), take the logits and the loss apart."""
    if jit_compile or model.compute_dtype == "float32":
        logits = model(batch, training=True)
        return batch_stats(logits, batch, label_smoothing, accuracy=False, jit_compile=jit_compile)
    hidden = model.decoder_states(batch, training=True)
    smoothed, nll, tokens = projected_cross_entropy(
        hidden,
        model.output_matrix(),
        batch["targets"],
        label_smoothing,
        matrix_gradient=not lora.is_adapted(model),  # an adapter run's embedding is frozen
    )
    return BatchStats(smoothed, nll, tokens, _source_tokens(batch), tf.zeros([]))


def _source_tokens(batch: dict[str, tf.Tensor]) -> tf.Tensor:
    return tf.reduce_sum(tf.cast(tf.not_equal(batch["inputs"], PAD_ID), tf.float32))


def sum_stats(batches: Iterable[BatchStats]) -> BatchStats:
    """Adds up the statistics of many batches in float64; the fields are Python floats."""
    totals = np.zeros(len(BatchStats._fields), np.float64)
    for stats in batches:
        totals += stats.vector().numpy()
    return BatchStats(*(float(total) for total in totals))


class Trainer:
    """Owns the model, optimizer and step counter of a run, all created in `strategy.scope()`.

    `train_step(iterator)` runs one optimizer step (consuming `accum_steps` batches per replica)
    and returns replica 0's copy of the all-reduced results: loss (mean smoothed token loss),
    nll, target/source token counts, grad_norm, learning_rate, finite (loss and gradient),
    applied (whether the update was made) and loss_scale.
    `eval_step(batch)` returns the batch's BatchStats summed over replicas.
    """

    def __init__(
        self,
        hparams: HParams,
        vocab_size: int,
        strategy: tf.distribute.Strategy,
        output_vocab_size: int = 0,
        prepare: Callable[[Transformer], None] | None = None,
    ):
        """`prepare(model)`, when given, runs on the built model before the optimizer takes its
        trainable weights (an adapter run loads its base and enables LoRA there)."""
        self.hparams = hparams
        self.strategy = strategy
        self.loss_scaled = hparams.precision == "mixed_float16"
        with strategy.scope():
            self.model = Transformer.from_hparams(
                hparams, vocab_size, output_vocab_size=output_vocab_size
            )
            self.model.build()
            if prepare is not None:
                prepare(self.model)
            # The schedule object: a linear_budget one has its horizon set while training.
            self.schedule = create_schedule(hparams)
            optimizer = create_optimizer(hparams, self.schedule)
            self.inner_optimizer = optimizer
            if self.loss_scaled:
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            self.optimizer = optimizer
            # Variables made inside the scope are mirrored; made lazily in the first step
            # they would not be (and MultiWorkerMirroredStrategy would fail).
            self.optimizer.build(self.model.trainable_variables)
            self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
            # The minutes a time budget has spent (linear_budget runs only, t2t_lite.train.budget).
            budgeted = isinstance(self.schedule, LinearBudgetSchedule)
            self.budget = BudgetState(self.schedule) if budgeted else None
            self._accumulators = self._make_accumulators() if hparams.accum_steps > 1 else None
            # dropout_passes > 0: dropout waits for the decision (t2t_lite.train.late_dropout).
            late = hparams.dropout_passes > 0
            self.late_dropout = LateDropoutState() if late else None
        # The step has all-reduced the gradients; Keras' hook would sum them again. (Private
        # API: the two-replica test fails, with updates twice too large, if Keras renames it.)
        self.inner_optimizer._all_reduce_sum_gradients = list
        self.eval_step = tf.function(self._eval_step, reduce_retracing=True, autograph=False)
        self.set_dropout(0.0 if self.late_dropout is not None else hparams.dropout)

    def set_dropout(self, rate: float) -> None:
        """Sets the model's P_drop (0 or hparams.dropout) and traces the training step anew."""
        self.model.set_dropout(rate)
        # Traced without AutoGraph (no Python control flow on tensors; docs/training.md) but for
        # gradient accumulation's loop over `tf.range`.
        self._grads = tf.function(
            self._loss_and_grads, jit_compile=self.hparams.jit_compile, autograph=False
        )
        self.train_step = tf.function(self._train_step, autograph=self._accumulators is not None)

    def restored(self) -> None:
        """After a checkpoint is restored: dropout on if the restored run had decided so."""
        if self.late_dropout is not None and self.late_dropout.dropout_on(self.hparams):
            self.set_dropout(self.hparams.dropout)

    def _make_accumulators(self) -> dict:
        # Each replica adds into its own copy; ON_READ variables are never synchronized by
        # writes, which is what an accumulator needs.
        def local(shape, name):
            return tf.Variable(
                tf.zeros(shape, tf.float32),
                trainable=False,
                name=name,
                synchronization=tf.VariableSynchronization.ON_READ,
                aggregation=tf.VariableAggregation.SUM,
            )

        grads = [local(v.shape, f"accum_{i}") for i, v in enumerate(self.model.trainable_variables)]
        return {"grads": grads, "stats": local([len(BatchStats._fields)], "accum_stats")}

    def checkpoint(self) -> tf.train.Checkpoint:
        """What a training checkpoint holds; decode and export read the "model" key (an
        adapter run's: the adapter's weights alone, t2t_lite.run.adapter)."""
        parts = {
            "model": lora.checkpointed(self.model),
            "optimizer": self.optimizer,
            "step": self.step,
        }
        if self.budget is not None:
            parts["budget"] = self.budget
        if self.late_dropout is not None:
            parts["late_dropout"] = self.late_dropout
        return tf.train.Checkpoint(**parts)

    # --- per replica --------------------------------------------------------------------------

    def _loss_and_grads(self, batch):
        """Gradients of the batch's smoothed loss SUM ([var shapes], float32) and its BatchStats.

        The loss is differentiated as a per-token mean (then multiplied back by the token count)
        so that float16 gradients stay in range whatever the batch size.
        """
        with tf.GradientTape() as tape:
            stats = training_stats(
                self.model, batch, self.hparams.label_smoothing, self.hparams.jit_compile
            )
            loss = stats.smoothed_sum / tf.maximum(stats.target_tokens, 1.0)
            if self.loss_scaled:
                loss = self.optimizer.scale_loss(loss)
        grads = tape.gradient(loss, self.model.trainable_variables)
        return [tf.convert_to_tensor(g) * stats.target_tokens for g in grads], stats

    def _single_step(self, batch):
        grads, stats = self._grads(batch)
        return self._reduce_and_apply(grads, stats)

    def _accumulate(self, batch):
        grads, stats = self._grads(batch)
        for accumulator, grad in zip(self._accumulators["grads"], grads, strict=True):
            accumulator.assign_add(grad)
        self._accumulators["stats"].assign_add(stats.vector())

    def _apply_accumulated(self):
        grads = [a.read_value() for a in self._accumulators["grads"]]
        stats = self._accumulators["stats"].read_value()
        with tf.control_dependencies(grads + [stats]):
            result = self._reduce_and_apply(grads, BatchStats.from_vector(stats))
        for accumulator in self._accumulators["grads"] + [self._accumulators["stats"]]:
            accumulator.assign(tf.zeros_like(accumulator))
        return result

    def _reduce_and_apply(self, grads, stats: BatchStats):
        context = tf.distribute.get_replica_context()
        grads, summed = context.all_reduce(SUM, [grads, stats.vector()])
        stats = BatchStats.from_vector(summed)
        tokens = tf.maximum(stats.target_tokens, 1.0)
        grads = [g / tokens for g in grads]
        scale = self.optimizer.dynamic_scale if self.loss_scaled else tf.constant(1.0)
        grad_norm = tf.linalg.global_norm(grads) / scale
        loss = stats.smoothed_sum / tokens
        finite = tf.logical_and(tf.math.is_finite(loss), tf.math.is_finite(grad_norm))
        if self.loss_scaled:
            # The LossScaleOptimizer skips non-finite gradients itself and lowers the scale.
            self.optimizer.apply(grads, self.model.trainable_variables)
            applied = finite
        else:
            applied = self._apply_if(finite, grads)
        return {
            "loss": loss,
            "nll": stats.nll_sum / tokens,
            "target_tokens": stats.target_tokens,
            "source_tokens": stats.source_tokens,
            "grad_norm": grad_norm,
            "finite": finite,
            "applied": applied,
            "loss_scale": tf.identity(scale),
        }

    def _apply_if(self, ok, grads):
        """Applies the update only where `ok` (the same on every replica, it was all-reduced)."""
        variables = self.model.trainable_variables

        def apply():
            self.optimizer.apply(grads, variables)
            return tf.constant(True)

        if tf.__internal__.distribute.strategy_supports_no_merge_call():
            return tf.cond(ok, apply, lambda: tf.constant(False))

        # Strategies that need merge_call cannot merge inside a tf.cond: branch in cross-replica
        # context and re-enter the replicas in the taken branch (as LossScaleOptimizer does).
        def cross_replica(distribution, ok, grads):
            ok = distribution.experimental_local_results(ok)[0]

            def apply_on_replicas():
                distribution.extended.call_for_each_replica(
                    lambda g: self.optimizer.apply(g, variables), args=(grads,)
                )
                return tf.constant(True)

            return tf.cond(ok, apply_on_replicas, lambda: tf.constant(False))

        return tf.distribute.get_replica_context().merge_call(cross_replica, args=(ok, grads))

    # --- cross replica (tf.function entry points) ---------------------------------------------

    def _train_step(self, iterator):
        if self._accumulators is None:
            result = self.strategy.run(self._single_step, args=(next(iterator),))
        else:
            for _ in tf.range(self.hparams.accum_steps):
                self.strategy.run(self._accumulate, args=(next(iterator),))
            result = self.strategy.run(self._apply_accumulated)
        self.step.assign_add(1)
        result = {k: self.strategy.experimental_local_results(v)[0] for k, v in result.items()}
        result["learning_rate"] = self.learning_rate()
        return result

    def learning_rate(self) -> tf.Tensor:
        """The learning rate of the next update."""
        rate = self.inner_optimizer.learning_rate
        return tf.convert_to_tensor(rate, tf.float32)

    def _eval_step(self, batch) -> BatchStats:
        def replica_fn(batch):
            logits = self.model(batch, training=False)
            return batch_stats(logits, batch, self.hparams.label_smoothing).vector()

        per_replica = self.strategy.run(replica_fn, args=(batch,))
        return BatchStats.from_vector(self.strategy.reduce(SUM, per_replica, axis=None))
