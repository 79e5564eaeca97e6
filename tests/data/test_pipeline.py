"""The input pipeline: token budget, one pass sees every example once, determinism, sharding."""

import collections

import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.data import pipeline
from t2t_lite.data.shards import serialize_example
from t2t_lite.hparams import get_hparams


def test_bucket_boundaries_are_tensor2tensors_geometric_steps():
    assert pipeline.bucket_boundaries(20) == [8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]
    bounds = pipeline.bucket_boundaries(256)
    assert bounds[:14] == [8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 22]
    assert bounds[-1] < 256 and all(b > a for a, b in zip(bounds, bounds[1:], strict=False))
    assert pipeline.bucket_batch_sizes([8, 11, 65], 64) == [9, 6, 1, 1]


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Three shards of 300 examples, lengths 1..60, inputs and targets of different lengths."""
    rng = np.random.default_rng(0)
    folder = tmp_path_factory.mktemp("shards")
    examples, files = [], []
    for shard in range(3):
        path = str(folder / f"train-{shard:05d}.tfrecord")
        with tf.io.TFRecordWriter(path) as writer:
            for _ in range(300):
                src = rng.integers(3, 50, size=rng.integers(1, 60)).tolist() + [1]
                tgt = rng.integers(3, 50, size=rng.integers(1, 60)).tolist() + [1]
                examples.append((tuple(src), tuple(tgt)))
                writer.write(serialize_example(src, tgt))
        files.append(path)
    return files, examples


def _unpad(row):
    row = row.tolist()
    return tuple(row[: row.index(1) + 1])


def _epoch(ds):
    seen, shapes = collections.Counter(), []
    for batch in ds:
        inputs, targets = batch["inputs"].numpy(), batch["targets"].numpy()
        assert inputs.dtype == np.int32 and targets.dtype == np.int32
        shapes.append((inputs.shape, targets.shape))
        for src, tgt in zip(inputs, targets, strict=True):
            seen[(_unpad(src), _unpad(tgt))] += 1
    return seen, shapes


def test_every_example_once_within_budget_and_max_length(shards):
    files, examples = shards
    hparams = get_hparams("transformer_tiny", "batch_size=200,max_length=50")
    ds = pipeline.make_dataset_from_files(files, hparams, shuffle=True, repeat=False, seed=3)
    seen, shapes = _epoch(ds)
    expected = collections.Counter(e for e in examples if max(len(e[0]), len(e[1])) <= 50)
    assert seen == expected and 0 < sum(expected.values()) < len(examples)
    for inputs_shape, targets_shape in shapes:
        assert inputs_shape[0] * inputs_shape[1] <= 200
        assert targets_shape[0] * targets_shape[1] <= 200
    # Batches are padded to bucket boundaries: few distinct lengths.
    boundaries = set(b - 1 for b in pipeline.bucket_boundaries(50)) | {50}
    assert {s[0][1] for s in shapes} <= boundaries


def test_shuffle_is_deterministic_per_seed(shards):
    files, _ = shards
    hparams = get_hparams("transformer_tiny", "batch_size=200,max_length=64")

    def first_batches(seed):
        ds = pipeline.make_dataset_from_files(files, hparams, shuffle=True, repeat=True, seed=seed)
        return [b["inputs"].numpy().tolist() for b in ds.take(5)]

    assert first_batches(1) == first_batches(1)
    assert first_batches(1) != first_batches(2)


@pytest.mark.parametrize("num_pipelines", [2, 4])  # 4 > 3 shards
def test_input_context_splits_the_data_disjointly(shards, num_pipelines):
    """Over one epoch each example is seen by exactly one of the pipelines (one per worker)."""
    files, examples = shards
    hparams = get_hparams("transformer_tiny", "batch_size=1024,max_length=64")
    total = collections.Counter()
    for pipeline_id in range(num_pipelines):
        context = tf.distribute.InputContext(num_pipelines, pipeline_id, num_pipelines)
        ds = pipeline.make_dataset_from_files(
            files, hparams, shuffle=False, repeat=False, input_context=context
        )
        part, _ = _epoch(ds)
        assert part and not set(part) & set(total)
        total += part
    assert total == collections.Counter(examples)


def test_each_pipeline_keeps_every_nth_batch_of_one_stream(shards):
    """Two workers' pipelines together give the batches of one worker's stream, alternately:
    what one worker with two replicas trains on, shuffled and repeated alike."""
    files, _ = shards
    hparams = get_hparams("transformer_tiny", "batch_size=200,max_length=64")

    def batches(context, count):
        ds = pipeline.make_dataset_from_files(
            files, hparams, shuffle=True, repeat=True, seed=5, input_context=context
        )
        return [b["inputs"].numpy().tolist() for b in ds.take(count)]

    one = batches(None, 40)
    parts = [batches(tf.distribute.InputContext(2, i, 2), 20) for i in range(2)]
    assert one[0::2] == parts[0] and one[1::2] == parts[1]


def test_max_length_over_budget_is_an_error(shards):
    hparams = get_hparams("transformer_tiny", "batch_size=32,max_length=64")
    with pytest.raises(ValueError, match="max_length=64 exceeds batch_size=32"):
        pipeline.make_dataset_from_files(shards[0], hparams, shuffle=False, repeat=False)
