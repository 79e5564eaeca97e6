"""The tf.distribute strategy of a training run: one code path for one device, many local devices
and many workers.

`--strategy=auto` picks MultiWorkerMirroredStrategy when the cluster (runtime/cluster.py: TF_CONFIG,
SLURM or a Kubernetes Indexed Job) has more than one task, MirroredStrategy over the local devices
when there are several (every GPU, or, when there is none, every logical CPU device, which is one
unless `tf.config.set_logical_device_configuration` split it), and TensorFlow's default strategy
on one device: MirroredStrategy over a single device replicates nothing and adds its own cost to
every step (docs/training.md).
"""

from __future__ import annotations

import os

from absl import logging

from t2t_lite.extras import lazy_import
from t2t_lite.runtime import cluster

tf = lazy_import("tensorflow")

STRATEGIES = ("auto", "mirrored", "multi_worker", "default")


def cluster_size(resolver=None) -> int:
    """Number of tasks (workers and chief) of the cluster; 1 without one."""
    if resolver is None:
        return 1
    spec = resolver.cluster_spec()
    return sum(spec.num_tasks(job) for job in ("chief", "worker") if job in spec.jobs)


def local_devices() -> list[str]:
    """The devices MirroredStrategy replicates over: all GPUs, else all logical CPUs."""
    gpus = tf.config.list_logical_devices("GPU")
    return [d.name for d in (gpus or tf.config.list_logical_devices("CPU"))]


def one_machine_choice() -> str:
    """What `auto` is outside a cluster: "mirrored" over several local devices, "default" on one
    (MirroredStrategy over a single device replicates nothing and only adds its step's cost)."""
    return "mirrored" if len(local_devices()) > 1 else "default"


def create_strategy(
    name: str = "auto", resolver=None, timeout_seconds: float = 0.0
) -> tf.distribute.Strategy:
    """The strategy named by `--strategy`; create it before any other TensorFlow op.

    `resolver` (runtime/cluster.py; None: TF_CONFIG's, if set) locates the workers of a
    multi-worker strategy; `timeout_seconds` > 0 bounds how long one of its collectives waits
    for the other workers before failing."""
    if name not in STRATEGIES:
        raise ValueError(f"--strategy={name!r} is not one of {', '.join(STRATEGIES)}")
    if resolver is None and name in ("auto", "multi_worker") and os.environ.get("TF_CONFIG"):
        resolver = cluster.resolve("tf_config")
    if name == "auto":
        name = "multi_worker" if cluster_size(resolver) > 1 else one_machine_choice()
    if name == "multi_worker":
        options = tf.distribute.experimental.CommunicationOptions(
            timeout_seconds=timeout_seconds or None
        )
        return tf.distribute.MultiWorkerMirroredStrategy(
            cluster_resolver=resolver, communication_options=options
        )
    if name == "mirrored":
        return tf.distribute.MirroredStrategy(devices=local_devices())
    return tf.distribute.get_strategy()


def cluster_strategy(
    name: str, cluster_kind: str, worker_hosts=(), port_base: int = 0, timeout_seconds: float = 0.0
) -> tf.distribute.Strategy:
    """t2t-train's strategy: `--strategy=name` in the cluster `--cluster=cluster_kind` names
    (runtime/cluster.py), logging this task's place in it; before any other TensorFlow op."""
    resolver = cluster.resolve(cluster_kind, list(worker_hosts), port_base)
    if resolver is not None:
        logging.info("cluster: %s, this task %s", cluster_kind, cluster.describe(resolver))
    return create_strategy(name, resolver, timeout_seconds)


def decode_strategy(name: str = "default") -> tf.distribute.Strategy | None:
    """The strategy `--strategy=name` names for decoding (t2t-decode): "auto" and "mirrored"
    replicate over the local devices (every GPU, else every logical CPU), "default" is one
    device (None). Decoding runs in one process, so a cluster (multi_worker, or auto in a
    cluster of several tasks: TF_CONFIG, SLURM, an Indexed Job) is refused; "auto" on one
    device is "default", as in training."""
    if name not in STRATEGIES:
        raise ValueError(f"--strategy={name!r} is not one of {', '.join(STRATEGIES)}")
    if name == "multi_worker" or (name == "auto" and cluster_size(cluster.resolve("auto")) > 1):
        raise ValueError(
            f"--strategy={name}: decoding runs in one process over its local devices "
            "(auto or mirrored outside a cluster, or default)"
        )
    if name == "auto":
        name = one_machine_choice()
    return None if name == "default" else create_strategy("mirrored")


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
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return 1
    return max(1, cluster_size(strategy.cluster_resolver))
