"""The tf.distribute strategy of a training run: one code path for one device, many local devices
and many workers.

`--strategy=auto` picks MultiWorkerMirroredStrategy when TF_CONFIG names more than one task in its
cluster, and MirroredStrategy over the local devices otherwise: every GPU, or, when there is none,
every logical CPU device (one unless `tf.config.set_logical_device_configuration` split it).
"""

from __future__ import annotations

import json
import os

from t2t_lite.extras import lazy_import

tf = lazy_import("tensorflow")

STRATEGIES = ("auto", "mirrored", "multi_worker", "default")


def cluster_size() -> int:
    """Number of tasks (workers and chief) that TF_CONFIG names; 1 without TF_CONFIG."""
    text = os.environ.get("TF_CONFIG", "")
    if not text:
        return 1
    try:
        cluster = json.loads(text).get("cluster", {})
    except json.JSONDecodeError as e:
        raise ValueError(f"TF_CONFIG is not valid JSON: {e}: {text[:200]!r}") from None
    return sum(len(cluster.get(role, [])) for role in ("chief", "worker"))


def local_devices() -> list[str]:
    """The devices MirroredStrategy replicates over: all GPUs, else all logical CPUs."""
    gpus = tf.config.list_logical_devices("GPU")
    return [d.name for d in (gpus or tf.config.list_logical_devices("CPU"))]


def create_strategy(name: str = "auto") -> tf.distribute.Strategy:
    """The strategy named by `--strategy`; create it before any other TensorFlow op."""
    if name not in STRATEGIES:
        raise ValueError(f"--strategy={name!r} is not one of {', '.join(STRATEGIES)}")
    if name == "auto":
        name = "multi_worker" if cluster_size() > 1 else "mirrored"
    if name == "multi_worker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy(devices=local_devices())
    return tf.distribute.get_strategy()


def task_info(strategy: tf.distribute.Strategy) -> tuple[str | None, int]:
    """(task_type, task_id) of this process; (None, 0) outside a multi-worker cluster."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return None, 0
    return resolver.task_type, int(resolver.task_id or 0)


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """True for the process that writes summaries and the real checkpoints: the chief, or
    worker 0 when the cluster has no chief, or the only process."""
    task_type, task_id = task_info(strategy)
    if task_type is None or task_type == "chief":
        return True
    cluster = strategy.cluster_resolver.cluster_spec().as_dict()
    return task_type == "worker" and task_id == 0 and "chief" not in cluster


def num_input_pipelines(strategy: tf.distribute.Strategy) -> int:
    """How many input pipelines `distribute_datasets_from_function` builds: one per worker."""
    return (
        max(1, cluster_size())
        if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
        else 1
    )
