"""Where the workers of a multi-worker run are: TensorFlow's cluster resolvers for TF_CONFIG, SLURM
and a Kubernetes Indexed Job, chosen by `--cluster`; and what a lost worker turns into.

    tf_config    TFConfigClusterResolver: the TF_CONFIG JSON of each task, written by hand or by
                 a launcher (Kubeflow's TFJob writes it).
    slurm        SlurmClusterResolver: the tasks of the job step (`srun`), from SLURM_PROCID,
                 SLURM_STEP_NUM_TASKS, SLURM_STEP_NODELIST and SLURM_STEP_TASKS_PER_NODE; task
                 k on a node listens on port_base + k.
    kubernetes   a SimpleClusterResolver over `--worker_hosts` (the stable names a headless
                 Service gives the pods of an Indexed Job), the task being the pod's
                 JOB_COMPLETION_INDEX. TensorFlow's KubernetesClusterResolver is not used: it
                 needs the kubernetes client and the right to list pods, orders the tasks by
                 the API's pod list rather than by completion index, and fails while any pod is
                 not yet running.
    auto         the first of those whose environment is there (TF_CONFIG, then SLURM with more
                 than one task, then JOB_COMPLETION_INDEX with --worker_hosts); none: one machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil

from t2t_lite.extras import lazy_import

tf = lazy_import("tensorflow")

CLUSTERS = ("auto", "none", "tf_config", "slurm", "kubernetes")
# The first port of a SLURM node's tasks (task k of a node listens on SLURM_PORT_BASE + k).
SLURM_PORT_BASE = 8888
# What a worker's collectives raise when a peer is gone (a reset connection, the coordination
# service's missed heartbeats, a collective past its timeout).
_LOST = ("UnavailableError", "AbortedError", "DeadlineExceededError", "CancelledError")
_TASK = re.compile(r"(/job:\w+/replica:\d+/task:\d+)")


class LostWorkerError(RuntimeError):
    """A worker of a multi-worker run stopped answering; the run stopped with it."""


def _slurm_tasks() -> int:
    return int(os.environ.get("SLURM_STEP_NUM_TASKS") or os.environ.get("SLURM_NTASKS") or 1)


def resolve(kind: str = "auto", worker_hosts: list[str] | None = None, port_base: int = 0):
    """The cluster resolver that `--cluster=kind` names, or None for one machine. Raises
    ValueError naming the flag or environment variable that is missing or wrong."""
    if kind not in CLUSTERS:
        raise ValueError(f"--cluster={kind!r} is not one of {', '.join(CLUSTERS)}")
    if kind == "auto":
        kind = _detect(worker_hosts)
    if kind == "none":
        return None
    if kind == "tf_config":
        if not os.environ.get("TF_CONFIG"):
            raise ValueError("--cluster=tf_config: the TF_CONFIG environment variable is not set")
        try:
            json.loads(os.environ["TF_CONFIG"])
        except json.JSONDecodeError as e:
            raise ValueError(f"TF_CONFIG is not valid JSON: {e}") from None
        return tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if kind == "slurm":
        return _slurm(port_base or SLURM_PORT_BASE)
    return _kubernetes(worker_hosts or [])


def _detect(worker_hosts) -> str:
    if os.environ.get("TF_CONFIG"):
        return "tf_config"
    if "SLURM_PROCID" in os.environ and _slurm_tasks() > 1:
        return "slurm"
    if "JOB_COMPLETION_INDEX" in os.environ and worker_hosts:
        return "kubernetes"
    return "none"


def _slurm(port_base: int):
    """SlurmClusterResolver of this job step. On GPU nodes it gives each task its GPUs (through
    CUDA_VISIBLE_DEVICES); on CPU nodes, where it would ask nvidia-smi, it is told that each
    task has one "slot" of as many as the busiest node has tasks, and sets no devices."""
    for name in ("SLURM_PROCID", "SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE"):
        if name not in os.environ:
            raise ValueError(f"--cluster=slurm: {name} is not set; launch t2t-train with srun")
    resolver = tf.distribute.cluster_resolver.SlurmClusterResolver
    if os.environ.get("CUDA_VISIBLE_DEVICES") or shutil.which("nvidia-smi"):
        return resolver(port_base=port_base)
    from tensorflow.python.distribute.cluster_resolver import slurm_cluster_resolver

    per_node = slurm_cluster_resolver.expand_tasks_per_node(os.environ["SLURM_STEP_TASKS_PER_NODE"])
    slots = max(per_node)
    return resolver(port_base=port_base, gpus_per_node=slots, gpus_per_task=1, auto_set_gpu=False)


def _kubernetes(worker_hosts: list[str]):
    index = os.environ.get("JOB_COMPLETION_INDEX", "")
    if not index.isdigit():
        raise ValueError(
            "--cluster=kubernetes: JOB_COMPLETION_INDEX is not set; run t2t-train in a "
            "Kubernetes Job with completionMode: Indexed"
        )
    if not worker_hosts:
        raise ValueError(
            "--cluster=kubernetes needs --worker_hosts: every pod's host:port, in index order"
        )
    if int(index) >= len(worker_hosts):
        raise ValueError(
            f"JOB_COMPLETION_INDEX={index} but --worker_hosts names {len(worker_hosts)} "
            "workers; give one host:port per completion of the Job"
        )
    spec = tf.train.ClusterSpec({"worker": list(worker_hosts)})
    return tf.distribute.cluster_resolver.SimpleClusterResolver(
        spec, task_type="worker", task_id=int(index), rpc_layer="grpc"
    )


def describe(resolver) -> str:
    """'worker 1 of 3 (127.0.0.1:2223)': this task, for the log."""
    spec = resolver.cluster_spec()
    tasks = sum(spec.num_tasks(job) for job in spec.jobs)
    address = spec.task_address(resolver.task_type, resolver.task_id)
    return f"{resolver.task_type} {resolver.task_id} of {tasks} ({address})"


def lost_task(message: str) -> str:
    """The task a collective's error names first ('/job:worker/replica:0/task:1'), else 'a
    worker'."""
    found = _TASK.search(message)
    return found.group(1) if found else "a worker"


@contextlib.contextmanager
def lost_workers(active: bool, last_checkpoint):
    """Turns the errors a multi-worker run's collectives raise when a peer is gone into one
    LostWorkerError naming the task and the last complete checkpoint (`last_checkpoint()`, a
    path or None); on one machine (`active` False) errors pass unchanged."""
    try:
        yield
    except tf.errors.OpError as error:
        if not active or type(error).__name__ not in _LOST:
            raise
        text = error.message if hasattr(error, "message") else str(error)
        first = next((line for line in text.splitlines() if line.strip()), "")[:160]
        checkpoint = last_checkpoint() or "none yet"
        raise LostWorkerError(
            f"lost {lost_task(text)} ({first}); the other workers stopped. The last complete "
            f"checkpoint is {checkpoint}: start every worker again with the same command to "
            "resume from it"
        ) from None
