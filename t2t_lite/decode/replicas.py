"""Decoding under tf.distribute: each batch's rows split across the local replicas.

`split_rows(strategy, fn)` runs `fn` (tensors [batch, ...] --> a nest of [batch, ...] tensors,
e.g. a search or `score_ids`) with `strategy.run` on every replica, each on its own consecutive
share of the rows, and puts the results back together in row order; outputs whose other axes
differ between replicas (the found ids' length) are zero-padded to the longest. Rows never
depend on one another in a search or in scoring, so the results are those of one device.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from t2t_lite.extras import lazy_import
from t2t_lite.runtime.distribute import STRATEGIES as STRATEGIES  # t2t-decode's --strategy

tf = lazy_import("tensorflow")


def shard_bounds(batch: Any, replicas: int, replica: Any) -> tuple[tf.Tensor, tf.Tensor]:
    """Rows [start, end) of `replica` (0-based) out of `batch` rows, int32 scalars: consecutive
    shares, the first batch % replicas replicas one row more than the others."""
    batch, replica = tf.cast(batch, tf.int32), tf.cast(replica, tf.int32)
    base, extra = batch // replicas, batch % replicas
    start = replica * base + tf.minimum(replica, extra)
    return start, start + base + tf.cast(replica < extra, tf.int32)


def split_rows(strategy: tf.distribute.Strategy | None, fn: Callable[..., Any]) -> Callable:
    """`fn(*inputs)` over the replicas of `strategy`, each on its share of the rows of every
    input [batch, ...]; the same function as `fn` without a strategy or with one replica.

    A replica left without rows (fewer rows than replicas) runs `fn` on a copy of the last row,
    since a search of zero rows has no length to run to, and its result is dropped.
    """
    if strategy is None or strategy.num_replicas_in_sync == 1:
        return fn
    replicas = strategy.num_replicas_in_sync
    if len(strategy.extended.worker_devices) != replicas:  # results of other workers' replicas
        raise ValueError(  # are not local: each worker must decode its own batches
            f"split_rows: {replicas} replicas, {len(strategy.extended.worker_devices)} of them "
            "in this process; pass a strategy of one process (MirroredStrategy) or None"
        )

    def own_rows(*inputs):
        replica = tf.distribute.get_replica_context().replica_id_in_sync_group
        batch = tf.shape(inputs[0])[0]
        start, end = shard_bounds(batch, replicas, replica)
        rows = tf.minimum(tf.range(start, tf.maximum(end, start + 1)), batch - 1)
        return fn(*[tf.gather(x, rows) for x in inputs])

    def split(*inputs):
        per_replica = strategy.run(own_rows, args=inputs)
        batch = tf.shape(inputs[0])[0]
        bounds = [shard_bounds(batch, replicas, r) for r in range(replicas)]

        def gather(value):  # the replicas' [rows_r, ...] --> [batch, ...] in row order
            parts = strategy.experimental_local_results(value)
            parts = [part[: end - start] for part, (start, end) in zip(parts, bounds, strict=True)]
            return _concat_padded(parts)

        return tf.nest.map_structure(gather, per_replica)

    return split


def _concat_padded(parts: list[tf.Tensor]) -> tf.Tensor:
    """Tensors [n_i, d1_i, d2_i, ...] --> [sum n_i, max d1, max d2, ...], zero-padded."""
    if parts[0].shape.rank == 1:
        return tf.concat(parts, axis=0)
    shapes = tf.stack([tf.shape(part)[1:] for part in parts])  # --> [parts, rank - 1]
    longest = tf.reduce_max(shapes, axis=0)
    padded = [
        tf.pad(
            part, tf.concat([[[0, 0]], tf.stack([tf.zeros_like(longest), longest - shape], 1)], 0)
        )
        for part, shape in zip(parts, tf.unstack(shapes), strict=True)
    ]
    return tf.concat(padded, axis=0)
