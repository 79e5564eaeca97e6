"""What every worker of a multi-worker run decides alike after each step, decided once.

Each worker has its own clock and its own signal handlers. Left alone, under `--train_minutes`
each would stop at its own step and leave the others waiting in a collective, and each would
set its learning-rate horizon from its own step rate, so that the mirrored weights drift
apart; a SIGTERM (a preemption notice) would stop one worker only. So after every step the
workers all-reduce a few numbers: the stop flag of each worker, and the chief's clock (the
steps it expects, whether its rate is settled, whether the budget is spent). Every worker then
acts on the same values: the chief's clock decides, any worker's signal stops them all at the
same step, and the budget's decisions (horizon, rate factor, late dropout) are the chief's.

On one machine the values are this process's own, and nothing is reduced.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

SUM = tf.distribute.ReduceOp.SUM


@dataclasses.dataclass(frozen=True)
class Agreed:
    """The values every worker acts on after a step."""

    stop: bool  # a worker received SIGTERM or SIGINT
    expected: int | None  # the steps the run expects (None while the clock starts up)
    settled: bool  # the rate behind `expected` is measured over a full window
    expired: bool  # the time budget is spent
    closing: bool  # the time budget's last share has begun (budget.AVERAGED_SPAN)


class Consensus:
    """Agrees on `Agreed` across the workers of `strategy` (`shared`: more than one worker)."""

    def __init__(self, strategy: tf.distribute.Strategy | None, workers: int, chief: bool):
        self.shared = strategy is not None and workers > 1
        self.chief = chief
        if not self.shared:
            return
        self.strategy = strategy
        local = len(strategy.extended.worker_devices)

        def replica_sum(values):
            # Each worker's replicas add up to the worker's values once.
            context = tf.distribute.get_replica_context()
            return context.all_reduce(SUM, values / tf.constant(local, tf.float64))

        @tf.function
        def all_reduce(values):
            results = strategy.run(replica_sum, args=(values,))
            return strategy.experimental_local_results(results)[0]

        self._all_reduce = all_reduce

    def share(self, value: float) -> float:
        """The chief's `value`, on every worker (a decision taken once, on the chief)."""
        if not self.shared:
            return value
        mine = [value if self.chief else 0.0, 0.0, 0.0, 0.0, 0.0]
        return float(self._all_reduce(tf.constant(mine, tf.float64)).numpy()[0])

    def agree(
        self, stop: bool, expected: int | None, settled: bool, expired: bool, closing: bool
    ) -> Agreed:
        """The values after a step, from this worker's signal flag and its clock's
        `expected`, `settled`, `expired` and `closing`: the same on every worker."""
        if not self.shared:
            return Agreed(stop, expected, settled, expired, closing)
        mine = [float(stop), 0.0, 0.0, 0.0, 0.0]
        if self.chief:  # expected + 1: 0 stands for None
            mine[1] = 0.0 if expected is None else expected + 1.0
            mine[2:] = [float(settled), float(expired), float(closing)]
        values = self._all_reduce(tf.constant(mine, tf.float64)).numpy()
        chief_expected = round(values[1])
        return Agreed(
            stop=values[0] > 0.5,
            expected=None if chief_expected == 0 else chief_expected - 1,
            settled=values[2] > 0.5,
            expired=values[3] > 0.5,
            closing=values[4] > 0.5,
        )
