"""The input pipeline: TFRecord shards --> length-bucketed, padded batches of model features.

Batches hold about `hparams.batch_size` tokens per replica, counted as tensor2tensor does:
rows x padded length, where an example's length is the longer of its inputs and targets (EOS
included). Lengths are grouped into geometric buckets (minimum 8, step 1.1) and every batch is
padded to its bucket's largest length, so a compiled step sees few distinct shapes.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from t2t_lite.hparams import HParams

SHUFFLE_BUFFER = 10_000
MAX_CYCLE_LENGTH = 8


def bucket_boundaries(max_length: int, min_length: int = 8, step: float = 1.1) -> list[int]:
    """Geometric bucket upper bounds (exclusive) below `max_length`, as in tensor2tensor."""
    boundaries, x = [], min_length
    while x < max_length:
        boundaries.append(x)
        x = max(x + 1, int(x * step))
    return boundaries


def bucket_batch_sizes(boundaries: list[int], batch_size: int) -> list[int]:
    """Rows per batch for each bucket: as many as fit in `batch_size` tokens once padded."""
    # Bucket i holds lengths in [boundaries[i-1], boundaries[i]) and is padded to boundaries[i]-1;
    # the extra last bucket (>= the last boundary) never receives examples.
    return [max(1, batch_size // (b - 1)) for b in boundaries] + [1]


def parse_examples(serialized: tf.Tensor) -> dict[str, tf.RaggedTensor]:
    """[n] serialized tf.train.Example --> {"inputs", "targets"}: ragged int32 [n, (len)]."""
    spec = {name: tf.io.RaggedFeature(tf.int64) for name in ("inputs", "targets")}
    parsed = tf.io.parse_example(serialized, spec)
    return {name: tf.cast(ids, tf.int32) for name, ids in parsed.items()}


def _example_length(example: dict[str, tf.Tensor]) -> tf.Tensor:
    return tf.maximum(tf.size(example["inputs"]), tf.size(example["targets"]))


def make_dataset_from_files(
    files: list[str],
    hparams: HParams,
    *,
    shuffle: bool,
    repeat: bool,
    seed: int = 0,
    input_context: tf.distribute.InputContext | None = None,
    transform: Callable[[tf.data.Dataset], tf.data.Dataset] | None = None,
) -> tf.data.Dataset:
    """Batched model features {"inputs": int32 [b, s], "targets": int32 [b, t]} from shards.

    Args:
      files: TFRecord shards written by `t2t_lite.data.shards`.
      hparams: `batch_size` (tokens per replica) and `max_length` (longer examples are dropped).
      shuffle: shuffle shard order and examples deterministically from `seed` (new order each
        epoch, the same sequence of orders for the same seed).
      repeat: repeat forever (training) or stop after one pass (evaluation).
      input_context: from `strategy.distribute_datasets_from_function`; of n input pipelines
        (one per worker) the i-th keeps batches i, i + n, i + 2n, ... of the stream one pipeline
        makes: sharding by data, after batching. Every worker reads every shard, and each batch
        of an epoch is trained on by exactly one worker; a step of n workers sees the batches a
        step of one worker with n replicas sees (so the two train alike), and a resumed run
        skips each pipeline's own batches.
      transform: applied to the stream of batches before it is sharded, so that every pipeline
        sees the batches one pipeline makes (`t2t_lite.data.word_dropout`).
    """
    if hparams.max_length > hparams.batch_size:
        raise ValueError(
            f"hparams max_length={hparams.max_length} exceeds batch_size={hparams.batch_size} "
            "tokens: one example would overflow a batch; raise batch_size or lower max_length"
        )
    if not files:
        raise ValueError("no shards to read")
    ds = tf.data.Dataset.from_tensor_slices(files)
    if shuffle:
        ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    ds = ds.interleave(
        tf.data.TFRecordDataset,
        cycle_length=min(len(files), MAX_CYCLE_LENGTH),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    # Parsing a batch of records at once is much cheaper than one by one.
    ds = ds.batch(256).map(parse_examples, num_parallel_calls=tf.data.AUTOTUNE).unbatch()
    # Unbatched rows are typed as rank-0-ragged; their values are plain tensors, which the
    # padding batcher below requires.
    ds = ds.map(lambda ex: {k: tf.identity(v) for k, v in ex.items()})
    ds = ds.filter(lambda ex: _example_length(ex) <= hparams.max_length)
    if shuffle:
        ds = ds.shuffle(SHUFFLE_BUFFER, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        ds = ds.repeat()
    boundaries = bucket_boundaries(hparams.max_length) + [hparams.max_length + 1]
    ds = ds.bucket_by_sequence_length(
        _example_length,
        bucket_boundaries=boundaries,
        bucket_batch_sizes=bucket_batch_sizes(boundaries, hparams.batch_size),
        pad_to_bucket_boundary=True,
    )
    if transform is not None:
        ds = transform(ds)
    if input_context is not None and input_context.num_input_pipelines > 1:
        ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    return ds.prefetch(tf.data.AUTOTUNE)
