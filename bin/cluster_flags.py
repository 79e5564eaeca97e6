"""t2t-train's flags for where it runs: the tf.distribute strategy and, for several machines, the
cluster (runtime/cluster.py), defined here once; `strategy_from_flags` creates the strategy."""

from __future__ import annotations

from absl import flags

from t2t_lite.train.config import CLUSTERS, SLURM_PORT_BASE, STRATEGIES

FLAGS = flags.FLAGS
flags.DEFINE_enum(
    "strategy", "auto", STRATEGIES,
    "auto: multi_worker in a cluster of >1 task, else mirrored over several local devices, "
    "default on one.",
)  # fmt: skip
flags.DEFINE_enum(
    "cluster",
    "auto",
    CLUSTERS,
    "Where the workers are: TF_CONFIG, the SLURM job step, or a Kubernetes Indexed Job "
    "(JOB_COMPLETION_INDEX and --worker_hosts); auto: the one whose environment is set.",
)
flags.DEFINE_list("worker_hosts", [], "--cluster=kubernetes: every worker's host:port, in order.")
flags.DEFINE_integer("cluster_port", SLURM_PORT_BASE, "--cluster=slurm: a node's first port.")
flags.DEFINE_float(
    "collective_timeout",
    0.0,
    "Seconds a multi-worker collective waits for the other workers before failing (0: no "
    "limit; a worker that dies is noticed by its lost connection or heartbeats anyway).",
)


def strategy_from_flags():
    """The strategy of --strategy in the cluster of --cluster; before any other TensorFlow op."""
    from t2t_lite.train.loop import cluster_strategy

    return cluster_strategy(
        FLAGS.strategy,
        FLAGS.cluster,
        FLAGS.worker_hosts,
        FLAGS.cluster_port,
        FLAGS.collective_timeout,
    )
