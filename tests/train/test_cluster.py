"""--cluster's resolvers from their environments, their errors, and the lost-worker error."""

from __future__ import annotations

import json

import pytest
import tensorflow as tf

from t2t_lite.runtime import cluster

ENVIRONMENTS = ("TF_CONFIG", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS",
                "SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE", "JOB_COMPLETION_INDEX",
                "CUDA_VISIBLE_DEVICES")  # fmt: skip


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for name in ENVIRONMENTS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")  # no nvidia-smi: CPU nodes


def _slurm(monkeypatch, rank: int, nodes: str, per_node: str, tasks: int) -> None:
    monkeypatch.setenv("SLURM_PROCID", str(rank))
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", str(tasks))
    monkeypatch.setenv("SLURM_STEP_NODELIST", nodes)
    monkeypatch.setenv("SLURM_STEP_TASKS_PER_NODE", per_node)


def test_auto_without_a_cluster_is_one_machine():
    assert cluster.resolve("auto") is None


def test_auto_on_one_device_is_the_default_strategy():
    from t2t_lite.runtime.distribute import create_strategy, decode_strategy

    assert len(tf.config.list_logical_devices("CPU")) == 1 and not tf.config.list_logical_devices(
        "GPU"
    )
    # MirroredStrategy over one device replicates nothing and costs every step (docs/training.md).
    assert create_strategy("auto") is tf.distribute.get_strategy()
    assert decode_strategy("auto") is None
    mirrored = create_strategy("mirrored")  # asked for by name, it is still made
    assert isinstance(mirrored, tf.distribute.MirroredStrategy)
    assert mirrored.num_replicas_in_sync == 1


def test_slurm_job_step_resolves_every_task_with_its_port(monkeypatch):
    _slurm(monkeypatch, rank=3, nodes="node[1-2]", per_node="2(x2)", tasks=4)
    resolver = cluster.resolve("auto", port_base=9000)
    spec = resolver.cluster_spec().as_dict()
    assert spec == {"worker": ["node1:9000", "node1:9001", "node2:9000", "node2:9001"]}
    assert (resolver.task_type, resolver.task_id) == ("worker", 3)
    assert cluster.describe(resolver) == "worker 3 of 4 (node2:9001)"


def test_kubernetes_indexed_job_takes_its_index(monkeypatch):
    monkeypatch.setenv("JOB_COMPLETION_INDEX", "1")
    hosts = ["t2t-0.t2t:2222", "t2t-1.t2t:2222", "t2t-2.t2t:2222"]
    resolver = cluster.resolve("auto", worker_hosts=hosts)
    assert resolver.cluster_spec().as_dict() == {"worker": hosts}
    assert (resolver.task_type, resolver.task_id) == ("worker", 1)


def test_tf_config_comes_first(monkeypatch):
    config = {"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 0}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(config))
    monkeypatch.setenv("JOB_COMPLETION_INDEX", "1")
    resolver = cluster.resolve("auto", worker_hosts=["c:3"])
    assert resolver.cluster_spec().as_dict() == {"worker": ["a:1", "b:2"]}


@pytest.mark.parametrize(
    ("kind", "env", "hosts", "message"),
    [
        ("kubernetes", {}, ["a:1"], "JOB_COMPLETION_INDEX is not set"),
        ("kubernetes", {"JOB_COMPLETION_INDEX": "0"}, [], "needs --worker_hosts"),
        ("kubernetes", {"JOB_COMPLETION_INDEX": "2"}, ["a:1", "b:1"], "names 2 workers"),
        ("slurm", {"SLURM_PROCID": "0"}, [], "SLURM_STEP_NODELIST is not set"),
        ("tf_config", {}, [], "TF_CONFIG environment variable is not set"),
        ("tf_config", {"TF_CONFIG": "{"}, [], "TF_CONFIG is not valid JSON"),
        ("yarn", {}, [], "--cluster='yarn' is not one of"),
    ],
)
def test_missing_or_wrong_environment_is_named(monkeypatch, kind, env, hosts, message):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=message):
        cluster.resolve(kind, worker_hosts=hosts)


MESSAGE = (
    "Collective ops is aborted by: recvmsg:Connection reset by peer\n"
    "Additional GRPC error information from remote target /job:worker/replica:0/task:2 while "
    "calling /tensorflow.WorkerService/RecvBuf:"
)


def test_a_lost_peer_becomes_one_error_naming_the_task_and_checkpoint():
    with pytest.raises(cluster.LostWorkerError) as caught:
        with cluster.lost_workers(True, lambda: "/run/checkpoints/ckpt-20"):
            raise tf.errors.UnavailableError(None, None, MESSAGE)
    text = str(caught.value)
    assert text.startswith("lost /job:worker/replica:0/task:2 (Collective ops is aborted by")
    assert "/run/checkpoints/ckpt-20: start every worker again" in text


def test_other_errors_and_one_machine_pass_unchanged():
    with pytest.raises(tf.errors.UnavailableError):
        with cluster.lost_workers(False, lambda: None):
            raise tf.errors.UnavailableError(None, None, MESSAGE)
    with pytest.raises(tf.errors.InvalidArgumentError):
        with cluster.lost_workers(True, lambda: None):
            raise tf.errors.InvalidArgumentError(None, None, "bad shape")
    assert cluster.lost_task("no task here") == "a worker"
